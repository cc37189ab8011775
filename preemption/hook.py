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

Pure: no I/O, no clock, no state of its own.
"""

from __future__ import annotations

from typing import Protocol

from placement.plan import Unschedulable
from preemption.plan import NO_LOWER_PRIORITY, NOT_PREEMPTABLE, WAITING, NoPreemption, PreemptionPlan
from preemption.planner import plan_preemption
from state.cluster import ClusterState


class PreemptionRequest(Protocol):
    """What the loop tells about the job needing room (its `Preemptee`)."""

    @property
    def key(self) -> str: ...


# Refusals not worth a word on the PodGroup: nothing of lower priority runs, or room is not the problem.
SILENT = frozenset({NO_LOWER_PRIORITY, NOT_PREEMPTABLE})


class JobPreemptor:
    """Plans job-level preemption for the loop; see the module docstring."""

    def plan(self, state: ClusterState, preemptee: PreemptionRequest, failure: Unschedulable) -> PreemptionPlan | None:
        result = plan_preemption(state, preemptee.key, failure)
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


def refusal(why: NoPreemption) -> PreemptionPlan:
    """An empty plan (no victims, no nominations) whose explanation says why there is no preemption:
    the loop evicts and nominates nothing and shows the explanation with the pending reason."""
    return PreemptionPlan(preemptor=why.preemptor, gangs=(), priority=0, victims=(), victim_jobs=(), jobs=(),
                          nominations=(), clear_nominations=(), domain="", level="", explanation=why.reason)
