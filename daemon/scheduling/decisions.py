"""The decision step: what the scheduler decides, as events to record and effects to carry out.

Every decision of the scheduling loop is made here, by functions of the state, the unit, the time
and the configuration, with no clock, no I/O and no concurrency: the live loop
(`daemon/scheduling/loop.py`) calls them and carries out the effects they leave, and
`replay --verify` (`daemon/offline/verify.py`) calls the very same functions on the state folded
from a log and checks that they emit the events the log holds. There is no second copy of the
planning logic anywhere.

A step emits its decision events, in order, to the event sink of its `Step`, which folds each one
into the state before the step goes on (the journal, which appends it to the log first, in the
loop; a checker in verify): later decisions of a step read what earlier ones did (a PodAssumed
takes its room before the next assignment is checked; the Permit check counts the pods just
assumed). The effects are left in `Step.effects`, in the order the loop must start them, also when
the step raises half-way (the events it emitted stand, so do their effects):

- `Bind`: bind these pods concurrently (their `BindRequested` is recorded);
- `Evict`: the DisruptionTarget condition, then the eviction, of one victim;
- `SetNominatedNode`: patch a pod's `status.nominatedNodeName` (None clears it);
- `ReportPending`, `ReportGang`: a condition and an Event on the PodGroup or the lone pod (a victim
  gang's PodGroup too: it says it was preempted, and by whom);
- `Hold`, `Unhold`: a unit starts (or goes on) waiting at Permit, or stops waiting;
- `Nominate`: the unit's pods hold nominations until a deadline;
- `Park`, `BackOff`, `Succeeded`: what the queue does with the unit.

What the loop remembers between steps and a step reads is given by the `Memory` port: the unit's
wait at Permit (which pods it assumed, in plan order, and its deadline) and the last reason shown
for a lone pod (gangs keep theirs in the state); `Waits` is how both the loop and verify keep the
waits from the `Hold`, `Unhold` and `Nominate` effects. Which unit is tried when, the queueing hints that
skip a unit, and the API calls themselves belong to the loop.

Pure: no clock (time is `Step.now`), no I/O, no asyncio; reads the state, changes it only through
the sink. Must never import the Kubernetes adapter, the event log or a concurrency library.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol, TypeAlias

import msgspec

from daemon.scheduling.hints import need_of, room_when_empty
from daemon.scheduling.ports import GangPhase, Preemptee, Preemptor
from daemon.scheduling.queue import Unit
from events.model import (
    BindRequested,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    NominationCleared,
    PodAssumed,
    PodForgotten,
    PodNominated,
    PreemptionPlanned,
)
from placement import GangPlan, Unschedulable, plan_gang, plan_pod
from placement.fit import Requests
from placement.members import group_quorum_met, is_running
from placement.plan import (
    BACKOFF,
    CAPACITY,
    HARD_TIER,
    INVALID,
    MEMBERS,
    MIN_RESOURCES,
    MUST_GATHER,
    POD_FIT,
    VOLUME,
    QuotaShortfall,
)
from placement.recheck import Adopted, broken_plans, refusal
from state.cluster import ClusterState, PodInfo

SCHEDULED_REASON = "Scheduled"
UNSCHEDULABLE_REASON = "Unschedulable"
# A pod no scheduler has tried yet because a check before its queue holds it (KEP-5501's
# v1.PodReasonNotReadyForScheduling): cluster-autoscaler and Karpenter, which provision only for
# `Unschedulable`, leave it alone.
NOT_READY_REASON = "NotReadyForScheduling"
TIMEOUT_REASON = "GangTimeout"
PREEMPTED_REASON = "Preempted"

_STRUCTURAL_FAILURES = frozenset({POD_FIT, INVALID, MEMBERS, VOLUME, BACKOFF})
# Not tried against nodes at all: its scheduler holds it before its queue (not ready for scheduling).
_HELD_FAILURES = frozenset({MEMBERS, BACKOFF})
_CAPACITY_FAILURES = frozenset({CAPACITY, MUST_GATHER, HARD_TIER})
# Tried again when room frees, but never worth a preemption (its scheduler rejects it as unresolvable).
_UNRESOLVABLE_FAILURES = frozenset({MIN_RESOURCES})
# What a step was doing for a unit when it raised: the `stage` label of the metric, and in words.
STAGES = {"plan": "planning", "preempt": "planning preemption", "assume": "assuming its plan",
          "permit": "checking Permit", "nominate": "checking its nominations"}

# Fixed parts of the reasons a step writes, by which `replay --verify` tells which step wrote an event.
_RELEASED_AFTER_BIND = "; released the members not yet bound"
_INTERNAL_ERROR = ": internal error while "
_NODE_GONE = " is gone"
_WAITED_AT_PERMIT = "waiting at Permit ("
_GAVE_UP = ": not placed within its scheduleTimeoutSeconds; gave up"

Stage = Literal["plan", "preempt", "assume", "permit", "nominate"]


# --------------------------------------------------------------------------- effects


class Bind(msgspec.Struct, frozen=True):
    """Bind every (pod, uid, node) concurrently; a failure stops the rest (`bind_settled` decides after)."""

    unit: str
    gangs: tuple[str, ...]
    binds: tuple[tuple[str, str, str], ...]


class Evict(msgspec.Struct, frozen=True):
    pod: str
    uid: str
    preemptor: str
    message: str


class SetNominatedNode(msgspec.Struct, frozen=True):
    pod: str
    uid: str
    node: str | None  # None clears it


class ReportPending(msgspec.Struct, frozen=True):
    """Why the unit waits, shown on each gang's PodGroup (`uid` "") or on the lone pod."""

    unit: str
    lone: bool
    reason: str
    reports: tuple[tuple[str, str], ...]  # (gang key, "") per gang, or (pod key, uid)
    held: bool = False  # untried: it waits for members, or for its KAI schedulingBackoff (`GangPending.held`)
    quota: QuotaShortfall | None = None  # the quota refusal the reason says, in structure (KAI's `reasons`)


