"""Node taints as kube-controller-manager keeps them: the node lifecycle controller's taints
(TaintNodesByCondition and taint-based eviction) and the taint eviction controller that acts on NoExecute taints.

NodeLifecycleController (pkg/controller/nodelifecycle) writes only its own taints into `spec.taints`, through the
store as an API client would, and only when they change; every other taint (a user's, a cloud provider's) is kept
where it is:
- the NoSchedule taints of `doNoScheduleTaintingPass`, from the node's conditions and spec: Ready False ->
  `node.kubernetes.io/not-ready`, Ready Unknown -> `node.kubernetes.io/unreachable`, MemoryPressure True ->
  `node.kubernetes.io/memory-pressure`, DiskPressure True -> `disk-pressure`, PIDPressure True -> `pid-pressure`,
  NetworkUnavailable True -> `network-unavailable`, `spec.unschedulable` -> `node.kubernetes.io/unschedulable`. A
  NoSchedule taint with one of these keys that no condition calls for is removed (taintKeyToNodeConditionMap:
  the controller owns those keys). A node without a Ready condition gets no condition taint.
- the NoExecute taints of taint-based eviction (`processTaintBaseEviction`, `doNoExecuteTaintingPass`): Ready False
  -> `node.kubernetes.io/not-ready:NoExecute`, Ready Unknown -> `node.kubernetes.io/unreachable:NoExecute`, the two
  mutually exclusive (one swapped for the other at once), both removed once Ready is True (`markNodeAsReachable`);
  a node without a Ready condition is left alone. New NoExecute taints are held back as the controller's zone
  states hold them back (`ComputeZoneState`, `handleDisruption`): nodes are grouped by zone
  (`topology.kubernetes.io/region` and `zone`, the `failure-domain.beta` labels first), not counting those
  labelled `node.kubernetes.io/exclude-disruption`; a zone with no Ready node is FullDisruption, one with more
  than two not-Ready nodes (no Ready condition counts as not Ready) making at least 55 % of it is
  PartialDisruption. When every zone is in FullDisruption (the control plane, not the nodes, is then presumed cut
  off) no node keeps or gets a not-ready / unreachable NoExecute taint; a PartialDisruption zone of at most 50
  nodes gets no new one (its eviction rate is 0; a larger zone's reduced rate is not modelled: it is tainted).
Every taint the controller adds carries `timeAdded` (SwapNodeControllerTaint stamps them all, NoSchedule ones
included) and goes at the end of the list.

Not modelled: heartbeats and leases (a node's conditions are what was written: a node that stops posting status is
never turned Unknown by this controller, nor is one that never posted it after the startup grace period), the
periods and rate limits that pace the NoExecute taints (5 s monitor period, 0.1 node per second per zone: here at
once), marking a not-Ready node's pods NotReady, the beta label reconciliation and the controller's Events. Nor
the API server's TaintNodesAtCreation admission plugin (a real cluster creates every node with
`node.kubernetes.io/not-ready:NoSchedule`, removed here once the node is Ready): devcluster's admission does not
add it, so a node is not tainted before its first status.

TaintEvictionController (pkg/controller/tainteviction) deletes the pods bound to a node with NoExecute taints
(any NoExecute taint, a user's included) that they do not all tolerate: at once if one is not tolerated, else
after the smallest `tolerationSeconds` of the tolerations matching them (each taint's first matching toleration),
counted from when the controller saw the pod under the taints (not from `timeAdded`), never if none of those
tolerations has `tolerationSeconds`; 0 or less is at once. An eviction scheduled is kept, with its start time,
when the taints or tolerations change but the pod still tolerates them for a while; it is cancelled when the
node's NoExecute taints are all gone, when the pod tolerates them for ever, or when the pod is deleted. The
deletion (addConditionAndDeletePod) first writes the pod's status condition DisruptionTarget=True, reason
`DeletionByTaintManager`, message `Taint manager: deleting due to NoExecute taint` (unless the pod has exactly
it), then deletes the pod with its own grace period. A pod once deleted so is not deleted again unless its
eviction is cancelled and scheduled anew. Pods created through devcluster's admission carry the
DefaultTolerationSeconds plugin's tolerations (not-ready and unreachable NoExecute for 300 s), so a NotReady
node's pods go 300 s later unless they say otherwise. Not modelled: the controller's Events
(TaintManagerEviction).

Cheap by construction: the lifecycle controller reads node events only (one node's pass per change, all nodes'
only when a node's readiness, zone or exclusion changes, or a node comes or goes); the eviction controller reads
a pod event only when the pod is bound to a node it knows to carry NoExecute taints (a dictionary lookup
otherwise) or has an eviction scheduled, and lists pods only when a node's NoExecute taints change. Both run on the
store's event loop (evictions scheduled with the loop's timers) and act only through the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, NamedTuple

from devcluster.controller import StoreController
from devcluster.errors import ApiError
from devcluster.store import Store, now_rfc3339, resolve
from devcluster.watch import WatchEvent

Obj = dict[str, Any]
PodKey = tuple[str, str]  # (namespace, name), as the eviction queue keys its work

_NODES = resolve("nodes")
_PODS = resolve("pods")

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
PID_PRESSURE = "node.kubernetes.io/pid-pressure"
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"

# nodeConditionToTaintKeyStatusMap: condition type -> condition status -> taint key (NoSchedule).
CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": NOT_READY, "Unknown": UNREACHABLE},
    "MemoryPressure": {"True": MEMORY_PRESSURE},
    "DiskPressure": {"True": DISK_PRESSURE},
    "NetworkUnavailable": {"True": NETWORK_UNAVAILABLE},
    "PIDPressure": {"True": PID_PRESSURE},
}
# The NoSchedule keys the controller owns (taintKeyToNodeConditionMap, plus the unschedulable taint).
_OWNED_NO_SCHEDULE = frozenset({key for keys in CONDITION_TAINTS.values() for key in keys.values()} | {UNSCHEDULABLE})

EXCLUDE_DISRUPTION = "node.kubernetes.io/exclude-disruption"
_ZONE_LABELS = (("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region"),
                ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone"))
UNHEALTHY_ZONE_THRESHOLD = 0.55  # --unhealthy-zone-threshold
LARGE_CLUSTER_THRESHOLD = 50  # --large-cluster-size-threshold
NORMAL, PARTIAL_DISRUPTION, FULL_DISRUPTION = "Normal", "PartialDisruption", "FullDisruption"

DISRUPTION_TARGET = "DisruptionTarget"
DELETION_BY_TAINT_MANAGER = "DeletionByTaintManager"
TAINT_MANAGER_MESSAGE = "Taint manager: deleting due to NoExecute taint"


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _taints(node: Obj) -> list[Any]:
    return _list(_dict(node.get("spec")).get("taints"))


def _is(taint: Any, key: str, effect: str) -> bool:
    """MatchTaint: the same key and effect (value and timeAdded aside)."""
    return isinstance(taint, dict) and taint.get("key") == key and taint.get("effect") == effect


def ready_status(node: Obj) -> str | None:
    """The status of the node's Ready condition ("True", "False", "Unknown"), None if it has none."""
    for condition in _list(_dict(node.get("status")).get("conditions")):
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None


