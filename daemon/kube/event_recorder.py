"""The daemon's Kubernetes Events: correlated as client-go does, written in the background, bounded.

`record()` never waits: it runs the occurrence through the `EventCorrelator` (aggregation, counting,
spam filter: `daemon/kube/event_correlator.py`) and leaves the resulting write in a queue keyed by
the Event object's name, so an object written several times before the writer gets to it is
written once, as it must read last (its latest count, lastTimestamp and message; a create stays a
create). A binding, a report or a preemption never waits for an Event, as client-go's recorder
hands events to its broadcaster and returns.

Writing, in lanes: an Event object's writes go to the lane of the object it is about (`concurrency`,
8 lanes), and each lane is written in order by at most one task, so one Event object is never
written by two writers at once, and the Events of one object land in the order they were recorded (a
pod's `Scheduled` before its `Preempted`). `run()` (the leader's task) keeps one writer per lane,
which sleeps while its lane is empty and is woken by the `record()` that queues there: a task per
lane for the recorder's life, none started per Event (Scheduled Events trickle in one per binding,
so a writer that ended with its lane empty was started again for most of them).
`drain()` returns once everything recorded before it was called is written (whatever the lane);
`post()` drains, records its occurrence, and drains again, so an Event a caller waits for (a gang's
report) lands after every Event recorded before it. `flush()` is `drain()`, and writes by itself
when `run()` is not running (the recovery Event before the daemon leads, tests). A create is a POST
of a core/v1 Event; an update is a merge patch of its count, lastTimestamp and message, and a patch
answered 404 (the Event expired, Events live an hour by default) creates it again, as client-go
does. A create answered 409 already exists (a retried create that landed).

Bounded: at most `max_queued` (10,000) Event objects wait (client-go's broadcaster drops when its
1,000-deep queue is full; ours holds the Scheduled Event of every pod of a very large gang bound at
once); beyond that an occurrence is dropped and counted (`dropped`, and the `on_drop` callback: the
daemon's `toposched_events_dropped_total`). The first drop is logged (`event.dropped`), then at most
one line per `DROP_LOG_SECONDS` while drops go on, and one when recording resumes, each with how many
were dropped since the line before: a queue full for a burst of 30,000 pods writes a few lines, not
30,000 (which cost the daemon ~7 % of its CPU, measured, while it was already behind).
A write that fails is logged and dropped (client-go retries a dozen times, 10 s apart; our client
already retries 429 and 5xx with backoff), and a write refused for want of the lease is dropped too:
the new leader reports what is still true.

Must never: block the caller, write while not the leader (every write goes through the adapter's
`WriteGate`), or hold more than `max_queued` writes.
"""

from __future__ import annotations

import datetime
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

import anyio
import anyio.abc
import msgspec
import structlog

from daemon.kube.client import MERGE_PATCH, KubeApiError, Response
from daemon.kube.event_correlator import EventCorrelator, EventType, EventWrite, ObjectRef
from daemon.kube.leader import NotLeader

log = structlog.get_logger("toposched.events")

DEFAULT_CONCURRENCY: Final = 8
DEFAULT_MAX_QUEUED: Final = 10_000  # a gang of 8,000 binds at once: each pod's Scheduled Event fits
DROP_LOG_SECONDS: Final = 10.0  # between `event.dropped` lines while the queue stays full
MESSAGE_LIMIT: Final = 1024  # events.k8s.io/v1 caps a note at 1 kB: a message reads the same in both APIs


class EventSink(Protocol):
    """Where Event writes go (`daemon.kube.cluster_api.KubeClusterAPI`, through its `WriteGate`)."""

    async def send_event(self, method: str, path: str, body: Mapping[str, Any], content_type: str) -> Response: ...


_last_stamp: list[tuple[int, str]] = [(-1, "")]  # the last second formatted: most Events share it


