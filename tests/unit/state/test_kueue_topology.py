"""The topology tree from a Kueue `Topology` (kueue.x-k8s.io): levels, names, several objects, precedence
against the other sources, and bad objects reported with the object and the field."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from events.builders import node, node_event
from events.model import KueueTopologyDeleted, KueueTopologyUpserted
from events.objects import (
    ClusterNetworkTopology,
    ClusterNetworkTopologySpec,
    ExactMatch,
    HyperNode,
    HyperNodeMember,
    HyperNodeSpec,
    KueueTopology,
    KueueTopologyLevel,
    KueueTopologySpec,
    MemberSelector,
    NetworkTopologyLayer,
    ObjectMeta,
)
from placement.constraints import key_level
from state.cluster import ClusterState
from state.gangs import Problem
from state.resources import Resources
from state.topology import SOURCE_CNT, SOURCE_HYPERNODES, SOURCE_KUEUE, SOURCE_LABELS, TOPOGRAPH_PREFIX, TopologyTree
from state.topology_validation import KUEUE_TOPOLOGY_KIND

ZONE = "topology.kubernetes.io/zone"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
ALLOC: Resources = {"cpu": 96_000, "nvidia.com/gpu": 8_000}


def kueue(name: str, *labels: str) -> KueueTopology:
    return KueueTopology(metadata=ObjectMeta(name=name, uid=f"uid-{name}"),
                         spec=KueueTopologySpec(levels=[KueueTopologyLevel(node_label=key) for key in labels]))


def labelled(zone: str | None = None, block: str | None = None, rack: str | None = None,
             **extra: str) -> dict[str, str]:
    found = {ZONE: zone, BLOCK: block, RACK: rack}
    return {**{key: value for key, value in found.items() if value is not None}, **extra}


def tree_of(nodes: Mapping[str, Mapping[str, str]], *topologies: KueueTopology) -> TopologyTree:
    tree = TopologyTree()
    for name, labels in nodes.items():
        tree.node_upserted(name, {HOST: name, **labels}, dict(ALLOC))
    for topology in topologies:
        tree.kueue_topology_upserted(topology)
    return tree


def paths(tree: TopologyTree) -> dict[str, list[str]]:
    return {node: [domain.name for domain in tree.path(node)] for node in tree.node_names}


def kueue_problems(tree: TopologyTree) -> list[Problem]:
    return [problem for problem in tree.problems if problem.kind == KUEUE_TOPOLOGY_KIND]


RACKED = {
    "n0": labelled(block="b0", rack="r0"), "n1": labelled(block="b0", rack="r0"),
    "n2": labelled(block="b0", rack="r1"), "n3": labelled(block="b1", rack="r2"),
}


def test_the_levels_are_the_topologys_labels_top_first_without_the_hostname() -> None:
    tree = tree_of(RACKED, kueue("default", BLOCK, RACK, HOST))
    assert (tree.source, tree.source_name) == (SOURCE_KUEUE, "default")
    assert [(lv.layer, lv.tier, lv.tier_name, lv.label_keys) for lv in tree.levels] == [
        ("ClusterTopologyLayer", 3, "cluster", ()),
        ("SpineLayer", 2, "topology-block", (BLOCK,)),
        ("BlockLayer", 1, "topology-rack", (RACK,)),
    ]
    assert paths(tree) == {"n0": ["cluster", "b0", "r0"], "n1": ["cluster", "b0", "r0"],
                           "n2": ["cluster", "b0", "r1"], "n3": ["cluster", "b1", "r2"]}
    assert tree.problems == []


def test_without_the_hostname_level_the_tree_is_the_same() -> None:
    with_host = tree_of(RACKED, kueue("default", BLOCK, RACK, HOST))
    without = tree_of(RACKED, kueue("default", BLOCK, RACK))
    assert (with_host.levels, paths(with_host)) == (without.levels, paths(without))


def test_deeper_topologies_name_levels_above_the_datacenter_by_their_tier() -> None:
    keys = [f"example.com/level-{index}" for index in range(5)]
    tree = tree_of({"n0": dict.fromkeys(keys, "x")}, kueue("deep", *keys, HOST))
    assert [(lv.layer, lv.tier, lv.tier_name) for lv in tree.levels[1:]] == [
        ("Tier5Layer", 5, "level-0"), ("Tier4Layer", 4, "level-1"), ("DatacenterLayer", 3, "level-2"),
        ("SpineLayer", 2, "level-3"), ("BlockLayer", 1, "level-4")]


def test_each_level_resolves_by_layer_name_tier_name_tier_and_upstream_topology_key() -> None:
    tree = tree_of(RACKED, kueue("default", ZONE, BLOCK, RACK, HOST))
    rack, block = len(tree.levels) - 1, len(tree.levels) - 2
    assert tree.resolve_level("BlockLayer") == tree.resolve_level("topology-rack") == tree.resolve_level(1) == rack
    assert tree.resolve_level("SpineLayer") == tree.resolve_level("topology-block") == tree.resolve_level(2) == block
    assert key_level(tree, RACK) == rack and key_level(tree, BLOCK) == block
    assert tree.resolve_level("zone") == 1  # the zone level nobody labelled: no domain, but a known level


def test_a_node_missing_a_lower_level_stops_there_and_is_reported() -> None:
    tree = tree_of({"n0": labelled(block="b0", rack="r0"), "n1": labelled(block="b0"), "plain": {}},
                   kueue("default", BLOCK, RACK, HOST))
    assert paths(tree) == {"n0": ["cluster", "b0", "r0"], "n1": ["cluster", "b0"], "plain": ["cluster"]}
    (problem,) = tree.problems
    assert (problem.kind, problem.key, problem.field) == ("Node", "n1", f"metadata.labels[{RACK}]")


def test_with_several_topologies_the_one_most_nodes_carry_is_used_and_the_others_are_reported() -> None:
    nodes = {**RACKED, "g0": {"gpu.example.com/pod": "p0"}}
    tree = tree_of(nodes, kueue("a-few", "gpu.example.com/pod"), kueue("racks", BLOCK, RACK, HOST))
    assert tree.source_name == "racks"
    (problem,) = kueue_problems(tree)
    assert (problem.key, problem.field) == ("a-few", "spec.levels")
    assert "not used" in problem.message and "'racks'" in problem.message


def test_with_several_topologies_as_many_nodes_carry_the_first_by_name_is_used() -> None:
    tree = tree_of(RACKED, kueue("zeta", BLOCK, RACK), kueue("alpha", RACK, HOST))
    assert tree.source_name == "alpha"
    assert [lv.layer for lv in tree.levels] == ["ClusterTopologyLayer", "BlockLayer"]
    assert [p.key for p in kueue_problems(tree)] == ["zeta"]
    tree.kueue_topology_deleted("alpha")
    assert tree.source_name == "zeta" and kueue_problems(tree) == []


def test_a_topology_no_node_carries_does_not_take_the_label_schemes_tree_away() -> None:
    nodes = {"n0": {TOPOGRAPH_PREFIX + "block": "tb0"}, "n1": {TOPOGRAPH_PREFIX + "block": "tb1"}}
    tree = tree_of(nodes, kueue("default", BLOCK, RACK, HOST), kueue("hosts", HOST))
    assert tree.source == SOURCE_LABELS
    assert paths(tree) == {"n0": ["cluster", "tb0"], "n1": ["cluster", "tb1"]}
    assert {(p.key, p.field) for p in kueue_problems(tree)} == {("default", "spec.levels"), ("hosts", "spec.levels")}


def test_a_topology_comes_before_the_label_schemes() -> None:
    nodes = {"n0": labelled(rack="r0", **{TOPOGRAPH_PREFIX + "block": "tb0"}),
             "n1": labelled(rack="r1", **{TOPOGRAPH_PREFIX + "block": "tb0"})}
    tree = tree_of(nodes)
    assert tree.source == SOURCE_LABELS and paths(tree)["n0"] == ["cluster", "tb0"]
    tree.kueue_topology_upserted(kueue("default", RACK, HOST))
    assert tree.source == SOURCE_KUEUE and paths(tree) == {"n0": ["cluster", "r0"], "n1": ["cluster", "r1"]}


def test_a_cnt_and_hypernodes_come_before_a_topology() -> None:
    tree = tree_of(RACKED, kueue("default", BLOCK, RACK, HOST))
    tree.hypernode_upserted(HyperNode(metadata=ObjectMeta(name="hn"), spec=HyperNodeSpec(tier=1, members=[
        HyperNodeMember(type="Node", selector=MemberSelector(exact_match=ExactMatch(name="n0")))])))
    assert tree.source == SOURCE_HYPERNODES
    tree.network_topology_upserted(ClusterNetworkTopology(
        metadata=ObjectMeta(name="default"), spec=ClusterNetworkTopologySpec(network_topology_spec=[
            NetworkTopologyLayer(topology_layer="RackLayer", label_key=[RACK]),
            NetworkTopologyLayer(topology_layer="NodeTopologyLayer", parent_topology_layer="RackLayer")])))
    assert tree.source == SOURCE_CNT
    tree.network_topology_deleted("default")
    tree.hypernode_deleted("hn")
    assert (tree.source, tree.source_name) == (SOURCE_KUEUE, "default")


@pytest.mark.parametrize(("labels", "field", "words"), [
    ((), "spec.levels", "is empty"),
    ((BLOCK, BLOCK), "spec.levels[1].nodeLabel", "already spec.levels[0]"),
    ((BLOCK, ""), "spec.levels[1].nodeLabel", "is empty"),
    ((BLOCK, "-rack-"), "spec.levels[1].nodeLabel", "is not a node label key"),
    ((BLOCK, "a" * 317), "spec.levels[1].nodeLabel", "is not a node label key"),
    ((HOST, RACK), "spec.levels[0].nodeLabel", "can only be the lowest level"),
    (tuple(f"example.com/l{index}" for index in range(17)), "spec.levels", "at most 16"),
], ids=["no-level", "repeated", "empty", "not-a-key", "too-long", "hostname-above", "seventeen"])
def test_a_bad_topology_is_reported_with_object_and_field_and_left_out(labels: tuple[str, ...], field: str,
                                                                       words: str) -> None:
    tree = tree_of(RACKED, kueue("bad", *labels))
    assert tree.source == SOURCE_LABELS and len(tree.levels) == 1
    found = kueue_problems(tree)
    assert any(p.key == "bad" and p.field == field and words in p.message for p in found), found
    assert any(p.field == "spec.levels" and "left out" in p.message for p in found)


def test_a_topology_turned_bad_keeps_its_last_good_levels_and_says_so() -> None:
    tree = tree_of(RACKED, kueue("default", BLOCK, RACK, HOST))
    good = paths(tree)
    tree.kueue_topology_upserted(kueue("default", RACK, RACK))
    assert tree.source == SOURCE_KUEUE and paths(tree) == good
    fields = {(p.field, "last good levels stay in use" in p.message) for p in kueue_problems(tree)}
    assert fields == {("spec.levels[1].nodeLabel", False), ("spec.levels", True)}
    tree.kueue_topology_upserted(kueue("default", RACK, HOST))
    assert kueue_problems(tree) == [] and paths(tree)["n3"] == ["cluster", "r2"]


def test_a_bad_topology_beside_a_good_one_never_costs_the_tree() -> None:
    tree = tree_of(RACKED, kueue("good", BLOCK, RACK, HOST), kueue("bad", HOST, BLOCK))
    assert tree.source_name == "good" and [p.key for p in kueue_problems(tree)] == ["bad", "bad"]


def test_topologies_survive_a_snapshot_and_the_restored_tree_is_the_same() -> None:
    state = ClusterState()
    for name, labels in RACKED.items():
        state.apply(node_event(node(name, labels=labels)))
    state.apply(KueueTopologyUpserted(topology=kueue("racks", BLOCK, RACK, HOST)))
    state.apply(KueueTopologyUpserted(topology=kueue("other", ZONE)))
    state.apply(KueueTopologyUpserted(topology=kueue("gone", BLOCK)))
    state.apply(KueueTopologyDeleted(name="gone"))
    restored = ClusterState.restore(state.snapshot())
    assert sorted(restored.kueue_topologies) == ["other", "racks"]
    assert restored.kueue_topologies == state.kueue_topologies
    for tree in (state.topology, restored.topology):
        assert (tree.source, tree.source_name) == (SOURCE_KUEUE, "racks")
    assert paths(restored.topology) == paths(state.topology)
    assert restored.topology.problems == state.topology.problems
