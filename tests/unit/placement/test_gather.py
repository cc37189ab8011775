"""Where gangs go: gather strategies, bin-packing, podCountMultiple, index order, running members."""

from __future__ import annotations

from events.builders import group_event, node, node_event, pod, pod_event, pod_group
from events.model import HyperNodeUpserted
from events.objects import ExactMatch, HyperNode, HyperNodeMember, HyperNodeSpec, MemberSelector, ObjectMeta, RegexMatch
from placement import plan_gang
from placement.plan import CAPACITY, INVALID, MEMBERS, MUST_GATHER
from state.cluster import ClusterState
from tests.unit.placement.builders import (
    apply_plan,
    block_of,
    fabric,
    gang,
    members,
    nodes_of,
    nominate,
    nvlink_of,
    occupy,
    planned,
    refused,
    run_pod,
)

MUST_BLOCK: list[dict[str, object]] = [{"layer": "BlockLayer", "strategy": "MustGather"}]
MATCH_POLICY = "gang.scheduling.koordinator.sh/match-policy"
PREFER_BLOCK: list[dict[str, object]] = [{"layer": "BlockLayer", "strategy": "PreferGather"}]


def test_mustgather_gang_lands_in_one_block() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    gang(state, "train", 4, gather=MUST_BLOCK)
    plan = planned(plan_gang(state, "default/train"))
    assert len(plan.assignments) == 4
    assert len({block_of(n) for n in nodes_of(plan).values()}) == 1
    assert plan.level == "BlockLayer" and plan.domain in ("s0b0", "s0b1")


def test_mustgather_gang_stays_pending_when_no_block_has_room() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)  # 4 nodes per block
    occupy(state, "n-s0b0a0-0", 8)
    gang(state, "train", 5, gather=MUST_BLOCK)
    result = refused(plan_gang(state, "default/train"))
    assert result.constraint == MUST_GATHER
    assert result.level == "BlockLayer"
    assert result.best_domain == "s0b1" and result.fit == 4 and result.needed == 5
    assert "BlockLayer" in result.reason and "4 of 5" in result.reason and "default/train" in result.reason


def test_mustgather_gangs_still_land_in_one_block_after_bad_hypernodes_are_added_to_a_labelled_cluster() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)

    def hyper_node(name: str, tier: int, *members: HyperNodeMember) -> HyperNodeUpserted:
        return HyperNodeUpserted(hyper_node=HyperNode(metadata=ObjectMeta(name=name),
                                                      spec=HyperNodeSpec(tier=tier, members=list(members))))

    state.apply(hyper_node("bad-regex", 1, HyperNodeMember(type="Node", selector=MemberSelector(
        regex_match=RegexMatch(pattern="n-s0b0(")))))
    state.apply(hyper_node("c0", 1, HyperNodeMember(type="HyperNode", selector=MemberSelector(
        exact_match=ExactMatch(name="c1")))))
    state.apply(hyper_node("c1", 1, HyperNodeMember(type="HyperNode", selector=MemberSelector(
        exact_match=ExactMatch(name="c0")))))
    gang(state, "train", 4, gather=MUST_BLOCK)
    plan = planned(plan_gang(state, "default/train"))
    assert plan.level == "BlockLayer" and len({block_of(n) for n in nodes_of(plan).values()}) == 1


def test_prefergather_falls_back_to_spine_when_no_block_fits() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    gang(state, "train", 6, gather=PREFER_BLOCK)
    plan = planned(plan_gang(state, "default/train"))
    assert len(plan.assignments) == 6
    assert plan.level == "SpineLayer" and plan.domain == "s0"
    # tight even when spanning: one block is filled whole, the other takes the rest
    per_block: dict[str, int] = {}
    for n in nodes_of(plan).values():
        per_block[block_of(n)] = per_block.get(block_of(n), 0) + 1
    assert sorted(per_block.values()) == [2, 4]


