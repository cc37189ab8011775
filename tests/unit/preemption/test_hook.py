"""JobPreemptor as the loop's Preemptor port: plans, refusals worth showing, and silence."""

from __future__ import annotations

import msgspec

from daemon.scheduling.ports import Preemptee, Preemptor
from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import EvictionRequested
from placement import Unschedulable, plan_gang
from preemption import JobPreemptor
from preemption.plan import PreemptionPlan
from state.cluster import ClusterState


def state_with(low_priority: int, *, policy: str | None = None) -> ClusterState:
    state = ClusterState()
    for i in range(2):
        state.apply(node_event(node(f"n{i}", block="b0", spine="s0")))
    state.apply(group_event(pod_group("low", min_member=2)))
    for i in range(2):
        state.apply(pod_event(bound(pod(f"low-{i}", gang="low", priority=low_priority), f"n{i}")))
    state.apply(group_event(pod_group("high", min_member=2)))
    for i in range(2):
        p = pod(f"high-{i}", gang="high", priority=1000)
        if policy is not None:
            p = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, preemption_policy=policy))
        state.apply(pod_event(p, time=5.0))
    return state


def ask(state: ClusterState) -> PreemptionPlan | None:
    preemptor: Preemptor = JobPreemptor()
    failure = plan_gang(state, "default/high")
    assert isinstance(failure, Unschedulable)
    preemptee = Preemptee(key="default/high", gangs=("default/high",),
                          pods=("default/high-0", "default/high-1"), priority=1000, now=state.last_time)
    return preemptor.plan(state, preemptee, failure)


def test_hook_returns_the_plan_the_loop_carries_out() -> None:
    plan = ask(state_with(1))
    assert plan is not None
    assert list(plan.victims) == ["default/low-0", "default/low-1"]
    assert list(plan.victim_jobs) == ["default/low"]
    assert {a.node for a in plan.nominations} == {"n0", "n1"}


def test_hook_refusal_worth_showing_is_an_empty_plan_carrying_the_reason() -> None:
    plan = ask(state_with(1, policy="Never"))
    assert plan is not None
    assert not plan.victims and not plan.nominations
    assert "preemptionPolicy Never" in plan.explanation


def test_hook_is_silent_when_nothing_of_lower_priority_runs() -> None:
    assert ask(state_with(1000)) is None


def test_hook_does_not_renominate_room_that_terminating_pods_already_free() -> None:
    state = state_with(1)
    for i in range(2):
        state.apply(EvictionRequested(pod=f"default/low-{i}", uid="", preemptor="default/high"))
    plan = ask(state)
    assert plan is not None
    assert not plan.victims and not plan.nominations
    assert "already terminating" in plan.explanation
