"""`python -m daemon.offline.snapshot_writer LOGDIR SEQ`: write the snapshot of an event log at SEQ.

The daemon's journal runs this in a separate process (`daemon.scheduling.snapshots.FoldedSnapshots`)
so that writing a snapshot never holds its event loop: the log is opened read-only (its writer goes
on appending), folded up to SEQ from its newest snapshot at or before SEQ, the segments are fsynced,
and the snapshot is written atomically beside them. The state is the fold of the log, so this is
exactly the state after event SEQ. Exits 0 when written, non-zero (traceback on stderr) otherwise.

Must never: write a snapshot past what the log holds, or write once the daemon that asked is gone.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from daemon.offline.replay import fold_log
from events.log import EventLog
from events.objects import DEFAULT_SCHEDULER_NAME, KAI_NODE_POOL_LABEL
from events.snapshot import SnapshotStore


def write_folded(directory: Path, seq: int, *, scheduler_name: str, keep: int, parent: int | None = None,
                 kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> None:
    """Fold the log at `directory` up to `seq` (from its newest snapshot at or before it), make the records
    durable and write the snapshot at `seq`. Reads the log read-only: its writer goes on meanwhile.

    With `parent`, gives up (exit 1) if that process is gone by the time the snapshot would be written:
    the log may have a new writer by then, which writes its own."""
    with EventLog.open_readonly(directory) as event_log:
        if event_log.last_seq < seq:
            raise RuntimeError(f"the log ends at seq {event_log.last_seq}, before {seq}")
        folded = fold_log(event_log, until=seq, scheduler_name=scheduler_name, kai_node_pool_label=kai_node_pool_label)
    if folded.state.last_seq != seq:
        raise RuntimeError(f"folding up to seq {seq} ended at {folded.state.last_seq}")
    for segment in sorted(directory.glob("*.seg")):
        fd = os.open(segment, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    payload = folded.state.snapshot()
    if parent is not None and os.getppid() != parent:
        raise RuntimeError(f"the daemon (pid {parent}) that asked for this snapshot is gone; not writing it")
    SnapshotStore(directory, keep=keep).write(seq, payload)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daemon.offline.snapshot_writer",
                                     description="Write the snapshot of an event log at SEQ (the daemon runs this).")
    parser.add_argument("directory", type=Path)
    parser.add_argument("seq", type=int)
    parser.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME)
    parser.add_argument("--kai-node-pool-label", default=KAI_NODE_POOL_LABEL)
    parser.add_argument("--keep", type=int, default=2)
    parser.add_argument("--parent", type=int, help="give up if this process (the daemon) is gone before writing")
    args = parser.parse_args(argv)
    os.nice(19)  # on a busy machine the loop that schedules comes first; the snapshot can wait
    write_folded(args.directory, args.seq, scheduler_name=args.scheduler_name, keep=args.keep, parent=args.parent,
                 kai_node_pool_label=args.kai_node_pool_label)
    return 0



if __name__ == "__main__":
    raise SystemExit(main())
