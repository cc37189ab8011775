"""The topology tree from a KAI Scheduler `Topology` (kai.scheduler/v1alpha1): levels and aliases, its
precedence over a Kueue Topology, several objects, and bad objects reported with the object and field."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from events.builders import node
from events.model import KaiTopologyDeleted, KaiTopologyUpserted, KueueTopologyUpserted, NodeUpserted
from events.objects import (
    KaiTopology,
    KaiTopologyLevel,
    KaiTopologySpec,
    KueueTopology,
    KueueTopologyLevel,
    KueueTopologySpec,
    ObjectMeta,
)
from state.cluster import ClusterState
from state.gangs import Problem
from state.resources import Resources
from state.topology import SOURCE_KAI, SOURCE_KUEUE, SOURCE_LABELS, TopologyTree
from state.topology_validation import KAI_TOPOLOGY_KIND, KUEUE_TOPOLOGY_KIND

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
ALLOC: Resources = {"cpu": 96_000, "nvidia.com/gpu": 8_000}


def kai(name: str, *labels: str, aliases: Mapping[str, str] | None = None) -> KaiTopology:
    aliases = aliases or {}
    return KaiTopology(metadata=ObjectMeta(name=name, uid=f"uid-{name}"), spec=KaiTopologySpec(
        levels=[KaiTopologyLevel(node_label=key, alias=aliases.get(key, "")) for key in labels]))


def kueue(name: str, *labels: str) -> KueueTopology:
    return KueueTopology(metadata=ObjectMeta(name=name),
                         spec=KueueTopologySpec(levels=[KueueTopologyLevel(node_label=key) for key in labels]))


RACKED = {
    "n0": {BLOCK: "b0", RACK: "r0"}, "n1": {BLOCK: "b0", RACK: "r0"},
    "n2": {BLOCK: "b0", RACK: "r1"}, "n3": {BLOCK: "b1", RACK: "r2"},
}


def tree_of(nodes: Mapping[str, Mapping[str, str]], *topologies: KaiTopology | KueueTopology) -> TopologyTree:
    tree = TopologyTree()
    for name, labels in nodes.items():
        tree.node_upserted(name, {HOST: name, **labels}, dict(ALLOC))
    for topology in topologies:
        if isinstance(topology, KaiTopology):
            tree.kai_topology_upserted(topology)
        else:
            tree.kueue_topology_upserted(topology)
    return tree


def problems_of(tree: TopologyTree, kind: str) -> list[Problem]:
    return [problem for problem in tree.problems if problem.kind == kind]


def test_the_levels_are_the_kai_topologys_labels_top_first_without_the_hostname() -> None:
    tree = tree_of(RACKED, kai("cluster-topology", BLOCK, RACK, HOST))
    assert (tree.source, tree.source_name) == (SOURCE_KAI, "cluster-topology")
    assert [(lv.layer, lv.tier_name, lv.label_keys) for lv in tree.levels] == [
        ("ClusterTopologyLayer", "cluster", ()), ("SpineLayer", "topology-block", (BLOCK,)),
        ("BlockLayer", "topology-rack", (RACK,))]
    assert [d.name for d in tree.path("n2")] == ["cluster", "b0", "r1"]
    assert tree.problems == []


def test_a_level_alias_resolves_as_a_name_of_its_level() -> None:
    tree = tree_of(RACKED, kai("t", BLOCK, RACK, aliases={RACK: "rack"}))
    assert tree.levels[2].alias == "rack"
    assert tree.resolve_level("rack") == 2


def test_a_kai_topology_comes_before_a_kueue_topology_which_is_reported_as_not_used() -> None:
    tree = tree_of(RACKED, kueue("kueue-racks", RACK), kai("kai-blocks", BLOCK))
    assert (tree.source, tree.source_name) == (SOURCE_KAI, "kai-blocks")
    assert [lv.label_keys for lv in tree.levels[1:]] == [(BLOCK,)]
    [problem] = problems_of(tree, KUEUE_TOPOLOGY_KIND)
    assert problem.key == "kueue-racks" and "KAI Topology 'kai-blocks'" in problem.message


def test_without_a_kai_topology_the_kueue_topology_is_used() -> None:
    tree = tree_of(RACKED, kueue("kueue-racks", RACK))
    assert tree.source == SOURCE_KUEUE


def test_with_several_kai_topologies_the_one_most_nodes_carry_is_used_and_the_others_are_reported() -> None:
    nodes = {**RACKED, "n4": {"other/zone": "z"}}
    tree = tree_of(nodes, kai("a-zones", "other/zone"), kai("b-racks", BLOCK, RACK))
    assert tree.source_name == "b-racks"
    [problem] = problems_of(tree, KAI_TOPOLOGY_KIND)
    assert problem.key == "a-zones" and problem.field == "spec.levels" and "not used" in problem.message


def test_a_kai_topology_no_node_carries_does_not_take_the_tree_away() -> None:
    tree = tree_of(RACKED, kai("elsewhere", "other/zone"))
    assert tree.source == SOURCE_LABELS
    assert any("no node carries" in p.message for p in problems_of(tree, KAI_TOPOLOGY_KIND))


@pytest.mark.parametrize(("labels", "aliases", "field"), [
    ((), {}, "spec.levels"),
    ((RACK, RACK), {}, "spec.levels[1].nodeLabel"),
    ((HOST, RACK), {}, "spec.levels[0].nodeLabel"),
    (("-bad",), {}, "spec.levels[0].nodeLabel"),
    ((BLOCK, RACK), {BLOCK: "x", RACK: "x"}, "spec.levels[1].alias"),
    ((BLOCK, RACK), {BLOCK: RACK}, "spec.levels[0].alias"),
    ((BLOCK,), {BLOCK: "-no"}, "spec.levels[0].alias"),
], ids=["none", "repeated", "hostname-above", "not-a-key", "alias-twice", "alias-is-a-label", "bad-alias"])
def test_a_bad_kai_topology_is_reported_with_object_and_field_and_left_out(
        labels: tuple[str, ...], aliases: dict[str, str], field: str) -> None:
    tree = tree_of(RACKED, kai("bad", *labels, aliases=aliases))
    assert tree.source == SOURCE_LABELS
    found = problems_of(tree, KAI_TOPOLOGY_KIND)
    assert any(p.key == "bad" and p.field == field for p in found), found
    assert any("no good version was seen" in p.message for p in found)


def test_a_kai_topology_turned_bad_keeps_its_last_good_levels_and_says_so() -> None:
    tree = tree_of(RACKED, kai("t", BLOCK, RACK))
    tree.kai_topology_upserted(kai("t", RACK, RACK))
    assert (tree.source, tree.source_name) == (SOURCE_KAI, "t")
    assert [lv.label_keys for lv in tree.levels[1:]] == [(BLOCK,), (RACK,)]
    assert any("last good levels stay in use" in p.message for p in problems_of(tree, KAI_TOPOLOGY_KIND))


def test_a_long_bad_label_is_shortened_in_the_message() -> None:
    tree = tree_of(RACKED, kai("long", "x" * 5000 + "-"))
    [problem, _] = problems_of(tree, KAI_TOPOLOGY_KIND)
    assert len(problem.message) < 600


def test_kai_topologies_are_folded_deleted_and_survive_a_snapshot() -> None:
    state = ClusterState()
    for name, labels in RACKED.items():
        state.apply(NodeUpserted(node=node(name, labels={HOST: name, **labels})))
    state.apply(KueueTopologyUpserted(topology=kueue("q", RACK)))
    state.apply(KaiTopologyUpserted(topology=kai("k", BLOCK, RACK)))
    assert (state.topology.source, state.topology.source_name) == (SOURCE_KAI, "k")
    restored = ClusterState.restore(state.snapshot())
    assert sorted(restored.kai_topologies) == ["k"]
    assert [lv.label_keys for lv in restored.topology.levels] == [lv.label_keys for lv in state.topology.levels]
    state.apply(KaiTopologyDeleted(name="k"))
    assert state.topology.source == SOURCE_KUEUE
    assert state.kai_topologies == {}
