"""What the scheduler did, told three ways: a gang's story in the log, spans per attempt, metrics.

`SchedulingObserver` hears the loop twice. As the loop's `Instruments` (`daemon.scheduling.ports`) it
is told when the real work starts and ends: an attempt (planning), the preemption planner, each
Binding call, the binds of a unit settling. As a `Journal` listener it sees every decision event
right after it is folded (GangPlanned, PodAssumed, BindRequested, GangPending, PreemptionPlanned,
EvictionRequested, GangTimedOut, PodBound, ...). The events say *what* was decided, the instruments
*when* the work around it ran, so spans and durations measure the work itself (not timestamps of
events recorded in one go). The loop carries no telemetry code beyond those calls.

The story (info level, one JSON line per step; `gang` = namespace/name, `pod` for a pod without a
gang or a pod of the gang the line is about):
  `gang.arrived` (first member or PodGroup seen), `gang.attempt` (attempt N, outcome planned |
  unschedulable | error | adopted, duration of the decision), `gang.placed` (domain, layer, nodes),
  `gang.waiting_at_permit` (assumed, below minMember), `gang.pending` (reason; only when it changed),
  `gang.preempting` (victims), `gang.preempted` (a victim gang: which pods, for whom), `gang.bound`
  (minMember bound: pods, attempt duration), `gang.bind_failed`, `gang.timed_out`; the same with a
  `pod.` prefix for pods without a gang. A GangGroup's lines are written once per gang, each with the
  `group`. Each pod's own Binding is `pod.bound` at debug level. A pod without a gang writes
`pod.bound`, `pod.pending`, `pod.preempting` and `pod.preempted` at info; its `pod.arrived`,
`pod.attempt` and `pod.placed` at debug (one line per pod at info: 100,000 pods are a lot of lines).

Spans, one trace per attempt (attribute names follow the OpenTelemetry semantic conventions where
one exists: `k8s.namespace.name`, `k8s.pod.name`, `k8s.pod.uid`, `k8s.node.name`, `error.type`;
ours are under `toposched.`):
  `gang.attempt` (or `pod.attempt`)       toposched.gang, toposched.attempt, toposched.result
    ├─ `gang.plan`      placement, from the attempt's start to a plan (or to preemption planning)
    ├─ `gang.preempt`   the preemption planner's call (victims, nominated nodes)
    ├─ `gang.permit`    first pod assumed until the binds start (or the wait times out)
    └─ `gang.bind`      the binds, one `pod.bind` per Binding call
  The attempt that binds a unit after a preemption made room for it links to that `gang.preempt`.
  Attempt numbers count every attempt of a unit from 1, without gaps.

Metrics (see `daemon.telemetry.metrics`): attempts and their duration by result (planning to
settled: bound, no plan, failed, timed out), pod and gang end-to-end latency, log appends, watch
events, preemptions, timeouts; `refresh_gauges()` sets the pending gauges by queue and reason class.

What it keeps per gang or pod (open attempts, attempt counters, reason classes) is released when the
gang or the pod is deleted (gangs that lose their last member without an event of their own: at the
next `refresh_gauges()`).

Must never: change the state, decide anything, block, or raise into the loop (a failure here is
logged and swallowed).
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

import structlog
from opentelemetry import trace
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.semconv.attributes.k8s_attributes import (
    K8S_NAMESPACE_NAME,
    K8S_NODE_NAME,
    K8S_POD_NAME,
    K8S_POD_UID,
)
from opentelemetry.trace import Span, SpanContext, Status, StatusCode

from daemon.telemetry.metrics import RESULT_ERROR, RESULT_SCHEDULED, RESULT_UNSCHEDULABLE, Metrics
from daemon.telemetry.observability import log_enabled
from events.dispatch import each, exhaustive
from events.model import (
    BindFailed,
    BindRequested,
    BudgetDeleted,
    BudgetUpserted,
    CapacityElasticQuotaDeleted,
    CapacityElasticQuotaUpserted,
    ClaimDeleted,
    ClaimUpserted,
    CompositePodGroupDeleted,
    CompositePodGroupUpserted,
    CSINodeDeleted,
    CSINodeUpserted,
    ElasticQuotaDeleted,
    ElasticQuotaUpserted,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    HyperNodeDeleted,
    HyperNodeUpserted,
    KaiPodGroupDeleted,
    KaiPodGroupUpserted,
    KaiQueueDeleted,
    KaiQueueUpserted,
    KaiTopologyDeleted,
    KaiTopologyUpserted,
    KubeflowJobDeleted,
    KubeflowJobUpserted,
    KubePodGroupDeleted,
    KubePodGroupUpserted,
    KueueTopologyDeleted,
    KueueTopologyUpserted,
    NetworkTopologyDeleted,
    NetworkTopologyUpserted,
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
    PriorityClassDeleted,
    PriorityClassUpserted,
    QueueDeleted,
    QueueUpserted,
    SchedulerPluginsPodGroupDeleted,
    SchedulerPluginsPodGroupUpserted,
    StorageClassDeleted,
    StorageClassUpserted,
    VolcanoJobDeleted,
    VolcanoJobUpserted,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    VolumeDeleted,
    VolumeUpserted,
    WorkloadDeleted,
    WorkloadUpserted,
    object_key,
)
from events.objects import Pod, PodStatus
from state.cluster import ClusterState

log = structlog.get_logger("toposched.scheduling")

# A pod without a gang says these steps at debug level: at info it says only that it was bound, why
# it waits (when that changed) and preemptions, one line per pod, as kube-scheduler does.
_LONE_DETAIL = frozenset({"attempt"})
# A `gang.placed` line names at most this many nodes (and says how many there were).
PLACED_NODES_SHOWN = 64
_TEXT_LIMIT = 512  # explanations and reasons on spans

# Reason classes of the pending gauges (`toposched_pending_pods{reason}`): the constraint that failed,
# in a few words an operator can alert on, plus what is not a failed plan.
REASON_NEW = "new"  # not attempted yet
REASON_PERMIT = "permit"  # placed, waiting at Permit for its gang's minMember
REASON_TIMEOUT = "timeout"  # gave up at Permit after scheduleTimeoutSeconds
REASON_BIND_FAILED = "bind-failed"
REASON_ERROR = "error"  # handling it raised (an internal error): parked
_CONSTRAINT_CLASS = {
    "capacity": "capacity",
    "must-gather": "topology",
    "hard-tier": "topology",
    "sub-group": "topology",
    "quota": "quota",
    "members": "waiting-for-members",
    "invalid": "invalid",
    "pod-fit": "pod-fit",
    "volume": "waiting-for-volumes",  # a claim not usable yet (missing, unbound, ...): state/volumes.py
}
REASON_CLASSES = (REASON_NEW, *dict.fromkeys(_CONSTRAINT_CLASS.values()), REASON_PERMIT, REASON_TIMEOUT,
                  REASON_BIND_FAILED, REASON_ERROR)
QUEUE_PERMIT = "permit"  # pods assumed and held at Permit (not in the scheduling queue)
# kube-scheduler's `gated`: held before the queue by a PreEnqueue check, here a gang short of members
# (`ClusterState.not_ready_for_scheduling`).
QUEUE_GATED = "gated"

# `toposched.result` of an attempt that ended without a result of its own.
_SUPERSEDED = "superseded"
_DELETED = "deleted"

_F = TypeVar("_F", bound=Callable[..., None])


def _guarded(method: _F) -> _F:
    """A failure in telemetry is logged, never raised into the scheduler loop."""

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> None:
        try:
            method(*args, **kwargs)
        except Exception:
            log.exception("telemetry.observer_failed", call=method.__name__)

    return guarded  # type: ignore[return-value]


class QueueView(Protocol):
    """Which queue a pending gang or lone pod is in: the scheduler's (`daemon.scheduling.loop.Scheduler`)."""

    def queue_of(self, key: str) -> str:
        """`active`, `backoff` or `unschedulable` (kube-scheduler's queue names)."""
        ...


