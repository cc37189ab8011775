"""Who could be evicted, and in which lumps: the job-aware victim candidates.

A *unit* is the smallest thing preemption may take away without leaving a job half-alive:
- a whole gang: every running pod of a gang. Evicting any pod of a running gang that drops it below
  its minMember takes the whole gang down (the gang's own all-or-nothing rule), so such a gang is
  one victim job with all its pods, never a part of one;
- a surplus pod: a running gang with more than minMember running pods can lose the extra ones and
  keep running (0 jobs broken). The most recently started pods are the surplus (least work lost);
  at most `running - minMember` of them exist, so taking all of them still leaves minMember alive;
- a lone pod (no gang): its own job.
A pod with a gang label whose PodGroup is unknown is treated as all-or-nothing (minMember = all).

Never victims: a pod marked `volcano.sh/preemptable: "false"` (annotation, else label; a value Go's
ParseBool refuses reads as false, as in Volcano), every pod of a gang whose PodGroup says so, and the
non-preemptible KAI jobs: a KAI PodGroup that says `non-preemptible`, or says nothing and is of
priority 100 or more, and a lone pod labelled `kai.scheduler/queue` of priority 100 or more
(`ClusterState.gang_preemptable`, `ClusterState.kai_lone_kept`: as KAI, whose `build` and `inference`
classes are never preempted nor reclaimed).
A gang with such a pod is never taken whole (that would evict it); only its preemptable surplus
pods are candidates. A rule may also keep units out for a while (`VictimRule.spared`: a KAI queue's
min runtime, `preemption/reclaim.py`). Surplus is counted so that minMember and every Volcano task minimum stay
running. A Kubernetes PodGroup with `disruptionMode: PodGroup` has no surplus: it goes whole or not.

Only pods strictly below the preemptor's priority are candidates (or, for a quota reclaim, the pods
its `VictimRule` admits: see `preemption/reclaim.py`), and a gang is a candidate only if all of its
running pods are (a gang is never split by priority, nor by quota). Only bound, running pods are
candidates: pods already terminating or asked to leave are *leaving* (their room comes for free,
without choosing them again); assumed-but-unbound pods are not evictable through the API.
Pods of the preemptor's own GangGroup are never candidates.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import Protocol

from preemption.plan import LONE_POD, SURPLUS, WHOLE_GANG
from state.cluster import TERMINAL_PHASES, ClusterState, PodInfo
from state.gangs import GangSpec
from state.resources import Resources
from state.topology import Domain, TopologyTree


class VictimUnit:
    """One candidate victim unit (see the module docstring). `order` is its rank in the cost order."""

    __slots__ = ("_above", "_keys", "_nodes", "_on", "broken", "index", "job", "kind", "placed", "pods", "priority",
                 "started_at")

    def __init__(self, job: str, kind: str, pods: list[PodInfo], broken: bool) -> None:
        self.job = job
        self.kind = kind
        self.pods = pods
        self.broken = broken
        self.priority = max(p.priority for p in pods)
        self.started_at = max((p.bound_at or 0.0) for p in pods)
        self.index = 0
        # its pods by the node each is counted on, nodes in the order their first pod comes
        placed: dict[str, list[PodInfo]] = {}
        for pod in pods:
            on = placed.get(pod.counted_on)
            if on is None:
                placed[pod.counted_on] = [pod]
            else:
                on.append(pod)
        self.placed = list(placed.items())
        self._on = placed
        self._nodes: frozenset[str] | None = None
        self._above: tuple[Domain, frozenset[int]] | None = None
        self._keys: frozenset[str] | None = None

    @property
    def nodes(self) -> frozenset[str]:
        """The nodes its pods are counted on."""
        found = self._nodes
        if found is None:
            found = self._nodes = frozenset(node for node, _ in self.placed)
        return found

    def domains_above(self, tree: TopologyTree) -> frozenset[int]:
        """Ids of the domains of `tree` holding one of its nodes (kept while the tree keeps its root:
        a tree rebuilt, as when a node changes its labels, has a new one)."""
        root = tree.root
        found = self._above
        if found is None or found[0] is not root:
            path = tree.path
            found = self._above = (root, frozenset(domain.id for node in self.nodes for domain in path(node)))
        return found[1]

    def pods_on(self, node: str) -> list[PodInfo]:
        """Its pods counted on `node` (none: not there)."""
        return self._on.get(node) or []

    @property
    def keys(self) -> frozenset[str]:
        """Its pods' keys."""
        found = self._keys
        if found is None:
            found = self._keys = frozenset(pod.key for pod in self.pods)
        return found

    def sort_key(self) -> tuple[int, int, float, int, str]:
        """Cheapest first: lower priority, not breaking a job, most recently started, fewer pods, name."""
        return (self.priority, 1 if self.broken else 0, -self.started_at, len(self.pods), self.job)

    def __repr__(self) -> str:
        return f"VictimUnit({self.kind} {self.job}, {len(self.pods)} pods, priority {self.priority})"


