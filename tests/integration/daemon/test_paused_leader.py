"""Never two writers: a leader paused past its lease during a 429 storm writes nothing once it wakes.

Two real `toposched run` processes against devcluster (in this process, on 127.0.0.1), a 2 s lease.
Bindings answer 429 (set over devcluster's admin endpoint, as a user would), so the leader is deep in
its retry loop when it is stopped with SIGSTOP; the standby takes the Lease and tries to bind the
same gang; the storm ends; the old leader gets SIGCONT, and anything it sent now would be accepted.
devcluster's write audit records every write request with its User-Agent, which names the
replica: the assertions are about what reached the API server and from whom.
"""

from __future__ import annotations

import signal
import socket
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
from tests.integration.daemon.harness import bound_count, gang, node_of, nodes, pod_names, wait_until

LEASE = ("leases.coordination.k8s.io", "toposched", "kube-system")
GPU = "nvidia.com/gpu"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _config(path: Path, lease: float, renew_deadline: float) -> Path:
    path.write_text(yaml.safe_dump({
        "fsync": "never",
        "bind_concurrency": 16,
        "leader_election": {"lease_namespace": "kube-system", "lease_duration_seconds": lease,
                            "renew_deadline_seconds": renew_deadline, "retry_period_seconds": 0.25},
        # Many attempts: the leader is inside one retrying call when it is stopped.
        "timeouts": {"request_seconds": 5, "watch_seconds": 30, "backoff_initial_seconds": 0.05,
                     "backoff_max_seconds": 1, "missing_crd_retry_seconds": 1, "bind_retry_attempts": 60},
    }))
    return path


class Replica:
    def __init__(self, identity: str, process: anyio.abc.Process, port: int) -> None:
        self.identity = identity
        self.process = process
        self.port = port

    def wrote(self, record: AuditRecord) -> bool:
        return record.user_agent.endswith(f"({self.identity})")

    async def ready_as(self, session: aiohttp.ClientSession, role: str) -> bool:
        try:
            async with session.get(f"http://127.0.0.1:{self.port}/readyz") as response:
                return response.status == 200 and f"role={role}" in await response.text()
        except aiohttp.ClientError:
            return False


@asynccontextmanager
async def replica(cluster: DevCluster, tmp_path: Path, identity: str, lease: float,
                  renew_deadline: float) -> AsyncIterator[Replica]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    port = _free_port()
    config = _config(tmp_path / "config.yaml", lease, renew_deadline)
    command = [sys.executable, "-m", "daemon", "run", "--config", str(config),
               "--kubeconfig", str(kubeconfig), "--log-dir", str(tmp_path / f"log-{identity}"),
               "--address", f"127.0.0.1:{port}", "--identity", identity, "--log-level", "info"]
    with open(tmp_path / f"{identity}.out", "wb") as output:  # noqa: ASYNC230 (the child's log file, local)
        process = await anyio.open_process(command, stdout=output, stderr=output)
        try:
            yield Replica(identity, process, port)
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
            await process.wait()