class BindResult(Protocol):
    """What telemetry reads of a Binding's outcome (`daemon.scheduling.ports.BindOutcome`)."""

    @property
    def status(self) -> str: ...

    @property
    def node(self) -> str: ...

    @property
    def reason(self) -> str: ...


class _Attempt:
    """One attempt of a unit, from planning until its binds settle (or it gives up)."""

    __slots__ = ("adopted", "assumed", "bind_span", "binding", "gangs", "number", "permit_span", "plan_span", "plans",
                 "pod_spans", "preempt_end", "preempt_span", "reason", "span", "started", "unit", "victims")

    def __init__(self, unit: str, gangs: tuple[str, ...], number: int, span: Span, plan_span: Span | None) -> None:
        self.unit = unit
        self.gangs = gangs
        self.number = number
        self.span = span
        self.started = time.monotonic()
        self.plan_span = plan_span
        self.preempt_span: Span | None = None
        self.preempt_end: int | None = None
        self.permit_span: Span | None = None
        self.bind_span: Span | None = None
        self.pod_spans: dict[str, Span] = {}
        self.plans: dict[str, GangPlanned] = {}  # gang (or the lone pod) -> its plan
        self.assumed: dict[str, str] = {}  # pod -> node, assumed in this attempt
        self.victims: list[str] = []  # pods evicted for this attempt
        self.binding = False  # BindRequested seen: Permit passed
        self.adopted = False
        self.reason = ""

    @property
    def lone(self) -> bool:
        return not self.gangs

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


