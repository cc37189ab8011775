"""PodGroup rules, one set for the fold and `toposched validate`: each problem, its field and what is done."""

from __future__ import annotations

import json

from events.objects import (
    GANG_GROUPS_ANNOTATION,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    LabelSelector,
    LabelSelectorRequirement,
    NetworkTopologySpec,
    ObjectMeta,
    OwnedMeta,
    PodGroup,
    PodGroupSpec,
    SubGroupPolicy,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
)
from state.gangs import GatherRule, koordinator_gang_spec, volcano_gang_spec
from state.topology import TOPOGRAPH_PREFIX, TopologyTree
from state.topology_wishes import validate_pod_group, validate_volcano_pod_group
from tests.unit.state.test_topology_validation import only

SPEC = f"metadata.annotations[{NETWORK_TOPOLOGY_SPEC_ANNOTATION}]"


def tree() -> TopologyTree:
    """Levels: cluster (tier 3), SpineLayer / spine (tier 2), BlockLayer / block (tier 1)."""
    topology = TopologyTree()
    topology.node_upserted("n0", {TOPOGRAPH_PREFIX + "spine": "s0", TOPOGRAPH_PREFIX + "block": "b0"}, {})
    return topology


def koord(min_member: int = 4, annotation: object = None, raw: str | None = None,
          groups: str | None = None) -> PodGroup:
    annotations = {}
    if annotation is not None:
        annotations[NETWORK_TOPOLOGY_SPEC_ANNOTATION] = json.dumps(annotation)
    if raw is not None:
        annotations[NETWORK_TOPOLOGY_SPEC_ANNOTATION] = raw
    if groups is not None:
        annotations[GANG_GROUPS_ANNOTATION] = groups
    return PodGroup(metadata=ObjectMeta(name="pg", namespace="ns", annotations=annotations),
                    spec=PodGroupSpec(min_member=min_member))


def gather(*rules: object, min_member: int = 4) -> PodGroup:
    return koord(min_member, {"gatherStrategy": list(rules)})


# --------------------------------------------------------------------------- Koordinator


