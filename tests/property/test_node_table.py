"""A snapshot's node table gives back every node exactly, whatever its labels, annotations, taints and
metadata hold, and the state restored from it is the state that was snapshotted; a table whose numbers
point nowhere is refused as a bad snapshot, naming what is wrong."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, node, node_event, pod, pod_event
from events.model import NodeUpserted
from events.objects import OVERSIZED_ANNOTATION, Node, NodeSpec, NodeStatus, ObjectMeta, Taint
from state.cluster import ClusterState, StateSnapshot, decode_state_snapshot
from state.compact import Compactor
from state.node_table import node_table, nodes_of

text = st.text(max_size=12)
label_sets = st.dictionaries(st.sampled_from(["kubernetes.io/hostname", "zone", "block", "", "ö/ß"]) | text, text,
                             max_size=5)
taints = st.lists(st.builds(Taint, key=text, value=text, effect=st.sampled_from(["NoSchedule", "NoExecute", ""])),
                  max_size=2)
allocatables = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]),
                               st.sampled_from(["8", "96", "1Ti", "lots", "1e400"]), max_size=4)

nodes = st.builds(
    lambda name, uid, version, labels, annotations, node_taints, unschedulable, allocatable, deleting, grace: Node(
        metadata=ObjectMeta(name=name, uid=uid, resource_version=version, labels=labels, annotations=annotations,
                            deletion_timestamp="2026-11-26T00:00:00Z" if deleting else None,
                            deletion_grace_period_seconds=grace if deleting else None),
        spec=NodeSpec(taints=node_taints, unschedulable=unschedulable), status=NodeStatus(allocatable=allocatable)),
    st.text(min_size=1, max_size=20), text, text, label_sets,
    st.dictionaries(st.sampled_from([OVERSIZED_ANNOTATION, "note", "x"]), text, max_size=2), taints, st.booleans(),
    allocatables, st.booleans(), st.none() | st.integers(0, 2**63 - 1),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(nodes, max_size=8, unique_by=lambda made: made.metadata.name))
def test_a_node_table_gives_back_every_node_as_it_was(made: list[Node]) -> None:
    table = node_table(made)
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(table), type=type(table))
    assert list(nodes_of(decoded, Compactor())) == made


@settings(max_examples=100, deadline=None)
@given(st.lists(nodes, max_size=6, unique_by=lambda made: made.metadata.name))
def test_a_state_of_any_nodes_restores_to_itself(made: list[Node]) -> None:
    state = ClusterState()
    for index, each in enumerate(made):
        state.apply(NodeUpserted(node=each, time=float(index)))
    if made:
        state.apply(pod_event(bound(pod("p0"), made[0].metadata.name)))
    restored = ClusterState.restore(state.snapshot())
    assert restored.canonical() == state.canonical()
    assert {name: info.obj for name, info in restored.nodes.items()} == {
        name: info.obj for name, info in state.nodes.items()}


def test_nodes_of_one_rack_share_their_strings_spec_and_status_after_a_restore() -> None:
    state = ClusterState()
    for name in ("n0", "n1"):
        state.apply(node_event(node(name, block="block-7", taints=[Taint(key="gpu", effect="NoSchedule")])))
    table = decode_state_snapshot(state.snapshot())
    assert isinstance(table, StateSnapshot)
    assert len(table.node_table.specs) == 1 and len(table.node_table.statuses) == 1
    assert table.node_table.strings.count("block-7") == 1
    restored = ClusterState.restore(state.snapshot())
    first, second = restored.nodes["n0"].obj, restored.nodes["n1"].obj
    assert first.spec is second.spec and first.status is second.status
    block_key = next(key for key in first.metadata.labels if key.endswith("block"))
    assert first.metadata.labels[block_key] is second.metadata.labels[block_key]
    assert restored.canonical() == state.canonical()


def _broken(**row: object) -> bytes:
    """A snapshot of one node (n0) whose table row has `row` instead."""
    state = ClusterState()
    state.apply(node_event(node("n0")))
    snap = decode_state_snapshot(state.snapshot())
    assert isinstance(snap, StateSnapshot)
    broken_row = msgspec.structs.replace(snap.node_table.rows[0], **row)
    return msgspec.msgpack.encode(msgspec.structs.replace(
        snap, node_table=msgspec.structs.replace(snap.node_table, rows=[broken_row])))


@pytest.mark.parametrize(("row", "says"), [
    ({"spec": 3}, "pointing past its tables"),
    ({"status": 1}, "pointing past its tables"),
    ({"labels": b"\x00\x00\x00\x00\x63\x00\x00\x00"}, "pointing past its tables"),
    ({"annotations": b"\x00\x00\x00\x00"}, "not whole pairs"),
    ({"labels": b"\x00\x00\x00"}, "not whole pairs"),
], ids=["spec", "status", "label value", "odd annotations", "short labels"])
def test_a_node_table_pointing_nowhere_is_refused_as_a_bad_snapshot(row: dict[str, object], says: str) -> None:
    assert ClusterState.restore(_broken()).nodes["n0"].obj.metadata.labels == {"kubernetes.io/hostname": "n0"}
    with pytest.raises(ValueError, match=says):
        ClusterState.restore(_broken(**row))


def test_a_node_that_fails_to_restore_is_marked_and_the_restore_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    state = ClusterState()
    for name in ("n0", "n1", "n2"):
        state.apply(node_event(node(name)))
    payload = state.snapshot()
    hold = ClusterState._hold_node

    def failing(self: ClusterState, held: Node) -> None:
        if held.metadata.name == "n1":
            raise RuntimeError("a bug in holding n1")
        hold(self, held)

    monkeypatch.setattr(ClusterState, "_hold_node", failing)
    restored = ClusterState.restore(payload)
    assert sorted(restored.nodes) == ["n0", "n2"]
    failure = restored.fold_failures[("Node", "n1")]
    assert "RuntimeError: a bug in holding n1" in failure.message