def condition_taint_keys(node: Obj) -> list[str]:
    """The NoSchedule taint keys `doNoScheduleTaintingPass` wants on the node, in its order (the conditions', then
    the unschedulable taint), each once."""
    keys: list[str] = []
    for condition in _list(_dict(node.get("status")).get("conditions")):
        if not isinstance(condition, dict):
            continue
        key = CONDITION_TAINTS.get(str(condition.get("type")), {}).get(str(condition.get("status")))
        if key is not None and key not in keys:
            keys.append(key)
    if _dict(node.get("spec")).get("unschedulable") is True:
        keys.append(UNSCHEDULABLE)
    return keys


def zone_key(node: Obj) -> tuple[str, str]:
    """GetZoneKey: (region, zone) from the beta failure-domain labels, else the topology ones."""
    labels = _dict(_dict(node.get("metadata")).get("labels"))
    region, zone = (str(labels.get(beta, labels.get(ga, ""))) for beta, ga in _ZONE_LABELS)
    return region, zone


def zone_state(ready: Iterable[bool]) -> str:
    """ComputeZoneState over the zone's nodes (True: its Ready condition is True)."""
    statuses = list(ready)
    not_ready = sum(1 for status in statuses if not status)
    if not_ready == len(statuses) and not_ready > 0:
        return FULL_DISRUPTION
    if not_ready > 2 and not_ready / len(statuses) >= UNHEALTHY_ZONE_THRESHOLD:
        return PARTIAL_DISRUPTION
    return NORMAL


