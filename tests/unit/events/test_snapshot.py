"""Snapshots stored beside the log: atomic, checksummed, newest valid one wins, newest K kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from events.log import EventLog, EventLogError
from events.model import PodBound
from events.snapshot import SnapshotStore, decode_snapshot, encode_snapshot, snapshot_name
from tests.unit.events.stored import as_read


def bound(i: int) -> PodBound:
    return PodBound(pod=f"default/p{i}", uid=f"uid-{i}", node="n1")


def open_with(tmp_path: Path, count: int, *, kept: int = 2) -> EventLog:
    log = EventLog.open(tmp_path, fsync="never", snapshots_kept=kept)
    log.append_many(bound(i) for i in range(count))
    return log


def test_a_written_snapshot_is_the_latest_and_survives_reopening(tmp_path: Path) -> None:
    with open_with(tmp_path, 10) as log:
        assert log.latest_snapshot() is None
        log.write_snapshot(7, b"state at 7")
        assert as_read(log.latest_snapshot()) == (7, b"state at 7")
        assert log.durable_seq >= 7
    with EventLog.open_readonly(tmp_path) as reader:
        assert as_read(reader.latest_snapshot()) == (7, b"state at 7")
    assert not list(tmp_path.glob("*.tmp"))


def test_only_the_newest_k_snapshots_are_kept(tmp_path: Path) -> None:
    with open_with(tmp_path, 10, kept=2) as log:
        for seq in (2, 4, 6, 8):
            log.write_snapshot(seq, f"s{seq}".encode())
    assert sorted(path.name for path in tmp_path.glob("*.snap")) == [snapshot_name(6), snapshot_name(8)]


def test_a_corrupt_snapshot_is_reported_and_an_older_one_used(tmp_path: Path) -> None:
    with open_with(tmp_path, 10) as log:
        log.write_snapshot(5, b"older")
        log.write_snapshot(9, b"newer")
    newest = tmp_path / snapshot_name(9)
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF
    newest.write_bytes(bytes(data))
    with capture_logs() as logs, EventLog.open_readonly(tmp_path) as reader:
        assert as_read(reader.latest_snapshot()) == (5, b"older")
    corrupt = [entry for entry in logs if entry["event"] == "eventlog.snapshot_corrupt"]
    assert len(corrupt) == 1 and corrupt[0]["snapshot"] == str(newest)
    assert corrupt[0]["problem"] == "checksum mismatch"


def test_no_valid_snapshot_gives_none(tmp_path: Path) -> None:
    with open_with(tmp_path, 3) as log:
        log.write_snapshot(3, b"x")
    (tmp_path / snapshot_name(3)).write_bytes(b"TSSNAP")
    with EventLog.open_readonly(tmp_path) as reader:
        assert reader.latest_snapshot() is None


def test_a_snapshot_ahead_of_the_log_is_ignored(tmp_path: Path) -> None:
    with open_with(tmp_path, 5) as log:
        log.write_snapshot(3, b"at 3")
    # a snapshot covering records the log does not have cannot be trusted to fold the tail onto
    SnapshotStore(tmp_path).write(50, b"from elsewhere")
    with capture_logs() as logs, EventLog.open_readonly(tmp_path) as reader:
        assert as_read(reader.latest_snapshot()) == (3, b"at 3")
    assert any(entry["event"] == "eventlog.snapshot_ahead_of_log" for entry in logs)


def test_a_snapshot_must_cover_records_the_log_has(tmp_path: Path) -> None:
    with open_with(tmp_path, 5) as log:
        with pytest.raises(EventLogError, match="outside the log"):
            log.write_snapshot(6, b"x")
        with pytest.raises(EventLogError, match="outside the log"):
            log.write_snapshot(0, b"x")


def test_snapshot_encoding_round_trips_and_rejects_damage() -> None:
    data = encode_snapshot(42, b"payload")
    assert as_read(decode_snapshot(data)) == (42, b"payload")
    assert decode_snapshot(data[:-1]) == "payload length 7 does not match file size 38"
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x04
        assert isinstance(decode_snapshot(bytes(damaged)), str)


def test_latest_snapshot_can_be_limited_to_a_seq(tmp_path: Path) -> None:
    with open_with(tmp_path, 10, kept=3) as log:
        log.write_snapshot(4, b"at 4")
        log.write_snapshot(8, b"at 8")
        assert as_read(log.latest_snapshot(at_most=7)) == (4, b"at 4")
        assert log.latest_snapshot(at_most=3) is None


def test_a_snapshot_read_stays_whole_after_its_file_is_pruned(tmp_path: Path) -> None:
    # The payload is the file mapped, not a copy: it must outlive the file's removal by a newer snapshot.
    payload = bytes(range(256)) * 64
    with open_with(tmp_path, 10, kept=1) as log:
        log.write_snapshot(3, payload)
        found = log.latest_snapshot()
        log.write_snapshot(6, b"newer")
        assert not (tmp_path / snapshot_name(3)).exists()
        assert as_read(found) == (3, payload)
        assert as_read(log.latest_snapshot()) == (6, b"newer")


def test_an_empty_snapshot_file_is_reported_and_an_older_one_used(tmp_path: Path) -> None:
    with open_with(tmp_path, 10, kept=3) as log:
        log.write_snapshot(5, b"older")
    (tmp_path / snapshot_name(9)).write_bytes(b"")
    with capture_logs() as logs, EventLog.open_readonly(tmp_path) as reader:
        assert as_read(reader.latest_snapshot()) == (5, b"older")
    assert [entry["problem"] for entry in logs if entry["event"] == "eventlog.snapshot_corrupt"] == [
        "file is 0 bytes, shorter than the 32-byte header"]
