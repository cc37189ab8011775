"""A fake kubelet: pods bound to a node start running shortly after, as a node agent would report, unless its
admission rejects them; nodes created without conditions are reported Ready.

It listens to the store; when a pod gets a `spec.nodeName` while still Pending and not terminating, it admits
or rejects it at once, first come first served (as a kubelet handles pod additions in order), and after
`delay` seconds writes the outcome. An admitted pod gets phase Running, the Initialized / Ready /
ContainersReady / PodScheduled conditions, startTime, hostIP (the node's InternalIP if the node lists one), a
podIP, and a ready, running status per container. It never deletes pods: graceful deletion is the store's
business, and every node is served by this one agent (the node object need not exist).

Admission is the NodePorts check only (of those the kubelet's lifecycle predicate admit handler runs): a pod
is rejected if one of its host ports conflicts with a port held on its node. Its host ports are its
containers' `ports` with a `hostPort` (not the init containers': kube-scheduler's NodePorts reads
`spec.containers` only), each (hostIP or 0.0.0.0, protocol or TCP, hostPort); the API server's defaulting
already gave a host-network pod's ports their hostPort. Two conflict when protocol and port are equal and
either IP is 0.0.0.0 or both IPs are the same (HostPortInfo.CheckConflict). Ports are held by the pods this
kubelet admitted on the node and by those it finds already running there (loaded Running, say), until they
are terminal (Succeeded / Failed) or gone: a terminating pod keeps its ports until it is removed. A rejected
pod gets phase Failed, reason `NodePorts` and message `Pod was rejected: Predicate NodePorts failed: node(s)
didn't have free ports for the requested pod ports` (the kubelet's rejectPod; the predicate's description is in
the message since 1.31), and a startTime if it had none (as the kubelet's status manager sets one); the rest
of its status, its conditions included, is kept. Nothing else is admitted or refused: no resource check
(cpu, memory, pods, extended resources: a node is never OutOf<resource>), no node affinity / selector, node
name, NoExecute taint or OS check, no eviction or resource-manager handlers. `started` and `rejected` count
the outcomes written.

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
_TERMINAL = ("Succeeded", "Failed")
ALL_IPS = "0.0.0.0"  # kube's DefaultBindAllHostIP: a port without hostIP holds every address of the node
NODE_PORTS = "NodePorts"
NODE_PORTS_MESSAGE = ("Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the "
                      "requested pod ports")

HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort)


def host_ports(pod: dict[str, Any]) -> tuple[HostPort, ...]:
    """The host ports a pod holds on its node, as kube-scheduler's NodePorts reads them: every port of
    `spec.containers` (not the init containers) with hostPort > 0, hostIP defaulting to 0.0.0.0 and
    protocol to TCP."""
    found: list[HostPort] = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        if not isinstance(container, dict):
            continue
        for port in container.get("ports") or []:
            number = port.get("hostPort") if isinstance(port, dict) else None
            if isinstance(number, int) and not isinstance(number, bool) and number > 0:
                found.append((str(port.get("hostIP") or ALL_IPS), str(port.get("protocol") or "TCP"), number))
    return tuple(found)


class HostPortIndex:
    """The host ports held on each node: node -> (protocol, port) -> host IP -> how many pods hold it."""

    def __init__(self) -> None:
        self._nodes: dict[str, dict[tuple[str, int], dict[str, int]]] = {}

    def conflicts(self, node: str, ports: tuple[HostPort, ...]) -> bool:
        """Whether one of `ports` conflicts with a port held on `node` (HostPortInfo.CheckConflict: same
        protocol and port, and 0.0.0.0 on either side or the same IP)."""
        held = self._nodes.get(node)
        if not held:
            return False
        for ip, protocol, number in ports:
            ips = held.get((protocol, number))
            if ips and (ip == ALL_IPS or ALL_IPS in ips or ip in ips):
                return True
        return False

    def add(self, node: str, ports: tuple[HostPort, ...]) -> None:
        held = self._nodes.setdefault(node, {})
        for ip, protocol, number in ports:
            ips = held.setdefault((protocol, number), {})
            ips[ip] = ips.get(ip, 0) + 1

    def remove(self, node: str, ports: tuple[HostPort, ...]) -> None:
        held = self._nodes.get(node, {})
        for ip, protocol, number in ports:
            ips = held.get((protocol, number), {})
            left = ips.get(ip, 0) - 1
            if left > 0:
                ips[ip] = left
            else:
                ips.pop(ip, None)
                if not ips:
                    held.pop((protocol, number), None)
        if not held:
            self._nodes.pop(node, None)

    def clear(self) -> None:
        self._nodes.clear()


class FakeKubelet:
    """Admits bound pods (host ports only) and marks them Running, or rejects them Failed, after `delay`
    seconds, until `stop()`."""

    def __init__(self, store: Store, delay: float = 0.05) -> None:
        self.store = store
        self.delay = delay
        self._ips = itertools.count(1)
        self._unsubscribe: Callable[[], None] | None = None
        self._handles: dict[str, asyncio.TimerHandle] = {}  # pod uid -> its pending start or rejection
        self._holding: dict[str, tuple[str, tuple[HostPort, ...]]] = {}  # pod uid -> (node, host ports held)
        self._ports = HostPortIndex()
        self.started = 0
        self.rejected = 0

    def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.store.subscribe(self._on_event)
            # What already runs holds its ports first; then the pending pods in creation order, as a
            # (re)starting kubelet admits its pods.
            for pod in sorted(self.store.list("pods"), key=_admission_order):
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
        self._holding.clear()
        self._ports.clear()

    def _on_event(self, event: WatchEvent) -> None:
        if event.key == "pods":
            if event.type == "DELETED":
                self._release(str(event.obj["metadata"].get("uid")))
            else:
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
        uid = str(meta.get("uid"))
        phase = status.get("phase", "Pending")
        if phase in _TERMINAL:
            self._release(uid)
            return
        node = spec.get("nodeName")
        if not node or uid in self._handles or uid in self._holding:
            return
        if phase != "Pending":  # already running there (not through this kubelet): it holds its ports
            ports = host_ports(pod)
            if ports:
                self._hold(uid, str(node), ports)
            return
        if meta.get("deletionTimestamp"):
            return
        ports = host_ports(pod)
        outcome = self._run
        if ports:
            if self._ports.conflicts(str(node), ports):
                outcome = self._reject
            else:
                self._hold(uid, str(node), ports)
        loop = asyncio.get_running_loop()
        self._handles[uid] = loop.call_later(self.delay, outcome, str(meta.get("namespace", "")),
                                             str(meta["name"]), uid)

    def _hold(self, uid: str, node: str, ports: tuple[HostPort, ...]) -> None:
        self._holding[uid] = (node, ports)
        self._ports.add(node, ports)

    def _release(self, uid: str) -> None:
        held = self._holding.pop(uid, None)
        if held is not None:
            self._ports.remove(*held)

    def _pending(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        """The pod still to start or reject: the same one, bound, Pending and not being deleted."""
        self._handles.pop(uid, None)
        pod = self.store.find("pods", name, namespace)
        if pod is None or pod["metadata"].get("uid") != uid or pod["metadata"].get("deletionTimestamp"):
            return None
        spec = pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase", "Pending") != "Pending" or not spec.get("nodeName"):
            return None
        return pod

    def _run(self, namespace: str, name: str, uid: str) -> None:
        pod = self._pending(namespace, name, uid)
        if pod is None:
            return
        number = next(self._ips)
        status = running_status(pod, self._host_ip(str(pod["spec"]["nodeName"])),
                                f"10.{(number >> 16) & 255}.{(number >> 8) & 255}.{number & 255}",
                                now_rfc3339(self.store.clock))
        try:
            self.store.update_in(_PODS, name, namespace, {**pod, "status": status}, subresource="status")
            self.started += 1
        except ApiError:
            return

    def _reject(self, namespace: str, name: str, uid: str) -> None:
        pod = self._pending(namespace, name, uid)
        if pod is None:
            return
        status = rejected_status(pod, NODE_PORTS, NODE_PORTS_MESSAGE, now_rfc3339(self.store.clock))
        try:
            self.store.update_in(_PODS, name, namespace, {**pod, "status": status}, subresource="status")
            self.rejected += 1
        except ApiError:
            return

    def _host_ip(self, node_name: str) -> str:
        node = self.store.find("nodes", node_name)
        for address in (node or {}).get("status", {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address.get("address", ""))
        return "192.168.0.1"


def _admission_order(pod: dict[str, Any]) -> tuple[bool, str]:
    """Pods already past Pending first, then by creation time (a kubelet sorts the pods it adds so)."""
    return ((pod.get("status") or {}).get("phase", "Pending") == "Pending",
            str(pod["metadata"].get("creationTimestamp") or ""))


def rejected_status(pod: dict[str, Any], reason: str, message: str, stamp: str) -> dict[str, Any]:
    """The status the kubelet's rejectPod writes (a new dict; `pod` is untouched): phase Failed with the reason
    and message, a startTime if the pod had none (the status manager sets it), the rest kept."""
    status = dict(pod.get("status") or {})
    status.update(phase="Failed", reason=reason, message=message)
    if not status.get("startTime"):
        status["startTime"] = stamp
    return status


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
