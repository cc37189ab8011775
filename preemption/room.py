"""How much room a node or domain offers the preemptor, now and with victims gone.

For each pod shape of the preemptor, a node offers `slots` pods now (placement's own `Capacity`:
allocatable - used - nominations of higher-or-equal priority held by others, with already-leaving
pods counted as gone) and at most `max_slots` once every candidate victim on it is gone. Summed up
the topology tree, `max_slots` of a domain is an upper bound on what preemption could ever free
there: a domain whose bound is below the job's need is pruned without looking at its victims.

`Room` also answers the greedy's incremental question: how many slots does a node offer once these
pods are gone (`slots_with`), computed from the node's base free vector plus the freed requests.

Only the resources some shape requests decide how many pods fit (`placement.fit.slots_in` reads no
other), so free room and freed requests are vectors over those resources alone (`Room.vector`):
the room model is built over thousands of nodes at every attempt of a job that cannot fit, and a
dict per node per question is most of what it would cost.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from placement.fit import UNLIMITED, Capacity, Shape, admits
from preemption.victims import Candidates, VictimUnit
from state.cluster import ClusterState, PodInfo
from state.topology import Domain, TopologyTree

MAX_TIERS = 16

Vector = list[int]  # amounts of `Room.resources`, in that order


class Room:
    """Per-node free vectors and per-domain slot bounds for one preemptor (built once per call).

    `tiers` are priority thresholds (the candidates' distinct priorities, at most MAX_TIERS of them
    taken evenly when there are more; the last is the highest). `domain_tiers[d][t]` bounds the slots
    per shape of domain `d` once every candidate of priority <= `tiers[t]` is gone; `domain_max` is
    the last of them (every candidate gone). `lowest_tier(d, need)` is the first tier at which the
    bound covers the need: no victim set of `d` has a highest priority below that tier's reach.

    Only nodes of `tree` are modelled (no bound counts a node outside it, no selection looks there);
    `within` (a domain of it) limits the model to the nodes below, those the preemptor may be placed
    on when its running members anchor it: bounds and slots elsewhere read as none.
    """

    __slots__ = ("_alone", "_requests", "_vectors", "admitted", "base_free", "base_slots", "domain_base",
                 "domain_max", "domain_tiers", "resources", "shapes", "state", "tiers")

    def __init__(self, state: ClusterState, shapes: Sequence[Shape], own_gangs: AbstractSet[str],
                 candidates: Candidates, tree: TopologyTree | None = None, within: Domain | None = None) -> None:
        self.state = state
        self.shapes = list(shapes)
        self.resources: list[str] = sorted({name for shape in shapes for name, _ in shape.requests})
        position = {name: i for i, name in enumerate(self.resources)}
        # per shape: (index into the vector, amount) for each resource it requests
        self._requests = [tuple((position[name], amount) for name, amount in shape.requests) for shape in shapes]
        self._vectors: dict[int, Vector] = {}  # id of a (shared, never mutated) requests dict -> its vector
        capacity = Capacity(state, own_gangs, frozenset(candidates.leaving))
        priority = min(shape.priority for shape in shapes)
        distinct = sorted({unit.priority for unit in candidates.units})
        if len(distinct) > MAX_TIERS:
            stride = len(distinct) / MAX_TIERS
            distinct = sorted({distinct[min(len(distinct) - 1, int((i + 1) * stride) - 1)] for i in range(MAX_TIERS)}
                              | {distinct[-1]})
        self.tiers: list[int] = distinct or [-(1 << 62)]
        self._alone: dict[int, dict[str, int]] = {}
        self.base_free: dict[str, Vector] = {}
        self.base_slots: dict[str, list[int]] = {}
        self.admitted: dict[str, list[bool]] = {}
        tree = tree if tree is not None else state.topology  # the tree the job is planned on
        width = len(shapes)
        tiers = len(self.tiers)
        # Per leaf domain: base slots per shape summed, and per tier what the candidates there add to it.
        base_sums: dict[int, list[int]] = {}
        gain_sums: dict[int, list[int]] = {}
        resources = self.resources
        requests = self._requests
        units_on = candidates.units_on
        ignored_on = capacity.ignored_on
        all_nodes = state.nodes
        base_free, base_slots, admitted_on = self.base_free, self.base_slots, self.admitted
        everywhere = all(shape.unconstrained for shape in shapes)
        all_admitted = [True] * width
        for leaf, names in _leaves(tree, within):
            leaf_base: list[int] | None = None
            leaf_gains: list[int] | None = None
            for name in names:
                node = all_nodes.get(name)
                if node is None:
                    continue
                if everywhere and not node.unschedulable and not node.taints:
                    admitted = all_admitted  # the common case: no shape filters nodes, nothing turns pods away
                else:
                    admitted = [not admits(shape, node) for shape in shapes]
                    if not any(admitted):
                        continue
                allocatable, used = node.allocatable, node.used
                free = [allocatable.get(resource, 0) - used.get(resource, 0) for resource in resources]
                if node.nominated:
                    held = capacity.held_by_others(node, priority)
                    if held:
                        free = [have - held.get(resource, 0) for have, resource in zip(free, resources, strict=True)]
                freed = ignored_on.get(name) if ignored_on else None
                if freed is not None:
                    free = [have + freed.get(resource, 0) for have, resource in zip(free, resources, strict=True)]
                base = [_slots(free, wanted) if ok else 0 for wanted, ok in zip(requests, admitted, strict=True)]
                base_free[name] = free
                base_slots[name] = base
                admitted_on[name] = admitted
                units = units_on.get(name)
                if units:
                    gains = self._gains(name, units, free, base, admitted)
                    if any(gains):
                        if leaf_gains is None:
                            leaf_gains = gains
                        else:
                            for i in range(width * tiers):
                                leaf_gains[i] += gains[i]
                    elif not any(base):
                        continue
                elif not any(base):
                    continue
                if leaf_base is None:
                    leaf_base = list(base)
                else:
                    for i in range(width):
                        leaf_base[i] += base[i]
            if leaf_base is not None:
                base_sums[leaf.id] = leaf_base
                if leaf_gains is not None:
                    gain_sums[leaf.id] = leaf_gains
        # carry the sums up the tree once per domain, deepest level first
        by_depth: dict[int, list[int]] = {}
        for ident in base_sums:
            by_depth.setdefault(tree.domains[ident].depth, []).append(ident)
        for depth in range(max(by_depth, default=0), 0, -1):
            for ident in by_depth.get(depth, ()):
                parent = tree.domains[ident].parent
                if parent is None:
                    continue
                child_base, child_extra = base_sums[ident], gain_sums.get(ident)
                total = base_sums.get(parent.id)
                if total is None:
                    base_sums[parent.id] = list(child_base)
                    by_depth.setdefault(depth - 1, []).append(parent.id)
                else:
                    for i in range(width):
                        total[i] += child_base[i]
                if child_extra is not None:
                    extra = gain_sums.get(parent.id)
                    if extra is None:
                        gain_sums[parent.id] = list(child_extra)
                    else:
                        for i in range(width * tiers):
                            extra[i] += child_extra[i]
        self.domain_base: dict[int, list[int]] = base_sums
        self.domain_tiers: dict[int, list[list[int]]] = {}
        for ident, base in base_sums.items():
            extra = gain_sums.get(ident)
            if extra is None:
                self.domain_tiers[ident] = [list(base) for _ in range(tiers)]
            else:
                self.domain_tiers[ident] = [[b + extra[width * t + i] for i, b in enumerate(base)]
                                            for t in range(tiers)]
        self.domain_max: dict[int, list[int]] = {ident: bounds[-1] for ident, bounds in self.domain_tiers.items()}

    def _gains(self, name: str, units: list[VictimUnit], free: Vector, base: list[int],
               admitted: list[bool]) -> list[int]:
        """Per tier then shape, the slots the candidates on `name` up to that tier's priority add to `base`."""
        pods = {pod.key: pod for unit in units for pod in unit.pods if pod.counted_on == name}
        ordered = sorted(pods.values(), key=_priority)
        most = list(free)
        gains: list[int] = []
        index = 0
        for tier in self.tiers:
            while index < len(ordered) and ordered[index].priority <= tier:
                for i, amount in enumerate(self._vector(ordered[index])):
                    most[i] += amount
                index += 1
            gains.extend(_slots(most, wanted) - b if ok else 0
                         for wanted, ok, b in zip(self._requests, admitted, base, strict=True))
        return gains

    def lowest_tier(self, domain_id: int, need: Sequence[int]) -> int | None:
        """Index of the first tier whose bound covers `need` in the domain (None: not even the last)."""
        bounds = self.domain_tiers.get(domain_id)
        if bounds is None:
            return None
        for index, bound in enumerate(bounds):
            if all(b >= n for b, n in zip(bound, need, strict=True)):
                return index
        return None

    def vector(self, requests: Mapping[str, int]) -> Vector:
        """`requests` (a pod's, or a sum of them) as a vector over `resources`."""
        return [requests.get(resource, 0) for resource in self.resources]

    def _vector(self, pod: PodInfo) -> Vector:
        """The pod's requests as a vector (pods asking the same share one requests dict, and one vector)."""
        requests = pod.requests
        found = self._vectors.get(id(requests))
        if found is None:
            found = self._vectors[id(requests)] = self.vector(requests)
        return found

    def add_pod(self, total: Vector, pod: PodInfo, sign: int = 1) -> None:
        """Add (`sign` -1: take away) the pod's requests into `total`."""
        for i, amount in enumerate(self._vector(pod)):
            total[i] += sign * amount

    def slots_with(self, node: str, freed: Sequence[int] | None) -> list[int]:
        """Slots per shape on `node` once `freed` (summed requests of victims there, a vector) is given back."""
        free = self.base_free.get(node)
        if free is None:
            return [0] * len(self.shapes)
        if not freed or not any(freed):
            return self.base_slots[node]
        total = [have + more for have, more in zip(free, freed, strict=True)]
        return [_slots(total, wanted) if ok else 0
                for wanted, ok in zip(self._requests, self.admitted[node], strict=True)]

    def alone(self, unit: VictimUnit) -> dict[str, int]:
        """Per node, the slots (all shapes summed) that evicting `unit` alone would add there."""
        found = self._alone.get(unit.index)
        if found is None:
            freed: dict[str, Vector] = {}
            for pod in unit.pods:
                if pod.counted_on in self.base_free:
                    bucket = freed.get(pod.counted_on)
                    if bucket is None:
                        bucket = freed[pod.counted_on] = [0] * len(self.resources)
                    self.add_pod(bucket, pod)
            found = {}
            for node, amounts in freed.items():
                gained = sum(self.slots_with(node, amounts)) - sum(self.base_slots[node])
                if gained > 0:
                    found[node] = gained
            self._alone[unit.index] = found
        return found


def _leaves(tree: TopologyTree, within: Domain | None) -> Iterator[tuple[Domain, list[str]]]:
    """Every domain of the tree (below `within` when given) that has nodes of its own, with them."""
    if within is None:
        for domain in tree.domains:
            if domain.direct_nodes:
                yield domain, domain.direct_nodes
        return
    stack = [within]
    while stack:
        domain = stack.pop()
        if domain.direct_nodes:
            yield domain, domain.direct_nodes
        stack.extend(domain.children)


def _priority(pod: PodInfo) -> int:
    return pod.priority


def _slots(free: Sequence[int], wanted: Sequence[tuple[int, int]]) -> int:
    """`placement.fit.slots_in` over vectors: how many copies of `wanted` fit in `free`."""
    best = UNLIMITED
    for index, amount in wanted:
        have = free[index]
        if have < amount:
            return 0
        count = have // amount
        if count < best:
            best = count
    return best
