"""Which nodes a pod may use: resources, taints, selectors, affinity, nominations, ignored pods."""

from __future__ import annotations

import msgspec
import pytest

from events.builders import node, node_event, pod, pod_event
from events.ingest import KIND_BY_NAME, upsert_event
from events.objects import (
    Affinity,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)
from placement import plan_gang, plan_pod
from placement.fit import shape_of
from placement.members import pod_shapes
from placement.plan import CAPACITY, POD_FIT
from state.cluster import ClusterState
from state.node_selectors import requirement_matches
from tests.unit.placement.builders import fabric, gang, nodes_of, nominate, occupy, planned, refused


def _cluster(*nodes: msgspec.Struct) -> ClusterState:
    state = ClusterState()
    for n in nodes:
        state.apply(node_event(n))  # type: ignore[arg-type]
    return state


def _lone(state: ClusterState, name: str = "p", **spec: object) -> str:
    p = pod(name, gpus=1)
    p = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, **spec))
    state.apply(pod_event(p))
    return f"default/{name}"


def _node_of(state: ClusterState, key: str) -> str:
    result = plan_pod(state, key)
    return planned(result).assignments[0].node


def _affinity(*requirements: NodeSelectorRequirement, fields: bool = False) -> Affinity:
    term = (NodeSelectorTerm(match_fields=list(requirements)) if fields
            else NodeSelectorTerm(match_expressions=list(requirements)))
    required = NodeSelector(node_selector_terms=[term])
    return Affinity(node_affinity=NodeAffinity(required_during_scheduling_ignored_during_execution=required))


def test_extended_resources_are_counted_like_cpu() -> None:
    state = _cluster(node("small", gpus=2), node("none", gpus=0))
    key = _lone(state)
    assert _node_of(state, key) == "small"


def test_pod_count_limit_is_a_resource() -> None:
    state = _cluster(node("tiny", pods=1), node("roomy", gpus=8))
    occupy(state, "tiny", 0)
    assert _node_of(state, _lone(state)) == "roomy"


def test_untolerated_noschedule_taint_turns_the_pod_away() -> None:
    taint = Taint(key="dedicated", value="infer", effect="NoSchedule")
    state = _cluster(node("tainted", taints=[taint]))
    result = refused(plan_pod(state, _lone(state)))
    assert result.constraint == POD_FIT and "untolerated taint {dedicated=infer: NoSchedule}" in result.reason


def test_toleration_lets_the_pod_onto_a_tainted_node() -> None:
    taint = Taint(key="dedicated", value="infer", effect="NoExecute")
    state = _cluster(node("tainted", taints=[taint]))
    equal = _lone(state, "a", tolerations=[Toleration(key="dedicated", operator="Equal", value="infer")])
    exists = _lone(state, "b", tolerations=[Toleration(operator="Exists")])
    wrong = _lone(state, "c", tolerations=[Toleration(key="dedicated", value="train", effect="NoExecute")])
    assert _node_of(state, equal) == "tainted"
    assert _node_of(state, exists) == "tainted"
    assert refused(plan_pod(state, wrong)).constraint == POD_FIT


def test_prefer_no_schedule_taint_is_only_avoided() -> None:
    soft = Taint(key="spot", effect="PreferNoSchedule")
    state = _cluster(node("a-spot", taints=[soft]), node("b-plain"))
    assert _node_of(state, _lone(state, "p")) == "b-plain"
    alone = _cluster(node("a-spot", taints=[soft]))
    assert _node_of(alone, _lone(alone, "p")) == "a-spot"


