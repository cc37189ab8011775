"""The journal: the one door through which every observation and every decision enters the state.

`Journal.record(event)` stamps the event with the clock's time and its sequence number, appends it
to the event log (when there is one) *before* folding it into `ClusterState`, then tells the
listeners (the scheduler loop wakes on cluster changes). So the log always holds at least what the
state knows, and replaying the log gives the same state. Without a log (a simulation that keeps no
record, a unit test) sequence numbers come from a counter that continues the state's own.

Every `snapshot_every` events a snapshot of the state is written beside the log, so a restart folds
only the tail.

Must never: decide anything, call the cluster API, or fold an event it did not first append.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import structlog

from daemon.ports import Clock
from events.log import EventLog
from events.model import Event
from state.cluster import ClusterState

log = structlog.get_logger("toposched.journal")

DEFAULT_SNAPSHOT_EVERY = 50_000

Listener = Callable[[Event], None]


class Journal:
    def __init__(self, state: ClusterState, clock: Clock, log: EventLog | None = None, *,
                 snapshot_every: int = DEFAULT_SNAPSHOT_EVERY) -> None:
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every must be at least 1, got {snapshot_every}")
        self.state = state
        self.clock = clock
        self.log = log
        self.snapshot_every = snapshot_every
        self.recorded = 0  # events recorded through this journal
        self._next_seq = (log.next_seq if log is not None else state.last_seq + 1)
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        """Call `listener(stored_event)` after each event is folded (in subscription order)."""
        self._listeners.append(listener)

    def record(self, event: Event) -> Event:
        """Stamp, append, fold, notify; returns the event as stored (with its seq and time)."""
        now = self.clock.now()
        if self.log is not None:
            stored = self.log.append(msgspec.structs.replace(event, time=now))
        else:
            stored = msgspec.structs.replace(event, time=now, seq=self._next_seq)
        self._next_seq = stored.seq + 1
        self.state.apply(stored)
        self.recorded += 1
        if self.log is not None and stored.seq % self.snapshot_every == 0:
            self.log.write_snapshot(stored.seq, self.state.snapshot())
            log.debug("journal.snapshot", seq=stored.seq)
        for listener in self._listeners:
            listener(stored)
        return stored

    def recorder(self) -> WatchRecorder:
        """An async face of this journal for the watchers (`daemon.kubewatch.Recorder`)."""
        return WatchRecorder(self)


class WatchRecorder:
    """`await recorder.record(event)`: what the list+watch machinery calls; records through the journal."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def record(self, event: Event) -> None:
        self.journal.record(event)
