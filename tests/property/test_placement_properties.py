"""Properties of placement that must hold on any cluster, for any gang.

Clusters are random spine > block > NVLink fabrics with random work already running; gangs have a
random size, pod shape, gather rule (none, PreferGather or MustGather at a random layer, with or
without podCountMultiple) or Volcano hard tier, and possibly running members.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from events.builders import TOPOGRAPH, bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import Event, KaiPodGroupUpserted, KaiTopologyUpserted, PodDeleted, VolcanoPodGroupUpserted
from events.objects import (
    KAI_POD_GROUP_ANNOTATION,
    KAI_SUB_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    KaiObjectMeta,
    KaiPodGroup,
    KaiPodGroupSpec,
    KaiSubGroup,
    KaiTopology,
    KaiTopologyConstraint,
    KaiTopologyLevel,
    KaiTopologySpec,
    NetworkTopologySpec,
    ObjectMeta,
    OwnedMeta,
    SubGroupPolicy,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
)
from placement import GangPlan, Unschedulable, plan_gang
from state.cluster import ClusterState
from state.kai_gangs import kai_level
from state.resources import add_into

LAYERS = ["SpineLayer", "BlockLayer", "AcceleratorLayer"]


@dataclass
class Case:
    events: list[Event]
    pending: int
    min_member: int
    must_layer: str  # "" when none
    hard_tier: int  # 0 when none
    multiple: int
    layer: str = ""


@st.composite
def cases(draw: st.DrawFn) -> Case:
    blocks = draw(st.integers(1, 3))
    nvlinks = draw(st.integers(1, 3))
    per = draw(st.integers(1, 3))
    events: list[Event] = []
    names: list[str] = []
    for b in range(blocks):
        for a in range(nvlinks):
            for i in range(per):
                name = f"n-b{b}a{a}-{i}"
                names.append(name)
                events.append(node_event(node(name, gpus=8, spine="s0", block=f"b{b}", accelerator=f"b{b}a{a}")))
    for index, name in enumerate(names):
        used = draw(st.sampled_from([0, 0, 2, 4, 8]))
        if used:
            events.append(pod_event(bound(pod(f"w{index}", namespace="other", gpus=used, scheduler="x"), name)))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    size = draw(st.integers(1, 8))
    running = draw(st.integers(0, min(2, size - 1)))
    min_member = draw(st.integers(1, size))
    dialect = draw(st.sampled_from(["none", "prefer", "must", "hard"]))
    layer = draw(st.sampled_from(LAYERS))
    multiple = draw(st.sampled_from([0, 0, 2])) if dialect in ("prefer", "must") else 0
    must_layer, hard_tier = "", 0
    if dialect == "hard":
        hard_tier = draw(st.integers(1, 3))
        events.append(VolcanoPodGroupUpserted(pod_group=VolcanoPodGroup(
            metadata=OwnedMeta(name="job", namespace="default", uid="uid-job"),
            spec=VolcanoPodGroupSpec(
                min_member=min_member,
                network_topology=NetworkTopologySpec(mode="hard", highest_tier_allowed=hard_tier)))))
    else:
        gather: list[dict[str, object]] | None = None
        if dialect != "none":
            strategy = "MustGather" if dialect == "must" else "PreferGather"
            rule: dict[str, object] = {"layer": layer, "strategy": strategy}
            if multiple:
                rule["podCountMultiple"] = multiple
            gather = [rule]
            must_layer = layer if dialect == "must" else ""
        events.append(group_event(pod_group("job", min_member=min_member, gather=gather)))
    for i in range(size):
        annotations = {VOLCANO_GROUP_ANNOTATION: "job"} if dialect == "hard" else {}
        member = pod(f"job-{i}", gpus=gpus, gang=None if dialect == "hard" else "job", annotations=annotations)
        if i < running:
            member = bound(member, draw(st.sampled_from(names)))
        events.append(pod_event(member))
    return Case(events, size - running, min_member, must_layer, hard_tier, multiple, layer)


def _state(case: Case) -> ClusterState:
    state = ClusterState()
    state.apply_all(case.events)
    return state


def _running_nodes(state: ClusterState) -> list[str]:
    return [p.placed_node for p in state.pods.values() if p.gang == "default/job" and p.placed_node]


@given(cases())
def test_never_over_capacity(case: Case) -> None:
    state = _state(case)
    result = plan_gang(state, "default/job")
    if isinstance(result, Unschedulable):
        return
    used = {name: dict(info.used) for name, info in state.nodes.items()}
    for assignment in result.assignments:
        add_into(used[assignment.node], state.pods[assignment.pod].requests)
    for name in {a.node for a in result.assignments}:
        info = state.nodes[name]
        for resource, amount in used[name].items():
            assert amount <= info.allocatable.get(resource, 0), (name, resource)


@given(cases())
def test_all_or_nothing(case: Case) -> None:
    state = _state(case)
    result = plan_gang(state, "default/job")
    if isinstance(result, GangPlan):
        placed = len(result.assignments)
        running = len(_running_nodes(state))
        # Koordinator's default match policy (once-satisfied): once a member is bound, the rest go as they fit.
        satisfied = running > 0 and not case.hard_tier
        assert placed == case.pending or (placed < case.pending and (placed + running >= case.min_member
                                                                     or (satisfied and placed >= 1)))
        assert len({a.pod for a in result.assignments}) == placed
        assert all(a.pod in state.pending for a in result.assignments)
    else:
        assert result.reason and result.constraint


@given(cases())
def test_constraints_honoured(case: Case) -> None:
    state = _state(case)
    result = plan_gang(state, "default/job")
    if not isinstance(result, GangPlan):
        return
    tree = state.topology
    nodes = [a.node for a in result.assignments] + _running_nodes(state)
    if not nodes:
        return
    lca = tree.lca(nodes)
    if case.must_layer:
        assert lca.level >= tree.resolve_level(case.must_layer)
    if case.hard_tier:
        assert lca.level >= tree.resolve_level(case.hard_tier)
    if case.multiple and result.assignments:
        level = tree.resolve_level(case.layer)
        per_domain: dict[str, int] = {}
        for assignment in result.assignments:
            domain = tree.domain_at(assignment.node, level)
            assert domain is not None
            per_domain[domain.name] = per_domain.get(domain.name, 0) + 1
        assert sum(1 for count in per_domain.values() if count % case.multiple) <= 1, per_domain
    # the plan names a domain that holds the whole job (running members included)
    holder = tree.root if result.domain == "" else tree.domain(tree.resolve_level(result.level), result.domain)
    assert holder is not None and all(holder in tree.path(n) for n in nodes)


@given(cases())
def test_unconstrained_gang_is_refused_only_when_the_cluster_lacks_room(case: Case) -> None:
    if case.must_layer or case.hard_tier or case.multiple:
        return
    state = _state(case)
    result = plan_gang(state, "default/job")
    gpus = next(p.requests["nvidia.com/gpu"] for p in state.pods.values()
                if p.gang == "default/job")
    room = sum(max(info.allocatable["nvidia.com/gpu"] - info.used.get("nvidia.com/gpu", 0), 0) // gpus
               for info in state.nodes.values())
    running = len(_running_nodes(state))
    if isinstance(result, Unschedulable):
        assert room < max(case.min_member - running, 1)
    else:
        assert len(result.assignments) <= room


@given(cases())
def test_mustgather_gang_is_placed_whenever_one_domain_of_its_layer_has_room(case: Case) -> None:
    if not case.must_layer or case.multiple:
        return
    state = _state(case)
    running = _running_nodes(state)
    if running:
        return
    result = plan_gang(state, "default/job")
    tree = state.topology
    gpus = next(p.requests["nvidia.com/gpu"] for p in state.pods.values() if p.gang == "default/job")
    level = tree.resolve_level(case.must_layer)
    best = max(sum(max(state.nodes[n].allocatable["nvidia.com/gpu"] - state.nodes[n].used.get("nvidia.com/gpu", 0),
                       0) // gpus for n in domain.nodes) for domain in tree.domains_at(level))
    if best >= case.pending:
        assert isinstance(result, GangPlan) and len(result.assignments) == case.pending


@given(cases())
def test_gang_that_one_node_can_hold_shares_that_node(case: Case) -> None:
    state = _state(case)
    running = _running_nodes(state)
    if len(set(running)) > 1 or case.pending < 2:
        return
    gpus = next(p.requests["nvidia.com/gpu"] for p in state.pods.values() if p.gang == "default/job")
    candidates = set(running) or set(state.nodes)
    room = {name: max(state.nodes[name].allocatable["nvidia.com/gpu"]
                      - state.nodes[name].used.get("nvidia.com/gpu", 0), 0) // gpus for name in candidates}
    if max(room.values()) < case.pending:
        return
    result = plan_gang(state, "default/job")
    assert isinstance(result, GangPlan) and len(result.assignments) == case.pending
    assert len({a.node for a in result.assignments}) == 1


@given(cases())
def test_deterministic(case: Case) -> None:
    assert plan_gang(_state(case), "default/job") == plan_gang(_state(case), "default/job")


@st.composite
def group_cases(draw: st.DrawFn) -> tuple[list[Event], str]:
    """Two gangs of different pod shapes in one GangGroup, MustGather at a random layer."""
    blocks = draw(st.integers(1, 3))
    nvlinks = draw(st.integers(1, 2))
    per = draw(st.integers(1, 3))
    events: list[Event] = []
    for b in range(blocks):
        for a in range(nvlinks):
            for i in range(per):
                name = f"n-b{b}a{a}-{i}"
                events.append(node_event(node(name, gpus=8, cpu="32", spine="s0", block=f"b{b}",
                                              accelerator=f"b{b}a{a}")))
                used = draw(st.sampled_from([0, 0, 4, 8]))
                if used:
                    events.append(pod_event(bound(pod(f"w-{name}", namespace="other", gpus=used, cpu="4",
                                                      scheduler="x"), name)))
    layer = draw(st.sampled_from(LAYERS))
    gather: list[dict[str, object]] = [{"layer": layer, "strategy": "MustGather"}]
    group = ["default/workers", "default/servers"]
    shapes = {"workers": (draw(st.sampled_from([2, 4, 8])), "8"), "servers": (0, draw(st.sampled_from(["8", "16"])))}
    for gang_name, (gpus, cpu) in shapes.items():
        size = draw(st.integers(1, 4))
        events.append(group_event(pod_group(gang_name, min_member=size, gather=gather, gang_group=group)))
        for i in range(size):
            events.append(pod_event(pod(f"{gang_name}-{i}", gpus=gpus, cpu=cpu, gang=gang_name)))
    return events, layer


@given(group_cases())
def test_gang_group_is_placed_whole_inside_its_layer_and_within_capacity(case: tuple[list[Event], str]) -> None:
    events, layer = case
    state = ClusterState()
    state.apply_all(events)
    result = plan_gang(state, "default/workers")
    assert result == plan_gang(state, "default/servers")
    if not isinstance(result, GangPlan):
        return
    assert len(result.assignments) == len(state.pending)
    used = {name: dict(info.used) for name, info in state.nodes.items()}
    for assignment in result.assignments:
        add_into(used[assignment.node], state.pods[assignment.pod].requests)
    for name in {a.node for a in result.assignments}:
        for resource, amount in used[name].items():
            assert amount <= state.nodes[name].allocatable.get(resource, 0), (name, resource)
    tree = state.topology
    assert tree.lca(a.node for a in result.assignments).level >= tree.resolve_level(layer)


@st.composite
def sub_group_cases(draw: st.DrawFn) -> tuple[list[Event], int, int, int]:
    """A Volcano job of replicas (label `replica`), each replica a partition with its own hard tier."""
    blocks = draw(st.integers(1, 3))
    nvlinks = draw(st.integers(1, 3))
    per = draw(st.integers(1, 3))
    events: list[Event] = []
    for b in range(blocks):
        for a in range(nvlinks):
            for i in range(per):
                name = f"n-b{b}a{a}-{i}"
                events.append(node_event(node(name, gpus=8, spine="s0", block=f"b{b}", accelerator=f"b{b}a{a}")))
                used = draw(st.sampled_from([0, 0, 4, 8]))
                if used:
                    events.append(pod_event(bound(pod(f"w-{name}", namespace="other", gpus=used, scheduler="x"),
                                                  name)))
    replicas = draw(st.integers(1, 4))
    size = draw(st.integers(1, 3))
    tier = draw(st.integers(1, 2))
    minimum = draw(st.integers(0, replicas))
    policy = SubGroupPolicy(name="tp", sub_group_size=size, min_sub_groups=minimum, match_label_keys=["replica"],
                            network_topology=NetworkTopologySpec(mode="hard", highest_tier_allowed=tier))
    events.append(VolcanoPodGroupUpserted(pod_group=VolcanoPodGroup(
        metadata=OwnedMeta(name="job", namespace="default", uid="uid-job"),
        spec=VolcanoPodGroupSpec(min_member=max(minimum, 1) * size, sub_group_policy=[policy]))))
    for r in range(replicas):
        for i in range(size):
            events.append(pod_event(pod(f"job-{r}-{i}", gpus=8, labels={"replica": f"r{r}"},
                                        annotations={VOLCANO_GROUP_ANNOTATION: "job"})))
    return events, tier, minimum or replicas, size


def assert_gpus_within_capacity(state: ClusterState, plan: GangPlan) -> None:
    used = {name: dict(info.used) for name, info in state.nodes.items()}
    for assignment in plan.assignments:
        add_into(used[assignment.node], state.pods[assignment.pod].requests)
    for name in {a.node for a in plan.assignments}:
        assert used[name]["nvidia.com/gpu"] <= state.nodes[name].allocatable["nvidia.com/gpu"]


@given(sub_group_cases())
def test_sub_group_partitions_are_whole_inside_their_tier(case: tuple[list[Event], int, int, int]) -> None:
    events, tier, required, size = case
    state = ClusterState()
    state.apply_all(events)
    result = plan_gang(state, "default/job")
    if not isinstance(result, GangPlan):
        return
    tree = state.topology
    by_replica: dict[str, list[str]] = {}
    for assignment in result.assignments:
        replica = state.pods[assignment.pod].obj.metadata.labels["replica"]
        by_replica.setdefault(replica, []).append(assignment.node)
    assert len(by_replica) >= required
    for nodes in by_replica.values():
        assert len(nodes) == size
        assert tree.lca(nodes).level >= tree.resolve_level(tier)
    assert_gpus_within_capacity(state, result)


@given(cases(), st.data())
def test_ignoring_pods_plans_as_if_they_were_deleted(case: Case, data: st.DataObject) -> None:
    state = _state(case)
    everyone = sorted(state.pods)  # other work, running members and pending members alike
    gone = data.draw(st.lists(st.sampled_from(everyone), unique=True))
    deleted = _state(case)
    for key in gone:
        deleted.apply(PodDeleted(key=key))
    assert plan_gang(state, "default/job", ignore_pods=frozenset(gone)) == plan_gang(deleted, "default/job")


@st.composite
def kai_tree_cases(draw: st.DrawFn) -> tuple[list[Event], KaiPodGroup]:
    """A KAI hierarchical PodGroup: up to two mid sub-groups of up to three leaves (or leaves alone), each
    with a random required level (none, spine, block or NVLink domain), minMember and minSubGroup, on a random
    fabric with random work running."""
    events: list[Event] = []
    for s in range(draw(st.integers(1, 2))):
        for b in range(draw(st.integers(1, 2))):
            for a in range(draw(st.integers(1, 2))):
                for i in range(draw(st.integers(1, 2))):
                    name = f"n-s{s}b{b}a{a}-{i}"
                    events.append(node_event(node(name, gpus=8, spine=f"s{s}", block=f"s{s}b{b}",
                                                  accelerator=f"s{s}b{b}a{a}")))
                    used = draw(st.sampled_from([0, 0, 4, 8]))
                    if used:
                        events.append(pod_event(bound(pod(f"w-{name}", namespace="other", gpus=used, scheduler="x"),
                                                      name)))
    keys = [TOPOGRAPH + layer for layer in ("spine", "block", "accelerator")]
    events.append(KaiTopologyUpserted(topology=KaiTopology(  # its levels are layers of one label key each
        metadata=ObjectMeta(name="fabric", uid="uid-fabric"),
        spec=KaiTopologySpec(levels=[KaiTopologyLevel(node_label=key) for key in [*keys, "kubernetes.io/hostname"]]))))
    levels = st.sampled_from(["", *keys])
    groups: list[KaiSubGroup] = []
    pods: list[Event] = []

    def constraint(level: str) -> KaiTopologyConstraint | None:
        return KaiTopologyConstraint(required_topology_level=level) if level else None

    def leaves(parent: str | None, prefix: str) -> int:
        count = draw(st.integers(1, 3))
        for number in range(count):
            name = f"{prefix}leaf{number}"
            size = draw(st.integers(0, 3))
            groups.append(KaiSubGroup(name=name, parent=parent, min_member=draw(st.integers(0, max(size, 1))),
                                      topology_constraint=constraint(draw(levels))))
            for index in range(size):
                pods.append(pod_event(pod(f"{name}-{index}", gpus=draw(st.sampled_from([2, 4, 8])),
                                          labels={KAI_SUB_GROUP_LABEL: name},
                                          annotations={KAI_POD_GROUP_ANNOTATION: "job"})))
        return count

    def min_sub_group(children: int) -> int | None:
        return draw(st.one_of(st.none(), st.integers(1, children)))

    if draw(st.booleans()):
        top = leaves(None, "")
    else:
        top = draw(st.integers(1, 2))
        for mid in range(top):
            at = len(groups)
            groups.append(KaiSubGroup(name=f"mid{mid}", topology_constraint=constraint(draw(levels))))
            children = leaves(f"mid{mid}", f"mid{mid}-")
            groups[at] = msgspec.structs.replace(groups[at], min_sub_group=min_sub_group(children))
    group = KaiPodGroup(metadata=KaiObjectMeta(name="job", namespace="default", uid="uid-job"),
                        spec=KaiPodGroupSpec(min_sub_group=min_sub_group(top), sub_groups=groups))
    return [*events, KaiPodGroupUpserted(pod_group=group), *pods], group


@given(kai_tree_cases())
def test_kai_sub_groups_sit_inside_their_required_level_and_a_plan_makes_the_pod_group_ready(
        case: tuple[list[Event], KaiPodGroup]) -> None:
    events, group = case
    state = ClusterState()
    state.apply_all(events)
    result = plan_gang(state, "default/job")
    if not isinstance(result, GangPlan):
        return
    tree = state.topology
    spec = state.gangs["default/job"].spec
    assert spec is not None and spec.kai_sub_groups is not None
    placed = {a.pod: a.node for a in result.assignments}
    counts: dict[str, int] = {}
    for key in placed:
        counts[state.pods[key].task] = counts.get(state.pods[key].task, 0) + 1
    assert spec.kai_sub_groups.ready(counts) and len(placed) >= spec.min_member
    parents = {sub.name: sub.parent for sub in group.spec.sub_groups}
    for sub in group.spec.sub_groups:
        level = sub.topology_constraint.required_topology_level if sub.topology_constraint else ""
        if not level:
            continue
        under = {sub.name} | {name for name in parents if parents[name] == sub.name}
        nodes = [node for key, node in placed.items() if state.pods[key].task in under]
        if nodes:
            assert tree.lca(nodes).level >= kai_level(tree, level), (sub.name, level, nodes)
    assert_gpus_within_capacity(state, result)
