"""Job-level preemption planning: eligibility, the job-aware cost order, gather strategies, explanations."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import EvictionRequested, PodNominated
from placement.gang import plan_gang
from placement.lone import plan_pod
from placement.plan import MEMBERS, GangPlan, Unschedulable
from preemption import NoPreemption, PreemptionPlan, plan_preemption
from preemption.plan import (
    NEVER_POLICY,
    NO_CANDIDATES,
    NO_LOWER_PRIORITY,
    NOT_PREEMPTABLE,
    SURPLUS,
    WAITING,
    WHOLE_GANG,
)
from state.cluster import ClusterState

MUST_BLOCK: list[dict[str, object]] = [{"layer": "BlockLayer", "strategy": "MustGather"}]
MUST_SPINE: list[dict[str, object]] = [{"layer": "SpineLayer", "strategy": "MustGather"}]


def cluster(blocks: Sequence[tuple[str, str, int]]) -> ClusterState:
    """Nodes n0, n1, ... laid out as (spine, block, node count) in order."""
    state = ClusterState()
    index = 0
    for spine, block, count in blocks:
        for _ in range(count):
            state.apply(node_event(node(f"n{index}", spine=spine, block=block)))
            index += 1
    return state


def run_gang(state: ClusterState, name: str, nodes: Sequence[int], *, priority: int, min_member: int | None = None,
             started: float = 0.0) -> None:
    state.apply(group_event(pod_group(name, min_member=len(nodes) if min_member is None else min_member)))
    for i, n in enumerate(nodes):
        state.apply(pod_event(bound(pod(f"{name}-{i}", gang=name, priority=priority), f"n{n}"), time=started))


def submit(state: ClusterState, name: str, size: int, *, priority: int = 1000, gather: list[dict[str, object]] | None
           = None, policy: str | None = None, time: float = 100.0) -> None:
    state.apply(group_event(pod_group(name, min_member=size, gather=gather)))
    for i in range(size):
        p = pod(f"{name}-{i}", gang=name, priority=priority)
        if policy is not None:
            p = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, preemption_policy=policy))
        state.apply(pod_event(p, time=time))


def preempt(state: ClusterState, gang: str) -> PreemptionPlan | NoPreemption:
    key = f"default/{gang}"
    failure = plan_gang(state, key)
    assert isinstance(failure, Unschedulable), failure
    return plan_preemption(state, key, failure)


def planned(state: ClusterState, gang: str) -> PreemptionPlan:
    result = preempt(state, gang)
    assert isinstance(result, PreemptionPlan), result
    return result


# ---------------------------------------------------------------------------- eligibility


def test_preemptor_with_never_policy_does_not_preempt() -> None:
    state = cluster([("s0", "b0", 4)])
    run_gang(state, "low", [0, 1, 2, 3], priority=1)
    submit(state, "high", 2, policy="Never")
    result = preempt(state, "high")
    assert isinstance(result, NoPreemption)
    assert result.kind == NEVER_POLICY
    assert "preemptionPolicy Never" in result.reason


def test_gang_waits_while_its_victims_terminate_on_its_nominated_nodes() -> None:
    state = cluster([("s0", "b0", 4)])
    run_gang(state, "low", [0, 1, 2, 3], priority=1)
    submit(state, "high", 4)
    first = planned(state, "high")
    for assignment in first.nominations:
        state.apply(PodNominated(pod=assignment.pod, uid=f"uid-{assignment.pod.replace('/', '-')}",
                                 node=assignment.node, gang="default/high", priority=1000))
    for victim in first.victims:
        state.apply(EvictionRequested(pod=victim, uid="", preemptor="default/high"))
    again = preempt(state, "high")
    assert isinstance(again, NoPreemption)
    assert again.kind == WAITING
    assert "default/low-0" in again.reason


def test_failure_that_is_not_about_room_is_not_preempted_for() -> None:
    state = cluster([("s0", "b0", 2)])
    run_gang(state, "low", [0, 1], priority=1)
    failure = Unschedulable(gangs=("default/high",), reason="2 of minMember 4 pods exist", constraint=MEMBERS)
    submit(state, "high", 2)
    result = plan_preemption(state, "default/high", failure)
    assert isinstance(result, NoPreemption)
    assert result.kind == NOT_PREEMPTABLE


def test_pods_of_equal_or_higher_priority_are_never_victims() -> None:
    state = cluster([("s0", "b0", 4)])
    run_gang(state, "same", [0, 1], priority=1000)
    run_gang(state, "above", [2, 3], priority=2000)
    submit(state, "high", 2)
    result = preempt(state, "high")
    assert isinstance(result, NoPreemption)
    assert result.kind == NO_LOWER_PRIORITY


# ---------------------------------------------------------------------------- the cost order


def test_one_whole_low_priority_gang_is_chosen_over_parts_of_two() -> None:
    # b0 holds gang "whole" alone; b1 holds half of "left" and half of "right" (their other halves in b2).
    state = cluster([("s0", "b0", 4), ("s0", "b1", 4), ("s0", "b2", 4)])
    run_gang(state, "whole", [0, 1, 2, 3], priority=1, started=0.0)
    run_gang(state, "left", [4, 5, 8, 9], priority=1, started=50.0)
    run_gang(state, "right", [6, 7, 10, 11], priority=1, started=50.0)
    submit(state, "high", 4, gather=MUST_BLOCK)
    plan = planned(state, "high")
    assert list(plan.victim_jobs) == ["default/whole"]
    assert plan.victims == tuple(f"default/whole-{i}" for i in range(4))
    assert plan.domain == "b0"
    assert {a.node for a in plan.nominations} == {"n0", "n1", "n2", "n3"}


def test_lowest_highest_victim_priority_wins_over_fewer_pods() -> None:
    state = cluster([("s0", "b0", 8), ("s0", "b1", 4)])
    run_gang(state, "cheap", [0, 1, 2, 3, 4, 5, 6, 7], priority=5)
    run_gang(state, "dear", [8, 9, 10, 11], priority=10)
    submit(state, "high", 4, gather=MUST_BLOCK)
    plan = planned(state, "high")
    assert list(plan.victim_jobs) == ["default/cheap"]
    assert "priority 5" in plan.explanation


def test_fewer_victim_pods_win_at_equal_priority_and_jobs() -> None:
    state = cluster([("s0", "b0", 8), ("s0", "b1", 4)])
    run_gang(state, "big", [0, 1, 2, 3, 4, 5, 6, 7], priority=5)
    run_gang(state, "small", [8, 9, 10, 11], priority=5)
    submit(state, "high", 4, gather=MUST_BLOCK)
    plan = planned(state, "high")
    assert list(plan.victim_jobs) == ["default/small"]


def test_most_recently_started_job_is_preferred_at_equal_cost() -> None:
    state = cluster([("s0", "b0", 4), ("s0", "b1", 4)])
    run_gang(state, "old", [0, 1, 2, 3], priority=1, started=0.0)
    run_gang(state, "recent", [4, 5, 6, 7], priority=1, started=60.0)
    submit(state, "high", 4, gather=MUST_BLOCK)
    plan = planned(state, "high")
    assert list(plan.victim_jobs) == ["default/recent"]
    assert plan.jobs[0].started_at == 60.0


def test_surplus_pods_above_min_member_go_before_any_whole_job() -> None:
    state = cluster([("s0", "b0", 8)])
    run_gang(state, "elastic", [0, 1, 2, 3, 4, 5], priority=1, min_member=4, started=0.0)
    run_gang(state, "rigid", [6, 7], priority=1)
    submit(state, "high", 2)
    plan = planned(state, "high")
    assert len(plan.jobs) == 1
    job = plan.jobs[0]
    assert job.key == "default/elastic" and job.kind == SURPLUS and not job.broken
    assert len(plan.victims) == 2


def test_breaking_a_gang_below_min_member_takes_all_of_its_pods() -> None:
    state = cluster([("s0", "b0", 4)])
    run_gang(state, "low", [0, 1, 2, 3], priority=1, min_member=3)
    submit(state, "high", 2)
    plan = planned(state, "high")
    # one surplus pod is not enough room for 2; breaking the gang evicts all 4, not 2
    assert plan.jobs[0].kind == WHOLE_GANG
    assert len(plan.victims) == 4


def test_tighter_span_wins_when_costs_are_equal() -> None:
    # Without a spec the gang may span anything; evicting "b" lands it under one spine, "a" (first by
    # name, so first in the cluster-wide greedy) would spread it over both spines.
    state = cluster([("s0", "b0", 4), ("s1", "b1", 4), ("s1", "b2", 4)])
    run_gang(state, "a", [0, 1, 2, 3], priority=1, started=0.0)
    run_gang(state, "b", [4, 5, 6, 7], priority=1, started=0.0)
    submit(state, "high", 8)
    plan = planned(state, "high")
    assert list(plan.victim_jobs) == ["default/b"]
    assert plan.domain == "s1"
    assert "tighter span" in plan.explanation


# ---------------------------------------------------------------------------- gather strategies


def test_mustgather_preemptor_stays_pending_rather_than_preempt_across_blocks() -> None:
    state = cluster([("s0", "b0", 3), ("s0", "b1", 3)])
    run_gang(state, "low-a", [0, 1, 2], priority=1)
    run_gang(state, "low-b", [3, 4, 5], priority=1)
    submit(state, "high", 4, gather=MUST_BLOCK)
    result = preempt(state, "high")
    assert isinstance(result, NoPreemption)
    assert result.kind == NO_CANDIDATES
    assert "BlockLayer" in result.reason


def test_plan_lands_inside_one_block_and_placement_accepts_it() -> None:
    state = cluster([("s0", "b0", 4), ("s0", "b1", 4)])
    run_gang(state, "x", [0, 1], priority=1, started=5.0)
    run_gang(state, "y", [4, 5], priority=1, started=5.0)
    run_gang(state, "z", [2, 6], priority=1, started=5.0)
    submit(state, "high", 4, gather=MUST_BLOCK)
    plan = planned(state, "high")
    blocks = {state.topology.domain_at(a.node, 2).name for a in plan.nominations}  # type: ignore[union-attr]
    assert len(blocks) == 1
    after = plan_gang(state, "default/high", ignore_pods=frozenset(plan.victims))
    assert isinstance(after, GangPlan)


def test_lower_priority_nominations_on_the_chosen_nodes_are_listed_for_clearing() -> None:
    state = cluster([("s0", "b0", 2)])
    run_gang(state, "low", [0, 1], priority=1)
    state.apply(pod_event(pod("waiting", priority=2)))
    state.apply(PodNominated(pod="default/waiting", uid="uid-default-waiting", node="n0", priority=2))
    submit(state, "high", 2)
    plan = planned(state, "high")
    assert plan.clear_nominations == ("default/waiting",)


# ---------------------------------------------------------------------------- explanation


def test_explanation_says_what_was_considered_and_why_this_choice() -> None:
    state = cluster([("s0", "b0", 4), ("s0", "b1", 4)])
    run_gang(state, "old", [0, 1, 2, 3], priority=1, started=0.0)
    run_gang(state, "recent", [4, 5, 6, 7], priority=1, started=60.0)
    submit(state, "high", 4, gather=MUST_BLOCK)
    plan = planned(state, "high")
    text = plan.explanation
    first = text.splitlines()[0]
    assert first.startswith("default/high (priority 1000, 4 pending pod(s)) preempts 1 job(s) / 4 pod(s)")
    assert "placement failed:" in text
    assert "whole gang default/recent" in text
    assert "why this one:" in text
    assert "BlockLayer b0" in text  # the losing candidate is named




def test_lone_pod_preempts_the_cheapest_lone_pod() -> None:
    state = cluster([("s0", "b0", 2)])
    state.apply(pod_event(bound(pod("old", priority=1), "n0"), time=0.0))
    state.apply(pod_event(bound(pod("new", priority=1), "n1"), time=30.0))
    state.apply(pod_event(pod("urgent", priority=50), time=40.0))
    failure = plan_pod(state, "default/urgent")
    assert isinstance(failure, Unschedulable)
    plan = plan_preemption(state, "default/urgent", failure)
    assert isinstance(plan, PreemptionPlan)
    assert plan.victims == ("default/new",)
    assert [(a.pod, a.node) for a in plan.nominations] == [("default/urgent", "n1")]


def test_room_freed_by_pods_already_terminating_is_nominated_without_new_victims() -> None:
    state = cluster([("s0", "b0", 2), ("s0", "b1", 2)])
    run_gang(state, "going", [0, 1], priority=1)
    run_gang(state, "staying", [2, 3], priority=1)
    for i in range(2):
        leaving = bound(pod(f"going-{i}", gang="going", priority=1), f"n{i}")
        meta = msgspec.structs.replace(leaving.metadata, deletion_timestamp="2026-01-01T00:00:00Z")
        state.apply(pod_event(msgspec.structs.replace(leaving, metadata=meta)))
    submit(state, "high", 2)
    plan = planned(state, "high")
    assert plan.victims == ()
    assert {a.node for a in plan.nominations} == {"n0", "n1"}


def test_gang_group_preempts_for_all_its_gangs_together() -> None:
    state = cluster([("s0", "b0", 4), ("s0", "b1", 4)])
    run_gang(state, "low-a", [0, 1, 2, 3], priority=1, started=0.0)
    run_gang(state, "low-b", [4, 5, 6, 7], priority=1, started=9.0)
    group = ["default/workers", "default/ps"]
    for name, size in (("workers", 3), ("ps", 1)):
        state.apply(group_event(pod_group(name, min_member=size, gang_group=group, gather=MUST_BLOCK)))
        for i in range(size):
            state.apply(pod_event(pod(f"{name}-{i}", gang=name, priority=1000), time=50.0))
    plan = planned(state, "workers")
    assert plan.gangs == ("default/ps", "default/workers")
    assert list(plan.victim_jobs) == ["default/low-b"]  # the more recently started of two equal jobs
    assert sorted(a.pod for a in plan.nominations) == ["default/ps-0", *(f"default/workers-{i}" for i in range(3))]
    assert {a.node for a in plan.nominations} == {"n4", "n5", "n6", "n7"}


def test_partly_running_gang_preempts_next_to_its_running_members() -> None:
    state = cluster([("s0", "b0", 4), ("s0", "b1", 4)])
    run_gang(state, "old-in-b0", [0, 1], priority=1, started=0.0)
    run_gang(state, "recent-in-b0", [2, 3], priority=1, started=90.0)
    run_gang(state, "in-b1", [6, 7], priority=1, started=0.0)
    state.apply(group_event(pod_group("grow", min_member=4, gather=MUST_BLOCK)))
    for i, n in enumerate([4, 5]):
        state.apply(pod_event(bound(pod(f"grow-{i}", gang="grow", priority=1000), f"n{n}"), time=10.0))
    for i in (2, 3):
        state.apply(pod_event(pod(f"grow-{i}", gang="grow", priority=1000), time=100.0))
    plan = planned(state, "grow")
    # b0's recently started gang would be cheaper on work lost, but the gang's running half is in b1
    assert list(plan.victim_jobs) == ["default/in-b1"]
    assert {a.node for a in plan.nominations} == {"n6", "n7"}


def test_one_gang_freeing_whole_nodes_beats_many_small_pods_that_free_one() -> None:
    # n0 holds eight 1-GPU lone pods (8 jobs); n1 one whole-node pod of gang "trainer" (1 job).
    state = cluster([("s0", "b0", 2)])
    for i in range(8):
        state.apply(pod_event(bound(pod(f"small-{i}", gpus=1, cpu="1", memory="1Gi", priority=1), "n0"),
                              time=float(50 + i)))
    run_gang(state, "trainer", [1], priority=1, started=0.0)
    submit(state, "high", 1)
    plan = planned(state, "high")
    assert list(plan.victim_jobs) == ["default/trainer"]
    assert [a.node for a in plan.nominations] == ["n1"]


def test_gang_whose_nominations_were_given_up_is_renominated_on_the_room_its_victims_free() -> None:
    state = cluster([("s0", "b0", 2)])
    run_gang(state, "low", [0, 1], priority=1)
    submit(state, "high", 2)
    first = planned(state, "high")
    for victim in first.victims:
        state.apply(EvictionRequested(pod=victim, uid="", preemptor="default/high"))
    # the loop gave up its nominations (scheduleTimeoutSeconds) while the victims still terminate
    again = planned(state, "high")
    assert again.victims == ()
    assert {a.node for a in again.nominations} == {"n0", "n1"}


def test_a_nomination_that_outranks_one_of_the_preemptors_pods_is_kept() -> None:
    # A gang of mixed priorities preempts only below its lowest pod; a nomination above that one stays.
    state = cluster([("s0", "b0", 3)])
    run_gang(state, "low", [0, 1, 2], priority=1)
    for name, priority, where in (("outranks", 500, "n0"), ("below", 5, "n1")):
        state.apply(pod_event(pod(name, priority=priority)))
        state.apply(PodNominated(pod=f"default/{name}", uid=f"uid-default-{name}", node=where, priority=priority))
    state.apply(group_event(pod_group("high", min_member=2)))
    state.apply(pod_event(pod("high-0", gang="high", priority=1000), time=100.0))
    state.apply(pod_event(pod("high-1", gang="high", priority=10), time=100.0))
    plan = planned(state, "high")
    assert plan.nodes == ("n0", "n1")
    assert plan.clear_nominations == ("default/below",)  # not default/outranks (500 > high-1's 10)
