"""KAI's hierarchical PodGroups (spec.subGroups, minSubGroup, a topologyConstraint per sub-group), written as
KAI's docs write them: each sub-group inside one domain of its required level, inside its parent's; a
leaf ready with its minMember pods, any other node with its minSubGroup children (all by default); the
gang waits until that many pods exist, and binds the minimum when not all fit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from events.builders import node, pod
from events.model import (
    Event,
    KaiPodGroupUpserted,
    KaiTopologyUpserted,
    NodeUpserted,
    PodUpserted,
    encode_event,
    with_seq,
)
from events.objects import (
    KAI_POD_GROUP_ANNOTATION,
    KAI_SUB_GROUP_LABEL,
    KaiObjectMeta,
    KaiPodGroup,
    KaiPodGroupSpec,
    KaiSubGroup,
    KaiTopology,
    KaiTopologyConstraint,
    KaiTopologyLevel,
    KaiTopologySpec,
    ObjectMeta,
)
from placement.gang import plan_gang
from placement.members import quorum_met
from placement.plan import INVALID, MEMBERS, GangPlan, Unschedulable
from preemption.victims import _surplus
from state.cluster import ClusterState
from state.gangs import KAI_POD_GROUP_PROBLEM, Problem
from state.kai_gangs import kai_gang_spec

ZONE = "topology/zone"
SPINE = "topology/spine"
RACK = "topology/rack"
HOST = "kubernetes.io/hostname"
KEY = "team/job"


def constraint(level: str) -> KaiTopologyConstraint:
    return KaiTopologyConstraint(topology="cluster-topology", required_topology_level=level)


def sub(name: str, *, min_member: int | None = None, min_sub_group: int | None = None, parent: str | None = None,
        level: str = "") -> KaiSubGroup:
    return KaiSubGroup(name=name, min_member=min_member, min_sub_group=min_sub_group, parent=parent,
                       topology_constraint=constraint(level) if level else None)


def kai_group(*sub_groups: KaiSubGroup, min_member: int | None = None, min_sub_group: int | None = None,
              level: str = "") -> KaiPodGroup:
    return KaiPodGroup(metadata=KaiObjectMeta(name="job", namespace="team", uid="uid-job"),
                       spec=KaiPodGroupSpec(min_member=min_member, min_sub_group=min_sub_group,
                                            topology_constraint=constraint(level) if level else KaiTopologyConstraint(),
                                            sub_groups=list(sub_groups)))


def cluster(gpus_per_node: int = 8) -> ClusterState:
    """2 zones x 2 spines x 2 racks x 2 nodes, 8 GPUs each; KAI's Topology names the four levels."""
    state = ClusterState()
    for number in range(16):
        zone, spine, rack = f"z{number // 8}", f"s{number // 4}", f"r{number // 2}"
        state.apply(NodeUpserted(node=node(f"n{number:02d}", gpus=gpus_per_node, labels={
            HOST: f"n{number:02d}", ZONE: zone, SPINE: spine, RACK: rack})))
    state.apply(KaiTopologyUpserted(topology=KaiTopology(
        metadata=ObjectMeta(name="cluster-topology", uid="uid-topology"),
        spec=KaiTopologySpec(levels=[KaiTopologyLevel(node_label=key) for key in (ZONE, SPINE, RACK, HOST)]))))
    return state


def members(state: ClusterState, counts: Mapping[str, int], *, gpus: int = 8, bound_to: str = "") -> None:
    for leaf, count in counts.items():
        for number in range(count):
            state.apply(PodUpserted(pod=pod(
                f"{leaf}-{number}", namespace="team", gpus=gpus, node_name=bound_to, phase="Running" if bound_to else
                "Pending", annotations={KAI_POD_GROUP_ANNOTATION: "job"},
                labels={KAI_SUB_GROUP_LABEL: leaf} if leaf != "loose" else {})))


def fill(state: ClusterState, numbers: Iterable[int]) -> None:
    """Nodes n<number> taken whole by other work."""
    for number in numbers:
        state.apply(PodUpserted(pod=pod(f"filler-{number}", namespace="other", node_name=f"n{number:02d}",
                                        phase="Running")))


def label_of(state: ClusterState, node_name: str, key: str) -> str:
    return state.nodes[node_name].obj.metadata.labels[key]


def by_leaf(plan: GangPlan) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for assignment in plan.assignments:
        out.setdefault(assignment.pod.split("/")[1].rsplit("-", 1)[0], set()).add(assignment.node)
    return out


