"""How much room a node or domain offers the preemptor, now and with victims gone.

For each pod shape of the preemptor, a node offers `slots` pods now (placement's own `Capacity`:
allocatable - used - nominations of higher-or-equal priority held by others, with already-leaving
pods counted as gone) and at most `max_slots` once every candidate victim on it is gone. Summed up
the topology tree, `max_slots` of a domain is an upper bound on what preemption could ever free
there: a domain whose bound is below the job's need is pruned without looking at its victims.

`Room` also answers the greedy's incremental question: how many slots does a node offer once these
pods are gone (`slots_with`), computed from the node's base free vector plus the freed requests.

Only the resources some shape requests decide how many pods fit (`placement.fit.slots_in` reads no
other), so free room and freed requests are vectors over those resources alone (`Room.vector`),
and the shapes' host ports after them (a node has room for one holder of each; a victim holding
one frees it): the room model is built over thousands of nodes at every attempt of a job that
cannot fit, and a dict per node per question is most of what it would cost.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from placement.fit import UNLIMITED, Capacity, Shape, admits
from placement.slots import SlotTable, slot_table
from preemption.victims import Candidates, VictimUnit
from state.cluster import ClusterState, PodInfo
from state.node_changes import kept_table
from state.resources import MILLI
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

    __slots__ = ("_all_admitted", "_alone", "_capacity", "_everywhere", "_first_port", "_gain_sums", "_kept", "_kind",
                 "_pods_on", "_priority", "_requests", "_units_on", "_vectors", "_width", "domain_base", "domain_max",
                 "models", "resources", "shapes", "state", "tiers")

    def __init__(self, state: ClusterState, shapes: Sequence[Shape], own_gangs: AbstractSet[str],
                 candidates: Candidates, tree: TopologyTree | None = None, within: Domain | None = None) -> None:
        self.state = state
        self.shapes = list(shapes)
        self.resources: list[str] = sorted({name for shape in shapes for name, _ in shape.requests})
        # The shapes' host ports, after the resources: a node has room for one holder of each (MILLI less
        # what its pods hold), which a victim holding the port frees like any request (kube-scheduler's
        # preemption frees ports too); one holder a shape, so at most one pod of it per node.
        self._first_port = len(self.resources)  # where the ports start in a vector
        self.resources += sorted({name for shape in shapes for name in shape.host_ports})
        position = {name: i for i, name in enumerate(self.resources)}
        # per shape: (index into the vector, amount) for each resource (and host port) it requests
        self._requests = [tuple((position[name], amount) for name, amount in
                                (*shape.requests, *((port, MILLI) for port in shape.host_ports)))
                          for shape in shapes]
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
        # node running candidates -> its model (free vector, base slots per shape, its candidates' gains
        # per tier then shape, the shapes admitted): what selection reads, the only nodes it looks at
        self.models: dict[str, Model] = {}
        tree = tree if tree is not None else state.topology  # the tree the job is planned on
        self._width = len(shapes)
        self._capacity = capacity
        self._priority = priority
        self._everywhere = all(shape.unconstrained for shape in shapes)
        self._all_admitted = [True] * self._width
        self._units_on = candidates.units_on
        self._pods_on = candidates.pods_at
        self._kind = kept_table(state, CACHE_KEY, NodeModels).models((*(shape.key for shape in shapes), *self.tiers))
        self._kept = self._kind.nodes
        base_sums = gain_sums = None
        if tree is state.topology:
            table = slot_table(state)
            special = set(self._units_on) | table.nominated
            if capacity.ignored_on:
                special.update(capacity.ignored_on)
            if 2 * len(special) < len(within.nodes if within is not None else tree.root.nodes):
                base_sums, gain_sums = self._from_table(tree, within, table, special)
        if base_sums is None or gain_sums is None:  # most nodes are special: as cheap to model them all
            base_sums, gain_sums = self._node_by_node(tree, within)
        last = self._width * (len(self.tiers) - 1)  # where the last tier's gains start
        self.domain_base: dict[int, list[int]] = base_sums
        self._gain_sums = gain_sums
        self.domain_max: dict[int, list[int]] = {}
        for ident, base in base_sums.items():
            extra = gain_sums.get(ident)
            self.domain_max[ident] = list(base) if extra is None else [b + extra[last + i] for i, b in enumerate(base)]

    def _model(self, name: str) -> tuple[list[int], list[int] | None] | None:
        """Model one node: its base slots per shape, and (when candidates run there) per tier then
        shape the slots they add; None when no shape may go there at all (or it is not a node).
        Kept between calls (`NodeModels`) for a node holding no nomination and no leaving pod."""
        pods = self._pods_on(name)
        ignored_on = self._capacity.ignored_on
        freed = ignored_on.get(name) if ignored_on else None
        victims = self._units_on.get(name)  # (units are kept alike between calls: compared one by one)
        # (a kept model is of a node that was there and held no nomination: any change since dropped it)
        kept = self._kept.get(name) if freed is None else None
        if kept is not None and kept[0] == victims:
            model = kept[1]
            if model is None:
                return None
            if victims:
                self._known(name, model)
            return model[1], model[2]
        node = self.state.nodes.get(name)
        if node is None:
            return None
        keep = not node.nominated and freed is None
        shapes = self.shapes
        if self._everywhere and not node.unschedulable and not node.taints:
            admitted = self._all_admitted  # the common case: no shape filters nodes, nothing turns pods away
        else:
            admitted = [not admits(shape, node) for shape in shapes]
            if not any(admitted):
                if keep:
                    self._kept[name] = (victims, None)
                return None
        resources = self.resources
        allocatable, used = node.allocatable, node.used
        free = [allocatable.get(resource, 0) - used.get(resource, 0) for resource in resources]
        for index in range(self._first_port, len(free)):  # a host port: room for one holder
            free[index] += MILLI
        if node.nominated:
            held = self._capacity.held_by_others(node, self._priority)
            if held:
                free = [have - held.get(resource, 0) for have, resource in zip(free, resources, strict=True)]
        if freed is not None:
            free = [have + freed.get(resource, 0) for have, resource in zip(free, resources, strict=True)]
        base = [_slots(free, wanted) if ok else 0 for wanted, ok in zip(self._requests, admitted, strict=True)]
        gains = self._gains(pods, free, base, admitted) if pods else None
        model = (free, base, gains, admitted)
        if victims:
            self._known(name, model)
        if keep:
            self._kept[name] = (victims, model)
        return base, gains

    def _known(self, name: str, model: Model) -> None:
        """Note what selection reads of a node running candidates (the only nodes it looks at)."""
        self.models[name] = model

    @property
    def base_free(self) -> dict[str, Vector]:
        """Node running candidates -> its free vector (before any victim goes)."""
        return {name: model[0] for name, model in self.models.items()}

    @property
    def base_slots(self) -> dict[str, list[int]]:
        """Node running candidates -> its slots per shape before any victim goes."""
        return {name: model[1] for name, model in self.models.items()}

    @property
    def admitted(self) -> dict[str, list[bool]]:
        """Node running candidates -> per shape, whether its filters let the shape there."""
        return {name: model[3] for name, model in self.models.items()}

    def _node_by_node(self, tree: TopologyTree, within: Domain | None) -> tuple[dict[int, list[int]],
                                                                                  dict[int, list[int]]]:
        """Per domain, base slots and what candidates add per tier: every node modelled, summed up the tree."""
        width = self._width
        span = width * len(self.tiers)
        base_sums: dict[int, list[int]] = {}
        gain_sums: dict[int, list[int]] = {}
        # A leaf whose nodes all keep their models keeps its sums too, while none of them changes and
        # each runs the same candidates (and none holds a leaving pod this time).
        keep = tree is self.state.topology
        kind, kept, units_on, ignored_on = self._kind, self._kept, self._units_on, self._capacity.ignored_on
        for leaf, names in _leaves(tree, within):
            if keep:
                stored = kind.leaves.get(leaf.id)
                if (stored is not None and stored[0] is tree.root and stored[1] == names
                        and (not ignored_on or ignored_on.keys().isdisjoint(names))
                        and stored[2] == list(map(units_on.get, names))):
                    self.models.update(stored[5])
                    if stored[3] is not None:
                        base_sums[leaf.id] = list(stored[3])
                        if stored[4] is not None:
                            gain_sums[leaf.id] = list(stored[4])
                    continue
            leaf_base: list[int] | None = None
            leaf_gains: list[int] | None = None
            for name in names:
                found = self._model(name)
                if found is None:
                    continue
                base, gains = found
                if gains is not None and any(gains):
                    if leaf_gains is None:
                        leaf_gains = list(gains)
                    else:
                        for i in range(span):
                            leaf_gains[i] += gains[i]
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
            if keep and (not ignored_on or ignored_on.keys().isdisjoint(names)):
                victims = list(map(units_on.get, names))
                models = [kept.get(name) for name in names]
                if all(found is not None and found[0] == on for found, on in zip(models, victims, strict=True)):
                    known = [(name, found[1]) for name, found, on in zip(names, models, victims, strict=True)
                             if on and found is not None and found[1] is not None]
                    kind.keep_leaf(leaf.id, names, (tree.root, list(names), victims,
                                                    None if leaf_base is None else list(leaf_base),
                                                    None if leaf_gains is None else list(leaf_gains), known))
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
                        for i in range(span):
                            extra[i] += child_extra[i]
        return base_sums, gain_sums

    def _from_table(self, tree: TopologyTree, within: Domain | None, table: SlotTable,
                    special: AbstractSet[str]) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
        """The same sums on the cluster's own tree, from placement's offerslot table: a node as it
        stands (allocatable - used) offers there what it offers here, so only the nodes `special` to
        this preemptor are modelled (those holding nominations or pods already leaving: their base
        differs; those running candidates: they add per tier), and each corrects the table's
        domain sums on its path. Every other node is read, summed, from the table."""
        entries = [table.entry(shape) for shape in self.shapes]
        corrections: dict[int, list[int]] = {}
        gain_sums: dict[int, list[int]] = {}
        for name in special:
            path = tree.path(name)
            if not path or (within is not None and within not in path):
                continue  # outside the tree, or outside the subtree modelled
            found = self._model(name)
            if found is None:
                continue  # no shape goes there: the table's figure is 0 too
            base, gains = found
            delta = [b - table.node_slots(entry, name) for b, entry in zip(base, entries, strict=True)]
            if any(delta):
                _add_along(path, corrections, delta)
            if gains is not None and any(gains):
                _add_along(path, gain_sums, gains)
        base_sums: dict[int, list[int]] = {}
        offers = [(entry, table.domain_offers(entry)) for entry in entries]
        for domain in _below(tree, within):
            ident = domain.id
            base = [offered[0] if (offered := memo.get(ident)) is not None else table.offer(entry, (), {}, domain)[0]
                    for entry, memo in offers]
            fix = corrections.get(ident)
            if fix is not None:
                base = [b + f for b, f in zip(base, fix, strict=True)]
            if any(base) or ident in gain_sums:
                base_sums[ident] = base
        return base_sums, gain_sums

    def _gains(self, pods: Mapping[str, PodInfo], free: Vector, base: list[int], admitted: list[bool]) -> list[int]:
        """Per tier then shape, the slots the candidate `pods` on a node up to that tier's priority add to `base`."""
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

    def _bound(self, domain_id: int, tier: int) -> list[int]:
        """`domain_tiers[domain_id][tier]` (the domain has base sums)."""
        base = self.domain_base[domain_id]
        extra = self._gain_sums.get(domain_id)
        if extra is None:
            return list(base)
        start = self._width * tier
        return [b + extra[start + i] for i, b in enumerate(base)]

    @property
    def domain_tiers(self) -> dict[int, list[list[int]]]:
        """Domain id -> per tier, the bound on its slots per shape (see the class docstring)."""
        return {ident: [self._bound(ident, tier) for tier in range(len(self.tiers))] for ident in self.domain_base}

    def lowest_tier(self, domain_id: int, need: Sequence[int]) -> int | None:
        """Index of the first tier whose bound covers `need` in the domain (None: not even the last)."""
        if domain_id not in self.domain_base:
            return None
        for index in range(len(self.tiers)):
            if all(b >= n for b, n in zip(self._bound(domain_id, index), need, strict=True)):
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

    def requests_of(self, pod: PodInfo) -> Vector:
        """The pod's requests as a new vector (the caller's to change)."""
        found = self._vectors.get(id(pod.requests))
        return (found if found is not None else self._vector(pod)).copy()

    def add_pod(self, total: Vector, pod: PodInfo, sign: int = 1) -> None:
        """Add (`sign` -1: take away) the pod's requests into `total`."""
        for i, amount in enumerate(self._vector(pod)):
            total[i] += sign * amount

    def slots_with(self, node: str, freed: Sequence[int] | None) -> list[int]:
        """Slots per shape on `node` once `freed` (summed requests of victims there, a vector) is given back."""
        model = self.models.get(node)
        if model is None:
            return [0] * len(self.shapes)
        if not freed:
            return model[1]
        total = [have + more for have, more in zip(model[0], freed, strict=True)]
        return [_slots(total, wanted) if ok else 0
                for wanted, ok in zip(self._requests, model[3], strict=True)]

    def alone(self, unit: VictimUnit) -> dict[str, int]:
        """Per node, the slots (all shapes summed) that evicting `unit` alone would add there."""
        found = self._alone.get(unit.index)
        if found is None:
            # A node where no other unit has a pod: its candidates are the unit's pods there, and what
            # they add with every tier open (the last: the highest priority) is what the unit adds alone.
            models, units_on = self.models, self._units_on
            width = self._width
            found = {}
            for node, pods in unit.placed:
                model = models.get(node)
                if model is None:
                    continue
                if len(units_on[node]) == 1:
                    gains = model[2]
                    assert gains is not None  # a node running candidates has their gains
                    gained = gains[-1] if width == 1 else sum(gains[-width:])
                else:
                    amounts = [0] * len(self.resources)  # the unit's requests there
                    for pod in pods:
                        self.add_pod(amounts, pod)
                    gained = sum(self.slots_with(node, amounts)) - sum(model[1])
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