def test_gang_without_spec_is_placed_as_tight_as_capacity_allows() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=4)
    gang(state, "train", 3)
    plan = planned(plan_gang(state, "default/train"))
    assert len({nvlink_of(n) for n in nodes_of(plan).values()}) == 1
    assert plan.level == "AcceleratorLayer"


def test_bin_packing_keeps_the_empty_block_whole_for_the_next_job() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b1a0-0", 8)  # block s0b1 already has work: 3 free nodes
    gang(state, "small", 2, gather=MUST_BLOCK)
    plan = planned(plan_gang(state, "default/small"))
    assert {block_of(n) for n in nodes_of(plan).values()} == {"s0b1"}
    apply_plan(state, plan)
    gang(state, "big", 4, gather=MUST_BLOCK)
    big = planned(plan_gang(state, "default/big"))
    assert {block_of(n) for n in nodes_of(big).values()} == {"s0b0"}


def test_partly_used_nvlink_domain_is_filled_before_a_fresh_one() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=4)
    occupy(state, "n-s0b0a1-0", 8)
    occupy(state, "n-s0b0a1-1", 8)
    gang(state, "pair", 2)
    plan = planned(plan_gang(state, "default/pair"))
    assert {nvlink_of(n) for n in nodes_of(plan).values()} == {"s0b0a1"}
    assert "least leftover" in plan.explanation


