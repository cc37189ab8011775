"""The offerslot table's bounds: many pod shapes, and a change record that forgot what the table had not read."""

from __future__ import annotations

import pytest

from events.builders import pod, pod_event
from placement import plan_gang
from placement.fit import Capacity, admits, shape_of
from placement.gather import Solver
from placement.slots import CACHE_KEY, MAX_SHAPES, SlotTable
from state.cluster import ClusterState
from state.node_changes import NodeChanges
from tests.unit.placement.builders import fabric, gang, occupy, planned, refused


def _table(state: ClusterState) -> SlotTable:
    table = state.reader_caches[CACHE_KEY]
    assert isinstance(table, SlotTable)
    return table


def test_a_cluster_of_many_pod_shapes_keeps_only_the_newest_and_counts_each_right() -> None:
    state = fabric()
    occupy(state, "n-s0b0a0-0", 3)
    probes = ClusterState()
    for cpu in range(1, MAX_SHAPES + 20):
        probes.apply(pod_event(pod(f"p{cpu}", gpus=1, cpu=str(cpu))))
    solver = Solver(state, Capacity(state))
    for info in probes.pods.values():
        shape = shape_of(info)
        for name, node in state.nodes.items():
            expected = 0 if admits(shape, node) else solver.capacity.slots(shape, node)
            assert solver.node_slots(shape, name) == expected
    assert len(_table(state).shapes) == MAX_SHAPES


def test_a_plan_after_the_change_record_forgot_unread_changes_sees_the_cluster_as_it_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(NodeChanges, "LIMIT", 2)
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    gang(state, "g", 2)
    planned(plan_gang(state, "default/g"))  # the table now holds both nodes with room
    occupy(state, "n-s0b0a0-0", 8)  # more changes than the record keeps
    occupy(state, "n-s0b0a0-1", 4)
    occupy(state, "n-s0b0a0-1", 2)
    result = refused(plan_gang(state, "default/g"))
    assert result.fit == 0 and "Insufficient nvidia.com/gpu" in result.reason
