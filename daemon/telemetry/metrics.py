"""Prometheus metrics of the daemon, named in kube-scheduler's style (served on /metrics by `daemon.telemetry.health`).

Every metric lives in one `Metrics` object with its own registry (so tests and two daemons in one
process never collide). The ops dashboard is built from this list:

(result is scheduled, unschedulable or error.)

| metric | type | labels | meaning |
| --- | --- | --- | --- |
| `toposched_scheduling_attempt_duration_seconds` | histogram | result | one gang/pod attempt |
| `toposched_schedule_attempts_total` | counter | result | attempts by outcome |
| `toposched_pod_scheduling_duration_seconds` | histogram | - | first seen by the watch until bound |
| `toposched_gang_scheduling_duration_seconds` | histogram | - | first member seen until minMember bound |
| `toposched_pending_pods` | gauge | queue, reason | our pods waiting to be placed (the leader's; 0 on a standby) |
| `toposched_pending_gangs` | gauge | queue, reason | gangs waiting to be placed, the same way |
| `toposched_quota_used` | gauge | dialect, quota, resource | what a quota's placed pods request (as its status says) |
| `toposched_quota_min` | gauge | dialect, quota, resource | a quota's min (Volcano: deserved, else guarantee) |
| `toposched_quota_max` | gauge | dialect, quota, resource | a quota's max (Volcano: capability); absent: unlimited |
| `toposched_quota_runtime` | gauge | dialect, quota, resource | min plus a share of idle capacity |
| `toposched_quota_pending_gangs` | gauge | dialect, quota | gangs of the quota waiting to be placed |
| `toposched_binds_in_flight` | gauge | - | Binding calls being made now |
| `toposched_binds_total` | counter | result (bound, failed) | Binding calls by outcome |
| `toposched_api_requests_total` | counter | verb, resource, code | every attempt of a write, retries included |
| `toposched_api_request_duration_seconds` | histogram | verb, resource | latency of those writes, retries included |
| `toposched_events_dropped_total` | counter | - | Events not written: 10,000 were waiting (`event.dropped` lines) |
| `toposched_preemption_attempts_total` | counter | - | preemption plans carried out |
| `toposched_preemption_victims_total` | counter | - | pods evicted as victims |
| `toposched_gang_timeouts_total` | counter | - | gangs that gave up after scheduleTimeoutSeconds |
| `toposched_event_log_appends_total` | counter | - | events appended to the log |
| `toposched_event_log_fsync_duration_seconds` | histogram | - | one flush + fsync of the log |
| `toposched_event_log_append_duration_seconds` | histogram | - | one append call: an event or a batch (write; fsync) |
| `toposched_event_log_oversized_records_total` | counter | kind | objects over the record cap, logged as their core |
| `toposched_event_log_snapshot_duration_seconds` | histogram | - | one snapshot written (forked: to the child's exit) |
| `toposched_event_log_snapshot_failures_total` | counter | - | snapshot writers that failed (traceback on stderr) |
| `toposched_event_log_recoveries_total` | counter | - | damaged logs moved aside at start (state rebuilt by a relist) |
| `toposched_topology_build_duration_seconds` | histogram | - | a topology tree rebuild (see tracing) |
| `toposched_watch_events_total` | counter | kind, type | watch events received |
| `toposched_watch_relists_total` | counter | kind | full relists (first sync, 410 Gone, long outage) |
| `toposched_watch_relist_unchanged_total` | counter | kind | listed objects held unchanged: not logged again |
| `toposched_event_loop_lag_seconds` | histogram | - | how late a 50 ms timer fires: how long the event loop was held |
| `toposched_leader` | gauge | - | 1 while this replica holds the lease |
| `toposched_cache_synced` | gauge | - | 1 once every kind's first list is folded |
| `toposched_internal_errors_total` | counter | stage | handling one object raised: it was parked, the rest went on |
| `toposched_invalid_objects_total` | counter | kind, reason | problems found in objects (one per object and field) |
| `toposched_build_info` | gauge | version, python, implementation, platform | always 1: what is running |

`code` of `toposched_api_requests_total` is the attempt's HTTP status, `transport` (no answer),
`refused` (the lease gate refused it: nothing was sent) or `cancelled` (in flight when the lease ran
out); the duration histogram times each write as a whole, its retries included.

`queue` of the pending gauges is kube-scheduler's (`scheduler_pending_pods{queue}`): `active` (to be
tried at the next cycle), `backoff` (a Binding failed: waiting its backoff), `unschedulable` (parked
until a change could help), `gated` (a gang short of members, held untried as kube-scheduler's
PreEnqueue holds it: its pods are `NotReadyForScheduling`; pods with scheduling gates are not counted,
being no scheduler's to place), and `permit` for pods assumed and held at Permit until their gang
reaches minMember. `reason` is the class of the last outcome (`daemon.telemetry.tracing.REASON_CLASSES`):
`new` (not tried yet), `capacity`, `topology` (MustGather, a hard tier, a sub-group), `quota`,
`waiting-for-members`, `pod-fit` (no node admits a pod), `invalid`, `waiting-for-volumes` (a claim not
usable yet: missing, unbound, ...), `permit`, `timeout`, `bind-failed`, `error`.

Also on the same registry: prometheus_client's process collector (`process_cpu_seconds_total`,
`process_resident_memory_bytes`, `process_open_fds`, ...: watch memory against the Deployment's
limit), platform collector (`python_info`) and garbage-collector collector (`python_gc_*`). No
`*_created` series are exported (`disable_created_metrics`).

The series bumped several times per pod (appends, watch events, API writes, binds, attempts, pod
end to end) are `LoopCounter` / `LoopGauge` / `LoopHistogram`: written only from the event loop's
thread, so a plain addition each instead of prometheus_client's lock per increment (~0.3 us against
~0.05; ~7 us per pod in all), read on /metrics exactly as prometheus_client's own would be. What
another thread writes (the flusher's fsyncs, the snapshot writer) stays prometheus_client's.

Must never: be read to make a scheduling decision (metrics observe, they do not steer).
"""

