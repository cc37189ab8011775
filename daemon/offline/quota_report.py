"""The simulation report's optional `quotas` section: per quota, what it used and how long its pods waited.

`QuotaWatch` follows the journal (a listener, after each fold) and integrates, over virtual time,
what each quota's bound pods hold; it notes bindings (how long each pod waited since it was
created), reclaims made for a quota's jobs and pods taken from it. `report()` gives one
`QuotaReport` per quota, each tree top down, or UNSET when the scenario has no quota (so reports
of scenarios without quotas keep exactly their keys).

Reads the state and the events; decides nothing; holds no wall-clock figure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from events.dispatch import each, exhaustive
from events.model import (
    BUDGET_EVENTS,
    COMPOSITE_EVENTS,
    JOB_OBJECT_EVENTS,
    POD_GROUP_EVENTS,
    PRIORITY_CLASS_EVENTS,
    QUOTA_OBJECT_EVENTS,
    TOPOLOGY_OBJECT_EVENTS,
    VOLUME_EVENTS,
    BindFailed,
    BindRequested,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    WorkloadDeleted,
    WorkloadUpserted,
)
from state.cluster import ClusterState
from state.quota import shown_amount
from state.resources import MILLI, format_quantity


class QuotaReport(msgspec.Struct, frozen=True):
    """One quota in the report's optional `quotas` section.

    `resource_seconds`: per resource its pods held while bound, summed over virtual time (e.g.
    GPU-seconds); `peak`: the most held at once; `bound` / `pending`: its pods bound during the run and
    still waiting at the end; `waited`: seconds its pods waited from creation to their first binding
    (a pod still pending counts until the end), summed, and `longest_wait` the longest of them;
    `reclaims`: reclaims made for its jobs; `reclaimed`: its pods evicted by another quota's reclaim.
    """

    quota: str  # "quota team-a", "ElasticQuota ns/name", "queue q1"
    dialect: str  # koordinator | scheduler-plugins | volcano
    parent: str  # the parent's label, "" for a top quota
    min: dict[str, str]
    max: dict[str, str]
    resource_seconds: dict[str, float]
    peak: dict[str, str]
    bound: int
    pending: int
    waited: float
    longest_wait: float
    reclaims: int
    reclaimed: int


class QuotaWatch:
    """Follows the journal to tell, per quota, what it used and how long its pods waited (`QuotaReport`)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.last = 0.0
        self.seconds: dict[str, dict[str, float]] = {}  # quota id -> resource -> milli-unit-seconds
        self.peak: dict[str, dict[str, int]] = {}
        self.bound: dict[str, int] = {}
        self.waited: dict[str, float] = {}
        self.longest: dict[str, float] = {}
        self.reclaims: dict[str, int] = {}
        self.reclaimed: dict[str, int] = {}
        self.seen_bound: set[str] = set()  # pod uids already counted as bound
        self.holding: dict[str, dict[str, int]] = {}  # quota id -> what its bound pods held after the last event
        self.version = -1

    def note(self, event: Event) -> None:
        book = self.state.quotas
        if not book.active:
            self.last = max(self.last, event.time)
            return
        if event.time > self.last:
            self._advance(event.time)
        noted = _NOTED[type(event)]
        if noted is not None:
            noted(self, event)
        if book.version != self.version:
            self._hold()

    def _bound(self, event: PodBound) -> None:
        book = self.state.quotas
        pod = self.state.pods.get(event.pod)
        quota = book.quota_of(event.pod)
        if pod is not None and quota is not None and pod.uid not in self.seen_bound:
            self.seen_bound.add(pod.uid)
            self.bound[quota.id] = self.bound.get(quota.id, 0) + 1
            self._wait(quota.id, event.time - pod.first_seen)

    def _preempted(self, event: PreemptionPlanned) -> None:
        if not event.reclaim_from:
            return
        book = self.state.quotas
        unit = self.state.gangs.get(event.gang)
        members = sorted(unit.members) if unit is not None else [event.gang]
        asking = next((q for key in members if (q := book.quota_of(key)) is not None), None)
        if asking is not None:
            self.reclaims[asking.id] = self.reclaims.get(asking.id, 0) + 1
        for victim in event.victims:
            quota = book.quota_of(victim)
            if quota is not None:
                self.reclaimed[quota.id] = self.reclaimed.get(quota.id, 0) + 1

    def _advance(self, time: float) -> None:
        """Count what was held from the last event's time until `time` (the listener runs after the
        fold, so the state already shows the new event: what was held before it is `holding`)."""
        span = time - self.last
        for quota_id, held in self.holding.items():
            bucket = self.seconds.setdefault(quota_id, {})
            for resource, amount in held.items():
                if amount:
                    bucket[resource] = bucket.get(resource, 0.0) + amount * span
        self.last = time

    def _hold(self) -> None:
        self.version = self.state.quotas.version
        self.holding = {}
        for quota in self.state.quotas.in_order():
            self.holding[quota.id] = dict(quota.running)
            peak = self.peak.setdefault(quota.id, {})
            for resource, amount in quota.running.items():
                if amount > peak.get(resource, 0):
                    peak[resource] = amount

    def _wait(self, quota: str, seconds: float) -> None:
        self.waited[quota] = self.waited.get(quota, 0.0) + seconds
        self.longest[quota] = max(self.longest.get(quota, 0.0), seconds)

    def report(self, finished_at: float, pending: list[str]) -> list[QuotaReport] | msgspec.UnsetType:
        book = self.state.quotas
        if not book.active:
            return msgspec.UNSET
        if finished_at > self.last:
            self._advance(finished_at)
        waiting: dict[str, int] = {}
        for key in pending:
            quota = book.quota_of(key)
            pod = self.state.pods.get(key)
            if quota is not None and pod is not None:
                waiting[quota.id] = waiting.get(quota.id, 0) + 1
                self._wait(quota.id, max(0.0, finished_at - pod.first_seen))
        out: list[QuotaReport] = []
        for quota in book.in_order():
            parent = quota.parent
            out.append(QuotaReport(
                quota=quota.label, dialect=quota.dialect,
                parent=parent.label if parent is not None and not parent.is_root else "",
                min={r: shown_amount(r, a) for r, a in sorted(quota.min.items())},
                max={r: shown_amount(r, a) for r, a in sorted(quota.max.items())},
                resource_seconds={r: round(v / MILLI, 3) for r, v in sorted(self.seconds.get(quota.id, {}).items())},
                peak={r: format_quantity(r, a) for r, a in sorted(self.peak.get(quota.id, {}).items()) if a},
                bound=self.bound.get(quota.id, 0), pending=waiting.get(quota.id, 0),
                waited=round(self.waited.get(quota.id, 0.0), 3), longest_wait=round(self.longest.get(quota.id, 0.0), 3),
                reclaims=self.reclaims.get(quota.id, 0), reclaimed=self.reclaimed.get(quota.id, 0)))
        return out


# Event type -> what the quotas section notes of it besides time passing (exhaustive, events.dispatch).
_NOTED: dict[type, Callable[[QuotaWatch, Any], None] | None] = exhaustive("the quotas section", {
    PodBound: QuotaWatch._bound,
    PreemptionPlanned: QuotaWatch._preempted,
    # Usage follows from the fold (the book's `running`), read whenever the time moves on:
    **each((*POD_GROUP_EVENTS, *TOPOLOGY_OBJECT_EVENTS, *QUOTA_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS, NodeUpserted,
            NodeDeleted, PodUpserted, PodDeleted, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS, ObjectUndecodable,
            PodAssumed, PodForgotten, BindRequested, BindFailed, PodNominated, NominationCleared, EvictionRequested,
            GangTimedOut, GangPending, GangPlanned, WorkloadUpserted, WorkloadDeleted, *COMPOSITE_EVENTS), None),
})