def holder(cluster: DevCluster) -> str:
    lease = cluster.store.find(*LEASE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def over_committed(cluster: DevCluster) -> dict[str, int]:
    """Nodes whose bound pods ask for more GPUs than the node has, with how many they ask for."""
    asked: dict[str, int] = {}
    for found in cluster.store.list("pods"):
        node = (found.get("spec") or {}).get("nodeName")
        if node:
            for container in found["spec"]["containers"]:
                asked[node] = asked.get(node, 0) + int(container["resources"]["requests"].get(GPU, 0))
    allocatable = {n["metadata"]["name"]: int(n["status"]["allocatable"][GPU]) for n in cluster.store.list("nodes")}
    return {node: gpus for node, gpus in asked.items() if gpus > allocatable[node]}


def is_lease_write(record: AuditRecord) -> bool:
    return "/leases" in record.path


async def admin(session: aiohttp.ClientSession, cluster: DevCluster, method: str, body: Any = None) -> Any:
    async with session.request(method, f"{cluster.url}/devcluster/faults", json=body) as response:
        assert response.status in (200, 201), await response.text()
        return await response.json()


class Contest:
    """Two replicas, the gang they both want, and the devcluster they write to."""

    def __init__(self, cluster: DevCluster, session: aiohttp.ClientSession, old: Replica, new: Replica) -> None:
        self.cluster = cluster
        self.session = session
        self.old = old  # the leader, to be paused
        self.new = new  # the standby
        self.job = gang("contested", 4)

    def sent_bindings(self, replica: Replica) -> bool:
        return any(replica.wrote(r) and r.path.endswith("/binding") for r in self.cluster.audit.since())

    async def start_storm_with_the_leader_binding(self) -> None:
        """Bindings answer 429 until cleared; the leader is retrying the gang's bindings on return."""
        await admin(self.session, self.cluster, "POST", {"status": 429, "verb": "create", "path": "/binding",
                                                         "fraction": 1.0, "retry_after": 1})
        self.cluster.load_objects(self.job)
        await wait_until(lambda: self.sent_bindings(self.old), within=20, what="the leader to be retrying bindings")

    async def finish(self) -> tuple[int, int]:
        """The old leader exits on waking; the gang gets bound; the new leader stops cleanly: exit codes."""
        with anyio.fail_after(20):
            old_exit = await self.old.process.wait()
        await wait_until(lambda: holder(self.cluster) == self.new.identity, within=15, what="the standby to lead")
        await wait_until(lambda: bound_count(self.cluster, pod_names(self.job)) == 4, within=30,
                         what="the gang bound")
        self.new.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            new_exit = await self.new.process.wait()
        return old_exit, new_exit

    def assert_bound_once_by_the_new_leader_without_over_commit(self) -> None:
        records = self.cluster.audit.since()
        takeover = next(r.seq for r in records if self.new.wrote(r) and is_lease_write(r) and 200 <= r.status < 300)
        early = [r for r in records if r.seq < takeover and self.new.wrote(r) and not is_lease_write(r)]
        assert early == [], f"the standby wrote before it held the Lease: {early}"
        accepted = [r for r in records if r.path.endswith("/binding") and 200 <= r.status < 300]
        assert sorted(r.path for r in accepted) == sorted(
            f"/api/v1/namespaces/default/pods/{name}/binding" for name in pod_names(self.job))
        assert all(self.new.wrote(r) for r in accepted)
        assert len({node_of(self.cluster, name) for name in pod_names(self.job)}) == 4
        assert over_committed(self.cluster) == {}

    def writes_of_the_old_leader_after(self, seq: int) -> list[AuditRecord]:
        return [r for r in self.cluster.audit.since(seq) if self.old.wrote(r) and not is_lease_write(r)]


@asynccontextmanager
async def contest(tmp_path: Path, *, lease: float, renew_deadline: float) -> AsyncIterator[Contest]:
    async with DevCluster() as cluster, aiohttp.ClientSession() as session:
        cluster.load_objects(nodes(8))
        async with replica(cluster, tmp_path, "replica-a", lease, renew_deadline) as old, \
                replica(cluster, tmp_path, "replica-b", lease, renew_deadline) as new:
            await wait_until(lambda: holder(cluster) != "", within=30, what="a leader")
            if holder(cluster) != old.identity:
                old, new = new, old
            with anyio.fail_after(30):
                while not await new.ready_as(session, "standby"):  # noqa: ASYNC110 (an HTTP probe, deadline above)
                    await anyio.sleep(0.05)
            yield Contest(cluster, session, old, new)


async def test_a_leader_paused_past_its_lease_sends_no_write_after_waking(tmp_path: Path) -> None:
    async with contest(tmp_path, lease=2, renew_deadline=1.5) as run:
        await run.start_storm_with_the_leader_binding()
        run.old.process.send_signal(signal.SIGSTOP)
        await wait_until(lambda: holder(run.cluster) == run.new.identity, within=15,
                         what="the standby to take the Lease")
        await wait_until(lambda: run.sent_bindings(run.new), within=15, what="the new leader to try binding")
        # The storm ends while the old leader is still stopped: whatever it sends on waking would land.
        await admin(run.session, run.cluster, "DELETE")
        run.old.process.send_signal(signal.SIGCONT)
        old_exit, new_exit = await run.finish()
    records = run.cluster.audit.since()
    takeover = next(r.seq for r in records if run.new.wrote(r) and is_lease_write(r) and 200 <= r.status < 300)
    late = run.writes_of_the_old_leader_after(takeover)
    assert late == [], f"writes of the old leader reached the API server after it lost the Lease: {late}"
    run.assert_bound_once_by_the_new_leader_without_over_commit()
    assert old_exit == 1  # it knew it had lost the lease: exit 1, like kube-scheduler
    assert new_exit == 0


async def test_a_leader_woken_past_its_renew_deadline_writes_nothing_even_before_anyone_takes_over(
        tmp_path: Path) -> None:
    # A 4 s lease and a 2 s renew deadline: woken 2.8 s after it stopped, the leader's own deadline has
    # passed but the standby cannot have taken the Lease yet. Held is judged by its own clock, not by
    # who holds the Lease.
    async with contest(tmp_path, lease=4, renew_deadline=2) as run:
        await run.start_storm_with_the_leader_binding()
        stopped_at = anyio.current_time()
        run.old.process.send_signal(signal.SIGSTOP)
        await admin(run.session, run.cluster, "DELETE")  # the storm ends while it is stopped
        await anyio.sleep(stopped_at + 2.8 - anyio.current_time())  # the pause itself, not a wait for work
        assert holder(run.cluster) == run.old.identity, "the standby took over early: the premise does not hold"
        woken = run.cluster.audit.since()[-1].seq
        run.old.process.send_signal(signal.SIGCONT)
        old_exit, new_exit = await run.finish()
    late = run.writes_of_the_old_leader_after(woken)
    assert late == [], f"writes of the old leader reached the API server after its renew deadline: {late}"
    run.assert_bound_once_by_the_new_leader_without_over_commit()
    assert old_exit == 1
    assert new_exit == 0
