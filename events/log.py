"""The append-only event log on disk: segments, framing, checksums, fsync policy, torn-tail recovery.

Everything toposched learns and decides is appended here before it counts, and the state is a fold
over what this log returns, so the log's one job is to give back exactly the records it
acknowledged, in order, or to say loudly that it cannot. It never interprets events beyond
encoding them (`events.model`), and never guesses past damage: a torn tail is cut and reported,
anything else is a `LogCorruptError` naming the file and byte offset (a `LogDamagedError`, as is a
record that does not decode; `move_aside` keeps such a log for a post-mortem, see `daemon.cli.run`).

On-disk format (all integers little-endian). A log is a directory:

    LOCK                         flock(LOCK_EX) by the one writer; readers take no lock
    <first_seq:020d>.seg         segment files, named by the seq of their first record
    <first_seq:020d>.seg.idx     index of a sealed segment, or a checkpoint of the active one (a cache:
                                 rebuilt by scanning if bad)
    snapshot-<seq:020d>.snap     snapshots (see `events.snapshot`)

A segment starts with a 24-byte header:

    magic     8 bytes  b"TSEVLOG\\n"
    version   u16      1
    reserved  u16      0
    first_seq u64      must equal the number in the file name
    crc       u32      CRC-32 (zlib) of the 20 bytes before it

then holds records, back to back:

    magic     4 bytes  b"\\xa7REC"   (lets a scan find the next record after a damaged one)
    crc       u32      CRC-32 (zlib) of the 12 bytes length+seq followed by the payload
    length    u32      payload length
    seq       u64      sequence number; consecutive from 1 across the whole log
    payload   `encode_event(event)` (msgpack), the event carrying the same seq

Recovery rules, applied when a log is opened:
- The last segment is scanned record by record, from its checkpoint when it has one: after an fsync
  (the background one, an `always` append, `sync`, `close`) that finds it grown by 8 MiB, the writer
  records the active segment's index as of the fsynced end, so a restart scans the last few MiB
  instead of up to 64 MiB. The first bad record (wrong magic, length past the
  end, checksum mismatch, or header shorter than 20 bytes) is a torn tail if no valid record can be
  found anywhere after it: the writer truncates the file there and logs `eventlog.torn_tail` with
  segment, offset and bytes_dropped; a reader opened with `open_readonly` just stops before it. If a
  valid record does follow, the damage is in the middle of the log: `LogCorruptError`.
- A last segment whose header is torn and that holds no valid record is removed the same way.
- Earlier (sealed) segments must be whole: their index files give first/last seq and size without
  a scan; a missing or stale index means a full scan, where any bad record is `LogCorruptError`.
  Reads check every record's checksum and sequence number again, so damage in a sealed segment
  that opening did not scan is still an error the moment it is read, never skipped.
- Sequence numbers must run on without a gap across segments, from 1, or from S+1 when the log was
  pruned and a snapshot at S or later covers what went (see Retention). A log whose first segment
  starts past 1 with no such snapshot file is `LogCorruptError`. A log whose every segment is gone
  but whose snapshots remain goes on after the newest snapshot.

Retention (`prune`): segments whose every record is covered by the newest snapshot are history, kept
only for `toposched replay`; `prune(retention_bytes, retention_seconds)` deletes the oldest of them
while they hold more than `retention_bytes` or are older (by their last write) than
`retention_seconds`, never the segment being appended to, then deletes the snapshots whose tail went
with them. The log's `first_seq` moves up; replays start from the oldest snapshot kept
(`base_snapshot`). Segments go oldest first, so a crash mid-prune leaves a contiguous log.

Record size: `MAX_RECORD_BYTES` is the format's limit. `append(event, max_bytes=N)` refuses a record
over a smaller cap with `RecordTooLargeError` (nothing is written), so the caller can log something
smaller instead (`daemon.scheduling.journal` does).

Durability (`FsyncPolicy`): `always` writes and fsyncs before `append` returns; `interval:N ms`
buffers in memory and a background thread writes and fsyncs every N ms (the appender writes only
if 16 MiB are pending); `never` leaves it to the OS (records reach the OS when 256 KiB are
pending, and on `sync`, `read` and `close`). `close` always flushes and fsyncs. Under `interval` no
append ever waits for an fsync: a segment that fills up is handed to the background thread, which
fsyncs it, writes its index and closes it, and fsyncs the directory for the new one, before it
counts anything in them as durable.
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import mmap
import os
import re
import shutil
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Literal

import msgspec
import structlog

from events.model import Event, decode_event, encode_event, with_seq
from events.snapshot import SnapshotStore, file_contents, fsync_directory

SEGMENT_MAGIC = b"TSEVLOG\n"
SEGMENT_VERSION = 1
RECORD_MAGIC = b"\xa7REC"
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
MAX_RECORD_BYTES = 64 * 1024 * 1024

_SEGMENT_HEADER = struct.Struct("<8sHHQI")
_RECORD_HEADER = struct.Struct("<4sIIQ")
_RECORD_COVERED = struct.Struct("<IQ")
_RECORD_LENGTH = struct.Struct("<I")
_READ_CHUNK = 1024 * 1024
_SEGMENT_NAME = re.compile(r"^(\d{20})\.seg$")
_INDEX_STRIDE = 64 * 1024
_CHECKPOINT_BYTES = 8 * 1024 * 1024
_WRITE_THRESHOLD = 256 * 1024
# Under `interval` the flusher thread writes the buffer out every interval, so appends make no write
# call (a write can block for tens of ms while the kernel throttles a burst of dirty pages, e.g. a
# snapshot being written); only a buffer this large (a flusher stuck in a slow fsync) is written by
# the appender itself.
_DEFERRED_WRITE_LIMIT = 16 * 1024 * 1024
_LOCK_NAME = "LOCK"

_log = structlog.get_logger("events.log")


# --------------------------------------------------------------------------- errors


class EventLogError(Exception):
    """An expected failure of the event log (bad configuration, locked, corrupt, misuse)."""


class LogDamagedError(EventLogError):
    """What the log holds cannot be read back as it was written (damage, an undecodable record, a pruned
    log without its base snapshot). Reopening will not help; `move_aside` keeps it for a post-mortem."""


class LogCorruptError(LogDamagedError):
    """The log is damaged somewhere other than a torn tail; names the segment file and byte offset."""

    def __init__(self, segment: Path, offset: int, problem: str) -> None:
        super().__init__(f"event log corrupt in {segment} at offset {offset}: {problem}")
        self.segment = segment
        self.offset = offset
        self.problem = problem


class LogLockedError(EventLogError):
    """Another process (or another open log in this one) holds the log open for writing."""


class RecordTooLargeError(EventLogError):
    """An event whose record would exceed the cap it was appended with; nothing was written."""

    def __init__(self, event: Event, size: int, limit: int) -> None:
        super().__init__(f"{type(event).__name__} record of {size} bytes exceeds the {limit}-byte cap")
        self.event = event
        self.size = size
        self.limit = limit


class PruneResult(msgspec.Struct, frozen=True):
    """What one `prune` removed."""

    segments: int = 0
    bytes: int = 0
    snapshots: int = 0
    first_seq: int = 1  # the oldest record kept afterwards


# --------------------------------------------------------------------------- fsync policy

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$")


class FsyncPolicy(msgspec.Struct, frozen=True):
    """When appended records are forced to disk: `always`, every `interval_ms`, or `never`."""

    mode: Literal["always", "interval", "never"]
    interval_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.mode == "interval" and not self.interval_ms > 0:
            raise EventLogError(f"fsync interval must be positive, got {self.interval_ms} ms")

    @classmethod
    def always(cls) -> FsyncPolicy:
        return cls("always")

    @classmethod
    def never(cls) -> FsyncPolicy:
        return cls("never")

    @classmethod
    def interval(cls, milliseconds: float) -> FsyncPolicy:
        return cls("interval", float(milliseconds))

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        """Parse `always`, `never`, `interval:10ms`, `10ms`, `interval:0.5s` or `0.5s` (config files, CLI flags)."""
        value = text.strip().lower()
        if value in ("always", "never"):
            return cls.always() if value == "always" else cls.never()
        duration = value.removeprefix("interval:")
        match = _DURATION.match(duration)
        if match is None:
            raise EventLogError(
                f"invalid fsync policy {text!r}: expected 'always', 'never', 'interval:<N>ms' or '<N>ms'"
            )
        amount = float(match.group(1)) * (1000.0 if match.group(2) == "s" else 1.0)
        if amount <= 0:
            raise EventLogError(f"invalid fsync policy {text!r}: the interval must be positive")
        return cls.interval(amount)

    def __str__(self) -> str:
        if self.mode == "interval":
            return f"interval:{self.interval_ms:g}ms"
        return self.mode


# --------------------------------------------------------------------------- segments


class _SegmentIndex(msgspec.Struct, array_like=True, frozen=True):
    """Contents of a `.seg.idx` file: what opening needs to know about a sealed segment without a scan."""

    first_seq: int
    last_seq: int
    size: int
    sparse: list[tuple[int, int]]


_index_encoder = msgspec.msgpack.Encoder()
_index_decoder = msgspec.msgpack.Decoder(_SegmentIndex)


class _Segment:
    """What is known of one segment file: its seqs, the bytes holding valid records, a sparse index."""

    __slots__ = ("end", "first_seq", "last_seq", "path", "sparse")

    def __init__(self, path: Path, first_seq: int) -> None:
        self.path = path
        self.first_seq = first_seq
        self.last_seq = first_seq - 1
        self.end = _SEGMENT_HEADER.size
        # (seq, offset) of a record every ~_INDEX_STRIDE bytes, always starting with the first record.
        self.sparse: list[tuple[int, int]] = [(first_seq, _SEGMENT_HEADER.size)]

    @property
    def index_path(self) -> Path:
        return self.path.with_name(self.path.name + ".idx")

    def start_for(self, seq: int) -> tuple[int, int]:
        """(seq, offset) of the indexed record at or before `seq`."""
        position = bisect.bisect_right(self.sparse, (seq, 1 << 62)) - 1
        return self.sparse[max(position, 0)]


def _segment_name(first_seq: int) -> str:
    return f"{first_seq:020d}.seg"


def _segment_header(first_seq: int) -> bytes:
    covered = struct.pack("<8sHHQ", SEGMENT_MAGIC, SEGMENT_VERSION, 0, first_seq)
    return covered + struct.pack("<I", zlib.crc32(covered))


# Segment bytes as read (`bytes`) or mapped (`mmap`, the last segment at open: only the pages scanned are read).
_Bytes = bytes | memoryview | mmap.mmap


def _check_segment_header(data: _Bytes, first_seq: int) -> str | None:
    if len(data) < _SEGMENT_HEADER.size:
        return f"segment header is torn ({len(data)} of {_SEGMENT_HEADER.size} bytes)"
    magic, version, _reserved, seq, crc = _SEGMENT_HEADER.unpack_from(data, 0)
    if magic != SEGMENT_MAGIC:
        return "bad segment magic"
    if zlib.crc32(data[: _SEGMENT_HEADER.size - 4]) != crc:
        return "segment header checksum mismatch"
    if version != SEGMENT_VERSION:
        return f"unsupported segment version {version}"
    if seq != first_seq:
        return f"segment header says first seq {seq}, file name says {first_seq}"
    return None


def _frame(seq: int, payload: bytes) -> bytes:
    covered = _RECORD_COVERED.pack(len(payload), seq)
    crc = zlib.crc32(payload, zlib.crc32(covered))
    return _RECORD_HEADER.pack(RECORD_MAGIC, crc, len(payload), seq)


def _record_at(data: _Bytes, offset: int, end: int) -> tuple[int, int] | str:
    """(seq, payload length) of a valid record at `offset`, or why there is none."""
    if end - offset < _RECORD_HEADER.size:
        return "record header is torn"
    magic, crc, length, seq = _RECORD_HEADER.unpack_from(data, offset)
    if magic != RECORD_MAGIC:
        return "bad record magic"
    if length > MAX_RECORD_BYTES or offset + _RECORD_HEADER.size + length > end:
        return f"record length {length} runs past the end of the segment"
    if zlib.crc32(data[offset + 8 : offset + _RECORD_HEADER.size + length]) != crc:
        return "record checksum mismatch"
    return seq, length


@contextmanager
def _mapped(path: Path) -> Iterator[bytes | mmap.mmap]:
    """`file_contents`, the map closed on leaving (before the caller changes the file)."""
    data = file_contents(path)
    if isinstance(data, bytes):
        yield data
        return
    with data:
        yield data


def _valid_record_after(data: bytes | mmap.mmap, offset: int) -> int | None:
    """Offset of the first valid record that starts after `offset`, if any."""
    position = data.find(RECORD_MAGIC, offset + 1)
    while position != -1:
        if not isinstance(_record_at(data, position, len(data)), str):
            return position
        position = data.find(RECORD_MAGIC, position + 1)
    return None


class _Scan(msgspec.Struct):
    """Outcome of scanning a segment's bytes: the valid prefix, and the first bad record if any."""

    last_seq: int
    end: int
    sparse: list[tuple[int, int]]
    bad_offset: int | None = None
    problem: str = ""


