"""`JobPreemptor`: job-level preemption as the scheduler loop's preemption hook.

The loop (`daemon/scheduler.py`) asks its `Preemptor` port for a plan whenever placement fails, and
carries out what it gets (PreemptionPlanned, DisruptionTarget + eviction per victim, PodNominated per
preemptor pod, NominationCleared for lower-priority nominations on those nodes). This adapter
satisfies that port structurally (`preemption/` never imports `daemon/`): it returns a
`PreemptionPlan`, whose `victims`, `victim_jobs`, `nominations` and `explanation` are what the loop
reads, or None when `plan_preemption` says no preemption (the reason is then the placement failure's).

Pure: no I/O, no clock, no state of its own.
"""

from __future__ import annotations

from typing import Protocol

from placement.plan import Unschedulable
from preemption.plan import PreemptionPlan
from preemption.planner import plan_preemption
from state.cluster import ClusterState


class PreemptionRequest(Protocol):
    """What the loop tells about the job needing room (its `Preemptee`)."""

    @property
    def key(self) -> str: ...


class JobPreemptor:
    """Plans job-level preemption for the loop; see the module docstring."""

    def plan(self, state: ClusterState, preemptee: PreemptionRequest, failure: Unschedulable) -> PreemptionPlan | None:
        result = plan_preemption(state, preemptee.key, failure)
        return result if isinstance(result, PreemptionPlan) else None
