"""Leader election rules against an in-memory Lease with optimistic concurrency."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest

from daemon.config import LeaderElectionConfig
from daemon.kube.leader import (
    LeaderElector,
    LeadershipLost,
    LeaseConflict,
    LeaseRecord,
    LeaseStoreError,
    NotLeader,
    WriteGate,
)

# leaseDurationSeconds is a whole number in the API: 1 s is the shortest lease there is.
FAST = LeaderElectionConfig(lease_duration_seconds=1.0, renew_deadline_seconds=0.6, retry_period_seconds=0.05)


class MemoryLease:
    """A Lease store that behaves like the API: resourceVersion checked on every update."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.writes: list[LeaseRecord] = []
        self.failing = False

    async def get(self) -> LeaseRecord | None:
        if self.failing:
            raise LeaseStoreError("api down")
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        if self.failing:
            raise LeaseStoreError("api down")
        if self.record is not None:
            raise LeaseConflict("exists")
        return self._store(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        if self.failing:
            raise LeaseStoreError("api down")
        if self.record is None or record.resource_version != self.record.resource_version:
            raise LeaseConflict("stale resourceVersion")
        return self._store(record)

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self.version += 1
        stored = msgspec.structs.replace(record, resource_version=str(self.version))
        self.record = stored
        self.writes.append(stored)
        return stored


async def wait_for(condition: Callable[[], bool], deadline: float = 5.0) -> None:
    with anyio.fail_after(deadline):
        while not condition():  # noqa: ASYNC110 (polling a plain condition with a deadline)
            await anyio.sleep(0.01)


async def lead_expecting_loss(
    leader: LeaderElector, work: Callable[[], Awaitable[None]], meddle: Callable[[], Coroutine[Any, Any, None]]
) -> list[str]:
    outcome: list[str] = []

    async def run_leader() -> None:
        try:
            await leader.lead(work)
        except LeadershipLost:
            outcome.append("lost")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(meddle)
            group.start_soon(run_leader)
    return outcome


async def test_first_candidate_creates_the_lease_and_opens_the_write_gate() -> None:
    store = MemoryLease()
    elector = LeaderElector(store, FAST, "a")
    assert await elector.try_acquire_or_renew()
    assert store.record is not None and store.record.holder == "a"
    assert store.record.renew_time and store.record.acquire_time
    elector.gate.check()


async def test_standby_cannot_take_a_lease_that_is_being_renewed() -> None:
    store = MemoryLease()
    leader = LeaderElector(store, FAST, "a")
    standby = LeaderElector(store, FAST, "b")
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    with pytest.raises(NotLeader):
        standby.gate.check()


async def test_standby_takes_over_after_the_lease_duration_on_its_own_clock() -> None:
    now = [100.0]
    store = MemoryLease()
    leader = LeaderElector(store, FAST, "a", clock=lambda: now[0])
    standby = LeaderElector(store, FAST, "b", clock=lambda: now[0])
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    now[0] += 0.9  # unchanged record observed for less than the lease duration
    assert not await standby.try_acquire_or_renew()
    now[0] += 0.2
    assert await standby.try_acquire_or_renew()
    assert store.record is not None and store.record.holder == "b" and store.record.transitions == 1


async def test_two_candidates_racing_for_an_expired_lease_cannot_both_win() -> None:
    store = MemoryLease()
    first = LeaderElector(store, FAST, "a")
    second = LeaderElector(store, FAST, "b")
    results = []

    async def attempt(elector: LeaderElector) -> None:
        results.append(await elector.try_acquire_or_renew())

    async with anyio.create_task_group() as group:
        group.start_soon(attempt, first)
        group.start_soon(attempt, second)
    assert sorted(results) == [False, True]


async def test_clean_exit_releases_the_lease_for_an_immediate_takeover() -> None:
    store = MemoryLease()
    leader = LeaderElector(store, FAST, "a")
    ran = anyio.Event()

    async def work() -> None:
        ran.set()

    await leader.lead(work)
    assert ran.is_set()
    assert store.record is not None and store.record.holder == ""
    standby = LeaderElector(store, FAST, "b")
    started = time.monotonic()
    assert await standby.try_acquire_or_renew()
    assert time.monotonic() - started < FAST.lease_duration_seconds


async def test_leader_whose_lease_is_taken_stops_its_work_at_once() -> None:
    store = MemoryLease()
    leader = LeaderElector(store, FAST, "a")
    cancelled = anyio.Event()

    async def work() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    async def usurp() -> None:
        await wait_for(lambda: store.record is not None and store.record.holder == "a")
        record = store.record
        assert record is not None
        await store.update(msgspec.structs.replace(record, holder="intruder"))

    outcome = await lead_expecting_loss(leader, work, usurp)
    assert outcome == ["lost"]
    assert cancelled.is_set()
    assert not leader.gate.open
    assert store.record is not None and store.record.holder == "intruder"


async def test_leader_that_cannot_renew_before_the_deadline_gives_up() -> None:
    store = MemoryLease()
    leader = LeaderElector(store, FAST, "a")
    started_work = anyio.Event()

    async def work() -> None:
        started_work.set()
        await anyio.sleep_forever()

    async def break_api() -> None:
        await started_work.wait()
        store.failing = True

    began = time.monotonic()
    outcome = await lead_expecting_loss(leader, work, break_api)
    assert outcome == ["lost"]
    # Gave up within the renew deadline (plus a retry period), before anyone else could take the lease.
    assert time.monotonic() - began < FAST.lease_duration_seconds + FAST.retry_period_seconds
    assert not leader.gate.open


async def test_standby_waits_then_leads_when_the_leader_dies_without_releasing() -> None:
    store = MemoryLease()
    dead = LeaderElector(store, FAST, "dead")
    assert await dead.try_acquire_or_renew()
    standby = LeaderElector(store, FAST, "b")
    began = time.monotonic()
    led = anyio.Event()

    async def work() -> None:
        led.set()

    with anyio.fail_after(5):
        await standby.lead(work)
    assert led.is_set()
    took = time.monotonic() - began
    assert FAST.lease_duration_seconds * 0.9 <= took < FAST.lease_duration_seconds + 1.0


def test_write_gate_closes_at_the_renew_deadline() -> None:
    now = [0.0]
    gate = WriteGate(renew_deadline=1.0, clock=lambda: now[0])
    assert not gate.open
    gate.renewed(0.0)
    now[0] = 0.99
    assert gate.open
    now[0] = 1.0
    assert not gate.open
    with pytest.raises(NotLeader):
        gate.check()


def test_write_gate_is_judged_by_the_clock_at_the_moment_of_asking() -> None:
    # A process stopped (SIGSTOP) across its deadline: nothing ran in between, the clock moved on.
    now = [0.0]
    gate = WriteGate(renew_deadline=1.0, clock=lambda: now[0])
    gate.renewed(0.0)
    gate.check()
    now[0] = 30.0
    assert not gate.open
    assert gate.remaining() == -29.0
    with pytest.raises(NotLeader):
        gate.check()


def test_a_revoked_gate_stays_closed_until_the_next_renewal() -> None:
    now = [0.0]
    gate = WriteGate(renew_deadline=1.0, clock=lambda: now[0])
    gate.renewed(0.0)
    gate.revoke()
    assert not gate.open
    gate.renewed(0.5)
    assert gate.open


async def test_writing_is_refused_before_anything_runs_when_the_gate_is_closed() -> None:
    gate = WriteGate(renew_deadline=1.0)
    ran = False
    with pytest.raises(NotLeader), gate.writing():
        ran = True
    assert not ran


async def test_a_write_in_flight_is_cancelled_at_the_lease_deadline_without_anyone_else_running() -> None:
    gate = WriteGate(renew_deadline=0.2)
    gate.renewed(time.monotonic())
    with anyio.fail_after(5), pytest.raises(NotLeader, match="in flight"), gate.writing():
        await anyio.sleep_forever()
    assert not gate.open


async def test_revoking_the_gate_cancels_every_write_in_flight_at_once() -> None:
    gate = WriteGate(renew_deadline=3600.0)
    gate.renewed(time.monotonic())
    refused: list[str] = []
    in_flight: list[str] = []

    async def write(name: str) -> None:
        try:
            with gate.writing():
                in_flight.append(name)
                await anyio.sleep_forever()
        except NotLeader:
            refused.append(name)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(write, "bind")
            group.start_soon(write, "evict")
            await wait_for(lambda: len(in_flight) == 2)
            gate.revoke()
    assert sorted(refused) == ["bind", "evict"]


async def test_a_renewal_moves_the_deadline_of_writes_in_flight() -> None:
    now = [0.0]
    gate = WriteGate(renew_deadline=0.3, clock=lambda: now[0])
    gate.renewed(0.0)
    entered = anyio.Event()
    release = anyio.Event()
    finished: list[bool] = []

    async def write() -> None:
        with gate.writing():
            entered.set()
            await release.wait()
        finished.append(True)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(write)
            await entered.wait()
            gate.renewed(100.0)
            # Let the first deadline (0.3 s) pass: the write must not be cancelled by it.
            await anyio.sleep(0.6)
            release.set()
    assert finished == [True]


def test_a_gate_used_on_a_new_event_loop_still_cancels_its_writes_at_the_deadline() -> None:
    """The deadline is one timer of the gate's, armed on the loop of the write that needs it: one armed on
    a loop that has since closed never fires, so the next loop's writes arm their own."""
    gate = WriteGate(renew_deadline=0.2)

    async def quick_write() -> None:
        gate.renewed(time.monotonic())
        with gate.writing():
            await anyio.lowlevel.checkpoint()

    async def stuck_write() -> None:
        gate.renewed(time.monotonic())
        with anyio.fail_after(5), pytest.raises(NotLeader, match="in flight"), gate.writing():
            await anyio.sleep_forever()

    asyncio.run(quick_write())
    asyncio.run(stuck_write())


async def test_a_renewal_that_lands_after_the_deadline_does_not_reopen_the_gate() -> None:
    now = [0.0]
    store = MemoryLease()
    leader = LeaderElector(store, FAST, "a", clock=lambda: now[0])
    assert await leader.try_acquire_or_renew()
    read = store.get

    async def frozen_read() -> LeaseRecord | None:
        record = await read()
        now[0] += 5.0  # the process was stopped while the renewal's GET was in flight
        return record

    now[0] = 0.5
    store.get = frozen_read  # type: ignore[method-assign]
    assert await leader.try_acquire_or_renew()  # nobody took it meanwhile: the record is still ours
    assert not leader.gate.open  # but the deadline counted from the renewal's start has passed


async def test_the_written_lease_duration_is_never_shorter_than_the_configured_one() -> None:
    store = MemoryLease()
    config = LeaderElectionConfig(lease_duration_seconds=2.5, renew_deadline_seconds=2.0, retry_period_seconds=0.5)
    assert await LeaderElector(store, config, "a").try_acquire_or_renew()
    assert store.record is not None and store.record.duration_seconds == 3


async def test_a_leader_that_cannot_renew_cancels_its_writes_at_the_deadline() -> None:
    store = MemoryLease()
    leader = LeaderElector(store, FAST, "a")
    writing = anyio.Event()
    ended: list[str] = []

    async def work() -> None:
        store.failing = True
        try:
            with leader.gate.writing():
                writing.set()
                await anyio.sleep_forever()
        except NotLeader:
            ended.append("refused by the gate")  # its own deadline fired first
        except anyio.get_cancelled_exc_class():
            ended.append("cancelled with the work")  # the elector's cancellation arrived at the same moment
            raise
        await anyio.sleep_forever()  # the elector cancels the work itself

    async def nothing() -> None:
        await writing.wait()

    outcome = await lead_expecting_loss(leader, work, nothing)
    assert outcome == ["lost"]
    assert len(ended) == 1
