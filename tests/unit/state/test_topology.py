"""The topology tree: each source, levels in both vocabularies, queries, aggregates and updates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from events.objects import (
    ClusterNetworkTopology,
    ClusterNetworkTopologySpec,
    ExactMatch,
    HyperNode,
    HyperNodeMember,
    HyperNodeSpec,
    LabelSelector,
    MemberSelector,
    NetworkTopologyLayer,
    ObjectMeta,
    RegexMatch,
    TopologyDetail,
    TopologyInfo,
)
from state.resources import Resources
from state.topology import (
    SOURCE_CNT,
    SOURCE_HYPERNODES,
    SOURCE_LABELS,
    TOPOGRAPH_PREFIX,
    Domain,
    TopologyError,
    TopologyTree,
)

P = TOPOGRAPH_PREFIX
GPU = "nvidia.com/gpu"
ALLOC: Resources = {"cpu": 96_000, GPU: 8_000}


def cnt(*layers: tuple[str, str | None, str], name: str = "default") -> ClusterNetworkTopology:
    """layers: (topologyLayer, label key or None, parentTopologyLayer)."""
    return ClusterNetworkTopology(
        metadata=ObjectMeta(name=name),
        spec=ClusterNetworkTopologySpec(network_topology_spec=[
            NetworkTopologyLayer(topology_layer=layer, label_key=[key] if key else [], parent_topology_layer=parent)
            for layer, key, parent in layers
        ]),
    )


SPINE_BLOCK_CNT = cnt(("SpineLayer", P + "spine", ""), ("BlockLayer", P + "block", "SpineLayer"),
                      ("NodeTopologyLayer", None, "BlockLayer"))


def hypernode(name: str, tier: int, tier_name: str = "", *, nodes: Sequence[str] = (),
              children: Sequence[str] = (), regex: str | None = None,
              labels: Mapping[str, str] | None = None) -> HyperNode:
    members = [HyperNodeMember(type="Node", selector=MemberSelector(exact_match=ExactMatch(name=n))) for n in nodes]
    members += [HyperNodeMember(type="HyperNode", selector=MemberSelector(exact_match=ExactMatch(name=c)))
                for c in children]
    if regex is not None:
        members.append(HyperNodeMember(type="Node", selector=MemberSelector(regex_match=RegexMatch(pattern=regex))))
    if labels is not None:
        members.append(HyperNodeMember(type="Node", selector=MemberSelector(
            label_match=LabelSelector(match_labels=dict(labels)))))
    return HyperNode(metadata=ObjectMeta(name=name),
                     spec=HyperNodeSpec(tier=tier, tier_name=tier_name, members=members))


def labelled_cluster(tree: TopologyTree, spines: int = 2, blocks: int = 2, per_block: int = 2) -> list[str]:
    names = []
    for s in range(spines):
        for b in range(blocks):
            for n in range(per_block):
                name = f"n{s}{b}{n}"
                tree.node_upserted(name, {P + "spine": f"s{s}", P + "block": f"b{s}{b}"}, ALLOC)
                names.append(name)
    return names


def dom(tree: TopologyTree, level: int, name: str) -> Domain:
    found = tree.domain(level, name)
    assert found is not None, f"no domain {name!r} at level {level}"
    return found


def leaf(tree: TopologyTree, node: str) -> Domain:
    found = tree.domain_of(node)
    assert found is not None, f"node {node!r} is not in the tree"
    return found


def shape(tree: TopologyTree) -> list[tuple[int, str, str, list[str], list[str]]]:
    """Every domain as (level, layer, parent name, children names, nodes): the tree's whole structure."""
    return [(d.level, d.layer, d.parent.name if d.parent else "", [c.name for c in d.children], d.nodes)
            for level in range(len(tree.levels)) for d in tree.domains_at(level)]


# --------------------------------------------------------------------------- sources


def test_empty_tree_is_a_lone_cluster_root_of_tier_1() -> None:
    tree = TopologyTree()
    assert tree.source == SOURCE_LABELS
    assert [(lv.layer, lv.tier, lv.tier_name) for lv in tree.levels] == [("ClusterTopologyLayer", 1, "cluster")]
    assert tree.root.nodes == []


def test_nodes_without_topology_labels_all_hang_under_the_root() -> None:
    tree = TopologyTree()
    tree.node_upserted("b", {}, ALLOC)
    tree.node_upserted("a", {"kubernetes.io/hostname": "a"}, ALLOC)
    assert len(tree.levels) == 1
    assert tree.root.direct_nodes == ["a", "b"]
    assert tree.root.allocatable == {"cpu": 192_000, GPU: 16_000}
    assert tree.lca(["a", "b"]) is tree.root


