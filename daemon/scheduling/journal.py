"""The journal: the one door through which every observation and every decision enters the state.

`Journal.record(event)` stamps the event with the clock's time and its sequence number, appends it
to the event log (when there is one) *before* folding it into `ClusterState`, then tells the
listeners (the scheduler loop wakes on cluster changes). So the log always holds at least what the
state knows, and replaying the log gives the same state. Without a log (a simulation that keeps no
record, a unit test) sequence numbers come from a counter that continues the state's own.

Every `snapshot_every` events, or once `snapshot_bytes` of records were appended since the last
one, a snapshot of the state is written beside the log, so a restart folds only the tail; after
each snapshot the log's history beyond the retention (`EventLogConfig`) is pruned. With
`background=True` (the daemon) the snapshot is written by another process and the pruning runs on a
thread, so the loop never waits for either (`daemon.scheduling.snapshots`); a snapshot due while one is being
written is taken at the first event after it finishes. Call `close()` before closing the log.

Record cap: an observed object whose record would exceed `max_record_bytes` (after slimming, see
`events.objects`) is not logged as it is. A Pod or Node is logged as its accounting core
(`events.objects.pod_core` / `node_core`: identity, node, requests or allocatable, priority), so
capacity stays exact; the fold counts such a pod where it runs but never places it, and never
places anything on such a node, and records a problem naming the object and its size. Any other
kind is logged as `ObjectUndecodable` naming it, and the fold keeps its last good version. Either
way one error line (`journal.record_too_large`, with kind, object, bytes and cap) and the counter
`toposched_event_log_oversized_records_total{kind}` say so; a later version that fits replaces it.

Internal errors: the fold never raises (it returns what folding an event raised, and marks the
object), and a listener that raises is not allowed to stop the others or the caller. Both, and any
failure the scheduler loop catches around one unit (`report_error`), are logged here with their
traceback (`internal_error`, with the stage and the object) and counted
(`toposched_internal_errors_total{stage}`). A failure to append to the log is not one of them: it
propagates, since nothing can be decided that cannot be recorded.

A batch (`record_many`) is appended whole before its first event is folded, so an event recorded by
a `subscribe` listener while the batch's events are folded and heard would be logged after the batch
but folded inside it, and a replay would fold it elsewhere. That is refused (`RecordedMidBatch`,
raised in the listener, so reported as its internal error); a batch listener, which hears the batch
once it is all folded, may record.

Must never: decide anything, call the cluster API, or fold an event it did not first append.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec
import structlog

from daemon.config import EventLogConfig
from daemon.scheduling.ports import Clock
from daemon.scheduling.snapshots import FoldedSnapshots, InlineSnapshots, SnapshotWriter
from daemon.telemetry.metrics import Metrics
from events.log import EventLog, EventLogError, RecordTooLargeError
from events.model import (
    Event,
    HyperNodeUpserted,
    NetworkTopologyUpserted,
    NodeUpserted,
    ObjectUndecodable,
    PodGroupUpserted,
    PodUpserted,
    PriorityClassUpserted,
    VolcanoPodGroupUpserted,
)
from events.objects import node_core, pod_core
from state.cluster import ClusterState, subject_of

log = structlog.get_logger("toposched.journal")

DEFAULT_SNAPSHOT_EVERY = 50_000
# A snapshot also once this much log was written since the last one, so big records cannot make the
# unprunable tail (everything after the newest snapshot) grow without bound between snapshots.
DEFAULT_SNAPSHOT_BYTES = 256 * 1024 * 1024

Listener = Callable[[Event], None]
BatchListener = Callable[[Sequence[Event]], None]

FOLD_STAGE = "fold"
LISTENER_STAGE = "listener"

_ObservedEvent = (NodeUpserted | PodUpserted | PodGroupUpserted | VolcanoPodGroupUpserted | NetworkTopologyUpserted
                  | HyperNodeUpserted | PriorityClassUpserted)
_OBSERVED: tuple[type[_ObservedEvent], ...] = (
    NodeUpserted, PodUpserted, PodGroupUpserted, VolcanoPodGroupUpserted, NetworkTopologyUpserted,
    HyperNodeUpserted, PriorityClassUpserted,
)


class RecordedMidBatch(RuntimeError):
    """A listener recorded an event while a batch was being folded and heard (module docstring)."""


class Journal:
    def __init__(self, state: ClusterState, clock: Clock, log: EventLog | None = None, *,
                 snapshot_every: int = DEFAULT_SNAPSHOT_EVERY, snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES,
                 policy: EventLogConfig | None = None, metrics: Metrics | None = None,
                 background: bool = False) -> None:
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every must be at least 1, got {snapshot_every}")
        self.state = state
        self.clock = clock
        self.log = log
        self.snapshot_every = snapshot_every
        self.snapshot_bytes = snapshot_bytes
        self.policy = policy or EventLogConfig()
        self.metrics = metrics
        self.recorded = 0  # events recorded through this journal
        self._next_seq = (log.next_seq if log is not None else state.last_seq + 1)
        self._snapshot_at_bytes = log.appended_bytes if log is not None else 0
        self._snapshot_at_seq = state.last_seq  # what the state was restored from is in a snapshot or the log
        self._listeners: list[Listener] = []
        self._batch_listeners: list[BatchListener] = []
        self.internal_errors: dict[str, int] = {}  # stage -> count, since this journal was made
        self._batch_folding: tuple[int, int] | None = None  # seqs of the batch being folded and heard now
        self._writer: SnapshotWriter | None = None
        if log is not None:
            self._writer = (FoldedSnapshots(log, self._written, on_failed=self._failed,
                                            scheduler_name=state.scheduler_name) if background
                            else InlineSnapshots(log, self._written))

    def subscribe(self, listener: Listener) -> None:
        """Call `listener(stored_event)` after each event is folded (in subscription order)."""
        self._listeners.append(listener)

    def subscribe_batches(self, listener: BatchListener) -> None:
        """Call `listener(stored_events)` once per `record` or `record_many`, with what it recorded,
        after every one of those events is folded and heard by the `subscribe` listeners. For listeners
        that only note that something changed and read the state as it is then: a watch chunk or a
        decision's thousands of records cost them one call, not one each."""
        self._batch_listeners.append(listener)

    def report_error(self, stage: str, subject: str, error: BaseException) -> None:
        """Processing one object failed with `error` at `stage`: log it with its traceback and count it."""
        self.internal_errors[stage] = self.internal_errors.get(stage, 0) + 1
        log.error("internal_error", stage=stage, subject=subject, error=f"{type(error).__name__}: {error}"[:500],
                  exc_info=error)
        if self.metrics is not None:
            self.metrics.internal_errors.labels(stage).inc()

    def record(self, event: Event) -> Event:
        """Stamp, append, fold, notify; returns the event as stored (with its seq and time)."""
        if self._batch_folding is not None:
            self._refuse_mid_batch(event)
        if self.log is not None:
            stored = self._append(self.log, msgspec.structs.replace(event, time=self.clock.now()))
        else:
            stored = msgspec.structs.replace(event, time=self.clock.now(), seq=self._next_seq)
        self._next_seq = stored.seq + 1
        self._fold(stored)
        self._snapshot_if_due()
        self._notify(stored)
        if self._batch_listeners:
            self._notify_batch((stored,))
        return stored

    def record_many(self, events: Sequence[Event]) -> list[Event]:
        """`record` each of `events`, in order, as what arrived or was decided together (a chunk of a
        watch stream, one decision's records): stamped with one time and appended with one call (one
        fsync under `always`), then each folded and its listeners told. When an observed object's record
        is over the cap, nothing of the batch is appended then, and each goes through `record` (which
        logs that one's replacement). Returns the events as stored."""
        if len(events) < 2:
            return [self.record(event) for event in events]
        if self._batch_folding is not None:
            self._refuse_mid_batch(events[0])
        now = self.clock.now()
        if self.log is not None:
            try:
                stored_all = self.log.append_many([msgspec.structs.replace(event, time=now) for event in events],
                                                  max_bytes=self.policy.max_record_bytes)
            except RecordTooLargeError:  # all or none: none was appended
                return [self.record(event) for event in events]
        else:
            stored_all = [msgspec.structs.replace(event, time=now, seq=seq)
                          for seq, event in enumerate(events, start=self._next_seq)]
        self._next_seq = stored_all[-1].seq + 1
        # Every event is folded and heard before the snapshot check, which snapshots the log's last
        # seq: the state must have folded the whole batch by then.
        self._batch_folding = (stored_all[0].seq, stored_all[-1].seq)
        try:
            for stored in stored_all:
                self._fold(stored)
                self._notify(stored)
        finally:
            self._batch_folding = None
        if self._batch_listeners:
            self._notify_batch(stored_all)
        self._snapshot_if_due()
        return stored_all

    def _refuse_mid_batch(self, event: Event) -> None:
        assert self._batch_folding is not None
        first, last = self._batch_folding
        raise RecordedMidBatch(f"{type(event).__name__} recorded while events seq {first}-{last} were being folded "
                               "and heard: it would be logged after them but folded among them; record it from a "
                               "batch listener (subscribe_batches) instead")

    def _fold(self, stored: Event) -> None:
        failure = self.state.apply(stored)
        self.recorded += 1
        if failure is not None:
            kind, key = subject_of(stored)
            self.report_error(FOLD_STAGE, f"{kind} {key} (event seq {stored.seq})", failure)

    def _snapshot_if_due(self) -> None:
        if self.log is not None and (self.log.last_seq - self._snapshot_at_seq >= self.snapshot_every
                                     or self.log.appended_bytes - self._snapshot_at_bytes >= self.snapshot_bytes):
            self.write_snapshot()

    def _notify(self, stored: Event) -> None:
        for listener in self._listeners:
            try:
                listener(stored)
            except Exception as error:  # one listener's bug must not cost the others (or the caller) this event
                self.report_error(LISTENER_STAGE, f"{_name_of(listener)} on event seq {stored.seq}", error)

    def _notify_batch(self, stored: Sequence[Event]) -> None:
        for listener in self._batch_listeners:
            try:
                listener(stored)
            except Exception as error:  # as `_notify`: one listener's bug costs nobody else the batch
                self.report_error(LISTENER_STAGE, f"{_name_of(listener)} on events seq {stored[0].seq}-"
                                  f"{stored[-1].seq}", error)

    def _append(self, event_log: EventLog, event: Event) -> Event:
        if not isinstance(event, _OBSERVED):
            return event_log.append(event)
        try:
            return event_log.append(event, max_bytes=self.policy.max_record_bytes)
        except RecordTooLargeError as error:
            too_large = error
        kind, key = _identify(event)
        replacement = oversized_replacement(event, too_large.size, too_large.limit)
        log.error("journal.record_too_large", kind=kind, object=key, bytes=too_large.size, limit=too_large.limit,
                  logged=type(replacement).__name__)
        if self.metrics is not None:
            self.metrics.oversized_records.labels(kind).inc()
        try:
            return event_log.append(replacement, max_bytes=self.policy.max_record_bytes)
        except RecordTooLargeError:  # even the core is too big (thousands of containers): name it, nothing more
            return event_log.append(ObjectUndecodable(kind=kind, key=key[:512], problem=_note(kind, too_large),
                                                      time=event.time))

    @property
    def snapshot_in_progress(self) -> bool:
        """Whether a snapshot is being written now (never, while they are written inline)."""
        return self._writer is not None and self._writer.busy

    def write_snapshot(self) -> bool:
        """Snapshot the state as of the last recorded event (then prune the log's history); False when one
        is already being written (the next event tries again)."""
        event_log, writer = self.log, self._writer
        if event_log is None or writer is None or event_log.last_seq == 0 or writer.busy:
            return False
        seq = event_log.last_seq
        # Counted from the start, not the end: events recorded meanwhile are not in this snapshot.
        self._snapshot_at_seq = seq
        self._snapshot_at_bytes = event_log.appended_bytes
        writer.start(seq, self.state)
        return True

    def _written(self, seq: int, seconds: float) -> None:
        """After a snapshot is on disk (on the loop when inline, on the waiting thread when forked)."""
        log.debug("journal.snapshot", seq=seq, seconds=round(seconds, 3))
        if self.metrics is not None:
            self.metrics.snapshot_duration.observe(seconds)
        event_log = self.log
        if event_log is None:
            return
        try:
            event_log.prune(retention_bytes=self.policy.retention_bytes,
                            retention_seconds=self.policy.retention_seconds, snapshot_seq=seq)
        except EventLogError as error:  # e.g. the log closed meanwhile: the next snapshot prunes
            log.warning("journal.prune_failed", seq=seq, error=str(error))

    def _failed(self, seq: int) -> None:
        if self.metrics is not None:
            self.metrics.snapshot_failures.inc()

    def close(self) -> None:
        """Wait for a snapshot being written (bounded); call before closing the log."""
        if self._writer is not None:
            self._writer.close()

    def recorder(self) -> WatchRecorder:
        """An async face of this journal for the watchers (`daemon.kube.watch.Recorder`)."""
        return WatchRecorder(self)