def timestamp(seconds: float) -> str:
    """metav1.Time (RFC 3339, whole seconds, UTC)."""
    whole = int(seconds // 1)
    cached = _last_stamp[0]
    if cached[0] == whole:
        return cached[1]
    text = datetime.datetime.fromtimestamp(whole, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _last_stamp[0] = (whole, text)
    return text


class EventRecorder:
    """One component's Events (see the module docstring)."""

    def __init__(self, sink: EventSink, component: str, *, now: Callable[[], float], host: str = "",
                 concurrency: int = DEFAULT_CONCURRENCY, max_queued: int = DEFAULT_MAX_QUEUED,
                 on_drop: Callable[[], None] | None = None) -> None:
        self.sink = sink
        self.component = component
        self.correlator = EventCorrelator(component, host)
        self._now = now
        self.max_queued = max_queued
        self._queued: dict[str, EventWrite] = {}  # Event name -> its write as it must now read
        self._lanes: list[deque[tuple[int, str]]] = [deque() for _ in range(max(1, concurrency))]  # (seq, name)
        self._writing: list[int] = [0] * len(self._lanes)  # the seq a lane's writer is on (0: no writer)
        self._seq = 0  # the last seq given to a lane entry
        self._barriers: list[tuple[int, anyio.Event]] = []  # drain() waiters: (seq, set once written)
        self._failures: dict[str, str] = {}  # Event name -> why its last write failed (read by `post`)
        self._lane_wakes = [anyio.Event() for _ in self._lanes]  # set when something is queued on the lane
        self._source = {"component": component, **({"host": host} if host else {})}
        self.written = 0  # Event writes the API accepted
        self.failed = 0
        self.dropped = 0  # occurrences dropped because the queue was full
        self._on_drop = on_drop
        self._unlogged_drops = 0  # dropped since the last `event.dropped` line
        self._next_drop_line = float("-inf")  # when (by `now()`) a drop may be logged again
        self._last_dropped: tuple[ObjectRef, str] = (ObjectRef(api_version="", kind="", namespace="", name=""), "")

    # ------------------------------------------------------------------ recording

    def now(self) -> float:
        """The recorder's clock (seconds since the epoch): the time an occurrence is stamped with."""
        return self._now()

    def record(self, involved: ObjectRef, event_type: EventType, reason: str, message: str, *,
               at: float | None = None) -> str:
        """Note one occurrence (that happened `at`, by `now()`; default: now); it is written later (or merged
        into a write already waiting). The name of the Event it goes to ("" when the spam filter or a full
        queue dropped it)."""
        write = self.correlator.correlate(involved, event_type, reason, message[:MESSAGE_LIMIT],
                                          self._now() if at is None else at)
        if write is None:
            return ""
        waiting = self._queued.get(write.name)
        if waiting is not None:  # not sent yet: it goes out once, as it reads last, where it was queued
            self._queued[write.name] = _merged(waiting, write)
            return write.name
        if len(self._queued) >= self.max_queued:
            self.dropped += 1
            self._unlogged_drops += 1
            self._last_dropped = involved, reason
            if self._on_drop is not None:
                self._on_drop()
            now = self._now()
            if now >= self._next_drop_line:
                self._log_drops("the queue is full")
                self._next_drop_line = now + DROP_LOG_SECONDS
            return ""
        if self._unlogged_drops:
            self._log_drops("the queue has room again")
        self._queued[write.name] = write
        self._seq += 1
        lane = hash((involved.namespace, involved.name)) % len(self._lanes)
        self._lanes[lane].append((self._seq, write.name))
        self._lane_wakes[lane].set()
        return write.name

    def _log_drops(self, now: str) -> None:
        """One `event.dropped` line: how many were dropped since the line before, the last of them."""
        involved, reason = self._last_dropped
        log.warning("event.dropped", dropped=self._unlogged_drops, dropped_total=self.dropped, now=now,
                    queued=len(self._queued), max_queued=self.max_queued,
                    last_object=f"{involved.kind} {involved.namespace}/{involved.name}", last_reason=reason)
        self._unlogged_drops = 0

    async def post(self, involved: ObjectRef, event_type: EventType, reason: str, message: str) -> str:
        """Write one occurrence now, after everything recorded before it; "" when it was written or
        deliberately dropped, else why its write failed."""
        await self.drain()
        name = self.record(involved, event_type, reason, message)
        await self.drain()
        return self._failures.pop(name, "") if name else ""

    @property
    def queued(self) -> int:
        return len(self._queued)

    # ------------------------------------------------------------------ writing

    async def run(self) -> None:
        """Until cancelled: write whatever is queued, as soon as it is, by one writer per lane."""
        async with anyio.create_task_group() as group:
            for lane in range(len(self._lanes)):
                group.start_soon(self._lane_writer, lane)

    async def _lane_writer(self, lane: int) -> None:
        """`run()`'s writer of one lane: writes it whenever it has entries and no drain is writing it."""
        entries = self._lanes[lane]
        while True:
            if not entries or self._writing[lane]:  # nothing to write, or a drain's writer is on it
                wake = self._lane_wakes[lane] = anyio.Event()
                await wake.wait()
                continue
            self._writing[lane] = entries[0][0]
            await self._write_lane(lane, until=None)

    async def flush(self) -> None:
        """Write every Event queued now; return when done (`drain`)."""
        await self.drain()

    async def drain(self) -> None:
        """Return once every Event recorded so far is written (or failed), writing them here when no
        writer is on their lane."""
        target = self._seq
        if self._written_up_to(target):
            return
        async with anyio.create_task_group() as group:
            while True:
                self._start_writers(group, until=target)
                if self._written_up_to(target):
                    break
                # Woken when it is all written, or when a lane's writer stops (cancelled, or it was a
                # drain's): the lanes it left are then written here.
                woken = anyio.Event()
                self._barriers.append((target, woken))
                await woken.wait()

    def _start_writers(self, group: anyio.abc.TaskGroup, until: int | None) -> None:
        for lane, entries in enumerate(self._lanes):
            if entries and not self._writing[lane] and (until is None or entries[0][0] <= until):
                self._writing[lane] = entries[0][0]
                group.start_soon(self._write_lane, lane, until)

    def _written_up_to(self, target: int) -> bool:
        for lane, entries in enumerate(self._lanes):
            writing = self._writing[lane]
            if (writing and writing <= target) or (entries and entries[0][0] <= target):
                return False
        return True

    async def _write_lane(self, lane: int, until: int | None) -> None:
        """Write the lane's entries in order: all of them (`run`), or those up to seq `until` (`drain`)."""
        entries = self._lanes[lane]
        try:
            while entries and (until is None or entries[0][0] <= until):
                seq, name = entries.popleft()
                self._writing[lane] = seq
                write = self._queued.pop(name, None)
                if write is not None:
                    await self._write(write)
                if self._barriers:
                    self._release_barriers(everyone=False)
        finally:
            self._writing[lane] = 0
            if entries:
                self._lane_wakes[lane].set()  # the rest is run()'s lane writer's (or the next drain's)
            if self._barriers:
                self._release_barriers(everyone=True)

    def _release_barriers(self, *, everyone: bool) -> None:
        """Wake the drains whose Events are all written (`everyone`: all of them, to look again)."""
        waiting = []
        for target, woken in self._barriers:
            if everyone or self._written_up_to(target):
                woken.set()
            else:
                waiting.append((target, woken))
        self._barriers = waiting

    async def _write(self, write: EventWrite) -> None:
        try:
            response: Response | None = None
            if not write.create:
                path = f"/api/v1/namespaces/{write.namespace}/events/{write.name}"
                body = {"count": write.count, "lastTimestamp": timestamp(write.last_timestamp),
                        "message": write.message}
                response = await self.sink.send_event("PATCH", path, body, MERGE_PATCH)
            if response is None or response.status == 404:
                response = await self.sink.send_event("POST", f"/api/v1/namespaces/{write.namespace}/events",
                                                      self._body(write), "application/json")
        except (KubeApiError, NotLeader) as error:
            self._failed(write, str(error))
            return
        if response.ok or (write.create and response.status == 409):
            self.written += 1
            self._failures.pop(write.name, None)
            return
        self._failed(write, f"HTTP {response.status}: {response.reason()}")

    def _failed(self, write: EventWrite, why: str) -> None:
        self.failed += 1
        if len(self._failures) >= self.max_queued:
            self._failures.clear()  # only `post` reads these, right after its own write
        self._failures[write.name] = why
        log.warning("event.write_failed", event_name=write.name, reason=write.reason, error=why)

    def _body(self, write: EventWrite) -> dict[str, Any]:
        involved = write.involved
        reference: dict[str, str] = {"apiVersion": involved.api_version, "kind": involved.kind, "name": involved.name}
        if involved.namespace:
            reference["namespace"] = involved.namespace
        if involved.uid:
            reference["uid"] = involved.uid
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": write.name, "namespace": write.namespace},
            "involvedObject": reference,
            "reason": write.reason,
            "message": write.message,
            "type": write.type,
            "source": self._source,
            "reportingComponent": self.component,
            "firstTimestamp": timestamp(write.first_timestamp),
            "lastTimestamp": timestamp(write.last_timestamp),
            "count": write.count,
        }


def _merged(waiting: EventWrite, later: EventWrite) -> EventWrite:
    """Two writes of one Event not yet sent: the later one's content, a create if either was one."""
    if waiting.create and not later.create:
        return msgspec.structs.replace(later, create=True, first_timestamp=waiting.first_timestamp)
    return later
