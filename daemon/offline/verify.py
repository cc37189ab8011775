"""`replay --verify`: re-run the scheduler's decisions over a recorded log and check they come out the same.

The loop decides a unit's attempt in one synchronous step (`daemon/scheduling/decisions.py`): it
plans the unit and records, in a row, everything it decides (`GangPlanned`, one `PodAssumed` per
assignment, `BindRequested` when Permit passes at once; or `PreemptionPlanned` with its evictions,
nominations and cleared nominations; and the `GangPending` reasons that changed). At the first of
those records the state is exactly the fold of every event before it, which the log holds. So
verify folds the log and, at each attempt it finds, calls the very same step on that state (on the
recorded time, with no API at all, the default `JobPreemptor`) with an event sink that checks every
event the step emits against the next one the log holds (all fields but `seq` and `time`) and folds
the recorded one. There is no planning logic here: a mismatch means the decision was not a
deterministic function of the recorded state (a bug in the fold, in placement or in the step, or an
input the log did not capture).

An attempt starts at a `GangPlanned`, a `PodAssumed` of a lone pod, a `PreemptionPlanned`, or a
`GangPending` that an attempt wrote (not one written after a failed bind or an internal error,
which name themselves). What the step reads of the loop's memory is kept from the log: a unit's
wait at Permit from the `Hold` effects of the steps re-run here (while one of its pods is still
assumed), and the last reason shown for a lone pod from its recorded `GangPending` (forgotten once
it is bound or deleted, as the loop's queue forgets it). Decisions the loop makes outside an attempt
(Permit passing later, timeouts, nominations given up, adoption after a restart, releases after a
failed bind) are folded, not re-derived.

Every event is folded through `state.invariants.InvariantCheck`, so the invariants (no node promised
more than its allocatable, no pod on two nodes or on a missing node, no gang we started binding left
below minMember past its timeout) are checked at every decision and at the end; each break is a
`Violation` naming the event's seq, and fails the verification like a mismatch does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec

from daemon.offline.bulk import paused_gc
from daemon.scheduling import decisions
from daemon.scheduling.decisions import (
    DecisionConfig,
    Effect,
    NominationWait,
    PermitWait,
    Step,
    Waits,
)
from daemon.scheduling.ports import Preemptor
from daemon.scheduling.queue import Unit, pending_units
from events.dispatch import each, exhaustive
from events.model import (
    BUDGET_EVENTS,
    COMPOSITE_EVENTS,
    JOB_OBJECT_EVENTS,
    POD_GROUP_EVENTS,
    PRIORITY_CLASS_EVENTS,
    QUOTA_OBJECT_EVENTS,
    TOPOLOGY_OBJECT_EVENTS,
    VOLUME_EVENTS,
    BindFailed,
    BindRequested,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    WorkloadDeleted,
    WorkloadUpserted,
)
from events.objects import DEFAULT_SCHEDULER_NAME
from preemption import JobPreemptor
from state.cluster import ClusterState
from state.invariants import InvariantCheck, Violation


@dataclass
class DecisionCheck:
    plans: int = 0  # attempts that planned a gang
    lone_pods: int = 0  # attempts that planned a lone pod
    preemptions: int = 0  # attempts that planned a preemption
    pending_reasons: int = 0  # attempts that only said why the unit waits
    waits: int = 0  # waits at Permit passed or timed out, nominations given up
    events: int = 0  # decision events re-derived, one by one
    internal_errors: int = 0  # attempts whose step raised (the loop recorded an internal error for them)
    mismatches: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)  # invariants the folded state broke (state.invariants)

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.violations

    @property
    def same_decisions(self) -> bool:
        return not self.mismatches

    @property
    def checked(self) -> int:
        return self.plans + self.lone_pods + self.preemptions + self.pending_reasons + self.waits


class _Diverged(Exception):
    """The step emitted an event the log does not hold at that point."""


class _LogMemory:
    """The loop's memory of units as far as the log shows it (see the module docstring)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.kept = Waits()  # the loop's own bookkeeping of waits, kept from the re-run steps' effects
        self.waits: dict[str, PermitWait] = self.kept.waiting
        self.nominated: dict[str, NominationWait] = self.kept.nominated
        self.reasons: dict[str, str] = {}

    def waiting(self, unit: str) -> PermitWait | None:
        wait = self.waits.get(unit)
        if wait is None:
            return None
        pods = self.state.pods
        if not any((pod := pods.get(key)) is not None and pod.assumed_node and not pod.node_name for key in wait.order):
            del self.waits[unit]  # everything it held was bound or released since
            return None
        return wait

    def shown_reason(self, unit: str) -> str:
        return self.reasons.get(unit, "")

    def observe(self, event: Event) -> None:
        """Keep what the loop's queue remembers of lone pods' reasons from a folded event."""
        remember = _REMEMBERED[type(event)]
        if remember is not None:
            remember(self, event)

    def _reason_shown(self, event: GangPending) -> None:
        if event.gang not in self.state.gangs:
            self.reasons[event.gang] = event.reason  # a lone pod's reason (gangs keep theirs in the state)

    def _pod_bound(self, event: PodBound) -> None:
        self.reasons.pop(event.pod, None)  # the queue forgets a unit that is no longer pending

    def _pod_deleted(self, event: PodDeleted) -> None:
        self.reasons.pop(event.key, None)

    def remember(self, effects: list[Effect], now: float) -> None:
        for effect in effects:
            self.kept.remember(effect, now)


