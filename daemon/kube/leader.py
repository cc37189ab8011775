"""Leader election on a coordination.k8s.io/v1 Lease: only the holder of the lease writes.

The rules (those of client-go's leaderelection, which operators already know):
- A candidate may take the lease when it has no holder, when it already holds it, or when the record
  it last observed has not changed for `lease_duration_seconds` of *its own monotonic clock* (the
  renewTime written by another machine is never compared with our wall clock).
- Every write is an update carrying the resourceVersion that was read (optimistic concurrency): two
  candidates racing for an expired lease cannot both win; the loser sees a 409 and stays a standby.
- The leader renews every `retry_period_seconds`. If it has not renewed successfully for
  `renew_deadline_seconds` (shorter than the lease duration, so it gives up before anyone else may
  take over), or it finds someone else holding the lease, it has lost: `lead()` cancels the work at
  once and raises `LeadershipLost`. A leader past its deadline never resumes, even if a late renewal
  lands: the process exits and a fresh one campaigns.
- On a clean exit the lease is released (holderIdentity cleared, leaseDurationSeconds 1), so a
  standby takes over at its next retry instead of waiting out the lease.

The `WriteGate` is what every other write asks (client-go has no such thing; kube-scheduler relies
on exiting). "Held" means: now, on the monotonic clock, is before the start of the last successful
renewal plus the renew deadline. A standby can take over no sooner than the lease duration after it
saw that renewal, which it cannot see before the renewal started, so the gate closes at least
`lease_duration - renew_deadline` before anyone else may write (that margin is what a write sent
just before the deadline has to reach the API server in). Because the clock is read at the moment
of asking, a process frozen (SIGSTOP, a long GC pause, a stalled VM vCPU) past its deadline knows on
waking, before it sends anything: CLOCK_MONOTONIC keeps running while a process is stopped. The
gate is asked before every attempt of every write, retries included (`daemon.kube.client`), and
writes run inside `writing()`, a cancel scope the gate owns, cancelled at the lease deadline
itself: a write waiting for its answer, or backing off before a retry, is cancelled the moment the
lease runs out, or the moment it is found taken, not when the renew task next wakes. The deadline is
one timer of the gate's, not one per write (a cancel scope with a deadline of its own cost ~7 us, one
without ~3 us, and a scheduler writes twice per pod): armed while writes are in flight, at the
deadline as it stands then; when it fires and a renewal has moved the deadline meanwhile, it is armed
again at the new one, else it cancels every write in flight.

Must never: write anything but the Lease, or let work continue after the lease is lost.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Protocol

import anyio
import msgspec
import structlog

from daemon.config import LeaderElectionConfig

log = structlog.get_logger("toposched.leader")

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class LeadershipLost(Exception):
    """The lease was lost while leading; the work was cancelled and nothing more may be written."""


class NotLeader(Exception):
    """A write was attempted without a valid lease."""


class LeaseStoreError(Exception):
    """The Lease could not be read or written (API unreachable, error status)."""


class LeaseConflict(LeaseStoreError):
    """The lease changed since it was read (HTTP 409) or already exists (on create)."""


class LeaseRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of a Lease that election reads and writes."""

    holder: str = ""
    duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0
    resource_version: str = ""


class LeaseStore(Protocol):
    """Where the Lease lives: the API server (`daemon.kube.lease_store.KubeLeaseStore`) or memory (tests)."""

    async def get(self) -> LeaseRecord | None: ...

    async def create(self, record: LeaseRecord) -> LeaseRecord: ...

    async def update(self, record: LeaseRecord) -> LeaseRecord: ...


