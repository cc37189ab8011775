"""A fake kubelet: pods bound to a node start running shortly after, as a node agent would report, unless its
admission rejects them; nodes created without conditions are reported Ready.

It listens to the store; when a pod gets a `spec.nodeName` while still Pending and not terminating, it admits
or rejects it at once, first come first served (as a kubelet handles pod additions in order), and after
`delay` seconds writes the outcome. An admitted pod gets phase Running, the Initialized / Ready /
ContainersReady / PodScheduled conditions, startTime, hostIP (the node's InternalIP if the node lists one), a
podIP, a ready, running status per container and sidecar (with its resources, below) and a completed one
per other init container, and the pod's generation as `observedGeneration`. It never deletes pods: graceful
deletion is the store's business, and every node is served by this one agent (the node object need not exist).

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
rejected, even if the node is over-committed by it: it only counts. A pod counts for what the kubelet
allocated to it (below), computed by the same rules as at admission with each container's allocated requests,
or its actual ones while they are larger (a resize down not actuated yet): the kubelet's admission reads its
pods' specs as allocated and their statuses' actual resources. A node's allocatable is parsed once per version.

Resize (KEP-1287, InPlacePodVerticalScaling, on by default since 1.33; 1.34's kubelet). The kubelet allocates
a pod's containers and sidecars (restartPolicy Always) their spec's requests and limits when it admits it; a
running pod reports them per container: `allocatedResources` (the allocated requests, extended resources too)
and `resources` (the requests and limits actually applied), in `containerStatuses` and, for sidecars,
`initContainerStatuses`. A pod found running takes its allocation from those fields if it reports them (its
checkpoint), else from its spec. When a held pod's spec (written through the pods/resize subresource,
devcluster/resize.py) differs from its allocation, the kubelet decides at once, as its allocation manager's
handlePodResourcesResize / canResizePod:
- Infeasible, if the pod's requests (its spec's, overhead included) exceed the node's allocatable memory, else
  cpu: condition PodResizePending True, reason `Infeasible`, message `Node didn't have enough capacity: <memory
  or cpu>, requested: <n>, capacity: <n>`; looked at again only when the spec changes again;
- Deferred, if the pod, counted at the largest of its desired, allocated and actual requests, does not fit
  beside the node's other pods (admission's resource check, without rejectPod's prefix): PodResizePending,
  reason `Deferred`, message `Node didn't have enough resource: <resource>, requested: <n>, used: <n>,
  capacity: <n>`; retried whenever a pod on the node is terminal or gone, a resize on it is actuated, or the
  node object changes (standing in for the kubelet's periodic retry), in 1.34's order: resizes that increase no
  request first, then the higher priority, Guaranteed before the others, the longest deferred first;
- else allocated at once (a resize down is, unless pods found running over-commit the node): its
  `allocatedResources` the new requests, PodResizePending gone, PodResizeInProgress True, and it counts for
  the new requests where they are larger; `resize_delay` seconds later the runtime has applied it: `resources`
  the new requests and limits, PodResizeInProgress gone, the pod counts for the new requests alone, and the
  node's deferred resizes are retried.
The conditions carry the pod's generation they were decided for (`observedGeneration`), the pending one keeps
its lastTransitionTime while its reason stays. A resize is atomic (all its containers or none). A node whose
object does not exist is not checked (as at admission); host ports are not (a resize cannot change them).
Not modelled: container restarts for a RestartContainer resizePolicy (restartCount stays 0), the memory-usage
check before a memory limit decrease, the static CPU / memory manager policies, swap, pod-level resources (the
API server refuses their resize) and Events (ResizeStarted, ResizeDeferred, ...).

A rejected pod gets phase Failed, the reason and message (the kubelet's rejectPod prefixes "Pod was rejected:
"), a startTime if it had none (as the kubelet's status manager sets one) and its generation as
`observedGeneration`; the rest of its status, its conditions included, is kept. Nothing else is admitted or
refused: no supplementalGroupsPolicy check, no eviction or resource-manager (device plugin, CPU / memory /
topology manager) handlers. `started` and `rejected` count the outcomes written, `resized` the resizes actuated.

Runs on the store's event loop; it writes through the store's status subresource, never in place, and never
writes a pod's spec. Its resize status is written soon after a decision, outside the store's event delivery.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from devcluster.admission import node_affinity_rejection, os_rejection, taint_rejection
from devcluster.errors import ApiError
from devcluster.resize import GUARANTEED, qos_class, sidecar
from devcluster.store import Store, now_rfc3339, resolve
from devcluster.watch import WatchEvent
from manifests.defaulting import UndecodableQuantity, default_pod_spec, pod_level_resource
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
# InsufficientResourceError.Error() (pkg/kubelet/lifecycle/predicate.go), and with rejectPod's "Pod was rejected: ".
INSUFFICIENT_MESSAGE = "Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}"
RESOURCE_MESSAGE = "Pod was rejected: " + INSUFFICIENT_MESSAGE
# In-place resize: the pod conditions and reasons of k8s.io/api core/v1, canResizePod's message (allocation manager).
RESIZE_PENDING, RESIZE_IN_PROGRESS = "PodResizePending", "PodResizeInProgress"
INFEASIBLE, DEFERRED = "Infeasible", "Deferred"
CAPACITY_MESSAGE = "Node didn't have enough capacity: {}, requested: {}, capacity: {}"

Requests = dict[str, int]  # resource -> amount as the kubelet counts it: cpu in millicores, the rest in units
Allocation = dict[str, dict[str, Any]]  # container -> its allocated `requests` and `limits` (as the spec writes them)
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


def _take_away(used: Requests, requests: Requests) -> None:
    """`used` less `requests`, keeping no resource at zero or below."""
    for name, amount in requests.items():
        left = used.get(name, 0) - amount
        if left > 0:
            used[name] = left
        else:
            used.pop(name, None)


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
        _take_away(used, requests)

    def change(self, node: str, old: Requests, new: Requests) -> None:
        """A held pod's requests went from `old` to `new` (a resize allocated or actuated); its `pods` slot stays."""
        used = self._nodes.get(node)
        if used is None:
            return
        _take_away(used, old)
        for name, amount in new.items():
            used[name] = used.get(name, 0) + amount

    def clear(self) -> None:
        self._nodes.clear()


