"""`python -m bench.eventlog --before DIR`: a restart timed the same way in this checkout and in the
code to compare with, and a directory that is not that code named in the error."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from bench.eventlog import before_log, generate_cluster_events, restart_in, write_snapshot_and_tail
from events.log import EventLog, FsyncPolicy

ROOT = Path(__file__).resolve().parents[2]


def test_a_restart_is_timed_in_a_new_process_of_the_checkout_on_its_log(tmp_path: Path) -> None:
    events = generate_cluster_events(8, 40)
    directory = tmp_path / "log"
    with EventLog.open(directory, fsync=FsyncPolicy.never()) as log:
        log.append_many(events[:-5])
    write_snapshot_and_tail(directory, [msgspec.structs.replace(event, seq=0) for event in events[-5:]])
    timed = restart_in(ROOT, directory)
    assert timed["tail"] == 5  # the snapshot was restored, then the tail folded
    assert timed["cpu"] > 0 and timed["seconds"] > 0


def test_a_directory_without_the_code_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=f"--before {tmp_path}: not a checkout of toposched"):
        before_log(tmp_path, tmp_path / "log", 8, 40)


def test_a_checkout_whose_modules_do_not_load_is_an_error_naming_the_commit_to_check_out(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "__init__.py").write_text("")
    (tmp_path / "events" / "log.py").write_text("raise ImportError('half a checkout')\n")
    with pytest.raises(SystemExit, match="half a checkout") as raised:
        restart_in(tmp_path, tmp_path / "log")
    assert f"--before {tmp_path}: exited 1 (is it a checkout of c06b3d1?" in str(raised.value)