class ReportGang(msgspec.Struct, frozen=True):
    gang: str
    phase: GangPhase
    reason: str
    message: str


class Hold(msgspec.Struct, frozen=True):
    """The unit waits at Permit with these pods assumed (added to its wait if it already waits)."""

    unit: str
    gangs: tuple[str, ...]
    pods: tuple[str, ...]
    deadline: float  # of a new wait; a wait that goes on keeps its own


class Unhold(msgspec.Struct, frozen=True):
    unit: str


class Nominate(msgspec.Struct, frozen=True):
    """The unit's pods hold nominations (added to those it holds) until `deadline`."""

    unit: str
    gangs: tuple[str, ...]
    pods: tuple[str, ...]
    deadline: float


class Park(msgspec.Struct, frozen=True):
    unit: str
    structural: bool = False
    retry_at: float | None = None  # try again then whatever changes (jobs kept by a min runtime may go)


class BackOff(msgspec.Struct, frozen=True):
    unit: str


class Succeeded(msgspec.Struct, frozen=True):
    unit: str


Effect: TypeAlias = (Bind | Evict | SetNominatedNode | ReportPending | ReportGang | Hold | Unhold | Nominate | Park
                     | BackOff | Succeeded)


# --------------------------------------------------------------------------- what a step reads


class PermitWait:
    """A unit holding assumed pods at Permit (the loop's memory of it, kept from the `Hold` effects)."""

    __slots__ = ("deadline", "gangs", "order", "since")

    def __init__(self, gangs: tuple[str, ...], since: float, deadline: float) -> None:
        self.gangs = gangs
        self.since = since
        self.deadline = deadline
        self.order: list[str] = []  # assumed pods in plan order (the order they are bound in)


class NominationWait:
    """A unit whose pods hold nominations made for it; given up after its deadline."""

    __slots__ = ("deadline", "gangs", "pods")

    def __init__(self, gangs: tuple[str, ...], pods: tuple[str, ...], deadline: float) -> None:
        self.gangs = gangs
        self.pods = pods
        self.deadline = deadline