class Gate(Protocol):
    """Limits on a victim set beyond room (a quota reclaim's borrowing budgets): see `select`."""

    def admits(self, unit: VictimUnit) -> bool:
        """May `unit` be taken on top of the units taken so far?"""
        ...

    def take(self, unit: VictimUnit) -> None: ...

    def release(self, unit: VictimUnit) -> None: ...


class VictimRule:
    """Who may be a victim of one preemptor, what limits a victim set, and the words for both.

    `eligible(pod)` admits a running pod as a candidate; `gate` (optional) limits sets during
    selection; `pods` / `job` / `jobs` name the candidates in reasons ("pod of priority below 100",
    "lower-priority job", "lower-priority jobs"); `action` / `verb` name what is done ("preemption" /
    "preempts", or "reclaim" / "reclaims"); `note` is a line the explanation carries (why this
    preemptor may reclaim, from whom); `source_of(pod key)` names the quota a victim is taken from.
    `forced(units)` (optional) picks the units that must go whatever room they make, before the
    room is looked at (a reclaim freeing quota under a parent's max), or returns the reason it cannot.
    `spared(unit)` (optional) keeps a candidate unit out for now: the time until which it is kept (a job
    of a KAI queue that started less than the queue's min runtime ago), None for one it does not keep;
    `spared_word` names why, `now` is the time of the decision.
    """

    __slots__ = ("action", "below", "eligible", "forced", "gate", "job", "jobs", "note", "now", "pods", "source_of",
                 "spared", "spared_word", "verb")

    def __init__(self, eligible: Callable[[PodInfo], bool], *, pods: str, job: str, jobs: str,
                 action: str = "preemption", verb: str = "preempts", note: str = "", gate: Gate | None = None,
                 source_of: Callable[[str], str] | None = None,
                 forced: Callable[[list[VictimUnit]], list[VictimUnit] | str] | None = None,
                 below: int | None = None) -> None:
        self.eligible = eligible
        self.below = below  # when set, `eligible` admits exactly the pods of priority below it
        self.forced = forced
        self.pods = pods
        self.job = job
        self.jobs = jobs
        self.action = action
        self.verb = verb
        self.note = note
        self.gate = gate
        self.source_of = source_of
        self.spared: Callable[[VictimUnit], float | None] | None = None
        self.spared_word = ""
        self.now = 0.0

    @classmethod
    def lower_priority(cls, priority: int, *, where: str = "",
                       eligible: Callable[[PodInfo], bool] | None = None) -> VictimRule:
        """Priority preemption: running pods below `priority` (`where`: " in quota x", when limited)."""
        return cls(eligible or (lambda pod: pod.priority < priority), pods=f"pod of priority below {priority}{where}",
                   job=f"lower-priority job{where}", jobs=f"lower-priority jobs{where}",
                   below=priority if eligible is None else None)

    def sources(self, victims: Iterable[str]) -> tuple[str, ...]:
        """The quotas the victims are taken from (a reclaim), sorted; () for priority preemption."""
        if self.source_of is None:
            return ()
        return tuple(sorted({source for key in victims if (source := self.source_of(key))}))


