"""Preemption for Volcano-dialect jobs: the hard tier limit bounds where room is made."""

from __future__ import annotations

from placement import GangPlan, Unschedulable, plan_gang
from preemption import NoPreemption, PreemptionPlan, plan_preemption
from tests.unit.placement.builders import block_of, fabric, members, occupy, volcano_gang


def test_hard_tier_job_preempts_inside_one_block_only() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)  # 4 nodes per block
    nodes = sorted(state.nodes)
    for name in nodes:  # everything busy with lower-priority pods, b1's cheapest
        occupy(state, name, 8, name=f"low-{name}", priority=5 if block_of(name) == "s0b1" else 10)
    volcano_gang(state, "job", min_member=4, tier=2)
    members(state, "job", 4, priority=100, volcano=True)
    failure = plan_gang(state, "default/job")
    assert isinstance(failure, Unschedulable)
    plan = plan_preemption(state, "default/job", failure)
    assert isinstance(plan, PreemptionPlan)
    assert {block_of(a.node) for a in plan.nominations} == {"s0b1"}
    assert all(key.startswith("other/low-n-s0b1") for key in plan.victims)
    assert isinstance(plan_gang(state, "default/job", ignore_pods=frozenset(plan.victims)), GangPlan)


def test_hard_tier_job_larger_than_any_block_is_not_preempted_for() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    for name in sorted(state.nodes):
        occupy(state, name, 8, name=f"low-{name}", priority=5)
    volcano_gang(state, "job", min_member=5, tier=2)
    members(state, "job", 5, priority=100, volcano=True)
    failure = plan_gang(state, "default/job")
    assert isinstance(failure, Unschedulable)
    result = plan_preemption(state, "default/job", failure)
    assert isinstance(result, NoPreemption)
    assert "BlockLayer" in result.reason
