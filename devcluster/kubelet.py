"""A fake kubelet: pods bound to a node start running shortly after, as a node agent would report, unless its
admission rejects them; nodes created without conditions are reported Ready.

It listens to the store; when a pod gets a `spec.nodeName` while still Pending and not terminating, it admits
or rejects it at once, first come first served (as a kubelet handles pod additions in order), and after
`delay` seconds writes the outcome. An admitted pod gets phase Running, the Initialized / Ready /
ContainersReady / PodScheduled conditions, startTime, hostIP (the node's InternalIP if the node lists one), a
podIP, and a ready, running status per container. It never deletes pods: graceful deletion is the store's
business, and every node is served by this one agent (the node object need not exist).

Admission is what the kubelet's lifecycle predicate admit handler runs, in its order: the OS checks (the pod's
`kubernetes.io/os` label, PodOSSelectorNodeLabelDoesNotMatch, then its `spec.os.name`, PodOSNotSupported), then
kube-scheduler's filters as scheduler.AdmissionCheck runs them (the resources, noderesources Fits; node affinity,
NodeAffinity; node name; host ports, NodePorts), then the node's NoExecute taints (TaintToleration). The first
failure is the one reported; among the resources `pods`, cpu, memory, ephemeral-storage, then the others (by name
here; kube ranges over a Go map). The resources and host ports are counted over the pods this kubelet holds on the
node (below); the OS, node affinity and taint checks read the pod against the node alone (`devcluster.admission`
says how, with their messages). NodeName never fails here: the kubelet admits the pods bound to its own node, and
this agent serves each pod as the node its `spec.nodeName` names. The OS the kubelet runs is the node's
`status.nodeInfo.operatingSystem` (`linux` when absent, as this agent reports it). A pod bound to a node whose
object does not exist is checked for its OS and host ports only.

Resources. A pod takes what the kubelet and kube-scheduler count (resource.PodRequests): its containers' requests
summed; its init containers by the max rule with native sidecars (an init container with restartPolicy Always
adds to the containers' sum; any other init container needs its own requests plus the sidecars declared before
it; the pod takes the larger figure per resource); pod-level requests (`spec.resources.requests` of cpu, memory,
hugepages-*) replace that figure for their resource; plus `spec.overhead`; plus one of the node's `pods`. Each
resource is rounded up to the kubelet's whole unit: millicores for cpu, bytes for memory, ephemeral-storage and
hugepages, a count otherwise. The node offers its `status.allocatable` (`status.capacity` when allocatable is
absent), read when the pod is admitted. A resource the node does not list is 0 (a node listing no `pods` admits
no pod: OutOfpods), except an extended resource (a name with a domain outside kubernetes.io, e.g.
`nvidia.com/gpu`): the kubelet drops a pod's requests of those the node does not list
(removeMissingExtendedResources), so they are not checked; a request of 0 is never checked. If the pod's requests
of a resource exceed what the node offers less what the held pods request, it is rejected with reason
`OutOf<resource>` (`OutOfcpu`, `OutOfpods`, `OutOfnvidia.com/gpu`, ...) and message `Pod was rejected: Node
didn't have enough resource: <resource>, requested: <n>, used: <n>, capacity: <n>` (`pods`: requested 1, used the
pods held). A pod bound to a node whose object does not exist is not checked for resources (this one agent serves
every node name, and a node object need not exist).

Host ports. A pod's host ports are its containers' `ports` with a `hostPort` (not the init containers':
kube-scheduler's NodePorts reads `spec.containers` only), each (hostIP or 0.0.0.0, protocol or TCP,
hostPort); the API server's defaulting already gave a host-network pod's ports their hostPort. Two conflict
when protocol and port are equal and either IP is 0.0.0.0 or both IPs are the same
(HostPortInfo.CheckConflict). A conflict is rejected with reason `NodePorts` and message `Pod was rejected:
Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports` (the predicate's
description is in the message since 1.31).

What is held. The pods this kubelet admitted on the node and those it finds already past Pending there
(loaded Running, say) hold their requests, their `pods` slot and their host ports, until they are terminal
(Succeeded / Failed) or gone: a terminating pod holds them until it is removed. A pod found running is never
rejected, even if the node is over-committed by it: it only counts. A pod's requests are computed once, when
it is admitted or found, and kept while it holds them; a node's allocatable is parsed once per version.

A rejected pod gets phase Failed, the reason and message (the kubelet's rejectPod prefixes "Pod was rejected:
"), and a startTime if it had none (as the kubelet's status manager sets one); the rest of its status, its
conditions included, is kept. Nothing else is admitted or refused: no supplementalGroupsPolicy check, no eviction
or resource-manager (device plugin, CPU / memory / topology manager) handlers, no in-place resize. `started` and
`rejected` count the outcomes written.

Runs on the store's event loop; it writes through the store's status subresource, never in place.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, NamedTuple

from devcluster.admission import node_affinity_rejection, os_rejection, taint_rejection
from devcluster.errors import ApiError
from devcluster.store import Store, now_rfc3339, resolve
from devcluster.watch import WatchEvent
from manifests.defaulting import pod_level_resource
from manifests.quantity import QuantityError, value_of

_PODS = resolve("pods")
_NODES = resolve("nodes")
_TERMINAL = ("Succeeded", "Failed")
ALL_IPS = "0.0.0.0"  # kube's DefaultBindAllHostIP: a port without hostIP holds every address of the node
NODE_PORTS = "NodePorts"
NODE_PORTS_MESSAGE = ("Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the "
                      "requested pod ports")

HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort)

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
OUT_OF = "OutOf"  # the kubelet's InsufficientResourcePrefix: OutOfcpu, OutOfpods, OutOfnvidia.com/gpu, ...
# rejectPod's "Pod was rejected: " and InsufficientResourceError.Error() (pkg/kubelet/lifecycle/predicate.go).
RESOURCE_MESSAGE = "Pod was rejected: Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}"

Requests = dict[str, int]  # resource -> amount as the kubelet counts it: cpu in millicores, the rest in units
_NATIVE_FIRST = (CPU, MEMORY, EPHEMERAL_STORAGE)  # Fits checks pods, then these, then the scalar resources
_SIMPLE: dict[tuple[tuple[Any, Any], ...], Requests] = {}  # one container's requests -> the pod's (shared, read only)
_SIMPLE_LIMIT = 10_000


def extended_resource(name: str) -> bool:
    """IsExtendedResourceName: a name with a domain outside kubernetes.io (`nvidia.com/gpu`), not `requests.*`."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _counted(name: str) -> bool:
    """Whether kube-scheduler's framework.Resource counts this resource: cpu, memory, ephemeral-storage and the
    scalar resources (IsScalarResourceName: extended, hugepages-*, *kubernetes.io/*, attachable-volumes-*)."""
    return (name in _NATIVE_FIRST or extended_resource(name) or name.startswith(("hugepages-", "attachable-volumes-"))
            or "kubernetes.io/" in name)


