"""Volcano's dialect: hard and soft tier limits, subGroupPolicy partitions."""

from __future__ import annotations

from events.builders import node, node_event
from events.model import HyperNodeUpserted
from events.objects import ExactMatch, HyperNode, HyperNodeMember, HyperNodeSpec, MemberSelector, ObjectMeta
from placement import plan_gang
from placement.plan import HARD_TIER, INVALID, MEMBERS, SUB_GROUP
from state.cluster import ClusterState
from tests.unit.placement.builders import (
    block_of,
    fabric,
    members,
    nodes_of,
    nvlink_of,
    occupy,
    planned,
    refused,
    run_pod,
    sub_group,
    volcano_gang,
)

# fabric(): tier 1 = AcceleratorLayer (NVLink), tier 2 = BlockLayer, tier 3 = SpineLayer, tier 4 = cluster


def test_hard_tier_never_crossed() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)  # 4 nodes per block
    volcano_gang(state, "job", min_member=5, tier=2)
    members(state, "job", 5, volcano=True)
    result = refused(plan_gang(state, "default/job"))
    assert result.constraint == HARD_TIER and result.level == "BlockLayer"
    assert result.fit == 4 and result.needed == 5


def test_hard_tier_by_name_places_inside_one_block() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_gang(state, "job", min_member=3, tier_name="block")
    members(state, "job", 3, volcano=True)
    plan = planned(plan_gang(state, "default/job"))
    assert len({block_of(n) for n in nodes_of(plan).values()}) == 1


def test_soft_tier_is_tight_when_room() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_gang(state, "job", min_member=2, mode="soft", tier=1)
    members(state, "job", 2, volcano=True)
    plan = planned(plan_gang(state, "default/job"))
    assert plan.level == "AcceleratorLayer"


def test_soft_tier_falls_back_upward_when_nothing_lower_fits() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_gang(state, "job", min_member=6, mode="soft", tier=1)
    members(state, "job", 6, volcano=True)
    plan = planned(plan_gang(state, "default/job"))
    assert plan.level == "SpineLayer" and len(plan.assignments) == 6


def test_unknown_tier_is_invalid() -> None:
    state = fabric()
    volcano_gang(state, "job", min_member=1, tier_name="rack")
    members(state, "job", 1, volcano=True)
    assert refused(plan_gang(state, "default/job")).constraint == INVALID


def _replicas(state_name: str, count: int, per: int) -> list[dict[str, str]]:
    return [{"replica": f"r{i}"} for i in range(count) for _ in range(per)]


def _labelled(state: object, name: str, labels: list[dict[str, str]]) -> list[str]:
    keys: list[str] = []
    for i, label in enumerate(labels):
        keys += members(state, name, 1, volcano=True, first=i, labels=label)  # type: ignore[arg-type]
    return keys


def test_sub_group_partitions_each_sit_in_their_own_nvlink_domain() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)  # 4 NVLink domains of 2 nodes
    volcano_gang(state, "job", min_member=8, tier=3,
                 sub_groups=[sub_group("tp", 2, keys=["replica"], tier=1)])
    keys = _labelled(state, "job", _replicas("job", 4, 2))
    plan = nodes_of(planned(plan_gang(state, "default/job")))
    assert len(plan) == 8
    for i in range(0, 8, 2):
        assert nvlink_of(plan[keys[i]]) == nvlink_of(plan[keys[i + 1]])


def test_sub_group_partitions_are_all_or_nothing_and_min_sub_groups_may_run() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b0a0-0", 8)  # NVLink s0b0a0 has one free node: no partition of 2 fits there
    volcano_gang(state, "job", min_member=6, tier=3,
                 sub_groups=[sub_group("tp", 2, keys=["replica"], tier=1, minimum=3)])
    keys = _labelled(state, "job", _replicas("job", 4, 2))
    plan = nodes_of(planned(plan_gang(state, "default/job")))
    assert len(plan) == 6
    placed = {k for k in keys if k in plan}
    for i in range(0, 8, 2):
        assert (keys[i] in placed) == (keys[i + 1] in placed)  # never half a partition
    assert "n-s0b0a0-1" not in plan.values()


def test_sub_group_that_cannot_fit_its_tier_keeps_the_job_pending() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_gang(state, "job", min_member=6, tier=3, sub_groups=[sub_group("tp", 3, keys=["replica"], tier=1)])
    _labelled(state, "job", _replicas("job", 2, 3))
    result = refused(plan_gang(state, "default/job"))
    assert result.constraint == SUB_GROUP and "tp[r0]" in result.reason and result.fit == 2


def test_incomplete_partition_waits_while_complete_ones_run() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_gang(state, "job", min_member=2, tier=3, sub_groups=[sub_group("tp", 2, tier=1)])
    keys = members(state, "job", 3, volcano=True)
    plan = nodes_of(planned(plan_gang(state, "default/job")))
    assert sorted(plan) == sorted(keys[:2])
    assert nvlink_of(plan[keys[0]]) == nvlink_of(plan[keys[1]])