class Memory(Protocol):
    """What the loop remembers of a unit between steps (the loop; verify keeps its own from the log)."""

    def waiting(self, unit: str) -> PermitWait | None:
        """The unit's wait at Permit, if it waits."""
        ...

    def shown_reason(self, unit: str) -> str:
        """The last reason shown for a lone pod ("" if none)."""
        ...


class Waits:
    """What the loop remembers of units waiting, kept from the effects of the steps (the loop; verify).

    `remember` applies the effects that concern waiting: `Hold` starts a wait at Permit (or adds the
    pods to it: a wait that goes on keeps its start and deadline), `Unhold` ends it, `Nominate`
    adds pods to the unit's nominations and sets their deadline.
    """

    __slots__ = ("nominated", "waiting")

    def __init__(self) -> None:
        self.waiting: dict[str, PermitWait] = {}
        self.nominated: dict[str, NominationWait] = {}

    def remember(self, effect: Effect, now: float) -> bool:
        """Apply `effect` if it is about waiting; whether it was."""
        if isinstance(effect, Hold):
            wait = self.waiting.get(effect.unit)
            if wait is None:
                wait = self.waiting[effect.unit] = PermitWait(effect.gangs, now, effect.deadline)
            wait.order.extend(effect.pods)
        elif isinstance(effect, Unhold):
            self.waiting.pop(effect.unit, None)
        elif isinstance(effect, Nominate):
            existing = self.nominated.get(effect.unit)
            pods = tuple(sorted(set(effect.pods) | set(existing.pods if existing else ())))
            self.nominated[effect.unit] = NominationWait(effect.gangs, pods, effect.deadline)
        else:
            return False
        return True


class DecisionConfig(msgspec.Struct, frozen=True, kw_only=True):
    default_schedule_timeout_seconds: float = 600.0  # Permit wait when the PodGroup sets none


EventSink = Callable[[Event], object]
BatchSink = Callable[[Sequence[Event]], object]


class Step:
    """One decision: the state and time it decides on, where its events go, and the effects it leaves."""

    __slots__ = ("config", "effects", "memory", "now", "preemptor", "room_cache", "sink", "sink_many", "stage",
                 "state")

    def __init__(self, state: ClusterState, now: float, sink: EventSink, memory: Memory, *,
                 config: DecisionConfig, preemptor: Preemptor, room_cache: dict[tuple[int, Requests], int],
                 sink_many: BatchSink | None = None) -> None:
        self.state = state
        self.now = now
        self.sink = sink
        self.sink_many = sink_many  # records several events as `sink` would one by one, in one go
        self.memory = memory
        self.config = config
        self.preemptor = preemptor
        self.room_cache = room_cache  # `hints.room_when_empty`'s cache: the caller empties it when nodes change
        self.effects: list[Effect] = []
        self.stage: Stage = "plan"  # what the step is at (named by an internal error)

    def record(self, event: Event) -> None:
        self.sink(event)

    def record_all(self, events: Sequence[Event]) -> None:
        """Record `events` in order, each folded before the next (in one append when the sink takes batches)."""
        if self.sink_many is not None and len(events) > 1:
            self.sink_many(events)
        else:
            for event in events:
                self.sink(event)

    def do(self, effect: Effect) -> None:
        self.effects.append(effect)


class Attempted(msgspec.Struct, frozen=True):
    planned: bool
    preempted: bool = False
    constraint: str = ""  # no plan: the constraint that failed (`placement.plan.CONSTRAINTS`)


# --------------------------------------------------------------------------- one attempt


def attempt(step: Step, unit: Unit) -> Attempted:
    """Plan the unit; assume its plan and pass Permit if it can, else say why and plan preemption."""
    state = step.state
    result = plan_gang(state, unit.target) if unit.is_gang else plan_pod(state, unit.target)
    if isinstance(result, Unschedulable):
        return Attempted(planned=False, preempted=_unschedulable(step, unit, result), constraint=result.constraint)
    step.stage = "assume"
    _assume(step, unit, result)
    return Attempted(planned=True)