def test_topograph_labels_give_layers_for_the_labels_present_with_tiers_from_the_bottom() -> None:
    tree = TopologyTree()
    tree.node_upserted("n1", {P + "spine": "s1", P + "block": "b1", P + "accelerator": "nvl1"}, ALLOC)
    tree.node_upserted("n2", {P + "spine": "s1", P + "block": "b1", P + "accelerator": "nvl2"}, ALLOC)
    assert tree.source == SOURCE_LABELS
    assert [(lv.layer, lv.tier, lv.tier_name) for lv in tree.levels] == [
        ("ClusterTopologyLayer", 4, "cluster"), ("SpineLayer", 3, "spine"), ("BlockLayer", 2, "block"),
        ("AcceleratorLayer", 1, "accelerator")]
    assert [d.name for d in tree.path("n2")] == ["cluster", "s1", "b1", "nvl2"]
    assert tree.lca(["n1", "n2"]).name == "b1"


def test_the_gpu_operators_nvlink_clique_label_gives_the_accelerator_layer_where_topograph_does_not() -> None:
    # GB200 NVL72 racks as the GPU Operator's DRA driver labels them: `<cluster UUID>.<clique id>`.
    tree = TopologyTree()
    for index, clique in enumerate(["a1b2.0", "a1b2.0", "a1b2.1", "c3d4.0"]):
        tree.node_upserted(f"gb{index}", {"nvidia.com/gpu.clique": clique}, ALLOC)
    assert [(lv.layer, lv.tier) for lv in tree.levels] == [("ClusterTopologyLayer", 2), ("AcceleratorLayer", 1)]
    assert [d.name for d in tree.path("gb1")] == ["cluster", "a1b2.0"]
    assert tree.lca(["gb0", "gb1"]).name == "a1b2.0" and tree.lca(["gb1", "gb2"]) is tree.root
    # topograph's own label wins where a node carries both
    tree.node_upserted("gb4", {P + "block": "b1", P + "accelerator": "nvl9", "nvidia.com/gpu.clique": "c3d4.0"}, ALLOC)
    assert [d.name for d in tree.path("gb4")] == ["cluster", "b1", "nvl9"]


def levels_of(tree: TopologyTree) -> list[tuple[str, int, str]]:
    return [(lv.layer, lv.tier, lv.tier_name) for lv in tree.levels]


def test_topograph_0x_leaf_and_core_labels_are_the_block_and_datacenter_layers() -> None:
    # topograph after v0.1 writes leaf / core where v0.1 wrote block / datacenter (its Helm chart's defaults).
    tree = TopologyTree()
    for index in range(4):
        tree.node_upserted(f"n{index}", {P + "core": "c0", P + "spine": f"s{index // 2}", P + "leaf": f"l{index}",
                                         P + "accelerator": f"nvl{index}"}, ALLOC)
    assert levels_of(tree) == [("ClusterTopologyLayer", 5, "cluster"), ("DatacenterLayer", 4, "datacenter"),
                               ("SpineLayer", 3, "spine"), ("BlockLayer", 2, "block"),
                               ("AcceleratorLayer", 1, "accelerator")]
    assert [d.name for d in tree.path("n3")] == ["cluster", "c0", "s1", "l3", "nvl3"]
    assert tree.resolve_level("BlockLayer") == 3 and tree.problems == []


def test_topograph_v1_fabric_tiers_and_accelerator_domains_give_the_layers_tier_0_nearest_the_node() -> None:
    tree = TopologyTree()
    for index in range(8):
        tree.node_upserted(f"n{index}", {
            "fabric.topograph.run/tier-3": "t3", "fabric.topograph.run/tier-2": f"core{index // 8}",
            "fabric.topograph.run/tier-1": f"spine{index // 4}", "fabric.topograph.run/tier-0": f"leaf{index // 2}",
            "accelerator.topograph.run/domain": f"nvl72-{index // 2}",
            "accelerator.topograph.run/sub-domain": f"part-{index}"}, ALLOC)
    assert levels_of(tree) == [
        ("ClusterTopologyLayer", 7, "cluster"), ("FabricTier3Layer", 6, "tier-3"), ("DatacenterLayer", 5, "tier-2"),
        ("SpineLayer", 4, "tier-1"), ("BlockLayer", 3, "tier-0"), ("AcceleratorLayer", 2, "domain"),
        ("AcceleratorSubDomainLayer", 1, "sub-domain")]
    assert [d.name for d in tree.path("n5")] == ["cluster", "t3", "core0", "spine1", "leaf2", "nvl72-2", "part-5"]
    assert tree.resolve_level("tier-0") == tree.resolve_level("BlockLayer") == 4
    # v1's labels win over the older ones where a node carries both (an upgrade in progress), and the GPU
    # Operator's clique stands in for the accelerator domain topograph leaves off when it is configured so.
    tree.node_upserted("n8", {P + "block": "old", "fabric.topograph.run/tier-3": "t3",
                              "fabric.topograph.run/tier-2": "core1", "fabric.topograph.run/tier-1": "spine2",
                              "fabric.topograph.run/tier-0": "leaf8", "nvidia.com/gpu.clique": "uuid.1"}, ALLOC)
    assert [lv.layer for lv in tree.levels][-3:] == ["BlockLayer", "AcceleratorLayer", "AcceleratorSubDomainLayer"]
    assert [d.name for d in tree.path("n8")][-2:] == ["leaf8", "uuid.1"]