def _amount(name: str, value: Fraction) -> int:
    """The whole number the kubelet compares: MilliValue() for cpu, Value() for the rest (rounded up)."""
    return math.ceil(value * 1000) if name == CPU else math.ceil(value)


def _add(total: dict[str, Fraction], listed: Any, only: Callable[[str], bool] | None = None) -> None:
    if not isinstance(listed, dict):
        return
    for name, raw in listed.items():
        if only is not None and not only(name):
            continue
        try:
            value = value_of(raw)
        except QuantityError:  # never stored (the API server decodes every quantity); counted as 0
            continue
        total[name] = total.get(name, 0) + value


def _sum_into(total: dict[str, Fraction], other: dict[str, Fraction]) -> None:
    for name, value in other.items():
        total[name] = total.get(name, 0) + value


def _requests_of(owner: Any) -> Any:
    """`resources.requests` of a container or a pod spec (None if there are none)."""
    resources = owner.get("resources") if isinstance(owner, dict) else None
    return resources.get("requests") if isinstance(resources, dict) else None


def pod_requests(pod: dict[str, Any]) -> Requests:
    """What the pod takes of its node, as the kubelet's admission counts it (resource.PodRequests, then
    framework.Resource): the containers' requests summed; the init containers by the max rule with native
    sidecars (an init container with restartPolicy Always runs on beside the containers, so its requests add
    to theirs; any other init container runs alone beside the sidecars declared before it, so it needs its
    own requests plus theirs; the pod takes the larger figure per resource); pod-level requests of cpu, memory
    and hugepages-* replace that figure for their resource; plus spec.overhead. Each resource is then rounded
    up to the kubelet's whole unit (millicores for cpu). Only the resources kube-scheduler counts, with an
    amount above 0, in Fits's order (cpu, memory, ephemeral-storage, then the others by name). The pod's
    `pods` slot is not in it: a node counts its pods. The result may be shared between pods: never mutate it."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    simple = (len(containers) == 1 and not spec.get("initContainers") and not spec.get("overhead")
              and not spec.get("resources"))
    if simple:  # one container: as many shapes as a cluster has pod sizes, each computed once
        asked = _requests_of(containers[0])
        key = tuple(asked.items()) if isinstance(asked, dict) else ()
        try:
            found = _SIMPLE.get(key)
        except TypeError:  # not quantities (never stored): computed, not kept
            simple, found = False, None
        if found is not None:
            return found
    total: dict[str, Fraction] = {}
    for container in containers:
        _add(total, _requests_of(container))
    init_containers = spec.get("initContainers") or []
    if init_containers:
        sidecars: dict[str, Fraction] = {}  # the sidecars started so far
        starting: dict[str, Fraction] = {}  # the most any moment of the pod's start needs
        for container in init_containers:
            alone: dict[str, Fraction] = {}
            _add(alone, _requests_of(container))
            if isinstance(container, dict) and container.get("restartPolicy") == "Always":
                _sum_into(total, alone)
                _sum_into(sidecars, alone)
                alone = sidecars
            else:
                _sum_into(alone, sidecars)
            for name, value in alone.items():
                if value > starting.get(name, 0):
                    starting[name] = value
        for name, value in starting.items():
            if value > total.get(name, 0):
                total[name] = value
    pod_level: dict[str, Fraction] = {}
    _add(pod_level, _requests_of(spec), pod_level_resource)
    total.update(pod_level)
    _add(total, spec.get("overhead"))
    result: Requests = {}
    for name in (*_NATIVE_FIRST, *sorted(total.keys() - set(_NATIVE_FIRST))):
        exact = total.get(name)
        if exact is not None and _counted(name):
            amount = _amount(name, exact)
            if amount > 0:
                result[name] = amount
    if simple and len(_SIMPLE) < _SIMPLE_LIMIT:
        _SIMPLE[key] = result
    return result


def node_allocatable(node: dict[str, Any]) -> Requests:
    """What a node offers to pods, as the kubelet reads its own node: status.allocatable, or status.capacity
    when allocatable is absent (the API server defaults the one to the other); `pods` and the resources
    kube-scheduler counts, in the kubelet's units."""
    status = node.get("status") or {}
    listed = status.get("allocatable")
    if listed is None:
        listed = status.get("capacity")
    parsed: dict[str, Fraction] = {}
    _add(parsed, listed, lambda name: name == PODS or _counted(name))
    return {name: _amount(name, value) for name, value in parsed.items()}


