"""A damaged event log never crash-loops the daemon: in-process and as a real `toposched run` process.

Recover (the default): the daemon starts on a new log, schedules, and says so on the API (a Warning
Event), in its logs and in its metrics. Refuse: `toposched run` exits 3 naming the damage.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.cli.run import EVENT_LOG_RECOVERED
from devcluster.cluster import DevCluster
from events.log import DAMAGED_INFIX, EventLog
from tests.integration.daemon.harness import bound_count, daemons, gang, nodes, pod_names, wait_until
from tests.logdamage import damaged_log


def moved_logs(log_dir: Path) -> list[Path]:
    return sorted(log_dir.parent.glob(log_dir.name + DAMAGED_INFIX + "*"))


def names_in(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def recovery_events(cluster: DevCluster, namespace: str) -> list[dict[str, Any]]:
    return [e for e in cluster.store.list("events", namespace) if e["reason"] == EVENT_LOG_RECOVERED]


async def test_a_daemon_on_a_damaged_log_moves_it_aside_schedules_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "toposched-system")
    monkeypatch.setenv("POD_NAME", "toposched-abc12")
    damaged_log(tmp_path / "log-0", "middle")
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(2))
        async with daemons(cluster, tmp_path) as (running,):
            job = gang("after-recovery", 2)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 2, what="gang bound on the new log")
            await wait_until(lambda: bool(recovery_events(cluster, "toposched-system")), what="the Warning Event")
            event = recovery_events(cluster, "toposched-system")[0]
            assert event["type"] == "Warning"
            assert event["involvedObject"]["kind"] == "Pod" and event["involvedObject"]["name"] == "toposched-abc12"
            assert "damaged" in event["message"] and DAMAGED_INFIX in event["message"]
            metrics = running.daemon.metrics
            assert metrics.registry.get_sample_value("toposched_event_log_recoveries_total") == 1
            assert running.daemon.recovery_reported
    assert len(moved_logs(tmp_path / "log-0")) == 1
    with EventLog.open_readonly(tmp_path / "log-0") as fresh:
        assert fresh.last_seq > 0  # the new log, from the relist on


def _run_command(kubeconfig: Path, log_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "daemon", "run", "--kubeconfig", str(kubeconfig), "--log-dir", str(log_dir),
            "--address", "127.0.0.1:0", "--no-leader-elect", "--log-level", "info", *extra]


async def test_toposched_run_refusing_a_damaged_log_exits_3_naming_it(tmp_path: Path) -> None:
    damaged_log(tmp_path / "log", "middle")
    async with DevCluster() as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        with anyio.fail_after(30):
            result = await anyio.run_process(_run_command(kubeconfig, tmp_path / "log", "--on-log-corruption",
                                                          "refuse"), check=False)
    assert result.returncode == 3
    stderr = result.stderr.decode()
    assert "event log corrupt in" in stderr and "00000000000000000001.seg at offset" in stderr
    assert "on_corruption: recover" in stderr  # says how to get going again
    assert names_in(tmp_path) == ["kubeconfig", "log"]  # nothing moved


async def test_toposched_run_recovers_a_damaged_log_by_default_and_schedules(tmp_path: Path) -> None:
    damaged_log(tmp_path / "log", "sealed")
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(2))
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        with (tmp_path / "stderr").open("wb") as stderr_file:
            outside_a_pod = {k: v for k, v in os.environ.items() if k not in ("POD_NAME", "POD_NAMESPACE")}
            process = await anyio.open_process(_run_command(kubeconfig, tmp_path / "log"), stderr=stderr_file,
                                               env=outside_a_pod)
            async with process:
                try:
                    job = gang("after-recovery", 2)
                    cluster.load_objects(job)
                    await wait_until(lambda: bound_count(cluster, pod_names(job)) == 2, within=30,
                                     what="gang bound")
                    await wait_until(lambda: bool(recovery_events(cluster, "kube-system")), what="the Warning Event")
                    assert recovery_events(cluster, "kube-system")[0]["involvedObject"]["kind"] == "Lease"
                finally:
                    process.terminate()
                    with anyio.fail_after(20):
                        await process.wait()
    assert moved_logs(tmp_path / "log"), "the damaged log is kept beside the new one"
    logged = await anyio.Path(tmp_path / "stderr").read_text()
    assert "daemon.log_recovered" in logged and "00000000000000000001.seg at offset" in logged
