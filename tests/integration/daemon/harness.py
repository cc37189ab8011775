"""Running the real daemon in-process against devcluster over HTTP, for the integration tests.

`daemons(cluster, tmp_path, count=...)` starts daemons (each its own event log, its own metrics,
endpoints on a free port) inside a task group and stops them gracefully on exit, bounded in time.
`RunningDaemon.kill()` simulates a crash: the work is cancelled and the lease is not released.
`wait_until` polls a condition with a deadline (no sleeps as synchronisation).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from daemon.cli.run import Daemon
from daemon.config import decode_config
from daemon.telemetry.observability import Tracing
from devcluster.cluster import DevCluster
from events.log import EventLog
from events.model import PodBound
from events.objects import POD_GROUP_LABEL

NAMESPACE = "default"


async def wait_until(condition: Callable[[], bool], within: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await anyio.sleep(0.02)


class RunningDaemon:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.stop = anyio.Event()
        self.scope = anyio.CancelScope()
        self.finished = anyio.Event()
        self.exit_code: int | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[Daemon] = anyio.TASK_STATUS_IGNORED) -> None:
        with self.scope:
            try:
                await self.daemon.run(self.stop, task_status=task_status)
                self.exit_code = self.daemon.exit_code
            finally:
                self.finished.set()

    def kill(self) -> None:
        """A crash: stop at once, leave the lease to expire."""
        if self.daemon.elector is not None:
            self.daemon.elector.release_on_exit = False
        self.scope.cancel()

    @property
    def is_leader(self) -> bool:
        return self.daemon.leading.is_set() and not self.finished.is_set()

    def recorded_bound(self) -> set[str]:
        """A live set of the pods ("namespace/name") this daemon records bound (PodBound) from now on. The
        API server holds a binding, and the watch may show it, before the daemon has its answer and
        records it: wait on this set, not on the store, before killing or stopping a daemon whose
        bindings a test counts in its log."""
        journal = self.daemon.journal
        assert journal is not None, "the daemon has not started"
        seen: set[str] = set()
        journal.subscribe(lambda event: seen.add(event.pod) if isinstance(event, PodBound) else None)
        return seen


def config_for(cluster_kubeconfig: Path, log_dir: Path, *, election: bool, identity: str = "",
               **overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "kubeconfig": str(cluster_kubeconfig),
        "log_dir": str(log_dir),
        "fsync": "never",
        "address": "127.0.0.1:0",
        "bind_concurrency": 16,
        "leader_election": {
            "enabled": election, "identity": identity, "lease_namespace": "kube-system",
            "lease_duration_seconds": 1.0, "renew_deadline_seconds": 0.7, "retry_period_seconds": 0.1,
        },
        "timeouts": {"request_seconds": 5, "watch_seconds": 30, "backoff_initial_seconds": 0.05,
                     "backoff_max_seconds": 0.5, "missing_crd_retry_seconds": 1, "bind_retry_attempts": 6,
                     "not_ready_report_seconds": 0.2},
    }
    document.update(overrides)
    return document


@asynccontextmanager
async def daemons(cluster: DevCluster, tmp_path: Path, count: int = 1, *, election: bool = False,
                  tracing: Tracing | None = None, **overrides: Any) -> AsyncIterator[list[RunningDaemon]]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    handles: list[RunningDaemon] = []
    async with anyio.create_task_group() as group:
        for index in range(count):
            document = config_for(kubeconfig, tmp_path / f"log-{index}", election=election,
                                  identity=f"daemon-{index}", **overrides)
            handle = RunningDaemon(Daemon(decode_config(document), tracing=tracing, shutdown_grace_seconds=5.0))
            await group.start(handle.run)
            handles.append(handle)
        try:
            yield handles
        finally:
            for handle in handles:
                handle.stop.set()
            with anyio.move_on_after(10):
                for handle in handles:
                    await handle.finished.wait()
            group.cancel_scope.cancel()


def nodes(count: int, gpus: int = 8, *, per_nvl: int = 4, per_block: int = 8) -> list[dict[str, Any]]:
    result = []
    for index in range(count):
        labels = {
            "network.topology.nvidia.com/spine": "spine-0",
            "network.topology.nvidia.com/block": f"block-{index // per_block}",
            "network.topology.nvidia.com/accelerator": f"nvl-{index // per_nvl}",
        }
        resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
        result.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{index:03d}", "labels": labels},
                       "status": {"capacity": resources, "allocatable": resources}})
    return result


def gang(name: str, size: int, gpus: int = 8, *, min_member: int | None = None, priority_class: str = "",
         annotations: dict[str, str] | None = None, timeout: int = 600) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations or {}},
             "spec": {"minMember": size if min_member is None else min_member, "scheduleTimeoutSeconds": timeout}}
    return [group, *(pod(f"{name}-{index}", gpus, gang_name=name, priority_class=priority_class)
                     for index in range(size))]


def pod(name: str, gpus: int = 8, *, gang_name: str = "", priority_class: str = "",
        scheduler: str = "toposched") -> dict[str, Any]:
    labels = {POD_GROUP_LABEL: gang_name} if gang_name else {}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "trainer",
                        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": spec}


def node_of(cluster: DevCluster, name: str, namespace: str = NAMESPACE) -> str:
    found = cluster.store.find("pods", name, namespace)
    return str((found or {}).get("spec", {}).get("nodeName") or "")


def bound_count(cluster: DevCluster, names: list[str]) -> int:
    return sum(1 for name in names if node_of(cluster, name))


def pod_names(manifests: list[dict[str, Any]]) -> list[str]:
    return [m["metadata"]["name"] for m in manifests if m["kind"] == "Pod"]


def bindings_in_logs(log_dirs: list[Path]) -> Counter[str]:
    """How many times each pod was recorded bound, over every daemon's log (read after they stopped)."""
    counts: Counter[str] = Counter()
    for directory in log_dirs:
        if not directory.exists():
            continue
        log = EventLog.open_readonly(directory)
        try:
            for event in log.read():
                if isinstance(event, PodBound):
                    counts[event.pod] += 1
        finally:
            log.close()
    return counts
