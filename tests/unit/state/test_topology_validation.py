"""Every admission rule for topology objects and PodGroup topology wishes, one message each."""

from __future__ import annotations

import json

from events.objects import (
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    ClusterNetworkTopology,
    ClusterNetworkTopologySpec,
    NetworkTopologyLayer,
    NetworkTopologySpec,
    ObjectMeta,
    PodGroup,
    PodGroupSpec,
    SubGroupPolicy,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
)
from state.gangs import Problem
from state.topology_validation import (
    LayerDef,
    resolve_cnt_layers,
    validate_network_topology,
    validate_pod_group,
    validate_volcano_pod_group,
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


# --------------------------------------------------------------------------- PodGroups


def koord(min_member: int = 4, annotation: object = None, raw: str | None = None) -> PodGroup:
    annotations = {}
    if annotation is not None:
        annotations[NETWORK_TOPOLOGY_SPEC_ANNOTATION] = json.dumps(annotation)
    if raw is not None:
        annotations[NETWORK_TOPOLOGY_SPEC_ANNOTATION] = raw
    return PodGroup(metadata=ObjectMeta(name="pg", namespace="ns", annotations=annotations),
                    spec=PodGroupSpec(min_member=min_member))


def test_a_good_koordinator_pod_group_has_no_problems() -> None:
    group = koord(annotation={"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather",
                                                  "podCountMultiple": 2}]})
    assert validate_pod_group(group, ["SpineLayer", "BlockLayer"]) == []


def test_gather_strategy_naming_an_unknown_layer_is_reported_with_the_known_ones() -> None:
    group = koord(annotation={"gatherStrategy": [{"layer": "RackLayer", "strategy": "MustGather"}]})
    problem = only(validate_pod_group(group, ["BlockLayer"]))
    assert problem.key == "ns/pg"
    assert problem.field == f"metadata.annotations[{NETWORK_TOPOLOGY_SPEC_ANNOTATION}].gatherStrategy[0].layer"
    assert "'RackLayer' is not a layer of the cluster's topology (known: BlockLayer)" in problem.message
    assert validate_pod_group(group, None) == []  # nothing known about the cluster: not checked


def test_bad_strategy_bad_json_and_non_positive_multiple_are_reported() -> None:
    strategy = only(validate_pod_group(koord(annotation={"gatherStrategy": [{"layer": "L", "strategy": "Maybe"}]})))
    assert strategy.field.endswith(".strategy") and "'Maybe' is not MustGather or PreferGather" in strategy.message
    broken = only(validate_pod_group(koord(raw="{gatherStrategy: [")))
    assert "is not valid JSON" in broken.message
    wrong_shape = only(validate_pod_group(koord(raw='["BlockLayer"]')))
    assert "gatherStrategy list" in wrong_shape.message
    zero = only(validate_pod_group(koord(annotation={"gatherStrategy": [{"layer": "L", "podCountMultiple": 0}]})))
    assert zero.field.endswith(".podCountMultiple") and "0 is not positive" in zero.message
    uneven = only(validate_pod_group(koord(5, {"gatherStrategy": [{"layer": "L", "podCountMultiple": 2}]})))
    assert "minMember 5 is not a multiple of 2" in uneven.message


def test_negative_or_missing_min_member_is_reported() -> None:
    assert "-1 is negative" in only(validate_pod_group(koord(-1))).message
    assert "is missing or 0" in only(validate_pod_group(koord(0))).message


def volcano(min_member: int = 8, topology: NetworkTopologySpec | None = None,
            policies: list[SubGroupPolicy] | None = None) -> VolcanoPodGroup:
    return VolcanoPodGroup(metadata=ObjectMeta(name="vpg", namespace="ns"), spec=VolcanoPodGroupSpec(
        min_member=min_member, network_topology=topology, sub_group_policy=policies or []))


TIERS = {1: "block", 2: "spine", 3: "cluster"}


def test_a_good_volcano_pod_group_has_no_problems() -> None:
    policy = SubGroupPolicy(name="workers", sub_group_size=4, min_sub_groups=2, match_label_keys=["role"],
                            network_topology=NetworkTopologySpec(mode="hard", highest_tier_allowed=1))
    group = volcano(topology=NetworkTopologySpec(mode="soft", highest_tier_name="spine"), policies=[policy])
    assert validate_volcano_pod_group(group, TIERS) == []


def test_volcano_bad_mode_both_tier_fields_and_unknown_tier_name_are_reported() -> None:
    mode = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(mode="strict")), TIERS))
    assert mode.field == "spec.networkTopology.mode" and "'strict' is not hard or soft" in mode.message
    both = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(
        highest_tier_allowed=1, highest_tier_name="block")), TIERS))
    assert "highestTierAllowed and highestTierName are both set" in both.message
    unknown = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(highest_tier_name="rack")), TIERS))
    assert unknown.field == "spec.networkTopology.highestTierName"
    assert "'rack' is not a tierName" in unknown.message and "block, spine, cluster" in unknown.message
    high = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(highest_tier_allowed=9)), TIERS))
    assert "above the cluster's top tier 3" in high.message


def test_volcano_sub_group_policy_sanity() -> None:
    policies = [
        SubGroupPolicy(name="", sub_group_size=0, match_label_keys=["r"]),
        SubGroupPolicy(name="a", sub_group_size=16, match_label_keys=["r"]),
        SubGroupPolicy(name="a", sub_group_size=4, min_sub_groups=3, match_label_keys=["r"]),
        SubGroupPolicy(name="b"),
        SubGroupPolicy(name="c", match_label_keys=["r"],
                       network_topology=NetworkTopologySpec(highest_tier_allowed=2)),
    ]
    group = volcano(8, NetworkTopologySpec(highest_tier_allowed=1), policies)
    found = {(p.field, p.message) for p in validate_volcano_pod_group(group, TIERS)}
    fields = {f for f, _ in found}
    assert "spec.subGroupPolicy[0].name" in fields
    assert "spec.subGroupPolicy[0].subGroupSize" in fields
    assert ("spec.subGroupPolicy[1].subGroupSize", "16 is larger than the gang's minMember 8") in found
    assert ("spec.subGroupPolicy[2].name", "'a' appears twice") in found
    assert "spec.subGroupPolicy[2].minSubGroups" in fields
    assert any(f == "spec.subGroupPolicy[3]" and "neither labelSelector nor matchLabelKeys" in m for f, m in found)
    assert any(f == "spec.subGroupPolicy[4].networkTopology" and "above the whole gang's limit 1" in m
               for f, m in found)


def test_volcano_negative_min_member_is_reported() -> None:
    assert "is negative" in only(validate_volcano_pod_group(volcano(-3))).message
