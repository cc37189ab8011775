"""The daemon as real processes (`python -m daemon run`) against an in-process devcluster.

For the tests that need what only a process has: SIGSTOP / SIGCONT, kill -9, a restart on the same
log directory, two replicas electing a leader over the Lease. devcluster runs in the test's own
event loop (the tests read its store and audit directly) and its faults are set over its loopback
admin endpoint, as a user would set them (`admin`). Each process writes its output to
`<directory>/<identity>.out` and its event log to `<directory>/log-<identity>`.

`replay_verify` runs `toposched replay LOG --verify` (the real CLI, in a child process) on a log;
`over_committed` recounts what the API server holds on each node against its allocatable.
"""

from __future__ import annotations

import datetime
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import anyio.abc
import yaml

from devcluster.audit import AuditRecord
from devcluster.cluster import DevCluster
from state.resources import parse_quantity

LEASE = ("leases.coordination.k8s.io", "toposched", "kube-system")
TERMINAL_PHASES = ("Succeeded", "Failed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def config_file(path: Path, *, lease: float = 2.0, renew_deadline: float = 1.5, fsync: str = "never",
                bind_retry_attempts: int = 60) -> Path:
    """A config for `toposched run`: a short lease, fast backoff and many bind attempts (a leader stopped
    during a storm is inside one retrying call)."""
    path.write_text(yaml.safe_dump({
        "fsync": fsync,
        "bind_concurrency": 16,
        "leader_election": {"lease_namespace": "kube-system", "lease_duration_seconds": lease,
                            "renew_deadline_seconds": renew_deadline, "retry_period_seconds": 0.25},
        "timeouts": {"request_seconds": 5, "watch_seconds": 30, "backoff_initial_seconds": 0.05,
                     "backoff_max_seconds": 1, "missing_crd_retry_seconds": 1,
                     "bind_retry_attempts": bind_retry_attempts},
    }))
    return path


class DaemonProcess:
    """One `toposched run` process: its identity (the User-Agent names it), its endpoints, its log."""

    def __init__(self, identity: str, process: anyio.abc.Process, port: int, log_dir: Path, output: Path) -> None:
        self.identity = identity
        self.process = process
        self.port = port
        self.log_dir = log_dir
        self.output = output

    def wrote(self, record: AuditRecord) -> bool:
        return record.user_agent.endswith(f"({self.identity})")

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    async def ready_as(self, session: aiohttp.ClientSession, role: str) -> bool:
        """/readyz says synced and this role (leader or standby)."""
        try:
            async with session.get(f"http://127.0.0.1:{self.port}/readyz") as response:
                return response.status == 200 and f"role={role}" in await response.text()
        except aiohttp.ClientError:
            return False

    async def wait_ready(self, session: aiohttp.ClientSession, role: str, within: float = 30.0) -> None:
        with anyio.fail_after(within):
            while not await self.ready_as(session, role):
                if not self.running:
                    raise AssertionError(f"{self.identity} exited {self.process.returncode} before it was ready "
                                         f"as {role}; see {self.output}")
                await anyio.sleep(0.05)

    def kill(self) -> None:
        """kill -9: no shutdown, the Lease left to expire."""
        self.process.send_signal(signal.SIGKILL)

    async def stop(self, within: float = 20.0) -> int:
        """SIGTERM, then its exit code."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(within):
            return await self.process.wait()


@asynccontextmanager
async def daemon_process(cluster: DevCluster, directory: Path, identity: str, *, election: bool = True,
                         config: Path | None = None, log_level: str = "info", log_dir: Path | None = None,
                         extra: tuple[str, ...] = ()) -> AsyncIterator[DaemonProcess]:
    """Start `toposched run` against `cluster` (its event log in `log_dir`, default `directory/log-<identity>`);
    on exit it is woken (if stopped) and killed if still running."""
    kubeconfig = cluster.write_kubeconfig(directory / "kubeconfig")
    port = free_port()
    log_dir = log_dir or directory / f"log-{identity}"
    command = [sys.executable, "-m", "daemon", "run", "--kubeconfig", str(kubeconfig), "--log-dir", str(log_dir),
               "--address", f"127.0.0.1:{port}", "--identity", identity, "--log-level", log_level,
               "--leader-elect" if election else "--no-leader-elect", *extra]
    if config is not None:
        command += ["--config", str(config)]
    output = directory / f"{identity}.out"
    with open(output, "ab") as sink:  # noqa: ASYNC230 (the child's log file, local)
        process = await anyio.open_process(command, stdout=sink, stderr=sink)
        try:
            yield DaemonProcess(identity, process, port, log_dir, output)
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


def lease_time(text: str) -> float:
    """A Lease's MicroTime (renewTime, acquireTime: RFC 3339 with microseconds, UTC) as epoch seconds."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


def holder(cluster: DevCluster) -> str:
    """The Lease's holderIdentity ("" while nobody holds it)."""
    lease = cluster.store.find(*LEASE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def is_lease_write(record: AuditRecord) -> bool:
    return "/leases" in record.path


async def admin(session: aiohttp.ClientSession, cluster: DevCluster, method: str, body: Any = None,
                path: str = "faults") -> Any:
    """Call devcluster's admin endpoint (`/devcluster/<path>`, see devcluster.admin)."""
    async with session.request(method, f"{cluster.url}/devcluster/{path}", json=body) as response:
        assert response.status in (200, 201), await response.text()
        return await response.json()


def requests_of(pod: dict[str, Any]) -> dict[str, int]:
    """What a stored pod asks for, in milli-units per resource (containers summed)."""
    total: dict[str, int] = {}
    for container in pod.get("spec", {}).get("containers", []):
        for name, quantity in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, 0) + parse_quantity(str(quantity))
    return total


def over_committed(cluster: DevCluster) -> dict[str, list[str]]:
    """Nodes whose bound, unfinished pods ask the API server's store for more than allocatable, by resource."""
    asked: dict[str, dict[str, int]] = {}
    for found in cluster.store.list("pods"):
        node = (found.get("spec") or {}).get("nodeName")
        if node and (found.get("status") or {}).get("phase") not in TERMINAL_PHASES:
            on_node = asked.setdefault(node, {})
            for name, amount in requests_of(found).items():
                on_node[name] = on_node.get(name, 0) + amount
    over: dict[str, list[str]] = {}
    for node in cluster.store.list("nodes"):
        name = node["metadata"]["name"]
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        short = sorted(resource for resource, amount in asked.get(name, {}).items()
                       if amount > parse_quantity(str(allocatable.get(resource, "0"))))
        if short:
            over[name] = short
    return over


async def replay_verify(log_dir: Path) -> tuple[int, str]:
    """`toposched replay LOG --verify` in a child process: its exit code and what it printed."""
    result = await anyio.run_process([sys.executable, "-m", "daemon", "replay", str(log_dir), "--verify"],
                                     check=False, stderr=subprocess.STDOUT)
    return result.returncode, result.stdout.decode(errors="replace")
