"""What a snapshot read gives, as bytes to compare (the payload is a view into the mapped file)."""

from __future__ import annotations


def as_read(found: tuple[int, memoryview] | str | None) -> tuple[int, bytes] | str | None:
    if found is None or isinstance(found, str):
        return found
    seq, payload = found
    return seq, bytes(payload)
