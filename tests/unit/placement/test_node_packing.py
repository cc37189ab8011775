"""The node is the lowest layer: a gang whose pods one node can hold shares that node."""

from __future__ import annotations

from placement import plan_gang
from tests.unit.placement.builders import (
    fabric,
    gang,
    nodes_of,
    nvlink_of,
    occupy,
    planned,
    run_pod,
)


def test_two_half_node_pods_share_one_free_node_rather_than_two_nodes_of_a_tighter_nvlink_domain() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b0a0-0", 4)
    occupy(state, "n-s0b0a0-1", 4)
    occupy(state, "n-s0b0a1-1", 8)
    for name in ("n-s0b1a0-0", "n-s0b1a0-1", "n-s0b1a1-0", "n-s0b1a1-1"):
        occupy(state, name, 8)
    gang(state, "pair", 2, gpus=4)
    plan = planned(plan_gang(state, "default/pair"))
    assert set(nodes_of(plan).values()) == {"n-s0b0a1-0"}
    assert plan.domain == "s0b0a1" and plan.level == "AcceleratorLayer"
    assert "node n-s0b0a1-0" in plan.explanation and "one node holds all 2 pods" in plan.explanation


def test_gang_on_one_node_takes_the_node_leaving_least_behind() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    occupy(state, "n-s0b0a0-0", 2)  # 6 free: two 2-GPU pods leave 2
    occupy(state, "n-s0b0a1-1", 4)  # 4 free: they leave 0, and its NVLink domain is the tighter one
    gang(state, "pair", 2, gpus=2)
    plan = planned(plan_gang(state, "default/pair"))
    assert set(nodes_of(plan).values()) == {"n-s0b0a1-1"}


def test_gang_too_big_for_any_node_still_spreads_over_the_tightest_domain() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    gang(state, "train", 3, gpus=8)
    plan = planned(plan_gang(state, "default/train"))
    assert len(set(nodes_of(plan).values())) == 3
    assert len({nvlink_of(n) for n in nodes_of(plan).values()}) == 2  # one NVLink domain filled, then its neighbour


def test_recreated_member_joins_its_running_partner_on_their_node_when_it_fits() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    keys = gang(state, "pair", 3, min_member=1, gpus=2)
    run_pod(state, keys[0], "n-s0b0a1-0")
    plan = planned(plan_gang(state, "default/pair"))
    assert set(nodes_of(plan).values()) == {"n-s0b0a1-0"}


def test_members_running_on_two_nodes_keep_the_rest_in_their_nvlink_domain() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    keys = gang(state, "trio", 4, min_member=1, gpus=2)
    run_pod(state, keys[0], "n-s0b0a0-0")
    run_pod(state, keys[1], "n-s0b0a0-1")
    plan = planned(plan_gang(state, "default/trio"))
    assert {nvlink_of(n) for n in nodes_of(plan).values()} == {"s0b0a0"}


def test_mustgather_is_kept_when_the_gang_goes_on_one_node() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    gang(state, "pair", 2, gpus=4, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}])
    plan = planned(plan_gang(state, "default/pair"))
    assert len(set(nodes_of(plan).values())) == 1
