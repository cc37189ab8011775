"""`toposched run` as a process, when the environment refuses: the metrics port in use, a log directory
that is a file or read-only, the disk full while writing the log, a second SIGTERM during the drain.
Each ends with one line on standard error (every other line is a JSON log record: no traceback), the
documented exit code, and the `daemon.stopped` log line carrying that code."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest

from devcluster.cluster import DevCluster
from devcluster.faults import parse_fault
from tests.integration.daemon.harness import gang, nodes, wait_until


def run_command(*args: str, fault: tuple[str, Path] | None = None) -> list[str]:
    prefix = ["-m", "tests.integration.daemon.faulty_disk", fault[0], str(fault[1])] if fault else ["-m", "daemon"]
    return [sys.executable, *prefix, "run", *args]


def records_and_last_line(stderr: str) -> tuple[list[dict[str, object]], str]:
    """Every line but the last must be a JSON log record (a traceback is not); the last is the one-line error."""
    lines = stderr.strip().splitlines()
    assert lines, "nothing on standard error"
    records = []
    for line in lines[:-1]:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a log record (a traceback?): {line}\n---\n{stderr}") from None
    return records, lines[-1]


def unreachable_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "users": [{"name": "u", "user": {}}],
    }))
    return path


def stopped_code(records: list[dict[str, object]]) -> object:
    return next(r["exit_code"] for r in records if r.get("event") == "daemon.stopped")


@pytest.mark.parametrize(("content", "said"), [
    (b"\x7fELF\x02\x01\x01\x00\xff", "is not UTF-8 text"),
    (b"timeouts: " + b"[" * 10_000 + b"]" * 10_000, "is not valid YAML: exceeded maximum nesting depth"),
    (b"timeouts:\n  request_seconds: .inf\n", "timeouts.request_seconds: expected a finite number, got inf"),
], ids=["binary", "nested", "infinite"])
def test_a_config_that_is_not_a_config_is_one_line_and_exit_2(tmp_path: Path, content: bytes, said: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(content)
    done = subprocess.run(run_command("--config", str(config)), capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("toposched run: bad configuration: ")
    assert said in done.stderr


def test_a_metrics_port_in_use_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        # The endpoints are served before the first request to the API server: no server is needed.
        done = subprocess.run(run_command("--kubeconfig", str(unreachable_kubeconfig(tmp_path)), "--log-dir",
                                          str(tmp_path / "log"), "--address", address, "--no-leader-elect"),
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    records, last = records_and_last_line(done.stderr)
    assert last == (f"toposched run: cannot serve /metrics, /healthz and /readyz on {address} (--address, or "
                    "`address` in the config): address already in use")
    assert stopped_code(records) == 3


def test_a_log_dir_that_is_a_file_is_one_line_and_exit_3(tmp_path: Path) -> None:
    (tmp_path / "log").write_text("not a directory")
    done = subprocess.run(run_command("--kubeconfig", str(tmp_path / "none"), "--log-dir", str(tmp_path / "log")),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    _, last = records_and_last_line(done.stderr)
    assert last == f"toposched run: event log directory {tmp_path / 'log'}: is a file, not a directory"


def test_a_read_only_log_dir_is_one_line_and_exit_3(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    done = subprocess.run(run_command("--kubeconfig", str(tmp_path / "none"), "--log-dir", str(tmp_path / "log"),
                                      fault=("readonly", tmp_path / "log")),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3
    _, last = records_and_last_line(done.stderr)
    assert last == (f"toposched run: event log directory {tmp_path / 'log'}: cannot be written (Read-only file "
                    "system); give a writable directory")


async def test_a_full_disk_while_writing_the_log_stops_the_daemon_in_one_line_with_exit_3(tmp_path: Path) -> None:
    full = tmp_path / "disk-is-full"
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(2))
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        command = run_command("--kubeconfig", str(kubeconfig), "--log-dir", str(tmp_path / "log"), "--address",
                              "127.0.0.1:0", "--no-leader-elect", "--fsync", "always", fault=("full", full))
        async with started(command, tmp_path / "stderr") as (process, stderr):
            await wait_until(lambda: "daemon.leading" in stderr.read_text(), within=20, what="the daemon leads")
            full.touch()
            cluster.load_objects(gang("after-the-disk-filled", 1))  # its watch event cannot be logged
            with anyio.fail_after(20):
                code = await process.wait()
    assert code == 3
    records, last = records_and_last_line(stderr.read_text())
    assert last == (f"toposched run: event log {tmp_path / 'log'}: cannot write: No space left on device (the disk "
                    "is full); stopped (what the log acknowledged is kept, a restart resumes from it)")
    assert stopped_code(records) == 3


async def test_a_second_sigterm_during_the_drain_stops_at_once_without_a_traceback(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(2))
        # Every Binding is refused with Retry-After 30 s: the gang's binds stay in flight through the drain.
        refused = cluster.faults.add(parse_fault("status=429,verb=create,path=/binding,fraction=1,retry_after=30"))
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        command = run_command("--kubeconfig", str(kubeconfig), "--log-dir", str(tmp_path / "log"), "--address",
                              "127.0.0.1:0", "--no-leader-elect")
        async with started(command, tmp_path / "stderr") as (process, stderr):
            cluster.load_objects(gang("slow", 2))
            await wait_until(lambda: refused.fired >= 1, within=20, what="a Binding in flight")
            process.send_signal(signal.SIGTERM)
            await wait_until(lambda: "daemon.stopping" in stderr.read_text(), within=10, what="the drain began")
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(10):  # well inside the 20 s drain the first signal allowed
                code = await process.wait()
    assert code == 0
    text = stderr.read_text()
    records = [json.loads(line) for line in text.strip().splitlines()]  # every line a record: no traceback
    assert [r["signal"] for r in records if r["event"] == "daemon.signal"] == ["SIGTERM", "SIGTERM"]
    assert any(r["event"] == "daemon.stopping_now" for r in records)
    assert stopped_code(records) == 0


@asynccontextmanager
async def started(command: list[str], stderr: Path) -> AsyncIterator[tuple[anyio.abc.Process, Path]]:
    """A process with its standard error in a file the test can poll; killed if the test leaves early."""
    with stderr.open("wb") as handle:
        process = await anyio.open_process(command, stderr=handle)
        try:
            yield process, stderr
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()


async def test_a_lost_lease_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("leader_election:\n  lease_duration_seconds: 1.5\n  renew_deadline_seconds: 1\n"
                      "  retry_period_seconds: 0.2\n")
    async with DevCluster() as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        command = run_command("--config", str(config), "--kubeconfig", str(kubeconfig), "--log-dir",
                              str(tmp_path / "log"), "--address", "127.0.0.1:0", "--lease-namespace", "kube-system")
        async with started(command, tmp_path / "stderr") as (process, stderr):
            await wait_until(lambda: "daemon.leading" in stderr.read_text(), within=20, what="the daemon leads")
            cluster.faults.add(parse_fault("status=503,verb=update,path=/leases/,fraction=1"))  # renewals fail
            with anyio.fail_after(20):
                code = await process.wait()
    assert code == 1
    records, last = records_and_last_line(stderr.read_text())
    assert last.startswith("toposched run: lease kube-system/toposched lost (not renewed in time, or taken by ")
    assert any(r["event"] == "daemon.lost_lease" for r in records)
    assert stopped_code(records) == 1
