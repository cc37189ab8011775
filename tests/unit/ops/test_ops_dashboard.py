"""The Grafana dashboard (ops/grafana/toposched-dashboard.json) queries only metrics the daemon
really exports, with their real types and labels, and has a panel for each thing an operator
watches: attempts by result, attempt latency, gang end-to-end latency, queue depth by queue and
reason, binds in flight, preemptions, event-log append and fsync latency, topology build time,
relists, the process's memory and CPU, garbage collections, the build, each quota's usage."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from daemon.telemetry.metrics import METRIC_NAMES, Metrics

from .opsfiles import OPS

DASHBOARD: dict[str, Any] = json.loads((OPS / "grafana" / "toposched-dashboard.json").read_text(encoding="utf-8"))
PANELS = [p for p in DASHBOARD["panels"] if p["type"] != "row"]
EXPRS = [(p["title"], t["expr"]) for p in PANELS for t in p["targets"]]
# Labels Prometheus adds to every scraped series, and the histogram bucket label.
TARGET_LABELS = {"instance", "job", "namespace", "pod", "le"}
_SERIES = re.compile(r"\b((?:toposched|process|python)_[a-z_]+)\b")
_BY = re.compile(r"\b(?:by|on|without)\s*\(([^)]*)\)")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")


def own_families() -> dict[str, tuple[str, set[str]]]:
    """Family name -> (type, label names) for every metric of the daemon's own (`Metrics` attributes)."""
    metrics = Metrics()
    families: dict[str, tuple[str, set[str]]] = {}
    for value in vars(metrics).values():
        describe = getattr(value, "describe", None)
        if describe is None or isinstance(value, CollectorRegistry):
            continue
        # prometheus_client's metrics keep their label names in `_labelnames`; the loop families in `labelnames`
        labelnames: Iterable[str] = getattr(value, "labelnames", ()) or getattr(value, "_labelnames", ())
        for family in describe():
            families[family.name] = (family.type, set(labelnames))
    return families


def registry() -> dict[str, tuple[str, set[str]]]:
    """`own_families()` and the process, platform and GC collectors' families on the same registry."""
    families = own_families()
    for family in Metrics().registry.collect():
        if family.name not in families:
            labels = {label for sample in family.samples for label in sample.labels}
            families[family.name] = (family.type, labels)
    return families


def family_of(series: str, families: dict[str, tuple[str, set[str]]]) -> tuple[str, str]:
    """The family a series name belongs to and the type that suffix implies."""
    for suffix, kind in (("_bucket", "histogram"), ("_sum", "histogram"), ("_count", "histogram"),
                         ("_total", "counter")):
        if series.endswith(suffix) and series[: -len(suffix)] in families:
            return series[: -len(suffix)], kind
    return series, "gauge"


def test_registry_reader_sees_every_metric_the_daemon_documents() -> None:
    families = own_families()
    exported = {name + ("_total" if kind == "counter" else "") for name, (kind, _) in families.items()}
    assert exported == set(METRIC_NAMES)


@pytest.mark.parametrize(("title", "expr"), EXPRS, ids=[f"{t}#{i}" for i, (t, _) in enumerate(EXPRS)])
def test_every_queried_metric_exists_with_its_type_and_labels(title: str, expr: str) -> None:
    families = registry()
    series = _SERIES.findall(expr)
    assert series, f"{title}: queries no toposched metric"
    allowed = set(TARGET_LABELS)
    for name in series:
        family, kind = family_of(name, families)
        assert family in families, f"{title}: {name} is not exported by the daemon (daemon/telemetry/metrics.py)"
        assert families[family][0] == kind, f"{title}: {name} is a {families[family][0]}, queried as a {kind}"
        allowed |= families[family][1]
    used = {label.strip() for group in _BY.findall(expr) for label in group.split(",") if label.strip()}
    used |= set(_MATCHER.findall(expr))
    assert used <= allowed, f"{title}: labels {sorted(used - allowed)} are not on {series}"


@pytest.mark.parametrize("metric", [
    "toposched_schedule_attempts_total", "toposched_scheduling_attempt_duration_seconds_bucket",
    "toposched_gang_scheduling_duration_seconds_bucket", "toposched_pending_gangs", "toposched_pending_pods",
    "toposched_binds_in_flight", "toposched_preemption_attempts_total", "toposched_preemption_victims_total",
    "toposched_events_dropped_total", "toposched_kubelet_rejections_total",
    "toposched_event_log_append_duration_seconds_bucket", "toposched_event_log_fsync_duration_seconds_bucket",
    "toposched_topology_build_duration_seconds_bucket", "toposched_quota_used", "toposched_quota_min",
    "toposched_quota_max", "toposched_quota_runtime", "toposched_quota_pending_gangs",
    "toposched_watch_relists_total", "toposched_build_info", "process_resident_memory_bytes",
    "process_cpu_seconds_total", "python_gc_collections_total",
])
def test_dashboard_has_a_panel_for(metric: str) -> None:
    assert any(re.search(rf"\b{metric}\b", expr) for _, expr in EXPRS)


def test_pending_work_is_shown_by_queue_and_by_reason() -> None:
    grouped = {group.replace(" ", "") for _, expr in EXPRS if "toposched_pending_" in expr
               for group in _BY.findall(expr)}
    assert {"queue", "reason"} <= grouped


def test_dashboard_is_importable_grafana_json() -> None:
    assert DASHBOARD["uid"] == "toposched" and DASHBOARD["title"]
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in PANELS:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["targets"] and all('instance=~"$instance"' in t["expr"] for t in panel["targets"])