def _assume(step: Step, unit: Unit, plan: GangPlan) -> None:
    state = step.state
    gangs = plan.gangs or unit.gangs
    for gang in gangs:
        info = state.gangs.get(gang)
        step.record(GangPlanned(gang=gang, domain=plan.domain, layer=plan.level, pods=len(plan.assignments),
                                explanation=plan.explanation, attempt=(info.attempts if info is not None else 0) + 1))
    assumed: list[str] = []
    assumptions: list[PodAssumed] = []
    chosen: set[str] = set()  # recorded together, so a pod named twice is still pending the second time
    for assignment in plan.assignments:
        pod = state.pods.get(assignment.pod)
        if pod is None or assignment.pod not in state.pending or assignment.pod in chosen:
            continue
        chosen.add(assignment.pod)
        assumptions.append(PodAssumed(pod=pod.key, uid=pod.uid, node=assignment.node, gang=pod.gang))
        assumed.append(pod.key)
    if not gangs:  # a lone pod passes Permit at once: its PodAssumed and BindRequested go in one append
        if assumptions:
            _request_binds(step, unit.key, (), tuple((event.pod, event.uid, event.node) for event in assumptions),
                           assumptions)
        return
    step.record_all(assumptions)
    waiting = step.memory.waiting(unit.key)
    order = (list(waiting.order) if waiting is not None else []) + assumed
    step.do(Hold(unit.key, gangs, tuple(assumed), step.now + timeout_of(step, gangs)))
    left = [pod for pod in unit.pods if pod in state.pending]
    if left:
        # Placed a subset (minMember's share): the rest waits for room, and says so.
        step.do(Park(unit.key))
        note = (f"{label(gangs)}: {len(left)} pod(s) wait for room beyond the {len(assumed)} placed "
                f"({plan.explanation})")
        pending(step, unit.key, gangs, note)
    permit(step, unit.key, gangs, order)


def permit(step: Step, unit_key: str, gangs: tuple[str, ...], order: Sequence[str]) -> bool:
    """Bind the unit's assumed pods once every gang of it reaches minMember; whether it passed."""
    if not group_quorum_met(step.state, gangs):
        return False
    step.do(Unhold(unit_key))
    binds = [key for key in order if _is_assumed(step.state, key)]
    listed = set(binds)
    for gang in gangs:
        info = step.state.gangs.get(gang)
        if info is not None and not listed.issuperset(info.members):  # members assumed earlier, elsewhere
            binds += [key for key in sorted(info.members) if key not in listed and _is_assumed(step.state, key)]
    if binds:
        _start_binds(step, unit_key, gangs, binds)
    return True


def _start_binds(step: Step, unit_key: str, gangs: tuple[str, ...], order: Sequence[str]) -> None:
    pods = step.state.pods
    _request_binds(step, unit_key, gangs, tuple((key, pods[key].uid, pods[key].assumed_node) for key in order))


def _request_binds(step: Step, unit_key: str, gangs: tuple[str, ...], binds: tuple[tuple[str, str, str], ...],
                   before: Sequence[Event] = ()) -> None:
    """Record a BindRequested for each (pod, uid, node) of `binds` (after `before`, in the same append)
    and leave their Bindings to the loop."""
    step.record_all([*before, *(BindRequested(pod=key, uid=uid, node=node) for key, uid, node in binds)])
    step.do(Bind(unit_key, gangs, binds))


# --------------------------------------------------------------------------- no plan


