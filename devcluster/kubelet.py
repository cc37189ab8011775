"""A fake kubelet: pods bound to a node start running shortly after, as a node agent would report;
nodes created without conditions are reported Ready.

It listens to the store; when a pod gets a `spec.nodeName` while still Pending and not terminating,
it schedules (after `delay` seconds) a status write: phase Running, the Initialized / Ready /
ContainersReady / PodScheduled conditions, startTime, hostIP (the node's InternalIP if the node
lists one), a podIP, and a ready, running status per container. It never deletes pods: graceful
deletion is the store's business, and every node is served by this one agent (the node object need
not exist).

Runs on the store's event loop; it writes through the store's status subresource, never in place.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from devcluster.errors import ApiError
from devcluster.store import Store, now_rfc3339, resolve
from devcluster.watch import WatchEvent

_PODS = resolve("pods")
_NODES = resolve("nodes")


class FakeKubelet:
    """Marks bound pods Running after `delay` seconds until `stop()`."""

    def __init__(self, store: Store, delay: float = 0.05) -> None:
        self.store = store
        self.delay = delay
        self._ips = itertools.count(1)
        self._unsubscribe: Callable[[], None] | None = None
        self._handles: dict[str, asyncio.TimerHandle] = {}  # pod uid -> its pending start
        self.started = 0

    def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.store.subscribe(self._on_event)
            for pod in self.store.list("pods"):
                self._consider(pod)
            for node in self.store.list("nodes"):
                self._register(node)

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def _on_event(self, event: WatchEvent) -> None:
        if event.key == "pods" and event.type != "DELETED":
            self._consider(event.obj)
        elif event.key == "nodes" and event.type == "ADDED":
            self._register(event.obj)

    def _register(self, node: dict[str, Any]) -> None:
        """A node created without conditions gets Ready=True, as its kubelet would report."""
        status = node.get("status") or {}
        if status.get("conditions"):
            return
        name = str(node["metadata"]["name"])
        asyncio.get_running_loop().call_soon(self._report_ready, name, str(node["metadata"].get("uid")))

    def _report_ready(self, name: str, uid: str) -> None:
        node = self.store.find("nodes", name)
        if node is None or node["metadata"].get("uid") != uid or (node.get("status") or {}).get("conditions"):
            return
        stamp = now_rfc3339(self.store.clock)
        status = dict(node.get("status") or {})
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                 "message": "devcluster fake kubelet is posting ready status",
                                 "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]
        status.setdefault("nodeInfo", {"kubeletVersion": "v1.32.0-devcluster", "containerRuntimeVersion": "fake://1",
                                       "osImage": "devcluster", "kernelVersion": "0", "operatingSystem": "linux",
                                       "architecture": "amd64"})
        try:
            self.store.update_in(_NODES, name, "", {**node, "status": status}, subresource="status")
        except ApiError:
            return

    def _consider(self, pod: dict[str, Any]) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        if not spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("phase", "Pending") != "Pending":
            return
        uid = str(meta.get("uid"))
        if uid in self._handles:
            return
        loop = asyncio.get_running_loop()
        self._handles[uid] = loop.call_later(self.delay, self._run, str(meta.get("namespace", "")),
                                             str(meta["name"]), uid)

    def _run(self, namespace: str, name: str, uid: str) -> None:
        self._handles.pop(uid, None)
        pod = self.store.find("pods", name, namespace)
        if pod is None or pod["metadata"].get("uid") != uid or pod["metadata"].get("deletionTimestamp"):
            return
        spec = pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase", "Pending") != "Pending" or not spec.get("nodeName"):
            return
        number = next(self._ips)
        status = running_status(pod, self._host_ip(str(spec["nodeName"])),
                                f"10.{(number >> 16) & 255}.{(number >> 8) & 255}.{number & 255}",
                                now_rfc3339(self.store.clock))
        try:
            self.store.update_in(_PODS, name, namespace, {**pod, "status": status}, subresource="status")
            self.started += 1
        except ApiError:
            return

    def _host_ip(self, node_name: str) -> str:
        node = self.store.find("nodes", node_name)
        for address in (node or {}).get("status", {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address.get("address", ""))
        return "192.168.0.1"


def running_status(pod: dict[str, Any], host_ip: str, pod_ip: str, stamp: str) -> dict[str, Any]:
    """The status a kubelet reports once the pod's containers run (a new dict; `pod` is untouched)."""
    spec, status = pod.get("spec") or {}, dict(pod.get("status") or {})
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        conditions[kind] = {**conditions.get(kind, {}), "type": kind, "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": conditions.get(kind, {}).get("lastTransitionTime") or stamp}
    status.update(
        phase="Running",
        conditions=list(conditions.values()),
        startTime=stamp,
        hostIP=host_ip,
        hostIPs=[{"ip": host_ip}],
        podIP=pod_ip,
        podIPs=[{"ip": pod_ip}],
        containerStatuses=[
            {"name": c.get("name", ""), "image": c.get("image", ""), "imageID": "", "ready": True,
             "started": True, "restartCount": 0, "state": {"running": {"startedAt": stamp}}}
            for c in spec.get("containers") or []
        ],
    )
    return status
