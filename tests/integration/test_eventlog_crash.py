"""Kill -9 a process appending with fsync=always: every record append() returned is there after reopening.

The child appends numbered events and prints each seq only after append() returned; the parent
kills it with SIGKILL at some point, reopens the log (which may cut a torn tail) and checks that
each acknowledged record is present and exactly what was appended.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from events.log import EventLog
from events.model import PodBound

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import sys
    from events.log import EventLog
    from events.model import PodBound

    directory, segment_bytes = sys.argv[1], int(sys.argv[2])
    with EventLog.open(directory, fsync="always", segment_bytes=segment_bytes) as log:
        print("ready", flush=True)
        while True:
            seq = log.next_seq
            stored = log.append(PodBound(pod=f"default/p{seq}", uid=f"uid-{seq}", node="n" * (seq % 300)))
            print(stored.seq, flush=True)
    """
)


def expected(seq: int) -> PodBound:
    return PodBound(seq=seq, pod=f"default/p{seq}", uid=f"uid-{seq}", node="n" * (seq % 300))


def run_and_kill(directory: Path, *, segment_bytes: int, kill_after: int) -> list[int]:
    """Start the appending child, SIGKILL it once `kill_after` appends are acknowledged; return the acks."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(segment_bytes)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert child.stdout is not None
    acknowledged: list[int] = []
    pending = b""
    deadline = time.monotonic() + 30
    try:
        while len(acknowledged) < kill_after:
            assert time.monotonic() < deadline, f"child acknowledged only {len(acknowledged)} appends in 30 s"
            ready, _, _ = select.select([child.stdout], [], [], 1.0)
            if not ready:
                assert child.poll() is None, "child exited early"
                continue
            chunk = os.read(child.stdout.fileno(), 65536)
            assert chunk, "child closed its output"
            pending += chunk
            *lines, pending = pending.split(b"\n")
            acknowledged.extend(int(line) for line in lines if line and line != b"ready")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        # lines printed before the kill are acknowledged too
        rest = pending + child.stdout.read()
        acknowledged.extend(int(line) for line in rest.split(b"\n")[:-1] if line and line != b"ready")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return acknowledged


@pytest.mark.parametrize(
    ("segment_bytes", "kill_after"),
    [(64 * 1024 * 1024, 150), (4096, 400), (4096, 1500)],
)
def test_every_record_acknowledged_with_fsync_always_survives_kill_9(
    tmp_path: Path, segment_bytes: int, kill_after: int
) -> None:
    directory = tmp_path / "log"
    acknowledged = run_and_kill(directory, segment_bytes=segment_bytes, kill_after=kill_after)
    assert acknowledged == list(range(1, len(acknowledged) + 1))

    with EventLog.open(directory, fsync="always", segment_bytes=segment_bytes) as log:
        recovered = list(log.read())
        assert len(recovered) >= len(acknowledged)
        assert recovered == [expected(seq) for seq in range(1, len(recovered) + 1)]
        # the recovered log goes on numbering right after the last surviving record
        assert log.append(PodBound(pod="after", uid="u", node="n")).seq == len(recovered) + 1


def test_a_killed_writer_leaves_the_log_lock_free(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    run_and_kill(directory, segment_bytes=4096, kill_after=20)
    with EventLog.open(directory, fsync="never") as log:
        assert log.last_seq >= 20