def micro_time(now: datetime.datetime | None = None) -> str:
    """metav1.MicroTime as the API writes it: RFC 3339 with microseconds, UTC."""
    moment = now or datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class WriteGate:
    """Answers "may I write now?" from the time of the last successful renewal (monotonic clock), and
    cancels the writes it let through the moment the answer turns to no."""

    def __init__(self, renew_deadline: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._renew_deadline = renew_deadline
        self._clock = clock
        self._valid_until = float("-inf")
        self._writes: set[anyio.CancelScope] = set()
        self._expiry: asyncio.TimerHandle | None = None  # cancels the writes in flight at the deadline
        self._expiry_loop: asyncio.AbstractEventLoop | None = None

    def renewed(self, at: float) -> None:
        """A renewal that started at `at` (gate clock) succeeded: writes may go on until its deadline
        (the expiry timer, when it fires before that, arms itself again)."""
        self._valid_until = max(self._valid_until, at + self._renew_deadline)

    def revoke(self) -> None:
        """The lease is lost (or given up): refuse from now on and cancel every write in flight."""
        self._valid_until = float("-inf")
        for scope in self._writes:
            scope.cancel()

    def remaining(self) -> float:
        """Seconds (gate clock) until the gate closes; <= 0 when it is closed."""
        return self._valid_until - self._clock()

    @property
    def open(self) -> bool:
        return self.remaining() > 0

    def check(self) -> None:
        if not self.open:
            raise NotLeader("not the leader (no valid lease): refusing to write")

    def writing(self) -> AbstractContextManager[None]:
        """Run one write (all its attempts) only while the lease is held: refused at once when it is not,
        cancelled at the lease deadline or on `revoke()`, whichever comes first; either way NotLeader."""
        self.check()
        return _GatedWrite(self)

    def _enter(self, scope: anyio.CancelScope) -> None:
        loop = asyncio.get_running_loop()
        if self._expiry is None or self._expiry_loop is not loop:
            self._arm(loop)
        self._writes.add(scope)

    def _leave(self, scope: anyio.CancelScope) -> None:
        self._writes.discard(scope)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        # The gate's clock may be a test's fake one; the timer runs on the event loop's clock.
        self._expiry_loop = loop
        self._expiry = loop.call_at(loop.time() + max(0.0, self.remaining()), self._expire)

    def _expire(self) -> None:
        self._expiry = None
        if not self._writes:
            return
        if self.remaining() > 0:  # renewed since the timer was armed
            assert self._expiry_loop is not None
            self._arm(self._expiry_loop)
            return
        for scope in self._writes:
            scope.cancel()


class _GatedWrite:
    """`WriteGate.writing()`: a cancel scope the gate cancels when the lease runs out or is lost."""

    __slots__ = ("gate", "scope")

    def __init__(self, gate: WriteGate) -> None:
        self.gate = gate
        self.scope = anyio.CancelScope()

    def __enter__(self) -> None:
        self.gate._enter(self.scope)  # (raises outside a running event loop, before the scope is entered)
        try:
            self.scope.__enter__()
        except BaseException:
            self.gate._leave(self.scope)
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        scope = self.scope
        self.gate._leave(scope)
        suppressed = scope.__exit__(kind, error, traceback)
        if scope.cancelled_caught:
            raise NotLeader("the lease ran out while the write was in flight: cancelled (it may or may not have "
                            "reached the API server)")
        return bool(suppressed)


_OPEN: AbstractContextManager[None] = nullcontext()


class AlwaysOpen(WriteGate):
    """The gate when leader election is off: a single scheduler always writes. It never closes, so a
    write needs no cancel scope and `revoke()` has nothing to cancel."""

    def __init__(self) -> None:
        super().__init__(0.0)

    def remaining(self) -> float:
        return math.inf

    def revoke(self) -> None:
        """Nothing: without leader election there is no lease to lose."""

    def writing(self) -> AbstractContextManager[None]:
        return _OPEN


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        config: LeaderElectionConfig,
        identity: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.config = config
        self.identity = identity
        self.clock = clock
        self.gate = WriteGate(config.renew_deadline_seconds, clock)
        self.is_leader = False
        self.transitions_seen = 0
        self._observed: LeaseRecord | None = None
        self._observed_at = float("-inf")
        # False simulates a crash (tests): cancelled work leaves the lease to expire instead of releasing it.
        self.release_on_exit = True

    # ------------------------------------------------------------------ one step

    def _observe(self, record: LeaseRecord | None, now: float) -> None:
        previous = self._observed
        if previous is None or record is None or (
            (previous.holder, previous.renew_time, previous.resource_version)
            != (record.holder, record.renew_time, record.resource_version)
        ):
            self._observed_at = now
        self._observed = record

    def _held_by_other(self, now: float) -> bool:
        record = self._observed
        if record is None or not record.holder or record.holder == self.identity:
            return False
        duration = record.duration_seconds or self.config.lease_duration_seconds
        return now < self._observed_at + duration

    @property
    def observed_holder(self) -> str:
        return self._observed.holder if self._observed is not None else ""

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when we hold the lease afterwards (and the gate is open until the deadline)."""
        started = self.clock()
        try:
            current = await self.store.get()
        except LeaseStoreError as error:
            log.warning("leader.read_failed", error=str(error))
            return False
        self._observe(current, started)
        if self._held_by_other(started):
            return False
        now_text = micro_time()
        # Rounded up: a standby must never wait less than the lease duration our renew deadline assumes.
        duration = max(1, math.ceil(self.config.lease_duration_seconds))
        try:
            if current is None:
                written = await self.store.create(
                    LeaseRecord(holder=self.identity, duration_seconds=duration, acquire_time=now_text,
                                renew_time=now_text, transitions=0)
                )
            else:
                ours = current.holder == self.identity
                written = await self.store.update(
                    LeaseRecord(
                        holder=self.identity,
                        duration_seconds=duration,
                        acquire_time=current.acquire_time if ours and current.acquire_time else now_text,
                        renew_time=now_text,
                        transitions=current.transitions if ours else current.transitions + 1,
                        resource_version=current.resource_version,
                    )
                )
        except LeaseConflict:
            return False
        except LeaseStoreError as error:
            log.warning("leader.write_failed", error=str(error))
            return False
        self._observe(written, started)
        self.gate.renewed(started)
        self.transitions_seen = written.transitions
        return True

    # ------------------------------------------------------------------ the life cycle

    async def acquire(self) -> None:
        """Wait (as a standby) until we hold the lease."""
        while True:
            if await self.try_acquire_or_renew():
                if not self.is_leader:
                    log.info("leader.acquired", identity=self.identity, transitions=self.transitions_seen)
                self.is_leader = True
                return
            log.debug("leader.standby", identity=self.identity, holder=self.observed_holder)
            await anyio.sleep(self.config.retry_period_seconds)

    async def _renew_until_lost(self) -> str:
        """Renew every retry period; return (why) as soon as the lease is lost, at the deadline at the latest."""
        gate = self.gate
        while True:
            # Never sleep past the deadline: the work is cancelled the moment the lease runs out.
            await anyio.sleep(max(0.0, min(self.config.retry_period_seconds, gate.remaining())))
            while True:
                remaining = gate.remaining()
                if remaining <= 0:
                    gate.revoke()
                    return (f"not renewed within the renew deadline ({self.config.renew_deadline_seconds:g} s; "
                            f"{-remaining:.1f} s past it): the API was unreachable or this process was paused")
                renewed = False
                with anyio.move_on_after(remaining):
                    renewed = await self.try_acquire_or_renew()
                # A renewal that started before the deadline but finished after it (the process was frozen
                # in between) leaves the gate closed: past the deadline, a leader never resumes writing.
                if renewed and gate.open:
                    break
                if self.observed_holder not in ("", self.identity):
                    gate.revoke()
                    return f"taken by {self.observed_holder}"
                await anyio.sleep(max(0.0, min(self.config.retry_period_seconds / 4, 0.5, gate.remaining())))

    async def lead(self, work: Callable[[], Awaitable[None]]) -> None:
        """Become the leader, run `work` while leading; cancel it and raise LeadershipLost if the lease goes.

        When `work` returns (clean shutdown) or is cancelled from outside, the lease is released.
        """
        await self.acquire()
        lost = False
        try:
            async with anyio.create_task_group() as group:

                async def watch_lease() -> None:
                    nonlocal lost
                    why = await self._renew_until_lost()
                    lost = True
                    log.error("leader.lost", identity=self.identity, reason=why)
                    group.cancel_scope.cancel()

                group.start_soon(watch_lease)
                await work()
                group.cancel_scope.cancel()
        finally:
            self.is_leader = False
            if lost or not self.release_on_exit:
                self.gate.revoke()
            else:
                with anyio.CancelScope(shield=True):
                    await self.release()
        if lost:
            raise LeadershipLost(f"lease {self.config.lease_namespace}/{self.config.lease_name} lost")

    async def release(self) -> None:
        """Give the lease up so a standby takes over at once (best effort, bounded)."""
        self.gate.revoke()
        with anyio.move_on_after(self.config.retry_period_seconds + 1):
            try:
                current = await self.store.get()
                if current is None or current.holder != self.identity:
                    return
                now_text = micro_time()
                await self.store.update(
                    LeaseRecord(holder="", duration_seconds=1, acquire_time=now_text, renew_time=now_text,
                                transitions=current.transitions, resource_version=current.resource_version)
                )
                log.info("leader.released", identity=self.identity)
            except LeaseStoreError as error:  # a failed release only delays the standby
                log.warning("leader.release_failed", error=str(error))