def test_kai_docs_sample1_each_sub_group_lands_in_one_rack() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(
        sub("subgroup-a", min_member=2, level=RACK), sub("subgroup-b", min_member=2, level=RACK), min_sub_group=2)))
    members(state, {"subgroup-a": 2, "subgroup-b": 2})
    plan = plan_gang(state, KEY)
    assert isinstance(plan, GangPlan), plan
    placed = by_leaf(plan)
    for leaf in ("subgroup-a", "subgroup-b"):
        assert len({label_of(state, name, RACK) for name in placed[leaf]}) == 1, placed


def test_a_sub_group_that_fits_no_rack_keeps_the_gang_pending_even_though_the_cluster_has_room() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(sub("wide", min_member=3, level=RACK))))
    members(state, {"wide": 3})  # 3 x 8 GPUs: a rack holds 2 such pods
    plan = plan_gang(state, KEY)
    assert isinstance(plan, Unschedulable)
    assert "sub-group 'wide' (3 pods) fits in no" in plan.reason, plan.reason


def test_kai_docs_sample2_nested_sub_groups_share_a_spine_and_each_leaf_a_rack() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(
        sub("subgroup-ab", min_sub_group=2, level=SPINE),
        sub("subgroup-a", min_member=1, parent="subgroup-ab", level=RACK),
        sub("subgroup-b", min_member=2, parent="subgroup-ab", level=RACK),
        sub("subgroup-c", min_member=3, level=RACK), min_sub_group=2, level=ZONE)))
    members(state, {"subgroup-a": 2, "subgroup-b": 2})
    members(state, {"subgroup-c": 2}, gpus=4)
    spec = state.gangs[KEY].spec
    assert spec is not None and spec.min_member == 6
    plan = plan_gang(state, KEY)
    assert isinstance(plan, Unschedulable) and plan.constraint == MEMBERS  # six pods, but subgroup-c needs 3
    assert "'subgroup-c' 2 of minMember 3" in plan.reason, plan.reason
    members(state, {"subgroup-c": 3}, gpus=4)
    plan = plan_gang(state, KEY)
    assert isinstance(plan, GangPlan), plan
    placed = by_leaf(plan)
    assert len({label_of(state, name, ZONE) for nodes in placed.values() for name in nodes}) == 1
    assert len({label_of(state, name, SPINE) for name in placed["subgroup-a"] | placed["subgroup-b"]}) == 1
    for leaf in placed:
        assert len({label_of(state, name, RACK) for name in placed[leaf]}) == 1, placed


def test_a_spine_too_full_for_both_children_is_passed_over_for_one_that_holds_them() -> None:
    state = cluster()
    # spine s0 keeps one free rack, s1 two: the a+b pair (two racks' worth of pods) fits only under s1
    fill(state, (0, 1))
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(
        sub("ab", level=SPINE), sub("a", min_member=2, parent="ab", level=RACK),
        sub("b", min_member=2, parent="ab", level=RACK), level=ZONE)))
    members(state, {"a": 2, "b": 2})
    plan = plan_gang(state, KEY)
    assert isinstance(plan, GangPlan), plan
    assert {label_of(state, assignment.node, SPINE) for assignment in plan.assignments} == {"s1"}


def test_min_sub_group_lets_three_of_four_replicas_run_when_the_fourth_has_no_room() -> None:
    state = cluster()
    # a rack per replica, and only three racks free
    fill(state, range(10))
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(
        *(sub(f"prefill-{replica}", min_member=2, level=RACK) for replica in range(4)), min_sub_group=3)))
    members(state, {f"prefill-{replica}": 2 for replica in range(4)})
    spec = state.gangs[KEY].spec
    assert spec is not None and spec.min_member == 6
    plan = plan_gang(state, KEY)
    assert isinstance(plan, GangPlan), plan
    placed = by_leaf(plan)
    assert len(placed) == 3 and all(len(nodes) == 2 for nodes in placed.values()), placed
    assert "only the minimum" in plan.explanation


def test_without_min_sub_group_every_replica_is_required() -> None:
    state = cluster()
    fill(state, range(10))
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(
        *(sub(f"prefill-{replica}", min_member=2, level=RACK) for replica in range(4)))))
    members(state, {f"prefill-{replica}": 2 for replica in range(4)})
    plan = plan_gang(state, KEY)
    assert isinstance(plan, Unschedulable), plan