class _Checker:
    """The step's event sink: each emitted event must be the log's next one; the recorded one is folded."""

    def __init__(self, events: list[Event], position: int, fold: Callable[[Event], None], memory: _LogMemory) -> None:
        self.events = events
        self.position = position
        self.fold = fold
        self.memory = memory
        self.matched = 0
        self.difference = ""

    def record(self, emitted: Event) -> None:
        recorded = self.events[self.position] if self.position < len(self.events) else None
        if recorded is None or _without_stamp(emitted) != _without_stamp(recorded):
            self.difference = (f"recorded {_show(recorded) if recorded is not None else 'nothing more'}; "
                               f"re-planned {_show(emitted)}")
            raise _Diverged
        self.fold(recorded)
        self.position += 1
        self.matched += 1


def _without_stamp(event: Event) -> Event:
    stripped: Event = msgspec.structs.replace(event, seq=0, time=0.0)
    return stripped


def _show(event: Event) -> str:
    shown = msgspec.json.encode(_without_stamp(event)).decode()
    return shown if len(shown) <= 300 else shown[:300] + "…"


# Event type -> what the loop's memory of lone pods' reasons makes of it (exhaustive, events.dispatch).
_REMEMBERED: dict[type, Callable[[_LogMemory, Any], None] | None] = exhaustive("replay --verify's memory", {
    GangPending: _LogMemory._reason_shown,
    PodBound: _LogMemory._pod_bound,
    PodDeleted: _LogMemory._pod_deleted,
    **each((*POD_GROUP_EVENTS, *TOPOLOGY_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS, NodeUpserted, NodeDeleted,
            PodUpserted, WorkloadUpserted, WorkloadDeleted, ObjectUndecodable, PodAssumed, PodForgotten,
            *COMPOSITE_EVENTS, BindRequested, BindFailed, PodNominated, NominationCleared, EvictionRequested,
            GangTimedOut, GangPlanned, PreemptionPlanned), None),
    **each((*QUOTA_OBJECT_EVENTS, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS), None),
})

ATTEMPT = "attempt"
WAIT = "wait"
NOMINATIONS = "nominations"


def _attempt_of_gang(memory: _LogMemory, event: GangPlanned | PreemptionPlanned) -> tuple[str, str] | None:
    return ATTEMPT, event.gang


def _attempt_of_lone_pod(memory: _LogMemory, event: PodAssumed) -> tuple[str, str] | None:
    return (ATTEMPT, event.pod) if not event.gang else None  # a gang's pods are assumed after its GangPlanned


def _attempt_that_said_why(memory: _LogMemory, event: GangPending) -> tuple[str, str] | None:
    # Not a reason written after a failed bind or an internal error: those name themselves.
    return (ATTEMPT, event.gang) if decisions.written_by_attempt(event.reason) else None


def _wait_step(memory: _LogMemory, event: BindRequested | PodForgotten) -> tuple[str, str] | None:
    """Permit passing after a wait, pods released because their node is gone, or the wait timed out."""
    if isinstance(event, PodForgotten) and not decisions.written_by_wait(event.reason):
        return None
    for unit, wait in memory.waits.items():
        if event.pod in wait.order and memory.waiting(unit) is not None:
            return WAIT, unit
    return None


def _nomination_step(memory: _LogMemory, event: NominationCleared) -> tuple[str, str] | None:
    """Nominations given up past the unit's deadline."""
    if decisions.written_by_giving_up(event.reason):
        for unit, nominated in memory.nominated.items():
            if event.pod in nominated.pods:
                return NOMINATIONS, unit
    return None


