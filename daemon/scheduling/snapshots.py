"""Writing snapshots of the state: inline, or by a separate process so the event loop never waits.

A snapshot of 100,000 pods is ~70 MB of msgpack and takes ~0.3 s to encode and as long again to
write and fsync; done on the event loop, scheduling stops meanwhile. The state is mutated by the
loop all the time, so it cannot be encoded from another thread (and msgspec holds the GIL while it
encodes anyway). `FoldedSnapshots` (the daemon's) hands the work to a new process instead:
`python -m daemon.offline.snapshot_writer LOGDIR SEQ` opens the log read-only, folds it up to SEQ from its newest
snapshot at or before SEQ, fsyncs the segments and writes the snapshot at SEQ atomically
(`events.snapshot.SnapshotStore`). The state is the fold of the log, so this snapshot is exactly
the state after event SEQ, captured without touching the live one; the loop pays only for handing
buffered records to the OS and spawning the process (a few ms), and the writer runs at nice 19 so a
busy machine serves the loop first. A thread waits for the writer and then runs `on_written` (the
journal prunes the log's history there), off the loop. At most one writer at a time: a snapshot due
while one is being written waits for the next event (`busy`).

Measured on 2 cores at load 4-5 (10,000 nodes, 100,000 pods): writing inline stalled the loop
630-1,100 ms; a forked child (copy-on-write image of the live state) stalled it 13-56 ms in `fork()`
alone, growing with the heap; this writer leaves the loop's longest lag at that of a loop with no
snapshot (8-18 ms). The price is CPU in the writer: restoring the previous snapshot and folding the
tail (seconds, at the lowest priority), and its memory while it runs.

`InlineSnapshots` does the work synchronously (simulations, tests, tools).

Must never: write a snapshot covering records that are not durable, or block the loop on the writer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from events.log import EventLog
from events.objects import DEFAULT_SCHEDULER_NAME
from state.cluster import ClusterState

log = structlog.get_logger("toposched.snapshots")

# Called after a snapshot was written, with its seq and the seconds it took (from any thread).
Written = Callable[[int, float], None]


class SnapshotWriter(Protocol):
    @property
    def busy(self) -> bool: ...

    def start(self, seq: int, state: ClusterState) -> None: ...

    def close(self) -> None: ...


class InlineSnapshots:
    """Encode, make durable and write on the caller's thread; `on_written` runs before `start` returns."""

    def __init__(self, event_log: EventLog, on_written: Written) -> None:
        self.log = event_log
        self.on_written = on_written

    @property
    def busy(self) -> bool:
        return False

    def start(self, seq: int, state: ClusterState) -> None:
        started = time.perf_counter()
        self.log.write_snapshot(seq, state.snapshot())
        self.on_written(seq, time.perf_counter() - started)

    def close(self) -> None:
        pass


class FoldedSnapshots:
    """Snapshots written by a separate process folding the log up to the seq (`daemon.offline.snapshot_writer`):
    consistent by construction (the state is the fold of the log), and the loop pays only a spawn."""

    def __init__(self, event_log: EventLog, on_written: Written, *, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
                 on_failed: Callable[[int], None] | None = None, close_timeout: float = 5.0,
                 command: Sequence[str] = (sys.executable, "-m", "daemon.offline.snapshot_writer")) -> None:
        self.log = event_log
        self.command = list(command)
        self.on_written = on_written
        self.on_failed = on_failed
        self.scheduler_name = scheduler_name
        self.close_timeout = close_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._waiter: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        return self._process is not None

    def start(self, seq: int, state: ClusterState) -> None:
        if self._process is not None:
            raise RuntimeError("a snapshot is already being written")
        self.log.flush_to_os()  # so the writer reads every record up to `seq` (and fsyncs them)
        started = time.perf_counter()
        process = subprocess.Popen(
            [*self.command, str(self.log.directory), str(seq), "--scheduler-name", self.scheduler_name,
             "--kai-node-pool-label", state.kai_node_pool_label, "--keep", str(self.log.snapshots_kept),
             "--parent", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        self._process = process
        self._waiter = threading.Thread(target=self._wait, args=(process, seq, started), name=f"snapshot-{seq}",
                                        daemon=True)
        self._waiter.start()

    def _wait(self, process: subprocess.Popen[bytes], seq: int, started: float) -> None:
        try:
            code = process.wait()
            seconds = time.perf_counter() - started
            if code == 0:
                self.on_written(seq, seconds)
            else:
                log.error("journal.snapshot_failed", seq=seq, exit_code=code, seconds=round(seconds, 3),
                          detail="the snapshot writer's traceback is on stderr; the next one is tried later")
                if self.on_failed is not None:
                    self.on_failed(seq)
        except Exception as error:
            log.error("journal.snapshot_wait_failed", seq=seq, error=repr(error))
        finally:
            self._process = None

    def close(self) -> None:
        """Wait a little for a writer still running, then stop it: the snapshot is only a shortcut for the
        next start (the older ones stay; a half-written one is only a `.tmp` file, removed by the next)."""
        waiter, process = self._waiter, self._process
        if waiter is None:
            return
        waiter.join(self.close_timeout)
        if waiter.is_alive() and process is not None:
            log.warning("journal.snapshot_killed", pid=process.pid, waited_seconds=self.close_timeout)
            process.kill()
            waiter.join(5.0)