from __future__ import annotations

import abc
import bisect
import platform
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Self

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from daemon.version import package_version
from events.log import MAX_RECORD_BYTES, EventLog
from events.model import Event

# Buckets in seconds: an attempt is milliseconds to seconds; end to end can be minutes (gangs wait).
_ATTEMPT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_E2E_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_IO_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

RESULT_SCHEDULED = "scheduled"
RESULT_UNSCHEDULABLE = "unschedulable"
RESULT_ERROR = "error"

METRIC_NAMES = (
    "toposched_scheduling_attempt_duration_seconds",
    "toposched_schedule_attempts_total",
    "toposched_pod_scheduling_duration_seconds",
    "toposched_gang_scheduling_duration_seconds",
    "toposched_pending_pods",
    "toposched_pending_gangs",
    "toposched_quota_used",
    "toposched_quota_min",
    "toposched_quota_max",
    "toposched_quota_runtime",
    "toposched_quota_pending_gangs",
    "toposched_binds_in_flight",
    "toposched_binds_total",
    "toposched_api_requests_total",
    "toposched_api_request_duration_seconds",
    "toposched_events_dropped_total",
    "toposched_kubelet_rejections_total",
    "toposched_preemption_attempts_total",
    "toposched_preemption_victims_total",
    "toposched_gang_timeouts_total",
    "toposched_event_log_appends_total",
    "toposched_event_log_fsync_duration_seconds",
    "toposched_event_log_append_duration_seconds",
    "toposched_event_log_oversized_records_total",
    "toposched_event_log_recoveries_total",
    "toposched_event_log_snapshot_duration_seconds",
    "toposched_event_log_snapshot_failures_total",
    "toposched_topology_build_duration_seconds",
    "toposched_watch_events_total",
    "toposched_watch_relists_total",
    "toposched_watch_relist_unchanged_total",
    "toposched_event_loop_lag_seconds",
    "toposched_leader",
    "toposched_cache_synced",
    "toposched_internal_errors_total",
    "toposched_invalid_objects_total",
    "toposched_build_info",
)
# `stage` of toposched_internal_errors_total: fold, listener (`daemon.scheduling.journal`); plan,
# preempt, assume, permit, nominate (`daemon.scheduling.loop`). `reason` of
# toposched_invalid_objects_total: the Warning Event's reason (`daemon.kube.topology_status.reason_of`):
# InvalidQuantity, UndecodableObject, InvalidPod, ...


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no `*_created` series (process-wide)
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        # The process, the interpreter and its garbage collector, on our registry (not the global default).
        self.collectors = (ProcessCollector(registry=r), PlatformCollector(registry=r), GCCollector(registry=r))
        self.build_info = Gauge(
            "toposched_build_info", "Always 1; the labels say what is running.",
            ["version", "python", "implementation", "platform"], registry=r,
        )
        self.build_info.labels(package_version(), platform.python_version(), platform.python_implementation(),
                               f"{platform.system().lower()}/{platform.machine()}").set(1)
        self.attempt_duration = LoopHistogram(
            "toposched_scheduling_attempt_duration_seconds", "Scheduling attempt latency by result.",
            ["result"], buckets=_ATTEMPT_BUCKETS, registry=r,
        )
        self.attempts = LoopCounter("toposched_schedule_attempts", "Scheduling attempts by result.", ["result"],
                                    registry=r)
        self.pod_e2e = LoopHistogram(
            "toposched_pod_scheduling_duration_seconds", "Pod end to end: first seen until bound.",
            buckets=_E2E_BUCKETS, registry=r,
        )
        self.gang_e2e = Histogram(
            "toposched_gang_scheduling_duration_seconds", "Gang end to end: first member seen until minMember bound.",
            buckets=_E2E_BUCKETS, registry=r,
        )
        self.pending_pods = Gauge("toposched_pending_pods", "Our pods waiting to be placed, by queue and reason.",
                                  ["queue", "reason"], registry=r)
        self.pending_gangs = Gauge("toposched_pending_gangs", "Gangs waiting to be placed, by queue and reason.",
                                   ["queue", "reason"], registry=r)
        # Per quota, set by daemon/telemetry/quota_metrics.py; in the resource's unit (cores, bytes, GPUs).
        quota_labels = ["dialect", "quota", "resource"]
        self.quota_used = Gauge("toposched_quota_used", "Requests of a quota's placed pods.", quota_labels, registry=r)
        self.quota_min = Gauge("toposched_quota_min", "A quota's min (guaranteed).", quota_labels, registry=r)
        self.quota_max = Gauge("toposched_quota_max", "A quota's max (ceiling).", quota_labels, registry=r)
        self.quota_runtime = Gauge("toposched_quota_runtime", "A quota's runtime: min plus its share of idle capacity.",
                                   quota_labels, registry=r)
        self.quota_pending_gangs = Gauge("toposched_quota_pending_gangs", "Gangs of a quota waiting to be placed.",
                                         ["dialect", "quota"], registry=r)
        self.binds_in_flight = LoopGauge("toposched_binds_in_flight", "Binding calls in flight.", registry=r)
        self.binds = LoopCounter("toposched_binds", "Binding calls by result.", ["result"], registry=r)
        self.api_requests = LoopCounter(
            "toposched_api_requests", "API writes by verb, resource and status code.", ["verb", "resource", "code"],
            registry=r,
        )
        self.api_duration = LoopHistogram(
            "toposched_api_request_duration_seconds", "API write latency, retries included.", ["verb", "resource"],
            buckets=_ATTEMPT_BUCKETS, registry=r,
        )
        self.events_dropped = Counter(
            "toposched_events_dropped", "Kubernetes Events not written because too many were waiting.", registry=r)
        self.kubelet_rejections = Counter(
            "toposched_kubelet_rejections", "Pods of ours bound to a node whose kubelet then refused them, by reason.",
            ["reason"], registry=r)
        self.preemption_attempts = Counter("toposched_preemption_attempts", "Preemption plans carried out.", registry=r)
        self.preemption_victims = Counter("toposched_preemption_victims", "Pods evicted as victims.", registry=r)
        self.gang_timeouts = Counter("toposched_gang_timeouts", "Gangs that timed out.", registry=r)
        self.log_appends = LoopCounter("toposched_event_log_appends", "Events appended to the log.", registry=r)
        self.fsync_duration = Histogram(
            "toposched_event_log_fsync_duration_seconds", "Event log fsync latency.", buckets=_IO_BUCKETS, registry=r,
        )
        self.append_duration = LoopHistogram(
            "toposched_event_log_append_duration_seconds", "Event log append latency.", buckets=_IO_BUCKETS,
            registry=r,
        )
        self.oversized_records = Counter(
            "toposched_event_log_oversized_records", "Objects over the record cap, logged as their core.", ["kind"],
            registry=r,
        )
        self.snapshot_duration = Histogram(
            "toposched_event_log_snapshot_duration_seconds", "One snapshot written (forked: fork to exit).",
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0), registry=r,
        )
        self.snapshot_failures = Counter(
            "toposched_event_log_snapshot_failures", "Snapshot writers that failed.", registry=r,
        )
        self.log_recoveries = Counter(
            "toposched_event_log_recoveries", "Damaged event logs moved aside at start.", registry=r,
        )
        self.topology_build = Histogram(
            "toposched_topology_build_duration_seconds", "Topology tree build time.", buckets=(*_IO_BUCKETS, 2.5, 5.0),
            registry=r,
        )
        self.watch_events = LoopCounter("toposched_watch_events", "Watch events received.", ["kind", "type"],
                                        registry=r)
        self.watch_relists = Counter("toposched_watch_relists", "Full relists.", ["kind"], registry=r)
        self.watch_relist_unchanged = Counter(
            "toposched_watch_relist_unchanged", "Objects a relist found held unchanged, so not logged or folded again.",
            ["kind"], registry=r)
        self.loop_lag = Histogram(
            "toposched_event_loop_lag_seconds", "How late a 50 ms timer fires: how long the event loop was held.",
            buckets=_LAG_BUCKETS, registry=r,
        )
        self.leader = Gauge("toposched_leader", "1 while this replica holds the lease.", registry=r)
        self.cache_synced = Gauge("toposched_cache_synced", "1 once every kind is listed.", registry=r)
        self.internal_errors = Counter(
            "toposched_internal_errors", "Objects whose handling raised, by stage (each parked, the rest went on).",
            ["stage"], registry=r,
        )
        self.invalid_objects = Counter(
            "toposched_invalid_objects", "Problems found in objects, by kind and reason (one per object and field).",
            ["kind", "reason"], registry=r,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _LoopFamily(abc.ABC):
    """What the loop families share: a series per label values (or the family itself when it has no
    labels), turned into a prometheus_client metric family when scraped."""

    name: str
    documentation: str
    labelnames: tuple[str, ...]
    _children: dict[tuple[str, ...], Self]

    def labels(self, *values: str) -> Self:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected "
                                 f"({', '.join(self.labelnames)}), got {len(values)}")
            child = self._children[values] = self._series()
        return child

    @abc.abstractmethod
    def _series(self) -> Self:
        """A new series of this family (what `labels` hands out)."""

    @abc.abstractmethod
    def _family(self) -> Metric:
        """An empty prometheus_client family of this family's name, help and labels."""

    @abc.abstractmethod
    def _add_to(self, family: Metric, values: tuple[str, ...]) -> None:
        """Add this series' samples to `family`, under the label values `values`."""

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        if self.labelnames:
            for values, child in self._children.items():
                child._add_to(family, values)
        else:
            self._add_to(family, ())
        yield family