def test_cordoned_node_takes_only_the_pods_that_tolerate_being_unschedulable() -> None:
    state = _cluster(node("cordoned", unschedulable=True), node("open"))
    assert _node_of(state, _lone(state)) == "open"
    alone = _cluster(node("cordoned", unschedulable=True))
    result = refused(plan_pod(alone, _lone(alone, "plain")))
    assert result.constraint == POD_FIT and "node(s) were unschedulable" in result.reason
    # kube-scheduler's NodeUnschedulable: tolerating the node.kubernetes.io/unschedulable taint (as DaemonSet
    # pods and node diagnostics do) tolerates spec.unschedulable
    diagnostic = _lone(alone, "dcgm-diag", tolerations=[
        Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")])
    everything = _lone(alone, "tolerates-all", tolerations=[Toleration(operator="Exists")])
    other = _lone(alone, "other", tolerations=[Toleration(key="nvidia.com/gpu", operator="Exists")])
    assert _node_of(alone, diagnostic) == "cordoned" and _node_of(alone, everything) == "cordoned"
    assert refused(plan_pod(alone, other)).constraint == POD_FIT


def test_node_selector_must_match_every_label() -> None:
    state = _cluster(node("h100", labels={"gpu": "h100", "zone": "a"}), node("a100", labels={"gpu": "a100"}))
    assert _node_of(state, _lone(state, node_selector={"gpu": "a100"})) == "a100"
    result = refused(plan_pod(state, _lone(state, "q", node_selector={"gpu": "b200"})))
    assert "didn't match Pod's node affinity/selector" in result.reason


@pytest.mark.parametrize(("operator", "values", "label", "expected"), [
    ("In", ["a", "b"], "b", True), ("In", ["a"], None, False),
    ("NotIn", ["a"], "b", True), ("NotIn", ["a"], None, True), ("NotIn", ["a"], "a", False),
    ("Exists", [], "x", True), ("Exists", [], None, False),
    ("DoesNotExist", [], None, True), ("DoesNotExist", [], "x", False),
    ("Gt", ["5"], "6", True), ("Gt", ["5"], "5", False), ("Gt", ["5"], "six", False),
    ("Lt", ["5"], "4", True), ("Lt", ["5"], None, False), ("Bogus", ["x"], "x", False),
])
def test_affinity_operators(operator: str, values: list[str], label: str | None, expected: bool) -> None:
    assert requirement_matches(NodeSelectorRequirement(key="k", operator=operator, values=values), label) is expected


def test_required_node_affinity_picks_the_matching_node() -> None:
    state = _cluster(node("gen4", labels={"generation": "4"}), node("gen5", labels={"generation": "5"}))
    key = _lone(state, affinity=_affinity(NodeSelectorRequirement(key="generation", operator="Gt", values=["4"])))
    assert _node_of(state, key) == "gen5"


def test_match_fields_select_by_node_name() -> None:
    state = _cluster(node("a"), node("b"))
    key = _lone(state, affinity=_affinity(
        NodeSelectorRequirement(key="metadata.name", operator="In", values=["b"]), fields=True))
    assert _node_of(state, key) == "b"


def test_nominations_of_higher_priority_block_lower_ones() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    vip = gang(state, "vip", 2, priority=100)
    nominate(state, vip[0], "n-s0b0a0-0")
    nominate(state, vip[1], "n-s0b0a0-1")
    gang(state, "low", 1, priority=10)
    result = refused(plan_gang(state, "default/low"))
    assert result.constraint == CAPACITY
    gang(state, "higher", 1, priority=1000)
    assert len(planned(plan_gang(state, "default/higher")).assignments) == 1
    # the nominated gang itself is not blocked by its own nominations
    assert len(planned(plan_gang(state, "default/vip")).assignments) == 2


def test_ignore_pods_frees_room() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    victims = [occupy(state, "n-s0b0a0-0", 8, name="v0"), occupy(state, "n-s0b0a0-1", 8, name="v1")]
    gang(state, "train", 2)
    assert refused(plan_gang(state, "default/train")).constraint == CAPACITY
    plan = planned(plan_gang(state, "default/train", ignore_pods=frozenset(victims)))
    assert sorted(nodes_of(plan).values()) == ["n-s0b0a0-0", "n-s0b0a0-1"]
    # nothing was copied or changed: without ignore_pods the state still has no room
    assert refused(plan_gang(state, "default/train")).constraint == CAPACITY


def test_ignore_pods_frees_nominated_room_too() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=1)
    other = gang(state, "other", 1, priority=100)
    nominate(state, other[0], "n-s0b0a0-0")
    gang(state, "train", 1, priority=100)
    assert refused(plan_gang(state, "default/train")).constraint == CAPACITY
    assert planned(plan_gang(state, "default/train", ignore_pods=frozenset(other)))


def test_pods_whose_shapes_are_made_of_the_same_objects_share_one_shape_and_others_get_their_own() -> None:
    tolerant = pod("d", gpus=8)
    tolerant = msgspec.structs.replace(tolerant, spec=msgspec.structs.replace(
        tolerant.spec, tolerations=[Toleration(key="k", operator="Exists")]))
    state = ClusterState()
    for obj in (pod("a", gpus=8), pod("b", gpus=8), pod("c", gpus=4), tolerant):
        # decoded from JSON and folded as the watch does: the fold shares the parts pods have in common
        body = msgspec.json.encode({"apiVersion": "v1", "kind": "Pod", **msgspec.to_builtins(obj)})
        state.apply(upsert_event(KIND_BY_NAME["Pod"], body))
    shapes = pod_shapes(state)
    a, b, c, d = (state.pods[f"default/{name}"] for name in "abcd")
    assert shapes.shape(a) is shapes.shape(b)
    assert shapes.shape(c) is not shapes.shape(a) and shapes.shape(d) is not shapes.shape(a)
    for info in (a, b, c, d):
        assert shapes.shape(info) == shape_of(info)