def _unschedulable(step: Step, unit: Unit, failure: Unschedulable) -> bool:
    """Say why the unit waits, after planning preemption for it; whether a preemption was carried out."""
    reason = failure.reason
    structural = failure.constraint in _STRUCTURAL_FAILURES
    preempted = False
    retry_at: float | None = None
    if not structural and failure.constraint in _CAPACITY_FAILURES:
        never = _never_fits(step, unit)
        if never:
            structural = True
            reason = f"{reason}; {never}"
    if not structural and failure.constraint not in _UNRESOLVABLE_FAILURES:
        step.stage = "preempt"
        note, preempted, retry_at = _preempt(step, unit, failure)
        if note:
            reason = f"{reason}; {note}"
    step.do(Park(unit.key, structural=structural, retry_at=retry_at))
    pending(step, unit.key, unit.gangs, reason, held=failure.constraint in _HELD_FAILURES, quota=failure.quota)
    return preempted


def _never_fits(step: Step, unit: Unit) -> str:
    """Why no release of capacity can ever help ("" when one might): the unit needs more than the
    largest domain of its constraint layer holds even when empty (`daemon/scheduling/hints.py`)."""
    state = step.state
    need = need_of(state, unit)
    if need is None:
        return ""
    room = room_when_empty(state, need, step.room_cache)
    if room >= need.pods:
        return ""
    layer = state.topology.levels[need.level].layer
    where = "the whole cluster holds" if need.level == 0 else f"no {layer} domain holds more than"
    rule = f"{need.source}: " if need.source else ""
    return f"it can never fit: {rule}even empty, {where} {room} of the {need.pods} pods it needs"


def _preempt(step: Step, unit: Unit, failure: Unschedulable) -> tuple[str, bool, float | None]:
    """Ask the hook for a preemption plan and carry it out: a note for the pending reason, whether anyone
    is preempted, and when to try again whatever changes (None: on a change only)."""
    state = step.state
    preemptee = Preemptee(key=unit.key, gangs=unit.gangs, pods=unit.pods, priority=unit.priority, now=step.now)
    plan = step.preemptor.plan(state, preemptee, failure)
    if plan is None:
        return "", False, None
    if not plan.victims and not plan.nominations:
        return plan.explanation, False, plan.retry_at  # an empty plan only says why there is no preemption
    nodes = sorted({a.node for a in plan.nominations})
    preemptor = unit.key
    reclaim_from = list(plan.reclaim_from)
    step.record(PreemptionPlanned(gang=preemptor, victims=list(plan.victims), victim_jobs=list(plan.victim_jobs),
                                  nodes=nodes, explanation=plan.explanation, reclaim_from=reclaim_from))
    trigger = unit.pods[0] if unit.pods else unit.key
    job = f"gang {preemptor}" if unit.gangs else f"pod {preemptor}"
    message = f"preempted by {job} (priority {unit.priority}) to make room for pod {trigger}"
    if reclaim_from:  # a quota reclaim: the victim's quota borrowed the capacity (priorities do not matter)
        message = (f"reclaimed by {job} to make room for pod {trigger}: "
                   f"{', '.join(reclaim_from)} borrowed this capacity beyond its guaranteed share")
    lost: dict[str, int] = {}  # victim gang -> its pods evicted
    for victim in plan.victims:
        pod = state.pods.get(victim)
        if pod is None:
            continue
        step.record(EvictionRequested(pod=victim, uid=pod.uid, preemptor=preemptor, reason=message))
        step.do(Evict(victim, pod.uid, preemptor, message))
        if pod.gang in state.gangs:
            lost[pod.gang] = lost.get(pod.gang, 0) + 1
    for gang in sorted(lost):  # each victim gang's PodGroup says it was preempted, and by whom
        step.do(ReportGang(gang, "Preempted", PREEMPTED_REASON, f"{lost[gang]} pod(s) {message}"))
    nominated: list[str] = []
    for assignment in plan.nominations:
        pod = state.pods.get(assignment.pod)
        if pod is None:
            continue
        step.record(PodNominated(pod=pod.key, uid=pod.uid, node=assignment.node, gang=pod.gang, priority=pod.priority))
        nominated.append(pod.key)
        step.do(SetNominatedNode(pod.key, pod.uid, assignment.node))
    for key in plan.clear_nominations:  # the planner's list: lower-priority nominations on those nodes
        pod = state.pods.get(key)
        if pod is None or not pod.nominated_node:
            continue
        step.record(NominationCleared(pod=key, reason=f"node {pod.nominated_node} nominated for higher-priority {job}"))
        step.do(SetNominatedNode(key, pod.uid, None))
    if nominated:
        step.do(Nominate(unit.key, unit.gangs, tuple(sorted(nominated)), step.now + timeout_of(step, unit.gangs)))
    victims = f"{len(plan.victims)} pod(s) of {', '.join(plan.victim_jobs) or 'lower-priority jobs'}"
    return f"preempting {victims}", True, None


