"""The daemon's event log reports append and fsync latency to /metrics."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from daemon.telemetry.metrics import LoopCounter, LoopGauge, LoopHistogram, MeteredEventLog, Metrics
from events.builders import node, node_event


def _count(metrics: Metrics, name: str) -> float:
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(f"{name}_count"):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not exported")


def _metered(path: Path, fsync: str) -> tuple[MeteredEventLog, Metrics]:
    """A metered log opened as the daemon opens it, and the metrics it reports to."""
    metrics = Metrics()
    log = MeteredEventLog.open(path, fsync=fsync)
    assert isinstance(log, MeteredEventLog)
    log.metrics = metrics
    return log, metrics


def test_appends_and_fsyncs_are_timed(tmp_path: Path) -> None:
    log, metrics = _metered(tmp_path, "always")
    for index in range(3):
        log.append(node_event(node(f"n{index}")))
    log.close()
    assert _count(metrics, "toposched_event_log_append_duration_seconds") == 3
    assert _count(metrics, "toposched_event_log_fsync_duration_seconds") >= 3


def test_every_event_appended_is_counted_also_when_appended_together(tmp_path: Path) -> None:
    log, metrics = _metered(tmp_path, "never")
    log.append(node_event(node("n0")))
    log.append_many([node_event(node(f"n{index}")) for index in range(1, 4)])
    log.close()
    text = generate_latest(metrics.registry).decode()
    assert "toposched_event_log_appends_total 4.0" in text.splitlines()
    assert _count(metrics, "toposched_event_log_append_duration_seconds") == 2  # one per call


def test_fsyncs_of_the_interval_flusher_are_timed_too(tmp_path: Path) -> None:
    log, metrics = _metered(tmp_path, "interval:5ms")
    log.append(node_event(node("n0")))
    log.sync()
    log.close()
    assert _count(metrics, "toposched_event_log_fsync_duration_seconds") >= 1


def test_the_loop_families_export_what_prometheus_client_s_own_do() -> None:
    """The hot path's lock-free histograms, counters and gauge read on /metrics exactly as prometheus_client's
    Histogram, Counter and Gauge given the same observations."""
    Metrics()  # as the daemon's: no `*_created` series (prometheus_client's switch is process-wide)
    loop, plain = CollectorRegistry(auto_describe=True), CollectorRegistry(auto_describe=True)
    amounts = [0.0, 0.00005, 0.00007, 0.001, 0.3, 2.0, 1e9, -1.0]
    buckets = (0.00005, 0.0001, 0.001, 0.25, 1.0)
    histograms = (LoopHistogram("t_latency_seconds", "Latency.", ["verb"], buckets=buckets, registry=loop),
                  Histogram("t_latency_seconds", "Latency.", ["verb"], buckets=buckets, registry=plain))
    bare = (LoopHistogram("t_bare_seconds", "Bare.", buckets=buckets, registry=loop),
            Histogram("t_bare_seconds", "Bare.", buckets=buckets, registry=plain))
    counters = (LoopCounter("t_calls", "Calls.", ["kind", "type"], registry=loop),
                Counter("t_calls", "Calls.", ["kind", "type"], registry=plain))
    totals = (LoopCounter("t_appends", "Appends.", registry=loop), Counter("t_appends", "Appends.", registry=plain))
    gauges = (LoopGauge("t_in_flight", "In flight.", registry=loop), Gauge("t_in_flight", "In flight.", registry=plain))
    LoopCounter("t_unused", "Never bumped.", ["result"], registry=loop)
    Counter("t_unused", "Never bumped.", ["result"], registry=plain)
    for index, amount in enumerate(amounts):
        for histogram in histograms:
            histogram.labels("create" if index % 3 else "patch").observe(amount)
        for histogram in bare:
            histogram.observe(amount)
        for counter in counters:
            counter.labels("Pod", "ADDED" if index % 2 else "MODIFIED").inc()
            counter.labels("Node", "ADDED").inc(2)
        for total in totals:
            total.inc()
        for gauge in gauges:
            gauge.inc()
            if index % 2:
                gauge.dec()
    assert generate_latest(loop).decode() == generate_latest(plain).decode()
    assert loop.get_sample_value("t_calls_total", {"kind": "Node", "type": "ADDED"}) == 2 * len(amounts)
    with pytest.raises(ValueError, match="2 label values expected"):
        counters[0].labels("Pod")


def test_a_loop_histogram_s_buckets_must_increase() -> None:
    with pytest.raises(ValueError, match="increasing order"):
        LoopHistogram("t_bad_seconds", "Bad.", buckets=(1.0, 0.5), registry=CollectorRegistry())
