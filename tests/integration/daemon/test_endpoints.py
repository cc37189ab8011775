"""The daemon's endpoints and telemetry: /healthz, /readyz, /metrics, and spans per gang attempt."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import anyio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from daemon.telemetry.metrics import METRIC_NAMES
from daemon.telemetry.observability import Tracing
from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import bound_count, daemons, gang, nodes, pod_names, wait_until


def fetch(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def test_probes_and_metrics_are_served_and_count_what_happened(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        async with daemons(cluster, tmp_path) as (running,):
            endpoints = running.daemon.endpoints
            assert endpoints is not None
            port = endpoints.port
            assert (await anyio.to_thread.run_sync(fetch, port, "/healthz"))[0] == 200
            await wait_until(lambda: running.daemon.health.ready, what="ready")
            status, body = await anyio.to_thread.run_sync(fetch, port, "/readyz")
            assert status == 200 and "role=leader" in body
            job = gang("observed", 4)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 4, what="gang bound")
            status, text = await anyio.to_thread.run_sync(fetch, port, "/metrics")
            assert status == 200
            for name in METRIC_NAMES:
                assert name.removesuffix("_total") in text, name
            assert 'toposched_binds_total{result="bound"} 4.0' in text
            assert "toposched_gang_scheduling_duration_seconds_count 1.0" in text
            assert 'toposched_scheduling_attempt_duration_seconds_count{result="scheduled"} 1.0' in text
            assert "toposched_cache_synced 1.0" in text
            appends = next(line for line in text.splitlines()
                           if line.startswith("toposched_event_log_append_duration_seconds_count"))
            assert float(appends.split()[-1]) > 0
            built = next(line for line in text.splitlines()
                         if line.startswith("toposched_topology_build_duration_seconds_count"))
            assert float(built.split()[-1]) >= 1


async def test_a_gang_attempt_is_one_span_with_plan_permit_and_bind_children(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        async with daemons(cluster, tmp_path, tracing=Tracing(exporter=exporter, batch=False)):
            job = gang("traced", 2)
            cluster.load_objects(job)
            await wait_until(lambda: any(s.name == "gang.attempt" for s in exporter.get_finished_spans()),
                             what="the attempt span")
    spans = exporter.get_finished_spans()
    attempt = next(s for s in spans if s.name == "gang.attempt")
    assert attempt.attributes is not None and attempt.attributes["toposched.gang"] == "default/traced"
    assert attempt.attributes["toposched.result"] == "scheduled"
    children = {s.name for s in spans if s.parent is not None and s.parent.span_id == attempt.context.span_id}
    assert {"gang.plan", "gang.permit", "gang.bind"} <= children
    pod_binds = [s for s in spans if s.name == "pod.bind"]
    assert len(pod_binds) == 2
