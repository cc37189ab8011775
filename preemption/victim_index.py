"""The victim candidates kept between preemption attempts: `collect`'s answer at the cost of what changed.

A job that cannot fit asks for preemption at every attempt, and `collect` (`preemption/victims.py`)
looked at every pod counted on a node each time. Between two attempts only the pods some event
touched can be sorted differently, and the fold names them (`state.pod_changes`: a pod settled,
asked to leave, or re-prioritised; `state.node_changes`: a node's pods counted on or off it, the
node going). So the index keeps, per running pod, the class `collect` puts it in: leaving (its
room is free), not preemptable (never a victim; its gang is never taken whole), or preemptable;
and per gang its pods by class, the highest priority among its preemptable ones, and its victim
units once built (they depend only on the gang's pods and its spec, which is compared by identity).

A query (`candidates`) then filters the kept classes by the preemptor: its own pods and gangs, and
the rule (`VictimRule.below`: every preemptable pod below a priority, read off the gang's highest;
any other rule asks `eligible` pod by pod). Units come out in `collect`'s order: its cost order,
ties as its stable sort leaves them (lone pods before gangs of the same name, a gang's surplus
pods by key). tests/property/test_victim_index.py checks the answer equals `collect`'s after random
sequences of events.

The record is bounded (`state/node_changes.py`): a reader that fell behind rebuilds everything.
Pure: no I/O, no clock; kept in `state.reader_caches`, never part of the state's meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet

from preemption.plan import LONE_POD
from preemption.victims import Candidates, Families, VictimUnit, _gang_units
from state.cluster import TERMINAL_PHASES, ClusterState, PodInfo
from state.gangs import GangSpec
from state.node_changes import kept_table

CACHE_KEY = "preemption.victims"

LEAVING, KEPT, PREEMPTABLE = 1, 2, 3

Order = tuple[int, int, float, int, str, int, str]


class _Gang:
    """The running pods of one gang by class, and its units once built."""

    __slots__ = ("kept", "spec", "top", "units", "victims")

    def __init__(self) -> None:
        self.victims: dict[str, PodInfo] = {}  # preemptable
        self.kept: dict[str, PodInfo] = {}  # not preemptable
        self.top: int | None = None  # highest priority of `victims` (None: not known yet)
        self.units: list[tuple[Order, VictimUnit]] | None = None
        self.spec: GangSpec | None = None  # the spec `units` were built for


class VictimIndex:
    """Every running pod's class for preemption, kept up to date from the fold's change records."""

    __slots__ = ("_gangs", "_kept", "_leaving", "_lone", "_lone_units", "_node_changes", "_on_node", "_pod_changes",
                 "_where", "state")

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._rebuild()

    def _rebuild(self) -> None:
        state = self.state
        self._node_changes = state.node_changes.cursor()
        self._pod_changes = state.pod_changes.cursor()
        self._where: dict[str, tuple[str, int, str]] = {}  # pod key -> (node, class, gang)
        self._on_node: dict[str, set[str]] = {}  # node -> keys indexed there
        self._leaving: dict[str, PodInfo] = {}
        self._lone: dict[str, PodInfo] = {}  # preemptable pods of no gang
        self._lone_units: dict[str, tuple[Order, VictimUnit]] = {}
        self._kept: dict[str, PodInfo] = {}  # not preemptable pods of no gang
        self._gangs: dict[str, _Gang] = {}
        for node in state.nodes.values():
            for key in node.pods:
                self._enter(key)

    def sync(self) -> None:
        state = self.state
        pods = self._pod_changes.take()
        nodes = self._node_changes.take()
        if pods is None or nodes is None:
            self._rebuild()
            return
        if not pods and not nodes:
            return
        keys = set(pods)
        for name in set(nodes):
            there = self._on_node.get(name)
            if there:
                keys.update(there)
            node = state.nodes.get(name)
            if node is not None:
                keys.update(node.pods)
        for key in keys:
            self._leave(key)
            self._enter(key)

    def _enter(self, key: str) -> None:
        """Index the pod `key` as `collect` would find it now (if it is counted on a node at all)."""
        state = self.state
        pod = state.pods.get(key)
        if pod is None:
            return
        name = pod.counted_on
        node = state.nodes.get(name) if name else None
        if node is None or key not in node.pods:
            return
        obj = pod.obj
        if obj.status.phase in TERMINAL_PHASES:
            return
        if pod.eviction_requested or obj.metadata.deletion_timestamp is not None:
            kind = LEAVING
            self._leaving[key] = pod
        elif pod.removed or not (obj.spec.node_name or pod.bound_node):
            return
        else:
            kind = PREEMPTABLE if pod.preemptable and not self.state.kai_lone_kept(pod) else KEPT
            if pod.gang:
                gang = self._gangs.get(pod.gang)
                if gang is None:
                    gang = self._gangs[pod.gang] = _Gang()
                if kind == PREEMPTABLE:
                    gang.victims[key] = pod
                    if gang.top is not None and pod.priority > gang.top:
                        gang.top = pod.priority
                else:
                    gang.kept[key] = pod
                gang.units = None
            elif kind == PREEMPTABLE:
                self._lone[key] = pod
            else:
                self._kept[key] = pod
        self._where[key] = (name, kind, pod.gang)
        there = self._on_node.get(name)
        if there is None:
            there = self._on_node[name] = set()
        there.add(key)

    def _leave(self, key: str) -> None:
        """Forget what the index holds of `key` (its pod may have changed in any way)."""
        found = self._where.pop(key, None)
        if found is None:
            return
        name, kind, gang_key = found
        there = self._on_node[name]
        there.discard(key)
        if not there:
            del self._on_node[name]
        if kind == LEAVING:
            del self._leaving[key]
        elif not gang_key:
            if self._lone.pop(key, None) is not None:
                self._lone_units.pop(key, None)
            else:
                del self._kept[key]
        else:
            gang = self._gangs[gang_key]
            if gang.victims.pop(key, None) is not None:
                gang.top = None
            else:
                del gang.kept[key]
            gang.units = None
            if not gang.victims and not gang.kept:
                del self._gangs[gang_key]

    def candidates(self, priority: int, own_gangs: AbstractSet[str], own_pods: AbstractSet[str],
                   eligible: Callable[[PodInfo], bool] | None = None, below: int | None = None) -> Candidates:
        """`collect(state, priority, own_gangs, own_pods, eligible)`, from the index. `below`: `eligible`
        admits exactly the pods of priority below it (lets a gang be judged by its highest priority)."""
        state = self.state
        out = Candidates()
        ordered: list[tuple[Order, VictimUnit]] = []
        for key, pod in self._leaving.items():
            if key in own_pods or (pod.gang and pod.gang in own_gangs):
                continue
            out.leaving.append(key)
            freed = out.leaving_on.setdefault(pod.counted_on, {})
            for resource, amount in pod.requests.items():
                freed[resource] = freed.get(resource, 0) + amount
        for key, pod in self._kept.items():
            if pod.priority < priority and key not in own_pods:
                out.protected.append(key)
        for key, pod in self._lone.items():
            if key in own_pods:
                continue
            if below is not None:
                ok = pod.priority < below
            else:
                ok = pod.priority < priority if eligible is None else eligible(pod)
            if ok:
                entry = self._lone_units.get(key)
                if entry is None:
                    made = VictimUnit(key, LONE_POD, [pod], broken=True)
                    entry = self._lone_units[key] = ((*made.sort_key(), 0, key), made)
                ordered.append(entry)
        # gangs not the preemptor's holding some of its pods (left out, as `collect` leaves them)
        touched = {found[2] for key in own_pods if (found := self._where.get(key)) is not None and found[2]}
        families = Families(state)  # CompositePodGroup hierarchies disrupted only whole
        for gang_key, gang in self._gangs.items():
            if gang_key in own_gangs:
                continue
            victims, kept = gang.victims, gang.kept
            mine = gang_key in touched
            if mine:
                victims = {key: pod for key, pod in victims.items() if key not in own_pods}
                kept = {key: pod for key, pod in kept.items() if key not in own_pods}
            if kept:
                out.protected.extend(key for key, pod in kept.items() if pod.priority < priority)
                families.spoil(gang_key)
            if not victims:
                continue
            if below is not None:
                top = gang.top
                if top is None or mine:
                    top = max(pod.priority for pod in victims.values())
                    if not mine:
                        gang.top = top
                if top >= below:
                    families.spoil(gang_key)
                    continue
            elif eligible is not None:
                if not all(eligible(pod) for pod in victims.values()):
                    families.spoil(gang_key)
                    continue
            elif any(pod.priority >= priority for pod in victims.values()):
                families.spoil(gang_key)
                continue
            info = state.gangs.get(gang_key)
            spec = info.spec if info is not None else None
            if spec is not None and not state.gang_preemptable(spec):
                out.protected.extend(victims)
                families.spoil(gang_key)
                continue
            if families.take(gang_key, victims.values()):
                continue
            units = gang.units
            if mine or units is None or gang.spec is not spec:
                units = [((*unit.sort_key(), 1, unit.pods[0].key), unit)
                         for unit in _gang_units(gang_key, victims.values(), spec, len(kept))]
                if not mine:
                    gang.units, gang.spec = units, spec
            ordered.extend(units)
        for unit in families.units(out.protected):
            ordered.append(((*unit.sort_key(), 1, unit.pods[0].key), unit))
        ordered.sort(key=_order)
        out.units = [unit for _, unit in ordered]
        for index, unit in enumerate(out.units):
            unit.index = index
        out.leaving.sort()
        out.protected.sort()
        return out


def _order(item: tuple[Order, VictimUnit]) -> Order:
    return item[0]


def victim_index(state: ClusterState) -> VictimIndex:
    """The state's victim index, brought up to date (made on first use)."""
    return kept_table(state, CACHE_KEY, VictimIndex)
