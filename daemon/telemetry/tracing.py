"""Spans and scheduling metrics derived from the journal: what the loop decided, timed as it happened.

`SchedulingObserver` subscribes to the `Journal` (it sees every event right after it is folded) and
turns the loop's decisions into OpenTelemetry spans and Prometheus metrics, without a hook in the
loop itself (there is one scheduler loop, shared with the simulator; it stays free of telemetry):

- `gang.attempt` opens at the attempt's first decision (GangPlanned, or GangPending for an attempt
  that found no plan) and closes when the attempt is settled: minMember bound (`result=scheduled`),
  a bind failed (`error`), no plan / timed out (`unschedulable`). Its children: `gang.plan` (the
  plan chosen, with its explanation), `gang.permit` (assumed until the binds start), `gang.preempt`
  (victims and nominations), `gang.bind` (the binds) with one `pod.bind` per pod.
- Metrics (see `daemon.telemetry.metrics`): attempt duration by result, pod end-to-end (first seen by the
  watch to bound), gang end-to-end (first member seen to minMember bound), log appends, watch events,
  preemption attempts, timeouts; `refresh_gauges()` sets the queue-depth gauges from the state.

Must never: change the state or block (it runs inside `Journal.record`, on the loop's path).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from daemon.telemetry.metrics import RESULT_ERROR, RESULT_SCHEDULED, RESULT_UNSCHEDULABLE, Metrics
from events.dispatch import each, exhaustive
from events.model import (
    BindFailed,
    BindRequested,
    CapacityElasticQuotaDeleted,
    CapacityElasticQuotaUpserted,
    ElasticQuotaDeleted,
    ElasticQuotaUpserted,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    HyperNodeDeleted,
    HyperNodeUpserted,
    KubePodGroupDeleted,
    KubePodGroupUpserted,
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
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    WorkloadDeleted,
    WorkloadUpserted,
)
from state.cluster import ClusterState


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class _Attempt:
    __slots__ = ("bind_span", "gang", "permit_span", "pod_spans", "span", "started")

    def __init__(self, gang: str, span: Span, started: float) -> None:
        self.gang = gang
        self.span = span
        self.started = started
        self.permit_span: Span | None = None
        self.bind_span: Span | None = None
        self.pod_spans: dict[str, Span] = {}


class SchedulingObserver:
    """Journal listener: spans per gang attempt and the scheduling metrics (see the module docstring)."""

    def __init__(self, state: ClusterState, metrics: Metrics, tracer: trace.Tracer | None = None) -> None:
        self.state = state
        self.metrics = metrics
        self.tracer = tracer or trace.get_tracer("toposched")
        self._attempts: dict[str, _Attempt] = {}  # gang (or lone pod) key -> open attempt
        self._gang_done: set[str] = set()  # gangs whose end-to-end latency was observed
        self._bound_count: dict[str, int] = {}  # gang -> members bound (kept incrementally: gangs are large)
        self._tree_version = -1
        self._watch_counters = {
            cls: metrics.watch_events.labels(kind, kind_type) for cls, (kind, kind_type) in _WATCHED.items()
        }
        self._appends = metrics.log_appends

    # ------------------------------------------------------------------ the listener

    def __call__(self, event: Event) -> None:
        self._appends.inc()
        handler = _OBSERVED[type(event)]
        if handler is not None:
            handler(self, event)

    def _watched(self, event: Event) -> None:
        self._watch_counters[type(event)].inc()

    # ------------------------------------------------------------------ attempts

    def _open(self, key: str, at: float, attempt: int = 0) -> _Attempt:
        current = self._attempts.get(key)
        if current is not None:
            return current
        span = self.tracer.start_span("gang.attempt", start_time=_ns(at),
                                      attributes={"gang": key, "attempt": attempt})
        opened = self._attempts[key] = _Attempt(key, span, at)
        return opened

    def _child(self, parent: _Attempt, name: str, at: float, **attributes: str | int) -> Span:
        context = trace.set_span_in_context(parent.span)
        return self.tracer.start_span(name, context=context, start_time=_ns(at), attributes=attributes)

    def _finish(self, key: str, result: str, at: float, detail: str = "") -> None:
        attempt = self._attempts.pop(key, None)
        if attempt is None:
            return
        end = _ns(at)
        for span in attempt.pod_spans.values():
            span.end(end_time=end)
        for phase in (attempt.permit_span, attempt.bind_span):
            if phase is not None and phase.is_recording():
                phase.end(end_time=end)
        attempt.span.set_attribute("result", result)
        if result == RESULT_ERROR:
            attempt.span.set_status(Status(StatusCode.ERROR, detail))
        elif detail:
            attempt.span.set_attribute("detail", detail)
        attempt.span.end(end_time=end)
        self.metrics.attempt_duration.labels(result).observe(max(0.0, at - attempt.started))
        self.metrics.attempts.labels(result).inc()

    def _unit_of_pod(self, pod_key: str) -> str:
        pod = self.state.pods.get(pod_key)
        return pod.gang if pod is not None and pod.gang else pod_key

    def _planned(self, event: GangPlanned) -> None:
        attempt = self._open(event.gang, event.time, event.attempt)
        plan = self._child(attempt, "gang.plan", event.time, domain=event.domain, layer=event.layer,
                           pods=event.pods)
        plan.set_attribute("explanation", event.explanation[:512])
        plan.end(end_time=_ns(event.time))
        if attempt.permit_span is None:
            attempt.permit_span = self._child(attempt, "gang.permit", event.time)

    def _pending(self, event: GangPending) -> None:
        attempt = self._open(event.gang, event.time, event.attempt)
        attempt.span.set_attribute("reason", event.reason[:512])
        self._finish(event.gang, RESULT_UNSCHEDULABLE, event.time, event.reason[:256])

    def _preempted(self, event: PreemptionPlanned) -> None:
        self.metrics.preemption_attempts.inc()
        attempt = self._open(event.gang, event.time)
        span = self._child(attempt, "gang.preempt", event.time, victims=len(event.victims),
                           victim_jobs=",".join(event.victim_jobs)[:512])
        span.set_attribute("explanation", event.explanation[:512])
        span.end(end_time=_ns(event.time))

    def _bind_requested(self, event: BindRequested) -> None:
        key = self._unit_of_pod(event.pod)
        attempt = self._open(key, event.time)
        if attempt.permit_span is not None and attempt.bind_span is None:
            attempt.permit_span.end(end_time=_ns(event.time))
        if attempt.bind_span is None:
            attempt.bind_span = self._child(attempt, "gang.bind", event.time)
        context = trace.set_span_in_context(attempt.bind_span)
        attempt.pod_spans[event.pod] = self.tracer.start_span(
            "pod.bind", context=context, start_time=_ns(event.time), attributes={"pod": event.pod, "node": event.node}
        )

    def _bound(self, event: PodBound) -> None:
        pod = self.state.pods.get(event.pod)
        if pod is not None:
            self.metrics.pod_e2e.observe(max(0.0, event.time - pod.first_seen))
        key = self._unit_of_pod(event.pod)
        attempt = self._attempts.get(key)
        if attempt is not None:
            span = attempt.pod_spans.pop(event.pod, None)
            if span is not None:
                span.end(end_time=_ns(event.time))
        if pod is None or not pod.gang:
            self._finish(key, RESULT_SCHEDULED, event.time)
            return
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
        if bound >= gang.spec.min_member and (attempt is None or not attempt.pod_spans):
            if pod.gang not in self._gang_done:
                self._gang_done.add(pod.gang)
                self.metrics.gang_e2e.observe(max(0.0, event.time - gang.first_seen))
            self._finish(pod.gang, RESULT_SCHEDULED, event.time)

    def _bind_failed(self, event: BindFailed) -> None:
        key = self._unit_of_pod(event.pod)
        attempt = self._attempts.get(key)
        if attempt is not None:
            span = attempt.pod_spans.pop(event.pod, None)
            if span is not None:
                span.set_status(Status(StatusCode.ERROR, event.reason[:256]))
                span.end(end_time=_ns(event.time))
        self._finish(key, RESULT_ERROR, event.time, event.reason[:256])

    # ------------------------------------------------------------------ gauges

    def refresh_gauges(self) -> None:
        """Queue depth from the state, and the topology build time (called on a timer, not per event).

        The topology tree rebuilds lazily, on its first query after a change. The tick queries it (at
        most once a second) and times the query when it found a new structure and did the work itself
        (a cached answer takes well under a microsecond); a rebuild that placement triggered between
        two ticks is not timed here.
        """
        tree = self.state.topology
        started = time.perf_counter()
        version = tree.version
        elapsed = time.perf_counter() - started
        if version != self._tree_version and elapsed > 5e-6:
            self.metrics.topology_build.observe(elapsed)
        self._tree_version = version
        pending = self.state.pending
        self.metrics.pending_pods.set(len(pending))
        gangs = set()
        pods = self.state.pods
        for key in pending:
            pod = pods.get(key)
            if pod is not None and pod.gang:
                gangs.add(pod.gang)
        self.metrics.pending_gangs.set(len(gangs))


def _timed_out(observer: SchedulingObserver, event: GangTimedOut) -> None:
    observer.metrics.gang_timeouts.inc()
    observer._finish(event.gang, RESULT_UNSCHEDULABLE, event.time, f"timed out: {event.reason}")


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
    NetworkTopologyUpserted: ("ClusterNetworkTopology", "upsert"),
    NetworkTopologyDeleted: ("ClusterNetworkTopology", "delete"),
    HyperNodeUpserted: ("HyperNode", "upsert"), HyperNodeDeleted: ("HyperNode", "delete"),
    PriorityClassUpserted: ("PriorityClass", "upsert"), PriorityClassDeleted: ("PriorityClass", "delete"),
    ElasticQuotaUpserted: ("ElasticQuota", "upsert"), ElasticQuotaDeleted: ("ElasticQuota", "delete"),
    CapacityElasticQuotaUpserted: ("CapacityElasticQuota", "upsert"),
    CapacityElasticQuotaDeleted: ("CapacityElasticQuota", "delete"),
    QueueUpserted: ("Queue", "upsert"), QueueDeleted: ("Queue", "delete"),
}

# Event type -> what the observer does with it (typed per event at registration, called untyped).
# Exhaustive (events.dispatch): a new event type must say whether it is counted, traced, or neither.
_OBSERVED: dict[type, Callable[[SchedulingObserver, Any], None] | None] = exhaustive("the tracing observer", {
    **each(tuple(_WATCHED), SchedulingObserver._watched),
    BindRequested: SchedulingObserver._bind_requested,
    PodBound: SchedulingObserver._bound,
    BindFailed: SchedulingObserver._bind_failed,
    GangPlanned: SchedulingObserver._planned,
    GangPending: SchedulingObserver._pending,
    PreemptionPlanned: SchedulingObserver._preempted,
    GangTimedOut: _timed_out,
    # Not traced: an undecodable object (counted where it is reported), and the per-pod decisions that
    # the attempt's spans already cover.
    **each((ObjectUndecodable, PodAssumed, PodForgotten, PodNominated, NominationCleared, EvictionRequested), None),
})