def _health(node: Obj) -> tuple[str | None, tuple[str, str], bool]:
    """What the zone states read of a node: its readiness, zone and exclusion."""
    labels = _dict(_dict(node.get("metadata")).get("labels"))
    return ready_status(node), zone_key(node), EXCLUDE_DISRUPTION in labels


def no_execute_taints(node: Obj | None) -> list[Obj]:
    """getNoExecuteTaints: the node's NoExecute taints, in order."""
    return [] if node is None else [t for t in _taints(node) if isinstance(t, dict) and t.get("effect") == NO_EXECUTE]


def tolerates(toleration: Any, taint: Obj) -> bool:
    """Toleration.ToleratesTaint: an empty effect or key matches any; operator Exists matches any value, Equal (or
    none) the same value; any other operator (Gt / Lt, alpha behind a gate) nothing."""
    if not isinstance(toleration, dict):
        return False
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def matching_tolerations(taints: list[Obj], tolerations: list[Any]) -> list[Obj] | None:
    """GetMatchingTolerations: each taint's first tolerating toleration, None if one taint is not tolerated."""
    used: list[Obj] = []
    for taint in taints:
        found = next((t for t in tolerations if tolerates(t, taint)), None)
        if found is None:
            return None
        used.append(found)
    return used


def min_toleration_seconds(used: list[Obj]) -> float | None:
    """getMinTolerationTime: the smallest tolerationSeconds (0 if one is 0 or less, or if there are no
    tolerations), None if none of them has one (tolerated for ever)."""
    if not used:
        return 0.0
    seconds = [t.get("tolerationSeconds") for t in used]
    given = [int(s) for s in seconds if isinstance(s, int | float) and not isinstance(s, bool)]
    if not given:
        return None
    return float(max(0, min(given)))


def with_taint_manager_condition(pod: Obj, stamp: str) -> Obj | None:
    """The pod's status with DisruptionTarget=True, DeletionByTaintManager, and the pod's generation as its
    observedGeneration, as podutil.UpdatePodCondition sets it
    (in place of a DisruptionTarget condition it had, keeping its transition time if the status is the same);
    None if the pod has that very condition already."""
    status = _dict(pod.get("status"))
    conditions = [c for c in _list(status.get("conditions")) if isinstance(c, dict)]
    wanted: Obj = {"type": DISRUPTION_TARGET, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp,
                   "reason": DELETION_BY_TAINT_MANAGER, "message": TAINT_MANAGER_MESSAGE}
    generation = _dict(pod.get("metadata")).get("generation")
    if generation:  # the pod's generation it was decided for (PodObservedGenerationTracking, 1.34+)
        wanted["observedGeneration"] = generation
    for index, condition in enumerate(conditions):
        if condition.get("type") != DISRUPTION_TARGET:
            continue
        if condition.get("status") == "True" and condition.get("lastTransitionTime"):
            wanted["lastTransitionTime"] = condition["lastTransitionTime"]
        if all(condition.get(field) == wanted[field] for field in wanted):
            return None
        conditions[index] = wanted
        return {**status, "conditions": conditions}
    return {**status, "conditions": [*conditions, wanted]}


