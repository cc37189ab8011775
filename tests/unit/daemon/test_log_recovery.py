"""A damaged event log at start: moved aside and rebuilt (recover), or the daemon stops naming it (refuse)."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from daemon.cli.run import Daemon
from daemon.config import decode_config
from events.log import DAMAGED_INFIX, EventLog, LogDamagedError, LogLockedError, move_aside
from tests.logdamage import DAMAGES, Damage, damaged_log


def daemon_for(log_dir: Path, on_corruption: str = "recover") -> Daemon:
    return Daemon(decode_config({"log_dir": str(log_dir), "fsync": "never",
                                 "event_log": {"on_corruption": on_corruption}}))


def contents(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.iterdir() if path.name != "LOCK"}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_log_is_moved_aside_whole_and_a_new_one_starts_empty(tmp_path: Path, damage: Damage) -> None:
    log_dir = tmp_path / "log"
    damaged_log(log_dir, damage)
    before = contents(log_dir)
    daemon = daemon_for(log_dir)
    with capture_logs() as logs:
        event_log, folded = daemon._restore()
    try:
        assert event_log.last_seq == 0 and not folded.state.nodes  # the relist rebuilds it
    finally:
        event_log.close()
    assert daemon.recovery is not None
    moved = Path(daemon.recovery.moved_to)
    assert moved.parent == tmp_path and moved.name.startswith("log" + DAMAGED_INFIX)
    assert contents(moved) == before  # kept byte for byte, for toposched replay
    assert daemon.metrics.registry.get_sample_value("toposched_event_log_recoveries_total") == 1
    line = next(entry for entry in logs if entry["event"] == "daemon.log_recovered")
    assert line["log_level"] == "error" and line["moved_to"] == str(moved) and line["damage"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_with_refuse_a_damaged_log_stops_the_start_and_nothing_moves(tmp_path: Path, damage: Damage) -> None:
    log_dir = tmp_path / "log"
    damaged_log(log_dir, damage)
    before = contents(log_dir)
    with pytest.raises(LogDamagedError):
        daemon_for(log_dir, "refuse")._restore()
    assert contents(log_dir) == before and sorted(p.name for p in tmp_path.iterdir()) == ["log"]
    with open(log_dir / "LOCK", "rb") as lock:  # and the lock was released on the way out
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_log_another_process_holds_is_never_moved(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    with EventLog.open(log_dir, fsync="never"), pytest.raises(LogLockedError):
        daemon_for(log_dir)._restore()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log"]


def test_only_the_newest_two_damaged_logs_are_kept(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    moved = []
    for stamp in ("20260101T000000Z", "20260102T000000Z", "20260103T000000Z"):
        damaged_log(log_dir, "middle")
        moved.append(move_aside(log_dir, stamp=stamp, keep=2))
    assert sorted(p for p in tmp_path.iterdir()) == moved[1:]


def test_a_log_directory_that_cannot_be_renamed_has_its_contents_moved_inside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log_dir = tmp_path / "log"
    damaged_log(log_dir, "middle")
    before = contents(log_dir)
    rename = os.rename

    def mount_point(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        if Path(source) == log_dir:
            raise OSError(errno.EBUSY, "Device or resource busy")
        rename(source, target)

    monkeypatch.setattr(os, "rename", mount_point)
    daemon = daemon_for(log_dir)
    event_log, _ = daemon._restore()
    event_log.close()
    assert daemon.recovery is not None
    moved = Path(daemon.recovery.moved_to)
    assert moved.parent == log_dir and contents(moved) == before
    with EventLog.open_readonly(log_dir) as fresh:
        assert fresh.last_seq == 0
