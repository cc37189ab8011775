"""Every admission rule for topology objects and PodGroup topology wishes, one message each."""

from __future__ import annotations

from events.objects import (
    ClusterNetworkTopology,
    ClusterNetworkTopologySpec,
    NetworkTopologyLayer,
    ObjectMeta,
)
from state.gangs import Problem
from state.topology_validation import (
    LayerDef,
    resolve_cnt_layers,
    validate_network_topology,
)

P = "network.topology.nvidia.com/"


def cnt(*layers: tuple[str, list[str], str], name: str = "default") -> ClusterNetworkTopology:
    return ClusterNetworkTopology(metadata=ObjectMeta(name=name), spec=ClusterNetworkTopologySpec(
        network_topology_spec=[NetworkTopologyLayer(topology_layer=layer, label_key=keys, parent_topology_layer=parent)
                               for layer, keys, parent in layers]))


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, problems
    return problems[0]


# --------------------------------------------------------------------------- ClusterNetworkTopology


def test_a_well_formed_cnt_resolves_to_its_layer_chain_top_first() -> None:
    layers, problems = resolve_cnt_layers(cnt(("BlockLayer", [P + "block"], "SpineLayer"),
                                              ("NodeTopologyLayer", [], "BlockLayer"),
                                              ("SpineLayer", [P + "spine"], "")))
    assert problems == []
    assert layers == (LayerDef("SpineLayer", (P + "spine",), "spine"), LayerDef("BlockLayer", (P + "block",), "block"))


def test_unknown_parent_topology_layer_is_named_with_the_known_layers() -> None:
    layers, problems = resolve_cnt_layers(cnt(("BlockLayer", [P + "block"], "PodLayer")))
    problem = only(problems)
    assert layers is None
    assert problem.kind == "ClusterNetworkTopology" and problem.key == "default"
    assert problem.field == "spec.networkTopologySpec[0].parentTopologyLayer"
    assert "'PodLayer' is not a layer of this ClusterNetworkTopology (known: BlockLayer)" in problem.message


def test_two_layers_on_one_label_are_rejected() -> None:
    layers, problems = resolve_cnt_layers(cnt(("SpineLayer", [P + "block"], ""),
                                              ("BlockLayer", [P + "block"], "SpineLayer")))
    problem = only(problems)
    assert layers is None
    assert problem.field == "spec.networkTopologySpec[1].labelKey[0]"
    assert "already used by layer 'SpineLayer'" in problem.message


def test_a_cycle_of_parents_is_rejected() -> None:
    layers, problems = resolve_cnt_layers(cnt(("A", ["a"], "B"), ("B", ["b"], "A")))
    assert layers is None
    assert any("cycle" in p.message for p in problems)


def test_a_layer_naming_itself_as_parent_is_a_cycle() -> None:
    layers, problems = resolve_cnt_layers(cnt(("A", ["a"], "A")))
    assert layers is None
    assert "names itself as parent" in only(problems).message


def test_two_children_of_one_layer_break_the_chain() -> None:
    layers, problems = resolve_cnt_layers(cnt(("Top", ["t"], ""), ("X", ["x"], "Top"), ("Y", ["y"], "Top")))
    assert layers is None
    assert "X, Y all name 'Top' as parent" in only(problems).message


def test_two_top_layers_are_rejected() -> None:
    layers, problems = resolve_cnt_layers(cnt(("A", ["a"], ""), ("B", ["b"], "")))
    assert layers is None
    assert "only the top layer may omit it" in only(problems).message


def test_duplicate_layer_and_missing_label_key_are_rejected() -> None:
    layers, problems = resolve_cnt_layers(cnt(("A", ["a"], ""), ("A", ["b"], ""), ("B", [], "A")))
    assert layers is None
    messages = {p.field: p.message for p in problems}
    assert "declared twice" in messages["spec.networkTopologySpec[1].topologyLayer"]
    assert "has no labelKey" in messages["spec.networkTopologySpec[2].labelKey"]


def test_node_layer_must_sit_under_the_lowest_layer() -> None:
    layers, problems = resolve_cnt_layers(cnt(("A", ["a"], ""), ("B", ["b"], "A"), ("NodeTopologyLayer", [], "A")))
    assert layers is None
    assert "must sit under the lowest layer 'B'" in only(problems).message


def test_node_layer_label_key_is_ignored_with_a_warning_but_the_chain_is_kept() -> None:
    layers, problems = resolve_cnt_layers(cnt(("A", ["a"], ""), ("NodeTopologyLayer", ["x"], "A")))
    assert layers == (LayerDef("A", ("a",), "a"),)
    assert "takes no labelKey; ignored" in only(problems).message


def test_cluster_layer_is_reserved_and_an_empty_spec_is_reported() -> None:
    assert "reserved" in only(resolve_cnt_layers(cnt(("ClusterTopologyLayer", ["c"], "")))[1]).message
    assert "is empty" in only(resolve_cnt_layers(cnt())[1]).message


def test_a_cnt_not_named_default_is_reported_as_ignored() -> None:
    problem = only(validate_network_topology(cnt(("A", ["a"], ""), name="mine")))
    assert problem.field == "metadata.name" and "ignored" in problem.message
