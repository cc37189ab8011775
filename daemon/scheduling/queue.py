"""The scheduling queue: which gang (or lone pod) is tried next, and which wait for the cluster to change.

A queue *unit* is what one scheduling attempt plans: a GangGroup (every pending pod of its gangs;
Koordinator's FirstPod plans them all and the NextPods follow) or one pod without a gang. Units are
derived from `state.pending` at every cycle, never kept as a second copy of the cluster; what the
queue itself remembers is only its bookkeeping, all of which a restart may lose without harm:

- Order (kube-scheduler's activeQ with Koordinator's gang sort): priority (highest pending pod,
  descending), then the last schedule attempt (a unit never tried counts its creation time), then
  creation (`first_seen`), then key. Fully deterministic: no set or dict order leaks.
- Unschedulable units are *parked* (kube-scheduler's unschedulable queue) until something happens
  that could let them fit. Two kinds of change: *capacity* freed anywhere (a pod finished or was
  deleted, an assumed pod released, a nomination cleared) and *structure* (a node added or changed,
  the topology, a PriorityClass), plus changes to the unit itself (a new member pod, its PodGroup or
  a PodGroup of its GangGroup). As in kube-scheduler, a pod being bound elsewhere does not bring a
  parked unit back (it only takes room); a unit that could preempt it tries again at the next release
  (and, in the daemon, at the periodic retry).
  Each observation bumps a tick; a unit parked at tick T comes back once a later tick concerns it.
  A unit parked as *structural* (it could not fit even on an empty cluster: a pod no node admits,
  a MustGather job larger than any domain of its layer, too few members, an invalid spec) ignores
  capacity ticks: no release can help it, so it is not re-planned at every one. The daemon may also
  retry parked units after `retry_parked_seconds` (the simulator does not: a world that does not
  change cannot help). A unit parked with a `retry_at` (jobs a KAI queue's min runtime keeps from
  preemption now may be taken then) is tried again at that time, in the simulator too.
- Backoff: a unit whose binding failed waits `backoff(failures)` seconds before its next attempt.

Pure bookkeeping: no clock of its own (times are passed in), no I/O.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable

import msgspec

from events.model import Event
from state.cluster import ClusterState, subject_of
from state.node_changes import ChangeCursor

# Which queue a unit is in, in kube-scheduler's words (`scheduler_pending_pods{queue}`).
ACTIVE = "active"  # tried at the next cycle
BACKOFF = "backoff"  # its Binding failed: waits out its backoff
UNSCHEDULABLE = "unschedulable"  # parked until a change that could let it fit


class Unit(msgspec.Struct, frozen=True):
    """One schedulable thing: a GangGroup (`gangs` non-empty) or a lone pod (`gangs` empty)."""

    key: str  # the GangGroup's first gang key, or the lone pod's key
    gangs: tuple[str, ...]
    target: str  # what placement is asked about: a gang key (plan_gang) or the pod key (plan_pod)
    pods: tuple[str, ...]  # pending pods, sorted
    priority: int
    first_seen: float

    @property
    def is_gang(self) -> bool:
        return bool(self.gangs)


class UnitStatus:
    """The queue's memory of one unit."""

    __slots__ = ("backoff_until", "failures", "last_attempt", "parked_since", "parked_tick", "reason", "retry_at",
                 "structural")

    def __init__(self) -> None:
        self.last_attempt: float | None = None
        self.parked_tick: int | None = None  # None: not parked
        self.parked_since = 0.0
        self.structural = False  # parked until a structure change (capacity cannot help)
        self.retry_at: float | None = None  # parked, but tried again then whatever changes
        self.backoff_until = 0.0
        self.failures = 0
        self.reason = ""  # last reason shown for it (lone pods; gangs keep theirs in the state)


def unit_of_gang(state: ClusterState, gang: str) -> tuple[str, ...]:
    """The GangGroup a gang is planned with (just itself while its PodGroup is unknown)."""
    info = state.gangs.get(gang)
    if info is None or info.spec is None:
        return (gang,)
    return info.spec.gang_group