def test_a_leaf_places_beyond_its_min_member_only_when_room_allows() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(sub("workers", min_member=2, level=RACK))))
    members(state, {"workers": 3})
    plan = plan_gang(state, KEY)
    assert isinstance(plan, GangPlan), plan
    assert len(plan.assignments) == 2  # a rack holds two 8-GPU pods: the third waits
    assert len({label_of(state, a.node, RACK) for a in plan.assignments}) == 1


def test_pods_of_no_leaf_sit_inside_the_pod_group_s_domain() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(sub("workers", min_member=2, level=RACK), level=SPINE)))
    members(state, {"workers": 2, "loose": 2})
    plan = plan_gang(state, KEY)
    assert isinstance(plan, GangPlan), plan
    assert len(plan.assignments) == 4
    assert len({label_of(state, a.node, SPINE) for a in plan.assignments}) == 1


def test_permit_waits_for_every_required_sub_group_and_preemption_keeps_them_ready() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(
        sub("leaders", min_member=1), sub("workers", min_member=2), min_member=3)))
    members(state, {"workers": 3}, bound_to="n00")
    assert not quorum_met(state, KEY)  # three pods, but no leader
    members(state, {"leaders": 1}, bound_to="n01")
    assert quorum_met(state, KEY)
    running = sorted((state.pods[key] for key in state.gangs[KEY].members), key=lambda p: p.key)
    spec = state.gangs[KEY].spec
    assert [p.key for p in _surplus(running, spec, 0)] == ["team/workers-0"]  # never the only leader


def test_a_running_leaf_anchors_the_rest_of_its_sub_group_in_its_rack() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(sub("workers", min_member=1, level=RACK))))
    state.apply(PodUpserted(pod=pod("workers-9", namespace="team", node_name="n05", phase="Running", gpus=4,
                                    annotations={KAI_POD_GROUP_ANNOTATION: "job"},
                                    labels={KAI_SUB_GROUP_LABEL: "workers"})))
    members(state, {"workers": 1}, gpus=4)
    plan = plan_gang(state, KEY)
    assert isinstance(plan, GangPlan), plan
    assert {label_of(state, a.node, RACK) for a in plan.assignments} == {label_of(state, "n05", RACK)}


def test_a_sub_group_level_that_is_not_a_layer_keeps_the_gang_pending_with_the_field() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(sub("workers", min_member=1, level="no/such-level"))))
    members(state, {"workers": 1})
    plan = plan_gang(state, KEY)
    assert isinstance(plan, Unschedulable) and plan.constraint == INVALID
    assert "spec.subGroups[0].topologyConstraint.requiredTopologyLevel 'no/such-level'" in plan.reason


def fields(problems: list[Problem]) -> list[tuple[str, str]]:
    return [(p.field, p.message) for p in problems]


def test_the_tree_is_read_with_kai_s_defaults_and_min_member_is_the_fewest_pods_that_make_it_ready() -> None:
    spec, problems = kai_gang_spec(kai_group(
        sub("decode", min_sub_group=2), sub("decode-leaders", parent="decode", min_member=1),
        sub("decode-workers", parent="decode", min_member=4),
        sub("prefill"), sub("prefill-leaders", parent="prefill", min_member=1),
        sub("prefill-workers", parent="prefill", min_member=4), min_sub_group=1), KEY)
    assert problems == []
    assert spec.min_member == 5  # one of decode / prefill, each needing its leader and 4 workers
    tree = spec.kai_sub_groups
    assert tree is not None
    assert tree.leaf_names() == {"decode-leaders", "decode-workers", "prefill-leaders", "prefill-workers"}
    assert not tree.ready({"decode-workers": 4, "prefill-leaders": 1})
    assert tree.ready({"decode-workers": 4, "decode-leaders": 1})


def test_a_pod_group_min_member_above_the_tree_s_minimum_is_kept() -> None:
    spec, problems = kai_gang_spec(kai_group(sub("a", min_member=1), sub("b", min_member=1), min_member=5), KEY)
    assert problems == [] and spec.min_member == 5