def test_eks_network_node_layers_give_the_tree_with_nothing_configured() -> None:
    aws = "topology.k8s.aws/network-node-layer-"
    tree = TopologyTree()
    for index in range(4):  # p5 nodes: three layers
        tree.node_upserted(f"p5-{index}", {aws + "1": "nn-1", aws + "2": f"nn-2{index // 2}",
                                           aws + "3": f"nn-3{index}"}, ALLOC)
    assert levels_of(tree) == [("ClusterTopologyLayer", 4, "cluster"),
                               ("DatacenterLayer", 3, "network-node-layer-1"),
                               ("SpineLayer", 2, "network-node-layer-2"), ("BlockLayer", 1, "network-node-layer-3")]
    assert tree.lca(["p5-0", "p5-1"]).name == "nn-20"
    # An instance type with four layers (GB200 UltraServers, say) adds the bottom one, with its NVLink clique.
    for index in range(2):
        tree.node_upserted(f"gb-{index}", {aws + "1": "nn-1", aws + "2": "nn-22", aws + "3": "nn-35",
                                           aws + "4": "nn-40", "nvidia.com/gpu.clique": "uuid.0"}, ALLOC)
    assert [lv.layer for lv in tree.levels][-2:] == ["NetworkNodeLayer4Layer", "AcceleratorLayer"]
    assert [d.name for d in tree.path("gb-1")] == ["cluster", "nn-1", "nn-22", "nn-35", "nn-40", "uuid.0"]
    assert [d.name for d in tree.path("p5-3")] == ["cluster", "nn-1", "nn-21", "nn-33"]
    assert tree.problems == []  # a three-layer node lacks nothing


@pytest.mark.parametrize(("labels", "layers"), [
    ({"cloud.google.com/gce-topology-block": "blk-1", "cloud.google.com/gce-topology-subblock": "sub-1",
      "cloud.google.com/gce-topology-host": "host-1"}, ["SpineLayer", "BlockLayer"]),
    ({"oci.oraclecloud.com/host.network_block_id": "nb-1", "oci.oraclecloud.com/host.rack_id": "rack-1"},
     ["SpineLayer", "BlockLayer"]),
], ids=["gke", "oci"])
def test_gke_and_oci_topology_labels_give_the_tree(labels: dict[str, str], layers: list[str]) -> None:
    tree = TopologyTree()
    tree.node_upserted("a", labels, ALLOC)
    tree.node_upserted("b", {key: value + "x" for key, value in labels.items()}, ALLOC)
    assert [lv.layer for lv in tree.levels] == ["ClusterTopologyLayer", *layers]
    assert [d.name for d in tree.path("a")] == ["cluster", *list(labels.values())[:len(layers)]]


def test_topographs_labels_win_over_the_clouds_on_the_same_nodes() -> None:
    # topograph deployed on EKS: the nodes carry both; topograph's description is used, whole.
    tree = TopologyTree()
    tree.node_upserted("a", {P + "leaf": "l0", "topology.k8s.aws/network-node-layer-3": "nn-3"}, ALLOC)
    assert [lv.tier_name for lv in tree.levels] == ["cluster", "block"]
    assert [d.name for d in tree.path("a")] == ["cluster", "l0"]


def test_cnt_layers_build_domains_from_label_values_parented_by_the_parent_layer() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.network_topology_upserted(SPINE_BLOCK_CNT)
    assert tree.source == SOURCE_CNT
    assert [lv.layer for lv in tree.levels] == ["ClusterTopologyLayer", "SpineLayer", "BlockLayer"]
    assert [d.name for d in tree.domains_at(1)] == ["s0", "s1"]
    assert [c.name for c in dom(tree, 1, "s1").children] == ["b10", "b11"]
    assert dom(tree, 2, "b11").nodes == ["n110", "n111"]
    assert leaf(tree, "n101").name == "b10"
    assert tree.problems == []


