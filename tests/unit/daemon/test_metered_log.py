"""The daemon's event log reports append and fsync latency to /metrics."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from daemon.telemetry.metrics import MeteredEventLog, Metrics, observer
from events.builders import node, node_event


def _count(metrics: Metrics, name: str) -> float:
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(f"{name}_count"):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not exported")


def test_appends_and_fsyncs_are_timed(tmp_path: Path) -> None:
    metrics = Metrics()
    log = MeteredEventLog.open(tmp_path, fsync="always")
    assert isinstance(log, MeteredEventLog)
    log.metrics = metrics
    for index in range(3):
        log.append(node_event(node(f"n{index}")))
    log.close()
    assert _count(metrics, "toposched_event_log_append_duration_seconds") == 3
    assert _count(metrics, "toposched_event_log_fsync_duration_seconds") >= 3


def test_fsyncs_of_the_interval_flusher_are_timed_too(tmp_path: Path) -> None:
    metrics = Metrics()
    log = MeteredEventLog.open(tmp_path, fsync="interval:5ms")
    assert isinstance(log, MeteredEventLog)
    log.metrics = metrics
    log.append(node_event(node("n0")))
    log.sync()
    log.close()
    assert _count(metrics, "toposched_event_log_fsync_duration_seconds") >= 1


def test_the_hot_path_observer_exports_what_histogram_observe_does() -> None:
    fast, plain = Metrics(), Metrics()
    amounts = [0.0, 0.00005, 0.00007, 0.001, 0.3, 2.0, 1e9, -1.0]
    observe = observer(fast.append_duration)
    child = observer(fast.api_duration.labels("create", "pods/binding"))
    for amount in amounts:
        observe(amount)
        child(amount)
        plain.append_duration.observe(amount)
        plain.api_duration.labels("create", "pods/binding").observe(amount)

    def series(metrics: Metrics) -> list[str]:
        return [line for line in generate_latest(metrics.registry).decode().splitlines()
                if line.startswith(("toposched_event_log_append_duration", "toposched_api_request_duration"))]

    assert series(fast) == series(plain) and len(series(fast)) > 2 * len(amounts)