def requirements(resources: Any) -> dict[str, Any]:
    """A container's requests and limits as the kubelet allocates them: the non-empty lists only (claims are not
    resized, and an absent and an empty list are the same). The spec's own dict when it is already that."""
    if not isinstance(resources, dict):
        return {}
    requests, limits = resources.get("requests"), resources.get("limits")
    if len(resources) == (requests is not None) + (limits is not None) and requests != {} and limits != {}:
        return resources
    return {key: resources[key] for key in ("requests", "limits") if resources.get(key)}


def allocation(spec: dict[str, Any]) -> Allocation:
    """The requirements of the containers a kubelet allocates and resizes (allocationFromPod): every container
    and every sidecar; a non-restartable init container runs on its spec."""
    found: Allocation = {}
    for container in spec.get("containers") or []:
        if isinstance(container, dict):
            found[str(container.get("name", ""))] = requirements(container.get("resources"))
    for container in spec.get("initContainers") or []:
        if sidecar(container):
            found[str(container.get("name", ""))] = requirements(container.get("resources"))
    return found


def _value(raw: Any) -> Fraction:
    try:
        return value_of(raw)
    except (QuantityError, TypeError):  # never stored (the API server decodes every quantity): counted as 0
        return Fraction(0)


def _values(listed: Any) -> dict[str, Fraction]:
    return {name: _value(raw) for name, raw in listed.items()} if isinstance(listed, dict) else {}