class SchedulingObserver:
    """The loop's instruments and a journal listener: the story, spans and metrics (module docstring)."""

    def __init__(self, state: ClusterState, metrics: Metrics, tracer: trace.Tracer | None = None) -> None:
        self.state = state
        self.metrics = metrics
        self.tracer = tracer or trace.get_tracer("toposched")
        # No span is ever recorded (no exporter configured): none is made, and no attributes for one.
        self._spans = not isinstance(self.tracer, trace.NoOpTracer)
        self._attempts: dict[str, _Attempt] = {}  # unit -> its open attempt
        self._current: _Attempt | None = None  # the attempt whose decision is being made now
        self._unit_of: dict[str, str] = {}  # gang -> unit, for gangs with an open attempt
        self._numbers: dict[str, int] = {}  # unit -> attempts so far
        self._preemptions: dict[str, SpanContext] = {}  # unit -> its last gang.preempt span (for the link)
        self._reasons: dict[str, str] = {}  # gang or lone pod -> reason class of its last outcome
        self._arrived: set[str] = set()  # gangs whose arrival was logged
        self._gang_done: set[str] = set()  # gangs whose end-to-end latency was observed
        self._bound_count: dict[str, int] = {}  # gang -> members bound (kept incrementally: gangs are large)
        # Objects the state held before this observer (restored from the log) are not new arrivals.
        self._known_until = state.last_time if state.last_seq else float("-inf")
        self._pending_series: set[tuple[str, str]] = set()
        self._tree_version = -1
        self._watch_counters = {
            cls: metrics.watch_events.labels(kind, kind_type) for cls, (kind, kind_type) in _WATCHED.items()
        }
        self._observe_pod_e2e = metrics.pod_e2e.observe
        # Pods of ours the kubelet refused (key -> uid), each reported once; those refused before this
        # observer (restored from the log, or seen by a replica before) are not reported again.
        self._rejected: dict[str, str] = {
            pod.key: pod.uid for pod in state.pods.values() if pod.ours and kubelet_rejected(pod.obj.status)}
        self._rejection_reasons: set[str] = set()

    # ------------------------------------------------------------------ what it holds (tests, memory)

    def tracked(self) -> dict[str, int]:
        """How many gangs or pods each of its maps holds (all 0 once everything is deleted)."""
        return {"attempts": len(self._attempts), "units": len(self._unit_of), "numbers": len(self._numbers),
                "preemptions": len(self._preemptions), "reasons": len(self._reasons), "arrived": len(self._arrived),
                "gang_done": len(self._gang_done), "bound_count": len(self._bound_count),
                "rejected": len(self._rejected)}

    # ------------------------------------------------------------------ the journal listener

    def __call__(self, event: Event) -> None:
        handler = _OBSERVED[type(event)]
        if handler is not None:
            handler(self, event)

    def _watched(self, event: Event) -> None:
        self._watch_counters[type(event)].inc()

    def _pod_upserted(self, event: PodUpserted) -> None:
        self._watched(event)
        meta = event.pod.metadata
        pod = self.state.pods.get(object_key(meta.namespace, meta.name))
        if pod is None or not pod.ours:
            return
        status = event.pod.status
        if status.phase == FAILED and kubelet_rejected(status) and self._rejected.get(pod.key) != pod.uid:
            self._kubelet_rejected(pod.key, pod.uid, event.pod)
        if pod.first_seen <= self._known_until:
            return
        if pod.gang:
            self._gang_seen(pod.gang)
        elif pod.first_seen == event.time and pod.key in self.state.pending and log_enabled(logging.DEBUG):
            log.debug("pod.arrived", pod=pod.key, priority=pod.priority)

    def _group_upserted(self, event: PodGroupUpserted | VolcanoPodGroupUpserted | SchedulerPluginsPodGroupUpserted
                        | KubePodGroupUpserted | KaiPodGroupUpserted) -> None:
        self._watched(event)
        meta = event.pod_group.metadata
        self._gang_seen(object_key(meta.namespace, meta.name))

    def _gang_seen(self, gang: str) -> None:
        if gang in self._arrived:
            return
        info = self.state.gangs.get(gang)
        if info is None or info.first_seen <= self._known_until:
            return
        self._arrived.add(gang)
        spec = info.spec
        log.info("gang.arrived", gang=gang, min_member=spec.min_member if spec is not None else None,
                 members=len(info.members), source=info.source or None)

    def _kubelet_rejected(self, key: str, uid: str, obj: Pod) -> None:
        """A pod we placed that its node's kubelet refused at admission: our view of the node and the
        kubelet's differ (another scheduler placed there meanwhile, or a node's allocatable shrank): loud."""
        self._rejected[key] = uid
        reason = obj.status.reason
        label = reason if reason in self._rejection_reasons else "Other"
        if label == "Other" and _REJECTION_REASON.fullmatch(reason) and len(self._rejection_reasons) < MAX_REASONS:
            self._rejection_reasons.add(reason)
            label = reason
        self.metrics.kubelet_rejections.labels(label).inc()
        log.warning("pod.rejected_by_kubelet", pod=key, node=obj.spec.node_name, reason=reason,
                    message=obj.status.message[:1024])

    def _pod_deleted(self, event: PodDeleted) -> None:
        self._watched(event)
        self._rejected.pop(event.key, None)
        if event.key not in self.state.gangs:  # a lone pod is its own unit
            self._release(event.key)

    def _group_deleted(self, event: PodGroupDeleted | VolcanoPodGroupDeleted | SchedulerPluginsPodGroupDeleted
                       | KubePodGroupDeleted | KaiPodGroupDeleted) -> None:
        self._watched(event)
        if event.key not in self.state.gangs:
            self._release(event.key)

    def _release(self, key: str) -> None:
        """Forget a gang or lone pod that is gone (ending an attempt it left open)."""
        unit = self._unit_of.get(key, key)
        attempt = self._attempts.get(unit)
        if attempt is not None and (attempt.lone or all(g not in self.state.gangs for g in attempt.gangs)):
            self._finish(attempt, RESULT_UNSCHEDULABLE, detail=_DELETED)
        for table in (self._numbers, self._preemptions, self._reasons, self._bound_count):
            table.pop(key, None)
        if unit != key and unit not in self.state.gangs and unit not in self.state.pods:
            self._numbers.pop(unit, None)
            self._preemptions.pop(unit, None)
        self._arrived.discard(key)
        self._gang_done.discard(key)

    def _sweep(self) -> None:
        """Release gangs that left the state without an event naming them (their last member went)."""
        gangs, pods = self.state.gangs, self.state.pods
        gone = {key for table in (self._numbers, self._preemptions, self._reasons, self._bound_count)
                for key in table if key not in gangs and key not in pods}
        gone |= {key for key in self._arrived | self._gang_done if key not in gangs}
        for key in sorted(gone):
            self._release(key)

    # ------------------------------------------------------------------ the loop's instruments

    @_guarded
    def attempt_started(self, unit: str, gangs: tuple[str, ...], pods: tuple[str, ...]) -> None:
        previous = self._attempts.get(unit)
        if previous is not None:  # it waited at Permit; this attempt places more of it and goes on
            self._finish(previous, RESULT_UNSCHEDULABLE, detail=_SUPERSEDED)
        attempt = self._open(unit, gangs)
        attempt.span.set_attribute("toposched.pods", len(pods))
        self._current = attempt

    @_guarded
    def preemption_started(self, unit: str) -> None:
        attempt = self._current
        if attempt is None:
            return
        self._end(attempt.plan_span)
        attempt.plan_span = None
        attempt.preempt_span = self._child(attempt, "preempt")

    @_guarded
    def preemption_finished(self, unit: str) -> None:
        if self._current is not None:
            self._current.preempt_end = time.time_ns()

    @_guarded
    def attempt_finished(self, unit: str, outcome: str, constraint: str) -> None:
        attempt = self._current if self._current is not None and self._current.unit == unit else None
        self._current = None
        if attempt is None:
            return
        self._end(attempt.plan_span)
        attempt.plan_span = None
        self._end_preempt(attempt)
        keys = attempt.gangs or (attempt.unit,)
        if constraint:
            attempt.span.set_attribute("toposched.constraint", constraint)
        if self._says(attempt, "attempt"):
            fields: dict[str, object] = {"outcome": outcome, "duration_ms": round(attempt.elapsed * 1000, 3)}
            if constraint:
                fields["constraint"] = constraint
            self._say(attempt, "attempt", fields)
        self._say_victims(attempt)
        if outcome == "planned":
            self._say_placed(attempt)
            if not attempt.binding and not attempt.lone:
                for gang in attempt.gangs:
                    self._reasons[gang] = REASON_PERMIT
                self._say(attempt, "waiting_at_permit", {"assumed": len(attempt.assumed),
                                                         "quorum": self._quorum(attempt.gangs)})
            return
        reason_class = REASON_ERROR if outcome == "error" else _CONSTRAINT_CLASS.get(constraint, constraint or "")
        for key in keys:
            self._reasons[key] = reason_class
        self._finish(attempt, RESULT_ERROR if outcome == "error" else RESULT_UNSCHEDULABLE,
                     detail=attempt.reason or constraint, error_type=reason_class if outcome == "error" else "")

    @_guarded
    def bind_started(self, unit: str, pod: str, node: str) -> None:
        attempt = self._attempts.get(unit)
        if attempt is None or not self._spans:
            return
        if attempt.bind_span is None:
            attempt.bind_span = self._child(attempt, "bind")
        context = trace.set_span_in_context(attempt.bind_span)
        attempt.pod_spans[pod] = self.tracer.start_span("pod.bind", context=context,
                                                        attributes=self._pod_attributes(pod, node))

    @_guarded
    def bind_finished(self, unit: str, pod: str, node: str, outcome: BindResult) -> None:
        attempt = self._attempts.get(unit)
        span = attempt.pod_spans.pop(pod, None) if attempt is not None else None
        if span is None:
            return
        span.set_attribute("toposched.bind.status", outcome.status)
        span.set_attribute(K8S_NODE_NAME, outcome.node or node)
        if outcome.status == "failed":
            span.set_attribute(ERROR_TYPE, "BindFailed")
            span.set_status(Status(StatusCode.ERROR, outcome.reason[:_TEXT_LIMIT]))
        span.end()

    @_guarded
    def binds_settled(self, unit: str, failure: str) -> None:
        attempt = self._attempts.get(unit)
        if attempt is None:
            return
        keys = attempt.gangs or (attempt.unit,)
        if failure:
            for key in keys:
                self._reasons[key] = REASON_BIND_FAILED
            self._say(attempt, "bind_failed", {"reason": failure[:_TEXT_LIMIT]}, level=logging.WARNING)
            self._finish(attempt, RESULT_ERROR, detail=failure, error_type="BindFailed")
            return
        for key in keys:
            self._reasons.pop(key, None)
        if self._says(attempt, "bound"):
            where: dict[str, object] = ({"node": next(iter(attempt.assumed.values()), None)} if attempt.lone
                                        else {"pods": len(attempt.assumed) or None})
            self._say(attempt, "bound", {**where, "duration_ms": round(attempt.elapsed * 1000, 3)})
        self._finish(attempt, RESULT_SCHEDULED)
        if attempt.lone:  # a bound pod is never attempted again: only its deletion is left to see
            self._numbers.pop(unit, None)
            self._preemptions.pop(unit, None)

    @_guarded
    def unit_failed(self, unit: str, stage: str) -> None:
        attempt = self._attempts.get(unit)
        keys = attempt.gangs if attempt is not None and attempt.gangs else (unit,)
        for key in keys:
            self._reasons[key] = REASON_ERROR
        if attempt is not None:
            self._finish(attempt, RESULT_ERROR, detail=f"internal error while {stage}", error_type=REASON_ERROR)

    # ------------------------------------------------------------------ decision events

    def _attempt_of(self, gang_or_pod: str) -> _Attempt | None:
        """The open attempt an event about this gang (or lone pod) belongs to."""
        current = self._current
        if current is not None and (gang_or_pod in current.gangs or gang_or_pod == current.unit):
            return current
        return self._attempts.get(self._unit_of.get(gang_or_pod, gang_or_pod))

    def _number_of(self, gang_or_pod: str) -> int | None:
        """The number of the unit's latest attempt (None before its first)."""
        attempt = self._attempt_of(gang_or_pod)
        if attempt is not None:
            return attempt.number
        info = self.state.gangs.get(gang_or_pod)
        unit = info.spec.gang_group[0] if info is not None and info.spec is not None else gang_or_pod
        return self._numbers.get(unit)

    def _unit_of_pod(self, pod_key: str) -> tuple[str, tuple[str, ...]]:
        """The unit a pod is scheduled in, and its gangs (none for a lone pod)."""
        pod = self.state.pods.get(pod_key)
        if pod is None or not pod.gang:
            return pod_key, ()
        unit = self._unit_of.get(pod.gang)
        if unit is not None:
            return unit, self._attempts[unit].gangs if unit in self._attempts else (pod.gang,)
        info = self.state.gangs.get(pod.gang)
        gangs = info.spec.gang_group if info is not None and info.spec is not None else (pod.gang,)
        return gangs[0], gangs

    def _planned(self, event: GangPlanned) -> None:
        attempt = self._attempt_of(event.gang)
        if attempt is None:
            return
        attempt.plans[event.gang] = event
        if attempt.plan_span is not None:
            attempt.plan_span.set_attributes({"toposched.placement.domain": event.domain,
                                              "toposched.placement.layer": event.layer, "toposched.pods": event.pods,
                                              "toposched.placement.explanation": event.explanation[:_TEXT_LIMIT]})
            attempt.plan_span.end()
            attempt.plan_span = None

    def _assumed(self, event: PodAssumed) -> None:
        attempt = self._attempt_of(event.gang or event.pod)
        if attempt is None:
            return
        attempt.assumed[event.pod] = event.node
        if attempt.permit_span is None and not attempt.lone:
            attempt.permit_span = self._child(attempt, "permit")

    def _pending(self, event: GangPending) -> None:
        attempt = self._attempt_of(event.gang)
        if attempt is not None:
            attempt.reason = event.reason
            attempt.span.set_attribute("toposched.reason", event.reason[:_TEXT_LIMIT])
        if event.gang in self.state.gangs:
            log.info("gang.pending", gang=event.gang, attempt=self._number_of(event.gang), reason=event.reason)
        else:
            log.info("pod.pending", pod=event.gang, attempt=self._number_of(event.gang), reason=event.reason)

    def _preempting(self, event: PreemptionPlanned) -> None:
        self.metrics.preemption_attempts.inc()
        attempt = self._attempt_of(event.gang)
        fields: dict[str, object] = {"victims": len(event.victims), "victim_jobs": list(event.victim_jobs),
                                     "nodes": list(event.nodes)}
        if event.reclaim_from:
            fields["reclaim_from"] = list(event.reclaim_from)
        if attempt is None:
            log.info("gang.preempting" if event.gang in self.state.gangs else "pod.preempting",
                     **_key_fields(event.gang, event.gang in self.state.gangs), **fields)
            return
        self._say(attempt, "preempting", fields)
        span = attempt.preempt_span
        if span is not None:
            span.set_attributes({"toposched.preemption.victims": len(event.victims),
                                 "toposched.preemption.victim_jobs": ",".join(event.victim_jobs)[:_TEXT_LIMIT],
                                 "toposched.preemption.nodes": len(event.nodes),
                                 "toposched.preemption.explanation": event.explanation[:_TEXT_LIMIT]})
            self._preemptions[attempt.unit] = span.get_span_context()
            self._end_preempt(attempt)

    def _evicting(self, event: EvictionRequested) -> None:
        attempt = self._attempt_of(event.preemptor)
        if attempt is not None:
            attempt.victims.append(event.pod)
        else:
            self._say_victim_pods(event.preemptor, [event.pod])

    def _bind_requested(self, event: BindRequested) -> None:
        unit, gangs = self._unit_of_pod(event.pod)
        attempt = self._attempts.get(unit)
        if attempt is None:  # a plan adopted from the log at start-up passed Permit: no attempt of ours made it
            attempt = self._open(unit, gangs)
            attempt.adopted = True
            attempt.span.set_attribute("toposched.adopted", True)
            self._end(attempt.plan_span)
            attempt.plan_span = None
            self._say(attempt, "attempt", {"outcome": "adopted"})
        if event.pod not in attempt.assumed:
            attempt.assumed[event.pod] = event.node
        if not attempt.binding:
            attempt.binding = True
            self._end(attempt.permit_span)
            attempt.permit_span = None
            link = self._preemptions.pop(attempt.unit, None)
            if link is not None:
                attempt.span.add_link(link, {"toposched.link": "preempted-for"})
            for gang in attempt.gangs:
                if self._reasons.get(gang) == REASON_PERMIT:
                    del self._reasons[gang]
            attempt.bind_span = self._child(attempt, "bind")

    def _bound(self, event: PodBound) -> None:
        pod = self.state.pods.get(event.pod)
        if pod is not None:
            self._observe_pod_e2e(max(0.0, event.time - pod.first_seen))
        if pod is None or not pod.gang:
            return  # a lone pod's `pod.bound` is its attempt's (`binds_settled`)
        if log_enabled(logging.DEBUG):
            log.debug("pod.bound", gang=pod.gang, pod=event.pod, node=event.node)
        gang = self.state.gangs.get(pod.gang)
        if gang is None or gang.spec is None:
            return
        bound = self._bound_count.get(pod.gang)
        if bound is None:  # first bind seen for this gang: count what is bound already (once)
            bound = sum(1 for member in gang.members if (p := self.state.pods.get(member)) is not None
                        and (p.node_name or p.key == event.pod))
        else:
            bound += 1
        self._bound_count[pod.gang] = bound
        if bound >= gang.spec.min_member and pod.gang not in self._gang_done:
            self._gang_done.add(pod.gang)
            self.metrics.gang_e2e.observe(max(0.0, event.time - gang.first_seen))

    def _bind_failed(self, event: BindFailed) -> None:
        pod = self.state.pods.get(event.pod)
        log.warning("pod.bind_failed", **_key_fields(pod.gang if pod is not None and pod.gang else "", True),
                    pod=event.pod, node=event.node, reason=event.reason[:_TEXT_LIMIT])

    def _timed_out(self, event: GangTimedOut) -> None:
        self.metrics.gang_timeouts.inc()
        self._reasons[event.gang] = REASON_TIMEOUT
        attempt = self._attempt_of(event.gang)
        log.info("gang.timed_out", gang=event.gang, attempt=self._number_of(event.gang), reason=event.reason)
        if attempt is not None:
            for gang in attempt.gangs:
                self._reasons[gang] = REASON_TIMEOUT
            self._finish(attempt, RESULT_UNSCHEDULABLE, detail=f"timed out: {event.reason}")

    # ------------------------------------------------------------------ attempts and spans

    def _open(self, unit: str, gangs: tuple[str, ...]) -> _Attempt:
        number = self._numbers.get(unit, 0) + 1
        self._numbers[unit] = number
        if not self._spans:
            attempt = _Attempt(unit, gangs, number, trace.INVALID_SPAN, trace.INVALID_SPAN)
            self._attempts[unit] = attempt
            for gang in gangs:
                self._unit_of[gang] = unit
            return attempt
        kind = "gang" if gangs else "pod"
        attributes: dict[str, str | int | bool] = {"toposched.attempt": number}
        namespace, _, name = unit.rpartition("/")
        attributes[K8S_NAMESPACE_NAME] = namespace
        if gangs:
            attributes["toposched.gang"] = unit
            if len(gangs) > 1:
                attributes["toposched.gang_group"] = ",".join(gangs)
        else:
            attributes[K8S_POD_NAME] = name
            pod = self.state.pods.get(unit)
            if pod is not None and pod.uid:
                attributes[K8S_POD_UID] = pod.uid
        span = self.tracer.start_span(f"{kind}.attempt", attributes=attributes)
        attempt = _Attempt(unit, gangs, number, span, None)
        attempt.plan_span = self._child(attempt, "plan")
        self._attempts[unit] = attempt
        for gang in gangs:
            self._unit_of[gang] = unit
        return attempt

    def _child(self, attempt: _Attempt, phase: str) -> Span:
        if not self._spans:
            return trace.INVALID_SPAN
        context = trace.set_span_in_context(attempt.span)
        return self.tracer.start_span(f"{'pod' if attempt.lone else 'gang'}.{phase}", context=context)

    @staticmethod
    def _end(span: Span | None) -> None:
        if span is not None and span.is_recording():
            span.end()

    def _end_preempt(self, attempt: _Attempt) -> None:
        span = attempt.preempt_span
        if span is not None:
            span.end(end_time=attempt.preempt_end)
            attempt.preempt_span = None

    def _finish(self, attempt: _Attempt, result: str, *, detail: str = "", error_type: str = "") -> None:
        if self._attempts.get(attempt.unit) is attempt:
            del self._attempts[attempt.unit]
        for gang in attempt.gangs:
            if self._unit_of.get(gang) == attempt.unit:
                del self._unit_of[gang]
        if self._current is attempt:
            self._current = None
        if self._spans:  # (without, every span of the attempt is the invalid one: nothing to end)
            for span in attempt.pod_spans.values():
                span.end()
            attempt.pod_spans.clear()
            for phase in (attempt.plan_span, attempt.permit_span, attempt.bind_span):
                self._end(phase)
            self._end_preempt(attempt)
            span = attempt.span
            span.set_attribute("toposched.result", detail if detail in (_SUPERSEDED, _DELETED) else result)
            if result == RESULT_ERROR:
                span.set_attribute(ERROR_TYPE, error_type or "error")
                span.set_status(Status(StatusCode.ERROR, detail[:_TEXT_LIMIT]))
            elif detail:
                span.set_attribute("toposched.detail", detail[:_TEXT_LIMIT])
            span.end()
        self.metrics.attempt_duration.labels(result).observe(attempt.elapsed)
        self.metrics.attempts.labels(result).inc()

    def _pod_attributes(self, pod_key: str, node: str) -> dict[str, str]:
        namespace, _, name = pod_key.rpartition("/")
        attributes = {K8S_NAMESPACE_NAME: namespace, K8S_POD_NAME: name, K8S_NODE_NAME: node}
        pod = self.state.pods.get(pod_key)
        if pod is not None and pod.uid:
            attributes[K8S_POD_UID] = pod.uid
        return attributes

    # ------------------------------------------------------------------ the story's lines

    @staticmethod
    def _level(about: _Attempt, step: str, level: int) -> int:
        """The level `_say` writes a line at: a lone pod's detail lines are debug."""
        return logging.DEBUG if about.lone and step in _LONE_DETAIL and level == logging.INFO else level

    def _says(self, about: _Attempt, step: str, level: int = logging.INFO) -> bool:
        """Whether `_say` would write this line now (so its fields are only built when it will)."""
        return log_enabled(self._level(about, step, level))

    def _say(self, about: _Attempt, step: str, fields: dict[str, object] | None = None, *,
             level: int = logging.INFO) -> None:
        """One line (with the attempt's number) per gang of the unit, each with its group; one for a lone pod."""
        level = self._level(about, step, level)
        if not log_enabled(level):
            return
        logger = log.bind()  # resolved once (the proxy resolves the configuration on every use)
        present = {"attempt": about.number, **{name: value for name, value in (fields or {}).items()
                                               if value is not None}}
        if about.lone:
            logger.log(level, f"pod.{step}", pod=about.unit, **present)
            return
        group = list(about.gangs) if len(about.gangs) > 1 else None
        for gang in about.gangs:
            if group is not None:
                logger.log(level, f"gang.{step}", gang=gang, group=group, **present)
            else:
                logger.log(level, f"gang.{step}", gang=gang, **present)

    def _say_placed(self, attempt: _Attempt) -> None:
        level = logging.DEBUG if attempt.lone else logging.INFO
        if not log_enabled(level):
            return
        logger = log.bind()
        pods = self.state.pods
        for key in attempt.gangs or (attempt.unit,):
            plan = attempt.plans.get(key)
            if attempt.lone:
                nodes = sorted(set(attempt.assumed.values()))
            else:
                nodes = sorted({node for pod, node in attempt.assumed.items()
                                if (info := pods.get(pod)) is not None and info.gang == key})
            fields: dict[str, object] = {"attempt": attempt.number, "nodes": nodes[:PLACED_NODES_SHOWN]}
            if len(nodes) > PLACED_NODES_SHOWN:
                fields["node_count"] = len(nodes)
            if plan is not None:
                fields.update(domain=plan.domain or "(cluster)", layer=plan.layer, pods=plan.pods)
            if attempt.lone:
                logger.debug("pod.placed", pod=key, **fields)
            else:
                logger.info("gang.placed", gang=key, **fields)

    def _say_victims(self, attempt: _Attempt) -> None:
        if attempt.victims:
            self._say_victim_pods(attempt.unit, attempt.victims)
            attempt.victims = []

    def _say_victim_pods(self, preemptor: str, victims: Iterable[str]) -> None:
        by_gang: dict[str, list[str]] = {}
        for pod_key in victims:
            pod = self.state.pods.get(pod_key)
            by_gang.setdefault(pod.gang if pod is not None and pod.gang else "", []).append(pod_key)
        for gang, pods in sorted(by_gang.items()):
            if gang:
                log.info("gang.preempted", gang=gang, pods=sorted(pods), preemptor=preemptor)
            else:
                for pod_key in sorted(pods):
                    log.info("pod.preempted", pod=pod_key, preemptor=preemptor)

    def _quorum(self, gangs: tuple[str, ...]) -> dict[str, str]:
        """Where each gang stands at Permit: "placed/minMember"."""
        result = {}
        for gang in gangs:
            info = self.state.gangs.get(gang)
            if info is None:
                continue
            placed = sum(1 for key in info.members if (pod := self.state.pods.get(key)) is not None and pod.placed_node)
            result[gang] = f"{placed}/{info.spec.min_member if info.spec is not None else '?'}"
        return result

    # ------------------------------------------------------------------ gauges

    def refresh_gauges(self, queues: QueueView | None = None) -> None:
        """Pending gauges and the topology build time (called on a timer, not per event).

        Pending pods and gangs are labelled by `queue` (`queues.queue_of`: active, backoff,
        unschedulable; `gated` for a gang held for its members; `permit` for pods assumed and held at
        Permit) and `reason` (the class of their
        last outcome, `REASON_CLASSES`). Without `queues` (a standby: no queue of its own) they are 0,
        as kube-scheduler's are on a replica that is not leading.

        The topology tree rebuilds lazily, on its first query after a change. The tick queries it (at
        most once a second) and times the query when it found a new structure and did the work itself
        (a cached answer takes well under a microsecond); a rebuild that placement triggered between
        two ticks is not timed here.
        """
        self._sweep()
        tree = self.state.topology
        started = time.perf_counter()
        version = tree.version
        elapsed = time.perf_counter() - started
        if version != self._tree_version and elapsed > 5e-6:
            self.metrics.topology_build.observe(elapsed)
        self._tree_version = version
        pod_counts: dict[tuple[str, str], int] = {}
        gang_sets: dict[tuple[str, str], set[str]] = {}
        if queues is not None:
            pods = self.state.pods
            queue_of_unit: dict[str, str] = {}
            for key in self.state.pending:
                pod = pods.get(key)
                if pod is None:
                    continue
                unit_key = pod.gang or key
                queue = queue_of_unit.get(unit_key)
                if queue is None:
                    queue = queue_of_unit[unit_key] = (QUEUE_GATED if pod.gang and self.state.not_ready_for_scheduling(
                        pod.gang) else queues.queue_of(unit_key))
                series = (queue, self._reasons.get(unit_key, REASON_NEW))
                pod_counts[series] = pod_counts.get(series, 0) + 1
                if pod.gang:
                    gang_sets.setdefault(series, set()).add(pod.gang)
            for attempt in self._attempts.values():
                if attempt.binding or attempt.lone:
                    continue
                held = [key for key in attempt.assumed
                        if (pod := pods.get(key)) is not None and pod.assumed_node and not pod.node_name]
                if held:
                    series = (QUEUE_PERMIT, REASON_PERMIT)
                    pod_counts[series] = pod_counts.get(series, 0) + len(held)
                    gang_sets.setdefault(series, set()).update(attempt.gangs)
        # Series seen once stay, at 0 when empty: a dashboard sees them fall rather than vanish.
        self._pending_series |= set(pod_counts) | set(gang_sets)
        for series in self._pending_series:
            self.metrics.pending_pods.labels(*series).set(pod_counts.get(series, 0))
            self.metrics.pending_gangs.labels(*series).set(len(gang_sets.get(series, ())))


