"""Which nodes changed, in order: what lets a reader keep figures derived per node between calls.

Placement counts how many pods of a shape each node and each topology domain offers; between two
planning calls only the nodes some event touched can offer differently. The fold notes the name of
every node whose capacity picture changes (`used`: a pod counted on or off it; `nominated`; the
Node object itself: labels, taints, allocatable, spec.unschedulable; the node appearing or going)
here, and a reader keeps its position in this record and re-derives only the nodes named since.

`ClusterState.pod_changes` is the same record for pods: the key of every pod the fold settles, asks
to leave or re-prioritises (preemption's victim index re-derives only those).

The record is bounded: past `LIMIT` names it forgets the oldest ones all at once, and a reader whose
position falls before what is kept (`since` returns None) must re-derive everything. `ClusterState`
also offers `reader_caches`, where a reader keeps what it derived; neither is part of what the state
means (never in a snapshot, never compared).

A reader follows a record with a `ChangeCursor` (`record.cursor()`): `take()` returns what was noted
since its last call and moves past it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from state.cluster import ClusterState


class NodeChanges:
    """Append-only names of changed nodes; `end` is the position after the last one."""

    __slots__ = ("names", "start")

    LIMIT = 1 << 16

    def __init__(self) -> None:
        self.names: list[str] = []
        self.start = 0  # position of names[0]

    def add(self, name: str) -> None:
        names = self.names
        if len(names) >= self.LIMIT:
            self.start += len(names)
            names.clear()
        names.append(name)

    def extend(self, names: list[str]) -> None:
        """`add` of each of `names`, in order (the same record as adding them one by one)."""
        kept = self.names
        done, count = 0, len(names)
        while done < count:
            if len(kept) >= self.LIMIT:
                self.start += len(kept)
                kept.clear()
            room = self.LIMIT - len(kept)
            kept.extend(names[done:done + room])
            done += room

    @property
    def end(self) -> int:
        return self.start + len(self.names)

    def since(self, position: int) -> list[str] | None:
        """The names noted from `position` on (repeats included); None when some were forgotten."""
        if position < self.start:
            return None
        return self.names[position - self.start:]

    def cursor(self) -> ChangeCursor:
        """A reader's place in this record, at its end now."""
        return ChangeCursor(self)


class ChangeCursor:
    """One reader's place in a `NodeChanges` record."""

    __slots__ = ("position", "record")

    def __init__(self, record: NodeChanges) -> None:
        self.record = record
        self.position = record.end

    def take(self) -> list[str] | None:
        """The names noted since the last call (repeats included; empty when none) and move past them;
        None when some were forgotten: the reader must re-derive everything."""
        record = self.record
        position, self.position = self.position, record.end
        return record.since(position)


class KeptTable(Protocol):
    """What a reader keeps in `state.reader_caches`, made from the state and brought up to date from the
    change records by `sync()`."""

    def __init__(self, state: ClusterState) -> None: ...

    def sync(self) -> None: ...


Table = TypeVar("Table", bound=KeptTable)


def kept_table(state: ClusterState, key: str, kind: type[Table]) -> Table:
    """The state's reader of `kind` under `key`, brought up to date (made on first use)."""
    table = state.reader_caches.get(key)
    if not isinstance(table, kind):
        table = kind(state)
        state.reader_caches[key] = table
    else:
        table.sync()
    return table
