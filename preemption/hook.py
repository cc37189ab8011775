"""`JobPreemptor`: job-level preemption as the scheduler loop's preemption hook.

The loop (`daemon/scheduling/loop.py`) asks its `Preemptor` port for a plan whenever placement fails, and
carries out what it gets (PreemptionPlanned, DisruptionTarget + eviction per victim, PodNominated per
preemptor pod, NominationCleared for lower-priority nominations on those nodes). This adapter
satisfies that port structurally (`preemption/` never imports `daemon/`): it returns a
`PreemptionPlan`, whose `victims`, `victim_jobs`, `nominations` and `explanation` are what the loop
reads. When `plan_preemption` says no preemption for a reason the user should see (preemptionPolicy
Never, waiting for earlier victims, no victims that would help), it returns an empty plan (no
victims, no nominations) whose explanation is that reason, which the loop adds to the gang's pending
reason; when nothing of lower priority runs or room is not the problem, it returns None. A plan
that needs no victims (pods already terminating free the room) is not carried out either: a gang
whose nominations were given up (scheduleTimeoutSeconds) is not nominated again on the same room;
it is placed normally once the room is free.

With quotas (`preemption/reclaim.py`): a job that may reclaim (its quota stays within its min with
the job added) first tries to take back what other quotas borrow; when that finds no plan, it
falls back to priority preemption inside its own quota. A job refused by its quota (constraint
`quota`) may reclaim when what refused it is a parent quota's max that a sibling's borrowing fills
(the reclaim frees that quota first); else, or when that finds no plan, it preempts lower-priority
jobs of its own quota, chosen first to free the quota that refused it (`priority_rule`).

A KAI gang with a preemption delay (`spec.preemptionDelay`, KAI 0.17) evicts no one, by preemption or
reclaim, until it has been pending that long, counted from its PodGroup's creation or its own last
eviction (`GangSpec.kai_delay_from`): a plan that would evict is replaced by a refusal that says until
when, with `retry_at` then. Placing it in free capacity is not delayed (that never reaches this hook),
and a plan that evicts no one is not held back.

Pure: no I/O, no clock, no state of its own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from placement.plan import QUOTA, Unschedulable
from preemption.eligibility import preemptor_of
from preemption.plan import DELAYED, NO_LOWER_PRIORITY, NOT_PREEMPTABLE, WAITING, NoPreemption, PreemptionPlan
from preemption.planner import plan_preemption
from preemption.reclaim import keep_min_runtimes, priority_rule, reclaim_rule
from preemption.victims import VictimRule
from state.cluster import ClusterState


class PreemptionRequest(Protocol):
    """What the loop tells about the job needing room (its `Preemptee`), and the time it decides at."""

    @property
    def key(self) -> str: ...

    @property
    def now(self) -> float: ...


# Refusals not worth a word on the PodGroup: nothing of lower priority runs, or room is not the problem.
SILENT = frozenset({NO_LOWER_PRIORITY, NOT_PREEMPTABLE})


class JobPreemptor:
    """Plans job-level preemption for the loop; see the module docstring."""

    def plan(self, state: ClusterState, preemptee: PreemptionRequest, failure: Unschedulable) -> PreemptionPlan | None:
        answer = self._plan(state, preemptee, failure)
        if answer is None or not answer.victims:
            return answer
        delayed = delay_refusal(state, preemptee.key, preemptee.now)
        return answer if delayed is None else refusal(delayed)

    def _plan(self, state: ClusterState, preemptee: PreemptionRequest, failure: Unschedulable) -> PreemptionPlan | None:
        reclaim_refusal: NoPreemption | None = None
        now = preemptee.now
        who = preemptor_of(state, preemptee.key) if state.quotas.active else None
        if failure.constraint == QUOTA and (who is None or isinstance(who, NoPreemption)):
            return None
        if who is not None and not isinstance(who, NoPreemption):
            reclaim = reclaim_rule(state, who)
            if failure.constraint == QUOTA and reclaim is not None and reclaim.forced is None:
                reclaim = None  # evicting pods of other quotas cannot make its own quota admit it
            if reclaim is not None:
                reclaim = keep_min_runtimes(state, reclaim, who, now, reclaim=True)
                reclaimed = plan_preemption(state, preemptee.key, failure, rule=lambda _: reclaim)
                if isinstance(reclaimed, PreemptionPlan):
                    return self._answer(reclaimed)
                reclaim_refusal = reclaimed
            blocks = _quota_refusal(failure) if failure.constraint == QUOTA else ""
            result = plan_preemption(state, preemptee.key, failure, rule=lambda p: keep_min_runtimes(
                state, priority_rule(state, p, quota_blocks=blocks), p, now, reclaim=False))
        elif state.quotas.active:
            result = plan_preemption(state, preemptee.key, failure, rule=lambda p: keep_min_runtimes(
                state, VictimRule.lower_priority(p.priority), p, now, reclaim=False))
        else:
            result = plan_preemption(state, preemptee.key, failure)
        if reclaim_refusal is not None and isinstance(result, NoPreemption) and reclaim_refusal.reason != result.reason:
            # say why reclaim did not help too: a quota under its min that cannot get it back should know why
            if result.kind in SILENT:
                return refusal(reclaim_refusal)
            if reclaim_refusal.kind not in SILENT:
                both = f"{reclaim_refusal.reason}; {result.reason}"
                retries = [at for at in (reclaim_refusal.retry_at, result.retry_at) if at is not None]
                return refusal(NoPreemption(result.preemptor, result.kind, both,
                                            retry_at=min(retries) if retries else None))
        return self._answer(result)

    @staticmethod
    def _answer(result: PreemptionPlan | NoPreemption) -> PreemptionPlan | None:
        if isinstance(result, PreemptionPlan):
            if result.victims:
                return result
            # Room is already on its way (pods terminating, e.g. after its nominations were given up):
            # nothing to evict, and no new nominations either; the gang is placed when the room is free.
            where = f"{result.level} {result.domain}" if result.domain else "the cluster"
            return refusal(NoPreemption(result.preemptor, WAITING,
                                        f"no preemption needed: pods already terminating will free room for it "
                                        f"in {where}"))
        if result.kind in SILENT:
            return None
        return refusal(result)


def delay_refusal(state: ClusterState, key: str, now: float) -> NoPreemption | None:
    """Why the job `key` may not evict anyone yet: a gang of its group within its preemption delay (the one
    whose window ends last); None when none is."""
    gang = state.gangs.get(key)
    if gang is None or gang.spec is None:
        return None
    latest: tuple[float, float] | None = None  # (window end, delay)
    for member in gang.spec.gang_group:
        info = state.gangs.get(member)
        spec = info.spec if info is not None else None
        if info is None or spec is None or spec.kai_preemption_delay <= 0:
            continue
        start = spec.kai_delay_from if spec.kai_delay_from is not None else info.first_seen
        until = start + spec.kai_preemption_delay
        if now < until and (latest is None or until > latest[0]):
            latest = (until, spec.kai_preemption_delay)
    if latest is None:
        return None
    until, delay = latest
    return NoPreemption(key, DELAYED, f"no preemption: within its preemption delay window ({go_duration_text(delay)}), "
                        f"it may not evict others before {rfc3339_text(until)}", retry_at=until)


def go_duration_text(seconds: float) -> str:
    """`seconds` as Go prints a duration: `5m0s`, `1h30m0s`, `0.25s` (fractions of a second as decimals)."""
    hours, rest = divmod(seconds, 3600.0)
    minutes, secs = divmod(rest, 60.0)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{int(minutes)}m{text}"
    return text


def rfc3339_text(seconds: float) -> str:
    """`seconds` as an RFC 3339 time; one past the year 9999 (a hand-written eviction stamp may push the
    window there) as the last second of 9999."""
    return datetime.fromtimestamp(min(max(seconds, 0.0), _LAST_SECOND), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def _quota_refusal(failure: Unschedulable) -> str:
    """What the quota said, without the job's label ("gang x: quota y: ..." -> "quota y: ...")."""
    return failure.reason.partition(": ")[2] or failure.reason


def refusal(why: NoPreemption) -> PreemptionPlan:
    """An empty plan (no victims, no nominations) whose explanation says why there is no preemption:
    the loop evicts and nominates nothing and shows the explanation with the pending reason."""
    return PreemptionPlan(preemptor=why.preemptor, gangs=(), priority=0, victims=(), victim_jobs=(), jobs=(),
                          nominations=(), clear_nominations=(), domain="", level="", explanation=why.reason,
                          retry_at=why.retry_at)
