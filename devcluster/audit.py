"""The write audit: every request that could change the cluster, in the order it was answered.

One `AuditRecord` per POST, PUT, PATCH or DELETE under `/api` and `/apis`, whatever the answer
(a 429 from the fault injector included: the request reached the server), with the caller's
`User-Agent`. Tests read it to tell who wrote what and when: "no write from a replica that did not
hold the Lease reached the server" is a question about this list. Bounded: the oldest records go
first once `capacity` is reached (`first_seq` says where the list starts).

Like a real API server's audit log, but in memory and without request bodies.
"""

from __future__ import annotations

import time
from collections import deque

import msgspec

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    time: float  # wall clock, seconds since the epoch, when the answer was ready
    method: str
    path: str
    status: int  # the HTTP status answered; 0 when the handler never answered (the client went away)
    user_agent: str


class AuditLog:
    def __init__(self, capacity: int = 100_000) -> None:
        self._records: deque[AuditRecord] = deque(maxlen=capacity)
        self._next_seq = 1

    def record(self, method: str, path: str, status: int, user_agent: str) -> None:
        self._records.append(AuditRecord(seq=self._next_seq, time=time.time(), method=method, path=path,
                                         status=status, user_agent=user_agent))
        self._next_seq += 1

    @property
    def first_seq(self) -> int:
        return self._records[0].seq if self._records else self._next_seq

    def since(self, seq: int = 0) -> list[AuditRecord]:
        """The records with a sequence number above `seq`, oldest first."""
        return [record for record in self._records if record.seq > seq]

    def clear(self) -> None:
        self._records.clear()
