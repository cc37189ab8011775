"""A snapshot's pod tables restore exactly the state a full fold gives, for pods of every shape the fold
reads (namespaces, gangs by label or annotation, priority classes present or missing, bad requests,
nominations, terminating and finished pods, evictions asked for), and the formats before the columns
(a row per pod) and before the tables still restore."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import (
    Event,
    EvictionRequested,
    NodeDeleted,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodNominated,
    PodUpserted,
    PriorityClassDeleted,
    PriorityClassUpserted,
    with_seq,
)
from events.objects import (
    GANG_MIN_AVAILABLE_ANNOTATION,
    GANG_NAME_ANNOTATION,
    SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    VOLCANO_PREEMPTABLE_ANNOTATION,
    ObjectMeta,
    PriorityClass,
)
from state.cluster import (
    SNAPSHOT_VERSION_V1,
    SNAPSHOT_VERSION_V2,
    ClusterState,
    PodRecord,
    StateSnapshot,
    StateSnapshotV1,
    StateSnapshotV2,
    decode_state_snapshot,
)
from state.node_table import nodes_of
from state.pod_table import PodDeleting, PodRow, PodRowTable, columns, pods_of

NODES = ["n0", "n1", "n2"]
NAMES = [f"p{i}" for i in range(8)]


def _shaped_pod(name: str, namespace: str, gpus: int, node_name: str, phase: str, gang: str | None,
                annotation_gang: bool, priority_class: str, scheduler: str, cpu: str, preemptable: str | None,
                nominated: str, deleting: bool, gated: bool = False) -> Event:
    annotations = {GANG_NAME_ANNOTATION: "ag", GANG_MIN_AVAILABLE_ANNOTATION: "2"} if annotation_gang else {}
    labels = {VOLCANO_PREEMPTABLE_ANNOTATION: preemptable} if preemptable is not None else {}
    made = pod(name, namespace=namespace, gpus=gpus, gang=gang, priority_class=priority_class, scheduler=scheduler,
               cpu=cpu, phase=phase, labels=labels, annotations=annotations,
               gates=("example.com/quota",) if gated and not node_name else ())
    if node_name:
        made = bound(made, node_name, phase)
    if nominated:
        made = msgspec.structs.replace(made, status=msgspec.structs.replace(made.status, nominated_node_name=nominated))
    if deleting:
        made = msgspec.structs.replace(made, metadata=msgspec.structs.replace(
            made.metadata, deletion_timestamp="2026-11-25T00:00:00Z"))
    return pod_event(made, time=1.0)


pod_events = st.builds(
    _shaped_pod, st.sampled_from(NAMES), st.sampled_from(["default", "ml"]), st.integers(0, 4),
    st.sampled_from(["", *NODES, "gone"]), st.sampled_from(["Pending", "Running", "Succeeded"]),
    st.sampled_from([None, "g0", "g1"]), st.booleans(), st.sampled_from(["", "high", "missing"]),
    st.sampled_from(["toposched", "default-scheduler"]), st.sampled_from(["8", "8", "lots"]),
    st.sampled_from([None, None, "false", "maybe"]), st.sampled_from(["", "", "n1"]), st.booleans(), st.booleans(),
)

decisions = st.one_of(
    st.builds(lambda k, n: PodAssumed(pod=k, uid="", node=n), st.sampled_from([f"default/{p}" for p in NAMES]),
              st.sampled_from(NODES)),
    st.builds(lambda k, n: PodBound(pod=k, uid="", node=n), st.sampled_from([f"ml/{p}" for p in NAMES]),
              st.sampled_from(NODES)),
    st.builds(lambda k, n: PodNominated(pod=k, uid="", node=n, priority=5),
              st.sampled_from([f"default/{p}" for p in NAMES]), st.sampled_from(NODES)),
    st.builds(lambda k: PodDeleted(key=k, uid=""), st.sampled_from([f"default/{p}" for p in NAMES])),
    st.builds(lambda k: EvictionRequested(pod=k, uid="", preemptor="ml/big"),
              st.sampled_from([f"{namespace}/{p}" for namespace in ("default", "ml") for p in NAMES])),
)

others = st.one_of(
    st.builds(lambda n, g: node_event(node(n, gpus=g)), st.sampled_from(NODES), st.integers(0, 16)),
    st.builds(lambda n: NodeDeleted(name=n), st.sampled_from(NODES)),
    st.builds(lambda g, ns: group_event(pod_group(g, namespace=ns, min_member=2)), st.sampled_from(["g0", "g1"]),
              st.sampled_from(["default", "ml"])),
    st.builds(lambda v, d: PriorityClassUpserted(priority_class=PriorityClass(
        metadata=ObjectMeta(name="high"), value=v, global_default=d)), st.integers(0, 100), st.booleans()),
    st.just(PriorityClassDeleted(name="high")),
)

histories = st.lists(st.one_of(pod_events, pod_events, decisions, others), max_size=50).map(
    lambda events: [with_seq(event, index + 1) for index, event in enumerate(events)])


def _fold(events: list[Event]) -> ClusterState:
    state = ClusterState()
    state.apply_all(events)
    return state


def _older(payload: bytes, version: int) -> tuple[StateSnapshot, dict[str, Any]]:
    """The snapshot, and the fields an older format holds alike: its objects, with the nodes whole."""
    snap = decode_state_snapshot(payload)
    assert isinstance(snap, StateSnapshot)
    fields = {name: getattr(snap, name) for name in snap.__struct_fields__ if name not in ("pod_table", "node_table")}
    fields["version"] = version
    fields["nodes"] = list(nodes_of(snap.node_table, ClusterState()._compactor))
    return snap, fields


def as_v1(payload: bytes) -> bytes:
    """The same snapshot in the format before the pod tables (version 1)."""
    snap, fields = _older(payload, SNAPSHOT_VERSION_V1)
    records = [PodRecord(*entry) for entry in pods_of(snap.pod_table, ClusterState()._compactor)]
    return msgspec.msgpack.encode(StateSnapshotV1(pods=records, **fields))


def as_v2(payload: bytes) -> bytes:
    """The same snapshot in the format with a row per pod (version 2)."""
    snap, fields = _older(payload, SNAPSHOT_VERSION_V2)
    table = snap.pod_table
    rows = [PodRow(name, uid, version, head, spec, status, first_seen, bound_at, number in table.evicting, node,
                   timestamp, grace)
            for number, (name, uid, version, head, spec, status, first_seen, bound_at, node, timestamp, grace, _)
            in enumerate(columns(table))]
    return msgspec.msgpack.encode(StateSnapshotV2(
        pod_table=PodRowTable(table.heads, table.specs, table.statuses, rows), **fields))


def every_format(payload: bytes) -> tuple[bytes, bytes, bytes]:
    return payload, as_v2(payload), as_v1(payload)


@settings(max_examples=150, deadline=None)
@given(histories, st.integers(0, 50))
def test_restoring_the_tables_then_the_tail_equals_the_full_fold(events: list[Event], cut: int) -> None:
    cut = min(cut, len(events))
    head = _fold(events[:cut])
    full = _fold(events).canonical()
    for payload in every_format(head.snapshot()):
        resumed = ClusterState.restore(payload)
        resumed.apply_all(events[cut:])
        assert resumed.canonical() == full


def _labelled(event: Event, second_gang: str | None) -> Event:
    """`event`'s pod, also naming `second_gang` with the scheduler-plugins label (None: not)."""
    if second_gang is None:
        return event
    assert isinstance(event, PodUpserted)
    meta = event.pod.metadata
    labels = {**meta.labels, SCHEDULER_PLUGINS_POD_GROUP_LABEL: second_gang}
    return msgspec.structs.replace(event, pod=msgspec.structs.replace(
        event.pod, metadata=msgspec.structs.replace(meta, labels=labels)))


