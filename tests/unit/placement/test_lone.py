"""Pods without a gang fill gaps in busy domains instead of breaking into empty ones."""

from __future__ import annotations

from events.builders import pod, pod_event
from placement import plan_pod
from placement.plan import CAPACITY, INVALID, POD_FIT
from tests.unit.placement.builders import block_of, fabric, gang, nominate, nvlink_of, occupy, planned, refused


def test_lone_pods_go_to_busy_domains() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b1a1-1", 4)
    state.apply(pod_event(pod("web", gpus=1)))
    plan = planned(plan_pod(state, "default/web"))
    assert plan.assignments[0].node == "n-s0b1a1-1"
    assert plan.gangs == () and plan.level == "AcceleratorLayer" and plan.domain == "s0b1a1"


def test_lone_pod_prefers_the_busy_nvlink_domain_of_a_busy_block() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b1a0-0", 8)  # full node: block s0b1 and NVLink s0b1a0 are the busy ones
    state.apply(pod_event(pod("web", gpus=1)))
    node = planned(plan_pod(state, "default/web")).assignments[0].node
    assert block_of(node) == "s0b1" and nvlink_of(node) == "s0b1a0"


def test_lone_pod_without_room_says_what_nodes_lack() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=1, gpus=8)
    occupy(state, "n-s0b0a0-0", 6)
    state.apply(pod_event(pod("big", gpus=4)))
    result = refused(plan_pod(state, "default/big"))
    assert result.constraint == CAPACITY and "1 Insufficient nvidia.com/gpu" in result.reason


def test_pod_bigger_than_any_node_can_never_fit() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2, gpus=8)
    state.apply(pod_event(pod("huge", gpus=16)))
    assert refused(plan_pod(state, "default/huge")).constraint == POD_FIT


def test_pod_of_a_gang_is_planned_with_its_gang() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    keys = gang(state, "pair", 2)
    plan = planned(plan_pod(state, keys[0]))
    assert plan.gangs == ("default/pair",) and len(plan.assignments) == 2


def test_unknown_pod_is_invalid() -> None:
    assert refused(plan_pod(fabric(), "default/nope")).constraint == INVALID


def test_lone_pod_goes_to_its_nominated_node_and_is_not_blocked_by_its_own_nomination() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    occupy(state, "n-s0b0a0-0", 4)  # the busier node, which bin-packing alone would pick
    state.apply(pod_event(pod("web", gpus=8, priority=100)))
    nominate(state, "default/web", "n-s0b0a0-1")
    plan = planned(plan_pod(state, "default/web"))
    assert plan.assignments[0].node == "n-s0b0a0-1" and "nominated" in plan.explanation
