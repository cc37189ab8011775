"""What preemption keeps between attempts always says what a fresh count says: the victim index
(`preemption/victim_index.py`) what a scan (`collect`) says, the room model's kept node models
(`preemption/room.py`, `NodeModels`) what modelling every node afresh says, and plans made with
them are the plans made without them.

A small cluster goes through random events: pods (lone or of two gangs or of a KAI PodGroup, of several
priorities, some marked not preemptable, some labelled into a KAI queue, some finished or being deleted)
created, re-created, bound, assumed, forgotten, asked to leave and deleted; PodGroups re-sized or marked
not preemptable; a priority class re-valued (across KAI's non-preemptible line of 100, which the KAI
PodGroup's priorityClassName names); nodes deleted and re-added. After every event the index, carried over from the
previous step, must give for several preemptors (priorities, own gangs, pods of their own in other
gangs, a priority rule or any other rule) exactly the candidates `collect` gives: units in order with
their pods, protected and leaving pods, and the units and pods listed per node; and a room model
for a preemptor of one or two pod shapes, built with the kept models, the same figures as one built
with nothing kept.
"""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, group_event, kai_pod_group, node, node_event, pod, pod_event, pod_group
from events.ingest import kind_of, upsert_event
from events.model import (
    Event,
    EvictionRequested,
    KaiPodGroupUpserted,
    NodeDeleted,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PriorityClassUpserted,
    with_seq,
)
from events.objects import KAI_POD_GROUP_ANNOTATION, KAI_QUEUE_LABEL, ObjectMeta, PriorityClass, SchedulingGroup
from placement import Unschedulable, plan_gang
from placement.fit import shape_of
from preemption import plan_preemption
from preemption.room import Room
from preemption.victim_index import victim_index
from preemption.victims import Candidates, VictimRule, VictimUnit, collect
from state.cluster import ClusterState, PodInfo

NODES = [f"n{spine}{block}{i}" for spine in range(2) for block in range(1) for i in range(2)]
PODS = [f"p{i}" for i in range(8)]
GANGS = ["g0", "g1"]
# Kubernetes PodGroups of a 1.37 CompositePodGroup hierarchy ("root"), disrupted whole or PodGroup by PodGroup
LEAVES = ["c0", "c1"]
HOME = {name: ["", "", *GANGS * 2, *LEAVES][i] for i, name in enumerate(PODS)}  # the gang a pod is mostly of
NOT_PREEMPTABLE = {"volcano.sh/preemptable": "false"}
KAI_GANG = "k0"  # a KAI PodGroup of priority class `pc`: non-preemptible while `pc` is valued 100 or more


def _node(name: str) -> Event:
    return node_event(node(name, spine=f"s{name[1]}", block=f"s{name[1]}b{name[2]}"))


def _pod(name: str, moved: str, priority: int, gpus: int, where: str, flavour: str, uid: int) -> Event:
    gang = HOME[name] if moved == "home" else moved
    kept, deleting = flavour == "kept", flavour == "deleting"
    phase = "Succeeded" if flavour == "done" else "Running"
    annotations = dict(NOT_PREEMPTABLE) if kept else {}
    if gang == KAI_GANG:
        annotations[KAI_POD_GROUP_ANNOTATION] = gang
    obj = pod(name, gang=gang if gang and gang not in (KAI_GANG, *LEAVES) else None, gpus=gpus,
              uid=f"uid-{name}-{uid}", priority=None if priority < 0 else priority,
              priority_class="pc" if priority < 0 else "", annotations=annotations,
              labels={KAI_QUEUE_LABEL: "q"} if flavour == "kai" else None)
    if gang in LEAVES:
        obj = msgspec.structs.replace(obj, spec=msgspec.structs.replace(
            obj.spec, scheduling_group=SchedulingGroup(pod_group_name=gang)))
    if where:
        obj = bound(obj, where, phase=phase)
    if deleting:
        obj = msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata,
                                                                            deletion_timestamp="2024-01-01T00:00:00Z"))
    return pod_event(obj, time=float(uid))


def _decision(kind: str, name: str, where: str, uid: int) -> Event:
    key, pod_uid = f"default/{name}", f"uid-{name}-{uid}"
    if kind == "assume":
        return PodAssumed(pod=key, uid=pod_uid, node=where)
    if kind == "bind":
        return PodBound(pod=key, uid=pod_uid, node=where)
    if kind == "forget":
        return PodForgotten(pod=key, uid=pod_uid)
    if kind == "evict":
        return EvictionRequested(pod=key, uid=pod_uid, preemptor="default/pre")
    return PodDeleted(key=key, uid=pod_uid)