def test_pods_outside_every_sub_group_only_stay_in_the_job_domain() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_gang(state, "job", min_member=4, tier=2,
                 sub_groups=[sub_group("workers", 2, match={"role": "worker"}, tier=1)])
    workers = _labelled(state, "job", [{"role": "worker"}] * 2)
    others = members(state, "job", 2, volcano=True, first=10, labels={"role": "ps"})
    plan = nodes_of(planned(plan_gang(state, "default/job")))
    assert len({block_of(n) for n in plan.values()}) == 1
    assert nvlink_of(plan[workers[0]]) == nvlink_of(plan[workers[1]])
    assert set(others) <= set(plan)


def _hypernodes() -> ClusterState:
    """tier 2 'spine' hn-top > tier 1 'leaf' hn-a (n0, n1), hn-b (n2, n3, n4)."""
    state = ClusterState()
    for i in range(5):
        state.apply(node_event(node(f"n{i}")))

    def hypernode(name: str, tier: int, tier_name: str, kind: str, names: list[str]) -> HyperNode:
        return HyperNode(metadata=ObjectMeta(name=name), spec=HyperNodeSpec(tier=tier, tier_name=tier_name, members=[
            HyperNodeMember(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=n))) for n in names]))

    state.apply(HyperNodeUpserted(hyper_node=hypernode("hn-a", 1, "leaf", "Node", ["n0", "n1"])))
    state.apply(HyperNodeUpserted(hyper_node=hypernode("hn-b", 1, "leaf", "Node", ["n2", "n3", "n4"])))
    state.apply(HyperNodeUpserted(hyper_node=hypernode("hn-top", 2, "spine", "HyperNode", ["hn-a", "hn-b"])))
    return state


def test_hypernode_tiers_bound_a_hard_job() -> None:
    state = _hypernodes()
    volcano_gang(state, "fits", min_member=3, tier=1)
    members(state, "fits", 3, volcano=True)
    plan = planned(plan_gang(state, "default/fits"))
    assert plan.domain == "hn-b" and sorted(nodes_of(plan).values()) == ["n2", "n3", "n4"]
    volcano_gang(state, "wide", min_member=4, tier=1)
    members(state, "wide", 4, volcano=True)
    result = refused(plan_gang(state, "default/wide"))
    assert result.constraint == HARD_TIER and result.best_domain == "hn-b" and result.fit == 3


def test_hypernode_tier_name_is_understood() -> None:
    state = _hypernodes()
    volcano_gang(state, "wide", min_member=4, tier_name="spine")
    members(state, "wide", 4, volcano=True)
    plan = planned(plan_gang(state, "default/wide"))
    assert plan.domain == "hn-top" and len(plan.assignments) == 4


def test_recreated_member_rejoins_its_partition_nvlink_domain() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_gang(state, "job", min_member=4, tier=3, sub_groups=[sub_group("tp", 2, keys=["replica"], tier=1)])
    keys = _labelled(state, "job", _replicas("job", 2, 2))
    run_pod(state, keys[0], "n-s0b1a1-0")
    run_pod(state, keys[2], "n-s0b0a1-1")
    run_pod(state, keys[3], "n-s0b0a1-0")
    plan = nodes_of(planned(plan_gang(state, "default/job")))
    assert plan == {keys[1]: "n-s0b1a1-1"}


def test_soft_sub_group_limit_still_packs_each_partition_tightly() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_gang(state, "job", min_member=4, mode="soft", tier=1,
                 sub_groups=[sub_group("tp", 2, keys=["replica"], tier=1, mode="soft")])
    keys = _labelled(state, "job", _replicas("job", 2, 2))
    plan = nodes_of(planned(plan_gang(state, "default/job")))
    assert nvlink_of(plan[keys[0]]) == nvlink_of(plan[keys[1]])
    assert nvlink_of(plan[keys[2]]) == nvlink_of(plan[keys[3]])
    assert len({block_of(n) for n in plan.values()}) == 1


def test_lone_member_of_an_unfilled_partition_waits_for_the_rest() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    volcano_gang(state, "job", min_member=1, tier=3, sub_groups=[sub_group("tp", 2, tier=1)])
    members(state, "job", 1, volcano=True)
    result = refused(plan_gang(state, "default/job"))
    assert result.constraint == MEMBERS and "subGroupSize" in result.reason


def test_a_hard_tier_below_the_lowest_hypernode_tier_leaves_the_gang_pending_with_a_reason() -> None:
    state = ClusterState()
    for name in ("n0", "n1"):
        state.apply(node_event(node(name)))
    state.apply(HyperNodeUpserted(hyper_node=HyperNode(metadata=ObjectMeta(name="rack"), spec=HyperNodeSpec(
        tier=2, members=[HyperNodeMember(type="Node", selector=MemberSelector(exact_match=ExactMatch(name=n)))
                         for n in ("n0", "n1")]))))
    volcano_gang(state, "job", min_member=2, tier=1)  # tiers here start at 2: nothing is that low
    members(state, "job", 2, volcano=True)
    result = refused(plan_gang(state, "default/job"))
    assert result.constraint == INVALID
    assert ("networkTopology highestTierAllowed 1: is below the cluster's lowest domain tier 2: "
            "no domain is that small") in result.reason