def pending_units(state: ClusterState) -> list[Unit]:
    """Every unit with pods waiting to be placed, unsorted (callers order them)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    lone: list[str] = []
    group_of: dict[str, tuple[str, ...]] = {}
    pods = state.pods
    for key in state.pending:
        gang = pods[key].gang
        if not gang:
            lone.append(key)
            continue
        group = group_of.get(gang)
        if group is None:
            group = group_of[gang] = unit_of_gang(state, gang)
        groups.setdefault(group, []).append(key)
    units: list[Unit] = []
    for group, members in groups.items():
        members.sort()
        first_seen = math.inf
        for gang in group:
            info = state.gangs.get(gang)
            if info is not None and info.first_seen < first_seen:
                first_seen = info.first_seen
        targets = sorted({pods[key].gang for key in members})
        units.append(Unit(key=group[0], gangs=group, target=targets[0], pods=tuple(members),
                          priority=max(pods[key].priority for key in members),
                          first_seen=first_seen if first_seen != math.inf else 0.0))
    for key in lone:
        pod = pods[key]
        units.append(Unit(key=key, gangs=(), target=key, pods=(key,), priority=pod.priority,
                          first_seen=pod.first_seen))
    return units


class _PodIndex(abc.ABC):
    """An index over the state's pods kept from the events: an event about a pod re-reads that pod; a
    PriorityClass event re-reads them all (it changes priorities); and an event that moved the priority of
    pods it is not about (a Volcano or KAI PodGroup's class: its job's priority) re-reads those
    (`state.priority_changes`). Nothing else moves what these index."""

    state: ClusterState
    _repriced: ChangeCursor

    def _follow(self, state: ClusterState) -> None:
        self.state = state
        self._repriced = state.priority_changes.cursor()
        self.rebuild()

    @abc.abstractmethod
    def rebuild(self) -> None:
        """Read every pod again."""

    @abc.abstractmethod
    def pod_changed(self, key: str) -> None:
        """Read one pod again."""

    def observe(self, event: Event) -> None:
        self.observe_subject(*subject_of(event))

    def observe_subject(self, kind: str, key: str) -> None:
        """`observe` for an event whose `subject_of` the caller has already found."""
        if kind == "Pod":
            self.pod_changed(key)
        elif kind == "PriorityClass":
            self._repriced.take()
            self.rebuild()
            return
        if self._repriced.position != self.state.priority_changes.end:
            repriced = self._repriced.take()
            if repriced is None:
                self.rebuild()
            else:
                for pod in repriced:
                    self.pod_changed(pod)


class PendingUnits(_PodIndex):
    """`pending_units(state)` kept up to date from the events, for a loop that asks at every cycle.

    A cycle must not walk every pending pod: a simulation with thousands of pods of gangs that can
    never fit would spend most of its time grouping them again. The pending pods are kept grouped by
    gang (and the lone ones apart) and re-sorted only for a gang whose pods changed; a cycle then
    groups gangs into their GangGroups, which costs per gang, not per pod. `observe(event)` re-reads
    the one pod an event is about; a PriorityClass event re-reads them all (it changes priorities), and a
    PodGroup event the pods whose job's priority it moved (`_PodIndex`). Nothing else changes which pods are
    pending, their gang or their priority. `units()` equals
    `pending_units(state)` as a set (tests/unit/daemon/test_pending_units.py holds it to that).
    """

    def __init__(self, state: ClusterState) -> None:
        self._gangs: dict[str, set[str]] = {}  # gang -> its pending pods
        self._ordered: dict[str, tuple[tuple[str, ...], int]] = {}  # gang -> (its pending pods sorted, top priority)
        self._lone: dict[str, Unit] = {}  # pending pod of no gang -> its unit
        self._of: dict[str, str] = {}  # pending pod -> its gang ("" for none)
        self._follow(state)

    def rebuild(self) -> None:
        self._gangs.clear()
        self._ordered.clear()
        self._lone.clear()
        self._of.clear()
        for key in self.state.pending:
            self.pod_changed(key)

    def pod_changed(self, key: str) -> None:
        """Re-read one pod: whether it is pending, in which gang, with which priority."""
        old = self._of.pop(key, None)
        if old is not None:
            if old:
                members = self._gangs[old]
                members.discard(key)
                self._ordered.pop(old, None)
                if not members:
                    del self._gangs[old]
            else:
                del self._lone[key]
        if key not in self.state.pending:
            return
        pod = self.state.pods[key]
        gang = pod.gang
        self._of[key] = gang
        if gang:
            self._gangs.setdefault(gang, set()).add(key)
            self._ordered.pop(gang, None)
        else:
            self._lone[key] = Unit(key=key, gangs=(), target=key, pods=(key,), priority=pod.priority,
                                   first_seen=pod.first_seen)

    def units(self) -> list[Unit]:
        """Every unit with pods waiting to be placed, unsorted (as `pending_units`)."""
        state = self.state
        groups: dict[tuple[str, ...], list[str]] = {}
        for gang in self._gangs:
            groups.setdefault(unit_of_gang(state, gang), []).append(gang)
        units: list[Unit] = []
        for group, gangs in groups.items():
            if len(gangs) == 1:
                members, priority = self._sorted(gangs[0])
            else:
                parts = [self._sorted(gang) for gang in gangs]
                members = tuple(sorted(key for part in parts for key in part[0]))
                priority = max(part[1] for part in parts)
            first_seen = math.inf
            for gang in group:
                info = state.gangs.get(gang)
                if info is not None and info.first_seen < first_seen:
                    first_seen = info.first_seen
            units.append(Unit(key=group[0], gangs=group, target=min(gangs), pods=members, priority=priority,
                              first_seen=first_seen if first_seen != math.inf else 0.0))
        units.extend(self._lone.values())
        return units

    def _sorted(self, gang: str) -> tuple[tuple[str, ...], int]:
        cached = self._ordered.get(gang)
        if cached is None:
            members = self._gangs[gang]
            pods = self.state.pods
            cached = self._ordered[gang] = (tuple(sorted(members)), max(pods[key].priority for key in members))
        return cached


class PlacedPriorities(_PodIndex):
    """The lowest priority among placed pods (bound or assumed), kept from the events as `PendingUnits`
    is: a unit above it may find victims, so the loop's queueing hint must not skip it. Equals
    `min(p.priority for p in state.pods.values() if p.placed_node)` (1 << 62 when none is placed)."""

    def __init__(self, state: ClusterState) -> None:
        self._of: dict[str, int] = {}  # placed pod -> its priority
        self._count: dict[int, int] = {}  # priority -> placed pods of it
        self._follow(state)

    def rebuild(self) -> None:
        self._of.clear()
        self._count.clear()
        for key in self.state.pods:
            self.pod_changed(key)

    def pod_changed(self, key: str) -> None:
        pod = self.state.pods.get(key)
        new = pod.priority if pod is not None and pod.placed_node else None
        old = self._of.get(key)
        if old == new:
            return  # most events: a placed pod stays placed at its priority, or one not placed stays so
        if old is not None:
            del self._of[key]
            left = self._count[old] - 1
            if left:
                self._count[old] = left
            else:
                del self._count[old]
        if new is not None:
            self._of[key] = new
            self._count[new] = self._count.get(new, 0) + 1

    def lowest(self) -> int:
        return min(self._count, default=1 << 62)


class SchedulingQueue:
    def __init__(self, *, retry_parked_seconds: float | None = None, backoff_initial_seconds: float = 1.0,
                 backoff_max_seconds: float = 10.0) -> None:
        self.retry_parked_seconds = retry_parked_seconds
        self.backoff_initial_seconds = backoff_initial_seconds
        self.backoff_max_seconds = backoff_max_seconds
        self.status: dict[str, UnitStatus] = {}
        self._tick = 0
        self._capacity_tick = 0  # last tick at which capacity was freed somewhere
        self._structure_tick = 0  # last tick at which nodes, topology or gang specs changed
        self._unit_ticks: dict[str, int] = {}  # gang or pod key -> last tick that concerned it

    # ------------------------------------------------------------------ observations

    def capacity_freed(self) -> None:
        """Room was freed somewhere: every unit parked for want of room may fit now."""
        self._tick += 1
        self._capacity_tick = self._tick

    def structure_changed(self) -> None:
        """Nodes, the topology or gang specs changed: every parked unit may fit now."""
        self._tick += 1
        self._capacity_tick = self._structure_tick = self._tick

    def unit_changed(self, key: str) -> None:
        """Something about one gang (or lone pod) changed: a new member, its PodGroup."""
        self._tick += 1
        self._unit_ticks[key] = self._tick

    # ------------------------------------------------------------------ bookkeeping

    def status_of(self, key: str) -> UnitStatus:
        status = self.status.get(key)
        if status is None:
            status = self.status[key] = UnitStatus()
        return status

    def attempted(self, unit: Unit, now: float) -> UnitStatus:
        status = self.status_of(unit.key)
        status.last_attempt = now
        return status

    def park(self, unit_key: str, now: float, *, structural: bool = False, retry_at: float | None = None) -> None:
        """Wait for a change that could help (see the module docstring), or until `retry_at` (a time after
        which waiting alone may help: jobs a KAI queue's min runtime keeps may be preempted)."""
        status = self.status_of(unit_key)
        status.parked_tick = self._tick
        status.parked_since = now
        status.structural = structural
        status.retry_at = retry_at

    def back_off(self, unit_key: str, now: float) -> float:
        """Wait before the next attempt (exponential in the failures so far); returns when it may retry."""
        status = self.status_of(unit_key)
        status.failures += 1
        delay = min(self.backoff_max_seconds, self.backoff_initial_seconds * 2 ** (status.failures - 1))
        status.backoff_until = now + delay
        status.parked_tick = None
        return status.backoff_until

    def succeeded(self, unit_key: str) -> None:
        status = self.status.get(unit_key)
        if status is not None:
            status.failures = 0
            status.backoff_until = 0.0

    def forget_gone(self, live: Iterable[str]) -> None:
        """Drop bookkeeping of units that no longer exist (keeps memory bounded in a long run)."""
        keep = set(live)
        for key in [key for key in self.status if key not in keep]:
            del self.status[key]
        for key in [key for key in self._unit_ticks if key not in keep]:
            del self._unit_ticks[key]

    # ------------------------------------------------------------------ what to try now

    def ready(self, unit: Unit, now: float) -> bool:
        queue = self.queue_of(unit.key, now)
        return queue == ACTIVE or (queue == UNSCHEDULABLE and self.changed_since_parked(unit))

    def queue_of(self, key: str, now: float) -> str:
        """`ACTIVE`, `BACKOFF` or `UNSCHEDULABLE` for the unit `key` (a unit parked only until a change of
        itself counts as unschedulable until the change: `ready` also asks `changed_since_parked`)."""
        status = self.status.get(key)
        if status is None:
            return ACTIVE
        if status.backoff_until > now:
            return BACKOFF
        parked = status.parked_tick
        if parked is None:
            return ACTIVE
        if (self._structure_tick if status.structural else self._capacity_tick) > parked:
            return ACTIVE
        if self._unit_ticks.get(key, 0) > parked:
            return ACTIVE
        if self.retry_parked_seconds is not None and now >= status.parked_since + self.retry_parked_seconds:
            return ACTIVE
        if status.retry_at is not None and now >= status.retry_at:
            return ACTIVE
        return UNSCHEDULABLE

    def changed_since_parked(self, unit: Unit) -> bool:
        """Whether something about the unit itself (a member came or went, its PodGroup or one of its
        GangGroup changed) happened after it was parked: its reason may be stale, whatever the room."""
        status = self.status.get(unit.key)
        if status is None or status.parked_tick is None:
            return False
        parked = status.parked_tick
        ticks = self._unit_ticks
        if any(ticks.get(gang, 0) > parked for gang in unit.gangs) or ticks.get(unit.key, 0) > parked:
            return True
        return not unit.gangs and any(ticks.get(pod, 0) > parked for pod in unit.pods)

    def sort_key(self, unit: Unit) -> tuple[int, float, float, str]:
        status = self.status.get(unit.key)
        last = status.last_attempt if status is not None and status.last_attempt is not None else unit.first_seen
        return (-unit.priority, last, unit.first_seen, unit.key)

    def ordered(self, units: Iterable[Unit], now: float) -> list[Unit]:
        """The units to try this cycle, in queue order."""
        return sorted((unit for unit in units if self.ready(unit, now)), key=self.sort_key)

    def next_deadline(self, after: float) -> float | None:
        """The earliest time after `after` at which a unit becomes ready by time alone (backoff, retry)."""
        best: float | None = None
        for status in self.status.values():
            when: float | None = None
            if status.backoff_until > 0.0 and status.parked_tick is None:
                when = status.backoff_until
            elif status.parked_tick is not None:
                if self.retry_parked_seconds is not None:
                    when = status.parked_since + self.retry_parked_seconds
                if status.retry_at is not None and (when is None or status.retry_at < when):
                    when = status.retry_at
            if when is not None and when > after and (best is None or when < best):
                best = when
        return best