def _group(name: str, min_member: int, kept: bool) -> Event:
    return group_event(pod_group(name, min_member=min_member, annotations=NOT_PREEMPTABLE if kept else None))


def _composite(disruption: str) -> Event:
    info = kind_of("scheduling.k8s.io/v1alpha3", "CompositePodGroup")
    assert info is not None
    return upsert_event(info, {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
                               "metadata": {"name": "root", "namespace": "default", "uid": "uid-root"},
                               "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}},
                                        "workloadRef": {"workloadName": "w", "templateName": "root"},
                                        "disruptionMode": {disruption: {}}}})


def _leaf(name: str, min_count: int) -> Event:
    info = kind_of("scheduling.k8s.io/v1beta1", "PodGroup")
    assert info is not None
    return upsert_event(info, {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                               "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                               "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                                        "parentCompositePodGroupName": "root",
                                        "workloadRef": {"workloadName": "w", "templateName": name}}})


def _priority_class(value: int) -> Event:
    return PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name="pc"), value=value))


UIDS = st.integers(0, 2)
POD_EVENTS = st.builds(_pod, st.sampled_from(PODS), st.sampled_from(["home"] * 4 + ["", *GANGS, KAI_GANG, *LEAVES]),
                       st.sampled_from([-1, 1, 5, 10, 100, 150]), st.sampled_from([1, 2, 4, 8]),
                       st.sampled_from(["", *NODES, *NODES]),
                       st.sampled_from(["plain", "plain", "plain", "kept", "kai", "deleting", "done"]), UIDS)
# Every node, the PodGroups, and every pod running (two per node; half of priority class `pc`, not
# there yet; p0, of no gang, labelled into a KAI queue) before the random events.
START = [*(_node(name) for name in NODES), *(_group(gang, 1, False) for gang in GANGS), _composite("all"),
         *(_leaf(name, 1) for name in LEAVES),
         KaiPodGroupUpserted(pod_group=kai_pod_group(KAI_GANG, priority_class_name="pc")),
         *(_pod(name, "home", -1 if i % 2 or i == 0 else 1, 2, NODES[i % len(NODES)], "kai" if i == 0 else "plain", 0)
           for i, name in enumerate(PODS))]
events_strategy = st.lists(
    st.one_of(
        POD_EVENTS, POD_EVENTS, POD_EVENTS,
        st.builds(_decision, st.sampled_from(["assume", "bind", "forget", "evict", "delete"]), st.sampled_from(PODS),
                  st.sampled_from(NODES), UIDS),
        st.builds(_group, st.sampled_from(GANGS), st.integers(1, 3), st.booleans()),
        st.builds(_priority_class, st.sampled_from([1, 5, 10, 100, 150])),
        st.builds(_composite, st.sampled_from(["all", "single"])),
        st.builds(_leaf, st.sampled_from(LEAVES), st.integers(1, 2)),
        st.builds(lambda name: NodeDeleted(name=name), st.sampled_from(NODES)),
        st.builds(_node, st.sampled_from(NODES)),
    ),
    min_size=1, max_size=40,
).map(lambda evs: [with_seq(e, i + 1) for i, e in enumerate([*START, *evs])])


class Preemptor(msgspec.Struct, frozen=True):
    priority: int
    own_gangs: frozenset[str]
    own_pods: frozenset[str]
    rule: int  # 0: the priority rule (`below`), 1: the same as any rule, 2: another rule, 3: no rule


preemptors = st.lists(
    st.builds(Preemptor, st.sampled_from([1, 5, 10, 100, 1000]),
              st.frozensets(st.sampled_from(GANGS), max_size=1).map(lambda gs: frozenset(f"default/{g}" for g in gs)),
              st.frozensets(st.sampled_from(PODS), max_size=2).map(lambda ps: frozenset(f"default/{p}" for p in ps)),
              st.integers(0, 3)),
    min_size=1, max_size=3)


def _eligible(p: Preemptor) -> tuple[Callable[[PodInfo], bool] | None, int | None]:
    if p.rule == 0:
        return VictimRule.lower_priority(p.priority).eligible, p.priority
    if p.rule == 1:
        return VictimRule.lower_priority(p.priority).eligible, None
    if p.rule == 2:
        return (lambda pod: pod.priority < p.priority and not pod.key.endswith(("1", "4"))), None
    return None, None


