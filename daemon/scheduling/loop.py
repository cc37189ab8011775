"""The scheduler loop, written once for the daemon and the simulator (Koordinator's FirstPod/NextPod).

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
4. Bind. `BindRequested` for every assumed member, then `ClusterAPI.bind` for each, concurrently
   (bounded by `bind_concurrency`), each answered by `PodBound` or `BindFailed`. If one member
   fails, binds not yet sent are not sent, and every member still assumed is released: members the
   API already bound stay bound (Kubernetes cannot unbind; the next attempt places the missing ones
   next to them). A pod is never bound twice: bound pods are never pending and never re-assumed.
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

The daemon calls `run()` (cycles, then sleeps until woken by a cluster change or a deadline); the
simulator calls `run_until_idle()` at each virtual instant and `next_deadline()` to know when the
loop wants to run by time alone. `request_stop()` stops taking new units; in-flight binds finish and
groups waiting at Permit are rolled back. Cancelling `run()` rolls back whatever was not bound.

Must never: mutate the state except through the journal, call placement with a clock, or bind a gang
below its minMember.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence

import anyio
import anyio.abc
import msgspec
import structlog

from daemon.scheduling.hints import Need, Shape, need_of, room_now, room_when_empty
from daemon.scheduling.journal import Journal
from daemon.scheduling.ports import (
    ApiOutcome,
    BindOutcome,
    ClusterAPI,
    GangPhase,
    NoPreemption,
    Preemptee,
    PreemptionPlanLike,
    Preemptor,
)
from daemon.scheduling.queue import SchedulingQueue, Unit, pending_units, unit_of_gang
from events.log import EventLogError
from events.model import (
    BindFailed,
    BindRequested,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    HyperNodeDeleted,
    HyperNodeUpserted,
    NetworkTopologyDeleted,
    NetworkTopologyUpserted,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodGroupDeleted,
    PodGroupUpserted,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    PriorityClassDeleted,
    PriorityClassUpserted,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    object_key,
)
from events.objects import Node
from placement import GangPlan, Unschedulable, plan_gang, plan_pod
from placement.members import is_running
from placement.plan import CAPACITY, HARD_TIER, INVALID, MEMBERS, MUST_GATHER, POD_FIT
from placement.recheck import Adopted, broken_plans, refusal
from state.cluster import ClusterState, PodInfo

log = structlog.get_logger("toposched.scheduler")

SCHEDULED_REASON = "Scheduled"
UNSCHEDULABLE_REASON = "Unschedulable"
TIMEOUT_REASON = "GangTimeout"

_STRUCTURE_CHANGES = (
    NetworkTopologyUpserted, NetworkTopologyDeleted, HyperNodeUpserted, HyperNodeDeleted,
    PriorityClassUpserted, PriorityClassDeleted,
)
_GANG_SPEC_CHANGES = (PodGroupUpserted, PodGroupDeleted, VolcanoPodGroupUpserted, VolcanoPodGroupDeleted)
_CAPACITY_CHANGES = (PodDeleted, PodForgotten, BindFailed, NominationCleared)
_STRUCTURAL_FAILURES = frozenset({POD_FIT, INVALID, MEMBERS})
# What the loop was doing for a unit when it raised: the `stage` label of the metric, and in words.
_STAGES = {"plan": "planning", "preempt": "planning preemption", "assume": "assuming its plan",
           "permit": "checking Permit", "nominate": "checking its nominations"}
_CAPACITY_FAILURES = frozenset({CAPACITY, MUST_GATHER, HARD_TIER})


class SchedulerError(Exception):
    """The loop cannot go on (e.g. it keeps cycling at one instant without settling)."""


class SchedulerConfig(msgspec.Struct, frozen=True, kw_only=True):
    bind_concurrency: int = 64
    default_schedule_timeout_seconds: float = 600.0  # Permit wait when the PodGroup sets none
    retry_parked_seconds: float | None = 60.0  # None: parked units wait for a cluster change only
    backoff_initial_seconds: float = 1.0
    backoff_max_seconds: float = 10.0
    max_cycles_per_instant: int = 10_000  # run_until_idle's guard against a loop that never settles


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


class _Waiting:
    """A GangGroup holding assumed pods at Permit."""

    __slots__ = ("deadline", "gangs", "order", "since")

    def __init__(self, gangs: tuple[str, ...], since: float, deadline: float) -> None:
        self.gangs = gangs
        self.since = since
        self.deadline = deadline
        self.order: list[str] = []  # assumed pods in plan order (the order they are bound in)


class _Nominated:
    """A unit whose pods hold nominations made for it; given up after its timeout."""

    __slots__ = ("deadline", "gangs", "pods")

    def __init__(self, gangs: tuple[str, ...], pods: tuple[str, ...], deadline: float) -> None:
        self.gangs = gangs
        self.pods = pods
        self.deadline = deadline


class Scheduler:
    def __init__(self, journal: Journal, api: ClusterAPI, *, config: SchedulerConfig | None = None,
                 preemptor: Preemptor | None = None) -> None:
        self.journal = journal
        self.state: ClusterState = journal.state
        self.clock = journal.clock
        self.api = api
        self.config = config or SchedulerConfig()
        self.preemptor: Preemptor = preemptor or NoPreemption()
        self.queue = SchedulingQueue(retry_parked_seconds=self.config.retry_parked_seconds,
                                     backoff_initial_seconds=self.config.backoff_initial_seconds,
                                     backoff_max_seconds=self.config.backoff_max_seconds)
        self.stats = SchedulerStats()
        self._limiter = anyio.CapacityLimiter(self.config.bind_concurrency)
        self._waiting: dict[str, _Waiting] = {}
        self._binding: set[str] = set()
        self._nominated: dict[str, _Nominated] = {}
        self._node_shapes: dict[str, tuple[object, ...]] = {}
        self._room_cache: dict[tuple[int, Shape], int] = {}
        self._min_placed: int | None = None  # lowest priority of a placed pod (per cycle, lazily)
        self._needs: dict[str, tuple[tuple[str, ...], Need | None]] = {}  # unit -> (its pods, need_of)
        self._adopted = False
        self._background: anyio.abc.TaskGroup | None = None  # run()'s task group for binds and reports
        self._stopping = False
        self._stage = "plan"  # what the unit being handled is at (named by an internal error)
        self._dirty = True
        self._wake = anyio.Event()
        journal.subscribe(self.observe)

    # ------------------------------------------------------------------ observations

    def observe(self, event: Event) -> None:
        """Journal listener: note changes that may let parked units fit, and wake the loop."""
        kind = type(event)
        queue = self.queue
        if kind is PodAssumed or kind is PodBound:
            assert isinstance(event, PodAssumed | PodBound)
            placed = self.state.pods.get(event.pod)
            if placed is not None:
                self._forget_need(placed)
                if self._min_placed is not None and placed.priority < self._min_placed:
                    self._min_placed = placed.priority
            return
        if kind is PodUpserted:
            assert isinstance(event, PodUpserted)
            meta = event.pod.metadata
            pod = self.state.pods.get(object_key(meta.namespace, meta.name))
            if pod is None:
                return
            self._forget_need(pod)
            if pod.placed_node and self._min_placed is not None and pod.priority < self._min_placed:
                self._min_placed = pod.priority
            if pod.terminal:
                queue.capacity_freed()
            elif pod.key in self.state.pending:
                queue.unit_changed(pod.gang or pod.key)
            else:
                return
        elif kind is NodeUpserted:
            assert isinstance(event, NodeUpserted)
            shape = _node_shape(event.node)
            if self._node_shapes.get(event.node.metadata.name) == shape:
                return  # a status heartbeat: nothing placement reads changed
            self._node_shapes[event.node.metadata.name] = shape
            queue.structure_changed()
            self._room_cache.clear()
        elif kind is NodeDeleted:
            assert isinstance(event, NodeDeleted)
            self._node_shapes.pop(event.name, None)
            self._room_cache.clear()  # a lost node only takes room away: nothing parked comes back
            return
        elif kind in _GANG_SPEC_CHANGES:
            assert isinstance(event, _GANG_SPEC_CHANGES)
            if isinstance(event, PodGroupUpserted | VolcanoPodGroupUpserted):
                meta = event.pod_group.metadata
                key = object_key(meta.namespace, meta.name)
            else:
                key = event.key
            # The gang and its GangGroup partners may fit now (new spec, members, group); nobody else.
            for gang in sorted({key, *unit_of_gang(self.state, key)}):
                queue.unit_changed(gang)
                self._needs.pop(gang, None)
            self._needs.pop(unit_of_gang(self.state, key)[0], None)
        elif kind in _CAPACITY_CHANGES:
            queue.capacity_freed()  # cached needs stay: a need only grows when members leave (still a bound)
        elif kind in _STRUCTURE_CHANGES:
            queue.structure_changed()
            self._room_cache.clear()
            self._needs.clear()
        else:
            return
        self._dirty = True
        self._wake.set()

    # ------------------------------------------------------------------ driving

    def request_stop(self) -> None:
        """Stop taking new units; `run()` returns after in-flight binds finish and waiting groups roll back."""
        self._stopping = True
        self._wake.set()

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
        async with anyio.create_task_group() as group:
            await self._cycle(group)

    async def _cycle(self, group: anyio.abc.TaskGroup) -> None:
        self.stats.cycles += 1
        now = self.clock.now()
        if not self._adopted:
            self._adopt(now, group)
        self._service_waiting(now, group)
        self._service_nominated(now, group)
        units = pending_units(self.state)
        self.queue.forget_gone([u.key for u in units] + list(self._waiting) + list(self._binding))
        self._min_placed = None
        for unit in self.queue.ordered(units, now):
            if self._stopping:
                break
            if unit.key in self._binding or not any(pod in self.state.pending for pod in unit.pods):
                continue
            self._stage = "plan"
            try:
                if self._surely_unschedulable(unit):
                    self.stats.skipped += 1
                    self.queue.park(unit.key, now)
                    continue
                self._attempt(unit, now, group)
            except Exception as error:
                self._unit_failed(unit.key, unit.gangs, error, now, group)
            await anyio.lowlevel.checkpoint()

    # ------------------------------------------------------------------ one attempt

    def _attempt(self, unit: Unit, now: float, group: anyio.abc.TaskGroup) -> None:
        self.stats.attempts += 1
        self.queue.attempted(unit, now)
        result = plan_gang(self.state, unit.target) if unit.is_gang else plan_pod(self.state, unit.target)
        if isinstance(result, Unschedulable):
            self.stats.unschedulable += 1
            self._unschedulable(unit, result, now, group)
            return
        self.stats.plans += 1
        self._stage = "assume"
        self._assume(unit, result, now, group)

    def _assume(self, unit: Unit, plan: GangPlan, now: float, group: anyio.abc.TaskGroup) -> None:
        record = self.journal.record
        state = self.state
        gangs = plan.gangs or unit.gangs
        if gangs:
            for gang in gangs:
                record(GangPlanned(gang=gang, domain=plan.domain, layer=plan.level, pods=len(plan.assignments),
                                   explanation=plan.explanation, attempt=self._attempts_of(gang) + 1))
        assumed: list[str] = []
        for assignment in plan.assignments:
            pod = state.pods.get(assignment.pod)
            if pod is None or assignment.pod not in state.pending:
                continue
            record(PodAssumed(pod=pod.key, uid=pod.uid, node=assignment.node, gang=pod.gang))
            assumed.append(pod.key)
        if not gangs:
            if assumed:
                self._start_binds(unit.key, (), assumed, now, group)
            return
        waiting = self._waiting.get(unit.key)
        if waiting is None:
            waiting = self._waiting[unit.key] = _Waiting(gangs, now, now + self._timeout_of(gangs))
        waiting.order.extend(assumed)
        left = [pod for pod in unit.pods if pod in state.pending]
        if left:
            # Placed a subset (minMember's share): the rest waits for room, and says so.
            self.queue.park(unit.key, now)
            note = (f"{_label(gangs)}: {len(left)} pod(s) wait for room beyond the {len(assumed)} placed "
                    f"({plan.explanation})")
            group.start_soon(self._report_pending, self._pending(unit.key, gangs, note), note, False)
        self._permit(unit.key, waiting, now, group)

    def _permit(self, unit_key: str, waiting: _Waiting, now: float, group: anyio.abc.TaskGroup) -> None:
        """Bind the group's assumed pods once every gang of it reaches minMember."""
        if not all(self._quorum(gang) for gang in waiting.gangs):
            return
        del self._waiting[unit_key]
        order = [key for key in waiting.order if self._is_assumed(key)]
        listed = set(order)
        for gang in waiting.gangs:
            info = self.state.gangs.get(gang)
            if info is not None:
                order += [key for key in sorted(info.members) if key not in listed and self._is_assumed(key)]
        if order:
            self._start_binds(unit_key, waiting.gangs, order, now, group)

    def _quorum(self, gang: str) -> bool:
        info = self.state.gangs.get(gang)
        if info is None or info.spec is None:
            return False
        placed = 0
        pods = self.state.pods
        for key in info.members:
            pod = pods.get(key)
            if pod is not None and is_running(pod):
                placed += 1
        return placed >= info.spec.min_member

    def _is_assumed(self, key: str) -> bool:
        pod = self.state.pods.get(key)
        return pod is not None and bool(pod.assumed_node) and not pod.node_name

    def _timeout_of(self, gangs: Sequence[str]) -> float:
        timeouts = []
        for gang in gangs:
            info = self.state.gangs.get(gang)
            if info is not None and info.spec is not None and info.spec.schedule_timeout_seconds is not None:
                timeouts.append(info.spec.schedule_timeout_seconds)
        return min(timeouts) if timeouts else self.config.default_schedule_timeout_seconds

    def _attempts_of(self, gang: str) -> int:
        info = self.state.gangs.get(gang)
        return info.attempts if info is not None else 0

    # ------------------------------------------------------------------ binding

    def _start_binds(self, unit_key: str, gangs: tuple[str, ...], order: list[str], now: float,
                     group: anyio.abc.TaskGroup) -> None:
        state = self.state
        binds: list[tuple[str, str, str]] = []
        for key in order:
            pod = state.pods[key]
            binds.append((key, pod.uid, pod.assumed_node))
        for key, uid, node in binds:
            self.journal.record(BindRequested(pod=key, uid=uid, node=node))
        self._binding.add(unit_key)
        group.start_soon(self._bind_all, unit_key, gangs, binds)

    async def _bind_all(self, unit_key: str, gangs: tuple[str, ...], binds: list[tuple[str, str, str]]) -> None:
        failure = ""
        retriable = True
        finished = False

        async def bind_one(key: str, uid: str, node: str) -> None:
            nonlocal failure, retriable
            async with self._limiter:
                if failure:
                    return  # a member already failed: this one is released, not bound
                outcome = await self._call_bind(key, uid, node)
            if outcome.placed:
                self.stats.binds += 1
                self.journal.record(PodBound(pod=key, uid=uid, node=outcome.node or node))
                return
            self.stats.bind_failures += 1
            self.journal.record(BindFailed(pod=key, uid=uid, node=node, reason=outcome.reason))
            if not failure:
                failure = f"binding pod {key} to node {node} failed: {outcome.reason}"
                retriable = outcome.retriable

        try:
            async with anyio.create_task_group() as binding:
                for key, uid, node in binds:
                    binding.start_soon(bind_one, key, uid, node)
            finished = True
        finally:
            self._binding.discard(unit_key)
            if not finished:
                self._forget_members(gangs, [b[0] for b in binds], "scheduler stopped while binding")
        now = self.clock.now()
        if not failure:
            self.queue.succeeded(unit_key)
            for gang in gangs:
                await self._report_gang(gang, "Scheduled", SCHEDULED_REASON,
                                        f"{len(binds)} pod(s) bound; minMember reached")
            return
        label = _label(gangs) if gangs else f"pod {unit_key}"
        reason = f"{label}: {failure}; released the members not yet bound"
        self._forget_members(gangs, [b[0] for b in binds], reason)
        if retriable:
            self.queue.back_off(unit_key, now)
        else:
            self.queue.park(unit_key, now)
        await self._report_pending(self._pending(unit_key, gangs, reason), reason, lone=not gangs)

    async def _call_bind(self, key: str, uid: str, node: str) -> BindOutcome:
        try:
            return await self.api.bind(key, uid, node)
        except Exception as error:  # an adapter bug must not strand the gang's assumed pods
            log.exception("scheduler.bind_raised", pod=key, node=node)
            return BindOutcome(status="failed", reason=f"{type(error).__name__}: {error}", retriable=True)

    def _forget_members(self, gangs: Sequence[str], extra: Sequence[str], reason: str) -> None:
        """Release every assumed, unbound member of the gangs (and the listed pods)."""
        keys = set(extra)
        for gang in gangs:
            info = self.state.gangs.get(gang)
            if info is not None:
                keys.update(info.members)
        for key in sorted(keys):
            if self._is_assumed(key):
                pod = self.state.pods[key]
                self.journal.record(PodForgotten(pod=key, uid=pod.uid, reason=reason))

    # ------------------------------------------------------------------ waiting groups and nominations

    def _adopt(self, now: float, group: anyio.abc.TaskGroup) -> None:
        """At the loop's first cycle (after a restart or a takeover), take over what the log left.

        Pods assumed but never bound wait at Permit again, and nominations get a fresh timeout, but
        only what still holds on the state rebuilt from the relist (`placement.recheck`): a plan
        with a pod whose node is gone, no longer admits it or no longer has room for it is released
        as a whole and planned again in this very cycle (a partly bound gang next to its bound
        members), and a nomination on a node that no longer admits its pod is cleared, in the API too.
        """
        self._adopted = True
        state = self.state
        assumed: dict[str, tuple[tuple[str, ...], list[str]]] = {}
        for key in sorted(state.pods):
            pod = state.pods[key]
            if pod.assumed_node and not pod.node_name:
                gangs = self._group_of(pod)
                assumed.setdefault(gangs[0] if gangs else key, (gangs, []))[1].append(key)
            if pod.nominated_node and pod.key in state.pending:
                why = refusal(state, pod, pod.nominated_node)
                if why:
                    log.warning("scheduler.nomination_cleared_at_start", pod=key, node=pod.nominated_node, reason=why)
                    self.journal.record(NominationCleared(pod=key, reason=f"{why}; cleared at start-up"))
                    group.start_soon(self._set_nominated_node, key, pod.uid, None)
                    continue
                gangs = self._group_of(pod)
                unit_key = gangs[0] if gangs else key
                nominated = self._nominated.get(unit_key)
                if nominated is None:
                    self._nominated[unit_key] = _Nominated(gangs, (key,), now + self._timeout_of(gangs))
                else:
                    nominated.pods += (key,)
        pods = state.pods
        adopted = sorted((Adopted(key=unit_key, gangs=gangs, pods=tuple(keys))
                          for unit_key, (gangs, keys) in assumed.items()),
                         key=lambda a: (-max(pods[k].priority for k in a.pods), a.key))
        broken = broken_plans(state, adopted)
        for plan in adopted:
            stale = broken.get(plan.key)
            if stale is not None:
                label = _label(plan.gangs) if plan.gangs else f"pod {plan.key}"
                log.warning("scheduler.adopted_plan_released", unit=plan.key, pods=len(plan.pods), reason=stale)
                self._forget_members(plan.gangs, plan.pods,
                                     f"{label}: its plan from before this scheduler started no longer holds: {stale}; "
                                     f"released to be planned again")
                continue
            waiting = self._waiting[plan.key] = _Waiting(plan.gangs, now, now + self._timeout_of(plan.gangs))
            waiting.order.extend(plan.pods)

    def _group_of(self, pod: PodInfo) -> tuple[str, ...]:
        if not pod.gang:
            return ()
        info = self.state.gangs.get(pod.gang)
        return info.spec.gang_group if info is not None and info.spec is not None else (pod.gang,)

    def _service_waiting(self, now: float, group: anyio.abc.TaskGroup) -> None:
        for unit_key in sorted(self._waiting):
            waiting = self._waiting[unit_key]
            self._stage = "permit"
            try:
                self._service_one_waiting(unit_key, waiting, now, group)
            except Exception as error:
                self._unit_failed(unit_key, waiting.gangs, error, now, group)

    def _service_one_waiting(self, unit_key: str, waiting: _Waiting, now: float, group: anyio.abc.TaskGroup) -> None:
        for key in waiting.order:
            pod = self.state.pods.get(key)
            if (pod is not None and pod.assumed_node and not pod.node_name
                    and pod.assumed_node not in self.state.nodes):
                self.journal.record(PodForgotten(pod=key, uid=pod.uid,
                                                 reason=f"node {pod.assumed_node} is gone"))
        if not waiting.gangs:  # an adopted lone pod: nothing to wait for
            del self._waiting[unit_key]
            order = [key for key in waiting.order if self._is_assumed(key)]
            if order:
                self._start_binds(unit_key, (), order, now, group)
            return
        if not any(self._is_assumed(key) for gang in waiting.gangs
                   for key in self._members(gang)):
            del self._waiting[unit_key]  # its assumed pods are gone
            return
        if all(self._quorum(gang) for gang in waiting.gangs):
            self._permit(unit_key, waiting, now, group)
            return
        if now >= waiting.deadline:
            del self._waiting[unit_key]
            self._time_out(unit_key, waiting, group)

    def _members(self, gang: str) -> list[str]:
        info = self.state.gangs.get(gang)
        return sorted(info.members) if info is not None else []

    def _quorum_words(self, gangs: Sequence[str]) -> str:
        """"default/a has 1 of minMember 2 placed, default/b 3 of 2": where each gang stands at Permit."""
        parts = []
        for index, gang in enumerate(gangs):
            info = self.state.gangs.get(gang)
            need = info.spec.min_member if info is not None and info.spec is not None else 0
            have = sum(1 for key in self._members(gang) if is_running(self.state.pods[key]))
            parts.append(f"{gang} has {have} of minMember {need} placed" if index == 0 else f"{gang} {have} of {need}")
        return ", ".join(parts)

    def _time_out(self, unit_key: str, waiting: _Waiting, group: anyio.abc.TaskGroup) -> None:
        self.stats.timeouts += 1
        reason = (f"{_label(waiting.gangs)}: scheduleTimeoutSeconds ({waiting.deadline - waiting.since:g}s) passed "
                  f"waiting at Permit ({self._quorum_words(waiting.gangs)}); released its assumed pods")
        self._forget_members(waiting.gangs, waiting.order, reason)
        for gang in waiting.gangs:
            self.journal.record(GangTimedOut(gang=gang, reason=reason))
            group.start_soon(self._report_gang, gang, "TimedOut", TIMEOUT_REASON, reason)
        self.queue.park(unit_key, self.clock.now())

    def _service_nominated(self, now: float, group: anyio.abc.TaskGroup) -> None:
        state = self.state
        for unit_key in sorted(self._nominated):
            nominated = self._nominated[unit_key]
            self._stage = "nominate"
            try:
                holding = [key for key in nominated.pods
                           if key in state.pods and state.pods[key].nominated_node and key in state.pending]
                if not holding:
                    del self._nominated[unit_key]
                    continue
                if now >= nominated.deadline:
                    del self._nominated[unit_key]
                    for key in holding:
                        self.journal.record(NominationCleared(
                            pod=key, reason=f"{unit_key}: not placed within its scheduleTimeoutSeconds; gave up"))
                        # Cleared in the API too, or the next watch event of the pod would nominate it again.
                        group.start_soon(self._set_nominated_node, key, state.pods[key].uid, None)
            except Exception as error:
                self._nominated.pop(unit_key, None)
                self._unit_failed(unit_key, nominated.gangs, error, now, group)

    def _release_all(self, reason: str) -> None:
        for unit_key in sorted(self._waiting):
            waiting = self._waiting.pop(unit_key)
            self._forget_members(waiting.gangs, waiting.order, reason)

    # ------------------------------------------------------------------ no plan

    def _unschedulable(self, unit: Unit, failure: Unschedulable, now: float, group: anyio.abc.TaskGroup) -> None:
        reason = failure.reason
        structural = failure.constraint in _STRUCTURAL_FAILURES
        if not structural and failure.constraint in _CAPACITY_FAILURES:
            never = self._never_fits(unit)
            if never:
                structural = True
                reason = f"{reason}; {never}"
        if not structural:
            self._stage = "preempt"
            preemption = self._preempt(unit, failure, now, group)
            if preemption:
                reason = f"{reason}; {preemption}"
        self.queue.park(unit.key, now, structural=structural)
        group.start_soon(self._report_pending, self._pending(unit.key, unit.gangs, reason), reason, not unit.gangs)

    def _unit_failed(self, unit_key: str, gangs: tuple[str, ...], error: Exception, now: float,
                     group: anyio.abc.TaskGroup) -> None:
        """Handling one unit raised (step 6 of the module docstring): park it with the error as its reason."""
        if isinstance(error, EventLogError | OSError):
            raise error  # the log cannot record: nothing more may be decided
        self.stats.internal_errors += 1
        stage = self._stage
        self.journal.report_error(stage, f"{'gang' if gangs else 'pod'} {unit_key}", error)
        label = _label(gangs) if gangs else f"pod {unit_key}"
        reason = (f"{label}: internal error while {_STAGES[stage]} ({type(error).__name__}: {str(error)[:200]}); "
                  "parked until it or the cluster changes")
        self.queue.park(unit_key, now, structural=True)
        try:
            self._waiting.pop(unit_key, None)
            self._forget_members(gangs, () if gangs else (unit_key,), reason)
            reports = self._pending(unit_key, gangs, reason)
        except (EventLogError, OSError):
            raise
        except Exception:  # the unit's own records are what broke: it stays parked; the log line says why
            log.exception("scheduler.park_failed", unit=unit_key)
            return
        group.start_soon(self._report_pending, reports, reason, not gangs)

    def _never_fits(self, unit: Unit) -> str:
        """Why no release of capacity can ever help ("" when one might): the unit needs more than the
        largest domain of its constraint layer holds even when empty (`daemon/scheduling/hints.py`)."""
        need = need_of(self.state, unit)
        if need is None:
            return ""
        room = room_when_empty(self.state, need, self._room_cache)
        if room >= need.pods:
            return ""
        levels = self.state.topology.levels
        layer = levels[need.level].layer
        where = "the whole cluster holds" if need.level == 0 else f"no {layer} domain holds more than"
        rule = f"{need.source}: " if need.source else ""
        return f"it can never fit: {rule}even empty, {where} {room} of the {need.pods} pods it needs"

    def _surely_unschedulable(self, unit: Unit) -> bool:
        """A parked unit brought back by a release that still cannot fit, nor preempt anyone."""
        status = self.queue.status.get(unit.key)
        if status is None or status.parked_tick is None:
            return False
        if not isinstance(self.preemptor, NoPreemption) and unit.priority > self._lowest_placed_priority():
            return False
        cached = self._needs.get(unit.key)
        if cached is not None and cached[0] == unit.pods:
            need = cached[1]
        else:
            need = need_of(self.state, unit)
            self._needs[unit.key] = (unit.pods, need)
        return need is not None and room_now(self.state, need) < need.pods

    def _forget_need(self, pod: PodInfo) -> None:
        if self._needs:
            self._needs.pop(unit_of_gang(self.state, pod.gang)[0] if pod.gang else pod.key, None)

    def _lowest_placed_priority(self) -> int:
        if self._min_placed is None:
            self._min_placed = min((p.priority for p in self.state.pods.values() if p.placed_node),
                                   default=1 << 62)
        return self._min_placed

    def _pending(self, unit_key: str, gangs: Sequence[str], reason: str) -> list[tuple[str, str]]:
        """Record why the unit waits, only when the reason changed; returns what to report to the API
        ((gang key, "") per gang, or (pod key, uid) for a lone pod). Recording is synchronous, so the
        reason can never land after a later, successful attempt."""
        reports: list[tuple[str, str]] = []
        if gangs:
            for gang in gangs:
                info = self.state.gangs.get(gang)
                if info is None or info.last_reason == reason:
                    continue
                self.journal.record(GangPending(gang=gang, reason=reason, attempt=info.attempts + 1))
                reports.append((gang, ""))
            return reports
        status = self.queue.status_of(unit_key)
        if status.reason == reason:
            return reports
        status.reason = reason
        self.journal.record(GangPending(gang=unit_key, reason=reason))
        pod = self.state.pods.get(unit_key)
        if pod is not None:
            reports.append((unit_key, pod.uid))
        return reports

    async def _report_pending(self, reports: list[tuple[str, str]], reason: str, lone: bool) -> None:
        for key, uid in reports:
            if lone:
                await self._call(self.api.report_pod(key, uid, UNSCHEDULABLE_REASON, reason), "report_pod", key)
            else:
                await self._report_gang(key, "Pending", UNSCHEDULABLE_REASON, reason)

    def explain_pending(self, pod_key: str) -> str:
        """Why a pod of ours is not bound yet, in the words last shown for it (names its gang)."""
        pod = self.state.pods.get(pod_key)
        if pod is None:
            return f"pod {pod_key}: not found"
        if not pod.gang:
            status = self.queue.status.get(pod_key)
            if status is not None and status.reason:
                return status.reason
            return f"pod {pod_key}: not attempted yet"
        gangs = self._group_of(pod)
        unit_key = gangs[0] if gangs else pod.gang
        info = self.state.gangs.get(pod.gang)
        waiting = self._waiting.get(unit_key)
        if pod.assumed_node and waiting is not None:
            return (f"{_label(waiting.gangs)}: waiting at Permit ({self._quorum_words(waiting.gangs)}) "
                    f"until t={waiting.deadline:g}")
        if info is not None and info.last_reason:
            return info.last_reason
        return f"{_label(gangs or (pod.gang,))}: not attempted yet"

    def _preempt(self, unit: Unit, failure: Unschedulable, now: float, group: anyio.abc.TaskGroup) -> str:
        """Ask the hook for a preemption plan and carry it out; returns a note for the pending reason."""
        preemptee = Preemptee(key=unit.key, gangs=unit.gangs, pods=unit.pods, priority=unit.priority)
        plan = self.preemptor.plan(self.state, preemptee, failure)
        if plan is None:
            return ""
        if not plan.victims and not plan.nominations:
            return plan.explanation  # an empty plan only says why there is no preemption
        self.stats.preemptions += 1
        self._carry_out(unit, plan, now, group)
        return f"preempting {len(plan.victims)} pod(s) of {', '.join(plan.victim_jobs) or 'lower-priority jobs'}"

    def _carry_out(self, unit: Unit, plan: PreemptionPlanLike, now: float, group: anyio.abc.TaskGroup) -> None:
        state = self.state
        record = self.journal.record
        nodes = sorted({a.node for a in plan.nominations})
        preemptor = unit.key
        record(PreemptionPlanned(gang=preemptor, victims=list(plan.victims), victim_jobs=list(plan.victim_jobs),
                                 nodes=nodes, explanation=plan.explanation))
        trigger = unit.pods[0] if unit.pods else unit.key
        job = f"gang {preemptor}" if unit.gangs else f"pod {preemptor}"
        message = f"preempted by {job} (priority {unit.priority}) to make room for pod {trigger}"
        for victim in plan.victims:
            pod = state.pods.get(victim)
            if pod is None:
                continue
            record(EvictionRequested(pod=victim, uid=pod.uid, preemptor=preemptor, reason=message))
            group.start_soon(self._evict, victim, pod.uid, preemptor, message)
        ours = set(unit.pods)
        nominated_pods: list[str] = []
        for assignment in plan.nominations:
            pod = state.pods.get(assignment.pod)
            if pod is None:
                continue
            record(PodNominated(pod=pod.key, uid=pod.uid, node=assignment.node, gang=pod.gang, priority=pod.priority))
            nominated_pods.append(pod.key)
            ours.add(pod.key)
            group.start_soon(self._set_nominated_node, pod.key, pod.uid, assignment.node)
        for node in nodes:
            info = state.nodes.get(node)
            if info is None:
                continue
            for key in sorted(info.nominated):
                other = info.nominated[key]
                if key in ours or other.priority >= unit.priority or (other.gang and other.gang in unit.gangs):
                    continue
                record(NominationCleared(pod=key, reason=f"node {node} nominated for higher-priority {job}"))
                group.start_soon(self._set_nominated_node, key, other.uid, None)
        if nominated_pods:
            existing = self._nominated.get(unit.key)
            pods = tuple(sorted(set(nominated_pods) | set(existing.pods if existing else ())))
            self._nominated[unit.key] = _Nominated(unit.gangs, pods, now + self._timeout_of(unit.gangs))

    async def _evict(self, pod: str, uid: str, preemptor: str, message: str) -> None:
        async with self._limiter:
            await self._call(self.api.set_disruption_condition(pod, uid, preemptor=preemptor, message=message),
                             "set_disruption_condition", pod)
            await self._call(self.api.evict(pod, uid, preemptor=preemptor, message=message, grace_seconds=None),
                             "evict", pod)

    # ------------------------------------------------------------------ API calls that only report

    async def _report_gang(self, gang: str, phase: GangPhase, reason: str, message: str) -> None:
        await self._call(self.api.report_gang(gang, phase, reason, message), "report_gang", gang)

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


def _label(gangs: Sequence[str]) -> str:
    return f"gang {gangs[0]}" if len(gangs) == 1 else f"GangGroup {', '.join(gangs)}"


def _node_shape(node: Node) -> tuple[object, ...]:
    """What of a Node placement reads; a change in anything else cannot let a parked unit fit."""
    return (node.metadata.labels, node.spec.taints, node.spec.unschedulable, node.status.allocatable)

