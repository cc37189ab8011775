"""The cost order of preemption plans, and the words for why one plan beat another.

A plan is cheaper than another when, in this order (the first difference decides):
1. its highest victim priority is lower (as kube-scheduler picks among nodes for a pod);
2. fewer of its victims go beyond what their PodDisruptionBudgets allow (preemption/budgets.py);
3. it breaks fewer victim jobs (a whole gang or a lone pod counts one; surplus pods of a gang that
   keeps minMember running count none);
4. it evicts fewer victim pods;
5. it gives the preemptor a tighter topology span (its domain sits at a deeper level);
6. it loses less work: its victim jobs started more recently (summed start times, larger is better);
7. deterministic tie-break: the sorted victim pod keys, then the domain name.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from preemption.budgets import budget_violations
from preemption.victims import VictimUnit
from state.cluster import ClusterState

NO_VICTIM_PRIORITY = -(1 << 62)


class Cost(msgspec.Struct, frozen=True, order=True):
    """Fields in comparison order; a smaller Cost is a cheaper plan."""

    top_priority: int
    budget_violations: int
    jobs: int
    pods: int
    span: int  # minus the level index of the preemptor's domain: deeper (tighter) is smaller
    recency: float  # minus the summed start times of the victim jobs
    victims: tuple[str, ...]
    domain: str


def cost_of(state: ClusterState, units: Sequence[VictimUnit], level: int, domain: str) -> Cost:
    pods = sorted({pod.key for unit in units for pod in unit.pods})
    jobs = {unit.job for unit in units if unit.broken}
    top = max((unit.priority for unit in units), default=NO_VICTIM_PRIORITY)
    recency = -sum(unit.started_at for unit in units)
    # A cluster without budgets (the usual one) pays nothing for them on every candidate set weighed.
    violations = (budget_violations(state, {pod.key: pod for unit in units for pod in unit.pods}.values())
                  if state.budgets else 0)
    return Cost(top_priority=top, budget_violations=violations, jobs=len(jobs), pods=len(pods), span=-level,
                recency=recency, victims=tuple(pods), domain=domain)


def why_better(winner: Cost, other: Cost) -> str:
    """The criterion that put `winner` ahead of `other`, in words."""
    if winner.top_priority != other.top_priority:
        return (f"lower highest victim priority ({_priority(winner.top_priority)} < "
                f"{_priority(other.top_priority)})")
    if winner.budget_violations != other.budget_violations:
        return (f"fewer victims beyond their PodDisruptionBudgets ({winner.budget_violations} < "
                f"{other.budget_violations})")
    if winner.jobs != other.jobs:
        return f"fewer victim jobs broken ({winner.jobs} < {other.jobs})"
    if winner.pods != other.pods:
        return f"fewer victim pods ({winner.pods} < {other.pods})"
    if winner.span != other.span:
        return f"tighter span for the preemptor (level {-winner.span} below level {-other.span})"
    if winner.recency != other.recency:
        return "its victims started more recently (less work lost)"
    return "deterministic tie-break (victim names, then domain name)"


def _priority(value: int) -> str:
    return "none" if value == NO_VICTIM_PRIORITY else str(value)