def pending(step: Step, unit_key: str, gangs: Sequence[str], reason: str, *, held: bool = False,
            quota: QuotaShortfall | None = None) -> None:
    """Record why the unit waits, only when the reason changed, and report it (a condition + an Event).
    Recording is synchronous, so the reason can never land after a later, successful attempt. `held`: the
    gangs were not tried against nodes, their members (or defining objects) having yet to appear, or their KAI
    `schedulingBackoff` holding them (`placement.gang.backoff_wait`). `quota`:
    the quota refusal `reason` tells of, in structure."""
    state = step.state
    reports: list[tuple[str, str]] = []
    if gangs:
        for gang in gangs:
            info = state.gangs.get(gang)
            if info is None or info.last_reason == reason:
                continue
            step.record(GangPending(gang=gang, reason=reason, attempt=info.attempts + 1, held=held))
            reports.append((gang, ""))
        if reports:
            step.do(ReportPending(unit_key, False, reason, tuple(reports), held, quota))
        return
    if step.memory.shown_reason(unit_key) == reason:
        return
    step.record(GangPending(gang=unit_key, reason=reason))
    pod = state.pods.get(unit_key)
    if pod is not None:
        reports.append((unit_key, pod.uid))
    step.do(ReportPending(unit_key, True, reason, tuple(reports)))


# --------------------------------------------------------------------------- waits, timeouts, results


def service_wait(step: Step, unit_key: str, waiting: PermitWait) -> bool:
    """A unit waiting at Permit, at a new cycle: drop pods whose node is gone, pass Permit, or time out
    (then True)."""
    state = step.state
    for key in waiting.order:
        pod = state.pods.get(key)
        if pod is not None and pod.assumed_node and not pod.node_name and pod.assumed_node not in state.nodes:
            step.record(PodForgotten(pod=key, uid=pod.uid, reason=f"node {pod.assumed_node}{_NODE_GONE}"))
    if not waiting.gangs:  # an adopted lone pod: nothing to wait for
        step.do(Unhold(unit_key))
        order = [key for key in waiting.order if _is_assumed(state, key)]
        if order:
            _start_binds(step, unit_key, (), order)
        return False
    if not any(_is_assumed(state, key) for gang in waiting.gangs for key in members(state, gang)):
        step.do(Unhold(unit_key))  # its assumed pods are gone
        return False
    if permit(step, unit_key, waiting.gangs, waiting.order) or step.now < waiting.deadline:
        return False
    step.do(Unhold(unit_key))
    _time_out(step, unit_key, waiting)
    return True


def _time_out(step: Step, unit_key: str, waiting: PermitWait) -> None:
    reason = (f"{label(waiting.gangs)}: scheduleTimeoutSeconds ({waiting.deadline - waiting.since:g}s) passed "
              f"{_WAITED_AT_PERMIT}{quorum_words(step.state, waiting.gangs)}); released its assumed pods")
    forget_members(step, waiting.gangs, waiting.order, reason)
    for gang in waiting.gangs:
        step.record(GangTimedOut(gang=gang, reason=reason))
        step.do(ReportGang(gang, "TimedOut", TIMEOUT_REASON, reason))
    step.do(Park(unit_key))


