"""Workload API PodGroup protection as a 1.36+ cluster keeps it: a PodGroup a non-terminal pod names is only
marked when deleted, and goes once every such pod is gone, Succeeded or Failed (the podgroup-protection
finalizer: the PodGroupProtection admission plugin puts it on, kube-controller-manager's podgroup-protection
controller takes it off). Over plain HTTP (the client has no PodGroup API)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from devcluster import DevCluster
from devcluster.store import resolve

from .manifests import node, pod
from .storage_api import eventually, found, request

POD_GROUP_PROTECTION = "scheduling.k8s.io/podgroup-protection"
NAMESPACE = "gangs"
VERSIONS = ("v1beta1", "v1alpha3", "v1alpha2")
STORED = "podgroups.scheduling.k8s.io"

Obj = dict[str, Any]


def pod_groups(version: str, name: str = "", namespace: str = NAMESPACE) -> str:
    path = f"/apis/scheduling.k8s.io/{version}/namespaces/{namespace}/podgroups"
    return f"{path}/{name}" if name else path


def pod_group(version: str, name: str = "train", namespace: str = NAMESPACE) -> Obj:
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}


def member(name: str, group: str = "train", namespace: str = NAMESPACE, phase: str = "Running") -> Obj:
    """A pod of `group`, bound and in `phase`, as a load holds it."""
    made = pod(name, namespace, nodeName="n0", schedulingGroup={"podGroupName": group})
    return {**made, "status": {"phase": phase}}


async def create(cluster: DevCluster, version: str, name: str = "train", namespace: str = NAMESPACE) -> Obj:
    status, body = await request(cluster, "POST", pod_groups(version, namespace=namespace),
                                 pod_group(version, name, namespace))
    assert status == 201, body
    return body


async def delete(cluster: DevCluster, version: str = "v1beta1", name: str = "train") -> Obj:
    status, body = await request(cluster, "DELETE", pod_groups(version, name))
    assert status == 200, body
    return body


def stored(cluster: DevCluster, name: str = "train", namespace: str = NAMESPACE) -> Obj | None:
    return cluster.store.find(STORED, name, namespace)


def terminating(cluster: DevCluster, name: str = "train", namespace: str = NAMESPACE) -> bool:
    obj = stored(cluster, name, namespace)
    return obj is not None and obj["metadata"].get("deletionTimestamp") is not None


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_created_pod_group_carries_the_protection_finalizer_at_every_version(
        cluster: DevCluster, version: str) -> None:
    made = await create(cluster, version)
    assert made["metadata"]["finalizers"] == [POD_GROUP_PROTECTION]
    for other in VERSIONS:
        status, body = await request(cluster, "GET", pod_groups(other, "train"))
        assert status == 200 and body["metadata"]["finalizers"] == [POD_GROUP_PROTECTION], body


async def test_a_client_finalizer_is_kept_and_the_protection_one_added_once(cluster: DevCluster) -> None:
    obj = pod_group("v1alpha2")
    obj["metadata"]["finalizers"] = ["example.com/keep", POD_GROUP_PROTECTION]
    status, body = await request(cluster, "POST", pod_groups("v1alpha2"), obj)
    assert status == 201 and body["metadata"]["finalizers"] == ["example.com/keep", POD_GROUP_PROTECTION], body
    obj = pod_group("v1beta1", "other")
    obj["metadata"]["finalizers"] = ["example.com/keep"]
    status, body = await request(cluster, "POST", pod_groups("v1beta1"), obj)
    assert status == 201 and body["metadata"]["finalizers"] == ["example.com/keep", POD_GROUP_PROTECTION], body


async def test_a_loaded_pod_group_carries_the_finalizer_as_every_pod_group_a_cluster_holds(
        cluster: DevCluster) -> None:
    loaded = cluster.load_objects([pod_group("v1alpha2", "old"), pod_group("v1beta1", "new")])
    assert [obj["metadata"]["finalizers"] for obj in loaded] == [[POD_GROUP_PROTECTION]] * 2
    # The other PodGroup kinds (scheduler plugins', Volcano's, KAI's) are not the Workload API's: no finalizer.
    other = cluster.store.create({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                  "metadata": {"name": "x", "namespace": NAMESPACE}, "spec": {"minMember": 1}})
    assert "finalizers" not in other["metadata"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_pod_group_a_running_pod_names_stays_marked_until_the_pod_is_gone(
        cluster: DevCluster, version: str) -> None:
    cluster.load_objects([node("n0")])
    await create(cluster, "v1alpha2")
    cluster.load_objects([member("worker-0")])
    answered = await delete(cluster, version)
    assert answered["apiVersion"] == f"scheduling.k8s.io/{version}"
    assert answered["metadata"]["deletionTimestamp"] and answered["metadata"]["finalizers"] == [POD_GROUP_PROTECTION]
    await eventually(lambda: terminating(cluster))
    for other in VERSIONS:  # the controller's passes leave it so, seen through every version
        status, body = await request(cluster, "GET", pod_groups(other, "train"))
        assert status == 200, body
        assert body["metadata"]["deletionTimestamp"] == answered["metadata"]["deletionTimestamp"]
        assert body["metadata"]["finalizers"] == [POD_GROUP_PROTECTION]
    cluster.store.delete("pods", "worker-0", NAMESPACE, grace_period_seconds=0)
    await eventually(lambda: stored(cluster) is None)
    status, _ = await request(cluster, "GET", pod_groups(version, "train"))
    assert status == 404


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
async def test_a_pod_group_goes_once_its_last_pod_is_terminal_though_the_pod_object_stays(
        cluster: DevCluster, phase: str) -> None:
    cluster.load_objects([node("n0")])
    await create(cluster, "v1beta1")
    cluster.load_objects([member("worker-0"), member("worker-1", phase="Pending")])
    await delete(cluster)
    pods = resolve("pods")
    done = found(cluster, "pods", "worker-0", NAMESPACE)
    cluster.store.update_in(pods, "worker-0", NAMESPACE, {**done, "status": {"phase": phase}}, subresource="status")
    await eventually(lambda: terminating(cluster))
    assert terminating(cluster)  # worker-1, Pending, is not terminal: it still holds it
    waiting = found(cluster, "pods", "worker-1", NAMESPACE)
    cluster.store.update_in(pods, "worker-1", NAMESPACE, {**waiting, "status": {"phase": phase}},
                            subresource="status")
    await eventually(lambda: stored(cluster) is None)
    assert cluster.store.find("pods", "worker-0", NAMESPACE) is not None


async def test_a_pod_group_no_pod_names_goes_at_once(cluster: DevCluster) -> None:
    cluster.load_objects([node("n0")])
    await create(cluster, "v1alpha2")
    cluster.load_objects([member("done", phase="Succeeded")])
    await delete(cluster, "v1alpha2")
    await eventually(lambda: stored(cluster) is None)


async def test_pods_of_another_namespace_or_naming_another_pod_group_do_not_hold_it(cluster: DevCluster) -> None:
    cluster.load_objects([node("n0")])
    await create(cluster, "v1beta1")
    await create(cluster, "v1beta1", "eval")
    cluster.load_objects([member("elsewhere", namespace="other"), member("evaluator", group="eval"),
                          {**pod("loner", NAMESPACE, nodeName="n0"), "status": {"phase": "Running"}}])
    await delete(cluster)
    await eventually(lambda: stored(cluster) is None)
    await delete(cluster, name="eval")  # its own pod holds it
    await eventually(lambda: terminating(cluster, "eval"))
    cluster.store.delete("pods", "evaluator", NAMESPACE, grace_period_seconds=0)
    await eventually(lambda: stored(cluster, "eval") is None)


async def test_a_pod_being_deleted_that_still_runs_holds_it_until_it_is_gone(cluster: DevCluster) -> None:
    cluster.load_objects([node("n0")])
    await create(cluster, "v1beta1")
    cluster.load_objects([member("worker-0")])
    await delete(cluster)
    cluster.store.delete("pods", "worker-0", NAMESPACE, grace_period_seconds=1)
    going = found(cluster, "pods", "worker-0", NAMESPACE)
    assert going["metadata"]["deletionTimestamp"] and going["status"]["phase"] == "Running"
    await eventually(lambda: terminating(cluster))
    assert terminating(cluster)
    await eventually(lambda: cluster.store.find("pods", "worker-0", NAMESPACE) is None, seconds=5.0)
    await eventually(lambda: stored(cluster) is None)


async def test_a_watch_sees_the_pod_group_marked_then_deleted(cluster: DevCluster) -> None:
    cluster.load_objects([node("n0")])
    created = await create(cluster, "v1beta1")
    cluster.load_objects([member("worker-0")])
    since = created["metadata"]["resourceVersion"]
    await delete(cluster)
    await eventually(lambda: terminating(cluster))
    cluster.store.delete("pods", "worker-0", NAMESPACE, grace_period_seconds=0)
    await eventually(lambda: stored(cluster) is None)
    events: list[Obj] = []
    async with aiohttp.ClientSession(base_url=cluster.url) as http, http.get(pod_groups("v1alpha2"), params={
            "watch": "1", "resourceVersion": since, "timeoutSeconds": "2"}) as response:
        while len(events) < 2:
            line = await response.content.readline()
            assert line, f"the watch ended after {events}"
            events.append(json.loads(line))
    (marked, deleted) = events
    assert marked["type"] == "MODIFIED" and marked["object"]["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert marked["object"]["metadata"]["deletionTimestamp"]
    assert marked["object"]["metadata"]["finalizers"] == [POD_GROUP_PROTECTION]
    assert deleted["type"] == "DELETED" and "finalizers" not in deleted["object"]["metadata"]
    assert int(deleted["object"]["metadata"]["resourceVersion"]) > int(marked["object"]["metadata"]["resourceVersion"])
