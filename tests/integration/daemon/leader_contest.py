"""Two replicas contesting one gang while bindings answer 429, for the paused-leader tests.

Two real `toposched run` processes (`processes.daemon_process`) against devcluster; bindings answer
429 (set over devcluster's admin endpoint, as a user would), so the leader is deep in its retry loop
when the test stops it with SIGSTOP. devcluster's write audit records every write request with its
User-Agent, which names the replica: the assertions are about what reached the API server and from
whom. Used by `test_paused_leader.py` and the chaos suite (`tests/chaos/`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio

from devcluster.audit import AuditRecord
from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import bound_count, gang, node_of, nodes, pod_names, wait_until
from tests.integration.daemon.processes import (
    LEASE,
    DaemonProcess,
    admin,
    config_file,
    daemon_process,
    holder,
    is_lease_write,
    lease_time,
    over_committed,
)


def renewed_at(cluster: DevCluster) -> float:
    """The Lease's renewTime as seconds since the epoch (0 when there is none)."""
    lease = cluster.store.find(*LEASE) or {}
    text = str((lease.get("spec") or {}).get("renewTime") or "")
    return lease_time(text) if text else 0.0


class Contest:
    """Two replicas, the gang they both want, and the devcluster they write to."""

    def __init__(self, cluster: DevCluster, session: aiohttp.ClientSession, old: DaemonProcess,
                 new: DaemonProcess, *, size: int, renew_deadline: float) -> None:
        self.cluster = cluster
        self.session = session
        self.old = old  # the leader, to be paused
        self.new = new  # the standby
        self.size = size
        self.renew_deadline = renew_deadline
        self.job: list[dict[str, Any]] = gang("contested", size)

    def sent_bindings(self, replica: DaemonProcess) -> bool:
        return any(replica.wrote(r) and r.path.endswith("/binding") for r in self.cluster.audit.since())

    async def start_storm_with_the_leader_binding(self) -> None:
        """Bindings answer 429 until cleared; the leader is retrying the gang's bindings on return."""
        await admin(self.session, self.cluster, "POST", {"status": 429, "verb": "create", "path": "/binding",
                                                         "fraction": 1.0, "retry_after": 1})
        self.cluster.load_objects(self.job)
        await wait_until(lambda: self.sent_bindings(self.old), within=20, what="the leader to be retrying bindings")

    async def end_storm(self) -> None:
        await admin(self.session, self.cluster, "DELETE")

    async def past_the_leaders_renew_deadline(self, margin: float = 0.3) -> None:
        """Wait (the old leader stopped) until its renew deadline has passed by `margin`: its gate closed
        at the start of its last renewal + renew_deadline, and that start was no later than the
        renewTime it wrote. The renewTime is read again each time: a renewal sent just before the stop
        may land after it."""
        await wait_until(lambda: time.time() >= renewed_at(self.cluster) + self.renew_deadline + margin, within=30,
                         what="the stopped leader's renew deadline to pass")

    async def old_leader_exit(self) -> int:
        """The old leader's exit code once it is awake: it knew it had lost the Lease."""
        with anyio.fail_after(20):
            return await self.old.process.wait()

    async def bound_by_the_new_leader(self) -> None:
        await wait_until(lambda: holder(self.cluster) == self.new.identity, within=15, what="the standby to lead")
        await wait_until(lambda: bound_count(self.cluster, pod_names(self.job)) == self.size, within=30,
                         what="the gang bound")

    def takeover(self) -> int:
        """The audit seq of the new leader's first successful Lease write."""
        return next(r.seq for r in self.cluster.audit.since()
                    if self.new.wrote(r) and is_lease_write(r) and 200 <= r.status < 300)

    def assert_bound_once_by_the_new_leader_without_over_commit(self) -> None:
        records = self.cluster.audit.since()
        takeover = self.takeover()
        early = [r for r in records if r.seq < takeover and self.new.wrote(r) and not is_lease_write(r)]
        assert early == [], f"the standby wrote before it held the Lease: {early}"
        accepted = [r for r in records if r.path.endswith("/binding") and 200 <= r.status < 300]
        assert sorted(r.path for r in accepted) == sorted(
            f"/api/v1/namespaces/default/pods/{name}/binding" for name in pod_names(self.job))
        assert all(self.new.wrote(r) for r in accepted)
        assert len({node_of(self.cluster, name) for name in pod_names(self.job)}) == self.size
        assert over_committed(self.cluster) == {}

    def writes_of_the_old_leader_after(self, seq: int) -> list[AuditRecord]:
        return [r for r in self.cluster.audit.since(seq) if self.old.wrote(r) and not is_lease_write(r)]


@asynccontextmanager
async def contest(directory: Path, *, lease: float, renew_deadline: float, size: int = 4,
                  node_count: int = 8) -> AsyncIterator[Contest]:
    """Two replicas on a fresh devcluster, the leader known and the standby ready."""
    async with DevCluster() as cluster, aiohttp.ClientSession() as session, AsyncExitStack() as stack:
        cluster.load_objects(nodes(node_count))
        config = config_file(directory / "config.yaml", lease=lease, renew_deadline=renew_deadline)
        old, new = [await stack.enter_async_context(daemon_process(cluster, directory, identity, config=config))
                    for identity in ("replica-a", "replica-b")]
        await wait_until(lambda: holder(cluster) != "", within=30, what="a leader")
        if holder(cluster) != old.identity:
            old, new = new, old
        await new.wait_ready(session, "standby")
        yield Contest(cluster, session, old, new, size=size, renew_deadline=renew_deadline)