def _listed(c: Candidates) -> object:
    """Units and their pods per node by the definition: each unit under every node a pod of it is counted
    on, in unit order; the pods there in unit order, then pod order."""
    units_on: dict[str, list[VictimUnit]] = {}
    pods_on: dict[str, list[str]] = {}
    for unit in c.units:
        for member in unit.pods:
            listed = units_on.setdefault(member.counted_on, [])
            if unit not in listed:
                listed.append(unit)
            keys = pods_on.setdefault(member.counted_on, [])
            if member.key not in keys:
                keys.append(member.key)
    return list(units_on.items()), list(pods_on.items())


def _view(c: Candidates) -> object:
    return (
        [(u.job, u.kind, [pod.key for pod in u.pods], u.broken, u.priority, u.started_at, u.index) for u in c.units],
        c.protected, c.leaving, sorted((node, sorted(freed.items())) for node, freed in c.leaving_on.items()),
        [(node, [u.index for u in units]) for node, units in c.units_on.items()],
        [(node, list(pods)) for node, pods in c.pods_on.items()],
    )


@settings(max_examples=150, deadline=None)
@given(events_strategy, preemptors)
def test_the_kept_index_gives_what_a_fresh_scan_gives_after_any_events(events: list[Event],
                                                                         asks: list[Preemptor]) -> None:
    state = ClusterState()
    for event in events:
        state.apply(event)
        for p in asks:
            eligible, below = _eligible(p)
            kept = victim_index(state).candidates(p.priority, p.own_gangs, p.own_pods, eligible, below)
            fresh = collect(state, p.priority, p.own_gangs, p.own_pods, eligible)
            assert _view(kept) == _view(fresh), event
            assert _listed(kept) == (list(kept.units_on.items()), [(n, list(pods)) for n, pods in kept.pods_on.items()])


def _plans(events: list[Event], fresh: bool) -> list[str]:
    """Every step's preemption plan for the gang `pre` (its pods pending), the index kept or not."""
    state = ClusterState()
    out: list[str] = []
    pre = [_group("pre", 3, False), *(pod_event(pod(f"pre-{i}", gang="pre", priority=10, gpus=8)) for i in range(3))]
    for event in [*pre, *events]:
        state.apply(event)
        failure = plan_gang(state, "default/pre")
        if isinstance(failure, Unschedulable):
            if fresh:
                state.reader_caches.clear()  # nothing kept: every table made afresh
                with mock.patch("preemption.planner.victim_index", _Scan):
                    result = plan_preemption(state, "default/pre", failure)
            else:
                result = plan_preemption(state, "default/pre", failure)
            out.append(repr(result))
    return out


class _Scan:
    """Stands in for the kept index: every answer a fresh scan."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def candidates(self, priority: int, own_gangs: frozenset[str], own_pods: frozenset[str],
                   eligible: Callable[[PodInfo], bool] | None = None, below: int | None = None) -> Candidates:
        return collect(self.state, priority, own_gangs, own_pods, eligible)


@settings(max_examples=60, deadline=None)
@given(events_strategy)
def test_plans_with_the_kept_index_are_the_plans_without_it(events: list[Event]) -> None:
    assert _plans(events, fresh=False) == _plans(events, fresh=True)


def _room(room: Room) -> object:
    return (room.tiers, room.base_free, room.base_slots, room.admitted, room.domain_base, room.domain_tiers,
            room.domain_max)


@settings(max_examples=100, deadline=None)
@given(events_strategy, st.sampled_from([1, 5, 10, 100]), st.sampled_from([(8,), (4,), (8, 2)]))
def test_a_room_model_with_kept_node_models_is_the_one_made_afresh(events: list[Event], priority: int,
                                                                    sizes: tuple[int, ...]) -> None:
    state = ClusterState()
    pre = [pod_event(pod(f"pre-{i}", gang="pre", priority=priority, gpus=gpus)) for i, gpus in enumerate(sizes)]
    own = frozenset({"default/pre"})
    pods = frozenset(f"default/pre-{i}" for i in range(len(sizes)))
    for event in [*pre, *events]:
        state.apply(event)
        shapes = sorted({shape_of(info).key: shape_of(info) for key in pods if (info := state.pods.get(key))}.items())
        if not shapes:
            continue
        candidates = victim_index(state).candidates(priority, own, pods, below=priority)  # units kept alike
        kept = Room(state, [shape for _, shape in shapes], own, candidates)
        caches, state.reader_caches = state.reader_caches, {}  # nothing kept: every table made afresh
        fresh = Room(state, [shape for _, shape in shapes], own, candidates)
        state.reader_caches = caches
        assert _room(kept) == _room(fresh)
