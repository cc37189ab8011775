"""Which Kubernetes Event object an occurrence goes to, by client-go's rules (`tools/record`).

A scheduler reports the same thing many times: a gang's reason at each attempt, a count that moves as
its pods arrive. Written naively that is one Event object per occurrence (an 8,000-pod gang wrote
624). client-go's `EventCorrelator`, which every Kubernetes component records through, bounds it
with three steps, applied here in the same order and with the same defaults:

1. Aggregation (`EventAggregator`, keyed by `EventAggregatorByReasonFunc`): occurrences that differ
   only in their message (same source, involved object, type, reason) are *similar*. Up to 9
   distinct messages within 10 minutes of the previous similar one each keep their own Event; the
   10th distinct message and every new one after it go to ONE aggregate Event whose message is
   `(combined from similar events): ` + the latest message. A gap of more than 10 minutes starts
   afresh. (client-go drops an arbitrary remembered message once the set is full; we drop the
   oldest, so the choice is deterministic.)
2. Counting (`eventLogger`): an occurrence whose key (for an aggregate: its aggregate key; else
   object, type, reason and message) was seen before updates that Event: count + 1, lastTimestamp
   now, and the message (an aggregate's message follows the latest occurrence); else a new Event.
3. Spam filter (`EventSourceObjectSpamFilter`): a token bucket per source and involved object
   (whatever the reason), burst 25, refilled at 1 per 5 minutes; an occurrence without a token is
   not written at all (it was still counted in step 2, as client-go counts it).

Each cache holds at most 4,096 keys, the least recently used dropped first (client-go's LRU size).
An Event's name is the involved object's name, a dot and the hexadecimal time in nanoseconds, kept
unique within this correlator.

Pure: time is an argument (seconds since the epoch), no I/O, no clock.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final, Literal, TypeVar

import msgspec

CACHE_ENTRIES: Final = 4096
AGGREGATE_MAX_EVENTS: Final = 10
AGGREGATE_INTERVAL_SECONDS: Final = 600.0
SPAM_BURST: Final = 25
SPAM_QPS: Final = 1.0 / 300.0
COMBINED_PREFIX: Final = "(combined from similar events): "

EventType = Literal["Normal", "Warning"]
K = TypeVar("K")
V = TypeVar("V")


class ObjectRef(msgspec.Struct, frozen=True):
    """The object an Event is about (its `involvedObject`); `namespace` "" for a cluster-scoped one."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""


class EventWrite(msgspec.Struct, frozen=True):
    """The Event object as it must now read: created when `create`, else patched (count, times, message)."""

    name: str
    namespace: str  # where the Event lives ("default" for a cluster-scoped object, as the kubelet does)
    involved: ObjectRef
    type: EventType
    reason: str
    message: str
    count: int
    first_timestamp: float
    last_timestamp: float
    create: bool


class _Aggregate:
    __slots__ = ("last", "messages")

    def __init__(self) -> None:
        self.messages: OrderedDict[str, None] = OrderedDict()
        self.last = float("-inf")


class _Observed(msgspec.Struct):
    name: str
    count: int
    first: float


class _Bucket:
    __slots__ = ("at", "tokens")

    def __init__(self, now: float) -> None:
        self.tokens = float(SPAM_BURST)
        self.at = now

    def take(self, now: float) -> bool:
        self.tokens = min(float(SPAM_BURST), self.tokens + max(0.0, now - self.at) * SPAM_QPS)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


def _touch(cache: OrderedDict[K, V], key: K, value: V) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_ENTRIES:
        cache.popitem(last=False)


class EventCorrelator:
    """client-go's correlator for one source (`component`, `host`): see the module docstring."""

    def __init__(self, component: str, host: str = "") -> None:
        self.component = component
        self.host = host
        self._aggregates: OrderedDict[tuple[object, ...], _Aggregate] = OrderedDict()
        self._observed: OrderedDict[tuple[object, ...], _Observed] = OrderedDict()
        self._spam: OrderedDict[tuple[object, ...], _Bucket] = OrderedDict()
        self._last_nanos = 0
        self.skipped = 0  # occurrences the spam filter kept from the API

    def correlate(self, involved: ObjectRef, event_type: EventType, reason: str, message: str,
                  now: float) -> EventWrite | None:
        """The write this occurrence calls for at `now`, or None when the spam filter drops it."""
        source = (self.component, self.host, involved.kind, involved.namespace, involved.name, involved.uid,
                  involved.api_version)
        aggregate_key = (*source, event_type, reason)
        record = self._aggregates.get(aggregate_key)
        if record is None or now - record.last > AGGREGATE_INTERVAL_SECONDS:
            record = _Aggregate()
        record.messages[message] = None
        record.messages.move_to_end(message)
        record.last = now
        _touch(self._aggregates, aggregate_key, record)
        key: tuple[object, ...]
        if len(record.messages) < AGGREGATE_MAX_EVENTS:
            key, written = (*aggregate_key, message), message
        else:
            record.messages.popitem(last=False)
            key, written = aggregate_key, COMBINED_PREFIX + message
        observed = self._observed.get(key)
        create = observed is None
        if observed is None:
            observed = _Observed(name=self._name(involved.name, now), count=1, first=now)
        else:
            observed.count += 1
        _touch(self._observed, key, observed)
        bucket = self._spam.get(source)
        if bucket is None:
            bucket = _Bucket(now)
        allowed = bucket.take(now)
        _touch(self._spam, source, bucket)
        if not allowed:
            self.skipped += 1
            return None
        return EventWrite(name=observed.name, namespace=involved.namespace or "default", involved=involved,
                          type=event_type, reason=reason, message=written, count=observed.count,
                          first_timestamp=observed.first, last_timestamp=now, create=create)

    def _name(self, object_name: str, now: float) -> str:
        nanos = max(int(now * 1e9), self._last_nanos + 1)
        self._last_nanos = nanos
        suffix = f".{nanos:x}"
        return object_name[: 253 - len(suffix)] + suffix