def test_cnt_with_other_label_keys_uses_them_and_names_tiers_by_the_key_suffix() -> None:
    tree = TopologyTree()
    tree.node_upserted("a", {"example.com/rack": "r1", "example.com/row": "w1"}, ALLOC)
    tree.node_upserted("b", {"example.com/rack": "r2", "example.com/row": "w1"}, ALLOC)
    tree.network_topology_upserted(cnt(("RowLayer", "example.com/row", ""),
                                       ("RackLayer", "example.com/rack", "RowLayer"),
                                       ("NodeTopologyLayer", None, "RackLayer")))
    assert [(lv.layer, lv.tier, lv.tier_name) for lv in tree.levels] == [
        ("ClusterTopologyLayer", 3, "cluster"), ("RowLayer", 2, "row"), ("RackLayer", 1, "rack")]
    assert tree.lca(["a", "b"]).name == "w1"


def test_a_cnt_not_named_default_is_ignored() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.network_topology_upserted(cnt(("RackLayer", "example.com/rack", ""), name="other"))
    assert tree.source == SOURCE_LABELS


def test_hypernodes_build_tiers_upward_under_a_virtual_cluster_top() -> None:
    tree = TopologyTree()
    for name in ("a1", "a2", "b1", "b2", "loner"):
        tree.node_upserted(name, {}, ALLOC)
    tree.hypernode_upserted(hypernode("blk-a", 1, "block", nodes=["a1", "a2"]))
    tree.hypernode_upserted(hypernode("blk-b", 1, "block", regex="^b[0-9]$"))
    tree.hypernode_upserted(hypernode("spine", 2, "spine", children=["blk-a", "blk-b"]))
    assert tree.source == SOURCE_HYPERNODES
    assert [(lv.layer, lv.tier, lv.tier_name) for lv in tree.levels] == [
        ("ClusterTopologyLayer", 3, "cluster"), ("SpineLayer", 2, "spine"), ("BlockLayer", 1, "block")]
    assert dom(tree, 2, "blk-b").nodes == ["b1", "b2"]
    assert tree.lca(["a1", "b2"]).name == "spine"
    assert tree.root.direct_nodes == ["loner"]  # not covered by any HyperNode: directly under the root
    assert tree.hypernode_node_counts() == {"blk-a": 2, "blk-b": 2, "spine": 4}


def test_hypernode_label_match_selects_nodes_by_label() -> None:
    tree = TopologyTree()
    tree.node_upserted("x", {"rack": "r1"}, ALLOC)
    tree.node_upserted("y", {"rack": "r2"}, ALLOC)
    tree.hypernode_upserted(hypernode("r1", 1, labels={"rack": "r1"}))
    assert dom(tree, 1, "r1").nodes == ["x"]
    assert tree.levels[1].layer == "Tier1Layer"


def test_hypernode_regex_members_are_re2_searches_over_node_names_in_linear_time() -> None:
    tree = TopologyTree()
    for name in ("a" * 40 + "-b", "a" * 40, "gpu-1", "gpu-10", "gpu-2"):
        tree.node_upserted(name, {}, ALLOC)
    tree.hypernode_upserted(hypernode("hostile", 1, regex="^(a+)+$"))  # exponential for a backtracking engine
    tree.hypernode_upserted(hypernode("ones", 1, regex="gpu-1"))  # unanchored, as Go's MatchString
    assert dom(tree, 1, "hostile").nodes == ["a" * 40]
    assert dom(tree, 1, "ones").nodes == ["gpu-1", "gpu-10"]
    assert tree.root.direct_nodes == ["a" * 40 + "-b", "gpu-2"]


def test_regex_members_follow_nodes_added_and_deleted_and_patterns_changed_between_builds() -> None:
    tree = TopologyTree()
    tree.node_upserted("gpu-1", {}, ALLOC)
    tree.hypernode_upserted(hypernode("ones", 1, regex="^gpu-1"))
    tree.hypernode_upserted(hypernode("twos", 1, regex="^gpu-2"))
    tree.hypernode_upserted(hypernode("all", 1, regex="gpu"))
    assert leaf(tree, "gpu-1").name == "all"  # claimed by two HyperNodes of one tier: first by name
    tree.node_upserted("gpu-22", {}, ALLOC)
    tree.node_upserted("gpu-10", {}, ALLOC)
    assert dom(tree, 1, "twos").nodes == [] and dom(tree, 1, "all").nodes == ["gpu-1", "gpu-10", "gpu-22"]
    tree.hypernode_deleted("all")
    assert dom(tree, 1, "ones").nodes == ["gpu-1", "gpu-10"] and dom(tree, 1, "twos").nodes == ["gpu-22"]
    tree.node_deleted("gpu-10")
    tree.hypernode_upserted(hypernode("ones", 1, regex="^gpu-1$"))
    assert dom(tree, 1, "ones").nodes == ["gpu-1"]
    tree.node_upserted("gpu-10", {}, ALLOC)
    assert tree.root.direct_nodes == ["gpu-10"]