class Candidates:
    """Every victim unit for one preemptor, plus the pods already leaving (free room, no cost)."""

    __slots__ = ("_pods_on", "_units_on", "leaving", "leaving_on", "protected", "units")

    def __init__(self) -> None:
        self.units: list[VictimUnit] = []
        self.protected: list[str] = []  # lower-priority pods marked not preemptable (never candidates)
        self._units_on: dict[str, list[VictimUnit]] | None = None
        self._pods_on: dict[str, dict[str, PodInfo]] = {}
        self.leaving: list[str] = []
        self.leaving_on: dict[str, Resources] = {}

    @property
    def units_on(self) -> dict[str, list[VictimUnit]]:
        """Node -> the units with a pod counted there, in unit order (listed on first use)."""
        if self._units_on is None:
            self.index()
        assert self._units_on is not None
        return self._units_on

    @property
    def pods_on(self) -> dict[str, dict[str, PodInfo]]:
        """Node -> the pods of those units counted there (`pods_at` of every node listed)."""
        return {node: self.pods_at(node) or {} for node in self.units_on}

    def pods_at(self, node: str) -> dict[str, PodInfo] | None:
        """The pods of the units counted on `node`, in unit order (None: no unit there); listed when
        first asked: the room model asks it of the few nodes it models afresh, not of every node."""
        found = self._pods_on.get(node)
        if found is None:
            units = self.units_on.get(node)
            if units is None:
                return None
            found = self._pods_on[node] = {pod.key: pod for unit in units for pod in unit.pods_on(node)}
        return found

    def index(self) -> None:
        """List each unit under the nodes its pods are counted on, in unit order (again: after `units`
        changed)."""
        units_on: dict[str, list[VictimUnit]] = {}
        for unit in self.units:
            for node, _ in unit.placed:
                listed = units_on.get(node)
                if listed is None:
                    units_on[node] = [unit]
                else:
                    listed.append(unit)
        self._units_on = units_on
        self._pods_on = {}

    def set_aside(self, chosen: list[VictimUnit]) -> None:
        """Take `chosen` out of the candidates and count their pods as leaving (victims already
        decided: their room is free for the rest of the plan, at no further cost)."""
        pods = {pod.key: pod for unit in chosen for pod in unit.pods}
        self.units = [unit for unit in self.units if not any(pod.key in pods for pod in unit.pods)]
        self._units_on = None  # listed again on first use
        for key in sorted(pods):
            pod = pods[key]
            self.leaving.append(key)
            freed = self.leaving_on.setdefault(pod.counted_on, {})
            for resource, amount in pod.requests.items():
                freed[resource] = freed.get(resource, 0) + amount
        self.leaving.sort()


def _surplus(pods: list[PodInfo], spec: GangSpec | None, staying: int) -> list[PodInfo]:
    """The pods (most recently started first) that can go while minMember and every task minimum stay
    running, `staying` other members (not preemptable) counted as staying."""
    if spec is None:
        return []
    left = len(pods) + staying
    per_task: dict[str, int] = {}
    for pod in pods:
        per_task[pod.task] = per_task.get(pod.task, 0) + 1
    minimums = dict(spec.task_minimums)
    tree = spec.kai_sub_groups if spec.kai_sub_groups is not None and spec.kai_sub_groups.groups else None
    out: list[PodInfo] = []
    for pod in pods:
        if left - 1 < max(spec.min_member, 1) or per_task[pod.task] - 1 < minimums.get(pod.task, 0):
            continue
        if tree is not None and not tree.ready({**per_task, pod.task: per_task[pod.task] - 1}):
            continue  # a KAI sub-group would fall below its minimum (members of no leaf are not counted in)
        left -= 1
        per_task[pod.task] -= 1
        out.append(pod)
    return out


def _gang_units(gang_key: str, running: Iterable[PodInfo], spec: GangSpec | None, kept: int) -> list[VictimUnit]:
    """The units of a gang whose preemptable running pods are `running`, `kept` more not preemptable."""
    units: list[VictimUnit] = []
    pods = sorted(running, key=lambda p: (-(p.bound_at or 0.0), p.key))
    if spec is None or not spec.disrupt_whole:
        for pod in _surplus(pods, spec, kept):
            units.append(VictimUnit(gang_key, SURPLUS, [pod], broken=False))
    if not kept:
        units.append(VictimUnit(gang_key, WHOLE_GANG, sorted(pods, key=lambda p: p.key), broken=True))
    return units


