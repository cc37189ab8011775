"""Replaying an event log: fold it back into state, prove snapshots honest, summarise what it holds.

`fold_log` is the restart path too: load the newest snapshot (not past `until`), then fold the
tail. `verify_snapshot_equivalence` folds the same log twice, once from its start and once from the
newest snapshot, and compares the canonical forms: if they differ, a snapshot lied or the fold is
not deterministic, and both are bugs worth stopping for.

A pruned log (see `events.log`, Retention) has no first record: its start is the oldest snapshot
kept (`EventLog.base_snapshot`), so "from the start" means from there, for every replay.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import msgspec

from daemon.offline.bulk import paused_gc
from events.log import EventLog, LogDamagedError
from events.model import Event
from events.objects import DEFAULT_SCHEDULER_NAME, KAI_NODE_POOL_LABEL
from state.cluster import ClusterState, UndecodableRecord

MAX_KEPT_FAILURES = 100


@dataclass(frozen=True)
class FoldResult:
    state: ClusterState
    snapshot_seq: int  # 0 when folded from the first record
    events_folded: int
    # Events whose fold raised (the state marks their objects; see `ClusterState.apply`), the first
    # `MAX_KEPT_FAILURES` of them, for the caller to log.
    failures: tuple[tuple[Event, Exception], ...] = ()


def start_of(log: EventLog, *, until: int | None = None, use_snapshot: bool = True,
             scheduler_name: str = DEFAULT_SCHEDULER_NAME,
             kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> tuple[ClusterState, int]:
    """The state a fold of `log` starts from and its seq: the newest snapshot not past `until` (with
    `use_snapshot`), else the log's start (an empty state at 0, made with `scheduler_name` and
    `kai_node_pool_label`, or a pruned log's base snapshot)."""
    at_most = log.last_seq if until is None else min(until, log.last_seq)
    found = log.latest_snapshot(at_most=at_most) if use_snapshot else None
    if found is None:
        found = log.base_snapshot(at_most=at_most)
    if found is None:
        return ClusterState(scheduler_name, kai_node_pool_label), 0
    seq, payload = found
    try:
        return ClusterState.restore(payload), seq
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as error:
        raise LogDamagedError(f"snapshot at seq {seq} in {log.directory} cannot be restored: {error}") from error


def fold_log(log: EventLog, *, until: int | None = None, use_snapshot: bool = True,
             scheduler_name: str = DEFAULT_SCHEDULER_NAME,
             kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> FoldResult:
    failures: list[tuple[Event, Exception]] = []
    with paused_gc(freeze=True):  # the folded state lives on
        start_state, snapshot_seq = start_of(log, until=until, use_snapshot=use_snapshot,
                                             scheduler_name=scheduler_name, kai_node_pool_label=kai_node_pool_label)
        with start_state.batching_binds():  # nothing reads the state until the log is folded
            try:
                folded = start_state.fold_records(log.read_raw(snapshot_seq + 1), until=until, failures=failures,
                                                  keep=MAX_KEPT_FAILURES)
            except UndecodableRecord as error:
                raise LogDamagedError(str(error)) from error
        start_state.forget_record_parts()  # the daemon folds on event by event, decoding nothing
    return FoldResult(start_state, snapshot_seq, folded, tuple(failures))


@dataclass(frozen=True)
class Verification:
    ok: bool
    snapshot_seq: int
    last_seq: int
    message: str


def verify_snapshot_equivalence(log: EventLog, *, until: int | None = None) -> Verification:
    from_snapshot = fold_log(log, until=until, use_snapshot=True)
    # From the start with the settings the daemon folded with, which its snapshot keeps.
    settings = from_snapshot.state
    from_start = fold_log(log, until=until, use_snapshot=False, scheduler_name=settings.scheduler_name,
                          kai_node_pool_label=settings.kai_node_pool_label)
    last = from_start.state.last_seq
    origin = (f"the base snapshot at seq {from_start.snapshot_seq} (older events were pruned)"
              if from_start.snapshot_seq else "the first record")
    if from_snapshot.snapshot_seq == from_start.snapshot_seq:
        return Verification(True, 0, last, f"no snapshot after {origin} at or before seq {until or log.last_seq}; "
                            f"folded {from_start.events_folded} events from {origin}")
    if from_start.state.canonical() == from_snapshot.state.canonical():
        return Verification(True, from_snapshot.snapshot_seq, last,
                            f"snapshot at seq {from_snapshot.snapshot_seq} + {from_snapshot.events_folded} tail "
                            f"events gives exactly the state of folding all {from_start.events_folded} events "
                            f"from {origin}")
    return Verification(False, from_snapshot.snapshot_seq, last,
                        f"MISMATCH: snapshot at seq {from_snapshot.snapshot_seq} + tail differs from folding "
                        f"from {origin} (up to seq {last})")


@dataclass(frozen=True)
class GangSummary:
    key: str
    min_member: int
    members: int
    bound: int
    assumed: int
    pending: int
    state: str
    reason: str


@dataclass(frozen=True)
class NodeUsage:
    name: str
    pods: int
    used: dict[str, int]
    allocatable: dict[str, int]


@dataclass(frozen=True)
class Summary:
    objects: dict[str, int]
    gangs: list[GangSummary]
    nodes: list[NodeUsage]
    problems: list[str]


def summarise(state: ClusterState) -> Summary:
    ours = [p for p in state.pods.values() if p.ours]
    objects = {
        "Node": len(state.nodes),
        "Pod": len(state.pods),
        "Pod (toposched)": len(ours),
        "Pod (toposched, pending)": len(state.pending),
        "Pod (toposched, held by scheduling gates)": sum(1 for p in ours if p.gated and not p.node_name),
        "PodGroup (scheduling.sigs.k8s.io)": len(state.pod_groups),
        "PodGroup (scheduling.volcano.sh)": len(state.volcano_pod_groups),
        "ClusterNetworkTopology": len(state.network_topologies),
        "HyperNode": len(state.hyper_nodes),
        "Topology (kueue.x-k8s.io)": len(state.kueue_topologies),
        "Topology (kai.scheduler)": len(state.kai_topologies),
        "PodGroup (scheduling.run.ai)": len(state.kai_pod_groups),
        "PriorityClass": len(state.priority_classes),
        "PersistentVolumeClaim": len(state.volumes.claims),
        "PersistentVolume": len(state.volumes.volumes),
        "StorageClass": len(state.volumes.classes),
    }
    gangs: list[GangSummary] = []
    for key in sorted(state.gangs):
        gang = state.gangs[key]
        counts: Counter[str] = Counter()
        for member in gang.members:
            pod = state.pods[member]
            counts["bound" if pod.node_name else "assumed" if pod.assumed_node else
                   "pending" if pod.pending else "other"] += 1
        min_member = gang.spec.min_member if gang.spec else 0
        if gang.spec is None:
            phase = "no PodGroup"
        elif counts["bound"] >= max(min_member, 1):
            phase = "Running" if counts["pending"] == 0 else "Running (some pending)"
        elif counts["assumed"]:
            phase = "Permit (waiting)"
        else:
            phase = "Pending"
        gangs.append(GangSummary(key, min_member, len(gang.members), counts["bound"], counts["assumed"],
                                 counts["pending"], phase, gang.last_reason))
    nodes = [NodeUsage(name, len(info.pods), dict(info.used), dict(info.allocatable))
             for name, info in sorted(state.nodes.items())]
    return Summary(objects, gangs, nodes, [str(p) for p in state.all_problems()])
