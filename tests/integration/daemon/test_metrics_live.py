"""Every metric the daemon registers is live: one run of the real daemon against devcluster moves them all.

The run has what an operator's cluster has on a bad day: a damaged event log at start, a gang that
binds (through a slow and once-failing Binding API), one that can never fit, a GangGroup that times
out at Permit, a preemption, a topology too big for the log's record cap, a PodGroup with a bad
annotation, a gang whose preemption planning raises, a 410 that forces a relist, snapshots (one
writer failing), a quota. Then /metrics, scraped over HTTP, is compared with a fresh registry: every
family must have moved. Only a few are constant by nature (build and platform info, limits).
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.kube.event_recorder import DEFAULT_MAX_QUEUED
from daemon.telemetry.metrics import Metrics
from daemon.version import package_version
from devcluster.cluster import DevCluster
from devcluster.store import resolve
from preemption.hook import JobPreemptor
from tests.integration.daemon.harness import bound_count, daemons, gang, nodes, pod_names, wait_until
from tests.logdamage import damaged_log

GROUPS = "gang.scheduling.koordinator.sh/groups"
TOPOLOGY_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
# Families whose value is fixed for the life of the process: present, never moving.
CONSTANT = {"toposched_build_info", "python_info", "process_start_time_seconds", "process_max_fds",
            "python_gc_objects_uncollectable"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> dict[str, Samples]:
    """Family name -> {(sample name, labels): value}."""
    return {family.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
            for family in text_string_to_metric_families(text)}


def moved(before: Samples, after: Samples) -> bool:
    return any(before.get(key) != value for key, value in after.items())


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def oversized_node() -> dict[str, Any]:
    """A node whose labels alone are over the 64 KiB record cap: logged as its accounting core."""
    labels = {f"example.com/label-{index:04d}": "v" * 60 for index in range(1200)}
    resources = {"cpu": "8", "memory": "64Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-big-labels", "labels": labels},
            "status": {"capacity": resources, "allocatable": resources}}


def elastic_quota() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
            {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
             "metadata": {"name": "team", "namespace": "team"},
             "spec": {"min": {"nvidia.com/gpu": "8"}, "max": {"nvidia.com/gpu": "16"}}}]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


async def test_every_registered_series_moves_in_one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    damaged_log(tmp_path / "log-0", "middle")  # found at start: moved aside, rebuilt from the relist
    planner = JobPreemptor.plan

    def plan_unless_broken(self: JobPreemptor, state: Any, preemptee: Any, failure: Any) -> Any:
        if preemptee.key == "default/broken":
            raise RuntimeError("a bug in preemption planning, for this gang only")
        return planner(self, state, preemptee, failure)

    monkeypatch.setattr(JobPreemptor, "plan", plan_unless_broken)
    baseline = samples(Metrics().exposition().decode())
    most_in_flight = 0.0
    async with DevCluster() as cluster:
        cluster.load_objects([priority_class("low", 100), priority_class("high", 1000), *nodes(4), oversized_node(),
                              *elastic_quota()])
        async with daemons(cluster, tmp_path, fsync="interval:5ms",
                           event_log={"max_record_bytes": 65536}) as (running,):
            daemon = running.daemon
            registry = daemon.metrics.registry
            await wait_until(lambda: daemon.scheduler is not None, what="leading")
            journal = daemon.journal
            assert journal is not None and journal._writer is not None
            writer: Any = journal._writer
            good_writer = list(writer.command)
            writer.command = [sys.executable, "-c", "raise SystemExit(3)"]  # the first snapshot writer fails
            journal.snapshot_every = 40

            async def watch_binds_in_flight() -> None:
                nonlocal most_in_flight
                while True:
                    most_in_flight = max(most_in_flight, registry.get_sample_value("toposched_binds_in_flight") or 0)
                    await anyio.sleep(0.005)

            async with anyio.create_task_group() as sampling:
                sampling.start_soon(watch_binds_in_flight)
                bad = gang("bad-spec", 0, min_member=1)[0]
                bad["metadata"]["annotations"] = {TOPOLOGY_SPEC: "{not json"}
                cluster.load_objects([bad])

                group = json.dumps(["default/trainer", "default/evaluator"])
                waiting = [*gang("trainer", 3, min_member=2, annotations={GROUPS: group}, timeout=1),
                           *gang("evaluator", 1, min_member=2, annotations={GROUPS: group}, timeout=1)]
                cluster.load_objects(waiting)
                await wait_until(lambda: (registry.get_sample_value("toposched_gang_timeouts_total") or 0) >= 1,
                                 within=15, what="the GangGroup to time out at Permit")
                for manifest in waiting:
                    kind = "pods" if manifest["kind"] == "Pod" else "scheduling.sigs.k8s.io/v1alpha1/PodGroup"
                    cluster.store.delete(kind, manifest["metadata"]["name"], "default", grace_period_seconds=0)
                events = daemon.api.events if daemon.api is not None else None
                assert events is not None
                events.max_queued = 0  # a burst beyond the Event queue: the huge gang's Warning is dropped
                cluster.load_objects(gang("huge", 5))
                await wait_until(lambda: (registry.get_sample_value("toposched_events_dropped_total") or 0) >= 1,
                                 what="an Event dropped")
                events.max_queued = DEFAULT_MAX_QUEUED

                cluster.faults.add_latency(0.2, path="/binding")
                cluster.faults.fail_next(1, 500, path="/binding")
                low = gang("low", 4, priority_class="low")
                cluster.load_objects(low)
                await wait_until(lambda: bound_count(cluster, pod_names(low)) == 4, within=15, what="low bound")
                writer.command = good_writer  # snapshots from now on are written
                high = gang("high", 4, priority_class="high")
                cluster.load_objects(high)
                await wait_until(lambda: bound_count(cluster, pod_names(high)) == 4, within=20, what="high bound")
                cluster.load_objects(gang("broken", 4, priority_class="high"))
                await wait_until(lambda: bool(journal.internal_errors), what="the broken gang's internal error")
                # A kubelet refuses one of the pods toposched bound (another scheduler got there first, say).
                refused = cluster.store.find("pods", "high-0", "default")
                assert refused is not None
                cluster.store.update_in(resolve("pods"), "high-0", "default", {**refused, "status": {
                    **refused["status"], "phase": "Failed", "reason": "OutOfcpu",
                    "message": "Pod was rejected: Node didn't have enough resource: cpu, requested: 8000, used: "
                               "60000, capacity: 64000"}}, subresource="status")
                await wait_until(lambda: (registry.get_sample_value("toposched_kubelet_rejections_total",
                                                                    {"reason": "OutOfcpu"}) or 0) >= 1,
                                 what="the kubelet's refusal counted")

                watchers = daemon.watchers
                assert watchers is not None
                pod_watcher = next(w for w in watchers.watchers if w.info.name == "Pod")
                cluster.faults.fail_next(1, 410, verb="watch", path="/pods")
                cluster.faults.drop_watches()
                await wait_until(lambda: pod_watcher.relists >= 2, what="a relist after 410 Gone")
                await wait_until(lambda: (registry.get_sample_value(
                    "toposched_event_log_snapshot_duration_seconds_count") or 0) >= 1, within=20, what="a snapshot")
                await anyio.sleep(1.2)  # one more tick of the gauges
                assert daemon.endpoints is not None
                text = await anyio.to_thread.run_sync(scrape, daemon.endpoints.port)
                sampling.cancel_scope.cancel()
            assert watchers is not None
            for watcher in watchers.watchers:  # every relist is counted, the first list included
                assert registry.get_sample_value("toposched_watch_relists_total",
                                                 {"kind": watcher.info.name}) == watcher.relists

    after = samples(text)
    assert set(baseline) <= set(after), sorted(set(baseline) - set(after))
    assert not any(name.endswith("_created") for family in after.values() for name, _ in family)
    still = sorted(name for name in baseline if name not in CONSTANT and not moved(baseline[name], after[name]))
    assert most_in_flight > 0  # a gauge that is back at 0 by the end: sampled while binds were in flight
    assert still == ["toposched_binds_in_flight"], f"registered but never moved: {still}"
    def total(family: str, **labels: str) -> float:
        return sum(value for (name, sample), value in after[family].items()
                   if name.endswith("_total") and labels.items() <= dict(sample).items())

    assert total("toposched_event_log_recoveries") == 1
    assert total("toposched_event_log_snapshot_failures") >= 1
    assert total("toposched_event_log_oversized_records", kind="Node") >= 1
    assert total("toposched_invalid_objects", kind="PodGroup") >= 1
    assert total("toposched_internal_errors", stage="preempt") >= 1
    assert total("toposched_watch_relists", kind="Pod") >= 2
    info = after["toposched_build_info"]
    ((_, labels), value), = info.items()
    assert value == 1 and dict(labels)["version"] == package_version() and dict(labels)["python"]
    pending = after["toposched_pending_gangs"]
    by_reason = {dict(labels)["reason"]: value for (_, labels), value in pending.items() if value}
    assert by_reason.get("error") == 1  # the broken gang
    assert set(by_reason) >= {"error"} and sum(by_reason.values()) >= 2  # and huge, which can never fit