def _taint(key: str, effect: str, stamp: str) -> Obj:
    return {"key": key, "effect": effect, "timeAdded": stamp}


class NodeLifecycleController(StoreController):
    """Keeps the node lifecycle controller's taints on every node until `stop()` (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.writes = 0  # node writes made, for tests
        self._dirty: set[str] = set()
        self._all = False  # every node's pass is due: the zone states may have changed
        self._zones: dict[tuple[str, str], tuple[str, int]] = {}  # zone -> (state, counted nodes)
        self._master_disruption = False  # every zone in FullDisruption

    def _started(self) -> None:
        self._all = True
        self._schedule()

    def _stopped(self) -> None:
        self._dirty.clear()
        self._all = False

    def _on_event(self, event: WatchEvent) -> None:
        if event.key != _NODES.key:
            return
        name = str(event.obj["metadata"]["name"])
        if event.type == "DELETED":
            self._dirty.discard(name)
            self._all = True
        elif event.type == "ADDED" or event.old is None or _health(event.old) != _health(event.obj):
            self._all = True
        else:
            self._dirty.add(name)
        self._schedule()

    def _sync(self) -> None:
        if self._all:
            self._all, self._dirty = False, set()
            nodes = self.store.list(_NODES)
            self._zone_states(nodes)
        else:
            names, self._dirty = sorted(self._dirty), set()
            nodes = [node for node in (self.store.find(_NODES, name) for name in names) if node is not None]
        stamp = now_rfc3339(self.store.clock)
        for node in nodes:
            wanted = self._wanted_taints(node, stamp)
            if wanted is None:
                continue
            spec = {k: v for k, v in _dict(node.get("spec")).items() if k != "taints"}
            if wanted:
                spec["taints"] = wanted
            try:
                self.store.update_in(_NODES, str(node["metadata"]["name"]), "", {**node, "spec": spec},
                                     manager="node-lifecycle-controller")
                self.writes += 1
            except ApiError:  # changed or gone meanwhile: its own event brings another pass
                continue

    def _zone_states(self, nodes: list[Obj]) -> None:
        """handleDisruption's zone states over the nodes not excluded from disruption checks."""
        ready_by_zone: dict[tuple[str, str], list[bool]] = {}
        for node in nodes:
            ready, zone, excluded = _health(node)
            if not excluded:
                ready_by_zone.setdefault(zone, []).append(ready == "True")
        self._zones = {zone: (zone_state(ready), len(ready)) for zone, ready in ready_by_zone.items()}
        self._master_disruption = bool(self._zones) and all(state == FULL_DISRUPTION
                                                            for state, _ in self._zones.values())

    def _may_add_no_execute(self, node: Obj) -> bool:
        """Whether the node's zone's NoExecute tainter runs: not in a PartialDisruption zone of at most
        LARGE_CLUSTER_THRESHOLD nodes (ReducedQPSFunc: rate 0), not in the master disruption mode."""
        if self._master_disruption:
            return False
        state, size = self._zones.get(zone_key(node), (NORMAL, 0))
        return not (state == PARTIAL_DISRUPTION and size <= LARGE_CLUSTER_THRESHOLD)

    def _wanted_taints(self, node: Obj, stamp: str) -> list[Any] | None:
        """The node's taints once this controller's are right, None if they are already."""
        taints = _taints(node)
        remove: list[tuple[str, str]] = []
        add: list[tuple[str, str]] = []
        # doNoScheduleTaintingPass
        wanted = condition_taint_keys(node)
        held = [str(t.get("key")) for t in taints if isinstance(t, dict) and t.get("effect") == NO_SCHEDULE
                and t.get("key") in _OWNED_NO_SCHEDULE]
        add += [(key, NO_SCHEDULE) for key in wanted if key not in held]
        remove += [(key, NO_SCHEDULE) for key in held if key not in wanted]
        # processTaintBaseEviction / doNoExecuteTaintingPass / markNodeAsReachable
        has_not_ready = any(_is(t, NOT_READY, NO_EXECUTE) for t in taints)
        has_unreachable = any(_is(t, UNREACHABLE, NO_EXECUTE) for t in taints)
        ready = ready_status(node)
        if ready == "True" or self._master_disruption:
            remove += [(NOT_READY, NO_EXECUTE), (UNREACHABLE, NO_EXECUTE)]
        elif ready in ("False", "Unknown"):
            key, opposite = (NOT_READY, UNREACHABLE) if ready == "False" else (UNREACHABLE, NOT_READY)
            has_key, has_opposite = (has_not_ready, has_unreachable) if ready == "False" else \
                (has_unreachable, has_not_ready)
            if has_opposite or (not has_key and self._may_add_no_execute(node)):
                remove.append((opposite, NO_EXECUTE))
                if not has_key:
                    add.append((key, NO_EXECUTE))
        kept = [t for t in taints if not any(_is(t, key, effect) for key, effect in remove)]
        result = kept + [_taint(key, effect, stamp) for key, effect in add]
        return None if result == taints else result