def oversized_replacement(event: _ObservedEvent, size: int, limit: int) -> Event:
    """What is logged instead of an observed object whose record is over the cap (module docstring)."""
    kind, key = _identify(event)
    note = _note(kind, RecordTooLargeError(event, size, limit))
    if isinstance(event, PodUpserted):
        return PodUpserted(pod=pod_core(event.pod, note), time=event.time)
    if isinstance(event, NodeUpserted):
        return NodeUpserted(node=node_core(event.node, note), time=event.time)
    return ObjectUndecodable(kind=kind, key=key, problem=note, time=event.time)


def _note(kind: str, error: RecordTooLargeError) -> str:
    consequence = {
        "Pod": "only its accounting core is kept: counted on its node, never placed",
        "Node": "only its accounting core is kept: its pods are counted, nothing is placed on it",
    }.get(kind, "not used; the last version that fitted stays in use")
    return (f"takes {error.size} bytes in the event log, over the {error.limit}-byte record cap "
            f"(event_log.max_record_bytes); {consequence} until a smaller version arrives")


def _identify(event: _ObservedEvent) -> tuple[str, str]:
    return subject_of(event)


def _name_of(listener: Listener | BatchListener) -> str:
    return getattr(listener, "__qualname__", None) or type(listener).__qualname__


class WatchRecorder:
    """`await recorder.record(event)`: what the list+watch machinery calls; records through the journal."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def record(self, event: Event) -> None:
        self.journal.record(event)

    async def record_many(self, events: Sequence[Event]) -> None:
        self.journal.record_many(events)

    async def record_listed(self, events: Sequence[Event]) -> int:
        # Decided against the state as it is when the page is recorded: nothing runs between the check
        # and the append.
        changed = self.journal.state.not_held(events)
        self.journal.record_many(changed)
        return len(events) - len(changed)