def test_hypernode_tiers_may_skip_a_level_and_nodes_may_sit_above_tier_1() -> None:
    tree = TopologyTree()
    for name in ("a", "b", "c"):
        tree.node_upserted(name, {}, ALLOC)
    tree.hypernode_upserted(hypernode("low", 1, nodes=["a"]))
    tree.hypernode_upserted(hypernode("mid", 2, nodes=["b"]))
    tree.hypernode_upserted(hypernode("top", 3, children=["low", "mid"], nodes=["c"]))
    assert [d.name for d in tree.path("a")] == ["cluster", "top", "low"]
    assert tree.domain_at("a", 2) is None
    assert dom(tree, 1, "top").direct_nodes == ["c"]
    assert tree.lca(["a", "b"]).name == "top"


def test_cnt_takes_precedence_over_hypernodes_which_take_precedence_over_labels() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    assert tree.source == SOURCE_LABELS
    tree.hypernode_upserted(hypernode("h", 1, nodes=["n000"]))
    assert tree.source == SOURCE_HYPERNODES
    tree.network_topology_upserted(SPINE_BLOCK_CNT)
    assert tree.source == SOURCE_CNT
    tree.network_topology_deleted("default")
    assert tree.source == SOURCE_HYPERNODES
    tree.hypernode_deleted("h")
    assert tree.source == SOURCE_LABELS


# --------------------------------------------------------------------------- both vocabularies


def test_layer_name_tier_number_and_tier_name_resolve_to_the_same_level() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.network_topology_upserted(SPINE_BLOCK_CNT)
    assert tree.resolve_level("BlockLayer") == tree.resolve_level(1) == tree.resolve_level("block") == 2
    assert tree.resolve_level("SpineLayer") == tree.resolve_level("2") == tree.resolve_level("spine") == 1
    assert tree.resolve_level("ClusterTopologyLayer") == tree.resolve_level(3) == 0


def test_an_unknown_layer_raises_topology_error_naming_it_and_the_known_levels() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    with pytest.raises(TopologyError) as caught:
        tree.resolve_level("RackLayer")
    assert caught.value.kind == "Layer" and caught.value.name == "RackLayer"
    assert "BlockLayer" in str(caught.value)
    with pytest.raises(TopologyError, match="below 1"):
        tree.resolve_level(0)
    with pytest.raises(TopologyError, match="the node itself"):
        tree.resolve_level("NodeTopologyLayer")


def test_a_tier_number_means_up_to_that_tier() -> None:
    tree = TopologyTree()
    for name in ("a", "b"):
        tree.node_upserted(name, {}, ALLOC)
    tree.hypernode_upserted(hypernode("low", 1, nodes=["a"]))
    tree.hypernode_upserted(hypernode("top", 3, children=["low"], nodes=["b"]))
    assert [lv.tier for lv in tree.levels] == [4, 3, 1]
    assert tree.resolve_level(2) == tree.resolve_level(1) == 2  # no tier 2: the highest tier below it
    assert tree.resolve_level(3) == 1
    assert tree.resolve_level(4) == tree.resolve_level(9) == 0  # at or above the root's tier: the root


def test_a_name_of_digits_only_to_unicode_or_of_thousands_of_digits_is_unknown_not_a_crash() -> None:
    tree = TopologyTree()
    tree.node_upserted("n", {}, ALLOC)
    tree.hypernode_upserted(hypernode("rack", 2, nodes=["n"]))
    assert tree.resolve_level("2") == 1
    for asked in ("\u00b2", "9" * 5000):  # str.isdigit is true for both; int() refuses both
        with pytest.raises(TopologyError, match="is not a layer, tierName or tier"):
            tree.resolve_level(asked)


def test_lca_of_an_unknown_node_or_of_nothing_raises() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    with pytest.raises(TopologyError) as caught:
        tree.lca(["n000", "ghost"])
    assert caught.value.kind == "Node" and caught.value.name == "ghost"
    with pytest.raises(TopologyError):
        tree.lca([])


def test_lca_finds_the_tightest_domain_and_its_level() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    assert tree.lca(["n000"]).name == "b00"
    assert tree.lca(["n000", "n001"]).name == "b00"
    assert tree.lca(["n000", "n011"]).name == "s0"
    assert tree.lca(["n011", "n000", "n100"]) is tree.root
    assert tree.lca_level(["n100", "n111"]) == 1


# --------------------------------------------------------------------------- aggregates and updates