def test_a_good_koordinator_pod_group_has_no_problems() -> None:
    group = gather({"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 2})
    assert validate_pod_group(group, tree()) == []
    assert koordinator_gang_spec(group, "ns/pg")[0].gather == (GatherRule("BlockLayer", "MustGather", 2, 0),)


def test_a_layer_the_cluster_does_not_have_is_reported_with_what_the_scheduler_does() -> None:
    group = gather({"layer": "RackLayer", "strategy": "MustGather"}, {"layer": "PodLayer"})
    must, prefer = validate_pod_group(group, tree())
    assert must.key == "ns/pg" and must.field == f"{SPEC}.gatherStrategy[0].layer"
    assert must.message == ("'RackLayer' is not a layer, tierName or tier of the cluster's topology (known: "
                            "ClusterTopologyLayer/cluster/tier 3, SpineLayer/spine/tier 2, BlockLayer/block/tier 1); "
                            "the gang stays pending until the cluster has it")
    assert prefer.message.endswith("; this PreferGather wish is dropped")
    assert validate_pod_group(group, None) == []  # nothing known about the cluster: not checked


def test_a_tier_name_or_number_is_a_layer_as_placement_reads_it() -> None:
    assert validate_pod_group(gather({"layer": "block", "strategy": "MustGather"}, {"layer": "2"}), tree()) == []


def test_bad_json_or_shape_drops_every_gather_rule() -> None:
    broken = only(validate_pod_group(koord(raw="{gatherStrategy: [")))
    assert broken.field == SPEC and "is not valid JSON" in broken.message
    assert broken.message.endswith("; no gather rule applies")
    wrong_shape = only(validate_pod_group(koord(raw='["BlockLayer"]')))
    assert "gatherStrategy list" in wrong_shape.message


def test_a_bad_entry_is_dropped_and_the_good_ones_kept() -> None:
    group = gather({"layer": "BlockLayer", "strategy": "Maybe"}, "BlockLayer", {"strategy": "MustGather"},
                   {"layer": "SpineLayer", "strategy": "MustGather"}, {"layer": "SpineLayer"})
    spec, problems = koordinator_gang_spec(group, "ns/pg")
    assert [(p.field, p.message) for p in problems] == [
        (f"{SPEC}.gatherStrategy[0].strategy", "'Maybe' is not MustGather or PreferGather; rule ignored"),
        (f"{SPEC}.gatherStrategy[1]", "must be an object with layer and strategy; rule ignored"),
        (f"{SPEC}.gatherStrategy[2].layer", "is missing, empty or not a string; rule ignored"),
        (f"{SPEC}.gatherStrategy[4].layer", "'SpineLayer' appears twice; this rule is ignored"),
    ]
    assert spec.gather == (GatherRule("SpineLayer", "MustGather", 0, 3),)


def test_a_pod_count_multiple_that_is_not_a_positive_integer_is_ignored_and_the_rule_kept() -> None:
    for value, message in ((0, "0 is not positive"), (-2, "-2 is not positive"), ("2", "'2' is not an integer"),
                           (True, "True is not an integer"), (2.5, "2.5 is not an integer")):
        spec, problems = koordinator_gang_spec(gather({"layer": "BlockLayer", "strategy": "MustGather",
                                                       "podCountMultiple": value}), "ns/pg")
        problem = only(problems)
        assert problem.field == f"{SPEC}.gatherStrategy[0].podCountMultiple"
        assert problem.message == f"{message}; ignored (no pod-count multiple)"
        assert spec.gather == (GatherRule("BlockLayer", "MustGather", 0, 0),)


def test_a_pod_count_multiple_that_does_not_divide_min_member_is_kept_and_says_how_it_is_applied() -> None:
    for min_member, multiple in ((5, 2), (4, 8)):
        spec, problems = koordinator_gang_spec(
            gather({"layer": "BlockLayer", "podCountMultiple": multiple}, min_member=min_member), "ns/pg")
        assert only(problems).message == (
            f"minMember {min_member} is not a multiple of {multiple}: every BlockLayer domain takes a multiple of "
            f"{multiple} pods except one, which takes the rest")
        assert spec.gather[0].pod_count_multiple == multiple


def test_negative_or_missing_min_member_is_treated_as_one() -> None:
    for value, message in ((-1, "-1 is negative; treated as 1"),
                           (0, "is missing or 0: a gang needs at least 1; treated as 1")):
        spec, problems = koordinator_gang_spec(koord(value), "ns/pg")
        assert only(problems).message == message and spec.min_member == 1


def test_a_malformed_groups_annotation_leaves_the_gang_on_its_own() -> None:
    field = f"metadata.annotations[{GANG_GROUPS_ANNOTATION}]"
    for raw, message in (('["ns/a", ', "is not valid JSON"), ('{"ns/a": 1}', "must be a JSON list")):
        spec, problems = koordinator_gang_spec(koord(groups=raw), "ns/pg")
        problem = only(problems)
        assert problem.field == field and message in problem.message
        assert problem.message.endswith("; the gang is scheduled on its own")
        assert spec.gang_group == ("ns/pg",)


def test_bad_entries_of_the_groups_annotation_are_ignored_one_by_one() -> None:
    spec, problems = koordinator_gang_spec(koord(groups='["ns/a", "b", "", 7, "x/y/z", "/c"]'), "ns/pg")
    field = f"metadata.annotations[{GANG_GROUPS_ANNOTATION}]"
    assert [(p.field, p.message) for p in problems] == [
        (f"{field}[2]", "'' is not a non-empty string; ignored"),
        (f"{field}[3]", "7 is not a non-empty string; ignored"),
        (f"{field}[4]", "'x/y/z' is not \"namespace/name\" or \"name\"; ignored"),
        (f"{field}[5]", "'/c' is not \"namespace/name\" or \"name\"; ignored"),
    ]
    assert spec.gang_group == ("ns/a", "ns/b", "ns/pg")


# --------------------------------------------------------------------------- Volcano


def volcano(min_member: int = 8, topology: NetworkTopologySpec | None = None,
            policies: list[SubGroupPolicy] | None = None) -> VolcanoPodGroup:
    return VolcanoPodGroup(metadata=OwnedMeta(name="vpg", namespace="ns"), spec=VolcanoPodGroupSpec(
        min_member=min_member, network_topology=topology, sub_group_policy=policies or []))


def test_a_good_volcano_pod_group_has_no_problems() -> None:
    policy = SubGroupPolicy(name="workers", sub_group_size=4, min_sub_groups=2, match_label_keys=["role"],
                            network_topology=NetworkTopologySpec(mode="hard", highest_tier_allowed=1))
    group = volcano(topology=NetworkTopologySpec(mode="soft", highest_tier_name="spine"), policies=[policy])
    assert validate_volcano_pod_group(group, tree()) == []


def test_volcano_bad_mode_both_tier_fields_and_unknown_tier_name_are_reported() -> None:
    mode = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(mode="strict")), tree()))
    assert mode.field == "spec.networkTopology.mode" and mode.message == "'strict' is not hard or soft; using hard"
    both = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(
        highest_tier_allowed=1, highest_tier_name="block")), tree()))
    assert both.message == "highestTierAllowed and highestTierName are both set; using highestTierAllowed"
    unknown = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(highest_tier_name="rack")), tree()))
    assert unknown.field == "spec.networkTopology.highestTierName"
    assert unknown.message.startswith("'rack' is not a layer, tierName or tier of the cluster's topology")
    assert unknown.message.endswith("; the gang stays pending until the cluster has it")
    soft = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(mode="soft", highest_tier_name="rack")),
                                           tree()))
    assert soft.message.endswith("; this soft limit is dropped")
    high = only(validate_volcano_pod_group(volcano(topology=NetworkTopologySpec(highest_tier_allowed=9)), tree()))
    assert high.message == "9 is above the cluster's top tier 3; the whole cluster is allowed"


