"""Properties of the fold that must hold for any sequence of events."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from events.builders import (
    bound,
    group_event,
    kai_queue,
    node,
    node_event,
    pod,
    pod_event,
    pod_group,
    volcano_pod_group,
)
from events.model import (
    BindFailed,
    Event,
    KaiPodGroupDeleted,
    KaiPodGroupUpserted,
    KaiQueueDeleted,
    KaiQueueUpserted,
    KaiTopologyDeleted,
    KaiTopologyUpserted,
    KueueTopologyDeleted,
    KueueTopologyUpserted,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    PriorityClassDeleted,
    PriorityClassUpserted,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    encode_event,
    with_seq,
)
from events.objects import (
    KAI_PRIORITY_LABEL,
    KAI_QUEUE_LABEL,
    KAI_SUB_GROUP_LABEL,
    RESIZE_INFEASIBLE,
    RESIZE_PENDING,
    Condition,
    ContainerResourceStatus,
    KaiObjectMeta,
    KaiPodGroup,
    KaiPodGroupSpec,
    KaiTopology,
    KaiTopologyConstraint,
    KaiTopologyLevel,
    KaiTopologySpec,
    KueueTopology,
    KueueTopologyLevel,
    KueueTopologySpec,
    ObjectMeta,
    Pod,
    PriorityClass,
    ResourceRequirements,
)
from state.cluster import ClusterState
from state.resources import add_into

NODES = [f"n{i}" for i in range(4)]
PODS = [f"p{i}" for i in range(6)]
GANGS = ["g0", "g1"]
# PriorityClasses come and go; pods and the PodGroups of Volcano and KAI (whose class is their job's priority)
# name them, or one that never exists, or none.
CLASS_NAMES = st.sampled_from(["", "low", "high", "missing"])
# Pods in a KAI queue by label may name their class by label too (their priority then, when in no gang).
KAI_LABELS = st.sampled_from([None, None, {KAI_QUEUE_LABEL: "kq1"}, {KAI_SUB_GROUP_LABEL: "leaf-a"},
                              {KAI_QUEUE_LABEL: "kq1", KAI_SUB_GROUP_LABEL: "leaf-b"},
                              {KAI_QUEUE_LABEL: "kq1", KAI_PRIORITY_LABEL: "high"},
                              {KAI_QUEUE_LABEL: "kq1", KAI_PRIORITY_LABEL: "missing"}])


# Some pods wait for scheduling gates (spec.schedulingGates): held, never pending until they are removed.
GATES = st.sampled_from([(), (), (), ("example.com/quota",)])


# What a kubelet reports of a pod's one container in a resize (KEP-1287): (allocated cpu, applied cpu,
# infeasible); None: a pod without container statuses (or before 1.33). The builders' pods ask for 8 cpus.
RESIZES = st.sampled_from([None, None, ("8", "8", False), ("4", "8", False), ("8", "12", False),
                           ("4", None, False), ("4", "4", True)])


def _resized(obj: Pod, resize: tuple[str, str | None, bool] | None) -> Pod:
    if resize is None:
        return obj
    allocated, applied, infeasible = resize
    status = ContainerResourceStatus(
        name="main", allocated_resources={**obj.spec.containers[0].resources.requests, "cpu": allocated},
        resources=ResourceRequirements(requests={"cpu": applied}) if applied is not None else None)
    conditions = [Condition(type=RESIZE_PENDING, reason=RESIZE_INFEASIBLE)] if infeasible else []
    return msgspec.structs.replace(obj, status=msgspec.structs.replace(
        obj.status, container_statuses=[status], conditions=conditions))


def _pod_events() -> st.SearchStrategy[Event]:
    return st.builds(
        lambda name, gpus, node_name, phase, gang, uid, gates, resize, class_name, labels: pod_event(_resized(
            bound(pod(name, gpus=gpus, gang=gang, uid=uid, priority_class=class_name, labels=labels), node_name, phase)
            if node_name else pod(name, gpus=gpus, gang=gang, uid=uid, phase=phase, gates=gates,
                                  priority_class=class_name, labels=labels),
            resize)),
        st.sampled_from(PODS), st.integers(0, 8), st.sampled_from(["", *NODES]),
        st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]), st.sampled_from([None, *GANGS]),
        st.sampled_from(["u1", "u2"]), GATES, RESIZES, CLASS_NAMES, KAI_LABELS,
    )


def _priority_events() -> st.SearchStrategy[Event]:
    """PriorityClasses (one may be the globalDefault) and Volcano PodGroups naming them, so jobs' priorities
    move under their pods."""
    return st.one_of(
        st.builds(lambda name, value, default: PriorityClassUpserted(priority_class=PriorityClass(
            metadata=ObjectMeta(name=name), value=value, global_default=default)),
                  st.sampled_from(["low", "high"]), st.sampled_from([10, 1000, 0]), st.booleans()),
        st.builds(lambda name: PriorityClassDeleted(name=name), st.sampled_from(["low", "high"])),
        st.builds(lambda gang, minimum, class_name: VolcanoPodGroupUpserted(pod_group=volcano_pod_group(
            gang, min_member=minimum, priority_class_name=class_name)),
                  st.sampled_from(GANGS), st.integers(1, 3), CLASS_NAMES),
        st.builds(lambda gang: VolcanoPodGroupDeleted(key=f"default/{gang}"), st.sampled_from(GANGS)),
    )


def _decision_events() -> st.SearchStrategy[Event]:
    key = st.sampled_from([f"default/{p}" for p in PODS])
    uid = st.sampled_from(["u1", "u2", ""])
    where = st.sampled_from(NODES)
    return st.one_of(
        st.builds(lambda k, u, n: PodAssumed(pod=k, uid=u, node=n), key, uid, where),
        st.builds(lambda k, u: PodForgotten(pod=k, uid=u), key, uid),
        st.builds(lambda k, u, n: PodBound(pod=k, uid=u, node=n), key, uid, where),
        st.builds(lambda k, u, n: BindFailed(pod=k, uid=u, node=n, reason="x"), key, uid, where),
        st.builds(lambda k, u, n, p: PodNominated(pod=k, uid=u, node=n, priority=p), key, uid, where,
                  st.integers(0, 3)),
        st.builds(lambda k: NominationCleared(pod=k), key),
        st.builds(lambda k, u: PodDeleted(key=k, uid=u), key, uid),
    )


# Kueue Topologies over custom node labels (a node may carry a block, a rack, both or neither), each good:
# which one the tree takes depends on how many nodes carry their labels, so on the nodes folded so far.
BLOCK_KEY = "cloud.provider.com/topology-block"
RACK_KEY = "cloud.provider.com/topology-rack"
TOPOLOGY_LEVELS = st.sampled_from([(BLOCK_KEY, RACK_KEY, "kubernetes.io/hostname"), (RACK_KEY,), (BLOCK_KEY,),
                                   ("kubernetes.io/hostname",), ("example.com/nowhere",)])


def _kueue_events() -> st.SearchStrategy[Event]:
    return st.one_of(
        st.builds(lambda name, levels: KueueTopologyUpserted(topology=KueueTopology(
            metadata=ObjectMeta(name=name, uid=f"uid-{name}"),
            spec=KueueTopologySpec(levels=[KueueTopologyLevel(node_label=key) for key in levels]))),
                  st.sampled_from(["t0", "t1"]), TOPOLOGY_LEVELS),
        st.builds(lambda name: KueueTopologyDeleted(name=name), st.sampled_from(["t0", "t1"])),
    )


def _kai_events() -> st.SearchStrategy[Event]:
    """KAI Topologies (the same levels as the Kueue ones: a KAI Topology takes precedence) and KAI PodGroups
    of the gangs pods join, with required levels that are and are not layers."""
    return st.one_of(
        st.builds(lambda name, levels: KaiTopologyUpserted(topology=KaiTopology(
            metadata=ObjectMeta(name=name, uid=f"uid-kai-{name}"),
            spec=KaiTopologySpec(levels=[KaiTopologyLevel(node_label=key) for key in levels]))),
                  st.sampled_from(["k0", "k1"]), TOPOLOGY_LEVELS),
        st.builds(lambda name: KaiTopologyDeleted(name=name), st.sampled_from(["k0", "k1"])),
        st.builds(lambda gang, minimum, level, queue, class_name, delay, created: KaiPodGroupUpserted(
            pod_group=KaiPodGroup(
                metadata=KaiObjectMeta(name=gang, namespace="default", uid=f"uid-kaipg-{gang}",
                                       creation_timestamp=created),
                spec=KaiPodGroupSpec(min_member=minimum, queue=queue, priority_class_name=class_name,
                                     preemption_delay=delay,
                                     topology_constraint=KaiTopologyConstraint(topology="k0",
                                                                               required_topology_level=level)))),
                  st.sampled_from(GANGS), st.sampled_from([None, 0, 1, 3]),
                  st.sampled_from(["", RACK_KEY, "example.com/nowhere"]), st.sampled_from(["", "kq0", "kq1"]),
                  CLASS_NAMES, st.sampled_from([None, "5m", "300", "-1s"]),
                  st.sampled_from(["", "2026-07-12T10:28:43Z", "not a time"])),
        st.builds(lambda gang: KaiPodGroupDeleted(key=f"default/{gang}"), st.sampled_from(GANGS)),
        # KAI Queues the PodGroups name (kq1 under kq0, so kq0 takes no jobs), their GPU limit sometimes
        # below what the gangs ask
        st.builds(lambda name, limit: KaiQueueUpserted(queue=kai_queue(
            name, parent="kq0" if name == "kq1" else "", cpu=(0.0, -1.0, 1.0), memory=(0.0, -1.0, 1.0),
            gpu=(8.0, limit, 1.0))), st.sampled_from(["kq0", "kq1"]), st.sampled_from([-1.0, 8.0, 16.0])),
        st.builds(lambda name: KaiQueueDeleted(name=name), st.sampled_from(["kq0", "kq1"])),
    )


def _custom_labels(block: str | None, rack: str | None) -> dict[str, str]:
    return {**({BLOCK_KEY: block} if block else {}), **({RACK_KEY: rack} if rack else {})}


single_events = st.one_of(
    st.builds(lambda n, g: node_event(node(n, gpus=g)), st.sampled_from(NODES), st.integers(0, 16)),
    st.builds(lambda n, g, b, r: node_event(node(n, gpus=g, labels=_custom_labels(b, r))), st.sampled_from(NODES),
              st.integers(0, 16), st.sampled_from([None, "b0", "b1"]), st.sampled_from([None, "r0", "r1", "r2"])),
    _kueue_events(),
    _kai_events(),
    _priority_events(),
    st.builds(lambda n: NodeDeleted(name=n), st.sampled_from(NODES)),
    st.builds(lambda g, m: group_event(pod_group(g, min_member=m)), st.sampled_from(GANGS), st.integers(-1, 4)),
    _pod_events(),
    _decision_events(),
)
events_strategy = st.lists(single_events, max_size=60).map(lambda evs: [with_seq(e, i + 1) for i, e in enumerate(evs)])


def _bind_runs() -> st.SearchStrategy[list[Event]]:
    """Bindings one after another, as a log holds them after a gang is placed (`batching_binds` counts such
    a run at once)."""
    return st.lists(st.builds(lambda k, u, n: PodBound(pod=k, uid=u, node=n, time=3.0),
                              st.sampled_from([f"default/{p}" for p in PODS]), st.sampled_from(["u1", "u2", ""]),
                              st.sampled_from([*NODES, "gone"])), min_size=1, max_size=6)


_waiting_pods = st.lists(st.builds(
    lambda name, gpus, gang, uid, gates, labels: pod_event(pod(name, gpus=gpus, gang=gang, uid=uid, gates=gates,
                                                               labels=labels)),
    st.sampled_from(PODS), st.integers(0, 8), st.sampled_from([None, *GANGS]), st.sampled_from(["u1", "u2"]), GATES,
    KAI_LABELS), max_size=6)
# Pods waiting to be placed, then anything, often runs of bindings.
logs_strategy = st.tuples(
    _waiting_pods, st.lists(st.one_of(single_events.map(lambda e: [e]), _bind_runs()), max_size=20),
).map(lambda parts: [with_seq(e, i + 1) for i, e in enumerate([*parts[0], *(e for run in parts[1] for e in run)])])


def _fold(events: list[Event]) -> ClusterState:
    state = ClusterState()
    state.apply_all(events)
    return state


@given(events_strategy, st.integers(0, 60))
def test_snapshot_plus_tail_folds_to_the_same_state_as_from_the_start(events: list[Event], cut: int) -> None:
    cut = min(cut, len(events))
    head = _fold(events[:cut])
    resumed = ClusterState.restore(head.snapshot())
    resumed.apply_all(events[cut:])
    assert resumed.canonical() == _fold(events).canonical()


def _tree_shape(state: ClusterState) -> object:
    tree = state.topology
    return (tree.source, tree.source_name, tree.levels, {name: [d.name for d in tree.path(name)] for name in NODES},
            sorted(str(problem) for problem in tree.problems))


@given(events_strategy, st.integers(0, 60))
def test_snapshot_plus_tail_gives_the_same_topology_tree_as_from_the_start(events: list[Event], cut: int) -> None:
    """Kueue Topologies (good ones: a bad one's last good levels are history a snapshot does not keep) and the
    node labels they read survive a snapshot: the tree, its source and its problems are the same."""
    cut = min(cut, len(events))
    resumed = ClusterState.restore(_fold(events[:cut]).snapshot())
    resumed.apply_all(events[cut:])
    assert _tree_shape(resumed) == _tree_shape(_fold(events))


@given(events_strategy)
def test_usage_is_never_negative_and_equals_a_recount(events: list[Event]) -> None:
    state = ClusterState()
    for event in events:
        state.apply(event)
        for info in state.nodes.values():
            recount: dict[str, int] = {}
            for key in info.pods:
                add_into(recount, state.pods[key].requests)
            assert {k: v for k, v in info.used.items() if v} == {k: v for k, v in recount.items() if v}
            assert all(amount >= 0 for amount in info.used.values())
        for key, pod_info in state.pods.items():
            placed = pod_info.placed_node
            if pod_info.counted_on:
                assert placed == pod_info.counted_on and key in state.nodes[placed].pods
            assert (key in state.pending) == pod_info.pending


# The events that move priorities, with the pods they move: classes first and pods next (so PodGroups
# coming later move pods already held), then anything of these: KAI PodGroups naming classes too, and a
# Koordinator PodGroup now and then, which takes a gang over (its pods' own priorities then).
_priority_moves = st.one_of(
    _pod_events(), _priority_events(), _priority_events(),
    st.builds(lambda gang, class_name: KaiPodGroupUpserted(pod_group=KaiPodGroup(
        metadata=KaiObjectMeta(name=gang, namespace="default", uid=f"uid-kaipg-{gang}"),
        spec=KaiPodGroupSpec(min_member=1, priority_class_name=class_name))), st.sampled_from(GANGS), CLASS_NAMES),
    st.builds(lambda gang: KaiPodGroupDeleted(key=f"default/{gang}"), st.sampled_from(GANGS)),
    st.builds(lambda g: group_event(pod_group(g, min_member=1)), st.sampled_from(GANGS)),
)
priority_events_strategy = st.tuples(
    st.lists(_priority_events(), max_size=3), st.lists(_pod_events(), min_size=1, max_size=6),
    st.lists(_priority_moves, max_size=30),
).map(lambda parts: [with_seq(e, i + 1) for i, e in enumerate([*parts[0], *parts[1], *parts[2]])])


@given(priority_events_strategy)
def test_every_pod_goes_by_its_jobs_priority_or_else_its_own(events: list[Event]) -> None:
    """After every event, as if derived afresh: a member of a Volcano or KAI gang whose PodGroup names a class
    takes that class's priority (else the globalDefault class's, else 0), every other pod its own."""
    state = ClusterState()
    for event in events:
        state.apply(event)
        for key, pod_info in state.pods.items():
            own = state._derivation(pod_info.obj, key)[3]
            gang = state.gangs.get(pod_info.gang) if pod_info.gang else None
            job = state.job_priority(gang.spec) if gang is not None else None
            assert (pod_info.own_priority, pod_info.priority) == (own, own if job is None else job), key


@given(events_strategy)
def test_fold_is_deterministic(events: list[Event]) -> None:
    assert _fold(events).canonical() == _fold(events).canonical()


def _everything(state: ClusterState) -> object:
    """What `canonical` compares and more: the order of every index and vector as well, the pods' own fields,
    the topology's aggregates and the pods the fold noted as changed (`node_changes` may differ: a run of
    bindings notes each node once)."""
    return (
        state.canonical(),
        [(name, list(info.used.items()), list(info.pods), list(info.nominated)) for name, info in state.nodes.items()],
        [(key, list(keys)) for key, keys in state.pods_by_node.items()],
        list(state.pending),
        sorted(state.nominating),
        [(key, p.counted_on, p.placed_on, p.bound_node, p.assumed_node, p.bound_at, p.nominated_on)
         for key, p in state.pods.items()],
        [(domain.name, list(domain.used.items())) for domain in state.topology.domains],
        state.pod_changes.since(0),
    )


@given(logs_strategy)
def test_folding_a_log_record_by_record_gives_the_state_of_applying_its_events_one_by_one(events: list[Event]) -> None:
    """The fast fold (`fold_log`: records decoded on shared parts, runs of bindings counted at once) against
    the reference: every event applied as it is."""
    folded = ClusterState()
    with folded.batching_binds():
        folded.fold_records((seq, encode_event(event)) for seq, event in enumerate([node_event(node("n0")), *events]))
    folded.forget_record_parts()
    reference = _fold([node_event(node("n0")), *events])
    assert _everything(folded) == _everything(reference)


def test_a_run_of_bindings_is_counted_when_the_next_other_event_comes() -> None:
    state = ClusterState()
    state.apply(node_event(node("n0", gpus=8)))
    for name in ("p0", "p1"):
        state.apply(pod_event(pod(name, gpus=2)))
    with state.batching_binds():
        state.apply(PodBound(pod="default/p0", uid="", node="n0"))
        state.apply(PodBound(pod="default/p1", uid="", node="n0"))
        state.apply(NodeUpserted(node=node("n1")))  # ends the run
        assert state.nodes["n0"].used["nvidia.com/gpu"] == 4000
        assert state.nodes["n0"].pods == {"default/p0", "default/p1"} and not state.pending
