"""KAI Scheduler's gangs: a scheduling.run.ai/v2alpha2 PodGroup that pods join with `pod-group-name`,
its minMember and topologyConstraint (spec, else the kai.scheduler/* annotations on the PodGroup) read
as a gang, required and preferred levels resolved on the tree in use, and every unusable field reported
with the object and field."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import pytest

from daemon.kube.topology_status import object_of, reason_of, topology_problems
from events.builders import node, pod
from events.model import KaiPodGroupDeleted, KaiPodGroupUpserted, KaiTopologyUpserted, NodeUpserted, PodUpserted
from events.objects import (
    KAI_LAST_EVICTION_ANNOTATION,
    KAI_POD_GROUP_ANNOTATION,
    KAI_PREEMPTION_DELAY_ANNOTATION,
    KAI_PREFERRED_PLACEMENT_ANNOTATION,
    KAI_REQUIRED_PLACEMENT_ANNOTATION,
    KAI_TOPOLOGY_ANNOTATION,
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
from placement.constraints import Constraints, InvalidConstraint, key_level, planning_tree, resolve
from placement.plan import MUST_GATHER
from state.cluster import KAI_SOURCE, ClusterState
from state.gangs import KAI, KAI_POD_GROUP_PROBLEM, GangSpec, Problem
from state.kai_gangs import kai_gang_spec, kai_level
from state.topology import TopologyError
from state.topology_wishes import validate_gang_object, wish_problems

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
REQUIRED = "spec.topologyConstraint.requiredTopologyLevel"
PREFERRED = "spec.topologyConstraint.preferredTopologyLevel"
TOPOLOGY = "spec.topologyConstraint.topology"


def kai_group(name: str = "job", *, min_member: int | None = 2, topology: str = "", required: str = "",
              preferred: str = "", annotations: Mapping[str, str] | None = None, **spec: object) -> KaiPodGroup:
    constraint = KaiTopologyConstraint(topology=topology, required_topology_level=required,
                                       preferred_topology_level=preferred)
    return KaiPodGroup(metadata=KaiObjectMeta(name=name, namespace="team", uid=f"uid-{name}",
                                           annotations=dict(annotations or {})),
                       spec=KaiPodGroupSpec(min_member=min_member, topology_constraint=constraint, **spec))  # type: ignore[arg-type]


def kai_topology(name: str = "cluster-topology", aliases: Mapping[str, str] | None = None) -> KaiTopology:
    aliases = aliases or {}
    return KaiTopology(metadata=ObjectMeta(name=name, uid=f"uid-{name}"), spec=KaiTopologySpec(levels=[
        KaiTopologyLevel(node_label=key, alias=aliases.get(key, "")) for key in (BLOCK, RACK, HOST)]))


def cluster(*, topology: KaiTopology | None = None) -> ClusterState:
    state = ClusterState()
    racks = {"n0": ("b0", "r0"), "n1": ("b0", "r1"), "n2": ("b1", "r2"), "n3": ("b1", "r2")}
    for name, (block, rack) in racks.items():
        state.apply(NodeUpserted(node=node(name, labels={HOST: name, BLOCK: block, RACK: rack})))
    state.apply(KaiTopologyUpserted(topology=topology or kai_topology()))
    return state


def member(name: str, group: str = "job", scheduler: str = "toposched") -> PodUpserted:
    return PodUpserted(pod=pod(name, namespace="team", annotations={KAI_POD_GROUP_ANNOTATION: group},
                               scheduler=scheduler))


def spec_of(group: KaiPodGroup) -> tuple[GangSpec, list[Problem]]:
    return kai_gang_spec(group, f"team/{group.metadata.name}")


def test_pods_with_the_pod_group_name_annotation_join_the_kai_pod_group_as_one_gang() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(topology="cluster-topology", required=RACK)))
    state.apply(member("a"))
    state.apply(member("b"))
    gang = state.gangs["team/job"]
    assert gang.source == KAI_SOURCE and sorted(gang.members) == ["team/a", "team/b"]
    assert gang.spec is not None and gang.spec.dialect == KAI and gang.spec.min_member == 2
    assert state.pending == {"team/a", "team/b"}
    found = state.gang_object("team/job")
    assert found is not None and (found.api_version, found.kind) == ("scheduling.run.ai/v2alpha2", "PodGroup")


def test_a_pod_of_another_scheduler_naming_a_kai_pod_group_is_not_ours() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group()))
    state.apply(member("theirs", scheduler="kai-scheduler"))
    assert "team/theirs" not in state.pending


def test_required_level_is_a_mustgather_at_the_layer_of_its_node_label() -> None:
    state = cluster()
    spec, problems = spec_of(kai_group(topology="cluster-topology", required=RACK, preferred=RACK))
    assert problems == []
    found = resolve(state.topology, [spec])
    assert isinstance(found, Constraints)
    assert (found.top_level, found.kind) == (2, MUST_GATHER)
    assert state.topology.levels[2].label_keys == (RACK,)
    assert wish_problems(spec, state.topology) == []


def test_required_level_may_be_a_level_alias() -> None:
    state = cluster(topology=kai_topology(aliases={BLOCK: "block"}))
    spec, _ = spec_of(kai_group(topology="cluster-topology", required="block"))
    found = resolve(state.topology, [spec])
    assert isinstance(found, Constraints) and found.top_level == 1


def test_a_preferred_level_alone_sets_no_limit() -> None:
    state = cluster()
    spec, _ = spec_of(kai_group(topology="cluster-topology", preferred=RACK))
    found = resolve(state.topology, [spec])
    assert isinstance(found, Constraints) and found.top_level == 0


@pytest.mark.parametrize(("level", "says"), [
    ("cloud.provider.com/topology-zone", "nodes sharing one value of that node label"), (HOST, "on one node")])
def test_a_required_level_that_is_no_layer_is_planned_on_its_label_s_values_and_reported(level: str,
                                                                                          says: str) -> None:
    state = cluster()
    spec, _ = spec_of(kai_group(topology="cluster-topology", required=level))
    assert spec.topology_key == level
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(topology="cluster-topology", required=level)))
    tree = planning_tree(state, [spec])
    assert tree is state.label_trees[level] and tree.levels[1].label_keys == (level,)
    found = resolve(tree, [spec])
    assert isinstance(found, Constraints) and (found.top_level, found.kind) == (1, MUST_GATHER)
    [problem] = wish_problems(spec, state.topology)
    assert problem.field == REQUIRED and says in problem.message


def test_a_preferred_level_that_is_no_layer_is_reported_and_dropped() -> None:
    state = cluster()
    spec, _ = spec_of(kai_group(topology="cluster-topology", preferred="nowhere/level"))
    assert isinstance(resolve(state.topology, [spec]), Constraints)
    [problem] = wish_problems(spec, state.topology)
    assert problem.field == PREFERRED and "dropped" in problem.message


def test_a_preferred_level_above_the_required_one_is_reported_as_without_effect() -> None:
    state = cluster()
    spec, _ = spec_of(kai_group(topology="cluster-topology", required=RACK, preferred=BLOCK))
    [problem] = wish_problems(spec, state.topology)
    assert problem.field == PREFERRED and "no effect" in problem.message


def test_a_topology_name_that_is_not_the_one_in_use_is_reported_and_levels_still_resolve() -> None:
    state = cluster()
    spec, _ = spec_of(kai_group(topology="other-topology", required=RACK))
    [problem] = wish_problems(spec, state.topology)
    assert problem.field == TOPOLOGY and "not the topology in use" in problem.message
    assert "no KAI Topology has that name" in problem.message and "'cluster-topology'" in problem.message
    found = resolve(state.topology, [spec])
    assert isinstance(found, Constraints) and found.top_level == 2


def test_levels_without_a_topology_name_are_reported() -> None:
    state = cluster()
    spec, _ = spec_of(kai_group(required=RACK))
    [problem] = wish_problems(spec, state.topology)
    assert problem.field == TOPOLOGY and "is empty" in problem.message


def test_the_kai_annotations_on_the_pod_group_fill_what_the_spec_leaves_empty() -> None:
    spec, problems = spec_of(kai_group(annotations={
        KAI_TOPOLOGY_ANNOTATION: "cluster-topology", KAI_REQUIRED_PLACEMENT_ANNOTATION: BLOCK,
        KAI_PREFERRED_PLACEMENT_ANNOTATION: RACK}))
    assert problems == []
    assert spec.kai is not None
    assert (spec.kai.topology, spec.kai.required, spec.kai.preferred) == ("cluster-topology", BLOCK, RACK)
    assert spec.kai.required_field == f"metadata.annotations[{KAI_REQUIRED_PLACEMENT_ANNOTATION}]"


def test_the_spec_wins_over_a_differing_annotation_and_says_so() -> None:
    spec, problems = spec_of(kai_group(required=RACK, annotations={KAI_REQUIRED_PLACEMENT_ANNOTATION: BLOCK}))
    assert spec.kai is not None and spec.kai.required == RACK
    [problem] = problems
    assert problem.field == f"metadata.annotations[{KAI_REQUIRED_PLACEMENT_ANNOTATION}]"


def test_a_wish_naming_an_annotation_is_reported_on_the_annotation() -> None:
    state = cluster()
    spec, _ = spec_of(kai_group(annotations={KAI_TOPOLOGY_ANNOTATION: "cluster-topology",
                                            KAI_REQUIRED_PLACEMENT_ANNOTATION: "no/such"}))
    [problem] = wish_problems(spec, state.topology)
    assert problem.field == f"metadata.annotations[{KAI_REQUIRED_PLACEMENT_ANNOTATION}]"


@pytest.mark.parametrize(("min_member", "message"), [(None, "is missing"), (0, "below 1"), (-3, "below 1")])
def test_a_missing_or_bad_min_member_is_one_and_reported(min_member: int | None, message: str) -> None:
    spec, problems = spec_of(kai_group(min_member=min_member))
    assert spec.min_member == 1
    assert [(p.kind, p.field) for p in problems] == [(KAI_POD_GROUP_PROBLEM, "spec.minMember")]
    assert message in problems[0].message


def test_sub_groups_and_the_queue_are_read_without_problems() -> None:
    spec, problems = spec_of(kai_group(queue="team-a", sub_groups=[KaiSubGroup(name="workers", min_member=2)],
                                       min_sub_group=1))
    assert problems == []
    assert spec.kai_sub_groups is not None and spec.kai_sub_groups.leaf_names() == {"workers"}


def test_preemptibility_and_the_priority_class_are_read_without_problems() -> None:
    spec, problems = spec_of(kai_group(preemptibility="non-preemptible", priority_class_name="train"))
    assert (spec.preemptable, spec.priority_class_name) == (False, "train")
    assert problems == []
    spec, problems = spec_of(kai_group(preemptibility="sometimes"))
    assert spec.preemptable and [p.field for p in problems] == ["spec.preemptibility"]


def test_the_preemption_delay_is_read_from_the_spec_else_the_annotation_and_counts_from_creation() -> None:
    created = KaiObjectMeta(name="job", namespace="team", creation_timestamp="2026-07-12T10:28:43Z")
    group = kai_group(preemption_delay="1h30m")
    spec, problems = kai_gang_spec(msgspec.structs.replace(group, metadata=created), "team/job")
    assert (spec.kai_preemption_delay, spec.kai_delay_from, problems) == (5400.0, 1783852123.0, [])
    spec, problems = spec_of(kai_group(annotations={KAI_PREEMPTION_DELAY_ANNOTATION: "90s"}))
    assert (spec.kai_preemption_delay, spec.kai_delay_from, problems) == (90.0, None, [])
    spec, problems = spec_of(kai_group(preemption_delay="5m", annotations={KAI_PREEMPTION_DELAY_ANNOTATION: "90s"}))
    assert spec.kai_preemption_delay == 300.0
    assert [p.field for p in problems] == [f"metadata.annotations[{KAI_PREEMPTION_DELAY_ANNOTATION}]"]


@pytest.mark.parametrize(("value", "message"), [("300", "a number alone has no unit"), ("soon", "not a duration"),
                                                ("-5m", "is negative")])
def test_an_unusable_preemption_delay_is_ignored_and_reported(value: str, message: str) -> None:
    spec, problems = spec_of(kai_group(preemption_delay=value))
    assert spec.kai_preemption_delay == 0.0
    [problem] = problems
    assert (problem.kind, problem.field) == (KAI_POD_GROUP_PROBLEM, "spec.preemptionDelay")
    assert message in problem.message


def test_a_later_eviction_restarts_the_delay_and_a_bad_stamp_is_reported() -> None:
    def meta(stamp: str) -> KaiObjectMeta:
        return KaiObjectMeta(name="job", namespace="team", creation_timestamp="2026-07-12T10:28:43Z",
                             annotations={KAI_LAST_EVICTION_ANNOTATION: stamp})
    group = kai_group(preemption_delay="5m")
    spec, problems = kai_gang_spec(msgspec.structs.replace(group, metadata=meta("2026-07-12T11:28:43Z")), "team/job")
    assert (spec.kai_delay_from, problems) == (1783852123.0 + 3600, [])
    spec, problems = kai_gang_spec(msgspec.structs.replace(group, metadata=meta("x" * 500)), "team/job")
    assert spec.kai_delay_from == 1783852123.0
    [problem] = problems
    assert problem.field == f"metadata.annotations[{KAI_LAST_EVICTION_ANNOTATION}]" and len(problem.message) < 300


def test_long_untrusted_values_are_shortened_in_messages() -> None:
    state = cluster()
    spec, problems = spec_of(kai_group(topology="t" * 10_000, required="r" * 10_000, queue="q" * 10_000))
    for problem in [*problems, *wish_problems(spec, state.topology)]:
        assert len(problem.message) < 1000, problem
    assert spec.topology_key == "" and any(p.field == REQUIRED and "stays pending" in p.message for p in problems)
    found = resolve(state.topology, [spec])
    assert isinstance(found, InvalidConstraint) and len(found.message) < 1000


def test_the_daemon_files_kai_problems_on_the_kai_pod_group_as_invalid_pod_group() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(topology="cluster-topology", required="no/such")))
    state.apply(member("a"))
    found = [p for p in topology_problems(state) if p.key == "team/job"]
    assert [(p.kind, p.field) for p in found] == [(KAI_POD_GROUP_PROBLEM, REQUIRED)]
    ref = object_of(state, found[0])
    assert (ref.api_version, ref.kind, ref.uid) == ("scheduling.run.ai/v2alpha2", "PodGroup", "uid-job")
    assert reason_of(found[0]) == "InvalidPodGroup"


def test_validate_checks_a_kai_pod_group_against_the_tree() -> None:
    state = cluster()
    problems = validate_gang_object("KaiPodGroup", kai_group(topology="cluster-topology", required="no/such"),
                                    state.topology)
    assert [(p.kind, p.field) for p in problems] == [(KAI_POD_GROUP_PROBLEM, REQUIRED)]


def test_deleting_the_kai_pod_group_leaves_its_members_without_a_spec() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group()))
    state.apply(member("a"))
    state.apply(KaiPodGroupDeleted(key="team/job"))
    assert state.gangs["team/job"].spec is None
    assert state.kai_pod_groups == {}


def test_kai_pod_groups_survive_a_snapshot() -> None:
    state = cluster()
    state.apply(KaiPodGroupUpserted(pod_group=kai_group(topology="cluster-topology", required=RACK)))
    state.apply(member("a"))
    restored = ClusterState.restore(state.snapshot())
    assert restored.gangs["team/job"].spec == state.gangs["team/job"].spec
    assert restored.gangs["team/job"].source == KAI_SOURCE


def test_a_pod_naming_a_kai_pod_group_and_another_gang_joins_the_first_and_is_told() -> None:
    state = cluster()
    other = pod("both", namespace="team", gang="koord", annotations={KAI_POD_GROUP_ANNOTATION: "job"})
    state.apply(PodUpserted(pod=other))
    assert state.pods["team/both"].gang == "team/koord"
    [problem] = state.problems_of("Pod", "team/both")
    assert problem.field == f"metadata.annotations[{KAI_POD_GROUP_ANNOTATION}]" and "team/job" in problem.message


@pytest.mark.parametrize("value", [BLOCK, RACK, HOST, "block", "example.com/zone",
                                   "network.topology.nvidia.com/block", "network.topology.nvidia.com/leaf"])
def test_what_the_warning_calls_a_layer_is_what_placement_places_at(value: str) -> None:
    """The wish check (`kai_level`) and placement (`key_level`) agree on every level, alias and label."""
    kai_tree = cluster(topology=kai_topology(aliases={BLOCK: "block"})).topology
    fabric = ClusterState()
    fabric.apply(NodeUpserted(node=node("n0", block="b0", spine="s0")))
    for tree in (kai_tree, fabric.topology):
        try:
            kai_level(tree, value)
            named = True
        except TopologyError:
            named = False
        assert named == (key_level(tree, value) is not None), (tree.source, value)
