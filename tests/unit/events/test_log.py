"""The event log: framing round-trips, seeking, rotation, reopening, recovery and locking."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import events.log as event_log_module
from events.builders import node, pod
from events.log import EventLog, EventLogError, FsyncPolicy, LogCorruptError, LogLockedError
from events.model import Event, NodeUpserted, PodBound, PodUpserted, decode_event

SMALL_SEGMENTS = 4096


def bound(i: int) -> PodBound:
    return PodBound(pod=f"default/p{i}", uid=f"uid-{i}", node=f"n{i % 7}", time=float(i))


def fill(directory: Path, count: int, *, segment_bytes: int = SMALL_SEGMENTS) -> list[Event]:
    with EventLog.open(directory, fsync="never", segment_bytes=segment_bytes) as log:
        return log.append_many(bound(i) for i in range(count))


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.seg"))


def test_append_assigns_consecutive_seqs_from_one_and_read_returns_the_stored_events(tmp_path: Path) -> None:
    events: list[Event] = [NodeUpserted(node=node("n1")), PodUpserted(pod=pod("p1", gang="g")), bound(1)]
    with EventLog.open(tmp_path, fsync="always") as log:
        assert log.next_seq == 1
        stored = [log.append(event) for event in events]
        assert [event.seq for event in stored] == [1, 2, 3]
        assert log.next_seq == 4 and log.last_seq == 3
        assert list(log.read()) == stored
    with EventLog.open_readonly(tmp_path) as reader:
        assert list(reader.read()) == stored


def test_append_many_returns_events_with_consecutive_seqs(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="always") as log:
        log.append(bound(0))
        stored = log.append_many([bound(1), bound(2)])
        assert [event.seq for event in stored] == [2, 3]
        assert list(log.read(2)) == stored


def test_read_raw_yields_seq_and_the_encoded_payload(tmp_path: Path) -> None:
    stored = fill(tmp_path, 5)
    with EventLog.open_readonly(tmp_path) as log:
        raw = list(log.read_raw(3))
    assert [seq for seq, _ in raw] == [3, 4, 5]
    assert [decode_event(payload) for _, payload in raw] == stored[2:]


def test_segments_rotate_by_size_and_are_named_by_their_first_seq(tmp_path: Path) -> None:
    stored = fill(tmp_path, 400)
    files = segment_files(tmp_path)
    assert len(files) > 3
    assert files[0].name == "00000000000000000001.seg"
    firsts = [int(path.name.removesuffix(".seg")) for path in files]
    assert firsts == sorted(firsts)
    for path in files[:-1]:
        # a segment is closed once it reaches the size limit, so none is much bigger than the limit
        assert path.stat().st_size < SMALL_SEGMENTS + 200
    with EventLog.open_readonly(tmp_path) as log:
        assert list(log.read()) == stored


def test_reading_from_any_seq_returns_exactly_the_tail_across_segments(tmp_path: Path) -> None:
    stored = fill(tmp_path, 300, segment_bytes=SMALL_SEGMENTS)
    with EventLog.open(tmp_path, fsync="never", segment_bytes=SMALL_SEGMENTS) as log:
        for start in range(1, 302):
            assert [event.seq for event in log.read(start)] == list(range(start, 301))
        assert list(log.read(0)) == stored


def test_reading_from_a_seq_uses_the_sparse_index_not_a_scan_from_the_start(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never", segment_bytes=1 << 20) as log:
        log.append_many(bound(i) for i in range(6000))
        segment = log._segments[0]
        assert len(segment.sparse) > 3
        seq, offset = segment.start_for(5000)
        assert 1 < seq <= 5000 and offset > 64 * 1024
        assert next(iter(log.read(5000))).seq == 5000


def test_reopening_continues_the_numbering(tmp_path: Path) -> None:
    fill(tmp_path, 250)
    with EventLog.open(tmp_path, fsync="always", segment_bytes=SMALL_SEGMENTS) as log:
        assert log.next_seq == 251
        assert log.append(bound(251)).seq == 251
    with EventLog.open(tmp_path, fsync="always", segment_bytes=SMALL_SEGMENTS) as log:
        assert log.next_seq == 252
        assert [event.seq for event in log.read(249)] == [249, 250, 251]


def test_reopening_without_segment_indexes_rebuilds_them_by_scanning(tmp_path: Path) -> None:
    stored = fill(tmp_path, 300)
    for index in tmp_path.glob("*.idx"):
        index.unlink()
    with EventLog.open(tmp_path, fsync="never", segment_bytes=SMALL_SEGMENTS) as log:
        assert list(log.read()) == stored
    assert len(list(tmp_path.glob("*.idx"))) == len(segment_files(tmp_path)) - 1


def test_a_reader_sees_records_the_writer_appended_once_refreshed(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="always") as writer:
        writer.append(bound(1))
        reader = EventLog.open_readonly(tmp_path)
        writer.append(bound(2))
        assert [event.seq for event in reader.read()] == [1]
        reader.refresh()
        assert [event.seq for event in reader.read()] == [1, 2]
        reader.close()


def test_open_creates_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    with EventLog.open(target, fsync=FsyncPolicy.never()) as log:
        log.append(bound(1))
    assert segment_files(target)


def test_open_readonly_of_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EventLogError, match="no event log"):
        EventLog.open_readonly(tmp_path / "missing")


def test_close_is_idempotent_and_appending_after_close_is_an_error(tmp_path: Path) -> None:
    log = EventLog.open(tmp_path, fsync="10ms")
    log.append(bound(1))
    log.close()
    log.close()
    with pytest.raises(EventLogError, match="closed"):
        log.append(bound(2))
    with EventLog.open_readonly(tmp_path) as reader:
        assert [event.seq for event in reader.read()] == [1]


def test_a_readonly_log_refuses_appends(tmp_path: Path) -> None:
    fill(tmp_path, 1)
    with EventLog.open_readonly(tmp_path) as reader, pytest.raises(EventLogError, match="read-only"):
        reader.append(bound(2))


def test_interval_policy_makes_records_durable_without_an_explicit_sync(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="interval:5ms") as log:
        stored = log.append(bound(1))
        deadline = time.monotonic() + 5.0
        while log.durable_seq < stored.seq and time.monotonic() < deadline:
            time.sleep(0.001)
        assert log.durable_seq == stored.seq
        # the background flusher handed the record to the OS: another process can read it
        with EventLog.open_readonly(tmp_path) as reader:
            assert [event.seq for event in reader.read()] == [1]


def test_sync_makes_everything_appended_durable(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="never") as log:
        log.append_many([bound(1), bound(2)])
        log.sync()
        assert log.durable_seq == 2


# --------------------------------------------------------------------------- locking


def test_a_second_writer_gets_a_clear_error_while_the_first_holds_the_log(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="always"), pytest.raises(LogLockedError, match="already open for writing"):
        EventLog.open(tmp_path, fsync="always")
    with EventLog.open(tmp_path, fsync="always") as again:
        assert again.next_seq == 1


def test_a_reader_can_open_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="always") as writer:
        writer.append(bound(1))
        with EventLog.open_readonly(tmp_path) as reader:
            assert [event.seq for event in reader.read()] == [1]


# --------------------------------------------------------------------------- recovery


def test_a_torn_tail_is_cut_and_reported_with_segment_offset_and_bytes_dropped(tmp_path: Path) -> None:
    stored = fill(tmp_path, 10, segment_bytes=1 << 20)
    segment = segment_files(tmp_path)[-1]
    size = segment.stat().st_size
    with open(segment, "r+b") as handle:
        handle.truncate(size - 5)
    with capture_logs() as logs, EventLog.open(tmp_path, fsync="always") as log:
        assert list(log.read()) == stored[:9]
        assert log.next_seq == 10
        assert log.append(bound(10)).seq == 10
    torn = [entry for entry in logs if entry["event"] == "eventlog.torn_tail"]
    assert len(torn) == 1
    assert torn[0]["segment"] == str(segment)
    assert torn[0]["bytes_dropped"] == size - 5 - torn[0]["offset"]
    assert torn[0]["log_level"] == "warning"


def test_garbage_after_the_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    stored = fill(tmp_path, 4, segment_bytes=1 << 20)
    segment = segment_files(tmp_path)[-1]
    good_size = segment.stat().st_size
    with open(segment, "ab") as handle:
        handle.write(b"\x00" * 100)
    with capture_logs() as logs, EventLog.open(tmp_path, fsync="always") as log:
        assert list(log.read()) == stored
    assert segment.stat().st_size == good_size
    assert [(e["offset"], e["bytes_dropped"]) for e in logs if e["event"] == "eventlog.torn_tail"] == [
        (good_size, 100)
    ]


def test_a_readonly_open_stops_before_a_torn_tail_without_cutting_it(tmp_path: Path) -> None:
    stored = fill(tmp_path, 10, segment_bytes=1 << 20)
    segment = segment_files(tmp_path)[-1]
    with open(segment, "r+b") as handle:
        handle.truncate(segment.stat().st_size - 3)
    size = segment.stat().st_size
    with EventLog.open_readonly(tmp_path) as reader:
        assert list(reader.read()) == stored[:9]
    assert segment.stat().st_size == size


def test_a_damaged_record_followed_by_good_ones_is_corruption_naming_segment_and_offset(tmp_path: Path) -> None:
    fill(tmp_path, 10, segment_bytes=1 << 20)
    segment = segment_files(tmp_path)[-1]
    data = bytearray(segment.read_bytes())
    data[200] ^= 0x10
    segment.write_bytes(bytes(data))
    with pytest.raises(LogCorruptError) as caught:
        EventLog.open(tmp_path, fsync="always")
    assert caught.value.segment == segment
    assert 24 <= caught.value.offset <= 200
    assert str(segment) in str(caught.value)
    with pytest.raises(LogCorruptError):
        EventLog.open_readonly(tmp_path)
    # the lock is released after a failed open
    segment.write_bytes(bytes(data[: caught.value.offset]))
    with EventLog.open(tmp_path, fsync="always") as log:
        assert log.last_seq >= 1


def test_damage_in_an_earlier_segment_is_an_error_when_read_never_skipped(tmp_path: Path) -> None:
    fill(tmp_path, 300)
    first = segment_files(tmp_path)[0]
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0x01
    first.write_bytes(bytes(data))
    with EventLog.open(tmp_path, fsync="never", segment_bytes=SMALL_SEGMENTS) as log:
        with pytest.raises(LogCorruptError) as caught:
            list(log.read())
        assert caught.value.segment == first
        with pytest.raises(LogCorruptError):
            log.verify()
    for index in tmp_path.glob("*.idx"):
        index.unlink()
    with pytest.raises(LogCorruptError, match="not the last"):
        EventLog.open(tmp_path, fsync="never", segment_bytes=SMALL_SEGMENTS)


def test_a_truncated_earlier_segment_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    fill(tmp_path, 300)
    first = segment_files(tmp_path)[0]
    with open(first, "r+b") as handle:
        handle.truncate(first.stat().st_size - 10)
    with pytest.raises(LogCorruptError) as caught:
        EventLog.open(tmp_path, fsync="never", segment_bytes=SMALL_SEGMENTS)
    assert caught.value.segment == first


def test_a_missing_middle_segment_is_a_sequence_gap(tmp_path: Path) -> None:
    fill(tmp_path, 400)
    files = segment_files(tmp_path)
    files[1].unlink()
    with pytest.raises(LogCorruptError, match="sequence gap"):
        EventLog.open(tmp_path, fsync="never")


def test_a_missing_first_segment_is_an_error(tmp_path: Path) -> None:
    fill(tmp_path, 400)
    segment_files(tmp_path)[0].unlink()
    with pytest.raises(LogCorruptError, match=r"seq 1\.\.50 is missing and no snapshot"):
        EventLog.open_readonly(tmp_path)


def test_a_last_segment_with_a_torn_header_and_no_records_is_removed(tmp_path: Path) -> None:
    stored = fill(tmp_path, 300)
    files = segment_files(tmp_path)
    last_first = int(files[-1].name.removesuffix(".seg"))
    # a crash while starting a new segment: only part of its header reached the disk
    torn = tmp_path / f"{stored[-1].seq + 1:020d}.seg"
    torn.write_bytes(b"TSEVL")
    with capture_logs() as logs, EventLog.open(tmp_path, fsync="always", segment_bytes=SMALL_SEGMENTS) as log:
        assert not torn.exists()
        assert log.next_seq == stored[-1].seq + 1
        assert list(log.read(last_first)) == [e for e in stored if e.seq >= last_first]
        assert log.append(bound(999)).seq == stored[-1].seq + 1
    assert any(entry["event"] == "eventlog.torn_tail" and entry["offset"] == 0 for entry in logs)


def test_an_empty_last_segment_is_removed(tmp_path: Path) -> None:
    """A crash right after the new segment's file was created: the last segment is scanned mapped into
    memory, and an empty file, which cannot be mapped, is read instead and removed as a torn header."""
    stored = fill(tmp_path, 300)
    empty = tmp_path / f"{stored[-1].seq + 1:020d}.seg"
    empty.write_bytes(b"")
    with capture_logs() as logs, EventLog.open(tmp_path, fsync="always", segment_bytes=SMALL_SEGMENTS) as log:
        assert not empty.exists()
        assert log.append(bound(999)).seq == stored[-1].seq + 1
    assert [entry["bytes_dropped"] for entry in logs if entry["event"] == "eventlog.torn_tail"] == [0]


def test_an_empty_directory_opens_readonly_as_an_empty_log(tmp_path: Path) -> None:
    with EventLog.open_readonly(tmp_path) as log:
        assert log.next_seq == 1
        assert list(log.read()) == []


def test_appends_after_reopening_on_a_cut_tail_read_back_in_order(tmp_path: Path) -> None:
    fill(tmp_path, 3, segment_bytes=1 << 20)
    segment = segment_files(tmp_path)[-1]
    os.truncate(segment, segment.stat().st_size - 1)
    with EventLog.open(tmp_path, fsync="always") as log:
        log.append_many([bound(10), bound(11)])
    with EventLog.open_readonly(tmp_path) as log:
        assert [event.seq for event in log.read()] == [1, 2, 3, 4]


# --------------------------------------------------------------------------- failures


def test_append_many_stores_nothing_when_one_event_cannot_be_encoded(tmp_path: Path) -> None:
    unencodable = NodeUpserted(node=node("n1", labels={"bad": object()}))  # type: ignore[dict-item]
    with EventLog.open(tmp_path, fsync="always") as log:
        log.append(bound(1))
        with pytest.raises(EventLogError, match="NodeUpserted cannot be encoded"):
            log.append_many([bound(2), unencodable, bound(3)])
        assert log.next_seq == 2
        assert log.append(bound(2)).seq == 2
        assert [event.seq for event in log.read()] == [1, 2]


def test_after_a_failed_fsync_the_log_refuses_writes_until_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = EventLog.open(tmp_path, fsync="always")
    log.append(bound(1))

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(EventLogError, match="fsync failed"):
        log.append(bound(2))
    with pytest.raises(EventLogError, match="refuses writes after an I/O error"):
        log.append(bound(3))
    log.close()
    monkeypatch.undo()
    with EventLog.open(tmp_path, fsync="always") as again:
        assert again.append(bound(4)).seq == again.last_seq


def test_a_background_fsync_failure_is_raised_by_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = EventLog.open(tmp_path, fsync="interval:1ms")
    log.append(bound(1))

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    # The flusher may fail before or after the next append: whichever append comes after it must raise.
    deadline = time.monotonic() + 5.0
    seq = 2
    with pytest.raises(EventLogError, match="refuses writes after an I/O error"):
        while time.monotonic() < deadline:
            log.append(bound(seq))
            seq += 1
            time.sleep(0.001)
    log.close()


@pytest.mark.parametrize("chunk", [1, 7, 100, 4096])
def test_reading_in_small_chunks_gives_the_same_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    import events.log

    stored = fill(tmp_path, 120)
    monkeypatch.setattr(events.log, "_READ_CHUNK", chunk)
    with EventLog.open_readonly(tmp_path) as log:
        assert list(log.read()) == stored
        assert list(log.read(77)) == stored[76:]


def test_damage_is_reported_at_its_offset_whatever_the_read_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import events.log

    fill(tmp_path, 300)
    first = segment_files(tmp_path)[0]
    data = bytearray(first.read_bytes())
    data[1000] ^= 0x01
    first.write_bytes(bytes(data))
    offsets = set()
    for chunk in (5, 64, 1 << 20):
        monkeypatch.setattr(events.log, "_READ_CHUNK", chunk)
        with EventLog.open_readonly(tmp_path) as log, pytest.raises(LogCorruptError) as caught:
            list(log.read())
        offsets.add(caught.value.offset)
    assert len(offsets) == 1 and 24 <= offsets.pop() <= 1000


def test_appends_from_several_threads_get_unique_seqs_and_read_back_in_seq_order(tmp_path: Path) -> None:
    import threading

    results: list[list[Event]] = [[] for _ in range(4)]

    def worker(slot: int) -> None:
        for i in range(300):
            results[slot].append(log.append(bound(slot * 1000 + i)))

    with EventLog.open(tmp_path, fsync="interval:1ms", segment_bytes=SMALL_SEGMENTS) as log:
        threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        by_seq = {event.seq: event for events in results for event in events}
        assert sorted(by_seq) == list(range(1, 1201))
        assert list(log.read()) == [by_seq[seq] for seq in range(1, 1201)]
    with EventLog.open_readonly(tmp_path) as reader:
        assert reader.verify() == 1200


def test_under_interval_appends_never_wait_for_an_fsync_even_across_rotations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        release.wait(30)  # a disk that takes its time: only the flusher thread may wait for it
        real_fsync(fd)

    log = EventLog.open(tmp_path, fsync="interval:1ms", segment_bytes=SMALL_SEGMENTS)
    monkeypatch.setattr(os, "fsync", slow_fsync)
    stored: list[Event] = []
    appender = threading.Thread(target=lambda: stored.extend(log.append(bound(i)) for i in range(600)))
    appender.start()
    appender.join(20)
    finished_while_fsync_blocked = not appender.is_alive()
    release.set()
    appender.join(20)
    log.close()
    monkeypatch.undo()
    assert finished_while_fsync_blocked, "an append waited for an fsync"
    assert len(segment_files(tmp_path)) > 3
    # Every sealed segment got its index once the flusher caught up, and everything reads back.
    assert {p.name for p in tmp_path.glob("*.idx")} == {p.name + ".idx" for p in segment_files(tmp_path)[:-1]}
    with EventLog.open(tmp_path, fsync="never", segment_bytes=SMALL_SEGMENTS) as reopened:
        assert list(reopened.read()) == stored
        assert reopened.durable_seq == 600


def test_under_interval_records_of_sealed_segments_count_as_durable_only_once_synced(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="interval:1000s", segment_bytes=SMALL_SEGMENTS) as log:
        log.append_many(bound(i) for i in range(300))
        assert len(segment_files(tmp_path)) > 2
        assert log.durable_seq == 0  # rotation no longer fsyncs on the appender's thread
        log.sync()
        assert log.durable_seq == 300
        assert len(list(tmp_path.glob("*.idx"))) == len(segment_files(tmp_path)) - 1


def test_flush_to_os_lets_a_reader_see_buffered_records(tmp_path: Path) -> None:
    with EventLog.open(tmp_path, fsync="interval:1000s") as log:
        log.append_many(bound(i) for i in range(10))
        with EventLog.open_readonly(tmp_path) as before:
            assert before.last_seq == 0  # still in the writer's buffer
        log.flush_to_os()
        with EventLog.open_readonly(tmp_path) as after:
            assert after.last_seq == 10
        assert log.durable_seq == 0  # handed to the OS, not fsynced


def test_sync_from_another_thread_while_the_flusher_seals_segments_never_deadlocks(tmp_path: Path) -> None:
    log = EventLog.open(tmp_path, fsync="interval:0.1ms", segment_bytes=SMALL_SEGMENTS)
    stop = threading.Event()

    def syncing() -> None:
        while not stop.is_set():
            log.sync()

    def appending() -> None:
        for i in range(3000):
            log.append(bound(i))

    workers = [threading.Thread(target=syncing, daemon=True), threading.Thread(target=appending, daemon=True)]
    for worker in workers:
        worker.start()
    workers[1].join(60)
    stop.set()
    workers[0].join(60)
    hung = [worker.name for worker in workers if worker.is_alive()]
    assert not hung, f"threads stuck on the log's locks: {hung}"
    log.close()
    with EventLog.open_readonly(tmp_path) as reader:
        assert reader.last_seq == 3000


def checkpointed(directory: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> list[Event]:
    """A log of one segment whose checkpoint covers all but the last records."""
    monkeypatch.setattr(event_log_module, "_CHECKPOINT_BYTES", 4096)
    with EventLog.open(directory, fsync="always", segment_bytes=1 << 20) as log:
        stored = log.append_many(bound(i) for i in range(count))  # one fsync: a checkpoint of them all
        stored += [log.append(bound(count + i)) for i in range(3)]  # too little for another
    assert len(segment_files(directory)) == 1 and len(list(directory.glob("*.idx"))) == 1
    return stored


def test_opening_scans_only_what_the_active_segment_checkpoint_does_not_cover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = checkpointed(tmp_path, monkeypatch, 400)
    checked: list[int] = []
    record_at = event_log_module._record_at

    def counting(data: bytes | memoryview, offset: int, end: int) -> tuple[int, int] | str:
        checked.append(offset)
        return record_at(data, offset, end)

    monkeypatch.setattr(event_log_module, "_record_at", counting)
    with EventLog.open(tmp_path, fsync="always") as log:
        assert len(checked) <= 4  # the 3 records after the checkpoint, and the end
        assert log.last_seq == 403
        assert list(log.read()) == stored


def test_damage_under_a_checkpoint_is_still_found_when_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpointed(tmp_path, monkeypatch, 400)
    segment = segment_files(tmp_path)[0]
    data = bytearray(segment.read_bytes())
    data[len(data) // 3] ^= 0x10
    segment.write_bytes(bytes(data))
    with EventLog.open_readonly(tmp_path) as log, pytest.raises(LogCorruptError):
        list(log.read())


def test_a_torn_tail_after_a_checkpoint_is_cut_and_the_log_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = checkpointed(tmp_path, monkeypatch, 400)
    segment = segment_files(tmp_path)[0]
    with open(segment, "r+b") as handle:
        handle.truncate(segment.stat().st_size - 5)
    with EventLog.open(tmp_path, fsync="always") as log:
        assert list(log.read()) == stored[:-1]
        assert log.append(bound(9)).seq == 403


def test_a_checkpoint_past_the_end_of_the_file_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stored = checkpointed(tmp_path, monkeypatch, 400)
    segment = segment_files(tmp_path)[0]
    with open(segment, "r+b") as handle:
        handle.truncate(segment.stat().st_size // 2)  # shorter than the checkpoint says: scanned whole
    with EventLog.open(tmp_path, fsync="always") as log:
        recovered = list(log.read())
        assert recovered == stored[: len(recovered)] and 100 < len(recovered) < 400