# Pods of a few specs under many heads (one spec, a label set per gang, as a cluster's pods mostly are): a
# restore derives what pods of one head and spec share once, and each pod must still get its own gang, and
# its own problems where its labels say whether it may be preempted or name two gangs.
alike_pods = st.builds(
    _labelled,
    st.builds(_shaped_pod, st.sampled_from(NAMES), st.sampled_from(["default", "ml"]), st.just(1),
              st.sampled_from(["", "n0"]), st.just("Pending"), st.sampled_from([None, "g0", "g1", "g2", "ag"]),
              st.booleans(), st.sampled_from(["", "", "", "missing"]), st.just("toposched"), st.just("8"),
              st.sampled_from([None, None, None, "false", "maybe"]), st.just(""), st.just(False), st.booleans()),
    st.sampled_from([None, None, None, "g0", "g1"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(alike_pods, min_size=2, max_size=16))
def test_pods_alike_but_for_their_labels_restore_as_the_fold_derives_them(made: list[Event]) -> None:
    events = [with_seq(node_event(node("n0", gpus=16)), 1),
              *(with_seq(event, index + 2) for index, event in enumerate(made))]
    state = _fold(events)
    for payload in every_format(state.snapshot()):
        assert ClusterState.restore(payload).canonical() == state.canonical()


def test_pods_whose_labels_name_two_gangs_or_doubt_their_preemption_keep_their_problems_after_a_restore() -> None:
    plain = _shaped_pod("p0", "ml", 1, "", "Pending", "g0", False, "", "toposched", "8", None, "", False)
    two_gangs = _labelled(_shaped_pod("p1", "ml", 1, "", "Pending", "g0", False, "", "toposched", "8", None, "",
                                      False), "g1")
    unsure = _shaped_pod("p2", "ml", 1, "", "Pending", "g2", False, "", "toposched", "8", "maybe", "", False)
    state = _fold([with_seq(event, index + 1) for index, event in enumerate([plain, two_gangs, unsure])])
    restored = ClusterState.restore(state.snapshot())
    assert restored.canonical() == state.canonical()
    assert [problem.key for problem in restored.all_problems()] == ["ml/p1", "ml/p2"]


def test_pods_of_one_shape_share_their_parts_after_a_restore() -> None:
    state = ClusterState()
    state.apply(node_event(node("n0")))
    for index in range(3):
        state.apply(pod_event(bound(pod(f"p{index}", gang="g"), "n0")))
    restored = ClusterState.restore(state.snapshot())
    first, second = restored.pods["default/p0"].obj, restored.pods["default/p1"].obj
    assert first.spec is second.spec and first.metadata.labels is second.metadata.labels
    assert restored.pods["default/p0"].requests is restored.pods["default/p2"].requests
    assert restored.canonical() == state.canonical()


def test_a_snapshot_of_an_unknown_version_is_refused_by_name() -> None:
    payload = msgspec.msgpack.encode({"version": 99, "scheduler_name": "toposched"})
    with pytest.raises(ValueError, match="snapshot version 99"):
        ClusterState.restore(payload)


def test_a_snapshot_is_read_by_its_version_wherever_its_map_holds_it() -> None:
    state = ClusterState()
    state.apply(node_event(node("n0")))
    state.apply(pod_event(bound(pod("p0", gang="g"), "n0")))
    for payload in every_format(state.snapshot()):
        fields = msgspec.msgpack.decode(payload)
        version = fields.pop("version")
        moved = msgspec.msgpack.encode({**fields, "version": version})  # not the first entry, as written here
        assert ClusterState.restore(moved).canonical() == state.canonical()
    for unknown in ({"scheduler_name": "toposched", "version": 99}, {"version": 300, "scheduler_name": "toposched"},
                    {"version": -1}):
        with pytest.raises(ValueError, match=f"snapshot version {unknown['version']} "):
            ClusterState.restore(msgspec.msgpack.encode(unknown))


def _broken(**columns: Any) -> bytes:
    """A snapshot of one pod (default/p0, bound by us to n0) whose pod table has `columns` instead."""
    state = ClusterState()
    state.apply(pod_event(pod("p0")))
    state.apply(PodBound(pod="default/p0", uid="", node="n0"))
    snap = decode_state_snapshot(state.snapshot())
    assert isinstance(snap, StateSnapshot)
    return msgspec.msgpack.encode(msgspec.structs.replace(
        snap, pod_table=msgspec.structs.replace(snap.pod_table, **columns)))


@pytest.mark.parametrize("columns", [
    {"spec": b"\x05\x00\x00\x00"},
    {"head": b"\x01\x00\x00\x00"},
    {"bound_node": b"\x07\x00\x00\x00"},
    {"evicting": [1]},
    {"deleting": [PodDeleting(3, "2026-11-26T00:00:00Z")]},
], ids=["spec", "head", "bound node", "evicting", "deleting"])
def test_a_pod_table_number_pointing_past_its_tables_is_refused_as_a_bad_snapshot(columns: dict[str, Any]) -> None:
    assert ClusterState.restore(_broken()).pods["default/p0"].bound_node == "n0"
    with pytest.raises(ValueError, match="pointing past its tables"):
        ClusterState.restore(_broken(**columns))


@pytest.mark.parametrize("columns", [
    {"spec": b"\x00\x00\x00"},
    {"first_seen": b""},
    {"bound_at": b"\x00" * 16},
    {"uids": []},
], ids=["spec", "first seen", "bound at", "uids"])
def test_a_pod_table_with_columns_of_unequal_lengths_is_refused_as_a_bad_snapshot(columns: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="snapshot's pod"):
        ClusterState.restore(_broken(**columns))


def test_what_the_scheduler_recorded_of_each_pod_survives_a_restore_in_every_format() -> None:
    state = ClusterState()
    state.apply(node_event(node("n0")))
    for name in ("p0", "p1", "p2"):
        state.apply(pod_event(pod(name), time=2.0))
    state.apply(PodBound(pod="default/p1", uid="", node="n0", time=3.5))
    state.apply(EvictionRequested(pod="default/p2", uid="", preemptor="ml/big"))
    for payload in every_format(state.snapshot()):
        restored = ClusterState.restore(payload)
        assert restored.canonical() == state.canonical()
        p0, p1, p2 = (restored.pods[f"default/{name}"] for name in ("p0", "p1", "p2"))
        assert (p0.bound_node, p0.bound_at, p0.eviction_requested) == ("", None, False)
        assert (p1.bound_node, p1.bound_at, p1.first_seen) == ("n0", 3.5, 2.0)
        assert p2.eviction_requested and p2.pending
