"""The scheduler loop, written once for the daemon and the simulator (Koordinator's FirstPod/NextPod).

What is decided at each point below is decided by the pure decision step
(`daemon/scheduling/decisions.py`), which `replay --verify` runs too; this module chooses which unit
is tried when (the queue and its hints), remembers what waits (at Permit, on nominations, on binds in
flight) and carries out the effects each step leaves: binds, evictions, status patches, reports.

One cycle (`run_once`) takes every ready queue unit (a GangGroup or a lone pod, see `daemon/scheduling/queue.py`)
in queue order and, for each:

1. Plan. The first pod of a gang plans the whole GangGroup (`placement.plan_gang`); a pod without a
   gang is planned alone (`placement.plan_pod`).
2. Assume. Each assignment of the plan is recorded as `PodAssumed` (the NextPods follow the plan):
   from then on the fold counts the pod's requests on its node, so later plans see the room taken.
3. Permit. The group passes once every gang of it has at least minMember members assumed or bound;
   until then its assumed pods wait, at most `scheduleTimeoutSeconds` from the first wait (default
   `SchedulerConfig.default_schedule_timeout_seconds`). On timeout every assumed member is released
   (`PodForgotten`), `GangTimedOut` is recorded and reported, and the group waits for a change.
4. Bind. `BindRequested` for every assumed member, then `ClusterAPI.bind` for each, answered by
   `PodBound` or `BindFailed`. Binds are pipelined, as kube-scheduler binds asynchronously while it
   plans the next pod: the members go into one FIFO queue served by at most `bind_concurrency`
   worker tasks, so the cycle goes on planning while up to that many Binding calls are in flight,
   with no task per pod. A gang's answers that come in one loop turn are recorded together (one
   append), before the last one settles the gang; a lone pod's `PodAssumed` and `BindRequested` go in
   one append, and its `PodBound` as it settles. While a gang's Bindings are out, the API holds the
   `Scheduled` Events of the pods they bind (`hold_scheduled_events`) and writes them once the gang
   settles or is abandoned: with one core, every microsecond spent on an Event while the gang binds
   delays the gang (measured: 6-9 % of its time). If one member fails, its unit's binds not yet sent
   are not sent, and every member still assumed is released: members the API already bound stay
   bound (Kubernetes cannot unbind; the next attempt places the missing ones next to them). A pod is
   never bound twice: bound pods are never pending and never re-assumed. A plan whose pods have
   WaitForFirstConsumer claims is bound only once they are provisioned: each is marked with its pod's
   node (`ClusterAPI.select_node`) and waited for until bound; a claim given up, deleted or not bound
   within `volume_binding_timeout_seconds` fails the whole plan before any Binding is sent.
5. No plan. `GangPending(reason)` is recorded and the reason reported (`report_gang`, or
   `report_pod` for a lone pod) only when it changed, the preemption hook is asked for a plan
   (job-level preemption: evict the victims, nominate the preemptor's pods, clear lower-priority
   nominations on those nodes), and the unit is parked until the cluster changes.
6. Internal error. An exception while handling one unit (its plan, the hints, preemption, assuming,
   Permit, nominations) is caught around that unit alone: the unit's assumed pods are released, it
   is parked (as structural: it waits for a change of itself or of the cluster, or the periodic
   retry), `GangPending` says "internal error while planning (...)" and is reported like any other
   reason (a Warning Event), and the journal logs the traceback and counts it
   (`toposched_internal_errors_total{stage}`). Every other unit is scheduled as before. Failing to
   append to the event log is not such an error: it stops the loop.

Start-up: the first cycle adopts what the log left (pods assumed but not bound, nominations), but
only what still holds on the cluster as it is now, which is why the daemon creates the loop only
once every kind is relisted and folded (`daemon/cli/run.py`). A plan is checked by
`placement.recheck` (node still there, still admitting the pod, still with room next to what others
bound there while we were down; PodGroup still there; minMember still reached; topology limit still
kept) and released whole when it fails, to be planned again in that same cycle; a nomination on a
node that no longer admits its pod is cleared. Each replica adopts only its own log: a standby that
takes over knows nothing of the old leader's assumptions (their pods are pending or bound in the
relist), and the assumptions of its own earlier term are checked like any others.

Every observation and decision goes through the `Journal` (log first, then fold). Lone pods have no
PodGroup: their GangPending events carry the pod key in `gang` (the fold ignores it; the log keeps
the reason history). Determinism: units, members, nodes and waiting groups are always visited in
sorted or queue order, the clock is the only source of time, and the cycle's concurrency is asyncio's
FIFO order over an API that (in the simulator) never really waits.

Reports run in the background, but a gang's (its PodGroup's status and an Event) are written one at
a time, in the order they were decided: a status that lands late never overwrites a newer one.

Telemetry: the loop tells its `Instruments` (`daemon.scheduling.ports`; none in the simulator) when an
attempt, the preemption planner and each Binding call start and end, so spans and durations measure
the work itself; everything else telemetry says comes from the journal's events.

The daemon calls `run()` (cycles, then sleeps until woken by a cluster change or a deadline); the
simulator calls `run_until_idle()` at each virtual instant and `next_deadline()` to know when the
loop wants to run by time alone. `request_stop()` stops taking new units; in-flight binds finish and
groups waiting at Permit are rolled back. Cancelling `run()` rolls back whatever was not bound.

Must never: decide anything itself (a decision made here is one `replay --verify` cannot check),
mutate the state except through the journal, call placement with a clock, or bind a gang below its
minMember.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc
import msgspec
import structlog

from daemon.scheduling import decisions
from daemon.scheduling.decisions import (
    BackOff,
    Bind,
    DecisionConfig,
    Effect,
    Evict,
    NominationWait,
    Park,
    PermitWait,
    ReportGang,
    ReportPending,
    SetNominatedNode,
    Stage,
    Step,
    Succeeded,
    Waits,
    label,
    quorum_words,
)
from daemon.scheduling.hints import Need, Premise, need_of, premise_of, room_now
from daemon.scheduling.journal import Journal
from daemon.scheduling.ports import (
    NO_INSTRUMENTS,
    ApiOutcome,
    BindOutcome,
    ClusterAPI,
    GangPhase,
    Instruments,
    NeverPreempt,
    Preemptee,
    Preemptor,
)
from daemon.scheduling.queue import PendingUnits, PlacedPriorities, SchedulingQueue, Unit, unit_of_gang
from events.dispatch import each, exhaustive
from events.log import EventLogError
from events.model import (
    BUDGET_EVENTS,
    COMPOSITE_EVENTS,
    JOB_OBJECT_EVENTS,
    POD_GROUP_EVENTS,
    PRIORITY_CLASS_EVENTS,
    QUOTA_OBJECT_EVENTS,
    TOPOLOGY_OBJECT_EVENTS,
    BindFailed,
    BindRequested,
    ClaimDeleted,
    ClaimUpserted,
    CSINodeDeleted,
    CSINodeUpserted,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    KaiPodGroupDeleted,
    KaiPodGroupUpserted,
    KubePodGroupDeleted,
    KubePodGroupUpserted,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodGroupDeleted,
    PodGroupUpserted,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    SchedulerPluginsPodGroupDeleted,
    SchedulerPluginsPodGroupUpserted,
    StorageClassDeleted,
    StorageClassUpserted,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    VolumeDeleted,
    VolumeUpserted,
    WorkloadDeleted,
    WorkloadUpserted,
    object_key,
)
from events.objects import SELECTED_NODE_ANNOTATION, Node, PersistentVolumeClaim, Pod
from placement.fit import Requests
from placement.plan import QuotaShortfall, Unschedulable
from placement.pod_affinity import PodTerms, affinity_index, has_terms
from placement.pod_spread import Spread, has_spreads, spread_index
from placement.volume_binding import choose_volumes
from preemption.plan import PreemptionPlan
from preemption.reclaim import may_reclaim
from state.cluster import ClusterState, PodInfo, subject_of
from state.resources import Resources
from state.volcano_enqueue import PENDING, to_enqueue
from state.volumes import claim_bound, claim_class, refers_to, volume_class

log = structlog.get_logger("toposched.scheduler")

SCHEDULED_REASON = decisions.SCHEDULED_REASON
UNSCHEDULABLE_REASON = decisions.UNSCHEDULABLE_REASON
NOT_READY_REASON = decisions.NOT_READY_REASON
TIMEOUT_REASON = decisions.TIMEOUT_REASON
UNITS_PER_TURN = 16  # units a daemon's cycle decides before other tasks get a turn (`_cycle`)
TURN_SECONDS = 0.01  # ... or fewer, once deciding them has taken this long (big gangs), so watches and
# the lease renewal are never held up for sixteen slow units in a row
LONE_NEEDS_KEPT = 256  # distinct request vectors whose lone-pod need `_need` keeps (all dropped past it)


class SchedulerError(Exception):
    """The loop cannot go on (e.g. it keeps cycling at one instant without settling)."""


class SchedulerConfig(msgspec.Struct, frozen=True, kw_only=True):
    bind_concurrency: int = 64
    default_schedule_timeout_seconds: float = 600.0  # Permit wait when the PodGroup sets none
    retry_parked_seconds: float | None = 60.0  # None: parked units wait for a cluster change only
    backoff_initial_seconds: float = 1.0
    backoff_max_seconds: float = 10.0
    max_cycles_per_instant: int = 10_000  # run_until_idle's guard against a loop that never settles
    # How long a plan's WaitForFirstConsumer claims may take to be provisioned before its pods are bound
    # (kube-scheduler's VolumeBinding bindTimeoutSeconds, 600 by default); past it the plan is released.
    volume_binding_timeout_seconds: float = 600.0


class SchedulerStats(msgspec.Struct, kw_only=True):
    cycles: int = 0
    attempts: int = 0
    skipped: int = 0  # parked units not re-planned: a queueing hint proved they still cannot fit
    plans: int = 0
    unschedulable: int = 0
    binds: int = 0
    bind_failures: int = 0
    timeouts: int = 0
    preemptions: int = 0
    internal_errors: int = 0  # units whose handling raised (see the module docstring, step 6)


class _Binding:
    """One `Bind` effect in the bind pipeline: how many of its members are still to come back, and the
    first failure (after which its members still queued are not sent)."""

    __slots__ = ("bind", "failure", "holds_events", "left", "retriable")

    def __init__(self, bind: Bind) -> None:
        self.bind = bind
        self.left = len(bind.binds)
        self.failure = ""
        self.retriable = True
        self.holds_events = False  # holds the API's Scheduled Events until it settles (a gang's)


class Scheduler:
    def __init__(self, journal: Journal, api: ClusterAPI, *, config: SchedulerConfig | None = None,
                 preemptor: Preemptor | None = None, instruments: Instruments | None = None) -> None:
        self.journal = journal
        self.state: ClusterState = journal.state
        self.clock = journal.clock
        self.api = api
        self.config = config or SchedulerConfig()
        self.preemptor: Preemptor = preemptor or NeverPreempt()
        self.instruments: Instruments = instruments or NO_INSTRUMENTS
        self._timed_preemptor = _TimedPreemptor(self.preemptor, self.instruments)
        self.decisions = DecisionConfig(default_schedule_timeout_seconds=self.config.default_schedule_timeout_seconds)
        self.queue = SchedulingQueue(retry_parked_seconds=self.config.retry_parked_seconds,
                                     backoff_initial_seconds=self.config.backoff_initial_seconds,
                                     backoff_max_seconds=self.config.backoff_max_seconds)
        self.stats = SchedulerStats()
        self._units = PendingUnits(self.state)  # what `pending_units(state)` says, kept from the events
        self._placed_priorities = PlacedPriorities(self.state)
        self._limiter = anyio.CapacityLimiter(self.config.bind_concurrency)
        self._waits = Waits()
        self._waiting: dict[str, PermitWait] = self._waits.waiting  # units holding assumed pods at Permit
        self._binding: dict[str, _Binding] = {}  # unit -> its binds queued or in flight
        self._bind_queue: deque[tuple[_Binding, str, str, str]] = deque()  # (binding, pod, uid, node)
        self._bind_workers = 0
        self._bound: list[PodBound] = []  # binds answered this loop turn, not yet recorded (`_bind_queued`)
        self._idle_binders: deque[anyio.Event] = deque()  # run()'s bind workers waiting for work
        self._nominated: dict[str, NominationWait] = self._waits.nominated  # units holding nominations
        self._node_shapes: dict[str, tuple[object, ...]] = {}
        self._attach_limits: dict[str, dict[str, int]] = {}  # each node's CSI attach limits as last seen
        self._pod_shapes: dict[str, tuple[object, ...]] = {}  # pending pods: what of them placement reads
        self._claims_moved = anyio.Event()  # set (and replaced) whenever a claim changes: provisioning waits on it
        # Claims being marked for provisioning (claim -> node), and those the watch has shown marked: only a
        # mark seen can be taken back by the provisioner (before that, the state just lags the write).
        self._marking: dict[str, str] = {}
        self._marks_seen: set[str] = set()
        # Volumes made in advance being pre-bound to a plan's claims: no other plan is given them meanwhile.
        self._prebinding: set[str] = set()
        self._freed_classes: set[str] = set()  # of volumes changed since the last cycle (`_wake_for_freed_volumes`)
        # pod -> its gang, to know whose membership a deletion changes: from the state a new leader starts on
        # too (the pods a first list, a restart or a standby's watch folded before this scheduler existed),
        # else deleting one of them wakes no gang parked for it until the periodic retry
        self._gang_of: dict[str, str] = {key: pod.gang for key, pod in self.state.pods.items() if pod.gang}
        # Pending pods with required podAffinity, by their terms (pods alike share them: a gang's are asked
        # once): a pod placed that the terms select may let them fit.
        self._affinity_waiters: dict[int, tuple[PodTerms, set[str]]] = {}
        self._waiting_on: dict[str, int] = {}  # waiter -> the key of its terms there
        # Pending pods with DoNotSchedule spread constraints, by namespace and their constraints (pods alike
        # share them): a pod of theirs placed or gone elsewhere may move the counts they are refused by.
        self._spread_waiters: dict[str, dict[int, tuple[tuple[Spread, ...], set[str]]]] = {}
        self._spreading: dict[str, tuple[str, int]] = {}  # waiter -> (its namespace, the key of its constraints)
        self._room_cache: dict[tuple[int, Requests], int] = {}
        self._room_now_cache: dict[tuple[int, Requests], int] = {}  # `_room_now`'s, as of event `_room_now_seq`
        self._room_now_seq = -1
        self._min_placed: int | None = None  # lowest priority of a placed pod (per cycle, lazily)
        self._repriced_seen = self.state.priority_changes.end  # where `state.priority_changes` stood at the last look
        # unit -> (its pods, the tree's version, need_of): a need names a level, which a new tree renumbers
        self._needs: dict[str, tuple[tuple[str, ...], int, Need | None]] = {}
        # A lone pod's need depends on its requests alone, which pods of one shape share (one object, see
        # `ClusterState`'s derivations): kept by that object (held here, so its id is not reused).
        self._lone_needs: dict[int, tuple[Resources, Need | None]] = {}
        self._premises: dict[str, Premise] = {}  # unit -> what of the tree its last attempt's reason rests on
        self._raised: set[str] = set()  # units whose last attempt raised: their reason is the error, not a fact
        self._adopted = False
        self._quota_trees = self.state.quotas.trees_version
        self._requests_released = self.state.requests_released  # see `_pod_upserted`
        self._background: anyio.abc.TaskGroup | None = None  # run()'s task group for binds and reports
        # Per gang, the reports (phase, reason, message, quota refusal) decided and not yet written, oldest first: one
        # task at a time writes a gang's, in order (see `_queue_report`).
        self._gang_reports: dict[str, deque[tuple[GangPhase, str, str, QuotaShortfall | None]]] = {}
        # Volcano Jobs' PodGroups moved to Inqueue whose new phase the watch has not shown yet, and whether
        # something happened that may let another be enqueued (`_enqueue_volcano`)
        self._enqueued: set[str] = set()
        self._enqueue_due = True
        self._stopping = False
        self._dirty = True
        self._wake = anyio.Event()
        journal.subscribe(self.observe)

    # ------------------------------------------------------------------ observations

    def observe(self, event: Event) -> None:
        """Journal listener: note changes that may let parked units fit, and wake the loop."""
        if type(event) is BindRequested:  # changes nothing the queue reads (PodAssumed took the pod out)
            return
        kind, key = subject_of(event)
        self._units.observe_subject(kind, key)
        self._placed_priorities.observe_subject(kind, key)
        handler = _OBSERVERS[type(event)]
        woken = handler is not None and handler(self, event)
        if type(event) in _ENQUEUE_TRIGGERS or (type(event) is PodUpserted
                                                 and event.pod.status.phase in _FINISHED_PHASES):
            self._enqueue_due = True
            if isinstance(event, VolcanoPodGroupUpserted):
                group = event.pod_group
                if group.status.phase not in ("", PENDING):  # the enqueue (ours or another's) has landed
                    self._enqueued.discard(object_key(group.metadata.namespace, group.metadata.name))
            elif isinstance(event, VolcanoPodGroupDeleted):
                self._enqueued.discard(event.key)
        if self.state.priority_changes.end != self._repriced_seen:
            # The event moved a job's priority (a Volcano or KAI PodGroup's class, or the source a gang follows):
            # whom that job may preempt, and who may preempt it, moved too, as when a PriorityClass changes.
            self._repriced_seen = self.state.priority_changes.end
            self._min_placed = None
            self.queue.structure_changed()
            woken = True
        if woken:
            self._dirty = True
            self._wake.set()

    def _placed(self, event: PodAssumed | PodBound) -> bool:
        placed = self.state.pods.get(event.pod)
        woken = False
        if placed is not None:
            self._forget_need(placed)
            if self._min_placed is not None and placed.priority < self._min_placed:
                self._min_placed = placed.priority
            if self._spreading:
                self._stop_spreading(placed.key)
                woken = self._wake_spread_waiters(placed.namespace, placed.obj.metadata.labels)
            if self._waiting_on:
                self._stop_waiting(placed.key)
                return self._wake_affinity_waiters(placed) or woken
        return woken

    def _wait_for_spread(self, pod: PodInfo) -> None:
        spreads = spread_index(self.state).spreads(pod)
        if not spreads:
            self._stop_spreading(pod.key)
            return
        key = id(spreads)
        if self._spreading.get(pod.key) == (pod.namespace, key):
            return
        self._stop_spreading(pod.key)
        group = self._spread_waiters.setdefault(pod.namespace, {}).get(key)
        if group is None:  # holding the constraints keeps their id
            group = self._spread_waiters[pod.namespace][key] = (spreads, set())
        group[1].add(pod.key)
        self._spreading[pod.key] = (pod.namespace, key)

    def _stop_spreading(self, pod_key: str) -> None:
        found = self._spreading.pop(pod_key, None)
        if found is None:
            return
        namespace, key = found
        groups = self._spread_waiters[namespace]
        waiters = groups[key][1]
        waiters.discard(pod_key)
        if not waiters:
            del groups[key]
            if not groups:
                del self._spread_waiters[namespace]

    def _wake_spread_waiters(self, namespace: str, labels: Mapping[str, str] | None) -> bool:
        """A pod of `namespace` with `labels` was placed, or left a node (None: its labels are not known any
        more): the pending pods whose spread constraints count it may fit now. Whether any was woken."""
        groups = self._spread_waiters.get(namespace)
        if not groups:
            return False
        woken: set[str] = set()
        pods = self.state.pods
        for spreads, waiters in groups.values():
            if labels is None or any(spread.counts_pods and spread.selects(labels) for spread in spreads):
                woken.update(waiter.gang or key for key in waiters if (waiter := pods.get(key)) is not None)
        for unit in sorted(woken):
            self.queue.unit_changed(unit)
        return bool(woken)

    def _wait_for_partners(self, pod: PodInfo) -> None:
        terms = affinity_index(self.state).terms(pod)
        key = id(terms)
        if self._waiting_on.get(pod.key) == key:
            return
        self._stop_waiting(pod.key)
        group = self._affinity_waiters.get(key)
        if group is None:
            group = self._affinity_waiters[key] = (terms, set())  # holding the terms keeps their id
        group[1].add(pod.key)
        self._waiting_on[pod.key] = key

    def _stop_waiting(self, pod_key: str) -> None:
        key = self._waiting_on.pop(pod_key, None)
        if key is not None:
            waiters = self._affinity_waiters[key][1]
            waiters.discard(pod_key)
            if not waiters:
                del self._affinity_waiters[key]

    def _wake_affinity_waiters(self, placed: PodInfo) -> bool:
        """`placed` now runs (or is about to): the pending pods whose required podAffinity selects it may
        fit next to it. Whether any was woken. Each distinct set of terms is asked once."""
        woken: set[str] = set()
        namespace, labels = placed.namespace, placed.obj.metadata.labels
        pods = self.state.pods
        for terms, waiters in self._affinity_waiters.values():
            if any(term.selects(namespace, labels) for term in terms.affinity):
                woken.update(waiter.gang or key for key in waiters if (waiter := pods.get(key)) is not None)
        for unit in sorted(woken):
            self.queue.unit_changed(unit)
        return bool(woken)

    def _pod_upserted(self, event: PodUpserted) -> bool:
        meta = event.pod.metadata
        pod = self.state.pods.get(object_key(meta.namespace, meta.name))
        if pod is None:
            return False
        self._forget_need(pod)
        woken = self._claims_released()
        released = self.state.requests_released
        if released != self._requests_released:  # a pod on a node asks for less now (a resize applied)
            self._requests_released = released
            self.queue.capacity_freed()
            woken = True
        if pod.gang:
            self._gang_of[pod.key] = pod.gang
        else:
            self._gang_of.pop(pod.key, None)
        if pod.placed_node and self._min_placed is not None and pod.priority < self._min_placed:
            self._min_placed = pod.priority
        if self._spread_waiters and (pod.terminal or pod.terminating) and pod.placed_node:
            # It leaves its node's count (kube-scheduler counts no terminating pod)
            woken = self._wake_spread_waiters(pod.namespace, event.pod.metadata.labels) or woken
        if pod.terminal:
            self._pod_shapes.pop(pod.key, None)
            self.queue.capacity_freed()
        elif pod.key in self.state.pending:
            affinity = event.pod.spec.affinity
            if affinity is not None and affinity.pod_affinity is not None and has_terms(event.pod):
                self._wait_for_partners(pod)
            elif self._waiting_on:
                self._stop_waiting(pod.key)
            if has_spreads(event.pod):
                self._wait_for_spread(pod)
            elif self._spreading:
                self._stop_spreading(pod.key)
            shape = _pod_shape(event.pod)
            if self._pod_shapes.get(pod.key) == shape:
                return woken  # a status write (ours: PodScheduled=False): nothing placement reads changed
            self._pod_shapes[pod.key] = shape
            self.queue.unit_changed(pod.gang or pod.key)
        else:
            self._pod_shapes.pop(pod.key, None)
            if self._spreading:
                self._stop_spreading(pod.key)
            if self._spread_waiters and pod.placed_node and not pod.terminating:  # another scheduler's, say
                woken = self._wake_spread_waiters(pod.namespace, event.pod.metadata.labels) or woken
            if self._waiting_on:
                self._stop_waiting(pod.key)
                if pod.placed_node:
                    woken = self._wake_affinity_waiters(pod) or woken
            if not (pod.gang and pod.ours and pod.gated and not pod.placed_node):
                return woken
            # A member held by its scheduling gates came (or lost one of several gates): its gang's reason
            # counts the members held so, and must say so now, not at its next attempt.
            self.queue.unit_changed(pod.gang)
        return True

    def _node_upserted(self, event: NodeUpserted) -> bool:
        shape = _node_shape(event.node)
        if self._node_shapes.get(event.node.metadata.name) == shape:
            return False  # a status heartbeat: nothing placement reads changed
        self._node_shapes[event.node.metadata.name] = shape
        self.queue.structure_changed()
        self._room_cache.clear()
        return True

    def _pod_deleted(self, event: PodDeleted) -> bool:
        was_pending = self._pod_shapes.pop(event.key, None) is not None
        self._stop_waiting(event.key)
        self._stop_spreading(event.key)
        if not was_pending:  # it may have been counted where it ran (its labels are gone with it)
            self._wake_spread_waiters(event.key.partition("/")[0], None)
        gang = self._gang_of.pop(event.key, None)
        if gang:  # a member left: its gang's reason ("6 of minMember 6 pods exist", ...) may be stale
            self.queue.unit_changed(gang)
        self._claims_released()
        return self._capacity_freed(event)

    def _csi_node_changed(self, event: CSINodeUpserted | CSINodeDeleted) -> bool:
        """A node's attach limits changed (NodeVolumeLimits): parked units may fit there now. A CSINode rewritten
        with the same limits (its drivers' node ids, topology keys) changes nothing placement reads."""
        name = event.csi_node.metadata.name if isinstance(event, CSINodeUpserted) else event.name
        limits = self.state.volumes.attach_limits.get(name, {})
        if self._attach_limits.get(name, {}) == limits:
            return False
        if limits:
            self._attach_limits[name] = dict(limits)
        else:
            self._attach_limits.pop(name, None)
        self.queue.structure_changed()
        self._room_cache.clear()
        return True

    def _node_deleted(self, event: NodeDeleted) -> bool:
        self._node_shapes.pop(event.name, None)
        self._room_cache.clear()  # a lost node only takes room away: nothing parked comes back
        return False

    def _gang_spec_changed(self, event: PodGroupUpserted | PodGroupDeleted | VolcanoPodGroupUpserted
                           | VolcanoPodGroupDeleted | SchedulerPluginsPodGroupUpserted
                           | SchedulerPluginsPodGroupDeleted | KubePodGroupUpserted | KubePodGroupDeleted
                           | KaiPodGroupUpserted | KaiPodGroupDeleted) -> bool:
        if isinstance(event, PodGroupUpserted | VolcanoPodGroupUpserted | SchedulerPluginsPodGroupUpserted
                      | KubePodGroupUpserted | KaiPodGroupUpserted):
            meta = event.pod_group.metadata
            key = object_key(meta.namespace, meta.name)
        else:
            key = event.key
        # The gang and its GangGroup partners may fit now (new spec, members, group); nobody else (unless the
        # PodGroup moved its job's priority: `observe`).
        for gang in sorted({key, *unit_of_gang(self.state, key)}):
            self.queue.unit_changed(gang)
            self._needs.pop(gang, None)
        self._needs.pop(unit_of_gang(self.state, key)[0], None)
        return True

    def _job_changed(self, event: Event) -> bool:
        return True  # its PodGroup may be ours to enqueue now (`_ENQUEUE_TRIGGERS`)

    def _capacity_freed(self, event: Event) -> bool:
        self.queue.capacity_freed()  # cached needs stay: a need only grows when members leave (still a bound)
        return True

    def _quota_changed(self, event: Event) -> bool:
        """A changed quota tree may admit parked units; a status write on a quota changes nothing."""
        trees = self.state.quotas.trees_version
        if trees == self._quota_trees:
            return False
        self._quota_trees = trees
        self.queue.structure_changed()
        self._needs.clear()
        return True

    def _claim_changed(self, event: ClaimUpserted | ClaimDeleted | VolumeUpserted) -> bool:
        """A claim (or the volume bound to one) changed: the pending pods that use it may fit now."""
        if isinstance(event, ClaimUpserted):
            key = object_key(event.claim.metadata.namespace, event.claim.metadata.name)
            node = self._marking.get(key)
            if node is not None and event.claim.metadata.annotations.get(SELECTED_NODE_ANNOTATION) == node:
                self._marks_seen.add(key)
        elif isinstance(event, ClaimDeleted):
            key = event.key
        else:
            # Made, let go, or given to a claim: the pods waiting for a volume of its class are woken at the next
            # cycle (which volumes the claims of placed pods will get is foreseen from the state alone, and a
            # claimRef written may show one foreseen taken to be free).
            self._freed_classes.add(volume_class(event.volume))
            ref = event.volume.spec.claim_ref
            if ref is None:
                moved, self._claims_moved = self._claims_moved, anyio.Event()
                moved.set()
                return True
            key = object_key(ref.namespace, ref.name)
        moved, self._claims_moved = self._claims_moved, anyio.Event()
        moved.set()
        return self._wake_claim_users(key) or isinstance(event, VolumeUpserted)

    def _wake_for_freed_volumes(self) -> None:
        """Volumes of the StorageClasses in `_freed_classes` changed since the last cycle: the pending pods whose
        unbound claims of those classes may be bound to one are tried again. Once per cycle, however many
        volumes changed (a relist lists thousands)."""
        freed, self._freed_classes = self._freed_classes, set()
        book = self.state.volumes
        for claim_key in sorted(book.users):
            claim = book.claims.get(claim_key)
            if claim is not None and not claim.spec.volume_name and claim_class(claim) in freed:
                self._wake_claim_users(claim_key)

    def _wake_claim_users(self, claim: str) -> bool:
        """The pending pods that use `claim` may fit now: their units are tried again. Whether any was."""
        woken = False
        pending = self.state.pending
        for pod_key in sorted(self.state.volumes.users.get(claim, ())):
            if pod_key in pending:
                pod = self.state.pods[pod_key]
                self.queue.unit_changed(pod.gang or pod_key)
                woken = True
        return woken

    def _claims_released(self) -> bool:
        """Pods that used claims left or finished (`VolumeBook.released`): the pending pods that wait for
        those claims (ReadWriteOncePod) may fit now. Whether any was woken."""
        released = self.state.volumes.released
        if not released:
            return False
        woken = False
        for claim in sorted(released):
            woken = self._wake_claim_users(claim) or woken
        released.clear()
        return woken

    def _structure_changed(self, event: Event) -> bool:
        self.queue.structure_changed()
        self._room_cache.clear()
        self._needs.clear()
        return True

    # ------------------------------------------------------------------ the memory decisions read

    def waiting(self, unit: str) -> PermitWait | None:
        return self._waiting.get(unit)

    def queue_of(self, key: str) -> str:
        """Which queue the unit of a gang (or a lone pod) is in (`queue.ACTIVE`, `BACKOFF`, `UNSCHEDULABLE`):
        the pending gauges' `queue` label."""
        unit = unit_of_gang(self.state, key)[0] if key in self.state.gangs else key
        return self.queue.queue_of(unit, self.clock.now())

    def shown_reason(self, unit: str) -> str:
        status = self.queue.status.get(unit)
        return status.reason if status is not None else ""

    # ------------------------------------------------------------------ driving

    def request_stop(self) -> None:
        """Stop taking new units; `run()` returns after in-flight binds finish and waiting groups roll back."""
        self._stopping = True
        self._wake.set()
        self._wake_binders(len(self._idle_binders))  # idle bind workers end (those busy finish first)

    @property
    def stopping(self) -> bool:
        return self._stopping

    def has_waiting(self) -> bool:
        return bool(self._waiting)

    async def run(self) -> None:
        """The daemon's loop: cycle, then sleep until a cluster change or the next deadline.

        Binds and API reports run in a task group that outlives the cycles, so a slow API never
        holds up planning (units with binds in flight are skipped until they finish). On
        `request_stop()` the binds in flight finish; on cancellation they are abandoned and
        their pods released.
        """
        try:
            async with anyio.create_task_group() as background:
                self._background = background
                while not self._stopping:
                    self._wake = anyio.Event()
                    self._dirty = False
                    await self.run_once()
                    if self._dirty or self._stopping:
                        continue
                    await self._sleep(self.next_deadline())
        finally:
            self._background = None
            self._abandon_binds()
            self._release_all("scheduler stopping")

    async def run_until_idle(self) -> None:
        """Cycle until a cycle changes nothing that could let a parked unit fit (the simulator's step)."""
        for _ in range(self.config.max_cycles_per_instant):
            self._dirty = False
            await self.run_once()
            if not self._dirty or self._stopping:
                return
        raise SchedulerError(f"the loop did not settle after {self.config.max_cycles_per_instant} cycles at "
                             f"t={self.clock.now()}: a preemptor or API keeps freeing room it then takes back")

    def next_deadline(self) -> float | None:
        """The earliest time at which the loop has something to do by time alone (None: nothing)."""
        now = self.clock.now()
        candidates = [w.deadline for w in self._waiting.values()]
        candidates += [n.deadline for n in self._nominated.values()]
        queued = self.queue.next_deadline(after=now)
        if queued is not None:
            candidates.append(queued)
        return min(candidates) if candidates else None

    async def _sleep(self, deadline: float | None) -> None:
        wake = self._wake
        if deadline is None:
            await wake.wait()
            return
        async with anyio.create_task_group() as group:
            async def timer() -> None:
                await self.clock.sleep_until(deadline)
                group.cancel_scope.cancel()

            async def woken() -> None:
                await wake.wait()
                group.cancel_scope.cancel()

            group.start_soon(timer)
            group.start_soon(woken)

    async def run_once(self) -> None:
        """One scheduling cycle over every ready unit (see the module docstring)."""
        if self._background is not None:
            await self._cycle(self._background)
            return
        try:
            async with anyio.create_task_group() as group:
                await self._cycle(group)
        except BaseException:
            self._abandon_binds()
            raise

    async def _cycle(self, group: anyio.abc.TaskGroup) -> None:
        self.stats.cycles += 1
        now = self.clock.now()
        if not self._adopted:
            self._adopt(now, group)
        if self._freed_classes:
            self._wake_for_freed_volumes()
        self._service_waiting(now, group)
        self._service_nominated(now, group)
        if self._enqueue_due:
            self._enqueue_volcano(group)
        units = self._units.units()
        # A unit's wake-ups are kept under each of its gangs (a new member of any of them may let it fit).
        live = [key for u in units for key in (u.key, *u.gangs)]
        self.queue.forget_gone(live + list(self._waiting) + list(self._binding))
        if self._premises:
            alive = set(live)
            for key in [key for key in self._premises if key not in alive]:
                del self._premises[key]
        if self._raised:
            self._raised.intersection_update(live)
        self._min_placed = None
        # Under run(), other tasks (bind workers, watches) get their turn every UNITS_PER_TURN units, not
        # after each: the binds of a batch go out together and their answers and watch events come back
        # together, which costs less per pod than one at a time. run_once() of its own yields after each.
        # A turn also ends once it has taken TURN_SECONDS, whatever the count.
        per_turn = UNITS_PER_TURN if group is self._background else 1
        since_turn = 0
        clock = self.clock
        turn_ends = now + TURN_SECONDS
        for unit in self.queue.ordered(units, now):
            if self._stopping:
                break
            if unit.key in self._binding or not any(pod in self.state.pending for pod in unit.pods):
                continue
            step = self._step(now)
            attempting = False
            try:
                if self._surely_unschedulable(unit):
                    self.stats.skipped += 1
                    self.queue.park(unit.key, now)
                    continue
                self.stats.attempts += 1
                self.queue.attempted(unit, now)
                attempting = True
                self.instruments.attempt_started(unit.key, unit.gangs, unit.pods)
                try:
                    attempted = decisions.attempt(step, unit)
                finally:
                    self._carry_out(step.effects, now, group)
                self._premises[unit.key] = premise_of(self.state, self._need(unit), self._room_cache)
                self._raised.discard(unit.key)
                if attempted.planned:
                    self.stats.plans += 1
                else:
                    self.stats.unschedulable += 1
                if attempted.preempted:
                    self.stats.preemptions += 1
                self.instruments.attempt_finished(unit.key, "planned" if attempted.planned else "unschedulable",
                                                  attempted.constraint)
            except Exception as error:
                self._unit_failed(unit.key, unit.gangs, step.stage, error, now, group)
                if attempting:
                    self.instruments.attempt_finished(unit.key, "error", "")
            since_turn += 1
            if since_turn >= per_turn or clock.now() >= turn_ends:
                since_turn = 0
                await anyio.lowlevel.checkpoint()
                turn_ends = clock.now() + TURN_SECONDS
        if since_turn:
            await anyio.lowlevel.checkpoint()

    # ------------------------------------------------------------------ carrying decisions out

    def _step(self, now: float) -> Step:
        return Step(self.state, now, self._record, self, config=self.decisions, preemptor=self._timed_preemptor,
                    room_cache=self._room_cache, sink_many=self.journal.record_many)

    def _record(self, event: Event) -> None:
        self.journal.record(event)

    def _carry_out(self, effects: Iterable[Effect], now: float, group: anyio.abc.TaskGroup) -> None:
        """Start what a decision step left for the loop to do, in the order it left it."""
        for effect in effects:
            if isinstance(effect, Bind):
                self._start_binds(effect, group)
            elif isinstance(effect, Evict):
                group.start_soon(self._evict, effect)
            elif isinstance(effect, SetNominatedNode):
                group.start_soon(self._set_nominated_node, effect.pod, effect.uid, effect.node)
            elif isinstance(effect, ReportPending | ReportGang):
                if isinstance(effect, ReportPending):
                    self._remember_reason(effect)
                if isinstance(effect, ReportPending) and effect.lone:
                    group.start_soon(self._report_pods, effect)
                for gang in self._queue_reports(effect):
                    group.start_soon(self._write_reports, gang)
            else:
                self._remember(effect, now)

    def _remember(self, effect: Effect, now: float) -> None:
        """Effects on the loop's own memory: waits at Permit, nominations, the queue."""
        if self._waits.remember(effect, now):
            return
        if isinstance(effect, Park):
            self.queue.park(effect.unit, now, structural=effect.structural, retry_at=effect.retry_at)
        elif isinstance(effect, BackOff):
            self.queue.back_off(effect.unit, now)
        elif isinstance(effect, Succeeded):
            self.queue.succeeded(effect.unit)
        else:
            raise AssertionError(f"{type(effect).__name__} is carried out, not remembered")

    def _remember_reason(self, effect: ReportPending) -> None:
        if effect.lone:
            self.queue.status_of(effect.unit).reason = effect.reason

    # ------------------------------------------------------------------ binding

    def _start_binds(self, bind: Bind, group: anyio.abc.TaskGroup) -> None:
        """Queue the members of a `Bind` for the bind workers, wake idle ones and start more (at most
        `bind_concurrency` at once): the pipeline keeps up to that many Binding calls in flight while
        the cycle goes on planning, without a task per pod. Under `run()` the workers stay for the
        next binds once the queue is empty (lone pods come one `Bind` each: a task started per pod
        otherwise); under a `run_once()` of its own they end with the queue, as its task group must.
        A plan whose pods have WaitForFirstConsumer claims has them provisioned first (`_provision`)."""
        binding = _Binding(bind)
        self._binding[bind.unit] = binding
        claims, volumes, blocked = self._claims_to_provision(bind)
        if blocked:  # a claim went since the plan was made (deleted, lost, ...): nothing is sent
            binding.failure = blocked
        if (claims or volumes) and not blocked:
            self._prebinding.update(volumes.values())  # before any await: the next plan must not choose them
            group.start_soon(self._provision_then_bind, binding, claims, volumes, group)
        else:
            self._queue_binds(binding, group)

    def _queue_binds(self, binding: _Binding, group: anyio.abc.TaskGroup) -> None:
        bind = binding.bind
        if len(bind.binds) > 1:
            try:
                self.api.hold_scheduled_events()
                binding.holds_events = True
            except Exception:  # an adapter bug costs the hold, never the binds
                log.exception("scheduler.hold_events_raised", unit=bind.unit)
        self._bind_queue.extend((binding, key, uid, node) for key, uid, node in bind.binds)
        self._wake_binders(len(bind.binds))
        for _ in range(min(self.config.bind_concurrency, len(self._bind_queue)) - self._bind_workers):
            self._bind_workers += 1
            group.start_soon(self._bind_worker, group is self._background)

    def _wake_binders(self, count: int) -> None:
        for _ in range(min(count, len(self._idle_binders))):
            self._idle_binders.popleft().set()

    async def _bind_worker(self, stay: bool = False) -> None:
        """Bind queued members one after the other until the queue is empty; settle each `Bind` whose
        last member came back (`decisions.bind_settled`). Once a member of a `Bind` failed, its members
        still queued are not sent. `stay`: then wait for more (woken by `_start_binds`) until stopping."""
        queue = self._bind_queue
        idle: anyio.Event | None = None
        try:
            await anyio.lowlevel.checkpoint()  # let the cycle that queued the binds go on planning first
            while True:
                await self._bind_queued(queue)
                if not stay or self._stopping:
                    return
                idle = anyio.Event()
                self._idle_binders.append(idle)
                await idle.wait()
                idle = None
        finally:
            self._bind_workers -= 1
            if idle is not None and idle in self._idle_binders:  # cancelled while idle
                self._idle_binders.remove(idle)

    async def _bind_queued(self, queue: deque[tuple[_Binding, str, str, str]]) -> None:
        """`_bind_worker`'s work: the queued members, until the queue is empty."""
        while queue:
            binding, key, uid, node = queue.popleft()
            if not binding.failure:
                outcome = await self._call_bind(binding.bind.unit, key, uid, node)
                if outcome.placed:
                    self.stats.binds += 1
                    bound = self._bound
                    bound.append(PodBound(pod=key, uid=uid, node=outcome.node or node))
                    if len(bound) == 1 and binding.left > 1:
                        # The first answer of this turn for a gang: the other workers whose answers came in
                        # the same read add theirs meanwhile, and all are recorded together (one append).
                        # A lone pod's is recorded as it settles, below: waiting a turn would cost it more.
                        await anyio.lowlevel.cancel_shielded_checkpoint()
                        self._record_bound()
                else:
                    self.stats.bind_failures += 1
                    self._record_bound()
                    self.journal.record(BindFailed(pod=key, uid=uid, node=node, reason=outcome.reason))
                    if not binding.failure:
                        binding.failure = f"binding pod {key} to node {node} failed: {outcome.reason}"
                        binding.retriable = outcome.retriable
            binding.left -= 1
            if binding.left == 0:
                self._record_bound()  # settling reads them
                await self._settle(binding)

    def _record_bound(self) -> None:
        """Record the binds answered and not yet recorded, in the order they were answered."""
        if self._bound:
            bound, self._bound = self._bound, []
            self.journal.record_many(bound)

    async def _settle(self, binding: _Binding) -> None:
        bind = binding.bind
        self._binding.pop(bind.unit, None)
        self._release_events(binding)
        now = self.clock.now()
        step = self._step(now)
        decisions.bind_settled(step, bind.unit, bind.gangs, len(bind.binds), [b[0] for b in bind.binds],
                               binding.failure, binding.retriable)
        self.instruments.binds_settled(bind.unit, binding.failure)
        # Reported from this worker, one after the other, once the binds are all back (queued first, all
        # of them, so that reports decided later, elsewhere, come after these).
        writes: list[str] = []
        for effect in step.effects:
            if isinstance(effect, ReportGang | ReportPending):
                if isinstance(effect, ReportPending):
                    self._remember_reason(effect)
                writes += self._queue_reports(effect)
            else:
                self._remember(effect, now)
        for effect in step.effects:
            if isinstance(effect, ReportPending) and effect.lone:
                await self._report_pods(effect)
        for gang in writes:
            await self._write_reports(gang)

    def _abandon_binds(self) -> None:
        """The loop was cancelled with binds queued or in flight: release their members still assumed."""
        self._bind_queue.clear()
        self._record_bound()
        for unit_key in sorted(self._binding):
            binding = self._binding.pop(unit_key)
            self._release_events(binding)
            bind = binding.bind
            decisions.forget_members(self._step(self.clock.now()), bind.gangs, [b[0] for b in bind.binds],
                                     "scheduler stopped while binding")
            self.instruments.binds_settled(unit_key, "scheduler stopped while binding")

    def _release_events(self, binding: _Binding) -> None:
        if binding.holds_events:
            binding.holds_events = False
            try:
                self.api.release_scheduled_events()
            except Exception:  # an adapter bug must not keep the gang from settling
                log.exception("scheduler.release_events_raised", unit=binding.bind.unit)

    async def _call_bind(self, unit_key: str, key: str, uid: str, node: str) -> BindOutcome:
        self.instruments.bind_started(unit_key, key, node)
        try:
            outcome = await self.api.bind(key, uid, node)
        except Exception as error:  # an adapter bug must not strand the gang's assumed pods
            log.exception("scheduler.bind_raised", pod=key, node=node)
            outcome = BindOutcome(status="failed", reason=f"{type(error).__name__}: {error}", retriable=True)
        self.instruments.bind_finished(unit_key, key, node, outcome)
        return outcome

    # ------------------------------------------------------------------ provisioning before binding

    def _claims_to_provision(self, bind: Bind) -> tuple[dict[str, str], dict[str, str], str]:
        """The plan's WaitForFirstConsumer claims not bound yet: those to provision, each with the node its
        pod goes to, and those to bind to a volume made in advance, each with that volume
        (`placement.volume_binding.choose_volumes`, leaving out the volumes of Bindings still in flight); and
        why a pod of it can no longer go anywhere ("" when each still may: a claim changed since the plan)."""
        claims: dict[str, str] = {}
        pods = self.state.pods
        with_volumes: list[tuple[str, str]] = []
        for key, _, node in bind.binds:
            pod = pods.get(key)
            if pod is not None and pod.obj.spec.volumes:
                needs = self.state.volume_needs(pod)
                if needs.blocked:
                    return {}, {}, f"pod {key}: {needs.blocked}"
                for claim in needs.provision:
                    claims.setdefault(claim, node)
                if needs.static or needs.provision:
                    with_volumes.append((key, node))
        if not with_volumes:
            return claims, {}, ""
        volumes, blocked = choose_volumes(self.state, with_volumes, self._prebinding)
        if blocked:
            return {}, {}, blocked
        for claim in volumes:
            claims.pop(claim, None)  # bound to a volume made in advance that reaches its node: not provisioned
        return claims, volumes, ""

    async def _provision_then_bind(self, binding: _Binding, claims: dict[str, str], volumes: dict[str, str],
                                   group: anyio.abc.TaskGroup) -> None:
        """kube-scheduler's VolumeBinding PreBind for a whole plan: its claims are marked with their
        pods' nodes and provisioned, or bound to the volumes made in advance chosen for them, before any
        pod is bound, so a provisioning that fails (or a claim that goes) releases the plan whole, to be
        placed again, instead of leaving a bound pod that never starts. Then the binds are queued, or, on
        a failure, settled as failed."""
        await self._nominate_expected(binding.bind.binds)
        try:
            failure = await self._provision(claims, volumes)
        except Exception as error:  # an adapter bug must not strand the plan's assumed pods
            log.exception("scheduler.provision_raised", unit=binding.bind.unit)
            failure = f"provisioning its volumes raised {type(error).__name__}: {error}"
        finally:
            self._prebinding.difference_update(volumes.values())
            for claim in claims:
                self._marking.pop(claim, None)
                self._marks_seen.discard(claim)
        if failure:
            log.warning("scheduler.volumes_not_provisioned", unit=binding.bind.unit, reason=failure)
            binding.failure = failure
            binding.retriable = True
        self._queue_binds(binding, group)

    async def _nominate_expected(self, binds: Sequence[tuple[str, str, str]]) -> None:
        """KEP-5278 (NominatedNodeNameForExpectation, beta and on by default since 1.35): kube-scheduler writes
        a pod's `status.nominatedNodeName` when its binding cycle has work to do before the Binding (here: its
        volumes provisioned, which may take minutes), so that cluster-autoscaler and Karpenter see where the pod
        is going and do not take the node away meanwhile. The Binding clears it (kube-apiserver, since 1.35). A
        plan released instead leaves it, as kube-scheduler does (it never clears the field; a later decision
        overwrites it), and the watch brings it back as a nomination: the pod's capacity stays reserved there
        against lower priorities until the pod is placed. Best effort, as the loop's other API calls go."""
        async with anyio.create_task_group() as nominating:
            for key, uid, node in binds:
                nominating.start_soon(self._set_nominated_node, key, uid, node)

    async def _provision(self, claims: dict[str, str], volumes: dict[str, str]) -> str:
        """Mark each claim of `claims` with its node, pre-bind each volume of `volumes` to its claim, then wait
        until all are bound; "" once they are, else why not."""
        held = self.state.volumes.claims
        to_mark: list[tuple[str, str]] = []
        for claim, node in sorted(claims.items()):
            found = held.get(claim)
            if found is None:
                return f"claim {claim} is gone"
            if found.metadata.annotations.get(SELECTED_NODE_ANNOTATION) != node:
                to_mark.append((claim, node))
            else:
                self._marks_seen.add(claim)
            self._marking[claim] = node
        to_bind: list[tuple[str, str]] = []
        for claim, volume_name in sorted(volumes.items()):
            found = held.get(claim)
            volume = self.state.volumes.volumes.get(volume_name)
            if found is None:
                return f"claim {claim} is gone"
            if volume is None:
                return f"persistentvolume {volume_name} chosen for claim {claim} is gone"
            ref = volume.spec.claim_ref
            if ref is None or ref.uid != found.metadata.uid or f"{ref.namespace}/{ref.name}" != claim:
                to_bind.append((claim, volume_name))  # not pre-bound to this very claim yet
        failures: list[str] = []
        limiter = anyio.CapacityLimiter(self.config.bind_concurrency)  # a gang's claims, marked as its binds go

        async def mark(claim: str, node: str) -> None:
            async with limiter:
                outcome = await self.api.select_node(claim, node)
            if not outcome.ok:
                failures.append(f"marking claim {claim} for node {node} failed: {outcome.reason}")

        async def prebind(claim: str, volume: str) -> None:
            async with limiter:
                outcome = await self.api.bind_volume(volume, claim)
            if not outcome.ok:
                failures.append(f"binding persistentvolume {volume} to claim {claim} failed: {outcome.reason}")

        async with anyio.create_task_group() as marking:
            for claim, node in to_mark:
                marking.start_soon(mark, claim, node)
            for claim, volume_name in to_bind:
                marking.start_soon(prebind, claim, volume_name)
        if failures:
            return min(failures)
        timeout = self.config.volume_binding_timeout_seconds
        with anyio.move_on_after(timeout):
            while True:
                moved = self._claims_moved
                provisioned, bound = self._unprovisioned(claims), self._unbound(volumes)
                if provisioned or bound:  # why one cannot be
                    return provisioned or bound or ""
                if provisioned == "" and bound == "":
                    return ""
                await moved.wait()
        late = sorted(c for c in (*claims, *volumes) if not claim_bound(held.get(c)))
        return f"its claims were not provisioned within {timeout:g} s: {', '.join(late)}"

    def _unbound(self, volumes: dict[str, str]) -> str | None:
        """`_settled` for the claims of `volumes`, each to be bound to its volume made in advance (the PV
        controller binds a claim once its volume names it)."""
        def check(claim: str, found: PersistentVolumeClaim, volume_name: str) -> str:
            if claim_bound(found):
                if found.spec.volume_name != volume_name:  # its pod's node may not reach that one: placed again
                    return (f"claim {claim} was bound to persistentvolume {found.spec.volume_name}, not to "
                            f"{volume_name} chosen for its pod's node")
                return ""
            volume = self.state.volumes.volumes.get(volume_name)
            if volume is None:
                return f"persistentvolume {volume_name} was deleted while claim {claim} was bound to it"
            ref = volume.spec.claim_ref
            if ref is not None and not refers_to(volume, claim, found.metadata.uid):
                return (f"persistentvolume {volume_name} was taken by claim {ref.namespace}/{ref.name} "
                        f"before claim {claim} was bound to it")
            return ""

        return self._settled(volumes, "bound", check)

    def _unprovisioned(self, claims: dict[str, str]) -> str | None:
        """`_settled` for `claims`, each marked for its node's provisioning."""
        def check(claim: str, found: PersistentVolumeClaim, node: str) -> str:
            if (not claim_bound(found) and claim in self._marks_seen
                    and found.metadata.annotations.get(SELECTED_NODE_ANNOTATION) != node):
                # The provisioner removes its selected node when it cannot provision there, to have it placed
                # again. A mark not seen yet is our write still on its way back, not one taken back.
                return (f"the provisioner of claim {claim} gave node {node} up "
                        "(volume.kubernetes.io/selected-node removed)")
            return ""

        return self._settled(claims, "provisioned", check)

    def _settled(self, claims: dict[str, str], doing: str,
                 check: Callable[[str, PersistentVolumeClaim, str], str]) -> str | None:
        """"" when every claim of `claims` (each with its node or volume) is bound, why one cannot be (deleted,
        or `check`'s reason), None while waiting."""
        held = self.state.volumes.claims
        waiting = False
        for claim, target in sorted(claims.items()):
            found = held.get(claim)
            if found is None:
                return f"claim {claim} was deleted while it was {doing}"
            why = check(claim, found, target)
            if why:
                return why
            waiting = waiting or not claim_bound(found)
        return None if waiting else ""

    # ------------------------------------------------------------------ waiting groups and nominations

    def _adopt(self, now: float, group: anyio.abc.TaskGroup) -> None:
        """At the loop's first cycle (after a restart or a takeover), take over what the log left
        (`decisions.adopt`): what still holds waits at Permit or keeps its nominations again."""
        self._adopted = True
        step = self._step(now)
        try:
            adoption = decisions.adopt(step)
        finally:
            self._carry_out(step.effects, now, group)
        for pod, node, why in adoption.cleared:
            log.warning("scheduler.nomination_cleared_at_start", pod=pod, node=node, reason=why)
        for unit_key, pods, why in adoption.released:
            log.warning("scheduler.adopted_plan_released", unit=unit_key, pods=pods, reason=why)

    def _service_waiting(self, now: float, group: anyio.abc.TaskGroup) -> None:
        for unit_key in sorted(self._waiting):
            waiting = self._waiting[unit_key]
            step = self._step(now)
            step.stage = "permit"
            try:
                try:
                    if decisions.service_wait(step, unit_key, waiting):
                        self.stats.timeouts += 1
                finally:
                    self._carry_out(step.effects, now, group)
            except Exception as error:
                self._unit_failed(unit_key, waiting.gangs, step.stage, error, now, group)
                self.instruments.unit_failed(unit_key, step.stage)

    def _service_nominated(self, now: float, group: anyio.abc.TaskGroup) -> None:
        for unit_key in sorted(self._nominated):
            nominated = self._nominated[unit_key]
            step = self._step(now)
            step.stage = "nominate"
            try:
                try:
                    holding = decisions.service_nominations(step, unit_key, nominated)
                finally:
                    self._carry_out(step.effects, now, group)
                if not holding:
                    del self._nominated[unit_key]
            except Exception as error:
                self._nominated.pop(unit_key, None)
                self._unit_failed(unit_key, nominated.gangs, step.stage, error, now, group)
                self.instruments.unit_failed(unit_key, step.stage)

    def _release_all(self, reason: str) -> None:
        for unit_key in sorted(self._waiting):
            waiting = self._waiting.pop(unit_key)
            decisions.forget_members(self._step(self.clock.now()), waiting.gangs, waiting.order, reason)

    # ------------------------------------------------------------------ internal errors

    def _unit_failed(self, unit_key: str, gangs: tuple[str, ...], stage: Stage, error: Exception, now: float,
                     group: anyio.abc.TaskGroup) -> None:
        """Handling one unit raised (step 6 of the module docstring): park it with the error as its reason."""
        if isinstance(error, EventLogError | OSError):
            raise error  # the log cannot record: nothing more may be decided
        self.stats.internal_errors += 1
        self._raised.add(unit_key)
        self.journal.report_error(stage, f"{'gang' if gangs else 'pod'} {unit_key}", error)
        step = self._step(now)
        try:
            decisions.unit_failed(step, unit_key, gangs, stage, error)
        except (EventLogError, OSError):
            raise
        except Exception:  # the unit's own records are what broke: it stays parked; the log line says why
            log.exception("scheduler.park_failed", unit=unit_key)
            self.queue.park(unit_key, now, structural=True)
            self._waiting.pop(unit_key, None)
            return
        self._carry_out(step.effects, now, group)

    # ------------------------------------------------------------------ queueing hints

    def _surely_unschedulable(self, unit: Unit) -> bool:
        """A parked unit brought back by a release that still cannot fit, nor preempt anyone.

        Never a unit that itself changed since it was parked (a member came, its PodGroup changed):
        its last reason may no longer be true ("4 of minMember 6 pods exist" once the other 2 came),
        and only an attempt says what is true now. Skipping it would keep the stale reason forever,
        since nothing else about the unit may ever change again. Nor a unit whose premise changed
        since its last attempt (`hints.Premise`: its layer came back, moved or went, its largest
        domain grew or shrank): "'BlockLayer': is not a layer" would stay once the layer is back.
        Nor a unit whose last attempt raised (step 6), for the same reason.
        """
        status = self.queue.status.get(unit.key)
        if status is None or status.parked_tick is None or self.queue.changed_since_parked(unit):
            return False
        if unit.key in self._raised:  # its reason is the error: only an attempt can replace it with a fact
            return False
        if not isinstance(self.preemptor, NeverPreempt) and unit.priority > self._lowest_placed_priority():
            return False
        if not isinstance(self.preemptor, NeverPreempt) and may_reclaim(self.state, unit.pods):
            return False  # reclaim takes back what other quotas borrow, whatever their priority
        need = self._need(unit)
        if need is None:
            return False
        premise = self._premises.get(unit.key)
        if premise is not None and premise != premise_of(self.state, need, self._room_cache):
            return False
        return self._room_now(need) < need.pods

    def _room_now(self, need: Need) -> int:
        """`room_now`, kept until the next event is folded: the units a release brings back at one
        cycle mostly share their need (layer and pod shape), and nothing moves between their checks."""
        seq = self.state.last_seq
        if seq != self._room_now_seq:
            self._room_now_seq = seq
            self._room_now_cache.clear()
        key = (need.level, need.requests)
        room = self._room_now_cache.get(key)
        if room is None:
            room = self._room_now_cache[key] = room_now(self.state, need)
        return room

    def _need(self, unit: Unit) -> Need | None:
        """`need_of(state, unit)`, kept while the unit's pods and the tree stay the same."""
        version = self.state.topology.version
        cached = self._needs.get(unit.key)
        if cached is not None and cached[0] == unit.pods and cached[1] == version:
            return cached[2]
        info = self.state.pods.get(unit.pods[0]) if not unit.gangs and len(unit.pods) == 1 else None
        if info is not None:
            requests = info.requests
            known = self._lone_needs.get(id(requests))
            if known is not None and known[0] is requests:
                need = known[1]
            else:
                need = need_of(self.state, unit)
                if len(self._lone_needs) >= LONE_NEEDS_KEPT:
                    self._lone_needs.clear()
                self._lone_needs[id(requests)] = (requests, need)
        else:
            need = need_of(self.state, unit)
        self._needs[unit.key] = (unit.pods, version, need)
        return need

    def _forget_need(self, pod: PodInfo) -> None:
        if self._needs:
            self._needs.pop(unit_of_gang(self.state, pod.gang)[0] if pod.gang else pod.key, None)

    def _lowest_placed_priority(self) -> int:
        if self._min_placed is None:
            self._min_placed = self._placed_priorities.lowest()
        return self._min_placed

    def explain_pending(self, pod_key: str) -> str:
        """Why a pod of ours is not bound yet, in the words last shown for it (names its gang)."""
        pod = self.state.pods.get(pod_key)
        if pod is None:
            return f"pod {pod_key}: not found"
        if pod.gated and not pod.placed_node:
            gates = ", ".join(gate.name for gate in pod.obj.spec.scheduling_gates)
            held = (f"pod {pod_key}: held by its scheduling gates (spec.schedulingGates: {gates}); no scheduler "
                    f"may place it until they are all removed")
            return f"gang {pod.gang}: {held}" if pod.gang else held
        if not pod.gang:
            status = self.queue.status.get(pod_key)
            if status is not None and status.reason:
                return status.reason
            return f"pod {pod_key}: not attempted yet"
        gangs = decisions.group_of(self.state, pod)
        unit_key = gangs[0] if gangs else pod.gang
        info = self.state.gangs.get(pod.gang)
        waiting = self._waiting.get(unit_key)
        if pod.assumed_node and waiting is not None:
            return (f"{label(waiting.gangs)}: waiting at Permit ({quorum_words(self.state, waiting.gangs)}) "
                    f"until t={waiting.deadline:g}")
        if info is not None and info.last_reason:
            return info.last_reason
        return f"{label(gangs or (pod.gang,))}: not attempted yet"

    # ------------------------------------------------------------------ API calls

    def _enqueue_volcano(self, group: anyio.abc.TaskGroup) -> None:
        """Move to Inqueue the Volcano PodGroups of jobs that may be now (state/volcano_enqueue.py), so that
        Volcano's job controller or Kubeflow's training-operator creates their pods."""
        self._enqueue_due = False
        for key in to_enqueue(self.state, self._enqueued):
            self._enqueued.add(key)
            group.start_soon(self._enqueue, key)

    async def _enqueue(self, key: str) -> None:
        outcome = await self._call(self.api.enqueue_pod_group(key), "enqueue_pod_group", key)
        if not outcome.ok:  # tried again at the next cycle a change brings
            self._enqueued.discard(key)
            self._enqueue_due = True

    async def _evict(self, evict: Evict) -> None:
        async with self._limiter:
            await self._call(self.api.set_disruption_condition(evict.pod, evict.uid, preemptor=evict.preemptor,
                                                               message=evict.message),
                             "set_disruption_condition", evict.pod)
            await self._call(self.api.evict(evict.pod, evict.uid, preemptor=evict.preemptor, message=evict.message,
                                            grace_seconds=None),
                             "evict", evict.pod)

    async def _report_pods(self, report: ReportPending) -> None:
        for key, uid in report.reports:
            await self._call(self.api.report_pod(key, uid, UNSCHEDULABLE_REASON, report.reason), "report_pod", key)

    def _queue_reports(self, effect: ReportGang | ReportPending) -> list[str]:
        """Queue what `effect` reports on gangs (the PodGroup's status and an Event); returns the gangs
        whose reports the caller must now write (`_write_reports`): those nobody is writing yet.

        A gang's reports are written one at a time in the order they were decided: two status writes
        of one PodGroup in flight at once may be answered in either order, and a gang preempted just
        after it was scheduled (its Scheduled report still on its way) would be left reading Scheduled.
        """
        if isinstance(effect, ReportGang):
            reports: list[tuple[str, GangPhase, str, str, QuotaShortfall | None]] = [
                (effect.gang, effect.phase, effect.reason, effect.message, None)]
        elif effect.lone:
            return []
        else:
            reports = [(gang, "Pending", NOT_READY_REASON if effect.held and self.state.not_ready_for_scheduling(gang)
                        else UNSCHEDULABLE_REASON, effect.reason, effect.quota) for gang, _ in effect.reports]
        writers = []
        for gang, phase, reason, message, quota in reports:
            queued = self._gang_reports.setdefault(gang, deque())
            queued.append((phase, reason, message, quota))
            if len(queued) == 1:
                writers.append(gang)
        return writers

    async def _write_reports(self, gang: str) -> None:
        """Write the gang's queued reports, oldest first, until none is left (a cancelled writer drops the rest)."""
        queued = self._gang_reports[gang]
        try:
            while queued:
                phase, reason, message, quota = queued[0]
                await self._call(self.api.report_gang(gang, phase, reason, message, quota), "report_gang", gang)
                queued.popleft()
        finally:
            del self._gang_reports[gang]

    async def _set_nominated_node(self, pod: str, uid: str, node: str | None) -> None:
        async with self._limiter:
            await self._call(self.api.set_nominated_node(pod, uid, node), "set_nominated_node", pod)

    async def _call(self, call: Awaitable[ApiOutcome], what: str, key: str) -> ApiOutcome:
        try:
            outcome = await call
        except Exception as error:
            log.exception("scheduler.api_raised", call=what, key=key)
            return ApiOutcome(ok=False, reason=f"{type(error).__name__}: {error}")
        if not outcome.ok:
            log.warning("scheduler.api_failed", call=what, key=key, reason=outcome.reason)
        return outcome


class _TimedPreemptor:
    """The loop's preemptor, telling its instruments when the planner is asked and when it answers."""

    def __init__(self, inner: Preemptor, instruments: Instruments) -> None:
        self.inner = inner
        self.instruments = instruments

    def plan(self, state: ClusterState, preemptee: Preemptee, failure: Unschedulable) -> PreemptionPlan | None:
        self.instruments.preemption_started(preemptee.key)
        try:
            return self.inner.plan(state, preemptee, failure)
        finally:
            self.instruments.preemption_finished(preemptee.key)


# Event type -> what it tells the loop (True from the handler: a parked unit may fit now, wake up).
# Exhaustive (events.dispatch): a new event type must say whether it can let a parked unit fit.
_OBSERVERS: dict[type, Callable[[Scheduler, Any], bool] | None] = exhaustive("the loop's observer", {
    PodAssumed: Scheduler._placed,
    PodBound: Scheduler._placed,
    PodUpserted: Scheduler._pod_upserted,
    NodeUpserted: Scheduler._node_upserted,
    NodeDeleted: Scheduler._node_deleted,
    **each(POD_GROUP_EVENTS, Scheduler._gang_spec_changed),
    PodDeleted: Scheduler._pod_deleted,
    **each((PodForgotten, BindFailed, NominationCleared), Scheduler._capacity_freed),
    # (a Workload: each of its gangs)
    **each((*TOPOLOGY_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS, WorkloadUpserted, WorkloadDeleted,
            *COMPOSITE_EVENTS),
           Scheduler._structure_changed),
    **each((ClaimUpserted, ClaimDeleted, VolumeUpserted), Scheduler._claim_changed),
    # A class changes rarely and may concern any claim; a deleted volume only takes reach away.
    **each((StorageClassUpserted, StorageClassDeleted), Scheduler._structure_changed),
    **each((CSINodeUpserted, CSINodeDeleted), Scheduler._csi_node_changed),
    VolumeDeleted: None,
    # A budget only ranks preemption plans: it never lets a parked unit fit.
    **each(BUDGET_EVENTS, None),
    # A Volcano or Kubeflow job says whose its PodGroup is: it may be enqueued now (`_ENQUEUE_TRIGGERS`).
    **each(JOB_OBJECT_EVENTS, Scheduler._job_changed),
    **each(QUOTA_OBJECT_EVENTS, Scheduler._quota_changed),
    # Decisions that only take room, and objects nothing is placed by:
    **each((ObjectUndecodable, BindRequested, PodNominated, EvictionRequested, GangTimedOut, GangPending,
            GangPlanned, PreemptionPlanned), None),
})


def _pod_shape(pod: Pod) -> tuple[object, ...]:
    """What of a pending Pod placement reads: a change in anything else (its conditions, its
    resourceVersion) cannot let it fit, as kube-scheduler ignores a pod update that only touched status."""
    meta = pod.metadata
    return (meta.uid, meta.labels, meta.annotations, meta.deletion_timestamp, pod.spec,
            pod.status.phase, pod.status.nominated_node_name)


def _node_shape(node: Node) -> tuple[object, ...]:
    """What of a Node placement reads; a change in anything else cannot let a parked unit fit."""
    return (node.metadata.labels, node.spec.taints, node.spec.unschedulable, node.status.allocatable)


# Events after which a job's Volcano PodGroup may be enqueued (state/volcano_enqueue.py): the PodGroups and
# Jobs themselves, room freed (and a pod that finished, `_FINISHED_PHASES`) or added, the queues'
# capabilities, priorities (the order).
_ENQUEUE_TRIGGERS: frozenset[type] = frozenset({
    VolcanoPodGroupUpserted, VolcanoPodGroupDeleted, *JOB_OBJECT_EVENTS, PodDeleted, PodForgotten, BindFailed,
    NodeUpserted, NodeDeleted, *QUOTA_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS,
})
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