def test_trees_kai_refuses_are_reported_and_the_gang_waits() -> None:
    cases = [
        ((sub("a"), sub("a")), "spec.subGroups[1].name", "'a' is also spec.subGroups[0]'s"),
        ((sub("a", parent="nobody"),), "spec.subGroups[0].parent", "'nobody' names no sub-group"),
        ((sub("a", parent="b"), sub("b", parent="a")), "spec.subGroups[0].parent", "makes a cycle"),
        ((sub(""),), "spec.subGroups[0].name", "is empty"),
        (tuple(sub(f"g{n}", parent=f"g{n - 1}" if n else None) for n in range(20)), "spec.subGroups[16].parent",
         "nests the sub-group 17 deep, deeper than the 16 levels toposched plans"),
        (tuple(sub(f"g{n}", min_member=1) for n in range(5000)), "spec.subGroups",
         "lists 5000 sub-groups, more than the 4096 toposched plans"),
    ]
    for groups, field, message in cases:
        spec, problems = kai_gang_spec(kai_group(*groups), KEY)
        assert [p.field for p in problems] == [field] and message in problems[0].message, fields(problems)
        assert problems[0].kind == KAI_POD_GROUP_PROBLEM
        assert spec.kai_sub_groups is not None and spec.kai_sub_groups.invalid
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(sub("a", parent="b"), sub("b", parent="a"))))
    members(state, {"a": 1})
    plan = plan_gang(state, KEY)
    assert isinstance(plan, Unschedulable) and plan.constraint == INVALID and "makes a cycle" in plan.reason


def test_thresholds_kai_refuses_are_reported_and_read_as_its_default() -> None:
    spec, problems = kai_gang_spec(kai_group(
        sub("mid", min_sub_group=5), sub("x", parent="mid", min_member=1), sub("y", parent="mid", min_member=2),
        sub("leaf", min_member=1, min_sub_group=1), min_sub_group=0), KEY)
    assert fields(problems) == [
        ("spec.minSubGroup", "0 is not between 1 and its 2 direct sub-groups; read as all of them, KAI's default"),
        ("spec.subGroups[0].minSubGroup", "5 is not between 1 and its 2 direct sub-groups; read as all of them, "
                                          "KAI's default"),
        ("spec.subGroups[3].minSubGroup", "1 counts sub-groups and this one has none under it (a leaf counts pods, "
                                          "with minMember): it has no effect"),
    ]
    assert spec.min_member == 4


def test_min_sub_group_without_sub_groups_is_reported() -> None:
    _, problems = kai_gang_spec(kai_group(min_member=2, min_sub_group=1), KEY)
    assert [p.field for p in problems] == ["spec.minSubGroup"]


def test_a_sub_group_level_that_is_no_label_key_is_reported_when_read() -> None:
    _, problems = kai_gang_spec(kai_group(sub("a", min_member=1, level="not a key!")), KEY)
    assert [p.field for p in problems] == ["spec.subGroups[0].topologyConstraint.requiredTopologyLevel"]
    assert problems[0].message.endswith("the gang stays pending")


def test_the_fast_fold_and_a_restored_snapshot_give_a_pod_its_kai_sub_group() -> None:
    # A pod of a head met before without labels derives alike but for its gang (`_add_new_pod`,
    # `_restored_shape`): not one whose KAI sub-group label is its task.
    events: list[Event] = [PodUpserted(pod=pod("plain", namespace="team")),
                           PodUpserted(pod=pod("labelled", namespace="team", labels={KAI_SUB_GROUP_LABEL: "workers"}))]
    folded = ClusterState()
    with folded.batching_binds():
        folded.fold_records((seq, encode_event(with_seq(event, seq))) for seq, event in enumerate(events, 1))
    assert [folded.pods[f"team/{name}"].task for name in ("plain", "labelled")] == ["", "workers"]
    restored = ClusterState.restore(folded.snapshot())
    assert [restored.pods[f"team/{name}"].task for name in ("plain", "labelled")] == ["", "workers"]


def test_when_not_all_fit_a_leaf_takes_its_minimum_and_leaves_its_sibling_the_room_it_needs() -> None:
    state = cluster()
    fill(state, range(2, 16))  # every node full but rack r0's: n00 keeps 4 GPUs, n01 8
    state.apply(PodUpserted(pod=pod("half", namespace="other", node_name="n00", phase="Running", gpus=4)))
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(sub("a", min_member=1), sub("b", min_member=2))))
    members(state, {"a": 3}, gpus=4)
    members(state, {"b": 2}, gpus=4)
    # 12 GPUs free: all five 4-GPU pods (20) do not fit, and a's three (12) first would leave b no room
    plan = plan_gang(state, KEY)
    assert isinstance(plan, GangPlan), plan
    assert sum(1 for a in plan.assignments if a.pod.startswith("team/b-")) == 2
    assert sum(1 for a in plan.assignments if a.pod.startswith("team/a-")) == 1
