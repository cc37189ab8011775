"""Properties of a restart: killed at any record of its log, with the cluster changed while it was down,
the scheduler started again on that log never over-commits a node, never binds onto a node that does
not admit the pod, keeps every gang all-or-nothing (a gang bound in part before the kill either
reaches minMember or gets no more binds, and says why it waits; under Koordinator's once-satisfied
match policy a gang that passed Permit before the kill places its other members as they fit), leaves
no pod assumed, and keeps a MustGather gang that binds more in one block, even when nodes moved to
other blocks while it was down.

The loop runs against the in-memory cluster; the crash is a prefix of its log (`tests/unit/daemon/restart.py`).
"""

from __future__ import annotations

import anyio
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from events.builders import group_event, node, node_event, pod, pod_event, pod_group
from events.model import Event, NodeDeleted
from events.objects import GANG_MATCH_POLICY_ANNOTATION, Toleration
from state.cluster import ClusterState
from state.gangs import ONCE_SATISFIED, WAITING_AND_RUNNING
from state.invariants import check_log
from tests.unit.daemon.restart import (
    cordoned,
    decide,
    filler,
    over_committed,
    refused_binds,
    restart,
    tainted,
    tolerating,
)

BLOCKS = 3
PER_BLOCK = 3
GPUS = 8
GATHERS: list[list[dict[str, object]] | None] = [
    None,
    [{"layer": "BlockLayer", "strategy": "MustGather"}],
    [{"layer": "BlockLayer", "strategy": "PreferGather"}],
]
CHANGES = ("cordon", "taint", "fill", "fill-part", "delete", "relabel")
BLOCK_LABEL = "network.topology.nvidia.com/block"


class Gang(msgspec.Struct, frozen=True):
    size: int
    min_member: int
    gpus: int
    priority: int
    gather: int
    tolerant: bool  # tolerates the maintenance taint
    once_satisfied: bool = False  # Koordinator's default match policy, else waiting-and-running


class Change(msgspec.Struct, frozen=True):
    node: int
    kind: str


class Crash(msgspec.Struct, frozen=True):
    gangs: list[Gang]
    cut: float  # where in the decisions the kill falls: 0 = before the first, 1 = after the last
    changes: list[Change]


@st.composite
def crashes(draw: st.DrawFn) -> Crash:
    gangs = draw(st.lists(st.builds(
        lambda size, short, gpus, priority, gather, tolerant, once: Gang(size, max(1, size - short), gpus, priority,
                                                                         gather, tolerant, once),
        st.integers(1, 6), st.integers(0, 2), st.sampled_from([2, 4, 8]), st.sampled_from([1, 10, 100]),
        st.integers(0, len(GATHERS) - 1), st.booleans(), st.booleans()), min_size=1, max_size=3))
    changes = draw(st.lists(st.builds(Change, st.integers(0, BLOCKS * PER_BLOCK - 1), st.sampled_from(CHANGES)),
                            max_size=6, unique_by=lambda c: c.node))
    return Crash(gangs=gangs, cut=draw(st.floats(0.0, 1.0)), changes=changes)


def nodes() -> list[Event]:
    return [node_event(node(f"n{i}", gpus=GPUS, block=f"b{i // PER_BLOCK}", spine="s0"))
            for i in range(BLOCKS * PER_BLOCK)]


def setup_of(crash: Crash) -> list[Event]:
    events = nodes()
    for index, gang in enumerate(crash.gangs):
        name = f"g{index}"
        policy = ONCE_SATISFIED if gang.once_satisfied else WAITING_AND_RUNNING
        events.append(group_event(pod_group(name, min_member=gang.min_member, gather=GATHERS[gang.gather],
                                            annotations={GANG_MATCH_POLICY_ANNOTATION: policy})))
        for member in range(gang.size):
            made = pod(f"{name}-{member}", gang=name, gpus=gang.gpus, priority=gang.priority)
            if gang.tolerant:
                made = tolerating(made, Toleration(key="maintenance", operator="Exists"))
            events.append(pod_event(made))
    return events


def changes_of(crash: Crash, prefix: list[Event]) -> list[Event]:
    """What an operator and another scheduler did while it was down (fills sized to the bound pods only)."""
    state = ClusterState()
    state.apply_all(prefix)
    result: list[Event] = []
    for change in crash.changes:
        name = f"n{change.node}"
        info = state.nodes[name]
        if change.kind == "cordon":
            result.append(cordoned(info.obj))
        elif change.kind == "taint":
            result.append(tainted(info.obj))
        elif change.kind == "delete":
            result.append(NodeDeleted(name=name))
        elif change.kind == "relabel":  # moved to the next block
            result.append(node_event(node(name, gpus=GPUS, block=f"b{(change.node // PER_BLOCK + 1) % BLOCKS}",
                                          spine="s0")))
        else:
            bound_gpus = sum(p.requests.get("nvidia.com/gpu", 0) for p in state.pods.values()
                             if p.node_name == name and not p.terminal) // 1000
            free = GPUS - bound_gpus
            gpus = free if change.kind == "fill" else free // 2
            if gpus > 0:
                result.append(filler(f"other-{name}", name, gpus))
    return result


@given(crashes())
def test_a_restart_after_a_kill_anywhere_keeps_capacity_admission_and_all_or_nothing(crash: Crash) -> None:
    anyio.run(_check, crash)


async def _check(crash: Crash) -> None:
    setup = setup_of(crash)
    log = await decide(setup)
    cut = len(setup) + round(crash.cut * (len(log) - len(setup)))
    prefix = log[:cut]
    before = ClusterState()
    before.apply_all(prefix)
    run = await restart(prefix, changes_of(crash, prefix))
    state = run.state

    assert over_committed(state) == []
    assert [str(v) for v in check_log(run.log)] == []  # at every decision of both processes, and at the end
    assert refused_binds(run) == []
    stuck = [key for key, p in state.pods.items() if p.assumed_node and not p.node_name]
    assert stuck == [], f"assumed pods neither bound nor released: {stuck}"
    for index, gang in enumerate(crash.gangs):
        key = f"default/g{index}"
        members = [f"default/g{index}-{m}" for m in range(gang.size)]
        had = sum(1 for m in members if before.pods[m].node_name)
        has = sum(1 for m in members if state.pods[m].node_name)
        # once-satisfied: a gang that passed Permit once (a member is bound) places the rest as they fit.
        if has < gang.min_member and not (gang.once_satisfied and had > 0):
            assert has == had, f"{key}: {had} bound before the kill, {has} after, minMember {gang.min_member}"
            assert state.gangs[key].last_reason, f"{key} waits below minMember without a reason"
        if gang.gather == 1 and has > had:  # MustGather at BlockLayer: what it bound since sits in one block
            blocks = {state.nodes[state.pods[m].node_name].labels[BLOCK_LABEL] for m in members
                      if state.pods[m].node_name in state.nodes}
            assert len(blocks) == 1, f"{key}: MustGather BlockLayer gang spans blocks {sorted(blocks)}"
