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

Pure: no I/O, no clock, no state of its own.
"""

from __future__ import annotations

from typing import Protocol

from placement.plan import QUOTA, Unschedulable
from preemption.eligibility import preemptor_of
from preemption.plan import NO_LOWER_PRIORITY, NOT_PREEMPTABLE, WAITING, NoPreemption, PreemptionPlan
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


def _quota_refusal(failure: Unschedulable) -> str:
    """What the quota said, without the job's label ("gang x: quota y: ..." -> "quota y: ...")."""
    return failure.reason.partition(": ")[2] or failure.reason


def refusal(why: NoPreemption) -> PreemptionPlan:
    """An empty plan (no victims, no nominations) whose explanation says why there is no preemption:
    the loop evicts and nominates nothing and shows the explanation with the pending reason."""
    return PreemptionPlan(preemptor=why.preemptor, gangs=(), priority=0, victims=(), victim_jobs=(), jobs=(),
                          nominations=(), clear_nominations=(), domain="", level="", explanation=why.reason,
                          retry_at=why.retry_at)