class Families:
    """The CompositePodGroup hierarchies whose root says they are disrupted only whole (`disruptionMode: {all:
    {}}`): the preemptable running pods of all their PodGroups are one unit, which no preemption takes while
    any PodGroup of the hierarchy may not go (a pod of it kept, or of a priority the preemptor may not evict)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.pods: dict[tuple[str, ...], list[PodInfo]] = {}
        self.spoiled: set[tuple[str, ...]] = set()

    def _family(self, gang_key: str) -> tuple[str, ...] | None:
        gang = self.state.gangs.get(gang_key)
        spec = gang.spec if gang is not None else None
        if spec is None or spec.composite is None or not spec.composite_disrupt_whole:
            return None
        return spec.gang_group

    def spoil(self, gang_key: str) -> None:
        """The gang may not go: nor may its hierarchy, when it is one of those."""
        family = self._family(gang_key)
        if family is not None:
            self.spoiled.add(family)

    def take(self, gang_key: str, pods: Iterable[PodInfo]) -> bool:
        """Whether the gang belongs to such a hierarchy (its pods then go into the hierarchy's unit)."""
        family = self._family(gang_key)
        if family is None:
            return False
        self.pods.setdefault(family, []).extend(pods)
        return True

    def units(self, protected: list[str]) -> list[VictimUnit]:
        """One unit per hierarchy that may go, named by its root; the pods of the others join `protected`."""
        out: list[VictimUnit] = []
        for family, pods in sorted(self.pods.items()):
            if family in self.spoiled:
                protected.extend(pod.key for pod in pods)
                continue
            spec = self.state.gangs[family[0]].spec
            tree = spec.composite if spec is not None else None
            root = tree.groups[0].name if tree is not None and tree.groups else family[0]
            out.append(VictimUnit(root, WHOLE_GANG, sorted(pods, key=lambda p: p.key), broken=True))
        return out


def collect(state: ClusterState, priority: int, own_gangs: AbstractSet[str], own_pods: AbstractSet[str],
            eligible: Callable[[PodInfo], bool] | None = None) -> Candidates:
    """Victim units below `priority` (or, given `eligible`, of the pods it accepts), each listed under
    the nodes its pods run on."""
    out = Candidates()
    by_gang: dict[str, list[PodInfo]] = {}
    blocked_gangs: set[str] = set()
    kept_aside: dict[str, int] = {}  # gang -> its running pods that may never be preempted
    all_pods = state.pods
    # Every pod counted on a node, in any order: what is collected is sorted below, so the order of
    # the scan never shows (it runs over every pod at every preemption attempt, hence inline).
    for name, node in state.nodes.items():
        for key in node.pods:
            pod = all_pods.get(key)
            if pod is None or key in own_pods or (pod.gang and pod.gang in own_gangs) or not pod.counted_on:
                continue
            obj = pod.obj
            if obj.status.phase in TERMINAL_PHASES:
                continue  # neither leaving nor evictable
            if pod.eviction_requested or obj.metadata.deletion_timestamp is not None:
                # already on its way out: its room comes for free, without choosing it again
                out.leaving.append(key)
                freed = out.leaving_on.setdefault(name, {})
                for resource, amount in pod.requests.items():
                    freed[resource] = freed.get(resource, 0) + amount
                continue
            if pod.removed or not (obj.spec.node_name or pod.bound_node):
                continue  # assumed but not bound: not evictable through the API
            if not pod.preemptable or state.kai_lone_kept(pod):
                if pod.gang:
                    kept_aside[pod.gang] = kept_aside.get(pod.gang, 0) + 1
                if pod.priority < priority:
                    out.protected.append(key)
                continue
            ok = pod.priority < priority if eligible is None else eligible(pod)
            if pod.gang:
                if not ok:
                    blocked_gangs.add(pod.gang)
                else:
                    by_gang.setdefault(pod.gang, []).append(pod)
            elif ok:
                out.units.append(VictimUnit(key, LONE_POD, [pod], broken=True))
    families = Families(state)  # CompositePodGroup hierarchies disrupted only whole
    for gang_key in sorted({*blocked_gangs, *kept_aside}):
        families.spoil(gang_key)
    for gang_key in sorted(by_gang):
        if gang_key in blocked_gangs:
            continue
        gang = state.gangs.get(gang_key)
        spec = gang.spec if gang is not None else None
        if spec is not None and not state.gang_preemptable(spec):
            out.protected.extend(pod.key for pod in by_gang[gang_key])
            families.spoil(gang_key)
            continue
        if families.take(gang_key, by_gang[gang_key]):
            continue
        out.units.extend(_gang_units(gang_key, by_gang[gang_key], spec, kept_aside.get(gang_key, 0)))
    out.units.extend(families.units(out.protected))
    out.units.sort(key=VictimUnit.sort_key)
    for index, unit in enumerate(out.units):
        unit.index = index
    out.leaving.sort()
    out.protected.sort()
    return out
