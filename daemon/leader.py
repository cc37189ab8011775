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
  once and raises `LeadershipLost`. `WriteGate.check()` refuses writes past the renew deadline even
  before the cancellation has been delivered.
- On a clean exit the lease is released (holderIdentity cleared, leaseDurationSeconds 1), so a
  standby takes over at its next retry instead of waiting out the lease.

Must never: write anything but the Lease, or let work continue after the lease is lost.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Awaitable, Callable
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
    """Where the Lease lives: the API server (`daemon.kubeapi.KubeLeaseStore`) or memory (tests)."""

    async def get(self) -> LeaseRecord | None: ...

    async def create(self, record: LeaseRecord) -> LeaseRecord: ...

    async def update(self, record: LeaseRecord) -> LeaseRecord: ...


def micro_time(now: datetime.datetime | None = None) -> str:
    """metav1.MicroTime as the API writes it: RFC 3339 with microseconds, UTC."""
    moment = now or datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class WriteGate:
    """Answers "may I write now?" from the time of the last successful renewal (monotonic clock)."""

    def __init__(self, renew_deadline: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._renew_deadline = renew_deadline
        self._clock = clock
        self._valid_until = float("-inf")

    def renewed(self, at: float) -> None:
        self._valid_until = at + self._renew_deadline

    def revoke(self) -> None:
        self._valid_until = float("-inf")

    @property
    def open(self) -> bool:
        return self._clock() < self._valid_until

    def check(self) -> None:
        if not self.open:
            raise NotLeader("not the leader (no valid lease): refusing to write")


class AlwaysOpen(WriteGate):
    """The gate when leader election is off: a single scheduler always writes."""

    def __init__(self) -> None:
        super().__init__(0.0)

    @property
    def open(self) -> bool:
        return True


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
        duration = max(1, round(self.config.lease_duration_seconds))
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

    async def _renew_until_lost(self) -> None:
        """Renew every retry period; return as soon as the lease is lost."""
        last_renewal = self.clock()
        while True:
            await anyio.sleep(self.config.retry_period_seconds)
            while True:
                attempt_started = self.clock()
                remaining = last_renewal + self.config.renew_deadline_seconds - attempt_started
                if remaining <= 0:
                    self.gate.revoke()
                    return
                renewed = False
                with anyio.move_on_after(remaining):
                    renewed = await self.try_acquire_or_renew()
                if renewed:
                    last_renewal = attempt_started
                    break
                if self.observed_holder not in ("", self.identity):
                    self.gate.revoke()
                    return
                await anyio.sleep(min(self.config.retry_period_seconds / 4, 0.5))

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
                    await self._renew_until_lost()
                    lost = True
                    log.error("leader.lost", identity=self.identity, holder=self.observed_holder)
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
