"""The invariants a scheduler's log must keep, checked as the log is folded.

What must hold whatever the cluster does (docs/architecture.md, "Invariants worth defending"), and
where in a fold each is checked:

- **capacity**: a node is never promised more than its allocatable. Checked at every decision that
  puts a pod on a node (`PodAssumed`, `BindRequested`): afterwards, for every resource the pod asks
  for, the pods bound or assumed there (recounted from the pods, not read from the fold's own sums)
  plus, at `PodAssumed`, the nominations of priority >= the pod's held by other gangs, stay within
  allocatable. Again when the fold ends, on every node whose last change of load was a decision of
  ours (a node another scheduler or a shrinking allocatable pushed over afterwards is not ours to
  answer for).
- **missing node**: nothing is assumed on, or bound to, a node the state does not hold.
- **double bind**: a pod is bound to one node only: no `PodBound` or `BindRequested` for a pod
  already bound elsewhere, and the API never shows a pod on a node other than the one our binding
  was accepted for.
- **gang below minMember**: a gang that we started binding has minMember bound members (finished
  ones count) within its scheduleTimeoutSeconds (else the default) of the first of those bindings.
  Once it had them it is never checked again (members that finish or are deleted later are the
  job's business), nor is a gang whose members were all bound by someone else.

Each break is a `Violation` naming the event (its seq), the node, pod or gang, and the resource or
numbers. `InvariantCheck` folds events into a `ClusterState` itself (`fold`), so callers that fold
a log (`replay --verify`, the property tests) get the checks by folding through it; `check_log`
does it for a whole list of events. `capacity_violations` checks one state as it stands.

Pure: no I/O, no clock (times are the events'), no globals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from events.model import BindRequested, Event, NodeUpserted, PodAssumed, PodBound, PodUpserted
from state.cluster import ClusterState, PodInfo
from state.resources import MILLI, Resources, add_into, format_quantity, is_host_port, port_room, shown_host_port

CAPACITY = "capacity"
MISSING_NODE = "missing node"
DOUBLE_BIND = "double bind"
GANG_BELOW_MIN_MEMBER = "gang below minMember"

DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 600.0  # the loop's default (`SchedulerConfig`), when a gang sets none


class Violation(msgspec.Struct, frozen=True):
    """One invariant broken at event `seq` (0: found in a state, not at an event)."""

    seq: int
    invariant: str
    subject: str  # "node n1", "pod default/p-0", "gang default/job"
    detail: str

    def __str__(self) -> str:
        at = f"seq {self.seq}: " if self.seq else ""
        return f"{at}{self.invariant}: {self.subject}: {self.detail}"


def load_on(state: ClusterState, node: str) -> Resources:
    """What the pods bound or assumed on `node` ask for, recounted from the pods (finished and
    deleted pods hold nothing; pods on their way out still do)."""
    load: Resources = {}
    pods = state.pods
    for key in state.pods_by_node.get(node, ()):
        pod = pods.get(key)
        if pod is not None and not pod.removed and not pod.terminal:
            add_into(load, pod.requests)
    return load


def held_for_others(state: ClusterState, node: str, pod: PodInfo) -> Resources:
    """Nominations on `node` of priority >= the pod's, held by pods of other gangs (not its GangGroup)."""
    info = state.nodes.get(node)
    held: Resources = {}
    if info is None or not info.nominated:
        return held
    gang = state.gangs.get(pod.gang) if pod.gang else None
    own = set(gang.spec.gang_group) if gang is not None and gang.spec is not None else {pod.gang}
    for other in info.nominated.values():
        if (other.priority >= pod.priority and not other.counted_on and other.key != pod.key
                and (not other.gang or other.gang not in own)):
            add_into(held, other.requests)
    return held


def over_on(state: ClusterState, node: str, resources: Iterable[str] | None = None,
            extra: Resources | None = None) -> list[str]:
    """Each resource (of `resources`, default all) that `node` is asked more of than it has allocatable,
    as "nvidia.com/gpu: 16 asked of 8 allocatable"; `extra` adds capacity held by nominations."""
    info = state.nodes.get(node)
    if info is None:
        return []
    load = load_on(state, node)
    if extra:
        add_into(load, extra)
    names = sorted(load) if resources is None else sorted(set(resources))
    found = []
    for name in names:
        asked, allocatable = load.get(name, 0), port_room(info.allocatable, name)
        if asked > allocatable:
            if is_host_port(name):
                found.append(f"{shown_host_port(name)}: held by {asked // MILLI} pods")
                continue
            held = f" ({format_quantity(name, extra[name])} of it nominated)" if extra and extra.get(name) else ""
            found.append(f"{name}: {format_quantity(name, asked)} asked{held} of "
                         f"{format_quantity(name, allocatable)} allocatable")
    return found


