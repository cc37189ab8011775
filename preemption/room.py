"""How much room a node or domain offers the preemptor, now and with victims gone.

For each pod shape of the preemptor, a node offers `slots` pods now (placement's own `Capacity`:
allocatable - used - nominations of higher-or-equal priority held by others, with already-leaving
pods counted as gone) and at most `max_slots` once every candidate victim on it is gone. Summed up
the topology tree, `max_slots` of a domain is an upper bound on what preemption could ever free
there: a domain whose bound is below the job's need is pruned without looking at its victims.

`Room` also answers the greedy's incremental question: how many slots does a node offer once these
pods are gone (`slots_with`), computed from the node's base free vector plus the freed requests.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from placement.fit import Capacity, Shape, admits, slots_in
from preemption.victims import Candidates, VictimUnit
from state.cluster import ClusterState
from state.resources import Resources
from state.topology import TopologyTree

MAX_TIERS = 16


class Room:
    """Per-node free vectors and per-domain slot bounds for one preemptor (built once per call).

    `tiers` are priority thresholds (the candidates' distinct priorities, at most MAX_TIERS of them
    taken evenly when there are more; the last is the highest). `domain_tiers[d][t]` bounds the slots
    per shape of domain `d` once every candidate of priority <= `tiers[t]` is gone; `domain_max` is
    the last of them (every candidate gone). `lowest_tier(d, need)` is the first tier at which the
    bound covers the need: no victim set of `d` has a highest priority below that tier's reach.
    """

    __slots__ = ("_alone", "admitted", "base_free", "base_slots", "domain_base", "domain_max", "domain_tiers",
                 "shapes", "state", "tiers")

    def __init__(self, state: ClusterState, shapes: Sequence[Shape], own_gangs: AbstractSet[str],
                 candidates: Candidates, tree: TopologyTree | None = None) -> None:
        self.state = state
        self.shapes = list(shapes)
        capacity = Capacity(state, own_gangs, frozenset(candidates.leaving))
        priority = min(shape.priority for shape in shapes)
        distinct = sorted({unit.priority for unit in candidates.units})
        if len(distinct) > MAX_TIERS:
            stride = len(distinct) / MAX_TIERS
            distinct = sorted({distinct[min(len(distinct) - 1, int((i + 1) * stride) - 1)] for i in range(MAX_TIERS)}
                              | {distinct[-1]})
        self.tiers: list[int] = distinct or [-(1 << 62)]
        self._alone: dict[int, dict[str, int]] = {}
        self.base_free: dict[str, Resources] = {}
        self.base_slots: dict[str, list[int]] = {}
        self.admitted: dict[str, list[bool]] = {}
        tree = tree if tree is not None else state.topology  # the tree the job is planned on
        width = len(shapes)
        tiers = len(self.tiers)
        # per domain one flat vector: base slots per shape, then the bound per shape for each tier
        flat_len = width * (tiers + 1)
        sums: dict[int, list[int]] = {}
        for name, node in state.nodes.items():
            admitted = [not admits(shape, node) for shape in shapes]
            if not any(admitted):
                continue
            free = capacity.free(node, priority)
            base = [slots_in(free, shape.requests) if ok else 0 for shape, ok in zip(shapes, admitted, strict=True)]
            self.base_free[name] = free
            self.base_slots[name] = base
            self.admitted[name] = admitted
            units = candidates.units_on.get(name)
            if not units:
                if not any(base):
                    continue
                flat = base * (tiers + 1)
            else:
                pods = {pod.key: pod for unit in units for pod in unit.pods if pod.counted_on == name}
                ordered = sorted(pods.values(), key=lambda p: p.priority)
                most = dict(free)
                flat = list(base)
                index = 0
                for tier in self.tiers:
                    while index < len(ordered) and ordered[index].priority <= tier:
                        for resource, amount in ordered[index].requests.items():
                            most[resource] = most.get(resource, 0) + amount
                        index += 1
                    flat.extend(slots_in(most, shape.requests) if ok else 0
                                for shape, ok in zip(shapes, admitted, strict=True))
                if not any(flat[-width:]):
                    continue
            leaf = tree.domain_of(name)
            if leaf is None:
                continue
            total = sums.get(leaf.id)
            if total is None:
                sums[leaf.id] = list(flat)
            else:
                for i in range(flat_len):
                    total[i] += flat[i]
        # carry the sums up the tree once per domain, deepest level first
        by_depth: dict[int, list[int]] = {}
        for ident in sums:
            by_depth.setdefault(tree.domains[ident].depth, []).append(ident)
        for depth in range(max(by_depth, default=0), 0, -1):
            for ident in by_depth.get(depth, ()):
                parent = tree.domains[ident].parent
                if parent is None:
                    continue
                total = sums.get(parent.id)
                if total is None:
                    sums[parent.id] = list(sums[ident])
                    by_depth.setdefault(depth - 1, []).append(parent.id)
                else:
                    child = sums[ident]
                    for i in range(flat_len):
                        total[i] += child[i]
        self.domain_base: dict[int, list[int]] = {ident: flat[:width] for ident, flat in sums.items()}
        self.domain_tiers: dict[int, list[list[int]]] = {
            ident: [flat[width * (t + 1):width * (t + 2)] for t in range(tiers)] for ident, flat in sums.items()}
        self.domain_max: dict[int, list[int]] = {ident: bounds[-1] for ident, bounds in self.domain_tiers.items()}

    def lowest_tier(self, domain_id: int, need: Sequence[int]) -> int | None:
        """Index of the first tier whose bound covers `need` in the domain (None: not even the last)."""
        bounds = self.domain_tiers.get(domain_id)
        if bounds is None:
            return None
        for index, bound in enumerate(bounds):
            if all(b >= n for b, n in zip(bound, need, strict=True)):
                return index
        return None

    def slots_with(self, node: str, freed: Mapping[str, int] | None) -> list[int]:
        """Slots per shape on `node` once `freed` (summed requests of victims there) is given back."""
        free = self.base_free.get(node)
        if free is None:
            return [0] * len(self.shapes)
        if not freed:
            return self.base_slots[node]
        total = dict(free)
        for resource, amount in freed.items():
            total[resource] = total.get(resource, 0) + amount
        return [slots_in(total, shape.requests) if ok else 0
                for shape, ok in zip(self.shapes, self.admitted[node], strict=True)]

    def alone(self, unit: VictimUnit) -> dict[str, int]:
        """Per node, the slots (all shapes summed) that evicting `unit` alone would add there."""
        found = self._alone.get(unit.index)
        if found is None:
            freed: dict[str, Resources] = {}
            for pod in unit.pods:
                if pod.counted_on in self.base_free:
                    bucket = freed.setdefault(pod.counted_on, {})
                    for resource, amount in pod.requests.items():
                        bucket[resource] = bucket.get(resource, 0) + amount
            found = {}
            for node, amounts in freed.items():
                gained = sum(self.slots_with(node, amounts)) - sum(self.base_slots[node])
                if gained > 0:
                    found[node] = gained
            self._alone[unit.index] = found
        return found