class _Work(NamedTuple):
    """A scheduled eviction (TimedWorker): when it was created and when it fires, in loop time."""

    created: float
    fire_at: float
    timer: asyncio.TimerHandle


class TaintEvictionController(StoreController):
    """Deletes the pods that do not tolerate their node's NoExecute taints until `stop()` (see the module
    docstring)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.evicted = 0  # pods deleted (addConditionAndDeletePod done), for tests
        self._tainted: dict[str, list[Obj]] = {}  # node -> its NoExecute taints (taintedNodes)
        self._work: dict[PodKey, _Work | None] = {}  # scheduled evictions; None: done, kept until cancelled
        self._dirty_nodes: set[str] = set()
        self._dirty_pods: dict[PodKey, str] = {}  # pod -> the node it was on at the event

    @property
    def pending(self) -> dict[PodKey, float]:
        """The evictions scheduled and not yet done: pod -> loop time it fires at."""
        return {key: work.fire_at for key, work in self._work.items() if work is not None}

    def _started(self) -> None:
        for node in self.store.list(_NODES):
            if no_execute_taints(node):
                self._dirty_nodes.add(str(node["metadata"]["name"]))
        self._schedule()

    def _stopped(self) -> None:
        for work in self._work.values():
            if work is not None:
                work.timer.cancel()
        self._work.clear()
        self._tainted.clear()
        self._dirty_nodes.clear()
        self._dirty_pods.clear()

    # ----------------------------------------------------------------------- events

    def _on_event(self, event: WatchEvent) -> None:
        if event.key == _NODES.key:
            name = str(event.obj["metadata"]["name"])
            if event.type == "DELETED":  # handleNodeUpdate of a node gone: forgotten, its pods' evictions stand
                self._tainted.pop(name, None)
                self._dirty_nodes.discard(name)
                return
            taints = no_execute_taints(event.obj)
            if event.type == "ADDED":
                changed = bool(taints) or name in self._tainted
            else:
                changed = taints != no_execute_taints(event.old)
            if changed:
                self._dirty_nodes.add(name)
                self._schedule()
        elif event.key == _PODS.key:
            self._on_pod(event)

    def _on_pod(self, event: WatchEvent) -> None:
        """PodUpdated, then handlePodUpdate's first checks: only a pod on a NoExecute-tainted node, or one with an
        eviction to cancel, is looked at again."""
        pod, old = event.obj, event.old
        key = (event.namespace, str(pod["metadata"]["name"]))
        node = str(_dict(pod.get("spec")).get("nodeName") or "")
        if event.type == "DELETED":
            if key in self._work:
                self._dirty_pods[key] = node
                self._schedule()
            return
        if event.type == "MODIFIED" and old is not None:
            old_spec = _dict(old.get("spec"))
            if old_spec.get("tolerations") == _dict(pod.get("spec")).get("tolerations") \
                    and str(old_spec.get("nodeName") or "") == node:
                return
        if node and node in self._tainted:
            self._dirty_pods[key] = node
            self._schedule()

    # ----------------------------------------------------------------------- passes

    def _sync(self) -> None:
        now = asyncio.get_running_loop().time()
        nodes, self._dirty_nodes = self._dirty_nodes, set()
        pods, self._dirty_pods = self._dirty_pods, {}
        if nodes:
            self._nodes_pass(nodes, now)
        for key, node in pods.items():  # handlePodUpdate, after the nodes (the workers take node updates first)
            pod = self.store.find(_PODS, key[1], key[0])
            if pod is None:
                self._cancel(key)
                continue
            spec = _dict(pod.get("spec"))
            if str(spec.get("nodeName") or "") != node or not node:
                continue
            taints = self._tainted.get(node)
            if taints:
                self._process(key, _list(spec.get("tolerations")), taints, now)

    def _nodes_pass(self, names: set[str], now: float) -> None:
        """handleNodeUpdate for each node: its NoExecute taints remembered, then each of its pods processed."""
        on: dict[str, list[Obj]] = {}
        for name in names:
            node = self.store.find(_NODES, name)
            if node is None:
                self._tainted.pop(name, None)
                continue
            taints = no_execute_taints(node)
            if taints:
                self._tainted[name] = taints
            else:
                self._tainted.pop(name, None)
            on[name] = []
        if not on or (not self._work and not any(name in self._tainted for name in on)):
            return  # nothing to schedule, nothing to cancel
        for pod in self.store.list(_PODS):
            node_name = _dict(pod.get("spec")).get("nodeName")
            if node_name in on:
                on[str(node_name)].append(pod)
        for name, pods in on.items():
            held = self._tainted.get(name)
            for pod in pods:
                key = (str(pod["metadata"]["namespace"]), str(pod["metadata"]["name"]))
                if not held:
                    self._cancel(key)
                else:
                    self._process(key, _list(_dict(pod.get("spec")).get("tolerations")), held, now)

    def _process(self, key: PodKey, tolerations: list[Any], taints: list[Obj], now: float) -> None:
        """processPodOnNode."""
        used = matching_tolerations(taints, tolerations)
        if used is None:  # not all tolerated: deleted right away
            self._cancel(key)
            self._add(key, now, now)
            return
        seconds = min_toleration_seconds(used)
        if seconds is None:  # tolerated for ever
            self._cancel(key)
            return
        start, trigger = now, now + seconds
        scheduled = self._work.get(key)
        if scheduled is not None:
            start = scheduled.created
            if start + seconds < trigger:
                return  # the eviction already scheduled stands
            self._cancel(key)
        self._add(key, start, trigger)

    def _add(self, key: PodKey, created: float, fire_at: float) -> None:
        """TimedWorkerQueue.AddWork: nothing if work for the pod exists (done work included)."""
        if key in self._work:
            return
        loop = asyncio.get_running_loop()
        timer = loop.call_later(max(0.0, fire_at - loop.time()), self._fire, key)
        self._work[key] = _Work(created, fire_at, timer)

    def _cancel(self, key: PodKey) -> None:
        """TimedWorkerQueue.CancelWork: the timer stopped and the pod's entry (done or not) dropped."""
        work = self._work.pop(key, None)
        if work is not None:
            work.timer.cancel()

    def _fire(self, key: PodKey) -> None:
        """deletePodHandler: addConditionAndDeletePod; done work stays (no second deletion), failed work goes."""
        if not self.running or key not in self._work:
            return
        self._work[key] = None
        namespace, name = key
        try:
            pod = self.store.get(_PODS, name, namespace)
            marked = with_taint_manager_condition(pod, now_rfc3339(self.store.clock))
            if marked is not None:
                self.store.update_in(_PODS, name, namespace, {**pod, "status": marked}, subresource="status",
                                     manager="taint-eviction-controller")
            self.store.delete(_PODS, name, namespace)
            self.evicted += 1
        except ApiError:  # gone, or gone when the status write ended its grace period: nothing left to do
            self._work.pop(key, None)