def test_usage_changes_follow_the_nodes_path_without_a_rebuild() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    version = tree.version
    tree.usage_changed("n000", {GPU: 3_000}, 1)
    tree.usage_changed("n001", {GPU: 2_000, "cpu": 1_000}, 1)
    tree.usage_changed("n000", {GPU: 1_000}, -1)
    assert tree.version == version
    assert dom(tree, 2, "b00").used == {GPU: 4_000, "cpu": 1_000}
    assert dom(tree, 1, "s0").free()[GPU] == 4 * 8_000 - 4_000
    assert tree.root.used[GPU] == 4_000
    assert dom(tree, 2, "b01").used == {}


def test_usage_recorded_while_dirty_is_in_the_rebuilt_aggregates() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.usage_changed("n000", {GPU: 8_000}, 1)
    tree.node_upserted("extra", {P + "spine": "s0", P + "block": "b00"}, ALLOC)
    tree.usage_changed("extra", {GPU: 1_000}, 1)
    assert dom(tree, 2, "b00").used == {GPU: 9_000}
    assert dom(tree, 2, "b00").nodes == ["extra", "n000", "n001"]


def test_an_allocatable_change_adjusts_aggregates_in_place() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    version = tree.version
    tree.node_upserted("n000", {P + "spine": "s0", P + "block": "b00"}, {"cpu": 96_000, GPU: 4_000})
    assert tree.version == version
    assert dom(tree, 2, "b00").allocatable[GPU] == 12_000
    assert tree.root.allocatable[GPU] == 60_000


def test_relabelled_node_moves_and_empty_domains_disappear() -> None:
    tree = TopologyTree()
    labelled_cluster(tree, spines=1, blocks=2, per_block=1)
    tree.usage_changed("n010", {GPU: 5_000}, 1)
    tree.node_upserted("n010", {P + "spine": "s0", P + "block": "b00"}, ALLOC)
    assert [d.name for d in tree.domains_at(2)] == ["b00"]
    assert dom(tree, 2, "b00").nodes == ["n000", "n010"]
    assert dom(tree, 2, "b00").used == {GPU: 5_000}


def test_deleted_node_leaves_every_aggregate() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.usage_changed("n111", {GPU: 8_000}, 1)
    tree.node_deleted("n111")
    assert "n111" not in tree
    assert tree.path("n111") == ()
    assert tree.root.used.get(GPU, 0) == 0
    assert dom(tree, 1, "s1").nodes == ["n100", "n101", "n110"]


def test_the_tree_does_not_depend_on_the_order_objects_were_folded_in() -> None:
    first, second = TopologyTree(), TopologyTree()
    labelled_cluster(first)
    first.network_topology_upserted(SPINE_BLOCK_CNT)
    second.network_topology_upserted(SPINE_BLOCK_CNT)
    for name in reversed(first.node_names):
        path = first.path(name)
        second.node_upserted(name, {P + "spine": path[1].name, P + "block": path[2].name}, ALLOC)
    assert shape(first) == shape(second)
    assert [d.id for d in first.domains] == [d.id for d in second.domains]
    assert [d.name for d in first.domains] == [d.name for d in second.domains]


# --------------------------------------------------------------------------- incomplete or contradictory labels


def test_a_node_missing_a_lower_label_sits_directly_under_its_last_domain_and_is_reported() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.node_upserted("half", {P + "spine": "s0"}, ALLOC)
    tree.network_topology_upserted(SPINE_BLOCK_CNT)
    assert leaf(tree, "half").name == "s0"
    assert dom(tree, 1, "s0").direct_nodes == ["half"]
    assert "half" in dom(tree, 1, "s0").nodes
    [problem] = tree.problems
    assert (problem.kind, problem.key, problem.field) == ("Node", "half", f"metadata.labels[{P}block]")
    assert "directly under SpineLayer 's0'" in problem.message


def test_a_node_missing_a_middle_label_is_reported_even_from_topograph_labels() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.node_upserted("hole", {P + "block": "b00"}, ALLOC)
    assert tree.domain_of("hole") is tree.root
    assert [p.key for p in tree.problems] == ["hole"]


def test_block_claimed_under_two_spines_stays_under_the_majority_and_is_reported() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.node_upserted("stray", {P + "spine": "s1", P + "block": "b00"}, ALLOC)
    tree.network_topology_upserted(SPINE_BLOCK_CNT)
    assert [d.name for d in tree.path("stray")] == ["cluster", "s0", "b00"]
    [problem] = tree.problems
    assert (problem.kind, problem.key, problem.field) == ("Node", "stray", f"metadata.labels[{P}spine]")
    assert "'b00' is under SpineLayer s0 (2 nodes), s1 (1 nodes)" in problem.message
    assert "stays under 's0'" in problem.message


