"""Storage manifests and HTTP calls shared by the storage tests (claims, volumes, classes over the REST API)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp

from devcluster import DevCluster

Obj = dict[str, Any]
SELECTED_NODE = "volume.kubernetes.io/selected-node"


async def eventually(condition: Callable[[], Any], seconds: float = 5.0) -> Any:
    """Wait until `condition()` is truthy (at most `seconds`); what it then returned."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not (found := condition()):
        assert asyncio.get_running_loop().time() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.01)
    return found


def storage_class(name: str, provisioner: str = "csi.example.com", *, default: bool = False, **fields: Any) -> Obj:
    metadata: Obj = {"name": name}
    if default:
        metadata["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": metadata,
            "provisioner": provisioner, **fields}


def claim(name: str, storage: str = "1Gi", modes: tuple[str, ...] = ("ReadWriteOnce",), **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": storage}}, **spec}}


def volume(name: str, storage: str, class_name: str = "", modes: tuple[str, ...] = ("ReadWriteOnce",),
           labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"capacity": {"storage": storage}, "accessModes": list(modes), "storageClassName": class_name,
                     "hostPath": {"path": f"/mnt/{name}"}, **spec}}


def csi_node(name: str, *drivers: Obj) -> Obj:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": list(drivers)}}


def csi_driver(name: str, count: int | None = None, node_id: str = "i-0123", **fields: Any) -> Obj:
    entry: Obj = {"name": name, "nodeID": node_id, **fields}
    if count is not None:
        entry["allocatable"] = {"count": count}
    return entry


PATHS = {
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "CSINode": "/apis/storage.k8s.io/v1/csinodes",
    "PersistentVolume": "/api/v1/persistentvolumes",
    "PersistentVolumeClaim": "/api/v1/namespaces/default/persistentvolumeclaims",
    "Pod": "/api/v1/namespaces/default/pods",
}


async def request(cluster: DevCluster, method: str, path: str, body: Any = None,
                  content_type: str = "application/json") -> tuple[int, Obj]:
    async with aiohttp.ClientSession(base_url=cluster.url) as http, \
            http.request(method, path, json=body, headers={"Content-Type": content_type}) as response:
        return response.status, await response.json()


async def create(cluster: DevCluster, obj: Obj) -> Obj:
    status, body = await request(cluster, "POST", PATHS[obj["kind"]], obj)
    assert status == 201, body
    return body


async def merge_patch(cluster: DevCluster, kind: str, name: str, patch: Obj) -> tuple[int, Obj]:
    return await request(cluster, "PATCH", f"{PATHS[kind]}/{name}", patch, "application/merge-patch+json")


def found(cluster: DevCluster, resource: str, name: str, namespace: str = "") -> Obj:
    obj = cluster.store.find(resource, name, namespace)
    assert obj is not None, f"{resource}/{name} is absent"
    return obj


def phase(cluster: DevCluster, resource: str, name: str, namespace: str = "") -> str | None:
    obj = cluster.store.find(resource, name, namespace)
    return None if obj is None else (obj.get("status") or {}).get("phase")


def causes(body: Obj) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]
