"""Watch events and the per-client watch channel.

A `WatchEvent` is one change in the store (ADDED/MODIFIED/DELETED) at one resourceVersion. It is
created once per change and shared by the history window and every watcher; its JSON line is
encoded at most once per event type, so fanning an event out to N plain watchers costs one encoding.

A `Watcher` is one open watch: a resource, an optional namespace and selector, and a queue the HTTP
stream drains (a watcher that falls `limit` events behind is closed, as a real server drops a slow
watch; its client resumes from the last version it saw). Offering an event is O(1) plus the
selector test; selector watches see an object that stops matching as DELETED and one that starts
matching as ADDED, as on a real server.

No I/O here: the HTTP layer owns the stream.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec

_encode = msgspec.json.Encoder().encode

Predicate = Callable[[dict[str, Any]], bool]


class WatchEvent:
    """One stored change; `old` is the previous state for MODIFIED (selector transitions)."""

    __slots__ = ("_body", "_lines", "key", "namespace", "obj", "old", "rv", "type")

    def __init__(
        self, type: str, key: str, namespace: str, obj: dict[str, Any], rv: int, old: dict[str, Any] | None = None
    ) -> None:
        self.type = type
        self.key = key
        self.namespace = namespace
        self.obj = obj
        self.old = old
        self.rv = rv
        self._body: bytes | None = None
        self._lines: dict[str, bytes] = {}

    def body(self) -> bytes:
        """The object's JSON encoding (computed once)."""
        if self._body is None:
            self._body = _encode(self.obj)
        return self._body

    def line(self, type: str | None = None) -> bytes:
        """`{"type": ..., "object": ...}` followed by a newline, as a watch stream carries it."""
        kind = type or self.type
        line = self._lines.get(kind)
        if line is None:
            line = b'{"type":"' + kind.encode() + b'","object":' + self.body() + b"}\n"
            self._lines[kind] = line
        return line


class Watcher:
    """An open watch: receives matching events in resourceVersion order until closed."""

    def __init__(self, key: str, namespace: str, predicate: Predicate | None, limit: int = 100_000) -> None:
        self.key = key
        self.limit = limit  # a consumer this far behind is cut off (it resumes from its last version)
        self.namespace = namespace
        self.predicate = predicate
        self.queue: deque[tuple[str, WatchEvent]] = deque()
        self.closed = False
        self._wakeup = asyncio.Event()

    def offer(self, event: WatchEvent) -> None:
        if self.closed or (self.namespace and event.namespace != self.namespace):
            return
        kind = event.type
        if self.predicate is not None:
            now = self.predicate(event.obj)
            if kind == "MODIFIED":
                before = event.old is not None and self.predicate(event.old)
                if now and not before:
                    kind = "ADDED"
                elif before and not now:
                    kind = "DELETED"
                elif not now:
                    return
            elif not now:
                return
        if len(self.queue) >= self.limit:
            self.close()
            return
        self.queue.append((kind, event))
        self._wakeup.set()

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()

    async def wait(self, seconds: float) -> bool:
        """Wait until an event is queued or the watcher closes; False on timeout."""
        if self.queue or self.closed:
            return True
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), seconds)
        except TimeoutError:
            return False
        return True