class LoopCounter(_LoopFamily):
    """A counter family written only from the event loop's thread, for series bumped several times per pod:
    a plain addition each (prometheus_client's `Counter` takes a lock per increment), exported like a
    `Counter` when scraped. `labels(...)` gives one series; a family without labels counts itself."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
                 registry: CollectorRegistry) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self.value = 0.0
        self._children = {}
        registry.register(self)  # a Collector: it has collect() and describe()

    def _series(self) -> Self:
        series = object.__new__(type(self))
        series.value = 0.0
        return series

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def _family(self) -> Metric:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add_to(self, family: Metric, values: tuple[str, ...]) -> None:
        assert isinstance(family, CounterMetricFamily)
        family.add_metric(values, self.value)


class LoopGauge:
    """A gauge without labels written only from the event loop's thread (`LoopCounter`'s reasons)."""

    def __init__(self, name: str, documentation: str, *, registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self.value = 0.0
        registry.register(self)

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation, value=self.value)


class LoopHistogram(_LoopFamily):
    """A histogram family observed only from the event loop's thread, several times per pod: the bucket
    found by bisection and plain additions (prometheus_client's `Histogram.observe` scans the buckets
    and takes two locks), exported like a `Histogram` when scraped."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
                 buckets: Sequence[float], registry: CollectorRegistry) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        bounds = [float(bound) for bound in buckets]
        if bounds != sorted(bounds):
            raise ValueError(f"{name}: buckets must be in increasing order")
        if not bounds or bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self._bounds = bounds
        self._les = [floatToGoString(bound) for bound in bounds]  # type: ignore[no-untyped-call]
        self._counts = [0] * len(bounds)
        self._sum = 0.0
        self._children = {}
        registry.register(self)

    def _series(self) -> Self:
        series = object.__new__(type(self))
        series._bounds, series._les = self._bounds, self._les
        series._counts = [0] * len(self._bounds)
        series._sum = 0.0
        return series

    def observe(self, amount: float) -> None:
        self._sum += amount
        self._counts[bisect.bisect_left(self._bounds, amount)] += 1  # the first bucket whose bound is >= amount

    def _family(self) -> Metric:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add_to(self, family: Metric, values: tuple[str, ...]) -> None:
        assert isinstance(family, HistogramMetricFamily)
        cumulative, buckets = 0, []
        for le, count in zip(self._les, self._counts, strict=True):
            cumulative += count
            buckets.append((le, float(cumulative)))
        family.add_metric(values, buckets, self._sum)


