"""Chaos: the leader stopped (SIGSTOP) beyond its lease during a 429 storm on bindings, then SIGCONT.

Two real replicas on a fresh devcluster each iteration (`leader_contest.py`). Bindings answer 429 over
devcluster's admin endpoint, so the leader is retrying a gang's bindings when it is stopped. Even
iterations wake it after the standby has taken the Lease (2 s lease); odd ones just past its own
renew deadline, before anyone could take over (5 s lease, 2 s renew deadline). The storm ends while
it is stopped, so anything it sends on waking would be accepted. What must hold: the woken leader
writes nothing (no write of it reaches the API server after the takeover or after it woke, whichever
is first) and exits 1; the standby writes nothing before it holds the Lease; the gang is bound once,
by the new leader, and no node is over its allocatable; a canary binds; both logs verify.
"""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

from tests.chaos.harness import Tally, canary_binds, iterate, verified
from tests.integration.daemon.harness import wait_until
from tests.integration.daemon.leader_contest import contest
from tests.integration.daemon.processes import holder

pytestmark = pytest.mark.chaos


async def pause_the_leader(directory: Path, index: int) -> None:
    after_takeover = index % 2 == 0
    lease, renew_deadline = (2.0, 1.5) if after_takeover else (5.0, 2.0)
    size = random.Random(index).randint(2, 6)
    async with contest(directory, lease=lease, renew_deadline=renew_deadline, size=size, node_count=12) as run:
        await run.start_storm_with_the_leader_binding()
        run.old.process.send_signal(signal.SIGSTOP)
        if after_takeover:
            await wait_until(lambda: holder(run.cluster) == run.new.identity, within=15,
                             what="the standby to take the Lease")
            await wait_until(lambda: run.sent_bindings(run.new), within=15, what="the new leader to try binding")
        else:
            await run.past_the_leaders_renew_deadline()
        await run.end_storm()
        woken = run.cluster.audit.since()[-1].seq
        run.old.process.send_signal(signal.SIGCONT)
        assert await run.old_leader_exit() == 1, "the woken leader did not exit 1"
        await run.bound_by_the_new_leader()
        late = run.writes_of_the_old_leader_after(min(woken, run.takeover()))
        assert late == [], f"writes of the old leader reached the API server after it lost the Lease: {late}"
        run.assert_bound_once_by_the_new_leader_without_over_commit()
        await canary_binds(run.cluster, f"canary-{index}", [run.new])
        assert await run.new.stop() == 0
    for replica in (run.old, run.new):
        await verified(replica.log_dir)


async def test_a_leader_paused_beyond_its_lease_in_a_429_storm_never_makes_two_writers(
        tmp_path: Path, iterations: int, tally: Tally) -> None:
    await iterate(tally, iterations, tmp_path, pause_the_leader)