# Event type -> the step of the loop that may have written it first in a row, and for which unit.
# Exhaustive (events.dispatch): a new event type must say which step, if any, writes it first.
_STARTS: dict[type, Callable[[_LogMemory, Any], tuple[str, str] | None] | None] = exhaustive("replay --verify", {
    GangPlanned: _attempt_of_gang,
    PreemptionPlanned: _attempt_of_gang,
    PodAssumed: _attempt_of_lone_pod,
    GangPending: _attempt_that_said_why,
    BindRequested: _wait_step,
    PodForgotten: _wait_step,
    NominationCleared: _nomination_step,
    # Written inside a step, after its first event (PodNominated, EvictionRequested, GangTimedOut), by
    # the API's answer to a bind (PodBound, BindFailed), or observed:
    **each((*POD_GROUP_EVENTS, *TOPOLOGY_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS, PodNominated, EvictionRequested,
            GangTimedOut, PodBound, BindFailed, NodeUpserted, NodeDeleted, PodUpserted, PodDeleted, WorkloadUpserted,
            WorkloadDeleted, ObjectUndecodable, *COMPOSITE_EVENTS), None),
    **each((*QUOTA_OBJECT_EVENTS, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS), None),
})


def _unit_for(state: ClusterState, key: str) -> Unit | None:
    for unit in pending_units(state):
        if unit.key == key or key in unit.gangs or (not unit.gangs and key in unit.pods):
            return unit
    return None


def verify_decisions(events: list[Event], *, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
                     preemptor: Preemptor | None = None, limit: int = 20,
                     start: ClusterState | None = None, config: DecisionConfig | None = None) -> DecisionCheck:
    """Fold `events` (onto `start`, e.g. a pruned log's base snapshot, else an empty state) and re-run
    every attempt through the loop's decision step; at most `limit` mismatches are described."""
    hook: Preemptor = preemptor or JobPreemptor()
    rules = config or DecisionConfig()
    state = start if start is not None else ClusterState(scheduler_name)
    memory = _LogMemory(state)
    check = DecisionCheck()
    invariants = InvariantCheck(state, default_schedule_timeout_seconds=rules.default_schedule_timeout_seconds)

    def fold(event: Event) -> None:
        invariants.fold(event)
        memory.observe(event)
    index = 0
    total = len(events)

    def mismatch(event: Event, text: str) -> None:
        if len(check.mismatches) < limit:
            check.mismatches.append(f"seq {event.seq}: {text}")
        elif len(check.mismatches) == limit:
            check.mismatches.append("… more mismatches not shown")

    def run(step_of: Callable[[Step], object], event: Event, key: str) -> None:
        """Re-run one step from `events[index]` with the checker as its sink; go on after what it matched."""
        nonlocal index
        checker = _Checker(events, index, fold, memory)
        step = Step(state, event.time, checker.record, memory, config=rules, preemptor=hook, room_cache={})
        try:
            step_of(step)
        except _Diverged:
            mismatch(events[checker.position] if checker.position < total else event, f"{key}: {checker.difference}")
        except Exception:  # the loop parked the unit with an internal error here, as the log shows
            check.internal_errors += 1
        memory.remember(step.effects, event.time)
        check.events += checker.matched
        if checker.position == index:  # not even the first event matched: fold it, go on
            fold(event)
            checker.position += 1
        index = checker.position

    with paused_gc(freeze=True):
        while index < total:
            event = events[index]
            starts = _STARTS[type(event)]
            kind, key = (starts(memory, event) if starts is not None else None) or ("", "")
            if kind == ATTEMPT:
                if isinstance(event, GangPlanned):
                    check.plans += 1
                elif isinstance(event, PodAssumed):
                    check.lone_pods += 1
                elif isinstance(event, PreemptionPlanned):
                    check.preemptions += 1
                else:
                    check.pending_reasons += 1
                unit = _unit_for(state, key)
                if unit is None:
                    mismatch(event, f"{key}: the log decides for it but nothing of it is pending in the recorded state")
                else:
                    run(partial(_attempt, unit=unit), event, key)
                    continue
            elif kind == WAIT:
                check.waits += 1
                run(partial(_service_wait, unit=key, wait=memory.waits[key]), event, key)
                continue
            elif kind == NOMINATIONS:
                check.waits += 1
                run(partial(_service_nominations, unit=key, nominated=memory.nominated[key]), event, key)
                continue
            fold(event)
            index += 1
    check.violations = invariants.finish()
    return check


def _attempt(step: Step, *, unit: Unit) -> None:
    decisions.attempt(step, unit)


def _service_wait(step: Step, *, unit: str, wait: PermitWait) -> None:
    step.stage = "permit"
    decisions.service_wait(step, unit, wait)


def _service_nominations(step: Step, *, unit: str, nominated: NominationWait) -> None:
    step.stage = "nominate"
    decisions.service_nominations(step, unit, nominated)