def test_a_bad_cnt_keeps_the_last_good_structure_and_reports_the_problem() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.network_topology_upserted(SPINE_BLOCK_CNT)
    before = shape(tree)
    tree.network_topology_upserted(cnt(("SpineLayer", P + "spine", ""), ("BlockLayer", P + "block", "PodLayer")))
    assert tree.source == SOURCE_CNT
    assert shape(tree) == before
    fields = [p.field for p in tree.problems]
    assert "spec.networkTopologySpec[1].parentTopologyLayer" in fields
    assert any("last good" in p.message for p in tree.problems)


def test_a_bad_cnt_with_no_good_version_falls_back_to_the_next_source() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.network_topology_upserted(cnt(("BlockLayer", P + "block", "PodLayer")))
    assert tree.source == SOURCE_LABELS
    assert any("falls back" in p.message for p in tree.problems)


def test_a_hypernode_with_a_bad_regex_added_to_a_labelled_cluster_changes_nothing_but_a_problem() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    before = shape(tree)
    tree.hypernode_upserted(hypernode("s0", 1, nodes=["n000"], regex="n0(["))
    assert tree.source == SOURCE_LABELS
    assert shape(tree) == before
    assert tree.resolve_level("BlockLayer") == 2
    [problem] = tree.problems
    assert str(problem) == ("HyperNode s0: spec.members[1].selector.regexMatch.pattern: 'n0([' is not a valid RE2 "
                            "regular expression (missing ]: [); the HyperNode is left out of the tree")


def test_two_hypernodes_in_a_cycle_added_to_a_labelled_cluster_change_nothing_but_problems() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    before = shape(tree)
    tree.hypernode_upserted(hypernode("s0", 2, nodes=["n000"], children=["s1"]))
    tree.hypernode_upserted(hypernode("s1", 1, nodes=["n001"], children=["s0"]))
    assert tree.source == SOURCE_LABELS
    assert shape(tree) == before
    assert {(p.key, p.field) for p in tree.problems} == {("s0", "spec.members[1]"), ("s1", "spec.members[1]")}
    assert all("forms a cycle s0 -> s1 -> s0" in p.message for p in tree.problems)


def test_bad_hypernodes_are_reported_while_a_cluster_network_topology_is_the_source() -> None:
    tree = TopologyTree()
    labelled_cluster(tree)
    tree.network_topology_upserted(SPINE_BLOCK_CNT)
    tree.hypernode_upserted(hypernode("bad", 0, nodes=["n000"]))
    assert tree.source == SOURCE_CNT
    assert [(p.kind, p.key, p.field) for p in tree.problems] == [("HyperNode", "bad", "spec.tier")]


def test_a_hypernode_turned_bad_keeps_its_last_good_version_in_the_tree() -> None:
    tree = TopologyTree()
    names = labelled_cluster(tree)
    for s in range(2):
        tree.hypernode_upserted(hypernode(f"hs{s}", 2, "spine", children=[f"hb{s}0", f"hb{s}1"]))
        for b in range(2):
            tree.hypernode_upserted(hypernode(f"hb{s}{b}", 1, "block", regex=f"^n{s}{b}"))
    before = shape(tree)
    assert tree.source == SOURCE_HYPERNODES and len(dom(tree, 2, "hb00").nodes) == 2
    tree.hypernode_upserted(hypernode("hb00", 1, "block", regex="^n00("))  # bad regex
    tree.hypernode_upserted(hypernode("hb01", 1, "block", regex="^n01", children=["hs0"]))  # a cycle
    assert shape(tree) == before
    assert {p.key for p in tree.problems} == {"hb00", "hb01", "hs0"}
    assert all(p.message.endswith("the HyperNode's version from the last good set stays in use")
               for p in tree.problems)
    tree.hypernode_upserted(hypernode("hb10", 1, "block", regex="^n1"))  # a valid change still applies
    assert dom(tree, 2, "hb10").nodes == [n for n in names if n.startswith("n1")]


def test_a_hypernode_that_was_never_good_is_left_out_and_its_nodes_go_to_the_root() -> None:
    tree = TopologyTree()
    tree.node_upserted("a", {}, ALLOC)
    tree.node_upserted("b", {}, ALLOC)
    tree.hypernode_upserted(hypernode("good", 1, nodes=["a"]))
    tree.hypernode_upserted(hypernode("bad", 1, nodes=["b"], regex="("))
    assert tree.source == SOURCE_HYPERNODES
    assert [d.name for d in tree.domains_at(1)] == ["good"]
    assert tree.root.direct_nodes == ["b"]


