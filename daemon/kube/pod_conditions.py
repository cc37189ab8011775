"""Every pending member of a gang carries `PodScheduled=False` with the gang's reason: `Unschedulable` once
it was tried, `NotReadyForScheduling` while it waits for its members to appear.

kube-scheduler leaves a pod it could not place with `Unschedulable` (and Volcano every pending task
of a gang), and it is what the rest of the cluster reads: cluster-autoscaler lists as "unschedulable
pods" exactly the pods whose `PodScheduled` condition is `False` with reason `Unschedulable`, and
Karpenter provisions for the same pods. A pending gang must look to them like pods that need nodes.
A gang short of members is another matter: kube-scheduler's GangScheduling (and Koordinator's
Coscheduling) hold its pods at PreEnqueue, untried, and since KEP-5501 kube-scheduler marks such a
pod `NotReadyForScheduling` once the hold has lasted 5 s; no autoscaler adds nodes for it. So do we
(`ClusterState.not_ready_for_scheduling`), except for scheduler-plugins' gangs, whose Coscheduling
fails them at PreFilter: `Unschedulable` at once, as there, and KAI's, whose scheduler writes no pod
condition for a job not ready (only its `NotReady` Event on the PodGroup): they get none. A KAI PodGroup
with `markUnschedulable: false` asks that its pods never be marked `Unschedulable` (KAI then writes them no
condition): they get none.

What is written: for each of our pods that is pending (not bound, not assumed, not being deleted)
and whose gang has a reason (`GangInfo.last_reason`: why it waits, why it timed out), the condition
`{type: PodScheduled, status: "False", reason: Unschedulable | NotReadyForScheduling, message: <the
gang's reason>, observedGeneration: <the pod's generation>}` (kube-scheduler's since 1.34; a spec change,
which moves the generation, has the condition written again), by a strategic merge patch of `pods/status`
(the pod's other conditions are kept).
`NotReadyForScheduling` is written only once the pod has wanted it for `not_ready_delay_seconds`
(5 s), so a gang whose pods all arrive within that costs no patch. `lastTransitionTime`
is kept when the pod already had `PodScheduled=False` (kube-scheduler's `UpdatePodCondition`),
so cluster-autoscaler's "unschedulable since" does not move when only the message does. Pods
without a gang are reported by the loop (`ClusterAPI.report_pod`); this module leaves them alone.

Only on change: a pod whose condition (as the watch last showed it, or as we last wrote it while
the watch has not brought it back) already reads so is not patched. A pod that arrives (or becomes
pending again) is checked at once; when a gang's reason changes, its pending members are
rewritten: a small gang's at once, a large gang's no sooner after its previous sweep than that
sweep's patches take at `sweep_pods_per_second` (1,000), and at most `refresh_seconds` (5 s) after
it (the newest reason at that time; the last reason is always written). An 8,000-pod gang whose
reason changes with every batch of arriving pods thus costs one patch per pod as it arrives plus
one sweep of its members per 5 s, not one sweep per change (measured: 8,360 patches for 8,000
pods arriving in 16 batches). Patches run `concurrency` at a time in this module's own task, so
planning never waits for them; a failed patch is tried again at the next pass, backing off.

Runs only inside the leader's work (`daemon.cli.run`); every write passes the adapter's `WriteGate`.
Must never: patch a pod whose condition already says the same, write for a pod that is placed or not
ours, or hold up the scheduling loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import anyio
import structlog

from daemon.scheduling.decisions import NOT_READY_REASON
from daemon.scheduling.ports import ApiOutcome
from events.dispatch import each, exhaustive
from events.model import (
    BUDGET_EVENTS,
    COMPOSITE_EVENTS,
    JOB_OBJECT_EVENTS,
    POD_GROUP_EVENTS,
    PRIORITY_CLASS_EVENTS,
    QUOTA_OBJECT_EVENTS,
    TOPOLOGY_OBJECT_EVENTS,
    VOLUME_EVENTS,
    BindFailed,
    BindRequested,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    WorkloadDeleted,
    WorkloadUpserted,
    object_key,
)
from events.objects import CONDITION_MESSAGE_LIMIT
from state.cluster import ClusterState
from state.gangs import KAI

log = structlog.get_logger("toposched.conditions")

POD_SCHEDULED: Final = "PodScheduled"
UNSCHEDULABLE: Final = "Unschedulable"  # v1.PodReasonUnschedulable, what cluster-autoscaler filters on
NOT_READY: Final = NOT_READY_REASON  # v1.PodReasonNotReadyForScheduling, which it does not
MESSAGE_LIMIT: Final = CONDITION_MESSAGE_LIMIT
DEFAULT_CONCURRENCY: Final = 8
DEFAULT_REFRESH_SECONDS: Final = 5.0
DEFAULT_SWEEP_PODS_PER_SECOND: Final = 1000.0
DEFAULT_NOT_READY_DELAY_SECONDS: Final = 5.0  # kube-scheduler's, fixed (KEP-5501)
MAX_RETRY_SECONDS: Final = 30.0


class PodConditionWriter(Protocol):
    """The writes this module makes (`daemon.kube.cluster_api.KubeClusterAPI` implements them)."""

    async def set_pod_condition(self, pod: str, uid: str, condition: dict[str, Any]) -> ApiOutcome: ...

    async def remove_pod_condition(self, pod: str, uid: str, resource_version: str, condition_type: str
                                   ) -> ApiOutcome: ...


def desired(state: ClusterState, key: str) -> tuple[str, str] | None:
    """The reason and message the pod's `PodScheduled=False` condition must carry; None when it needs none
    from us."""
    pod = state.pods.get(key)
    if pod is None or not pod.gang or key not in state.pending:
        return None
    gang = state.gangs.get(pod.gang)
    if gang is None or not gang.last_reason:
        return None
    reason = NOT_READY if state.not_ready_for_scheduling(pod.gang) else UNSCHEDULABLE
    # KAI's status updater records only its NotReady Event for a job not ready for scheduling, and touches no
    # pod; and its spec.markUnschedulable: false asks that its pods never be marked.
    spec = gang.spec
    if spec is not None and spec.dialect == KAI and (reason == NOT_READY or not spec.marks_unschedulable):
        return None
    return reason, gang.last_reason[:MESSAGE_LIMIT]


def shows(state: ClusterState, key: str, reason: str, message: str) -> tuple[bool, str | None]:
    """Whether the pod (as folded) already carries the condition with `reason` and `message`, decided for its
    present generation; and the transition time to keep (that of a `PodScheduled=False` it has, else None: now)."""
    obj = state.pods[key].obj
    for condition in obj.status.conditions:
        if condition.type == POD_SCHEDULED:
            keep = condition.last_transition_time if condition.status == "False" else None
            same = (condition.status == "False" and condition.reason == reason and condition.message == message
                    and condition.observed_generation == obj.metadata.generation)
            return same, keep
    return False, None


class PendingPodConditions:
    """One leader's writer of the pending members' PodScheduled condition (see the module docstring)."""

    def __init__(self, state: ClusterState, writer: PodConditionWriter, *, concurrency: int = DEFAULT_CONCURRENCY,
                 refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
                 sweep_pods_per_second: float = DEFAULT_SWEEP_PODS_PER_SECOND,
                 not_ready_delay_seconds: float = DEFAULT_NOT_READY_DELAY_SECONDS,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.state = state
        self.writer = writer
        self.refresh_seconds = refresh_seconds
        self.sweep_pods_per_second = sweep_pods_per_second
        self.not_ready_delay_seconds = not_ready_delay_seconds
        self._clock = clock
        self._wall = wall
        self._limiter = anyio.CapacityLimiter(concurrency)
        self._pods: set[str] = set()  # pods to check at the next pass
        self._gangs: set[str] = {key for key, gang in state.gangs.items() if gang.last_reason}  # members to sweep
        self._next_sweep: dict[str, float] = {}  # gang -> when its members may be swept again
        # pod -> (uid, reason, message, generation) written, not back yet
        self._written: dict[str, tuple[str, str, str, int]] = {}
        # pod -> since when it has been wanting NotReadyForScheduling (its gang waiting for members), which it
        # is shown only once that has lasted `not_ready_delay_seconds`; and pod -> when, for those not shown yet.
        self._held_since: dict[str, float] = {}
        self._delayed: dict[str, float] = {}
        # pod -> when its NotReadyForScheduling goes: placed (assumed), it is past the hold but not bound yet.
        self._clearing: dict[str, float] = {}
        self.cleared = 0
        self._wake = anyio.Event()
        self._wake.set()  # the first pass (a new leader) checks every gang with a reason
        self._failures = 0
        self.patches = 0
        self.failed = 0

    # ------------------------------------------------------------------ observations

    def notice_all(self, events: Sequence[Event]) -> None:
        """Journal listener (per batch: `Journal.subscribe_batches`): note the pods and gangs whose
        condition may have to change, as the state is once the batch is folded."""
        for event in events:
            handler = _NOTICED[type(event)]
            if handler is not None:
                handler(self, event)

    def _gang_reason(self, event: GangPending | GangTimedOut) -> None:
        if event.gang in self.state.gangs:
            self._gangs.add(event.gang)
            self._wake.set()

    def _pod(self, event: PodUpserted | PodForgotten | BindFailed) -> None:
        if isinstance(event, PodUpserted):
            key = object_key(event.pod.metadata.namespace, event.pod.metadata.name)
        else:
            key = event.pod
        pod = self.state.pods.get(key)
        if pod is not None and pod.gang and key in self.state.pending:
            self._pods.add(key)
            self._wake.set()
        else:
            self._forget(key)
            self._clear_if_held(key)

    def _pod_assumed(self, event: PodAssumed) -> None:
        self._forget(event.pod)
        self._clear_if_held(event.pod)

    def _pod_deleted(self, event: PodDeleted) -> None:
        self._forget(event.key)
        self._clearing.pop(event.key, None)

    def _forget(self, key: str) -> None:
        self._written.pop(key, None)
        self._held_since.pop(key, None)
        self._delayed.pop(key, None)

    def _clear_if_held(self, key: str) -> None:
        """A pod placed but not bound yet (its volumes being provisioned, its gang waiting at Permit) that still
        says NotReadyForScheduling has passed that hold: the condition goes, as kube-scheduler removes it
        once the pod passes PreEnqueue, after the same delay (a Binding within it makes the write needless)."""
        if self._says_not_ready(key):
            self._clearing.setdefault(key, self._clock() + self.not_ready_delay_seconds)
            self._wake.set()
        else:
            self._clearing.pop(key, None)

    def _says_not_ready(self, key: str) -> bool:
        """Placed, not bound, and its PodScheduled condition (as folded) is False/NotReadyForScheduling."""
        pod = self.state.pods.get(key)
        if pod is None or not pod.assumed_node or pod.node_name:
            return False
        return any(c.type == POD_SCHEDULED and c.status == "False" and c.reason == NOT_READY
                   for c in pod.obj.status.conditions)

    # ------------------------------------------------------------------ writing

    async def run(self) -> None:
        """Until cancelled: a pass whenever something changed, or when a deferred sweep falls due."""
        while True:
            deadline = self._next_deadline()
            with anyio.move_on_after(math.inf if deadline is None else max(0.0, deadline - self._clock())):
                await self._wake.wait()
            self._wake = anyio.Event()
            if await self.sync_once():
                self._failures = 0
            else:
                self._failures += 1
                await anyio.sleep(min(MAX_RETRY_SECONDS, 0.1 * 2 ** self._failures))

    def _next_deadline(self) -> float | None:
        due = [self._next_sweep.get(gang, 0.0) for gang in self._gangs]
        if self._delayed:
            due.append(min(self._delayed.values()))
        if self._clearing:
            due.append(min(self._clearing.values()))
        return min(due) if due else None

    async def sync_once(self) -> bool:
        """Patch every pod checked now whose condition differs; False when a patch failed (tried again)."""
        now = self._clock()
        checks = dict.fromkeys(self._pods, False)  # pod -> swept (its gang's reason changed)
        self._pods = set()
        for key in [key for key, at in self._delayed.items() if at <= now]:
            del self._delayed[key]
            checks[key] = True  # its delay is over: it is written now, whatever it showed before
        for gang in sorted(self._gangs):
            if self._next_sweep.get(gang, 0.0) > now:
                continue  # swept a moment ago: its newest reason goes out when the interval is over
            self._gangs.discard(gang)
            info = self.state.gangs.get(gang)
            if info is None:
                continue
            members = [key for key in info.members if key in self.state.pending]
            # A small gang is swept again at once; a large one no sooner than its sweep costs at
            # `sweep_pods_per_second`, and at most `refresh_seconds` later.
            self._next_sweep[gang] = now + min(self.refresh_seconds, len(members) / self.sweep_pods_per_second)
            checks.update((key, True) for key in members)
        for gang in [gang for gang, at in self._next_sweep.items() if at <= now and gang not in self._gangs]:
            del self._next_sweep[gang]  # keeps the map to the gangs swept within the interval
        complete = True

        async def check(key: str, swept: bool) -> None:
            nonlocal complete
            async with self._limiter:
                if not await self._write_if_needed(key, swept):
                    complete = False
                    self._pods.add(key)

        # A task only for a pod that needs a patch now: most checks (a gang's pods arriving before it
        # has a reason, echoes of our own patches) need none, and a task each cost more than the check.
        due = [key for key in sorted(checks) if self._condition_due(key, checks[key]) is not None]
        clears = sorted(key for key, at in self._clearing.items() if at <= now)
        for key in clears:
            del self._clearing[key]

        async def clear(key: str) -> None:
            nonlocal complete
            async with self._limiter:
                if not await self._clear_if_needed(key):
                    complete = False
                    self._clearing[key] = self._clock()

        async with anyio.create_task_group() as group:
            for key in due:
                group.start_soon(check, key, checks[key])
            for key in clears:
                group.start_soon(clear, key)
        return complete

    async def _clear_if_needed(self, key: str) -> bool:
        """Remove the pod's NotReadyForScheduling if it still says so, placed and unbound; False when the write
        failed and must be tried again."""
        if not self._says_not_ready(key):
            return True
        pod = self.state.pods[key]
        outcome = await self.writer.remove_pod_condition(key, pod.uid, pod.obj.metadata.resource_version,
                                                         POD_SCHEDULED)
        if outcome.ok:
            self.cleared += 1
            return True
        if not outcome.retriable:
            return True  # gone, or changed since (bound): its change comes by watch
        self.failed += 1
        log.warning("pod.condition_clear_failed", pod=key, reason=outcome.reason)
        return False

    def _condition_due(self, key: str, swept: bool) -> dict[str, Any] | None:
        """The condition to patch onto the pod now, or None when none is (its bookkeeping done)."""
        wanted = desired(self.state, key)
        if wanted is None:
            self._forget(key)
            return None
        reason, message = wanted
        pod = self.state.pods[key]
        same, transition = shows(self.state, key, reason, message)
        if reason != NOT_READY:
            self._held_since.pop(key, None)
            self._delayed.pop(key, None)
        if same:
            self._written.pop(key, None)
            return None
        generation = pod.obj.metadata.generation
        if self._written.get(key) == (pod.uid, reason, message, generation):
            return None  # written; the watch has not brought it back yet
        if reason == NOT_READY:
            # As kube-scheduler: only a hold that lasts is shown, so a gang whose pods all arrive within the
            # delay is never marked at all.
            due = self._held_since.setdefault(key, self._clock()) + self.not_ready_delay_seconds
            if self._clock() < due:
                self._delayed[key] = due
                return None
        if not swept and (transition is not None or key in self._written):
            # It already says PodScheduled=False, with an older reason of its gang: the gang's next sweep
            # rewrites it (at most one per refresh_seconds), not every echo of a pod update.
            self._gangs.add(pod.gang)
            return None
        # As kube-scheduler (PodObservedGenerationTracking, on since 1.34): the pod's generation it was decided for.
        return {"type": POD_SCHEDULED, "status": "False", "reason": reason, "message": message,
                "lastTransitionTime": transition or _timestamp(self._wall()),
                **({"observedGeneration": generation} if generation else {})}

    async def _write_if_needed(self, key: str, swept: bool) -> bool:
        """Asked again when its turn comes: the pod or its gang's reason may have changed meanwhile."""
        condition = self._condition_due(key, swept)
        if condition is None:
            return True
        pod = self.state.pods[key]
        outcome = await self.writer.set_pod_condition(key, pod.uid, condition)
        if outcome.ok:
            self.patches += 1
            self._written[key] = (pod.uid, condition["reason"], condition["message"],
                                  condition.get("observedGeneration", 0))
            return True
        if not outcome.retriable:
            return True  # the pod is gone: its deletion comes by watch
        self.failed += 1
        log.warning("pod.condition_failed", pod=key, reason=outcome.reason)
        return False


def _timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


# Event type -> what it can change of the conditions this module writes (exhaustive, events.dispatch).
_NOTICED: Final[dict[type, Callable[[PendingPodConditions, Any], None] | None]] = exhaustive(
    "the pending pods' conditions", {
        **each((GangPending, GangTimedOut), PendingPodConditions._gang_reason),
        **each((PodUpserted, PodForgotten, BindFailed), PendingPodConditions._pod),
        PodAssumed: PendingPodConditions._pod_assumed,
        PodDeleted: PendingPodConditions._pod_deleted,
        # A plan (GangPlanned) clears the reason and takes the pods out of pending; the rest changes
        # neither a gang's reason nor which pods are pending.
        **each((*POD_GROUP_EVENTS, *TOPOLOGY_OBJECT_EVENTS, *QUOTA_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS, GangPlanned,
                BindRequested, PodBound, PodNominated, NominationCleared, EvictionRequested,
                PreemptionPlanned, NodeUpserted, NodeDeleted, WorkloadUpserted, WorkloadDeleted, ObjectUndecodable,
                *COMPOSITE_EVENTS, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS), None),
    })