def insufficient(requests: Requests, used: Requests, allocatable: Requests) -> tuple[str, int, int, int] | None:
    """The first resource the pod does not fit in, as noderesources.Fits finds it over what the node's admitted
    pods use: (resource, requested, used, capacity), or None. `pods` first (one slot more than the pods counted
    in `used`), then the pod's requests in their order; an extended resource the node does not list is not
    checked (the kubelet's removeMissingExtendedResources), any other resource it does not list is 0."""
    pods, allowed = used.get(PODS, 0), allocatable.get(PODS, 0)
    if pods + 1 > allowed:
        return PODS, 1, pods, allowed
    for name, amount in requests.items():
        capacity = allocatable.get(name)
        if capacity is None:
            if extended_resource(name):
                continue
            capacity = 0
        in_use = used.get(name, 0)
        if amount > capacity - in_use:
            return name, amount, in_use, capacity
    return None


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


class RequestIndex:
    """What the pods held on each node request: node -> resource -> amount (Requests), `pods` counting them."""

    def __init__(self) -> None:
        self._nodes: dict[str, Requests] = {}

    def used(self, node: str) -> Requests:
        """What the pods held on `node` use (read only)."""
        return self._nodes.get(node) or {}

    def add(self, node: str, requests: Requests) -> None:
        used = self._nodes.setdefault(node, {})
        used[PODS] = used.get(PODS, 0) + 1
        for name, amount in requests.items():
            used[name] = used.get(name, 0) + amount

    def remove(self, node: str, requests: Requests) -> None:
        used = self._nodes.get(node)
        if used is None:
            return
        if used.get(PODS, 0) <= 1:
            del self._nodes[node]
            return
        used[PODS] -= 1
        for name, amount in requests.items():
            left = used.get(name, 0) - amount
            if left > 0:
                used[name] = left
            else:
                used.pop(name, None)

    def clear(self) -> None:
        self._nodes.clear()


class _Held(NamedTuple):
    """What an admitted (or found running) pod holds on its node until it is terminal or gone."""

    node: str
    ports: tuple[HostPort, ...]
    requests: Requests


