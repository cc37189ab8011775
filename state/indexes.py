"""Indexes of sets by key (`dict[key, set[member]]`), as the state and its readers keep them.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import TypeVar

_Key = TypeVar("_Key")
_Member = TypeVar("_Member")


def leave(index: dict[_Key, set[_Member]], key: _Key, member: _Member) -> None:
    """`member` out of `index[key]`, and the entry out of `index` once empty (no entry: nothing to do)."""
    there = index.get(key)
    if there is not None:
        there.discard(member)
        if not there:
            del index[key]
