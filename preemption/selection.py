"""Victim selection inside one candidate domain: a greedy by cost, then dropping what is not needed.

The cost order of a victim set (see `preemption/cost.py`) puts the highest victim priority first,
then the number of jobs broken, then the number of pods. The greedy follows it:

1. Units (see `preemption/victims.py`) are taken in classes: priority ascending, and inside one
   priority surplus pods (no job broken) before whole jobs. A higher class is opened only when the
   lower ones together cannot make room, so the highest victim priority is as low as this domain
   allows.
2. Inside a class, the unit taken next is the one that alone completes the room needed with the
   fewest pods (then the most recently started: least work lost), or, when none completes it, the
   one freeing the most of the job's pods in the domain (fewest jobs for the room). Room is counted
   in the preemptor's pod slots on the domain's nodes (each shape separately).
3. Once there is room, victims are dropped again, last taken first, whenever the room stays enough
   without them: nothing is evicted that the count says is not needed.

The result is only a candidate: the planner validates it with placement (`plan_gang` with the
victims ignored), which decides gather strategies, tier limits and podCountMultiple exactly.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from preemption.room import Room
from preemption.victims import Unit
from state.resources import Resources
from state.topology import Domain


class Selection:
    """The units chosen for one domain and the room they make (slots per shape)."""

    __slots__ = ("domain", "slots", "units")

    def __init__(self, domain: Domain, units: list[Unit], slots: list[int]) -> None:
        self.domain = domain
        self.units = units
        self.slots = slots


class _Tally:
    """Running room in a domain as victims are added and removed (pods counted once each)."""

    __slots__ = ("freed", "need", "node_slots", "pod_refs", "room", "slots", "within")

    def __init__(self, room: Room, domain: Domain, need: Sequence[int], within: set[str]) -> None:
        self.room = room
        self.need = list(need)
        self.within = within
        self.slots = list(room.domain_base.get(domain.id, [0] * len(need)))
        self.freed: dict[str, Resources] = {}
        self.node_slots: dict[str, list[int]] = {}
        self.pod_refs: dict[str, int] = {}

    def missing(self) -> int:
        return sum(max(0, n - s) for n, s in zip(self.need, self.slots, strict=True))

    def _apply(self, unit: Unit, sign: int) -> None:
        touched: set[str] = set()
        for pod in unit.pods:
            refs = self.pod_refs.get(pod.key, 0) + sign
            self.pod_refs[pod.key] = refs
            if (sign > 0 and refs != 1) or (sign < 0 and refs != 0):
                continue  # already freed by another chosen unit (a surplus pod inside a whole gang)
            node = pod.counted_on
            if node not in self.within:
                continue
            freed = self.freed.setdefault(node, {})
            for resource, amount in pod.requests.items():
                freed[resource] = freed.get(resource, 0) + sign * amount
            touched.add(node)
        for node in touched:
            before = self.node_slots.get(node) or self.room.base_slots.get(node)
            after = self.room.slots_with(node, self.freed[node])
            if before is None:
                continue
            for i, (old, new) in enumerate(zip(before, after, strict=True)):
                self.slots[i] += new - old
            self.node_slots[node] = after

    def add(self, unit: Unit) -> None:
        self._apply(unit, 1)

    def remove(self, unit: Unit) -> None:
        self._apply(unit, -1)


def select(room: Room, domain: Domain, units: Sequence[Unit], need: Sequence[int]) -> Selection | None:
    """Victim units making room for `need` pods (per shape) in `domain`, or None when they cannot."""
    within = set(domain.nodes)
    tally = _Tally(room, domain, need, within)
    if tally.missing() <= 0:
        return Selection(domain, [], list(tally.slots))
    classes: dict[tuple[int, int], list[tuple[int, Unit]]] = {}
    for unit in units:
        inside = sum(1 for pod in unit.pods if pod.counted_on in within)
        if inside:
            classes.setdefault((unit.priority, 1 if unit.broken else 0), []).append((inside, unit))
    chosen: list[Unit] = []
    for class_key in sorted(classes):
        members = classes[class_key]
        # largest gain first; among equal gains: fewer pods, most recently started, cost index
        members.sort(key=lambda item: (-item[0], len(item[1].pods), -item[1].started_at, item[1].index))
        negated = [-gain for gain, _ in members]
        used = [False] * len(members)
        cursor = 0
        while tally.missing() > 0:
            missing = tally.missing()
            # entries with gain >= missing form a prefix of the list: the smallest one that completes
            end = bisect.bisect_right(negated, -missing)
            pick = -1
            best: tuple[int, int, float, int] | None = None
            for i in range(end):
                if used[i]:
                    continue
                gain, unit = members[i]
                key = (gain, len(unit.pods), -unit.started_at, unit.index)
                if best is None or key < best:
                    best, pick = key, i
            if pick < 0:
                while cursor < len(members) and used[cursor]:
                    cursor += 1
                if cursor >= len(members):
                    break
                pick = cursor
            used[pick] = True
            unit = members[pick][1]
            tally.add(unit)
            chosen.append(unit)
        if tally.missing() <= 0:
            break
    if tally.missing() > 0:
        return None
    for unit in reversed(list(chosen)):
        tally.remove(unit)
        if tally.missing() <= 0:
            chosen.remove(unit)
        else:
            tally.add(unit)
    return Selection(domain, chosen, list(tally.slots))
