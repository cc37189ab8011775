"""Fault injection for tests: failed requests, latency, dropped watch streams. Off until asked.

Rules match requests by Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
`delete`; a binding or eviction POST is `create` on `pods/binding` / `pods/eviction`) and/or by a
substring of the URL path, and fire either for the next N matching requests or for a fraction of
them (seeded, so a test run is reproducible). A 429 answer carries `Retry-After`, as the real
server's priority-and-fairness rejections do.

    cluster.faults.fail_next(3, 429, verb="create", path="/binding")
    cluster.faults.fail_fraction(0.1, 500)
    cluster.faults.add_latency(0.05, verb="list")
    cluster.faults.drop_watches()          # close every open watch stream now
    cluster.faults.clear()

The injector decides; the HTTP layer applies the decision. It never touches stored objects.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import msgspec

from devcluster.errors import ApiError

_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected fault",
    503: "The server is currently unable to handle the request (injected fault)",
    504: "Timeout: request did not complete within the allowed duration (injected fault)",
}


class FaultRule(msgspec.Struct, kw_only=True):
    """One rule: answer `status` for matching requests (`remaining` of them, or a `fraction`)."""

    status: int = 500
    remaining: int | None = None
    fraction: float = 0.0
    verb: str | None = None
    path: str | None = None
    retry_after: int = 1
    latency: float = 0.0
    fired: int = 0

    def matches(self, verb: str, path: str) -> bool:
        return (self.verb is None or self.verb == verb) and (self.path is None or self.path in path)


class FaultInjector:
    """The fault rules of one cluster; `decide` is called by the server for every API request."""

    def __init__(self, close_watches: Callable[[], int], seed: int = 0) -> None:
        self._rules: list[FaultRule] = []
        self._latencies: list[FaultRule] = []
        self._close_watches = close_watches
        self._random = random.Random(seed)
        self.injected = 0

    def fail_next(self, count: int, status: int = 500, *, verb: str | None = None, path: str | None = None,
                  retry_after: int = 1) -> FaultRule:
        """Answer `status` to the next `count` matching requests."""
        rule = FaultRule(status=status, remaining=count, verb=verb, path=path, retry_after=retry_after)
        self._rules.append(rule)
        return rule

    def fail_fraction(self, fraction: float, status: int = 500, *, verb: str | None = None, path: str | None = None,
                      retry_after: int = 1) -> FaultRule:
        """Answer `status` to about `fraction` of matching requests until cleared."""
        rule = FaultRule(status=status, fraction=fraction, verb=verb, path=path, retry_after=retry_after)
        self._rules.append(rule)
        return rule

    def add_latency(self, seconds: float, *, verb: str | None = None, path: str | None = None) -> FaultRule:
        """Delay matching requests by `seconds` before they are served."""
        rule = FaultRule(latency=seconds, verb=verb, path=path)
        self._latencies.append(rule)
        return rule

    def drop_watches(self) -> int:
        """Close every open watch stream now (clients see the stream end); returns how many."""
        return self._close_watches()

    def remove(self, rule: FaultRule) -> None:
        for rules in (self._rules, self._latencies):
            if rule in rules:
                rules.remove(rule)

    def clear(self) -> None:
        self._rules.clear()
        self._latencies.clear()

    @property
    def active(self) -> bool:
        return bool(self._rules or self._latencies)

    def latency(self, verb: str, path: str) -> float:
        return sum(rule.latency for rule in self._latencies if rule.matches(verb, path))

    def decide(self, verb: str, path: str) -> ApiError | None:
        """The error to answer instead of serving the request, if a rule fires."""
        for rule in self._rules:
            if not rule.matches(verb, path):
                continue
            if rule.remaining is not None:
                if rule.remaining <= 0:
                    continue
                rule.remaining -= 1
            elif self._random.random() >= rule.fraction:
                continue
            rule.fired += 1
            self.injected += 1
            self._rules = [r for r in self._rules if r.remaining is None or r.remaining > 0]
            return ApiError(rule.status, _REASONS.get(rule.status, "InternalError"),
                            _MESSAGES.get(rule.status, "injected fault"), {"retryAfterSeconds": rule.retry_after}
                            if rule.status == 429 else {},
                            retry_after=rule.retry_after if rule.status in (429, 503) else None)
        return None