def _key_fields(key: str, gang: bool) -> dict[str, str]:
    if not key:
        return {}
    return {"gang": key} if gang else {"pod": key}


# Observed objects -> (kind, type) labels of toposched_watch_events_total.
_WATCHED: dict[type, tuple[str, str]] = {
    NodeUpserted: ("Node", "upsert"), NodeDeleted: ("Node", "delete"),
    PodUpserted: ("Pod", "upsert"), PodDeleted: ("Pod", "delete"),
    PodGroupUpserted: ("PodGroup", "upsert"), PodGroupDeleted: ("PodGroup", "delete"),
    VolcanoPodGroupUpserted: ("VolcanoPodGroup", "upsert"), VolcanoPodGroupDeleted: ("VolcanoPodGroup", "delete"),
    SchedulerPluginsPodGroupUpserted: ("SchedulerPluginsPodGroup", "upsert"),
    SchedulerPluginsPodGroupDeleted: ("SchedulerPluginsPodGroup", "delete"),
    KubePodGroupUpserted: ("KubernetesPodGroup", "upsert"), KubePodGroupDeleted: ("KubernetesPodGroup", "delete"),
    WorkloadUpserted: ("Workload", "upsert"), WorkloadDeleted: ("Workload", "delete"),
    CompositePodGroupUpserted: ("CompositePodGroup", "upsert"),
    CompositePodGroupDeleted: ("CompositePodGroup", "delete"),
    NetworkTopologyUpserted: ("ClusterNetworkTopology", "upsert"),
    NetworkTopologyDeleted: ("ClusterNetworkTopology", "delete"),
    HyperNodeUpserted: ("HyperNode", "upsert"), HyperNodeDeleted: ("HyperNode", "delete"),
    KueueTopologyUpserted: ("KueueTopology", "upsert"), KueueTopologyDeleted: ("KueueTopology", "delete"),
    KaiTopologyUpserted: ("KaiTopology", "upsert"), KaiTopologyDeleted: ("KaiTopology", "delete"),
    KaiPodGroupUpserted: ("KaiPodGroup", "upsert"), KaiPodGroupDeleted: ("KaiPodGroup", "delete"),
    PriorityClassUpserted: ("PriorityClass", "upsert"), PriorityClassDeleted: ("PriorityClass", "delete"),
    ElasticQuotaUpserted: ("ElasticQuota", "upsert"), ElasticQuotaDeleted: ("ElasticQuota", "delete"),
    CapacityElasticQuotaUpserted: ("CapacityElasticQuota", "upsert"),
    CapacityElasticQuotaDeleted: ("CapacityElasticQuota", "delete"),
    QueueUpserted: ("Queue", "upsert"), QueueDeleted: ("Queue", "delete"),
    KaiQueueUpserted: ("KaiQueue", "upsert"), KaiQueueDeleted: ("KaiQueue", "delete"),
    ClaimUpserted: ("PersistentVolumeClaim", "upsert"), ClaimDeleted: ("PersistentVolumeClaim", "delete"),
    VolumeUpserted: ("PersistentVolume", "upsert"), VolumeDeleted: ("PersistentVolume", "delete"),
    StorageClassUpserted: ("StorageClass", "upsert"), StorageClassDeleted: ("StorageClass", "delete"),
    CSINodeUpserted: ("CSINode", "upsert"), CSINodeDeleted: ("CSINode", "delete"),
    BudgetUpserted: ("PodDisruptionBudget", "upsert"), BudgetDeleted: ("PodDisruptionBudget", "delete"),
    VolcanoJobUpserted: ("VolcanoJob", "upsert"), VolcanoJobDeleted: ("VolcanoJob", "delete"),
    KubeflowJobUpserted: ("KubeflowJob", "upsert"), KubeflowJobDeleted: ("KubeflowJob", "delete"),
}