def service_nominations(step: Step, unit_key: str, nominated: NominationWait) -> bool:
    """A unit holding nominations, at a new cycle: give them up past the deadline; whether it still holds any."""
    state = step.state
    holding = [key for key in nominated.pods
               if key in state.pods and state.pods[key].nominated_node and key in state.pending]
    if not holding:
        return False
    if step.now < nominated.deadline:
        return True
    for key in holding:
        step.record(NominationCleared(pod=key, reason=f"{unit_key}{_GAVE_UP}"))
        # Cleared in the API too, or the next watch event of the pod would nominate it again.
        step.do(SetNominatedNode(key, state.pods[key].uid, None))
    return False


def written_by_wait(reason: str) -> bool:
    """Whether a `PodForgotten` reason was written by `service_wait` (its node is gone, or it timed out)."""
    return (reason.startswith("node ") and reason.endswith(_NODE_GONE)) or (
        _WAITED_AT_PERMIT in reason and reason.endswith("released its assumed pods"))


def written_by_giving_up(reason: str) -> bool:
    """Whether a `NominationCleared` reason was written by `service_nominations` (the deadline passed)."""
    return reason.endswith(_GAVE_UP)


def written_by_attempt(reason: str) -> bool:
    """Whether a `GangPending` reason was written by an attempt, not after a failed bind or an internal error."""
    return not reason.endswith(_RELEASED_AFTER_BIND) and _INTERNAL_ERROR not in reason


def bind_settled(step: Step, unit_key: str, gangs: tuple[str, ...], bound: int, pods: Sequence[str],
                 failure: str, retriable: bool) -> None:
    """Every bind of the unit came back: report it scheduled, or release what is still assumed and say why."""
    if not failure:
        step.do(Succeeded(unit_key))
        for gang in gangs:
            step.do(ReportGang(gang, "Scheduled", SCHEDULED_REASON, f"{bound} pod(s) bound; minMember reached"))
        return
    reason = f"{label(gangs) if gangs else f'pod {unit_key}'}: {failure}{_RELEASED_AFTER_BIND}"
    forget_members(step, gangs, pods, reason)
    step.do(BackOff(unit_key) if retriable else Park(unit_key))
    pending(step, unit_key, gangs, reason)


def unit_failed(step: Step, unit_key: str, gangs: tuple[str, ...], stage: Stage, error: Exception) -> None:
    """Handling the unit raised at `stage`: park it with the error as its reason (events and reports)."""
    what = label(gangs) if gangs else f"pod {unit_key}"
    reason = (f"{what}{_INTERNAL_ERROR}{STAGES[stage]} ({type(error).__name__}: {str(error)[:200]}); "
              "parked until it or the cluster changes")
    step.do(Park(unit_key, structural=True))
    step.do(Unhold(unit_key))
    forget_members(step, gangs, () if gangs else (unit_key,), reason)
    pending(step, unit_key, gangs, reason)


def forget_members(step: Step, gangs: Sequence[str], extra: Sequence[str], reason: str) -> None:
    """Release every assumed, unbound member of the gangs (and the listed pods)."""
    state = step.state
    keys = set(extra)
    for gang in gangs:
        info = state.gangs.get(gang)
        if info is not None:
            keys.update(info.members)
    for key in sorted(keys):
        if _is_assumed(state, key):
            step.record(PodForgotten(pod=key, uid=state.pods[key].uid, reason=reason))


# --------------------------------------------------------------------------- start-up


class Adoption(msgspec.Struct, frozen=True):
    """What `adopt` let go of, for the loop's log lines."""

    cleared: tuple[tuple[str, str, str], ...] = ()  # (pod, node, why) nominations cleared
    released: tuple[tuple[str, int, str], ...] = ()  # (unit, pods, why) plans released to be planned again