def _below(tree: TopologyTree, within: Domain | None) -> Iterator[Domain]:
    """Every domain of the tree (`within` and those below it, when given)."""
    if within is None:
        yield from tree.domains
        return
    stack = [within]
    while stack:
        domain = stack.pop()
        yield domain
        stack.extend(domain.children)


def _priority(pod: PodInfo) -> int:
    return pod.priority


def _add_along(path: Sequence[Domain], sums: dict[int, list[int]], vector: Sequence[int]) -> None:
    """Add `vector` to the sums of every domain on `path`."""
    for domain in path:
        total = sums.get(domain.id)
        if total is None:
            sums[domain.id] = list(vector)
        else:
            for i, amount in enumerate(vector):
                total[i] += amount


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


CACHE_KEY = "preemption.room"
MAX_MODELS = 16  # kinds of question kept (shapes and tiers); past it the least recently asked goes

Model = tuple[Vector, list[int], list[int] | None, list[bool]]  # free, base slots, gains, admitted
# per node: the victim units on it it was modelled with, and its model (None: no shape may go there)
Kept = tuple[list[VictimUnit] | None, Model | None]
# per leaf domain: the tree's root, its nodes, the victim units on each, its base and gain sums, and
# the models of its nodes running candidates
KeptLeaf = tuple[Domain, list[str], list[list[VictimUnit] | None], list[int] | None, list[int] | None,
                 list[tuple[str, Model]]]