def test_a_node_claimed_by_two_hypernodes_goes_to_the_lowest_tier_and_is_reported() -> None:
    tree = TopologyTree()
    tree.node_upserted("n", {}, ALLOC)
    tree.hypernode_upserted(hypernode("z-low", 1, nodes=["n"]))
    tree.hypernode_upserted(hypernode("a-high", 2, nodes=["n"]))
    assert leaf(tree, "n").name == "z-low"
    [problem] = tree.problems
    assert problem.kind == "HyperNode" and problem.key == "a-high"
    assert "claimed by HyperNodes z-low, a-high" in problem.message


def test_a_node_listed_by_a_hypernode_and_its_ancestor_is_not_a_conflict() -> None:
    tree = TopologyTree()
    tree.node_upserted("n", {}, ALLOC)
    tree.hypernode_upserted(hypernode("low", 1, nodes=["n"]))
    tree.hypernode_upserted(hypernode("high", 2, nodes=["n"], children=["low"]))
    assert leaf(tree, "n").name == "low"
    assert tree.problems == []


# --------------------------------------------------------------------------- status the daemon writes


def test_detail_status_has_koordinators_shape() -> None:
    tree = TopologyTree()
    labelled_cluster(tree, spines=1, blocks=2, per_block=2)
    tree.network_topology_upserted(SPINE_BLOCK_CNT)
    root = TopologyInfo(topology_layer="ClusterTopologyLayer", topology_name="")
    s0 = TopologyInfo(topology_layer="SpineLayer", topology_name="s0")
    assert tree.detail_status() == [
        TopologyDetail(topology_info=root, child_topology_layer="SpineLayer", child_topology_names=["s0"], node_num=4),
        TopologyDetail(topology_info=s0, parent_topology_info=root, child_topology_layer="BlockLayer",
                       child_topology_names=["b00", "b01"], node_num=4),
        TopologyDetail(topology_info=TopologyInfo(topology_layer="BlockLayer", topology_name="b00"),
                       parent_topology_info=s0, child_topology_layer="NodeTopologyLayer", node_num=2),
        TopologyDetail(topology_info=TopologyInfo(topology_layer="BlockLayer", topology_name="b01"),
                       parent_topology_info=s0, child_topology_layer="NodeTopologyLayer", node_num=2),
    ]


def test_hypernode_node_counts_are_zero_for_hypernodes_outside_the_tree() -> None:
    tree = TopologyTree()
    tree.node_upserted("n", {}, ALLOC)
    tree.hypernode_upserted(hypernode("ok", 1, nodes=["n"]))
    tree.hypernode_upserted(hypernode("bad", 0, nodes=["n"]))
    assert tree.hypernode_node_counts() == {"bad": 0, "ok": 1}


# --------------------------------------------------------------------------- equivalence of the sources


def test_labels_with_cnt_and_equivalent_hypernodes_give_the_same_tree() -> None:
    by_labels = TopologyTree()
    names = labelled_cluster(by_labels, spines=2, blocks=3, per_block=3)
    by_labels.network_topology_upserted(SPINE_BLOCK_CNT)
    by_hypernodes = TopologyTree()
    for name in names:
        by_hypernodes.node_upserted(name, {}, ALLOC)
    for s in range(2):
        by_hypernodes.hypernode_upserted(hypernode(f"s{s}", 2, "spine", children=[f"b{s}{b}" for b in range(3)]))
        for b in range(3):
            by_hypernodes.hypernode_upserted(hypernode(f"b{s}{b}", 1, "block", regex=f"^n{s}{b}"))
    assert by_labels.source == SOURCE_CNT and by_hypernodes.source == SOURCE_HYPERNODES
    assert [(lv.layer, lv.tier, lv.tier_name) for lv in by_labels.levels] == [
        (lv.layer, lv.tier, lv.tier_name) for lv in by_hypernodes.levels]
    assert shape(by_labels) == shape(by_hypernodes)
    assert by_labels.root.allocatable == by_hypernodes.root.allocatable
    for level in ("BlockLayer", "spine", 2):
        assert by_labels.resolve_level(level) == by_hypernodes.resolve_level(level)


def test_a_tier_below_the_lowest_domain_tier_names_no_domain() -> None:
    tree = TopologyTree()
    for name in ("a", "b"):
        tree.node_upserted(name, {}, ALLOC)
    tree.hypernode_upserted(hypernode("low", 2, nodes=["a"]))
    tree.hypernode_upserted(hypernode("top", 3, children=["low"], nodes=["b"]))
    assert min(lv.tier for lv in tree.levels) == 2
    with pytest.raises(TopologyError, match="below the cluster's lowest domain tier 2"):
        tree.resolve_level(1)