def test_pod_count_multiple_puts_pods_per_block_in_multiples() -> None:
    state = fabric(blocks=3, nvlinks=2, nodes=3)  # 6 nodes per block
    gang(state, "pipe", 8, gather=[{"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 4}])
    plan = planned(plan_gang(state, "default/pipe"))
    per_block: dict[str, int] = {}
    for n in nodes_of(plan).values():
        per_block[block_of(n)] = per_block.get(block_of(n), 0) + 1
    assert sorted(per_block.values()) == [4, 4]


def test_pod_count_multiple_refuses_blocks_that_cannot_take_a_whole_multiple() -> None:
    state = fabric(blocks=3, nvlinks=1, nodes=3)  # 3 nodes per block: never 4
    gang(state, "pipe", 8, gather=[{"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 4}])
    result = refused(plan_gang(state, "default/pipe"))
    assert result.constraint == CAPACITY


def test_index_neighbours_share_nvlink_domain() -> None:
    state = fabric(blocks=1, nvlinks=4, nodes=2, gpus=8)
    # every NVLink domain has one free node out of two except two fully free ones
    occupy(state, "n-s0b0a0-0", 8)
    occupy(state, "n-s0b0a2-1", 8)
    keys = gang(state, "ring", 6, indexed=True)
    plan = nodes_of(planned(plan_gang(state, "default/ring")))
    pairs_together = sum(1 for i in range(0, 6, 2)
                         if nvlink_of(plan[keys[i]]) == nvlink_of(plan[keys[i + 1]]))
    assert pairs_together >= 2
    order = [nvlink_of(plan[k]) for k in keys]
    # members appear domain by domain, never interleaved
    seen: list[str] = []
    for domain in order:
        if not seen or seen[-1] != domain:
            assert domain not in seen
            seen.append(domain)


def test_members_missing_keeps_gang_pending_and_says_how_many() -> None:
    state = fabric()
    gang(state, "train", 3, min_member=5)
    result = refused(plan_gang(state, "default/train"))
    assert result.constraint == MEMBERS and "2 missing" in result.reason


def test_gang_without_podgroup_is_not_planned() -> None:
    state = fabric()
    members(state, "ghost", 2)
    result = refused(plan_gang(state, "default/ghost"))
    assert result.constraint == MEMBERS and "PodGroup not found" in result.reason


def test_unknown_mustgather_layer_is_invalid() -> None:
    state = fabric()
    gang(state, "train", 2, gather=[{"layer": "RackLayer", "strategy": "MustGather"}])
    result = refused(plan_gang(state, "default/train"))
    assert result.constraint == INVALID and "RackLayer" in result.reason
    assert result.reason.startswith("gang default/train: MustGather layer 'RackLayer': ")  # named once


def test_as_many_pods_as_fit_are_placed_when_all_do_not_but_min_member_does() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)  # 4 nodes
    keys = gang(state, "elastic", 6, min_member=3, indexed=True)
    plan = planned(plan_gang(state, "default/elastic"))
    assert sorted(nodes_of(plan)) == sorted(keys[:4])
    assert "4 of 6 pending placed" in plan.explanation


def test_subset_below_min_member_is_never_placed() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)  # 4 nodes
    gang(state, "rigid", 6, min_member=5)
    result = refused(plan_gang(state, "default/rigid"))
    assert result.needed == 5 and result.fit == 4


def test_capacity_reason_counts_what_the_nodes_lack() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    gang(state, "huge", 3)
    result = refused(plan_gang(state, "default/huge"))
    assert result.constraint == CAPACITY and result.fit == 2 and result.needed == 3
    assert "room for 2 of 3" in result.reason


def test_a_gang_of_two_kinds_of_pod_that_fit_only_apart_is_not_said_to_have_room_for_all() -> None:
    """A launcher and a worker (say) of 8 GPUs each on one node of 8: each fits on its own, not both."""
    state = fabric(blocks=1, nvlinks=1, nodes=1)
    state.apply(group_event(pod_group("mpi", min_member=2)))
    state.apply(pod_event(pod("mpi-launcher", gang="mpi", gpus=8, cpu="1")))
    state.apply(pod_event(pod("mpi-worker", gang="mpi", gpus=8, cpu="2")))
    result = refused(plan_gang(state, "default/mpi"))
    assert result.constraint == CAPACITY and result.needed == 2 and result.fit == 1
    assert result.reason == ("gang default/mpi: the whole cluster has room for each of its 2 kinds of pod on its own, "
                             "not for all 2 pods at once (1 node(s))")


def test_a_gathered_gang_of_two_kinds_of_pod_is_not_said_to_fit_the_closest_block_whole() -> None:
    """Blocks of one node of 8 GPUs; a launcher and a worker of 8 each, gathered in a block: the closest block
    has room for each on its own, which is all it may be said to have."""
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    state.apply(group_event(pod_group("mpi", min_member=2, gather=MUST_BLOCK)))
    state.apply(pod_event(pod("mpi-launcher", gang="mpi", gpus=8, cpu="1")))
    state.apply(pod_event(pod("mpi-worker", gang="mpi", gpus=8, cpu="2")))
    result = refused(plan_gang(state, "default/mpi"))
    assert result.constraint == MUST_GATHER and result.needed == 2 and result.fit == 1
    assert result.reason.endswith("no BlockLayer domain can hold all 2 pods; closest is BlockLayer s0b0, with room "
                                  "for each of its 2 kinds of pod on its own, not for all 2 at once"), result.reason


def test_partly_running_gang_places_missing_members_near_running_ones() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    keys = gang(state, "train", 4, gather=MUST_BLOCK, indexed=True)
    run_pod(state, keys[0], "n-s0b1a1-0")
    run_pod(state, keys[1], "n-s0b1a1-1")
    plan = planned(plan_gang(state, "default/train"))
    assert sorted(nodes_of(plan)) == sorted(keys[2:])
    assert {block_of(n) for n in nodes_of(plan).values()} == {"s0b1"}
    assert plan.domain == "s0b1"


def test_partly_running_gang_stays_pending_rather_than_leave_its_block() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    keys = gang(state, "train", 4, gather=MUST_BLOCK, annotations={MATCH_POLICY: "waiting-and-running"})
    run_pod(state, keys[0], "n-s0b1a1-0")
    occupy(state, "n-s0b1a0-0", 8)
    occupy(state, "n-s0b1a0-1", 8)
    result = refused(plan_gang(state, "default/train"))
    assert result.constraint == MUST_GATHER and result.best_domain == "s0b1" and result.fit == 1


def test_once_satisfied_gang_places_what_fits_of_its_recreated_members_inside_its_block() -> None:
    # Koordinator's default match policy: a gang with a bound member has been satisfied, so the
    # recreated members go as they fit, still inside the MustGather block of the running one.
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    keys = gang(state, "train", 4, gather=MUST_BLOCK)
    run_pod(state, keys[0], "n-s0b1a1-0")
    occupy(state, "n-s0b1a0-0", 8)
    occupy(state, "n-s0b1a0-1", 8)
    plan = planned(plan_gang(state, "default/train"))
    assert list(nodes_of(plan).values()) == ["n-s0b1a1-1"]


def test_partly_running_gang_without_spec_grows_inside_its_running_domain() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    keys = gang(state, "train", 3)
    run_pod(state, keys[0], "n-s0b1a0-0")
    plan = planned(plan_gang(state, "default/train"))
    assert {block_of(n) for n in nodes_of(plan).values()} == {"s0b1"}
    assert plan.level == "BlockLayer"


def test_heterogeneous_gang_group_is_placed_as_one_job() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    group = ["default/workers", "default/ps"]
    gang(state, "workers", 3, gpus=8, gather=MUST_BLOCK, gang_group=group)
    gang(state, "ps", 2, gpus=0, gather=MUST_BLOCK, gang_group=group)
    plan = planned(plan_gang(state, "default/ps"))
    assert plan.gangs == ("default/ps", "default/workers")
    assert len(plan.assignments) == 5
    assert len({block_of(n) for n in nodes_of(plan).values()}) == 1


def test_gang_group_waits_for_a_missing_podgroup() -> None:
    state = fabric()
    gang(state, "workers", 2, gang_group=["default/workers", "default/ps"])
    result = refused(plan_gang(state, "default/workers"))
    assert result.constraint == MEMBERS and "default/ps" in result.reason


def test_plans_are_deterministic() -> None:
    first, second = fabric(blocks=3), fabric(blocks=3)
    for state in (first, second):
        occupy(state, "n-s0b1a0-0", 4, name="w")
        gang(state, "train", 5, indexed=True)
    assert plan_gang(first, "default/train") == plan_gang(second, "default/train")


def test_gang_goes_where_nodes_were_nominated_for_it() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b0a0-0", 8)  # s0b0 is the tighter block, but preemption freed room in s0b1
    keys = gang(state, "vip", 2, gather=MUST_BLOCK, priority=100)
    nominate(state, keys[0], "n-s0b1a1-0")
    nominate(state, keys[1], "n-s0b1a1-1")
    plan = planned(plan_gang(state, "default/vip"))
    assert sorted(nodes_of(plan).values()) == ["n-s0b1a1-0", "n-s0b1a1-1"]


def test_cluster_without_topology_is_one_domain() -> None:
    state = ClusterState()
    for i in range(3):
        state.apply(node_event(node(f"plain-{i}")))
    gang(state, "train", 3, gather=[{"layer": "BlockLayer", "strategy": "PreferGather"}])
    plan = planned(plan_gang(state, "default/train"))
    assert plan.domain == "" and plan.level == "ClusterTopologyLayer" and len(plan.assignments) == 3


def test_prefergather_at_a_high_layer_still_packs_into_the_lowest_domain_that_fits() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    gang(state, "train", 2, gather=[{"layer": "SpineLayer", "strategy": "PreferGather"}])
    plan = planned(plan_gang(state, "default/train"))
    assert plan.level == "AcceleratorLayer"


def test_mustgather_at_nvlink_layer_refuses_rather_than_spill_into_the_block() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    gang(state, "tp", 3, gather=[{"layer": "AcceleratorLayer", "strategy": "MustGather"}])
    result = refused(plan_gang(state, "default/tp"))
    assert result.constraint == MUST_GATHER and result.level == "AcceleratorLayer" and result.fit == 2
