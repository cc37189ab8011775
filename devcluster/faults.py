"""Fault injection for tests: failed requests, latency, dropped watch streams. Off until asked.

Rules match requests by Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
`delete`; a binding or eviction POST is `create` on `pods/binding` / `pods/eviction`) and/or by a
substring of the URL path, and fire either for the next N matching requests or for a fraction of
them (seeded, so a test run is reproducible). A 429 answer carries `Retry-After`, as the real
server's priority-and-fairness rejections do.

    cluster.faults.fail_next(3, 429, verb="create", path="/binding")
    cluster.faults.fail_fraction(0.1, 500)
    cluster.faults.add_latency(0.05, verb="list")
    cluster.faults.add(parse_fault("status=429,verb=create,path=/binding,fraction=1"))
    cluster.faults.drop_watches()          # close every open watch stream now
    cluster.faults.clear()

From outside the process the same rules are written as a `FaultSpec`: `key=value,...` text for
`toposched devcluster --fault` (`parse_fault`), JSON for the admin endpoint (`devcluster.admin`).

The injector decides; the HTTP layer applies the decision. It never touches stored objects.
"""

from __future__ import annotations

import asyncio
import itertools
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
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


class FaultSpecError(ValueError):
    """A fault rule that cannot be used (unknown key, bad value); the message names the key."""


class FaultSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A rule as asked for from outside: answer `status` to the next `count` matching requests or to
    a `fraction` of them, and/or delay them by `latency` seconds."""

    status: int = 500
    count: int | None = None
    fraction: float | None = None
    verb: str | None = None
    path: str | None = None
    retry_after: int = 1
    latency: float = 0.0

    def validate(self) -> None:
        if not 400 <= self.status <= 599:
            raise FaultSpecError(f"status: expected an HTTP error code 400-599, got {self.status}")
        if self.count is not None and self.fraction is not None:
            raise FaultSpecError("count and fraction: give one of them, not both")
        if self.count is not None and self.count < 1:
            raise FaultSpecError(f"count: expected a number >= 1, got {self.count}")
        if self.fraction is not None and not 0.0 < self.fraction <= 1.0:
            raise FaultSpecError(f"fraction: expected a number in (0, 1], got {self.fraction}")
        if self.verb is not None and self.verb not in VERBS:
            raise FaultSpecError(f"verb: expected one of {', '.join(VERBS)}, got {self.verb!r}")
        if self.retry_after < 0:
            raise FaultSpecError(f"retry_after: expected a number >= 0, got {self.retry_after}")
        if not 0.0 <= self.latency <= 3600.0:
            raise FaultSpecError(f"latency: expected seconds in [0, 3600], got {self.latency}")
        if self.count is None and self.fraction is None and self.latency == 0.0:
            raise FaultSpecError("the rule does nothing: give count, fraction or latency")


def parse_fault(text: str) -> FaultSpec:
    """`status=429,verb=create,path=/binding,fraction=1` (keys: those of `FaultSpec`) -> a valid spec."""
    values: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise FaultSpecError(f"{item!r}: expected key=value")
        values[key.strip().replace("-", "_")] = value.strip()
    try:
        spec = msgspec.convert(values, FaultSpec, strict=False)
    except msgspec.ValidationError as error:
        raise FaultSpecError(str(error)) from None
    spec.validate()
    return spec


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
    id: int = 0

    def matches(self, verb: str, path: str) -> bool:
        return (self.verb is None or self.verb == verb) and (self.path is None or self.path in path)


class FaultInjector:
    """The fault rules of one cluster; `decide` is called by the server for every API request."""

    def __init__(self, close_watches: Callable[[], int], seed: int = 0) -> None:
        self._rules: list[FaultRule] = []
        self._latencies: list[FaultRule] = []
        self._close_watches = close_watches
        self._random = random.Random(seed)
        self._ids = itertools.count(1)
        self.injected = 0
        # Requests being delayed now, and the most at once: how many a client has in flight against a slow
        # server. devcluster, like Go's net/http, serves one connection's requests one after another, so
        # requests pipelined on one connection are never delayed together.
        self.delaying = 0
        self.most_delaying = 0

    def fail_next(self, count: int, status: int = 500, *, verb: str | None = None, path: str | None = None,
                  retry_after: int = 1) -> FaultRule:
        """Answer `status` to the next `count` matching requests."""
        return self.add(FaultSpec(status=status, count=count, verb=verb, path=path, retry_after=retry_after))

    def fail_fraction(self, fraction: float, status: int = 500, *, verb: str | None = None, path: str | None = None,
                      retry_after: int = 1) -> FaultRule:
        """Answer `status` to about `fraction` of matching requests until cleared."""
        return self.add(FaultSpec(status=status, fraction=fraction, verb=verb, path=path, retry_after=retry_after))

    def add_latency(self, seconds: float, *, verb: str | None = None, path: str | None = None) -> FaultRule:
        """Delay matching requests by `seconds` before they are served."""
        return self.add(FaultSpec(latency=seconds, verb=verb, path=path))

    def add(self, spec: FaultSpec) -> FaultRule:
        """Add a rule (validated first: `FaultSpecError`); one rule may both delay and fail."""
        spec.validate()
        rule = FaultRule(status=spec.status, remaining=spec.count, fraction=spec.fraction or 0.0, verb=spec.verb,
                         path=spec.path, retry_after=spec.retry_after, latency=spec.latency, id=next(self._ids))
        if spec.latency > 0:
            self._latencies.append(rule)
        if spec.count is not None or spec.fraction is not None:
            self._rules.append(rule)
        return rule

    def drop_watches(self) -> int:
        """Close every open watch stream now (clients see the stream end); returns how many."""
        return self._close_watches()

    def remove(self, rule: FaultRule) -> None:
        for rules in (self._rules, self._latencies):
            if rule in rules:
                rules.remove(rule)

    def remove_id(self, rule_id: int) -> bool:
        """Remove the rule with this id; False when there is none (it ran out or was removed)."""
        found = [rule for rule in self.rules if rule.id == rule_id]
        for rule in found:
            self.remove(rule)
        return bool(found)

    def clear(self) -> None:
        self._rules.clear()
        self._latencies.clear()

    @property
    def rules(self) -> list[FaultRule]:
        """Every active rule, each once, in the order added."""
        unique = {rule.id: rule for rule in (*self._rules, *self._latencies)}
        return [unique[key] for key in sorted(unique)]

    @property
    def active(self) -> bool:
        return bool(self._rules or self._latencies)

    def latency(self, verb: str, path: str) -> float:
        return sum(rule.latency for rule in self._latencies if rule.matches(verb, path))

    async def delay(self, seconds: float) -> None:
        """Hold a request `seconds` before it is served (`latency`), counted in `delaying`."""
        self.delaying += 1
        self.most_delaying = max(self.most_delaying, self.delaying)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.delaying -= 1

    def _prune(self) -> None:
        """Drop the rules whose count ran out (a counted rule that also delays stops delaying too)."""
        self._rules = [r for r in self._rules if r.remaining is None or r.remaining > 0]
        self._latencies = [r for r in self._latencies if r.remaining is None or r.remaining > 0]

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
            self._prune()
            return ApiError(rule.status, _REASONS.get(rule.status, "InternalError"),
                            _MESSAGES.get(rule.status, "injected fault"), {"retryAfterSeconds": rule.retry_after}
                            if rule.status == 429 else {},
                            retry_after=rule.retry_after if rule.status in (429, 503) else None)
        return None
