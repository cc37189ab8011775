"""One way to dispatch events: a table with an entry for every event type, checked as it is built.

Every consumer of events (the fold, the loop's observer, the tracing observer, the topology status
writer, the simulator's report, `replay --explain` and `replay --verify`) keeps one table from event
type to what it does with events of that type, built by `exhaustive()`, which refuses a table that
misses a type of the `Event` union or names a type that is not one (a `TypeError` naming the
consumer and the types, at import). So adding an event type fails at once until every consumer
says what it does with it, `None` (nothing) included; none can ignore a type by forgetting it.
Looking an event up is one dict access, which the fold's hot path needs.

Pure: nothing but the event types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar, get_args

from events.model import Event

EVENT_TYPES: Final[frozenset[type]] = frozenset(get_args(Event))

Entry = TypeVar("Entry")


def exhaustive(consumer: str, entries: Mapping[type, Entry]) -> dict[type, Entry]:
    """`entries` as a dispatch table, if it has exactly one entry per event type (else TypeError)."""
    missing = EVENT_TYPES - entries.keys()
    unknown = entries.keys() - EVENT_TYPES
    if missing or unknown:
        problems = []
        if missing:
            problems.append(f"no entry for {', '.join(sorted(t.__name__ for t in missing))}")
        if unknown:
            problems.append(f"entries for what is not an event: {', '.join(sorted(t.__name__ for t in unknown))}")
        raise TypeError(f"{consumer}'s event table: {'; '.join(problems)} (events.dispatch)")
    return dict(entries)


def each(types: tuple[type, ...], entry: Entry) -> dict[type, Entry]:
    """The same entry for several event types: `exhaustive(name, {**each((A, B), None), C: handle})`."""
    return dict.fromkeys(types, entry)
