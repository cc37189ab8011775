"""PodDisruptionBudgets in job-level preemption: among plans that evict no higher priority, the one whose
victims stay within their budgets wins, and says so; a budget never stops a preemption that needs it."""

from __future__ import annotations

from typing import Any

from events.ingest import KIND_BY_NAME, upsert_event
from events.objects import POD_GROUP_LABEL
from preemption.budgets import budget_violations
from state.cluster import ClusterState

from .test_planner import MUST_BLOCK, cluster, planned, run_gang, submit


def budget(name: str, gang: str, allowed: int, *, disrupted: tuple[str, ...] = (),
           selector: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"selector": {"matchLabels": {POD_GROUP_LABEL: gang}} if selector is None else selector,
                     "maxUnavailable": 1},
            "status": {"disruptionsAllowed": allowed,
                       "disruptedPods": {pod: "2026-11-26T10:00:00Z" for pod in disrupted}}}


def add(state: ClusterState, document: dict[str, Any]) -> None:
    state.apply(upsert_event(KIND_BY_NAME["PodDisruptionBudget"], document))


def two_blocks() -> ClusterState:
    # Two equal gangs, one per block: without budgets the tie-break (victim names) picks "a".
    state = cluster([("s0", "b0", 4), ("s0", "b1", 4)])
    run_gang(state, "a", [0, 1, 2, 3], priority=1)
    run_gang(state, "b", [4, 5, 6, 7], priority=1)
    submit(state, "high", 4, gather=MUST_BLOCK)
    return state


def test_without_budgets_the_tie_break_takes_the_first_gang() -> None:
    assert planned(two_blocks(), "high").victim_jobs == ("default/a",)


def test_the_gang_whose_budget_allows_no_disruption_is_spared_and_the_plan_says_why() -> None:
    state = two_blocks()
    add(state, budget("a-budget", "a", 0))
    plan = planned(state, "high")
    assert plan.victim_jobs == ("default/b",)
    assert "4 beyond their PodDisruptionBudgets" in plan.explanation
    assert "fewer victims beyond their PodDisruptionBudgets (0 < 4)" in plan.explanation


def test_a_budget_that_allows_the_disruption_changes_nothing() -> None:
    state = two_blocks()
    add(state, budget("a-budget", "a", 4))
    assert planned(state, "high").victim_jobs == ("default/a",)


def test_a_budget_is_no_reason_to_evict_higher_priority_pods() -> None:
    state = cluster([("s0", "b0", 4), ("s0", "b1", 4)])
    run_gang(state, "a", [0, 1, 2, 3], priority=1)
    run_gang(state, "b", [4, 5, 6, 7], priority=5)
    add(state, budget("a-budget", "a", 0))
    submit(state, "high", 4, gather=MUST_BLOCK)
    assert planned(state, "high").victim_jobs == ("default/a",)


def test_a_budget_never_stops_a_preemption_that_needs_its_pods() -> None:
    state = cluster([("s0", "b0", 4)])
    run_gang(state, "a", [0, 1, 2, 3], priority=1)
    add(state, budget("a-budget", "a", 0))
    submit(state, "high", 4)
    assert planned(state, "high").victim_jobs == ("default/a",)


def test_violations_are_counted_as_kube_schedulers_preemption_counts_them() -> None:
    state = cluster([("s0", "b0", 4)])
    run_gang(state, "a", [0, 1, 2, 3], priority=1)
    pods = [state.pods[f"default/a-{index}"] for index in range(4)]
    add(state, budget("a-budget", "a", 1))
    assert budget_violations(state, pods) == 3  # one disruption allowed: the other three go beyond it
    add(state, budget("a-budget", "a", 1, disrupted=("a-0", "a-1")))
    assert budget_violations(state, pods) == 1  # pods already being disrupted are not counted again
    add(state, budget("a-budget", "a", 0, selector={}))
    assert budget_violations(state, pods) == 0  # an empty selector applies to none (kube-scheduler's rule)


def test_inside_one_domain_the_victims_within_their_budgets_are_taken_first() -> None:
    state = cluster([("s0", "b0", 8)])
    run_gang(state, "a", [0, 1, 2, 3], priority=1)
    run_gang(state, "b", [4, 5, 6, 7], priority=1)
    submit(state, "high", 4, gather=MUST_BLOCK)
    assert planned(state, "high").victim_jobs == ("default/a",)
    add(state, budget("a-budget", "a", 0))
    assert planned(state, "high").victim_jobs == ("default/b",)