class _Kind:
    """What is kept for one question: node models, and leaf sums (with the leaf each node was kept in)."""

    __slots__ = ("leaf_of", "leaves", "nodes")

    def __init__(self) -> None:
        self.nodes: dict[str, Kept] = {}
        self.leaves: dict[int, KeptLeaf] = {}
        self.leaf_of: dict[str, int] = {}

    def keep_leaf(self, ident: int, names: list[str], kept: KeptLeaf) -> None:
        self.leaves[ident] = kept
        for name in names:
            self.leaf_of[name] = ident

    def drop(self, name: str) -> None:
        self.nodes.pop(name, None)
        leaf = self.leaf_of.pop(name, None)
        if leaf is not None:
            self.leaves.pop(leaf, None)


class NodeModels:
    """`Room._model`'s answers kept between calls, per question (the shapes' keys and the tiers), dropped
    for every node the fold changed (`state.node_changes`) or holding a pod it changed
    (`state.pod_changes`), with the sums of the leaf domain it is in. An answer is used only for the
    same victim units on the node, and never for a node holding a nomination or a leaving pod (those
    depend on the preemptor's gangs and victims). Every figure equals a fresh model
    (tests/property/test_room_properties.py, tests/property/test_victim_index.py)."""

    __slots__ = ("_kinds", "_node_changes", "_pod_changes", "state")

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._kinds: dict[tuple[object, ...], _Kind] = {}
        self._node_changes = state.node_changes.cursor()
        self._pod_changes = state.pod_changes.cursor()

    def sync(self) -> None:
        state = self.state
        nodes = self._node_changes.take()
        pods = self._pod_changes.take()
        if nodes is None or pods is None:
            self._kinds.clear()
            return
        if not self._kinds or (not nodes and not pods):
            return
        changed = set(nodes)
        for key in set(pods):
            pod = state.pods.get(key)
            if pod is not None and pod.counted_on:
                changed.add(pod.counted_on)
        for kind in self._kinds.values():
            for name in changed:
                kind.drop(name)

    def models(self, kind: tuple[object, ...]) -> _Kind:
        """What is kept for the question `kind` (made empty on first use)."""
        kept = self._kinds.pop(kind, None)
        if kept is None:
            kept = _Kind()
            if len(self._kinds) >= MAX_MODELS:
                del self._kinds[next(iter(self._kinds))]
        self._kinds[kind] = kept
        return kept
