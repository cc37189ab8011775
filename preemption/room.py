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
from preemption.victims import Candidates
from state.cluster import ClusterState
from state.resources import Resources


class Room:
    """Per-node free vectors and per-domain slot bounds for one preemptor (built once per call)."""

    __slots__ = ("admitted", "base_free", "base_slots", "domain_base", "domain_max", "shapes", "state")

    def __init__(self, state: ClusterState, shapes: Sequence[Shape], own_gangs: AbstractSet[str],
                 candidates: Candidates) -> None:
        self.state = state
        self.shapes = list(shapes)
        capacity = Capacity(state, own_gangs, frozenset(candidates.leaving))
        priority = min(shape.priority for shape in shapes)
        self.base_free: dict[str, Resources] = {}
        self.base_slots: dict[str, list[int]] = {}
        self.admitted: dict[str, list[bool]] = {}
        tree = state.topology
        width = len(shapes)
        self.domain_base: dict[int, list[int]] = {}
        self.domain_max: dict[int, list[int]] = {}
        for name, node in state.nodes.items():
            admitted = [not admits(shape, node) for shape in shapes]
            if not any(admitted):
                continue
            free = capacity.free(node, priority)
            base = [slots_in(free, shape) if ok else 0 for shape, ok in zip(shapes, admitted, strict=True)]
            units = candidates.units_on.get(name)
            if units:
                most = dict(free)
                seen: set[str] = set()
                for unit in units:
                    for pod in unit.pods:
                        if pod.counted_on == name and pod.key not in seen:
                            seen.add(pod.key)
                            for resource, amount in pod.requests.items():
                                most[resource] = most.get(resource, 0) + amount
                top = [slots_in(most, shape) if ok else 0 for shape, ok in zip(shapes, admitted, strict=True)]
            else:
                top = base
            self.base_free[name] = free
            self.base_slots[name] = base
            self.admitted[name] = admitted
            if not any(top):
                continue
            for domain in tree.path(name):
                bound = self.domain_max.get(domain.id)
                if bound is None:
                    self.domain_max[domain.id] = list(top)
                    self.domain_base[domain.id] = list(base)
                else:
                    now = self.domain_base[domain.id]
                    for i in range(width):
                        bound[i] += top[i]
                        now[i] += base[i]

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
        return [slots_in(total, shape) if ok else 0
                for shape, ok in zip(self.shapes, self.admitted[node], strict=True)]
