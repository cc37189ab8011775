"""Never two writers: a leader paused past its lease during a 429 storm writes nothing once it wakes.

Two real `toposched run` processes against devcluster (in this process, on 127.0.0.1), bindings
answering 429 (`leader_contest.py`): the leader is stopped with SIGSTOP while retrying a gang's
bindings; the storm ends while it is stopped, so anything it sent on waking would be accepted.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tests.integration.daemon.harness import wait_until
from tests.integration.daemon.leader_contest import contest
from tests.integration.daemon.processes import holder


async def test_a_leader_paused_past_its_lease_sends_no_write_after_waking(tmp_path: Path) -> None:
    async with contest(tmp_path, lease=2, renew_deadline=1.5) as run:
        await run.start_storm_with_the_leader_binding()
        run.old.process.send_signal(signal.SIGSTOP)
        await wait_until(lambda: holder(run.cluster) == run.new.identity, within=15,
                         what="the standby to take the Lease")
        await wait_until(lambda: run.sent_bindings(run.new), within=15, what="the new leader to try binding")
        # The storm ends while the old leader is still stopped: whatever it sends on waking would land.
        await run.end_storm()
        run.old.process.send_signal(signal.SIGCONT)
        old_exit = await run.old_leader_exit()
        await run.bound_by_the_new_leader()
        new_exit = await run.new.stop()
    late = run.writes_of_the_old_leader_after(run.takeover())
    assert late == [], f"writes of the old leader reached the API server after it lost the Lease: {late}"
    run.assert_bound_once_by_the_new_leader_without_over_commit()
    assert old_exit == 1  # it knew it had lost the lease: exit 1, like kube-scheduler
    assert new_exit == 0


async def test_a_leader_woken_past_its_renew_deadline_writes_nothing_even_before_anyone_takes_over(
        tmp_path: Path) -> None:
    # A 5 s lease and a 2 s renew deadline: woken just past its own deadline (its last renewTime + 2 s),
    # the leader may no longer write, but the standby cannot take the Lease before that renewTime + 5 s.
    # Held is judged by its own clock, not by who holds the Lease.
    async with contest(tmp_path, lease=5, renew_deadline=2) as run:
        await run.start_storm_with_the_leader_binding()
        run.old.process.send_signal(signal.SIGSTOP)
        await run.end_storm()  # the storm ends while it is stopped
        await run.past_the_leaders_renew_deadline()
        assert holder(run.cluster) == run.old.identity, "the standby took over early: the premise does not hold"
        woken = run.cluster.audit.since()[-1].seq
        run.old.process.send_signal(signal.SIGCONT)
        old_exit = await run.old_leader_exit()
        await run.bound_by_the_new_leader()
        new_exit = await run.new.stop()
    late = run.writes_of_the_old_leader_after(woken)
    assert late == [], f"writes of the old leader reached the API server after its renew deadline: {late}"
    run.assert_bound_once_by_the_new_leader_without_over_commit()
    assert old_exit == 1
    assert new_exit == 0