def capacity_violations(state: ClusterState, nodes: Iterable[str] | None = None, *, seq: int = 0) -> list[Violation]:
    """Nodes (of `nodes`, default every node) whose bound and assumed pods ask for more than allocatable."""
    names = sorted(state.nodes) if nodes is None else sorted(set(nodes))
    return [Violation(seq, CAPACITY, f"node {name}", over) for name in names for over in over_on(state, name)]


class _Tracked(msgspec.Struct):
    since: float  # the first binding of a member while the gang was below minMember
    seq: int


class InvariantCheck:
    """Fold events into `state` and check the invariants at each (see the module docstring)."""

    def __init__(self, state: ClusterState, *,
                 default_schedule_timeout_seconds: float = DEFAULT_SCHEDULE_TIMEOUT_SECONDS) -> None:
        self.state = state
        self.default_timeout = default_schedule_timeout_seconds
        self.violations: list[Violation] = []
        self._short: dict[str, _Tracked] = {}  # gangs we started binding, below minMember
        self._done: set[str] = set()  # gangs that had minMember bound (or were reported)
        self._ours: dict[str, int] = {}  # node -> seq of our last decision putting a pod there
        self._theirs: dict[str, int] = {}  # node -> seq of the last load change that was not ours

    def fold(self, event: Event) -> None:
        """Check what must hold before `event`, fold it, check what must hold after."""
        state = self.state
        before: PodInfo | None = None
        allocatable: Resources | None = None
        if isinstance(event, PodAssumed | BindRequested):
            self._placing(event)
        elif isinstance(event, PodBound):
            self._bound(event)
        elif isinstance(event, PodUpserted):
            before = self._upserting(event)
        elif isinstance(event, NodeUpserted) and (node := state.nodes.get(event.node.metadata.name)) is not None:
            allocatable = node.allocatable  # the fold replaces the dict, never edits it
        counted_before = before.counted_on if before is not None else ""
        requests_before = before.requests if before is not None else None
        state.apply(event)
        if isinstance(event, PodAssumed | BindRequested):
            self._placed(event)
        elif isinstance(event, PodUpserted):
            pod = state.pods.get(_pod_key(event))
            if pod is not None and pod.counted_on and (pod.counted_on != counted_before
                                                        or pod.requests != requests_before):
                self._theirs[pod.counted_on] = event.seq  # a pod counted anew, or asking anew, not by our decision
        elif allocatable is not None:
            assert isinstance(event, NodeUpserted)
            self._allocatable_changed(event, allocatable)
        if isinstance(event, PodBound | PodUpserted) and (gang := self._gang_of(event)):
            self._count_bound(gang, event)
        if self._short:
            self._check_deadlines(event.time, event.seq)

    def fold_all(self, events: Iterable[Event]) -> list[Violation]:
        for event in events:
            self.fold(event)
        return self.violations

    def finish(self) -> list[Violation]:
        """The checks at the end of the fold: capacity where our decision was the last change of
        load, and gangs past their timeout at the last event's time. Returns every violation found."""
        state = self.state
        reported = {v.subject for v in self.violations if v.invariant == CAPACITY}
        for node, seq in sorted(self._ours.items()):
            if seq > self._theirs.get(node, 0) and f"node {node}" not in reported:
                self.violations += capacity_violations(state, [node], seq=seq)
        self._check_deadlines(state.last_time, state.last_seq)
        return self.violations

    # ------------------------------------------------------------------ decisions

    def _placing(self, event: PodAssumed | BindRequested) -> None:
        state = self.state
        what = "assumed on" if isinstance(event, PodAssumed) else "binding requested to"
        if event.node not in state.nodes:
            self._report(event.seq, MISSING_NODE, f"pod {event.pod}", f"{what} node {event.node}, which the "
                                                                     "state does not hold")
        pod = state.pods.get(event.pod)
        if pod is not None and pod.node_name and pod.node_name != event.node:
            self._report(event.seq, DOUBLE_BIND, f"pod {event.pod}",
                         f"{what} node {event.node} while bound to node {pod.node_name}")

    def _placed(self, event: PodAssumed | BindRequested) -> None:
        state = self.state
        pod = state.pods.get(event.pod)
        if pod is None or event.node not in state.nodes or pod.placed_node != event.node:
            return
        self._ours[event.node] = event.seq
        held = held_for_others(state, event.node, pod) if isinstance(event, PodAssumed) else None
        for over in over_on(state, event.node, pod.requests, held):
            self._report(event.seq, CAPACITY, f"node {event.node}", f"{over} after pod {event.pod} was "
                         f"{'assumed' if held is not None else 'bound'} there")

    def _bound(self, event: PodBound) -> None:
        pod = self.state.pods.get(event.pod)
        same_pod = pod is not None and (not event.uid or event.uid == pod.uid)
        if pod is not None and same_pod and pod.node_name and pod.node_name != event.node:
            self._report(event.seq, DOUBLE_BIND, f"pod {event.pod}",
                         f"binding to node {event.node} accepted while bound to node {pod.node_name}")
        self._ours[event.node] = event.seq

    def _upserting(self, event: PodUpserted) -> PodInfo | None:
        pod = self.state.pods.get(_pod_key(event))
        shown = event.pod.spec.node_name
        if (pod is not None and pod.bound_node and shown and shown != pod.bound_node
                and (not event.pod.metadata.uid or event.pod.metadata.uid == pod.uid)):
            self._report(event.seq, DOUBLE_BIND, f"pod {pod.key}",
                         f"the API shows it on node {shown}; our binding to node {pod.bound_node} was accepted")
        return pod

    def _allocatable_changed(self, event: NodeUpserted, old: Resources) -> None:
        name = event.node.metadata.name
        info = self.state.nodes.get(name)
        if info is not None and any(info.allocatable.get(resource, 0) < amount for resource, amount in old.items()):
            self._theirs[name] = event.seq  # it shrank: what runs there may no longer fit, through no decision

    # ------------------------------------------------------------------ gangs

    def _gang_of(self, event: PodBound | PodUpserted) -> str:
        pod = self.state.pods.get(event.pod if isinstance(event, PodBound) else _pod_key(event))
        if pod is None or not pod.gang or pod.gang in self._done:
            return ""
        return pod.gang

    def _count_bound(self, gang: str, event: PodBound | PodUpserted) -> None:
        state = self.state
        info = state.gangs.get(gang)
        if info is None or info.spec is None:
            return
        bound = _bound_members(state, info.members)
        if bound >= info.spec.min_member:
            self._done.add(gang)
            self._short.pop(gang, None)
        elif isinstance(event, PodBound) and gang not in self._short:
            self._short[gang] = _Tracked(since=event.time, seq=event.seq)

    def _check_deadlines(self, now: float, seq: int) -> None:
        state = self.state
        for gang in sorted(self._short):
            tracked = self._short[gang]
            info = state.gangs.get(gang)
            if info is None or info.spec is None:
                del self._short[gang]  # its PodGroup or every member went away: nothing left to hold to
                continue
            timeout = info.spec.schedule_timeout_seconds
            deadline = tracked.since + (timeout if timeout is not None else self.default_timeout)
            if now <= deadline:
                continue
            del self._short[gang]
            self._done.add(gang)
            bound = _bound_members(state, info.members)
            self._report(seq, GANG_BELOW_MIN_MEMBER, f"gang {gang}",
                         f"{bound} of minMember {info.spec.min_member} bound, {now - tracked.since:g}s after its "
                         f"first binding (seq {tracked.seq}); its timeout is {deadline - tracked.since:g}s")

    def _report(self, seq: int, invariant: str, subject: str, detail: str) -> None:
        self.violations.append(Violation(seq, invariant, subject, detail))


def check_log(events: Sequence[Event], state: ClusterState | None = None, *,
              default_schedule_timeout_seconds: float = DEFAULT_SCHEDULE_TIMEOUT_SECONDS) -> list[Violation]:
    """Fold `events` (onto `state`, default an empty one) and return every invariant they break."""
    check = InvariantCheck(state if state is not None else ClusterState(),
                           default_schedule_timeout_seconds=default_schedule_timeout_seconds)
    check.fold_all(events)
    return check.finish()


def _pod_key(event: PodUpserted) -> str:
    meta = event.pod.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _bound_members(state: ClusterState, members: Iterable[str]) -> int:
    pods = state.pods
    return sum(1 for key in members if (pod := pods.get(key)) is not None and pod.node_name and not pod.removed)