def same_allocation(one: Allocation, other: Allocation) -> bool:
    """Whether two allocations are the same, quantities compared by value (as apiequality.Semantic compares
    them: "1" and "1000m" are one cpu; a status may write them otherwise than the spec)."""
    if one == other:
        return True
    if one.keys() != other.keys():
        return False
    return all(_values(one[name].get(key)) == _values(other[name].get(key))
               for name in one for key in ("requests", "limits"))


def _largest(lists: list[Any]) -> dict[str, Any]:
    """Per resource, the largest quantity any of `lists` gives it."""
    merged: dict[str, Any] = {}
    best: dict[str, Fraction] = {}
    for listed in lists:
        if not isinstance(listed, dict):
            continue
        for name, raw in listed.items():
            value = _value(raw)
            if name not in best or value > best[name]:
                best[name], merged[name] = value, raw
    return merged


def requests_at(pod: dict[str, Any], *allocations: Allocation) -> Requests:
    """`pod_requests` of `pod` with each allocated container's requests the largest its `allocations` give: how
    the kubelet counts a held pod (its allocated requests, or its actual ones while a resize down is not yet
    actuated: its admission reads the pod's spec as allocated and its status's actual resources, whichever is
    larger) and a resizing pod's own figure (the desired requests too). Every other part of the pod (its
    non-restartable init containers, pod-level requests, overhead) goes through the same rules as admission."""
    spec = pod.get("spec") or {}

    def allocated(container: Any) -> Any:
        name = container.get("name") if isinstance(container, dict) else None
        lists = [found[name].get("requests") for found in allocations if name in found]
        if not lists:
            return container
        return {**container, "resources": {"requests": _largest(lists)}}

    view = {**spec, "containers": [allocated(c) for c in spec.get("containers") or []]}
    if spec.get("initContainers"):
        view["initContainers"] = [allocated(c) if sidecar(c) else c for c in spec["initContainers"]]
    return pod_requests({"spec": view})


def _without(used: Requests, requests: Requests) -> Requests:
    """What the node's other pods use: `used` less one pod holding `requests` (a new dict)."""
    rest = dict(used)
    _take_away(rest, {PODS: 1, **requests})
    return rest


@dataclass(slots=True)
class _Pending:
    """A resize the kubelet could not allocate: its PodResizePending condition."""

    reason: str  # Infeasible or Deferred
    message: str
    since: str  # lastTransitionTime: when this reason was first given
    probed: str  # lastProbeTime: when this reason and message were last written
    generation: int  # the pod's metadata.generation the kubelet last tried
    order: int  # the kubelet's sequence when it was deferred (retries: the oldest first)


@dataclass(slots=True)
class _InProgress:
    """An allocated resize not yet actuated: its PodResizeInProgress condition."""

    since: str
    generation: int


@dataclass(slots=True)
class _Held:
    """What an admitted (or found running) pod holds on its node until it is terminal or gone, and what the
    kubelet allocated to it."""

    node: str
    ports: tuple[HostPort, ...]
    requests: Requests  # what it counts for on the node (`requests_at` its allocated and actual resources)
    namespace: str
    name: str
    spec: dict[str, Any]  # the pod's spec as admitted or found: what was allocated (the pod itself not kept)
    allocated: Allocation | None = None  # None: the admitted spec's, never changed
    actuated: Allocation | None = None  # None: the allocation
    pending: _Pending | None = None
    in_progress: _InProgress | None = None
    actuation: asyncio.TimerHandle | None = None