KUBELET_REJECTED = "Pod was rejected: "  # the kubelet's rejectPod message: its admission refused the pod
FAILED = "Failed"
MAX_REASONS = 32  # distinct reason labels of toposched_kubelet_rejections_total; past it, "Other"
# OutOf<resource> or a predicate's name (NodePorts, NodeAffinity, UnexpectedAdmissionError, ...)
_REJECTION_REASON = re.compile(r"OutOf[A-Za-z0-9./_-]{1,253}|[A-Z][A-Za-z]{1,63}")


def kubelet_rejected(status: PodStatus) -> bool:
    """The pod's kubelet refused it at admission (phase Failed, message "Pod was rejected: ...")."""
    return status.phase == FAILED and status.message.startswith(KUBELET_REJECTED)


_GROUP_UPSERTS = (PodGroupUpserted, VolcanoPodGroupUpserted, SchedulerPluginsPodGroupUpserted, KubePodGroupUpserted,
                  KaiPodGroupUpserted)
_GROUP_DELETES = (PodGroupDeleted, VolcanoPodGroupDeleted, SchedulerPluginsPodGroupDeleted, KubePodGroupDeleted,
                  KaiPodGroupDeleted)

# Event type -> what the observer does with it (typed per event at registration, called untyped).
# Exhaustive (events.dispatch): a new event type must say whether it is counted, traced, or neither.
_OBSERVED: dict[type, Callable[[SchedulingObserver, Any], None] | None] = exhaustive("the tracing observer", {
    **each(tuple(t for t in _WATCHED if t not in (PodUpserted, PodDeleted, *_GROUP_UPSERTS, *_GROUP_DELETES)),
           SchedulingObserver._watched),
    PodUpserted: SchedulingObserver._pod_upserted,
    PodDeleted: SchedulingObserver._pod_deleted,
    **each(_GROUP_UPSERTS, SchedulingObserver._group_upserted),
    **each(_GROUP_DELETES, SchedulingObserver._group_deleted),
    GangPlanned: SchedulingObserver._planned,
    PodAssumed: SchedulingObserver._assumed,
    GangPending: SchedulingObserver._pending,
    PreemptionPlanned: SchedulingObserver._preempting,
    EvictionRequested: SchedulingObserver._evicting,
    BindRequested: SchedulingObserver._bind_requested,
    PodBound: SchedulingObserver._bound,
    BindFailed: SchedulingObserver._bind_failed,
    GangTimedOut: SchedulingObserver._timed_out,
    # Not told: an undecodable object (counted where it is reported), releases and nominations (the
    # attempt's outcome and the pending reason already say what they mean for the gang).
    **each((ObjectUndecodable, PodForgotten, PodNominated, NominationCleared), None),
})
