"""Event logs damaged the ways a disk or an operator damages them, for the recovery tests.

Each kind of damage is one `LogDamagedError` path of the daemon's start: found when the log is
opened (`middle`), when its records are read back (`sealed`, `undecodable`), or when its snapshot is
restored (`snapshot`; `snapshot-version`: a state snapshot of a format this toposched does not know).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Literal

import msgspec

from events.builders import node
from events.log import EventLog
from events.model import NodeUpserted, PodBound

Damage = Literal["middle", "sealed", "undecodable", "snapshot", "snapshot-version"]
DAMAGES: tuple[Damage, ...] = ("middle", "sealed", "undecodable", "snapshot", "snapshot-version")

_SEGMENT_HEADER = 24
_RECORD_HEADER = struct.Struct("<4sIIQ")  # magic, crc, length, seq: the format in events/log.py


def damaged_log(directory: Path, damage: Damage) -> None:
    """Write a small log into `directory` and damage it."""
    segment_bytes = 4096 if damage == "sealed" else 1 << 20
    with EventLog.open(directory, fsync="never", segment_bytes=segment_bytes) as log:
        log.append(NodeUpserted(node=node("n-old")))
        log.append_many(PodBound(pod=f"default/p{i}", uid=f"u{i}", node="n-old") for i in range(300))
        if damage == "snapshot":
            log.write_snapshot(log.last_seq, b"\x93not a state")  # a valid file whose payload is not a state
        if damage == "snapshot-version":  # a state from a later toposched, say
            log.write_snapshot(log.last_seq, msgspec.msgpack.encode({"version": 99, "scheduler_name": "toposched"}))
    segments = sorted(directory.glob("*.seg"))
    if damage == "middle":  # a flipped bit in a record with good records after it: found when opened
        _flip(segments[-1], segments[-1].stat().st_size // 2)
    elif damage == "sealed":  # a flipped bit in an earlier segment whose index is intact: found when read
        _flip(segments[0], segments[0].stat().st_size // 2)
    elif damage == "undecodable":  # a record whose checksum is right but whose payload is not an event
        _rewrite_first_record(segments[0], b"\x81\xa1t\xa7unknown")


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def _rewrite_first_record(path: Path, payload: bytes) -> None:
    data = path.read_bytes()
    magic, _crc, length, seq = _RECORD_HEADER.unpack_from(data, _SEGMENT_HEADER)
    body = data[_SEGMENT_HEADER + _RECORD_HEADER.size : _SEGMENT_HEADER + _RECORD_HEADER.size + length]
    replacement = payload.ljust(len(body), b"\xc0")[: len(body)]  # msgpack nil padding: same length
    crc = zlib.crc32(replacement, zlib.crc32(struct.pack("<IQ", length, seq)))
    header = _RECORD_HEADER.pack(magic, crc, length, seq)
    start = _SEGMENT_HEADER
    path.write_bytes(data[:start] + header + replacement + data[start + _RECORD_HEADER.size + length :])