class FakeKubelet:
    """Admits bound pods (OS, resources, node affinity, host ports, NoExecute taints) and marks them Running, or
    rejects them Failed, after `delay` seconds, and allocates and actuates the resizes of the pods it holds
    (actuated `resize_delay` seconds after it allocates them), until `stop()`."""

    def __init__(self, store: Store, delay: float = 0.05, resize_delay: float = 0.05) -> None:
        self.store = store
        self.delay = delay
        self.resize_delay = resize_delay
        self._ips = itertools.count(1)
        self._unsubscribe: Callable[[], None] | None = None
        self._handles: dict[str, asyncio.TimerHandle] = {}  # pod uid -> its pending start or rejection
        self._holding: dict[str, _Held] = {}  # pod uid -> what it holds and was allocated, while it holds them
        self._ports = HostPortIndex()
        self._requested = RequestIndex()
        self._allocatable: dict[str, tuple[str, Requests]] = {}  # node name -> (resourceVersion, allocatable)
        self._deferred: dict[str, dict[str, None]] = {}  # node -> the uids of its Deferred resizes
        self._dirty: dict[str, None] = {}  # uids whose resize status is to be written
        self._flushing = False
        self._order = itertools.count()
        self._found: list[str] | None = None  # while starting: the pods found running, their resizes looked at last
        self.started = 0
        self.rejected = 0
        self.resized = 0  # resizes actuated

    def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.store.subscribe(self._on_event)
            # What already runs holds its ports and requests first; then the pending pods in creation order, as a
            # (re)starting kubelet admits its pods; then the resizes of what runs, as it handles pending resizes
            # once every pod is added.
            self._found = []
            for pod in sorted(self.store.list("pods"), key=_admission_order):
                self._consider(pod)
            found, self._found = self._found, None
            for uid in found:
                held = self._holding.get(uid)
                if held is not None:
                    self._resume(uid, held)
            for node in self.store.list("nodes"):
                self._register(node)

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        for handle in self._handles.values():
            handle.cancel()
        for held in self._holding.values():
            if held.actuation is not None:
                held.actuation.cancel()
        self._handles.clear()
        self._holding.clear()
        self._ports.clear()
        self._requested.clear()
        self._allocatable.clear()
        self._deferred.clear()
        self._dirty.clear()

    def _on_event(self, event: WatchEvent) -> None:
        if event.key == "pods":
            if event.type == "DELETED":
                self._release(str(event.obj["metadata"].get("uid")))
                return
            self._consider(event.obj)
            # A status write shares the spec it does not touch: only a spec written anew can ask for a resize.
            if event.old is not None and event.obj.get("spec") is not event.old.get("spec"):
                self._resize_requested(event.obj)
        elif event.key == "nodes":
            name = str(event.obj["metadata"].get("name"))
            if event.type == "ADDED":
                self._register(event.obj)
            elif event.type == "DELETED":
                self._allocatable.pop(name, None)
            elif name in self._deferred:  # its allocatable may have grown: standing in for the periodic retry
                self._retry(name)

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
            allocated, actuated = found_allocation(pod)
            requests = pod_requests(pod) if allocated is None else requests_at(pod, allocated, actuated or {})
            held = self._hold(uid, pod, str(node), host_ports(pod), requests)
            held.allocated, held.actuated = allocated, actuated
            if self._found is not None:
                self._found.append(uid)
            else:
                self._resume(uid, held)
            return
        if meta.get("deletionTimestamp"):
            return
        node, ports, requests = str(node), host_ports(pod), pod_requests(pod)
        rejection = self._admit(pod, node, ports, requests)
        loop = asyncio.get_running_loop()
        if rejection is None:
            self._hold(uid, pod, node, ports, requests)
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

    def _hold(self, uid: str, pod: dict[str, Any], node: str, ports: tuple[HostPort, ...],
              requests: Requests) -> _Held:
        meta = pod["metadata"]
        held = _Held(node, ports, requests, str(meta.get("namespace", "")), str(meta["name"]), pod.get("spec") or {})
        self._holding[uid] = held
        if ports:
            self._ports.add(node, ports)
        self._requested.add(node, requests)
        return held

    def _release(self, uid: str) -> None:
        held = self._holding.pop(uid, None)
        if held is None:
            return
        if held.actuation is not None:
            held.actuation.cancel()
        self._undefer(uid, held)
        if held.ports:
            self._ports.remove(held.node, held.ports)
        self._requested.remove(held.node, held.requests)
        self._retry(held.node)  # what it held may let a deferred resize through

    # ----------------------------------------------------------------------- resizes

    @staticmethod
    def _allocated(held: _Held) -> Allocation:
        """What the pod was allocated: the spec it was admitted with until a resize is (not kept: most pods never
        resize, and it is cheap to compute again)."""
        return held.allocated if held.allocated is not None else allocation(held.spec)

    def _actuated(self, held: _Held) -> Allocation:
        return held.actuated if held.actuated is not None else self._allocated(held)

    def _resume(self, uid: str, held: _Held) -> None:
        """A pod found running with its allocation in its status: an allocated resize not actuated yet goes on,
        a desired one not allocated yet is looked at (as a restarted kubelet does from its checkpoints)."""
        if held.allocated is None:  # no allocation reported: it runs as its spec says
            return
        pod = self._current(held, uid)
        if pod is None:
            return
        if held.actuated is not None and not same_allocation(held.actuated, held.allocated):
            held.in_progress = _InProgress(now_rfc3339(self.store.clock), _generation(pod))
            self._schedule_actuation(uid, held)
            self._mark(uid)
        if not same_allocation(allocation(pod.get("spec") or {}), held.allocated):
            self._evaluate(uid, held, pod)

    def _resize_requested(self, pod: dict[str, Any]) -> None:
        """A held pod's spec was written: a resize to look at if it runs (one starting is looked at once it
        does, from `_run`)."""
        uid = str(pod["metadata"].get("uid"))
        held = self._holding.get(uid)
        if held is None or uid in self._handles or (pod.get("status") or {}).get("phase", "Pending") == "Pending":
            return
        self._evaluate(uid, held, pod)

    def _evaluate(self, uid: str, held: _Held, pod: dict[str, Any]) -> None:
        """handlePodResourcesResize: the desired resources (the spec's) against the allocated ones. The same:
        nothing pending. Else allocated at once if the resize fits, its actuation to come; else PodResizePending,
        Infeasible (never retried: a new resize is looked at anew) or Deferred (retried)."""
        desired = allocation(pod.get("spec") or {})
        allocated = self._allocated(held)
        if same_allocation(desired, allocated):
            if held.pending is not None:
                held.pending = None
                self._undefer(uid, held)
                self._mark(uid)
            return
        stamp, generation = now_rfc3339(self.store.clock), _generation(pod)
        refusal = self._resize_refusal(held, pod, desired)
        if refusal is not None:
            self._set_pending(uid, held, *refusal, stamp, generation)
            return
        if held.actuated is None:
            held.actuated = allocated  # what runs until the actuation
        held.allocated = desired
        held.pending = None
        self._undefer(uid, held)
        self._recount(held, pod)
        if not same_allocation(held.actuated, desired):
            held.in_progress = _InProgress(stamp, generation)  # each accepted resize its own condition
            self._schedule_actuation(uid, held)
        else:  # back to what runs before it was actuated: nothing left to do
            held.in_progress = None
            if held.actuation is not None:
                held.actuation.cancel()
                held.actuation = None
        self._mark(uid)

    def _resize_refusal(self, held: _Held, pod: dict[str, Any], desired: Allocation) -> tuple[str, str] | None:
        """(reason, message) of a resize the kubelet cannot allocate now (canResizePod), else None. Infeasible
        if the pod's requests (its spec's, as resource.GetResourceRequest counts them) exceed the node's
        allocatable memory (first) or cpu; Deferred if the pod, counted at the largest of its desired, allocated
        and actual requests, does not fit beside the node's other pods (noderesources.Fits, its message without
        rejectPod's prefix). A node whose object does not exist is not checked (as at admission); nor are the
        host ports, which a resize cannot change."""
        node = self.store.find("nodes", held.node)
        if node is None:
            return None
        allocatable = self._node_allocatable(node)
        wanted = pod_requests(pod)
        for name in (MEMORY, CPU):
            if wanted.get(name, 0) > allocatable.get(name, 0):
                return INFEASIBLE, CAPACITY_MESSAGE.format(name, wanted.get(name, 0), allocatable.get(name, 0))
        own = requests_at(pod, desired, self._allocated(held), self._actuated(held))
        short = insufficient(own, _without(self._requested.used(held.node), held.requests), allocatable)
        if short is not None:
            return DEFERRED, INSUFFICIENT_MESSAGE.format(*short)
        return None

    def _set_pending(self, uid: str, held: _Held, reason: str, message: str, stamp: str, generation: int) -> None:
        """PodResizePending with this reason and message: its transition time and retry order kept while the
        reason stays, its probe time while the message does too (the status manager writes no status for a
        condition whose reason, message and status are unchanged); written only if anything changed."""
        previous = held.pending
        if previous is None or previous.reason != reason:
            held.pending = _Pending(reason, message, stamp, stamp, generation, next(self._order))
        elif previous.message != message or previous.generation != generation:
            probed = stamp if previous.message != message else previous.probed
            held.pending = _Pending(reason, message, previous.since, probed, generation, previous.order)
        else:
            return
        if reason == DEFERRED:
            self._deferred.setdefault(held.node, {})[uid] = None
        else:
            self._undefer(uid, held)
        self._mark(uid)

    def _undefer(self, uid: str, held: _Held) -> None:
        queue = self._deferred.get(held.node)
        if queue is None:
            return
        queue.pop(uid, None)
        if not queue:
            del self._deferred[held.node]

    def _recount(self, held: _Held, pod: dict[str, Any]) -> None:
        """What the pod counts for on its node, after its allocation or its actual resources changed."""
        requests = requests_at(pod, self._allocated(held), self._actuated(held))
        if requests != held.requests:
            self._requested.change(held.node, held.requests, requests)
            held.requests = requests

    def _schedule_actuation(self, uid: str, held: _Held) -> None:
        if held.actuation is not None:
            held.actuation.cancel()
        held.actuation = asyncio.get_running_loop().call_later(self.resize_delay, self._actuate, uid)

    def _actuate(self, uid: str) -> None:
        """The runtime applied the allocated resources: they are the actual ones now, the pod counts for them
        alone (a resize down frees the difference), and the node's deferred resizes are retried."""
        held = self._holding.get(uid)
        if held is None:
            return
        held.actuation = None
        held.actuated = self._allocated(held)
        held.in_progress = None
        self._recount(held, self._current(held, uid) or {"spec": held.spec})
        self.resized += 1
        self._mark(uid)
        self._retry(held.node)

    def _retry(self, node: str) -> None:
        """Every deferred resize of the node looked at again, in the order of sortPendingResizes (1.34): those
        that increase no request first, then by priority (highest first), Guaranteed before the others, and
        the longest deferred first."""
        queue = self._deferred.get(node)
        if not queue:
            return
        waiting: list[tuple[tuple[bool, int, bool, int], str, _Held, dict[str, Any]]] = []
        for uid in list(queue):
            held = self._holding.get(uid)
            pod = self._current(held, uid) if held is not None else None
            if held is None or pod is None or held.pending is None:
                queue.pop(uid, None)
                continue
            spec = pod.get("spec") or {}
            asked, allocated = pod_requests(pod), requests_at(pod, self._allocated(held))
            increasing = any(asked.get(name, 0) > allocated.get(name, 0) for name in (CPU, MEMORY))
            qos = (pod.get("status") or {}).get("qosClass") or qos_class(spec)
            waiting.append(((increasing, -int(spec.get("priority") or 0), qos != GUARANTEED, held.pending.order),
                            uid, held, pod))
        if not queue:
            self._deferred.pop(node, None)
        for _, uid, held, pod in sorted(waiting, key=lambda item: item[0]):
            if self._holding.get(uid) is held:
                self._evaluate(uid, held, pod)

    def _current(self, held: _Held, uid: str) -> dict[str, Any] | None:
        pod = self.store.find("pods", held.name, held.namespace)
        return pod if pod is not None and pod["metadata"].get("uid") == uid else None

    def _mark(self, uid: str) -> None:
        """The pod's resize status is to be written: once, soon, outside the store's event delivery."""
        self._dirty[uid] = None
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flushing = False
        dirty, self._dirty = self._dirty, {}
        for uid in dirty:
            held = self._holding.get(uid)
            pod = self._current(held, uid) if held is not None else None
            if held is None or pod is None or (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                continue
            status = resized_status(pod, self._allocated(held), self._actuated(held), held.pending,
                                    held.in_progress, now_rfc3339(self.store.clock))
            try:
                self.store.update_in(_PODS, held.name, held.namespace, {**pod, "status": status},
                                     subresource="status")
            except ApiError:
                continue

    # ----------------------------------------------------------------------- starts and rejections

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
        held = self._holding.get(uid)
        if pod is None or held is None:
            return
        number = next(self._ips)
        status = running_status(pod, self._host_ip(str(pod["spec"]["nodeName"])),
                                f"10.{(number >> 16) & 255}.{(number >> 8) & 255}.{number & 255}",
                                now_rfc3339(self.store.clock), self._allocated(held))
        try:
            stored = self.store.update_in(_PODS, name, namespace, {**pod, "status": status}, subresource="status")
            self.started += 1
        except ApiError:
            return
        if stored.get("spec") is not held.spec:  # resized while it started
            self._resize_requested(stored)

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


def _generation(pod: dict[str, Any]) -> int:
    return int((pod.get("metadata") or {}).get("generation") or 1)


def found_allocation(pod: dict[str, Any]) -> tuple[Allocation | None, Allocation | None]:
    """What a pod found running says it was allocated and runs with, from its container statuses (the kubelet's
    checkpoints, for one that lost them): (allocated, actual), each container's requests its
    `allocatedResources` and limits its spec's, its actual ones its status `resources`; (None, None) when no
    status reports any, for a pod that runs as its spec says."""
    status = pod.get("status") or {}
    reported = {str(entry.get("name")): entry
                for entry in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]
                if isinstance(entry, dict) and ("allocatedResources" in entry or "resources" in entry)}
    if not reported:
        return None, None
    allocated: Allocation = {}
    actuated: Allocation = {}
    spec = allocation(pod.get("spec") or {})
    for name, wanted in spec.items():
        entry = reported.get(name) or {}
        requests = entry["allocatedResources"] if "allocatedResources" in entry else wanted.get("requests")
        allocated[name] = requirements({"requests": requests, "limits": wanted.get("limits")})
        running = entry.get("resources")
        actuated[name] = requirements(running) if isinstance(running, dict) else allocated[name]
    if same_allocation(allocated, spec) and same_allocation(actuated, spec):
        return None, None
    return allocated, actuated


