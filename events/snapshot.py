"""Snapshot files next to the event log: opaque blobs that cover the log up to a sequence number.

A snapshot lets a restart load the folded state and fold only the log's tail. This module owns the
file format and the atomic write; it decides nothing about what the payload holds (`state/` encodes
and decodes it) and never reads or writes log segments.

File `snapshot-<seq:020d>.snap`, little-endian:

    magic     8 bytes  b"TSSNAP\\r\\n"
    version   u16      1
    reserved  u16      0
    seq       u64      the last event sequence number the snapshot covers
    length    u64      payload length in bytes
    crc       u32      CRC-32 (zlib) of the 20 bytes version..length followed by the payload
    payload   length bytes

A write goes to a temporary file that is fsynced, renamed into place and followed by an fsync of
the directory, so a crash leaves either the old set of snapshots or the new one, never half a file
under a snapshot name. A snapshot whose header, length or checksum is wrong is reported in one log
line and skipped in favour of the next older one.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import structlog

SNAPSHOT_MAGIC = b"TSSNAP\r\n"
SNAPSHOT_VERSION = 1
_HEADER = struct.Struct("<8sHHQQI")
_NAME = re.compile(r"^snapshot-(\d{20})\.snap$")
_SYNC_EVERY = 8 * 1024 * 1024

_log = structlog.get_logger("events.snapshot")


def snapshot_name(seq: int) -> str:
    return f"snapshot-{seq:020d}.snap"


def encode_snapshot(seq: int, payload: bytes) -> bytes:
    """The full file contents of a snapshot covering events up to and including `seq`."""
    covered = struct.pack("<HHQQ", SNAPSHOT_VERSION, 0, seq, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(covered))
    return _HEADER.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, 0, seq, len(payload), crc) + payload


def decode_snapshot(data: bytes | memoryview) -> tuple[int, memoryview] | str:
    """`(seq, payload)` for a valid snapshot file, else a short reason why it is not valid. The payload is a
    view into `data`, not a copy (a snapshot is tens of MB)."""
    view = memoryview(data)
    if len(view) < _HEADER.size:
        return f"file is {len(view)} bytes, shorter than the {_HEADER.size}-byte header"
    magic, version, _reserved, seq, length, crc = _HEADER.unpack_from(view, 0)
    if magic != SNAPSHOT_MAGIC:
        return "bad magic"
    if version != SNAPSHOT_VERSION:
        return f"unsupported version {version}"
    if len(view) != _HEADER.size + length:
        return f"payload length {length} does not match file size {len(view)}"
    payload = view[_HEADER.size :]
    if zlib.crc32(payload, zlib.crc32(view[8:28])) != crc:
        return "checksum mismatch"
    return seq, payload


def file_contents(path: Path) -> bytes | mmap.mmap:
    """The file's bytes, mapped read-only rather than read into a fresh buffer (a restart touches each page
    once, or only the ones it scans; copying them first costs as much as checking them). Read whole where it
    cannot be mapped (an empty file, a file system without mmap). The caller closes a map, or lets it go
    with the last view of it; nothing may shorten the file meanwhile."""
    with open(path, "rb") as handle:
        try:
            if os.fstat(handle.fileno()).st_size:
                return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            pass
        return handle.read()


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SnapshotStore:
    """The snapshot files of one directory; keeps the newest `keep` of them."""

    def __init__(self, directory: Path, *, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.directory = directory
        self.keep = keep

    def sequence_numbers(self) -> list[int]:
        """Sequence numbers of the snapshot files present (valid or not), oldest first."""
        found: list[int] = []
        for entry in os.listdir(self.directory):
            match = _NAME.match(entry)
            if match:
                found.append(int(match.group(1)))
        return sorted(found)

    def write(self, seq: int, payload: bytes) -> Path:
        """Atomically store a snapshot covering events up to `seq`, then drop all but the newest `keep`."""
        final = self.directory / snapshot_name(seq)
        temporary = self.directory / (snapshot_name(seq) + ".tmp")
        data = encode_snapshot(seq, payload)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            unsynced = 0
            while view:
                written = os.write(fd, view[:_SYNC_EVERY])
                view = view[written:]
                unsynced += written
                if unsynced >= _SYNC_EVERY:
                    # In steps: 70 MB of dirty pages at once make the kernel throttle every other writer
                    # (the daemon appending to its log) until they are on disk.
                    os.fdatasync(fd)
                    unsynced = 0
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, final)
        fsync_directory(self.directory)
        self._prune()
        for stale in self.directory.glob("snapshot-*.snap.tmp"):  # left by a writer killed mid-way
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        return final

    def latest(self, *, at_least: int = 0, at_most: int | None = None) -> tuple[int, memoryview] | None:
        """The newest valid snapshot with `at_least` <= seq <= `at_most`; corrupt ones are logged and skipped."""
        return self._first_valid(reversed(self._between(at_least, at_most)))

    def oldest(self, *, at_least: int = 0, at_most: int | None = None) -> tuple[int, memoryview] | None:
        """The oldest valid snapshot with `at_least` <= seq <= `at_most`; corrupt ones are logged and skipped."""
        return self._first_valid(iter(self._between(at_least, at_most)))

    def drop_older_than(self, seq: int) -> int:
        """Delete the snapshots before `seq` (their log tail is gone); returns how many went."""
        dropped = 0
        for older in self.sequence_numbers():
            if older >= seq:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.directory / snapshot_name(older))
                dropped += 1
        return dropped

    def _between(self, at_least: int, at_most: int | None) -> list[int]:
        return [seq for seq in self.sequence_numbers() if seq >= at_least and (at_most is None or seq <= at_most)]

    def _first_valid(self, candidates: Iterator[int]) -> tuple[int, memoryview] | None:
        for seq in candidates:
            path = self.directory / snapshot_name(seq)
            try:
                # A valid snapshot's payload is a view of the map, which lives as long as it does: snapshot
                # files are replaced by rename and removed by unlink, never rewritten in place.
                data = memoryview(file_contents(path))
            except FileNotFoundError:
                continue
            decoded = decode_snapshot(data)
            if isinstance(decoded, str):
                _log.warning("eventlog.snapshot_corrupt", snapshot=str(path), problem=decoded)
                continue
            if decoded[0] != seq:
                _log.warning(
                    "eventlog.snapshot_corrupt", snapshot=str(path), problem=f"header says seq {decoded[0]}"
                )
                continue
            return decoded
        return None

    def _prune(self) -> None:
        for seq in self.sequence_numbers()[: -self.keep]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.directory / snapshot_name(seq))