def test_volcano_sub_group_policy_rules() -> None:
    policies = [
        SubGroupPolicy(name="", sub_group_size=0, match_label_keys=["r"]),
        SubGroupPolicy(name="a", sub_group_size=16, match_label_keys=["r"]),
        SubGroupPolicy(name="a", sub_group_size=4, min_sub_groups=3, match_label_keys=["r"]),
        SubGroupPolicy(name="b"),  # neither selector nor keys: every pod belongs, as in Volcano
        SubGroupPolicy(name="c", match_label_keys=["r"],
                       network_topology=NetworkTopologySpec(highest_tier_allowed=2)),
    ]
    found = [(p.field, p.message) for p in
             validate_volcano_pod_group(volcano(8, NetworkTopologySpec(highest_tier_allowed=1), policies), tree())]
    assert found == [
        ("spec.subGroupPolicy[0].name", "is empty; called 'subgroup-0' in messages"),
        ("spec.subGroupPolicy[0].subGroupSize", "0 is below 1; ignored (each group is one partition)"),
        ("spec.subGroupPolicy[1].subGroupSize", "16 is larger than the gang's minMember 8: no pod of a partition "
                                                "is placed before the partition is full"),
        ("spec.subGroupPolicy[2].name", "'a' appears twice"),
        ("spec.subGroupPolicy[2].minSubGroups", "3 sub-groups of 4 pods exceed the gang's minMember 8"),
        ("spec.subGroupPolicy[4].networkTopology", "a sub-group may span up to tier 2 (SpineLayer), above the whole "
                                                   "gang's limit, tier 1 (BlockLayer); the gang's limit applies"),
    ]


def test_an_unusable_sub_group_label_selector_drops_the_policy_and_a_usable_one_is_honoured_in_full() -> None:
    bad = SubGroupPolicy(name="bad", label_selector=LabelSelector(match_expressions=[
        LabelSelectorRequirement(key="role", operator="Near", values=["x"])]))
    good = SubGroupPolicy(name="good", label_selector=LabelSelector(match_expressions=[
        LabelSelectorRequirement(key="role", operator="NotIn", values=["ps"])]), match_label_keys=["slot"])
    spec, problems = volcano_gang_spec(volcano(policies=[bad, good]), "ns/vpg")
    assert [(p.field, p.message) for p in problems] == [
        ("spec.subGroupPolicy[0].labelSelector.matchExpressions[0].operator",
         "'Near' is not In, NotIn, Exists or DoesNotExist; policy ignored")]
    [rule] = spec.sub_groups
    assert rule.name == "good" and rule.index == 1
    assert rule.takes({"role": "worker", "slot": "0"})
    assert not rule.takes({"role": "ps", "slot": "0"})
    assert not rule.takes({"role": "worker", "slot": ""})  # Volcano: an empty matchLabelKey value does not match


def test_volcano_negative_min_member_is_treated_as_one() -> None:
    assert only(validate_volcano_pod_group(volcano(-3))).message == "-3 is negative; treated as 1"