def _running_container(container: dict[str, Any], stamp: str) -> dict[str, Any]:
    return {"name": container.get("name", ""), "image": container.get("image", ""), "imageID": "", "ready": True,
            "started": True, "restartCount": 0, "state": {"running": {"startedAt": stamp}}}


def _completed_container(container: dict[str, Any], stamp: str) -> dict[str, Any]:
    return {"name": container.get("name", ""), "image": container.get("image", ""), "imageID": "", "ready": False,
            "started": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp, "finishedAt": stamp}}}


def _container_statuses(reported: Any, containers: Any, allocated: Allocation, actuated: Allocation,
                        stamp: str) -> list[dict[str, Any]]:
    """One status per container in spec order, the reported one kept: an allocated container (a container or a
    sidecar) running, with its allocated requests (`allocatedResources`) and its actual requests and limits
    (`resources`); any other (a non-restartable init container) completed."""
    by_name = {entry.get("name"): entry for entry in reported or [] if isinstance(entry, dict)}
    statuses = []
    for container in containers or []:
        if not isinstance(container, dict):
            continue
        name = container.get("name", "")
        entry = by_name.get(name)
        if name not in allocated:
            statuses.append(entry if entry is not None else _completed_container(container, stamp))
            continue
        entry = dict(entry) if entry is not None else _running_container(container, stamp)
        requests = allocated[name].get("requests")
        if requests:
            entry["allocatedResources"] = requests
        else:
            entry.pop("allocatedResources", None)
        entry["resources"] = actuated.get(name, allocated[name])
        statuses.append(entry)
    return statuses


