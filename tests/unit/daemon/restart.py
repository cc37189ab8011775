"""A scheduler killed mid-bind and started again on its log, with the cluster changed while it was down.

Builders for the adoption tests (`test_scheduler_adoption.py`, `tests/property/test_adoption_properties.py`).
A kill -9 leaves a prefix of the log (every record appended before the kill, with fsync always), and
the API holds what those records say it holds: `decide` runs the real loop against the in-memory
cluster and returns its whole log, `cut_after_binds` is the prefix a kill at a chosen point leaves,
and `restart` folds the prefix into a new state (as `fold_log` does), records what changed while the
scheduler was down (as the relist would), and runs a new loop to idle against the same in-memory cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from daemon.offline.simulator import InMemoryCluster, VirtualClock, World
from daemon.scheduling.journal import Journal
from daemon.scheduling.loop import Scheduler, SchedulerConfig
from events.builders import bound, pod
from events.model import BindRequested, Event, GangPending, NodeUpserted, PodAssumed, PodBound, PodUpserted
from events.objects import Node, Pod, Taint, Toleration
from placement.fit import admits, shape_of
from state.cluster import ClusterState
from state.invariants import capacity_violations

CONFIG = SchedulerConfig(retry_parked_seconds=None)
MAINTENANCE = Taint(key="maintenance", value="drain", effect="NoSchedule")


class Run:
    """One scheduler process: its journal (the log it writes), its state, its API and its loop."""

    def __init__(self, events: Iterable[Event] = (), *, time: float = 0.0) -> None:
        self.clock = VirtualClock(time)
        self.state = ClusterState()
        self.state.apply_all(events)  # what `fold_log` gives a restarted process
        self.journal = Journal(self.state, self.clock)
        self.log: list[Event] = list(events)
        self.journal.subscribe(self.log.append)
        self.world = World(self.journal)
        self.api = InMemoryCluster(self.world)
        self.scheduler = Scheduler(self.journal, self.api, config=CONFIG)
        self.started_at = len(self.log)  # log records before this process started

    def record(self, *events: Event) -> None:
        for event in events:
            self.journal.record(event)

    @property
    def since_start(self) -> list[Event]:
        return self.log[self.started_at:]

    def bound_since_start(self) -> dict[str, str]:
        return {e.pod: e.node for e in self.since_start if isinstance(e, PodBound)}


async def decide(setup: Sequence[Event]) -> list[Event]:
    """The whole log of a loop run to idle on `setup` (nothing crashes)."""
    run = Run()
    run.record(*setup)
    await run.scheduler.run_until_idle()
    return run.log


def cut_after_binds(log: Sequence[Event], binds: int) -> list[Event]:
    """What a kill leaves once the API had bound `binds` of the requested pods: the prefix ending at the
    `binds`-th record that shows one bound, its PodBound or the watch event showing it on its node,
    whichever came first (the loop records a turn's answered binds together, so the watch can come
    first). 0: right after the first BindRequested batch, nothing bound yet."""
    requested: set[str] = set()
    shown: set[str] = set()
    for index, event in enumerate(log):
        if binds == 0 and isinstance(event, BindRequested):
            end = index
            while end + 1 < len(log) and isinstance(log[end + 1], BindRequested):
                end += 1
            return list(log[:end + 1])
        if isinstance(event, BindRequested):
            requested.add(event.pod)
        key = _bound(event)[0]
        if key in requested and key not in shown:
            shown.add(key)
            if len(shown) == binds:
                return list(log[:index + 1])
    raise AssertionError(f"the log shows only {len(shown)} requested pods bound, not {binds}")


def _bound(event: Event) -> tuple[str, str]:
    """The pod `event` shows bound and its node (("", "") for none)."""
    if isinstance(event, PodBound):
        return event.pod, event.node
    if isinstance(event, PodUpserted) and event.pod.spec.node_name:
        meta = event.pod.metadata
        return f"{meta.namespace}/{meta.name}", event.pod.spec.node_name
    return "", ""


async def restart(prefix: Sequence[Event], changes: Sequence[Event] = ()) -> Run:
    """A new process on `prefix`: relist what changed while it was down, then run its loop to idle."""
    time = max((event.time for event in prefix), default=0.0) + 60.0
    run = Run(prefix, time=time)
    run.record(*changes)
    await run.scheduler.run_until_idle()
    return run


def assumed_nodes(log: Sequence[Event]) -> dict[str, str]:
    """pod -> the node it was last assumed on."""
    return {e.pod: e.node for e in log if isinstance(e, PodAssumed)}


def bound_nodes(log: Sequence[Event]) -> dict[str, str]:
    """pod -> its node, for the pods the log shows bound (by a PodBound or a watch event)."""
    return dict(shown for event in log if (shown := _bound(event))[0])


# --------------------------------------------------------------------------- what changes while it is down


def cordoned(node: Node) -> NodeUpserted:
    return NodeUpserted(node=msgspec.structs.replace(node, spec=msgspec.structs.replace(node.spec, unschedulable=True)))


def tainted(node: Node, taint: Taint = MAINTENANCE) -> NodeUpserted:
    spec = msgspec.structs.replace(node.spec, taints=[*node.spec.taints, taint])
    return NodeUpserted(node=msgspec.structs.replace(node, spec=spec))


def filler(name: str, node: str, gpus: int) -> PodUpserted:
    """A pod another scheduler bound on `node` while we were down."""
    return PodUpserted(pod=bound(pod(name, gpus=gpus, cpu="1", memory="1Gi", scheduler="default-scheduler"), node))


def tolerating(p: Pod, *tolerations: Toleration) -> Pod:
    return msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, tolerations=list(tolerations)))


# --------------------------------------------------------------------------- invariants


def over_committed(state: ClusterState) -> list[str]:
    """Nodes where bound and assumed pods ask for more than allocatable (recounted from the pods)."""
    return [f"{v.subject}: {v.detail}" for v in capacity_violations(state)]


def refused_binds(run: Run) -> list[str]:
    """Binds made since the start onto a node that did not admit the pod (cordoned, untolerated taint, ...)."""
    found = []
    for pod_key, node in sorted(run.bound_since_start().items()):
        info = run.state.pods.get(pod_key)
        node_info = run.state.nodes.get(node)
        if info is None:
            continue
        why = "node gone" if node_info is None else admits(shape_of(info), node_info)
        if why:
            found.append(f"{pod_key} on {node}: {why}")
    return found


def pending_reasons(run: Run) -> dict[str, str]:
    """Gang -> the last GangPending reason recorded since the start."""
    return {e.gang: e.reason for e in run.since_start if isinstance(e, GangPending)}
