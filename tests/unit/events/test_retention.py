"""Retention: history older than the newest snapshot is pruned beyond a byte and an age budget, and a
pruned log still opens, appends and reads from its oldest snapshot kept."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from events.log import EventLog, EventLogError, LogCorruptError
from events.model import Event, PodBound
from events.snapshot import snapshot_name
from tests.unit.events.stored import as_read

SMALL_SEGMENTS = 4096


def bound(i: int) -> PodBound:
    return PodBound(pod=f"default/p{i}", uid=f"uid-{i}", node=f"n{i % 7}", time=float(i))


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.seg"))


def open_log(directory: Path) -> EventLog:
    return EventLog.open(directory, fsync="never", segment_bytes=SMALL_SEGMENTS)


def filled(directory: Path, count: int, snapshots_at: tuple[int, ...]) -> list[Event]:
    with open_log(directory) as log:
        stored = log.append_many(bound(i) for i in range(count))
        for seq in snapshots_at:
            log.write_snapshot(seq, f"state at {seq}".encode())
    return stored


def test_nothing_is_pruned_without_a_snapshot(tmp_path: Path) -> None:
    filled(tmp_path, 600, ())
    before = segments(tmp_path)
    with open_log(tmp_path) as log:
        result = log.prune(retention_bytes=0, retention_seconds=0)
        assert result.segments == 0 and log.first_seq == 1
    assert segments(tmp_path) == before


def test_segments_covered_by_the_newest_snapshot_go_beyond_the_byte_budget_oldest_first(tmp_path: Path) -> None:
    stored = filled(tmp_path, 600, (450,))
    before = segments(tmp_path)
    first_seqs = [int(path.name.removesuffix(".seg")) for path in before]
    # Segment k holds first_seqs[k]..first_seqs[k+1]-1: covered when that ends at or before the snapshot.
    covered = [path for path, following in zip(before, first_seqs[1:], strict=False) if following - 1 <= 450]
    budget = sum(path.stat().st_size for path in covered[-2:])  # room for the two newest of them
    with open_log(tmp_path) as log:
        result = log.prune(retention_bytes=budget, retention_seconds=1e9)
        assert result.segments == len(covered) - 2
        assert log.first_seq == first_seqs[len(covered) - 2]
        assert list(log.read(1)) == stored[log.first_seq - 1:]  # reading from 1 starts at the oldest kept
    assert segments(tmp_path) == before[len(covered) - 2:]
    assert not [p for p in tmp_path.glob("*.idx") if not Path(str(p)[:-4]).exists()]


def test_segments_older_than_the_age_budget_go_even_within_the_byte_budget(tmp_path: Path) -> None:
    filled(tmp_path, 600, (450,))
    files = segments(tmp_path)
    old = time.time() - 3600
    os.utime(files[0], (old, old))
    with open_log(tmp_path) as log:
        result = log.prune(retention_bytes=10**12, retention_seconds=600)
        assert result.segments == 1 and log.first_seq > 1
    assert segments(tmp_path) == files[1:]


def test_the_segment_being_appended_to_and_the_tail_after_the_snapshot_are_never_pruned(tmp_path: Path) -> None:
    stored = filled(tmp_path, 600, (600,))
    with open_log(tmp_path) as log:
        log.prune(retention_bytes=0, retention_seconds=0)
        assert len(segments(tmp_path)) == 1
        assert list(log.read(1)) == stored[log.first_seq - 1:]
        assert log.append(bound(600)).seq == 601


def test_snapshots_whose_tail_was_pruned_are_deleted_and_the_newer_kept(tmp_path: Path) -> None:
    filled(tmp_path, 600, (100, 450))
    with open_log(tmp_path) as log:
        result = log.prune(retention_bytes=0, retention_seconds=0)
        assert result.snapshots == 1
        assert log.first_seq - 1 <= 450
    assert sorted(p.name for p in tmp_path.glob("*.snap")) == [snapshot_name(450)]


def test_a_pruned_log_reopens_for_writing_and_reading_and_starts_from_its_base_snapshot(tmp_path: Path) -> None:
    stored = filled(tmp_path, 600, (450,))
    with open_log(tmp_path) as log:
        log.prune(retention_bytes=0, retention_seconds=0)
        first = log.first_seq
    assert first > 1
    with EventLog.open_readonly(tmp_path) as reader:
        assert reader.first_seq == first and reader.last_seq == 600
        assert list(reader.read(1)) == stored[first - 1:]
        assert as_read(reader.base_snapshot()) == (450, b"state at 450")
        assert as_read(reader.latest_snapshot()) == (450, b"state at 450")
        with pytest.raises(EventLogError, match="pruned"):
            reader.base_snapshot(at_most=first - 2)
    with open_log(tmp_path) as writer:
        assert writer.append(bound(600)).seq == 601


def test_an_unpruned_log_has_no_base_snapshot(tmp_path: Path) -> None:
    filled(tmp_path, 300, (100,))
    with EventLog.open_readonly(tmp_path) as reader:
        assert reader.first_seq == 1 and reader.base_snapshot() is None


def test_a_pruned_log_whose_base_snapshot_is_unreadable_says_so(tmp_path: Path) -> None:
    filled(tmp_path, 600, (450,))
    with open_log(tmp_path) as log:
        log.prune(retention_bytes=0, retention_seconds=0)
    (tmp_path / snapshot_name(450)).write_bytes(b"damaged")
    with EventLog.open_readonly(tmp_path) as reader, pytest.raises(EventLogError, match="no readable snapshot"):
        reader.base_snapshot()


def test_a_log_missing_its_first_segments_without_a_snapshot_is_corrupt(tmp_path: Path) -> None:
    filled(tmp_path, 600, (450,))
    with open_log(tmp_path) as log:
        log.prune(retention_bytes=0, retention_seconds=0)
    for snapshot in tmp_path.glob("*.snap"):
        snapshot.unlink()
    with pytest.raises(LogCorruptError, match="no snapshot"):
        EventLog.open_readonly(tmp_path)


def test_when_every_segment_is_gone_the_log_goes_on_after_its_newest_snapshot(tmp_path: Path) -> None:
    filled(tmp_path, 300, (300,))
    for segment in segments(tmp_path):
        segment.unlink()
    with open_log(tmp_path) as log:
        assert log.next_seq == 301 and log.first_seq == 301
        assert as_read(log.latest_snapshot()) == (300, b"state at 300")  # a restart restores it and folds nothing
        assert log.append(bound(0)).seq == 301
    with EventLog.open_readonly(tmp_path) as reader:
        assert [e.seq for e in reader.read(1)] == [301]
        assert as_read(reader.latest_snapshot()) == (300, b"state at 300")