def _scan_records(path: Path, data: _Bytes, first_seq: int, start: _SegmentIndex | None = None) -> _Scan:
    """Walk the records after the segment header (or after the prefix `start` vouches for); stops at the
    first bad one (checksum-level damage)."""
    if start is None:
        offset = _SEGMENT_HEADER.size
        expected = first_seq
        sparse: list[tuple[int, int]] = [(first_seq, offset)]
    else:
        offset = start.size
        expected = start.last_seq + 1
        sparse = list(start.sparse)
    size = len(data)
    next_mark = sparse[-1][1] + _INDEX_STRIDE
    while offset < size:
        record = _record_at(data, offset, size)
        if isinstance(record, str):
            return _Scan(expected - 1, offset, sparse, offset, record)
        seq, length = record
        if seq != expected:
            raise LogCorruptError(path, offset, f"record has seq {seq}, expected {expected}")
        if offset >= next_mark:
            sparse.append((seq, offset))
            next_mark = offset + _INDEX_STRIDE
        expected += 1
        offset += _RECORD_HEADER.size + length
    return _Scan(expected - 1, offset, sparse)


def _read_index(segment: _Segment) -> _SegmentIndex | None:
    try:
        data = segment.index_path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) < 4 or zlib.crc32(data[:-4]) != struct.unpack("<I", data[-4:])[0]:
        return None
    try:
        index = _index_decoder.decode(data[:-4])
    except msgspec.DecodeError:
        return None
    if index.first_seq != segment.first_seq or not index.sparse or index.sparse[0] != (
        segment.first_seq,
        _SEGMENT_HEADER.size,
    ):
        return None
    return index