class FakeKubelet:
    """Admits bound pods (OS, resources, node affinity, host ports, NoExecute taints) and marks them Running, or
    rejects them Failed, after `delay` seconds, until `stop()`."""

    def __init__(self, store: Store, delay: float = 0.05) -> None:
        self.store = store
        self.delay = delay
        self._ips = itertools.count(1)
        self._unsubscribe: Callable[[], None] | None = None
        self._handles: dict[str, asyncio.TimerHandle] = {}  # pod uid -> its pending start or rejection
        self._holding: dict[str, _Held] = {}  # pod uid -> its node, host ports and requests, while it holds them
        self._ports = HostPortIndex()
        self._requested = RequestIndex()
        self._allocatable: dict[str, tuple[str, Requests]] = {}  # node name -> (resourceVersion, allocatable)
        self.started = 0
        self.rejected = 0

    def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.store.subscribe(self._on_event)
            # What already runs holds its ports and requests first; then the pending pods in creation order, as a
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
        self._requested.clear()
        self._allocatable.clear()

    def _on_event(self, event: WatchEvent) -> None:
        if event.key == "pods":
            if event.type == "DELETED":
                self._release(str(event.obj["metadata"].get("uid")))
            else:
                self._consider(event.obj)
        elif event.key == "nodes":
            if event.type == "ADDED":
                self._register(event.obj)
            elif event.type == "DELETED":
                self._allocatable.pop(str(event.obj["metadata"].get("name")), None)

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
        if phase != "Pending":  # already running there (not through this kubelet): it holds what it uses
            self._hold(uid, str(node), host_ports(pod), pod_requests(pod))
            return
        if meta.get("deletionTimestamp"):
            return
        node, ports, requests = str(node), host_ports(pod), pod_requests(pod)
        rejection = self._admit(pod, node, ports, requests)
        loop = asyncio.get_running_loop()
        if rejection is None:
            self._hold(uid, node, ports, requests)
            self._handles[uid] = loop.call_later(self.delay, self._run, str(meta.get("namespace", "")),
                                                 str(meta["name"]), uid)
        else:
            self._handles[uid] = loop.call_later(self.delay, self._reject, str(meta.get("namespace", "")),
                                                 str(meta["name"]), uid, *rejection)

    def _admit(self, pod: dict[str, Any], node: str, ports: tuple[HostPort, ...],
               requests: Requests) -> tuple[str, str] | None:
        """(reason, message) if the kubelet rejects the pod, else None. As its predicate admit handler: the OS
        checks, then scheduler.AdmissionCheck's resources (noderesources.Fits), NodeAffinity and host ports, then
        NoExecute taints; the checks that read the node object are skipped when it does not exist. The first
        failure is the one reported."""
        node_obj = self.store.find("nodes", node)
        rejection = os_rejection(pod, node_obj)
        if rejection is not None:
            return rejection
        if node_obj is not None:
            short = insufficient(requests, self._requested.used(node), self._node_allocatable(node_obj))
            if short is not None:
                return OUT_OF + short[0], RESOURCE_MESSAGE.format(*short)
            rejection = node_affinity_rejection(pod, node_obj)
            if rejection is not None:
                return rejection
        if ports and self._ports.conflicts(node, ports):
            return NODE_PORTS, NODE_PORTS_MESSAGE
        return None if node_obj is None else taint_rejection(pod, node_obj)

    def _node_allocatable(self, node: dict[str, Any]) -> Requests:
        """The node's allocatable, parsed once per version of the node."""
        meta = node["metadata"]
        name, version = str(meta["name"]), str(meta.get("resourceVersion"))
        cached = self._allocatable.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        allocatable = node_allocatable(node)
        self._allocatable[name] = (version, allocatable)
        return allocatable

    def _hold(self, uid: str, node: str, ports: tuple[HostPort, ...], requests: Requests) -> None:
        self._holding[uid] = _Held(node, ports, requests)
        if ports:
            self._ports.add(node, ports)
        self._requested.add(node, requests)

    def _release(self, uid: str) -> None:
        held = self._holding.pop(uid, None)
        if held is not None:
            if held.ports:
                self._ports.remove(held.node, held.ports)
            self._requested.remove(held.node, held.requests)

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

    def _reject(self, namespace: str, name: str, uid: str, reason: str, message: str) -> None:
        pod = self._pending(namespace, name, uid)
        if pod is None:
            return
        status = rejected_status(pod, reason, message, now_rfc3339(self.store.clock))
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
