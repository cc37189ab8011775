"""Which running pods keep a job out through required pod anti-affinity, and whom to evict to lift that.

kube-scheduler's preemption takes lower-priority pods off a node and runs the filters again,
InterPodAffinity included: a victim that the preemptor's anti-affinity selects, or whose own
anti-affinity selects the preemptor, stops turning the node away once it is gone. Here the same holds
job-wise and over the whole domain of a term's topology key (kube-scheduler only looks at the node
it tries, so a term over a block is lifted here where it would not be there):

- a *blocked domain* is one value of a term's key (`network.topology.nvidia.com/block=b3`, a host)
  where a placed pod runs that a preemptor pod's anti-affinity selects, or whose anti-affinity
  selects a preemptor pod (`placement.pod_affinity` reads the terms; the index's placed pods are
  those it counts: bound or assumed, not finished);
- it is *liftable* when each such pod is leaving already or belongs to a victim unit: a candidate
  of the victim rule (strictly lower priority, preemptable, not the job's own; `preemption/victims.py`),
  the cheapest unit holding it in the cost order, a whole gang taken over parts of it;
- `Lifts.of(domain)` answers, for a candidate domain of the planner, the units that lift every
  liftable blocked domain with a node there, and whether every node there stays shut anyway (a
  blocker that may not be evicted: equal or higher priority, not preemptable, the job's own).

The lifted units go into the victim set first and capacity selection completes it
(`preemption/selection.py`); placement then validates the set with the victims gone for its
inter-pod rules too. Required affinity is not lifted (a victim is never needed to stay), nor are
DoNotSchedule spreads.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from placement.pod_affinity import NO_TERMS, affinity_index, has_terms
from preemption.plan import SURPLUS, WHOLE_GANG
from preemption.victims import Candidates, VictimUnit
from state.cluster import ClusterState
from state.topology import Domain, TopologyTree

BlockedDomain = tuple[str, str]  # (topology key, value)


def blockers(state: ClusterState, pending: Sequence[str]) -> dict[BlockedDomain, set[str]]:
    """Per blocked domain, the placed pods whose required anti-affinity keeps a pod of `pending` out of
    it (either way round); {} when no term is in play (the usual job: a few attribute reads)."""
    index = affinity_index(state)
    pods = state.pods
    carriers = [pods[key] for key in pending if key in pods]
    if not index.anti and not any(has_terms(pod.obj) for pod in carriers):
        return {}
    nodes = state.nodes
    found: dict[BlockedDomain, set[str]] = {}

    def block(node: str, key: str, blocker: str) -> None:
        info = nodes.get(node)
        value = info.labels.get(key) if info is not None else None
        if value is not None:
            found.setdefault((key, value), set()).add(blocker)

    seen: set[tuple[object, ...]] = set()
    read = index.group_label_keys()
    for pod in carriers:
        terms = index.terms(pod) if has_terms(pod.obj) else NO_TERMS
        namespace, labels = pod.namespace, pod.obj.metadata.labels
        # pods alike in what the terms read block alike (a gang's pods differ in labels no selector reads)
        alike = (id(terms), namespace, tuple((name, labels.get(name)) for name in (*read, *terms.label_keys)))
        if alike in seen:
            continue
        seen.add(alike)
        for term in terms.anti:  # the pod's anti-affinity selects them
            for other_key in index.candidates(term):
                other = pods.get(other_key)
                if other is not None and term.selects(other.namespace, other.obj.metadata.labels):
                    block(index.placed_on[other_key], term.topology_key, other_key)
        for group in index.groups_for(labels):  # their anti-affinity selects the pod
            if group.term.selects(namespace, labels):
                for owner, node in group.owners.items():
                    block(node, group.term.topology_key, owner)
    return found


class Lifts:
    """For one preemptor, per domain of the tree it is planned on: the victim units lifting the
    anti-affinity that blocks its nodes, and whether its nodes stay shut whatever is evicted."""

    __slots__ = ("_blocked_pods", "_blocked_under", "_node_blocks", "_shut_under", "_stuck", "_units")

    def __init__(self, state: ClusterState, tree: TopologyTree, blocked: dict[BlockedDomain, set[str]],
                 candidates: Candidates) -> None:
        self._blocked_pods = blocked
        wanted = set().union(*blocked.values())
        unit_of: dict[str, VictimUnit] = {}
        for unit in candidates.units:  # cost order: the first unit holding a pod is the cheapest
            for pod in unit.pods:
                if pod.key in wanted and pod.key not in unit_of:
                    unit_of[pod.key] = unit
        leaving = frozenset(candidates.leaving)
        self._units: dict[BlockedDomain, list[VictimUnit]] = {}
        self._stuck: set[BlockedDomain] = set()
        for where, pods in blocked.items():
            units: dict[int, VictimUnit] = {}
            for key in pods:
                if key in leaving:
                    continue  # on its way out already: nothing to choose
                holder = unit_of.get(key)
                if holder is None:
                    self._stuck.add(where)  # may not be evicted: the domain stays blocked
                    break
                units[holder.index] = holder
            else:
                self._units[where] = list(units.values())
        keys = sorted({key for key, _ in blocked})
        # node -> the blocked domains it lies in; tree domain id -> those domains, and how many of its
        # nodes stay shut (in a domain not liftable)
        self._node_blocks: dict[str, tuple[BlockedDomain, ...]] = {}
        self._blocked_under: dict[int, set[BlockedDomain]] = {}
        self._shut_under: dict[int, int] = {}
        for name in tree.root.nodes:
            info = state.nodes.get(name)
            if info is None:
                continue
            labels = info.labels
            there = tuple((key, value) for key in keys
                          if (value := labels.get(key)) is not None and (key, value) in blocked)
            if not there:
                continue
            self._node_blocks[name] = there
            shut = any(where in self._stuck for where in there)
            for domain in tree.path(name):
                self._blocked_under.setdefault(domain.id, set()).update(there)
                if shut:
                    self._shut_under[domain.id] = self._shut_under.get(domain.id, 0) + 1

    def of(self, domain: Domain) -> tuple[list[VictimUnit], bool] | None:
        """None when no node of `domain` is blocked; else the units lifting every liftable blocked domain
        with a node there (cost order; a gang taken whole drops its surplus units), and whether every
        node of `domain` stays shut whatever is evicted."""
        under = self._blocked_under.get(domain.id)
        if under is None:
            return None
        shut = self._shut_under.get(domain.id, 0) >= len(domain.nodes)
        chosen: dict[int, VictimUnit] = {}
        for where in sorted(under):
            for unit in self._units.get(where, ()):
                chosen[unit.index] = unit
        whole = {unit.job for unit in chosen.values() if unit.kind == WHOLE_GANG}
        units = [chosen[index] for index in sorted(chosen)
                 if not (chosen[index].kind == SURPLUS and chosen[index].job in whole)]
        return units, shut

    def needed_on(self, unit: VictimUnit, nodes: AbstractSet[str]) -> bool:
        """Whether `unit` holds a pod blocking one of `nodes` (so it is needed there though it runs elsewhere
        in the term's domain)."""
        keys = unit.keys
        return any(not keys.isdisjoint(self._blocked_pods[where])
                   for node in nodes for where in self._node_blocks.get(node, ()))