def _write_index(segment: _Segment, index: _SegmentIndex | None = None) -> None:
    if index is None:
        index = _SegmentIndex(segment.first_seq, segment.last_seq, segment.end, segment.sparse)
    body = _index_encoder.encode(index)
    temporary = segment.index_path.with_name(segment.index_path.name + ".tmp")
    temporary.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    os.replace(temporary, segment.index_path)


# --------------------------------------------------------------------------- the log


class EventLog:
    """An append-only log of events in a directory. Open with `EventLog.open` or `EventLog.open_readonly`.

    Thread-safe: appends, syncs and reads may come from several threads (the interval flusher is one).
    """

    def __init__(
        self,
        directory: Path,
        *,
        readonly: bool,
        fsync: FsyncPolicy,
        segment_bytes: int,
        snapshots_kept: int,
    ) -> None:
        if segment_bytes < 4096:
            raise EventLogError(f"segment_bytes must be at least 4096, got {segment_bytes}")
        self.directory = directory
        self.readonly = readonly
        self.fsync_policy = fsync
        self.segment_bytes = segment_bytes
        self._snapshots = SnapshotStore(directory, keep=snapshots_kept)
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._segments: list[_Segment] = []
        self._first_seqs: list[int] = []
        self._next_seq = 1
        self._durable_seq = 0
        self._buffer = bytearray()
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._closed = False
        self._flusher: threading.Thread | None = None
        self._stop = threading.Event()
        self._failure: OSError | None = None
        # Called with the seconds each fsync took (from the flusher thread too): for metrics. Must not raise.
        self.fsync_observer: Callable[[float], None] | None = None
        self._failure_reported = False
        self._appended_bytes = 0
        # Sealed segments whose fsync, index and close rotation left to the flusher (`interval` only),
        # and how many segments were created / have their directory entry fsynced.
        self._sealing: list[tuple[_Segment, int]] = []
        self._rotations = 0
        self._directory_synced = 0
        self._checkpointed: dict[int, int] = {}  # active segment's first seq -> end its checkpoint covers
        self._write_threshold = _DEFERRED_WRITE_LIMIT if fsync.mode == "interval" else _WRITE_THRESHOLD

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        fsync: FsyncPolicy | str,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        snapshots_kept: int = 2,
    ) -> EventLog:
        """Open (creating if missing) the log for writing: takes the lock, cuts a torn tail, checks the rest."""
        policy = FsyncPolicy.parse(fsync) if isinstance(fsync, str) else fsync
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        log = cls(path, readonly=False, fsync=policy, segment_bytes=segment_bytes, snapshots_kept=snapshots_kept)
        log._take_lock()
        try:
            log._discover()
            log._open_active()
        except BaseException:
            log._release_lock()
            raise
        if policy.mode == "interval":
            log._flusher = threading.Thread(target=log._flush_loop, name=f"eventlog-fsync:{path}", daemon=True)
            log._flusher.start()
        return log

    @classmethod
    def open_readonly(cls, directory: str | os.PathLike[str]) -> EventLog:
        """Open an existing log to read it, even while a writer holds it; stops before a torn tail, cuts nothing.

        The reader sees the records present when it was opened; `refresh()` picks up newer ones.
        """
        path = Path(directory)
        if not path.is_dir():
            raise EventLogError(f"no event log at {path}: not a directory")
        log = cls(
            path,
            readonly=True,
            fsync=FsyncPolicy.never(),
            segment_bytes=DEFAULT_SEGMENT_BYTES,
            snapshots_kept=2,
        )
        log._discover()
        return log

    def _take_lock(self) -> None:
        fd = os.open(self.directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogLockedError(
                f"event log {self.directory} is already open for writing (lock {self.directory / _LOCK_NAME} is held);"
                " use EventLog.open_readonly to read it"
            ) from None
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def refresh(self) -> None:
        """Read-only logs: look again at the directory to see records appended since opening."""
        if not self.readonly:
            raise EventLogError("refresh() is for read-only logs; a writer always sees its own records")
        with self._lock:
            self._segments = []
            self._first_seqs = []
            self._discover()

    def _discover(self) -> None:
        names = sorted(
            int(match.group(1)) for entry in os.listdir(self.directory) if (match := _SEGMENT_NAME.match(entry))
        )
        snapshots = self._snapshots.sequence_numbers()
        if names and names[0] != 1 and not any(seq >= names[0] - 1 for seq in snapshots):
            raise LogCorruptError(
                self.directory / _segment_name(names[0]), 0,
                f"the log starts at this segment, but seq 1..{names[0] - 1} is missing and no snapshot"
                f" at seq {names[0] - 1} or later covers it",
            )
        for position, first_seq in enumerate(names):
            segment = _Segment(self.directory / _segment_name(first_seq), first_seq)
            last = position == len(names) - 1
            if self._segments and self._segments[-1].last_seq + 1 != first_seq:
                previous = self._segments[-1]
                raise LogCorruptError(
                    segment.path,
                    0,
                    f"sequence gap: previous segment {previous.path.name} ends at seq {previous.last_seq},"
                    f" this one starts at {first_seq}",
                )
            if last:
                if not self._load_last(segment):
                    continue
            else:
                self._load_sealed(segment)
            self._segments.append(segment)
            self._first_seqs.append(first_seq)
        if self._segments:
            self._next_seq = self._segments[-1].last_seq + 1
        elif snapshots:
            # Every segment was pruned (or the only one left was a torn, empty header): what the log held
            # is in the newest snapshot, which was written after the log was durable up to its seq.
            self._next_seq = snapshots[-1] + 1
        self._durable_seq = self._next_seq - 1

    def _load_sealed(self, segment: _Segment) -> None:
        index = _read_index(segment)
        if index is not None and os.stat(segment.path).st_size == index.size:
            segment.last_seq = index.last_seq
            segment.end = index.size
            segment.sparse = index.sparse
            if index.last_seq < index.first_seq:
                raise LogCorruptError(segment.path, 0, "a sealed segment holds no records")
            return
        data = segment.path.read_bytes()
        problem = _check_segment_header(data, segment.first_seq)
        if problem is not None:
            raise LogCorruptError(segment.path, 0, problem)
        scan = _scan_records(segment.path, data, segment.first_seq)
        if scan.bad_offset is not None:
            raise LogCorruptError(segment.path, scan.bad_offset, scan.problem + " (in a segment that is not the last)")
        if scan.last_seq < segment.first_seq:
            raise LogCorruptError(segment.path, _SEGMENT_HEADER.size, "a segment that is not the last holds no records")
        segment.last_seq = scan.last_seq
        segment.end = scan.end
        segment.sparse = scan.sparse
        if not self.readonly:
            _write_index(segment)

    def _load_last(self, segment: _Segment) -> bool:
        """Scan the last segment, cutting (writer) or stopping before (reader) a torn tail; False if it is gone."""
        # Scanned mapped, not read whole: past a checkpoint only the tail is touched (reading all of a
        # 64 MiB segment took ~35 ms of a restart). Nothing is changed on disk until the map is closed.
        checkpoint: _SegmentIndex | None = None
        scan: _Scan | None = None
        following: int | None = None
        with _mapped(segment.path) as data:
            size = len(data)
            problem = _check_segment_header(data, segment.first_seq)
            if problem is not None:
                following = _valid_record_after(data, -1)
            else:
                checkpoint = _read_index(segment)
                if checkpoint is not None and not _SEGMENT_HEADER.size <= checkpoint.size <= size:
                    checkpoint = None  # written for a longer file than this one: no use
                # The prefix a checkpoint vouches for was fsynced before the checkpoint was written; like a
                # sealed segment's, it is checked again record by record whenever it is read.
                scan = _scan_records(segment.path, data, segment.first_seq, checkpoint)
                if scan.bad_offset is not None:
                    following = _valid_record_after(data, scan.bad_offset)
        if scan is None:  # the header is bad
            if following is not None:
                raise LogCorruptError(segment.path, 0, str(problem))
            if not self.readonly:
                os.unlink(segment.path)
                segment.index_path.unlink(missing_ok=True)
                fsync_directory(self.directory)
                _log.warning(
                    "eventlog.torn_tail",
                    segment=str(segment.path),
                    offset=0,
                    bytes_dropped=size,
                    problem=problem,
                    action="removed segment",
                )
            return False
        if scan.bad_offset is not None:
            if following is not None:
                raise LogCorruptError(
                    segment.path,
                    scan.bad_offset,
                    f"{scan.problem}, followed by a valid record at offset {following}",
                )
            if not self.readonly:
                with open(segment.path, "r+b") as handle:
                    handle.truncate(scan.bad_offset)
                    os.fsync(handle.fileno())
                _log.warning(
                    "eventlog.torn_tail",
                    segment=str(segment.path),
                    offset=scan.bad_offset,
                    bytes_dropped=size - scan.bad_offset,
                    problem=scan.problem,
                    last_seq=scan.last_seq,
                )
        segment.last_seq = scan.last_seq
        segment.end = scan.end
        segment.sparse = scan.sparse
        if not self.readonly and checkpoint is not None and scan.end < checkpoint.size:
            segment.index_path.unlink(missing_ok=True)  # vouches for bytes that were cut
        return True

    def _open_active(self) -> None:
        if not self._segments:
            return
        active = self._segments[-1]
        self._fd = os.open(active.path, os.O_WRONLY | os.O_APPEND)

    # ------------------------------------------------------------------ properties

    @property
    def next_seq(self) -> int:
        """The seq the next appended event gets."""
        return self._next_seq

    @property
    def first_seq(self) -> int:
        """The seq of the oldest record kept: 1, or past it once pruned (`next_seq` when nothing is kept)."""
        return self._segments[0].first_seq if self._segments else self._next_seq

    @property
    def snapshots_kept(self) -> int:
        """How many snapshots are kept (the newest ones)."""
        return self._snapshots.keep

    @property
    def appended_bytes(self) -> int:
        """Bytes of records appended through this open log (framing included), for size-based triggers."""
        return self._appended_bytes

    @property
    def last_seq(self) -> int:
        """The seq of the newest record (0 for an empty log)."""
        return self._next_seq - 1

    @property
    def durable_seq(self) -> int:
        """Every record up to this seq has been fsynced (or was on disk when the log was opened)."""
        return self._durable_seq

    # ------------------------------------------------------------------ appending

    def append(self, event: Event, *, max_bytes: int = MAX_RECORD_BYTES) -> Event:
        """Store `event` with the next seq; returns the stored event. Durable on return under `always`.

        A record over `max_bytes` is refused with `RecordTooLargeError` and nothing is written.
        """
        with self._lock:
            self._check_writable()
            stored = with_seq(event, self._next_seq)
            self._add_locked(stored.seq, _encode_checked(stored, max_bytes))
            if self.fsync_policy.mode == "always":
                self._write_out()
                self._fsync_locked()
            elif len(self._buffer) >= self._write_threshold:
                self._write_out()
        return stored

    def append_many(self, events: Iterable[Event], *, max_bytes: int = MAX_RECORD_BYTES) -> list[Event]:
        """Store several events with consecutive seqs, all or none; one fsync for all of them under `always`.
        One record over `max_bytes` refuses them all with `RecordTooLargeError`."""
        with self._lock:
            self._check_writable()
            first = self._next_seq
            stored = [with_seq(event, seq) for seq, event in enumerate(events, start=first)]
            payloads = [_encode_checked(event, max_bytes) for event in stored]
            for seq, payload in enumerate(payloads, start=first):
                self._add_locked(seq, payload)
                if len(self._buffer) >= self._write_threshold:
                    self._write_out()
            if self.fsync_policy.mode == "always":
                self._write_out()
                self._fsync_locked()
        return stored

    def _add_locked(self, seq: int, payload: bytes) -> None:
        segments = self._segments
        if not segments or (segments[-1].end >= self.segment_bytes and segments[-1].last_seq >= segments[-1].first_seq):
            self._rotate(seq)
        active = self._segments[-1]
        offset = active.end
        if offset - active.sparse[-1][1] >= _INDEX_STRIDE:
            active.sparse.append((seq, offset))
        buffer = self._buffer
        buffer += _frame(seq, payload)
        buffer += payload
        active.end = offset + _RECORD_HEADER.size + len(payload)
        self._appended_bytes += _RECORD_HEADER.size + len(payload)
        active.last_seq = seq
        self._next_seq = seq + 1

    def _rotate(self, first_seq: int) -> None:
        """Seal the active segment and start a new one whose first record is `first_seq` (lock held).

        Under `interval`, sealing (fsync, index, close) and the new file's directory entry are left to the
        flusher thread, so an append never waits for an fsync; under `always` and `never`, sealing is
        done here (with fsyncs under `always` only).
        """
        deferred = self.fsync_policy.mode == "interval"
        with self._failing_on_os_error("rotate segments"):
            if self._fd is not None:
                self._write_out()
                if deferred:
                    self._sealing.append((self._segments[-1], self._fd))
                else:
                    with self._sync_lock:
                        if self.fsync_policy.mode != "never":
                            os.fsync(self._fd)
                            self._durable_seq = self._segments[-1].last_seq
                        os.close(self._fd)
                        _write_index(self._segments[-1])
                self._fd = None
            segment = _Segment(self.directory / _segment_name(first_seq), first_seq)
            fd = os.open(segment.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            try:
                _write_all(fd, _segment_header(first_seq))
                if self.fsync_policy.mode == "always":
                    os.fsync(fd)
                    fsync_directory(self.directory)
            except BaseException:
                os.close(fd)
                raise
            self._rotations += 1
            if self.fsync_policy.mode == "always":
                self._directory_synced = self._rotations
            self._fd = fd
            self._segments.append(segment)
            self._first_seqs.append(first_seq)

    def _write_out(self) -> None:
        """Hand the buffered records to the OS (lock held)."""
        if self._buffer and self._fd is not None:
            with self._failing_on_os_error("write"):
                _write_all(self._fd, self._buffer)
            self._buffer = bytearray()

    def _fsync_locked(self) -> None:
        """Make everything appended durable, sealing what rotation left to do (main lock held)."""
        with self._sync_lock, self._failing_on_os_error("fsync"):
            for segment, fd in self._sealing:
                self._timed_fsync(fd)
                os.close(fd)
                _write_index(segment)
            self._sealing.clear()
            if self._fd is not None:
                self._timed_fsync(self._fd)
            if self._rotations > self._directory_synced:
                fsync_directory(self.directory)
                self._directory_synced = self._rotations
            if self._fd is not None and self._segments:
                active = self._segments[-1]
                self._checkpoint(active, active.end, active.last_seq, list(active.sparse))
        self._durable_seq = self._next_seq - 1

    def _checkpoint(self, segment: _Segment | None, end: int, last_seq: int, sparse: list[tuple[int, int]]) -> None:
        """After an fsync covering the active segment up to `end`: once it grew `_CHECKPOINT_BYTES` since the
        last one, write its index as of `end` (sync lock held), so opening scans only what came after."""
        if segment is None or last_seq < segment.first_seq or end - self._checkpointed.get(segment.first_seq, 0) < (
                _CHECKPOINT_BYTES):
            return
        try:
            _write_index(segment, _SegmentIndex(segment.first_seq, last_seq, end, sparse))
        except OSError as error:  # only a shortcut for the next open: without it, that open scans more
            _log.warning("eventlog.checkpoint_failed", segment=str(segment.path), error=str(error))
            return
        self._checkpointed = {segment.first_seq: end}

    def _timed_fsync(self, fd: int) -> None:
        started = time.perf_counter()
        os.fsync(fd)
        if self.fsync_observer is not None:
            self.fsync_observer(time.perf_counter() - started)

    @contextmanager
    def _failing_on_os_error(self, action: str) -> Iterator[None]:
        """An I/O error leaves the file in an unknown state: refuse all further writes (reopen to recover).

        Retrying is not safe: part of a write may be on disk, and after a failed fsync the kernel may
        have dropped the dirty pages it could not write while reporting the next fsync as fine.
        """
        try:
            yield
        except OSError as error:
            self._failure = error
            self._failure_reported = threading.current_thread() is not self._flusher
            _log.error("eventlog.io_failed", directory=str(self.directory), action=action, error=str(error))
            raise EventLogError(f"event log {self.directory}: {action} failed: {error}; reopen the log") from error

    def sync(self) -> None:
        """Write out and fsync everything appended so far."""
        self._check_failure()
        self._flush()

    def _flush(self) -> None:
        """Write out, seal what rotation left, fsync: the fsyncs outside the main lock, so appends go on."""
        with self._lock:
            if self.readonly or self._closed or self._failure is not None:
                return
            self._write_out()
            upto = self._next_seq - 1
            # Lock order: main lock, then sync lock, never the other way. The sync lock keeps the active fd
            # open meanwhile (inline rotation closes it under that lock), and only its holder closes sealing
            # fds: so what is read here, once it is held, is still open below (another `_flush` that held it
            # first has finished with its share).
            self._sync_lock.acquire()
            fd = self._fd
            sealing = list(self._sealing)
            rotations = self._rotations
            active = self._segments[-1] if self._segments else None
            active_end = active.end if active is not None else 0
            active_last = active.last_seq if active is not None else 0
            active_sparse = list(active.sparse) if active is not None else []
            if upto <= self._durable_seq and not sealing and rotations <= self._directory_synced:
                self._sync_lock.release()
                return
        try:
            with self._failing_on_os_error("fsync"):
                for _segment, old_fd in sealing:
                    self._timed_fsync(old_fd)
                if fd is not None:
                    self._timed_fsync(fd)
                if rotations > self._directory_synced:
                    fsync_directory(self.directory)
            # Still under the sync lock only (taking the main lock here would invert the lock order): the
            # sealing list changes only by appends (main lock) and here or in `_fsync_locked` (both under
            # the sync lock), so its first entries are these.
            for _segment, old_fd in sealing:
                os.close(old_fd)
            del self._sealing[: len(sealing)]
            self._directory_synced = max(self._directory_synced, rotations)
            with self._failing_on_os_error("write a segment index"):
                for segment, _fd in sealing:
                    _write_index(segment)
                if fd is not None:
                    self._checkpoint(active, active_end, active_last, active_sparse)
            self._durable_seq = max(self._durable_seq, upto)
        finally:
            self._sync_lock.release()

    def flush_to_os(self) -> None:
        """Hand every buffered record to the OS (no fsync): from now on a reader of the files sees them."""
        with self._lock:
            self._check_writable()
            with self._failing_on_os_error("write"):
                self._write_out()

    def _flush_loop(self) -> None:
        interval = self.fsync_policy.interval_ms / 1000.0
        while not self._stop.wait(interval):
            try:
                self._flush()
            except EventLogError:  # recorded in self._failure; the next append/sync/close raises it
                return

    def _check_failure(self) -> None:
        if self._failure is not None:
            self._failure_reported = True
            raise EventLogError(
                f"event log {self.directory} refuses writes after an I/O error ({self._failure}); reopen the log"
            ) from self._failure

    def _check_writable(self) -> None:
        if self._closed:
            raise EventLogError(f"event log {self.directory} is closed")
        if self.readonly:
            raise EventLogError(f"event log {self.directory} was opened read-only")
        self._check_failure()

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush, fsync and release the lock. Idempotent."""
        if self._closed:
            return
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
            self._flusher = None
        with self._lock:
            if self._closed:
                return
            try:
                if not self.readonly and self._fd is not None and self._failure is None:
                    self._write_out()
                    self._fsync_locked()
            finally:
                for _segment, fd in self._sealing:
                    os.close(fd)
                self._sealing.clear()
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
                self._release_lock()
                self._closed = True
        if not self._failure_reported:
            self._check_failure()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    def read(self, from_seq: int = 1) -> Iterator[Event]:
        """Events from `from_seq` (or the first one after it that exists) to the newest, in order."""
        raw = self.read_raw(from_seq)
        return _decode_all(raw)

    def read_raw(self, from_seq: int = 1) -> Iterator[tuple[int, bytes]]:
        """(seq, payload) from `from_seq` on: checked but not decoded, for fast replays.

        Finds the segment by its name and the record by the segment's sparse index; never scans the
        log from the start. Sees the records present when called.
        """
        with self._lock:
            if self._closed:
                raise EventLogError(f"event log {self.directory} is closed")
            self._write_out()
            plan: list[tuple[Path, int, int, int, int]] = []
            position = max(bisect.bisect_right(self._first_seqs, from_seq) - 1, 0)
            for segment in self._segments[position:]:
                if segment.last_seq < max(from_seq, segment.first_seq):
                    continue
                start_seq, start_offset = segment.start_for(from_seq)
                plan.append((segment.path, segment.first_seq, start_seq, start_offset, segment.end))
            last_seq = self._next_seq - 1
        return _read_segments(plan, from_seq, last_seq)

    def verify(self) -> int:
        """Read every record, checking checksums and sequence numbers; returns how many there are."""
        count = 0
        for _ in self.read_raw(1):
            count += 1
        return count

    # ------------------------------------------------------------------ snapshots

    def write_snapshot(self, seq: int, payload: bytes) -> None:
        """Store an opaque blob covering events up to and including `seq` (atomically; keeps the newest K).

        Makes the log durable up to `seq` first, so a snapshot never covers records a crash could lose.
        """
        self._check_writable()
        if not 0 < seq <= self.last_seq:
            raise EventLogError(f"snapshot seq {seq} is outside the log (1..{self.last_seq})")
        if self._durable_seq < seq:
            self.sync()
        self._snapshots.write(seq, payload)

    def latest_snapshot(self, *, at_most: int | None = None) -> tuple[int, memoryview] | None:
        """(seq, payload) of the newest valid snapshot the log can go on from, not past `at_most`; None if none.

        Usable means: not ahead of the log, and not older than its first record (a snapshot whose tail
        was pruned cannot be folded forward).
        """
        for seq in self._snapshots.sequence_numbers():
            if seq > self.last_seq:
                # e.g. the log lost its tail some other way than a crash: the snapshot cannot be trusted
                _log.warning("eventlog.snapshot_ahead_of_log", snapshot_seq=seq, log_last_seq=self.last_seq)
        limit = self.last_seq if at_most is None else min(at_most, self.last_seq)
        return self._snapshots.latest(at_least=self.first_seq - 1, at_most=limit)

    def base_snapshot(self, *, at_most: int | None = None) -> tuple[int, memoryview] | None:
        """Where a fold of the whole log starts: None for an unpruned log (fold from seq 1), else the
        oldest valid snapshot at or after the pruned prefix (not past `at_most`).

        Raises `EventLogError` when the log was pruned and no such snapshot can be read.
        """
        base = self.first_seq - 1
        if base <= 0:
            return None
        limit = self.last_seq if at_most is None else min(at_most, self.last_seq)
        if limit < base:
            raise EventLogError(
                f"event log {self.directory} holds seq {self.first_seq}..{self.last_seq} (older events were pruned);"
                f" seq {limit} is before that")
        found = self._snapshots.oldest(at_least=base, at_most=limit)
        if found is None:
            raise LogDamagedError(
                f"event log {self.directory} was pruned up to seq {base}, and no readable snapshot at seq {base}"
                f"..{limit} is left to start from")
        return found

    # ------------------------------------------------------------------ retention

    def prune(self, *, retention_bytes: int, retention_seconds: float, now: float | None = None,
              snapshot_seq: int | None = None) -> PruneResult:
        """Delete history beyond the retention (see the module docstring); returns what went.

        `now` is wall-clock seconds (`time.time()` when None), compared with the segments' mtimes.
        `snapshot_seq` is the newest snapshot when the caller has just written it: otherwise the newest
        valid one is read and checked (the whole file) to find it.
        """
        self._check_writable()
        moment = time.time() if now is None else now
        if snapshot_seq is None:
            newest = self._snapshots.latest(at_least=self.first_seq - 1, at_most=self.last_seq)
            if newest is None:
                return PruneResult(first_seq=self.first_seq)
            snapshot_seq = newest[0]
        covered_to = snapshot_seq
        removed: list[_Segment] = []
        removed_bytes = 0
        with self._lock:
            # Candidates: sealed segments wholly covered by the newest snapshot, oldest first, up to the
            # first one the flusher has not finished sealing.
            unsealed = {id(segment) for segment, _fd in self._sealing}
            history: list[_Segment] = []
            for candidate in self._segments[:-1]:
                if candidate.last_seq > covered_to or id(candidate) in unsealed:
                    break
                history.append(candidate)
            kept_bytes = sum(segment.end for segment in history)
            for segment in history:
                try:
                    modified = os.stat(segment.path).st_mtime
                except FileNotFoundError:
                    modified = 0.0
                if kept_bytes <= retention_bytes and moment - modified <= retention_seconds:
                    break
                with self._failing_on_os_error("prune"):
                    os.unlink(segment.path)
                    segment.index_path.unlink(missing_ok=True)
                kept_bytes -= segment.end
                removed_bytes += segment.end
                removed.append(segment)
            if removed:
                del self._segments[: len(removed)]
                del self._first_seqs[: len(removed)]
            first_seq = self.first_seq
        dropped = self._snapshots.drop_older_than(first_seq - 1)
        if removed or dropped:
            fsync_directory(self.directory)
            _log.info("eventlog.pruned", directory=str(self.directory), segments=len(removed), bytes=removed_bytes,
                      snapshots=dropped, first_seq=first_seq)
        return PruneResult(len(removed), removed_bytes, dropped, first_seq)


# --------------------------------------------------------------------------- moving a damaged log aside


DAMAGED_INFIX = ".damaged-"


def move_aside(directory: str | os.PathLike[str], *, stamp: str, keep: int = 2) -> Path:
    """Rename a log directory to `<directory>.damaged-<stamp>` (a sibling, so nothing is copied) and keep
    only the newest `keep` of those; returns the new path. Takes the log's lock while it does, so a log
    another process has open is never moved (`LogLockedError`).

    For a directory that cannot be renamed (a mount point), its entries move into
    `<directory>/damaged-<stamp>/` instead: segment and snapshot names are matched exactly, so a new log
    in the same directory never reads them.
    """
    path = Path(directory)
    holder = EventLog(path, readonly=True, fsync=FsyncPolicy.never(), segment_bytes=DEFAULT_SEGMENT_BYTES,
                      snapshots_kept=1)
    holder._take_lock()
    try:
        target = path.with_name(path.name + DAMAGED_INFIX + stamp)
        try:
            os.rename(path, target)
            fsync_directory(path.parent)
            kept = sorted(path.parent.glob(path.name + DAMAGED_INFIX + "*"))
        except OSError as error:
            if error.errno not in (errno.EBUSY, errno.EXDEV, errno.EACCES, errno.EPERM):
                raise
            target = path / (DAMAGED_INFIX.lstrip(".") + stamp)
            target.mkdir()
            for entry in os.listdir(path):
                if entry != _LOCK_NAME and not entry.startswith(DAMAGED_INFIX.lstrip(".")):
                    os.rename(path / entry, target / entry)
            fsync_directory(path)
            kept = sorted(path.glob(DAMAGED_INFIX.lstrip(".") + "*"))
    finally:
        holder._release_lock()
    for older in kept[: max(len(kept) - keep, 0)]:
        shutil.rmtree(older, ignore_errors=True)
    return target


# --------------------------------------------------------------------------- reading, outside the lock


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_segments(
    plan: list[tuple[Path, int, int, int, int]], from_seq: int, last_seq: int
) -> Iterator[tuple[int, bytes]]:
    """Records of the planned (path, first seq, start seq, start offset, end offset) ranges, checked.

    Reads in chunks of `_READ_CHUNK` bytes, so a reader that stops early reads little.
    """
    for path, first_seq, start_seq, start_offset, end in plan:
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed by the `with` right below
        except FileNotFoundError:
            raise EventLogError(
                f"segment {path} was pruned by the log's writer while it was being read; read again (the log now"
                " starts later)"
            ) from None
        with handle:
            problem = _check_segment_header(handle.read(_SEGMENT_HEADER.size), first_seq)
            if problem is not None:
                raise LogCorruptError(path, 0, problem)
            handle.seek(start_offset)
            data = b""
            base = start_offset  # file offset of data[0]
            offset = 0
            expected = start_seq
            while base + offset < end and expected <= last_seq:
                record = _record_at(data, offset, min(len(data), end - base))
                if isinstance(record, str):
                    if base + len(data) >= end:
                        raise LogCorruptError(path, base + offset, record)
                    # Perhaps only cut by the chunk boundary: load the rest of the record (or a chunk) and retry.
                    available = len(data) - offset
                    wanted = _RECORD_HEADER.size
                    if available >= _RECORD_HEADER.size:
                        wanted += min(_RECORD_LENGTH.unpack_from(data, offset + 8)[0], MAX_RECORD_BYTES)
                    more = handle.read(min(end - base - len(data), max(_READ_CHUNK, wanted - available)))
                    if not more:
                        raise LogCorruptError(path, base + len(data), "segment is shorter than when it was opened")
                    data = data[offset:] + more
                    base += offset
                    offset = 0
                    continue
                seq, length = record
                if seq != expected:
                    raise LogCorruptError(path, base + offset, f"record has seq {seq}, expected {expected}")
                body = offset + _RECORD_HEADER.size
                if seq >= from_seq:
                    yield seq, data[body : body + length]
                expected += 1
                offset = body + length


def _encode_checked(event: Event, max_bytes: int) -> bytes:
    try:
        payload = encode_event(event)
    except (TypeError, msgspec.EncodeError) as error:
        raise EventLogError(f"{type(event).__name__} cannot be encoded: {error}") from error
    if len(payload) > min(max_bytes, MAX_RECORD_BYTES):
        raise RecordTooLargeError(event, len(payload), min(max_bytes, MAX_RECORD_BYTES))
    return payload


def _decode_all(raw: Iterator[tuple[int, bytes]]) -> Iterator[Event]:
    for seq, payload in raw:
        try:
            event = decode_event(payload)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            problem = f"record seq {seq} has a valid checksum but does not decode as an event: {error}"
            raise LogDamagedError(problem) from error
        yield event