class MeteredEventLog(EventLog):
    """The event log, timing appends and fsyncs into `metrics` (open with `MeteredEventLog.open(...)`).

    Set `metrics` right after opening: appends are timed here, fsyncs through the log's public
    `fsync_observer` (which the interval flusher thread and `sync()` both report to).
    """

    _metrics: Metrics | None = None

    @property
    def metrics(self) -> Metrics | None:
        return self._metrics

    @metrics.setter
    def metrics(self, metrics: Metrics | None) -> None:
        self._metrics = metrics
        self.fsync_observer = metrics.fsync_duration.observe if metrics is not None else None
        self._observe_append = metrics.append_duration.observe if metrics is not None else None
        self._count_appends = metrics.log_appends.inc if metrics is not None else None

    _observe_append: Callable[[float], None] | None = None
    _count_appends: Callable[[float], None] | None = None

    def append(self, event: Event, *, max_bytes: int = MAX_RECORD_BYTES) -> Event:
        started = time.perf_counter()
        stored = super().append(event, max_bytes=max_bytes)
        if self._observe_append is not None:
            self._observe_append(time.perf_counter() - started)
        if self._count_appends is not None:
            self._count_appends(1)
        return stored

    def append_many(self, events: Iterable[Event], *, max_bytes: int = MAX_RECORD_BYTES) -> list[Event]:
        started = time.perf_counter()
        stored = super().append_many(events, max_bytes=max_bytes)
        if self._observe_append is not None:  # one call, one observation, as for `append`
            self._observe_append(time.perf_counter() - started)
        if self._count_appends is not None:
            self._count_appends(len(stored))
        return stored