def adopt(step: Step) -> Adoption:
    """At the loop's first cycle (after a restart or a takeover), take over what the log left.

    Pods assumed but never bound wait at Permit again, and nominations get a fresh timeout, but
    only what still holds on the state rebuilt from the relist (`placement.recheck`): a plan
    with a pod whose node is gone, no longer admits it or no longer has room for it is released
    as a whole and planned again in this very cycle (a partly bound gang next to its bound
    members), and a nomination on a node that no longer admits its pod is cleared, in the API too.
    """
    state = step.state
    assumed: dict[str, tuple[tuple[str, ...], list[str]]] = {}
    nominated: dict[str, tuple[tuple[str, ...], list[str]]] = {}
    cleared: list[tuple[str, str, str]] = []
    released: list[tuple[str, int, str]] = []
    for key in sorted(state.pods):
        pod = state.pods[key]
        if pod.assumed_node and not pod.node_name:
            gangs = group_of(state, pod)
            assumed.setdefault(gangs[0] if gangs else key, (gangs, []))[1].append(key)
        if pod.nominated_node and pod.key in state.pending:
            why = refusal(state, pod, pod.nominated_node)
            if why:
                cleared.append((key, pod.nominated_node, why))
                step.record(NominationCleared(pod=key, reason=f"{why}; cleared at start-up"))
                step.do(SetNominatedNode(key, pod.uid, None))
                continue
            gangs = group_of(state, pod)
            nominated.setdefault(gangs[0] if gangs else key, (gangs, []))[1].append(key)
    for unit_key, (gangs, keys) in nominated.items():
        step.do(Nominate(unit_key, gangs, tuple(keys), step.now + timeout_of(step, gangs)))
    pods = state.pods
    adopted = sorted((Adopted(key=unit_key, gangs=gangs, pods=tuple(keys))
                      for unit_key, (gangs, keys) in assumed.items()),
                     key=lambda a: (-max(pods[k].priority for k in a.pods), a.key))
    broken = broken_plans(state, adopted)
    for plan in adopted:
        stale = broken.get(plan.key)
        if stale is not None:
            released.append((plan.key, len(plan.pods), stale))
            what = label(plan.gangs) if plan.gangs else f"pod {plan.key}"
            forget_members(step, plan.gangs, plan.pods,
                           f"{what}: its plan from before this scheduler started no longer holds: {stale}; "
                           f"released to be planned again")
            continue
        step.do(Hold(plan.key, plan.gangs, plan.pods, step.now + timeout_of(step, plan.gangs)))
    return Adoption(tuple(cleared), tuple(released))


# --------------------------------------------------------------------------- reading the state


def group_of(state: ClusterState, pod: PodInfo) -> tuple[str, ...]:
    if not pod.gang:
        return ()
    info = state.gangs.get(pod.gang)
    return info.spec.gang_group if info is not None and info.spec is not None else (pod.gang,)


def members(state: ClusterState, gang: str) -> list[str]:
    info = state.gangs.get(gang)
    return sorted(info.members) if info is not None else []


def timeout_of(step: Step, gangs: Sequence[str]) -> float:
    timeouts = []
    for gang in gangs:
        info = step.state.gangs.get(gang)
        if info is not None and info.spec is not None and info.spec.schedule_timeout_seconds is not None:
            timeouts.append(info.spec.schedule_timeout_seconds)
    return min(timeouts) if timeouts else step.config.default_schedule_timeout_seconds


def quorum_words(state: ClusterState, gangs: Sequence[str]) -> str:
    """"default/a has 1 of minMember 2 placed, default/b 3 of 2": where each gang stands at Permit."""
    parts = []
    for index, gang in enumerate(gangs):
        info = state.gangs.get(gang)
        need = info.spec.min_member if info is not None and info.spec is not None else 0
        have = sum(1 for key in members(state, gang) if is_running(state.pods[key]))
        parts.append(f"{gang} has {have} of minMember {need} placed" if index == 0 else f"{gang} {have} of {need}")
    return ", ".join(parts)


def label(gangs: Sequence[str]) -> str:
    return f"gang {gangs[0]}" if len(gangs) == 1 else f"GangGroup {', '.join(gangs)}"


def _is_assumed(state: ClusterState, key: str) -> bool:
    pod = state.pods.get(key)
    return pod is not None and bool(pod.assumed_node) and not pod.node_name
