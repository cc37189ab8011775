"""Victim selection inside one candidate domain: a greedy by cost, then dropping what is not needed.

The cost order of a victim set (see `preemption/cost.py`) puts the highest victim priority first,
then the victims beyond their PodDisruptionBudgets, then the number of jobs broken, then the number
of pods. The greedy follows it:

1. Units (see `preemption/victims.py`) are taken in classes: priority ascending, inside one priority
   the units whose eviction stays within their PodDisruptionBudgets first (preemption/budgets.py),
   and then surplus pods (no job broken) before whole jobs. A higher class is opened only when the
   lower ones together cannot make room, so the highest victim priority is as low as this domain
   allows.
2. Inside a class, the unit taken next is the one that really completes the room needed with the
   fewest pods (then the most recently started: least work lost), or, when none completes it, the
   one freeing the most room (fewest jobs for the room). Room is counted in the preemptor's pod
   slots on the domain's nodes (each shape separately), so eight small pods that free one node are
   weighed as one node, not eight. A unit freeing nothing by itself (half a node) is kept aside and
   taken only if the class still lacks room, since several of them may free a node together.
3. Once there is room, victims are dropped again, last taken first, whenever the room stays enough
   without them: nothing is evicted that the count says is not needed.

A `Gate` (quota reclaim: `preemption/reclaim.py`) may refuse a unit given the units taken so far;
a refused unit is passed over. The gate must accept any subset of a set it accepted, so dropping
victims (step 3) never needs its consent.

The result is only a candidate: the planner validates it with placement (`plan_gang` with the
victims ignored), which decides gather strategies, tier limits and podCountMultiple exactly.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from preemption.room import Room
from preemption.victims import Gate, VictimUnit
from state.topology import Domain


class Selection:
    """The units chosen for one domain and the room they make (slots per shape). `lifted`: the units
    taken first whatever room they make (`preemption/terms.py`), among `units`; `grows`: whether the
    planner may grow the set by capacity when placement rejects it."""

    __slots__ = ("domain", "grows", "lifted", "slots", "units")

    def __init__(self, domain: Domain, units: list[VictimUnit], slots: list[int],
                 lifted: Sequence[VictimUnit] = ()) -> None:
        self.domain = domain
        self.units = units
        self.slots = slots
        self.lifted = lifted
        self.grows = True


class _Tally:
    """Running room in a domain as victims are added and removed (pods counted once each)."""

    __slots__ = ("alone", "clean", "freed", "need", "node_slots", "pod_refs", "room", "slots", "users", "within")

    def __init__(self, room: Room, domain: Domain, need: Sequence[int], within: set[str]) -> None:
        self.room = room
        self.need = list(need)
        self.within = within
        self.slots = list(room.domain_base.get(domain.id, [0] * len(need)))
        self.freed: dict[str, list[int]] = {}  # node -> requests freed there (`Room.vector`)
        self.node_slots: dict[str, list[int]] = {}
        self.pod_refs: dict[str, int] = {}  # pod in the domain -> how many units in the tally hold it (none: not there)
        # node -> how many units in the tally have a pod counted there (in the domain); and for a unit
        # whose nodes had none when it was added, the slots per shape adding it gave (`contribution`)
        self.users: dict[str, int] = {}
        self.clean: dict[int, list[int]] = {}
        # One shape only: unit index -> the slots it frees in the domain on its own (`Room.alone`)
        self.alone: dict[int, int] | None = {} if len(need) == 1 else None

    def missing(self) -> int:
        need, slots = self.need, self.slots
        if len(need) == 1:
            return max(0, need[0] - slots[0])
        return sum(max(0, n - s) for n, s in zip(need, slots, strict=True))

    def _apply(self, unit: VictimUnit, sign: int) -> None:
        room = self.room
        # One shape, a unit none of whose pods is freed and none of whose nodes is touched yet: each of
        # its nodes then offers what the unit frees there on its own (`Room.alone`), no recount needed.
        fresh = (sign > 0 and self.alone is not None and unit.index in self.alone
                 and self.freed.keys().isdisjoint(unit.nodes) and self.pod_refs.keys().isdisjoint(unit.keys))
        touched: set[str] = set()
        within, users, pod_refs, all_freed = self.within, self.users, self.pod_refs, self.freed
        requests_of = room.requests_of
        clean = sign > 0
        if sign < 0:
            self.clean.pop(unit.index, None)
        for node, pods in unit.placed:
            if node not in within:
                continue  # room elsewhere is not this domain's (pods are counted inside it only)
            count = users.get(node, 0)
            if count:
                clean = False
            users[node] = count + sign
            for pod in pods:
                refs = pod_refs.get(pod.key, 0) + sign
                if refs:
                    pod_refs[pod.key] = refs
                else:
                    del pod_refs[pod.key]
                if (sign > 0 and refs != 1) or (sign < 0 and refs != 0):
                    continue  # already freed by another chosen unit (a surplus pod inside a whole gang)
                freed = all_freed.get(node)
                if freed is None and sign > 0:
                    all_freed[node] = requests_of(pod)  # a copy: the first pod freed there
                else:
                    if freed is None:
                        freed = all_freed[node] = [0] * len(room.resources)
                    room.add_pod(freed, pod, sign)
                touched.add(node)
        alone = room.alone(unit) if fresh else None
        slots, node_slots, models = self.slots, self.node_slots, room.models
        one = len(slots) == 1  # one shape (the common case): single figures, no loop over shapes
        added = [0] * len(slots)
        for node in touched:
            before = node_slots.get(node)
            if before is None:
                model = models.get(node)
                if model is None:
                    continue
                before = model[1]
            after = ([before[0] + alone.get(node, 0)] if alone is not None
                     else room.slots_with(node, all_freed[node]))
            node_slots[node] = after
            if one:
                added[0] += after[0] - before[0]
            else:
                for i, (old, new) in enumerate(zip(before, after, strict=True)):
                    added[i] += new - old
        for i, gained in enumerate(added):
            slots[i] += gained
        if clean:
            self.clean[unit.index] = added

    def contribution(self, unit: VictimUnit) -> list[int] | None:
        """The slots per shape the tally would lose without `unit`, when no other unit in it has a pod
        on the unit's nodes, nor had when it was added (the nodes' freed room is then the unit's
        own, exactly as when it was added); None otherwise (only removing it tells)."""
        added = self.clean.get(unit.index)
        if added is None:
            return None
        users, within = self.users, self.within
        if any(users[node] != 1 for node in unit.nodes if node in within):
            return None
        return added

    def gain(self, unit: VictimUnit) -> int:
        """How much of what is missing evicting `unit` now would provide (pods freed already count once)."""
        room = self.room
        alone = self.alone.get(unit.index) if self.alone is not None else None
        if (alone is not None and self.freed.keys().isdisjoint(unit.nodes)
                and self.pod_refs.keys().isdisjoint(unit.keys)):
            # nothing of it is freed yet, and no node of it is touched: what it frees on its own
            return min(max(0, self.need[0] - self.slots[0]), alone)
        extra: dict[str, list[int]] = {}
        for pod in unit.pods:
            node = pod.counted_on
            if self.pod_refs.get(pod.key, 0) > 0 or node not in self.within or node not in room.models:
                continue
            bucket = extra.get(node)
            if bucket is None:
                freed = self.freed.get(node)
                bucket = extra[node] = list(freed) if freed else [0] * len(room.resources)
            room.add_pod(bucket, pod)
        if not extra:
            return 0
        delta = [0] * len(self.need)
        for node, merged in extra.items():
            before = self.node_slots.get(node) or room.models[node][1]
            for i, (old, new) in enumerate(zip(before, room.slots_with(node, merged), strict=True)):
                delta[i] += new - old
        return sum(min(max(0, n - s), d) for n, s, d in zip(self.need, self.slots, delta, strict=True))

    def add(self, unit: VictimUnit) -> None:
        self._apply(unit, 1)

    def remove(self, unit: VictimUnit) -> None:
        self._apply(unit, -1)


MAX_COMPLETER_SCAN = 256


def select(room: Room, domain: Domain, units: Sequence[VictimUnit], need: Sequence[int],
           gate: Gate | None = None, violating: Callable[[VictimUnit], bool] | None = None,
           lifted: Sequence[VictimUnit] = ()) -> Selection | None:
    """Victim units making room for `need` pods (per shape) in `domain`, or None when they cannot.
    `violating(unit)`: whether evicting the unit goes beyond a PodDisruptionBudget (None: no budgets).
    `lifted`: units that go first whatever room they make (they lift required anti-affinity that keeps
    the preemptor out: `preemption/terms.py`); the greedy completes the room after them and never
    drops them."""
    within = set(domain.nodes)
    tally = _Tally(room, domain, need, within)
    chosen: list[VictimUnit] = []
    taken: set[int] = set()
    for unit in lifted:
        if gate is not None:
            if not gate.admits(unit):
                for other in chosen:
                    gate.release(other)
                return None
            gate.take(unit)
        tally.add(unit)
        chosen.append(unit)
        taken.add(unit.index)
    if tally.missing() <= 0:
        if gate is not None:
            for unit in chosen:
                gate.release(unit)
        return Selection(domain, chosen, list(tally.slots), lifted)
    classes: dict[tuple[int, int, int], list[tuple[int, VictimUnit]]] = {}
    for unit in units:
        if taken and unit.index in taken:
            continue
        if not unit.nodes.isdisjoint(within):
            gains = room.alone(unit)
            # the unit's gains inside the domain, read from the smaller side (a leaf of a few nodes, or
            # a unit on a few nodes of a large domain)
            alone = (sum([gains.get(node, 0) for node in domain.nodes]) if len(domain.nodes) < len(gains)
                     else sum([gained for node, gained in gains.items() if node in within]))
            over = 1 if violating is not None and violating(unit) else 0
            classes.setdefault((unit.priority, over, 1 if unit.broken else 0), []).append((alone, unit))
            if tally.alone is not None:
                tally.alone[unit.index] = alone
    for class_key in sorted(classes):
        members = classes[class_key]
        # largest gain alone first; among equal gains: fewer pods, most recently started, cost index
        members.sort(key=lambda item: (-item[0], len(item[1].pods), -item[1].started_at, item[1].index))
        negated = [-gain for gain, _ in members]
        used = [False] * len(members)
        deferred: list[VictimUnit] = []
        cursor = 0
        while (missing := tally.missing()) > 0:
            # a unit that completes the room: among those whose gain alone could (a prefix), the one
            # really completing it now with the fewest pods, then the most recently started
            end = bisect.bisect_right(negated, -missing)
            pick = -1
            best: tuple[int, float, int] | None = None
            looked = 0
            for i in range(end):
                if used[i]:
                    continue
                looked += 1
                if looked > MAX_COMPLETER_SCAN:
                    break
                unit = members[i][1]
                key = (len(unit.pods), -unit.started_at, unit.index)
                if (best is None or key < best) and tally.gain(unit) >= missing:
                    best, pick = key, i
            if pick < 0:  # none completes: the one freeing most
                while cursor < len(members) and used[cursor]:
                    cursor += 1
                if cursor >= len(members):
                    break
                pick = cursor
            used[pick] = True
            unit = members[pick][1]
            if tally.gain(unit) <= 0:
                deferred.append(unit)  # frees nothing by itself; may together with others (below)
                continue
            if gate is not None:
                if not gate.admits(unit):
                    continue
                gate.take(unit)
            tally.add(unit)
            chosen.append(unit)
        # units freeing nothing alone may free room together (two half-node pods on one node)
        for unit in deferred:
            if tally.missing() <= 0:
                break
            if gate is not None:
                if not gate.admits(unit):
                    continue
                gate.take(unit)
            tally.add(unit)
            chosen.append(unit)
        if tally.missing() <= 0:
            break
    if tally.missing() > 0:
        if gate is not None:
            for unit in chosen:
                gate.release(unit)
        return None
    for unit in reversed(chosen[len(lifted):]):  # the lifted units stay, whatever room they make
        lost = tally.contribution(unit)
        if lost is not None:  # what removing it would leave, without removing it
            if sum(max(0, n - (s - d)) for n, s, d in zip(tally.need, tally.slots, lost, strict=True)) > 0:
                continue  # needed: kept
            tally.remove(unit)
        else:
            tally.remove(unit)
            if tally.missing() > 0:
                tally.add(unit)
                continue
        chosen.remove(unit)
        if gate is not None:
            gate.release(unit)
    if gate is not None:
        for unit in chosen:
            gate.release(unit)  # the gate holds nothing between selections
    return Selection(domain, chosen, list(tally.slots), lifted)