def resized_status(pod: dict[str, Any], allocated: Allocation, actuated: Allocation, pending: _Pending | None,
                   in_progress: _InProgress | None, stamp: str) -> dict[str, Any]:
    """The status the kubelet writes for a running pod's resize (a new dict; `pod` is untouched): its
    containers' and sidecars' allocated and actual resources, the PodResizePending and PodResizeInProgress
    conditions as they stand (after the others, each with the generation it was decided for), and the pod's
    generation as observed."""
    spec, status = pod.get("spec") or {}, dict(pod.get("status") or {})
    status["containerStatuses"] = _container_statuses(status.get("containerStatuses"), spec.get("containers"),
                                                      allocated, actuated, stamp)
    if spec.get("initContainers"):
        status["initContainerStatuses"] = _container_statuses(status.get("initContainerStatuses"),
                                                              spec["initContainers"], allocated, actuated, stamp)
    conditions = [c for c in status.get("conditions") or []
                  if not (isinstance(c, dict) and c.get("type") in (RESIZE_PENDING, RESIZE_IN_PROGRESS))]
    if pending is not None:
        conditions.append({"type": RESIZE_PENDING, "status": "True", "observedGeneration": pending.generation,
                           "lastProbeTime": pending.probed, "lastTransitionTime": pending.since,
                           "reason": pending.reason, "message": pending.message})
    if in_progress is not None:
        conditions.append({"type": RESIZE_IN_PROGRESS, "status": "True", "observedGeneration": in_progress.generation,
                           "lastProbeTime": in_progress.since, "lastTransitionTime": in_progress.since})
    status["conditions"] = conditions
    status["observedGeneration"] = _generation(pod)
    return status


