"""The daemon's Kubernetes Events: correlated as client-go does, written in the background, bounded.

`record()` never waits: it runs the occurrence through the `EventCorrelator` (aggregation, counting,
spam filter: `daemon/kube/event_correlator.py`) and leaves the resulting write in a queue keyed by
the Event object's name, so an object written several times before the writer gets to it is
written once, as it must read last (its latest count, lastTimestamp and message; a create stays a
create). A binding, a report or a preemption never waits for an Event, as client-go's recorder
hands events to its broadcaster and returns.

`run()` (the leader's task) writes what is queued, `concurrency` (8) Events at a time, as soon as
something is queued; `flush()` writes what is queued now and returns (the recovery Event before the
daemon leads, tests, and callers that want their Event written before they go on). A create is a
POST of a core/v1 Event; an update is a merge patch of its count, lastTimestamp and message, and a
patch answered 404 (the Event expired, Events live an hour by default) creates it again, as
client-go does. A create answered 409 already exists (a retried create that landed). One Event
object is never written by two writers at once.

Bounded: at most `max_queued` (10,000) Event objects wait (client-go's broadcaster drops when its
1,000-deep queue is full; ours holds the Scheduled Event of every pod of a very large gang bound at
once); beyond that an occurrence is dropped with a log line and counted in `dropped`.
A write that fails is logged and dropped (client-go retries a dozen times, 10 s apart; our client
already retries 429 and 5xx with backoff), and a write refused for want of the lease is dropped too:
the new leader reports what is still true.

Must never: block the caller, write while not the leader (every write goes through the adapter's
`WriteGate`), or hold more than `max_queued` writes.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

import anyio
import msgspec
import structlog

from daemon.kube.client import MERGE_PATCH, KubeApiError, Response
from daemon.kube.event_correlator import EventCorrelator, EventType, EventWrite, ObjectRef
from daemon.kube.leader import NotLeader

log = structlog.get_logger("toposched.events")

DEFAULT_CONCURRENCY: Final = 8
DEFAULT_MAX_QUEUED: Final = 10_000  # a gang of 8,000 binds at once: each pod's Scheduled Event fits
MESSAGE_LIMIT: Final = 1024  # events.k8s.io/v1 caps a note at 1 kB: a message reads the same in both APIs


class EventSink(Protocol):
    """Where Event writes go (`daemon.kube.cluster_api.KubeClusterAPI`, through its `WriteGate`)."""

    async def send_event(self, method: str, path: str, body: Mapping[str, Any], content_type: str) -> Response: ...


def timestamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """One component's Events (see the module docstring)."""

    def __init__(self, sink: EventSink, component: str, *, now: Callable[[], float], host: str = "",
                 concurrency: int = DEFAULT_CONCURRENCY, max_queued: int = DEFAULT_MAX_QUEUED) -> None:
        self.sink = sink
        self.component = component
        self.correlator = EventCorrelator(component, host)
        self._now = now
        self._limiter = anyio.CapacityLimiter(concurrency)
        self.max_queued = max_queued
        self._queued: dict[str, EventWrite] = {}
        self._writing: set[str] = set()
        self._failures: dict[str, str] = {}  # Event name -> why its last write failed (read by `post`)
        self._wake = anyio.Event()
        self.written = 0  # Event writes the API accepted
        self.failed = 0
        self.dropped = 0  # occurrences dropped because the queue was full

    # ------------------------------------------------------------------ recording

    def record(self, involved: ObjectRef, event_type: EventType, reason: str, message: str) -> str:
        """Note one occurrence; it is written later (or merged into a write already waiting). The name of
        the Event it goes to ("" when the spam filter or a full queue dropped it)."""
        write = self.correlator.correlate(involved, event_type, reason, message[:MESSAGE_LIMIT], self._now())
        if write is None:
            return ""
        waiting = self._queued.get(write.name)
        if waiting is not None:
            write = _merged(waiting, write)
        elif len(self._queued) >= self.max_queued:
            self.dropped += 1
            log.warning("event.dropped", object=f"{involved.namespace}/{involved.name}", reason=reason,
                        queued=len(self._queued))
            return ""
        self._queued[write.name] = write
        self._wake.set()
        return write.name

    async def post(self, involved: ObjectRef, event_type: EventType, reason: str, message: str) -> str:
        """Record one occurrence and write it now (with whatever else waits); "" when it was written or
        deliberately dropped, else why its write failed."""
        name = self.record(involved, event_type, reason, message)
        await self.flush()
        return self._failures.pop(name, "") if name else ""

    @property
    def queued(self) -> int:
        return len(self._queued)

    # ------------------------------------------------------------------ writing

    async def run(self) -> None:
        """Until cancelled: write whatever is queued, as soon as it is."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self.flush()

    async def flush(self) -> None:
        """Write every Event queued now (and what is queued for them meanwhile); return when done."""
        async with anyio.create_task_group() as group:
            for name in [name for name in self._queued if name not in self._writing]:
                self._writing.add(name)
                group.start_soon(self._write_while_queued, name)

    async def _write_while_queued(self, name: str) -> None:
        try:
            while name in self._queued:
                write = self._queued.pop(name)
                async with self._limiter:
                    await self._write(write)
        finally:
            self._writing.discard(name)

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
            "source": {"component": self.component, **({"host": self.correlator.host} if self.correlator.host else {})},
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