def rejected_status(pod: dict[str, Any], reason: str, message: str, stamp: str) -> dict[str, Any]:
    """The status the kubelet's rejectPod writes (a new dict; `pod` is untouched): phase Failed with the reason
    and message, a startTime if the pod had none (the status manager sets it), the pod's generation as observed,
    the rest kept."""
    status = dict(pod.get("status") or {})
    status.update(phase="Failed", reason=reason, message=message, observedGeneration=_generation(pod))
    if not status.get("startTime"):
        status["startTime"] = stamp
    return status


def running_status(pod: dict[str, Any], host_ip: str, pod_ip: str, stamp: str,
                   allocated: Allocation | None = None) -> dict[str, Any]:
    """The status a kubelet reports once the pod's containers run (a new dict; `pod` is untouched): each
    container and sidecar running with its `allocated` resources (the spec's unless given) as allocated and
    actual ones, each other init container completed, and the pod's generation as observed."""
    spec, status = pod.get("spec") or {}, dict(pod.get("status") or {})
    if allocated is None:  # what the API server stores: canonical quantities, requests defaulted from limits
        try:
            allocated = allocation(default_pod_spec(spec))
        except UndecodableQuantity:  # the API server refuses it: the spec as written
            allocated = allocation(spec)
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
        containerStatuses=_container_statuses(None, spec.get("containers"), allocated, allocated, stamp),
        observedGeneration=_generation(pod),
    )
    if spec.get("initContainers"):
        status["initContainerStatuses"] = _container_statuses(None, spec["initContainers"], allocated, allocated,
                                                              stamp)
    return status
