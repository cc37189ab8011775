"""`replay --explain`: one gang's history, read back from the event log.

Answers the question an operator asks of a stuck or oddly placed job: when did it arrive, how often
was it tried, why did it wait, where did it go and why there, whom did it preempt (and why those),
and was it ever preempted itself. Everything comes from recorded events, so the story is exactly
what the scheduler knew and decided at the time, not a reconstruction from today's state.

Pure: events in, lines out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from events.dispatch import each, exhaustive
from events.model import (
    BUDGET_EVENTS,
    COMPOSITE_EVENTS,
    JOB_OBJECT_EVENTS,
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
    KaiPodGroupDeleted,
    KaiPodGroupUpserted,
    KubePodGroupDeleted,
    KubePodGroupUpserted,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodGroupDeleted,
    PodGroupUpserted,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    SchedulerPluginsPodGroupDeleted,
    SchedulerPluginsPodGroupUpserted,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    WorkloadDeleted,
    WorkloadUpserted,
    object_key,
)
from state.pod_gangs import membership


class ExplainLine(msgspec.Struct, frozen=True):
    seq: int
    time: float
    text: str


def _nodes_summary(nodes: list[str]) -> str:
    counts = Counter(nodes)
    parts = [f"{node} x{count}" if count > 1 else node for node, count in sorted(counts.items())]
    if len(parts) > 8:
        return ", ".join(parts[:8]) + f", … ({len(parts)} nodes)"
    return ", ".join(parts)


class _Story:
    """Collects lines, folding runs of the same per-pod decision at one time into a single line."""

    def __init__(self) -> None:
        self.lines: list[ExplainLine] = []
        self._run_kind = ""
        self._run_time = 0.0
        self._run_seq = 0
        self._run_nodes: list[str] = []
        self._run_extra = ""

    def add(self, event: Event, text: str) -> None:
        self.flush()
        self.lines.append(ExplainLine(event.seq, event.time, text))

    def pod_decision(self, event: Event, kind: str, node: str, extra: str = "") -> None:
        if kind != self._run_kind or event.time != self._run_time or extra != self._run_extra:
            self.flush()
            self._run_kind, self._run_time, self._run_seq, self._run_extra = kind, event.time, event.seq, extra
        self._run_nodes.append(node)

    def flush(self) -> None:
        if not self._run_kind:
            return
        count = len(self._run_nodes)
        pods = f"{count} pod{'s' if count != 1 else ''}"
        where = _nodes_summary([n for n in self._run_nodes if n])
        text = f"{self._run_kind} {pods}" + (f" on {where}" if where else "") + (
            f": {self._run_extra}" if self._run_extra else "")
        self.lines.append(ExplainLine(self._run_seq, self._run_time, text))
        self._run_kind, self._run_nodes, self._run_extra = "", [], ""


def _gang_of(event: PodUpserted) -> str:
    meta = event.pod.metadata
    return membership(event.pod, object_key(meta.namespace, meta.name))[0]  # the fold's own rule


class _Explainer:
    """Reads the log for one gang (or lone pod): who its members are, and the story of what happened."""

    def __init__(self, gang: str) -> None:
        self.gang = gang
        self.story = _Story()
        self.members: set[str] = set()
        self.bound_seen: set[str] = set()
        self.seen_group = False

    def group_upserted(self, event: PodGroupUpserted | VolcanoPodGroupUpserted | SchedulerPluginsPodGroupUpserted
                       ) -> None:
        meta = event.pod_group.metadata
        if object_key(meta.namespace, meta.name) == self.gang and not self.seen_group:
            self.seen_group = True
            self.story.add(event, f"PodGroup created (minMember {event.pod_group.spec.min_member})")

    def kube_group_upserted(self, event: KubePodGroupUpserted) -> None:
        meta = event.pod_group.metadata
        if object_key(meta.namespace, meta.name) == self.gang and not self.seen_group:
            self.seen_group = True
            gang = event.pod_group.spec.scheduling_policy.gang
            self.story.add(event, f"PodGroup created (minCount {gang.min_count})" if gang is not None
                           else "PodGroup created (basic policy)")

    def kai_group_upserted(self, event: KaiPodGroupUpserted) -> None:
        meta = event.pod_group.metadata
        if object_key(meta.namespace, meta.name) == self.gang and not self.seen_group:
            self.seen_group = True
            self.story.add(event, f"KAI PodGroup created (minMember {event.pod_group.spec.min_member})")

    def group_deleted(self, event: PodGroupDeleted | VolcanoPodGroupDeleted | SchedulerPluginsPodGroupDeleted
                      | KubePodGroupDeleted | KaiPodGroupDeleted) -> None:
        if event.key == self.gang:
            self.story.add(event, "PodGroup deleted")

    def pod_upserted(self, event: PodUpserted) -> None:
        meta = event.pod.metadata
        key = object_key(meta.namespace, meta.name)
        if key == self.gang or _gang_of(event) == self.gang:
            if key not in self.members:
                self.members.add(key)
                self.story.pod_decision(event, "created", "")
            if event.pod.spec.node_name and key not in self.bound_seen:
                self.bound_seen.add(key)
                self.story.pod_decision(event, "running (API confirms)", event.pod.spec.node_name)

    def pod_deleted(self, event: PodDeleted) -> None:
        if event.key in self.members:
            self.members.discard(event.key)
            self.bound_seen.discard(event.key)
            self.story.pod_decision(event, "deleted", "")

    def pending(self, event: GangPending) -> None:
        if event.gang == self.gang:
            what = "not ready for scheduling (not tried against nodes)" if event.held else "could not be placed"
            self.story.add(event, f"attempt {event.attempt or '?'}: {what}: {event.reason}")

    def planned(self, event: GangPlanned) -> None:
        if event.gang == self.gang:
            where = f"{event.layer} {event.domain}" if event.domain else "the cluster"
            self.story.add(event, f"attempt {event.attempt or '?'}: planned {event.pods} pods in {where}"
                                  + (f": {event.explanation}" if event.explanation else ""))

    def timed_out(self, event: GangTimedOut) -> None:
        if event.gang == self.gang:
            self.story.add(event, f"timed out waiting at Permit: {event.reason}" if event.reason else "timed out")

    def preemption(self, event: PreemptionPlanned) -> None:
        if event.gang == self.gang:
            verb = "reclaiming" if event.reclaim_from else "preempting"
            source = f" from {', '.join(event.reclaim_from)}" if event.reclaim_from else ""
            self.story.add(event, f"{verb} {len(event.victims)} pods of {len(event.victim_jobs)} job(s) "
                                  f"({', '.join(event.victim_jobs)}){source}: {event.explanation}")
        elif any(victim in self.members for victim in event.victims):
            if event.reclaim_from:
                self.story.add(event, f"chosen as a reclaim victim of {event.gang} (its quota borrowed the "
                                      f"capacity: {', '.join(event.reclaim_from)})")
            else:
                self.story.add(event, f"chosen as a preemption victim of {event.gang}")

    def evicted(self, event: EvictionRequested) -> None:
        if event.pod in self.members:
            self.story.pod_decision(event, "evicted", "", f"preempted by {event.preemptor}")

    def assumed(self, event: PodAssumed) -> None:
        if event.pod in self.members:
            self.story.pod_decision(event, "assumed", event.node)

    def bound(self, event: PodBound) -> None:
        if event.pod in self.members:
            self.story.pod_decision(event, "bound", event.node)

    def bind_failed(self, event: BindFailed) -> None:
        if event.pod in self.members:
            self.story.pod_decision(event, "bind failed", event.node, event.reason)

    def forgotten(self, event: PodForgotten) -> None:
        if event.pod in self.members:
            self.story.pod_decision(event, "released", "", event.reason)

    def nominated(self, event: PodNominated) -> None:
        if event.pod in self.members:
            self.story.pod_decision(event, "nominated", event.node)

    def nomination_cleared(self, event: NominationCleared) -> None:
        if event.pod in self.members:
            self.story.pod_decision(event, "nomination cleared", "", event.reason)


# Event type -> what a gang's story tells of it (exhaustive, events.dispatch: a new event type must
# say whether it belongs in the story).
_TOLD: dict[type, Callable[[_Explainer, Any], None] | None] = exhaustive("replay --explain", {
    PodGroupUpserted: _Explainer.group_upserted,
    VolcanoPodGroupUpserted: _Explainer.group_upserted,
    PodGroupDeleted: _Explainer.group_deleted,
    VolcanoPodGroupDeleted: _Explainer.group_deleted,
    SchedulerPluginsPodGroupUpserted: _Explainer.group_upserted,
    SchedulerPluginsPodGroupDeleted: _Explainer.group_deleted,
    KubePodGroupUpserted: _Explainer.kube_group_upserted,
    KubePodGroupDeleted: _Explainer.group_deleted,
    KaiPodGroupUpserted: _Explainer.kai_group_upserted,
    KaiPodGroupDeleted: _Explainer.group_deleted,
    PodUpserted: _Explainer.pod_upserted,
    PodDeleted: _Explainer.pod_deleted,
    GangPending: _Explainer.pending,
    GangPlanned: _Explainer.planned,
    GangTimedOut: _Explainer.timed_out,
    PreemptionPlanned: _Explainer.preemption,
    EvictionRequested: _Explainer.evicted,
    PodAssumed: _Explainer.assumed,
    PodBound: _Explainer.bound,
    BindFailed: _Explainer.bind_failed,
    PodForgotten: _Explainer.forgotten,
    PodNominated: _Explainer.nominated,
    NominationCleared: _Explainer.nomination_cleared,
    # Not part of one gang's story: the cluster's shape, a bind the PodBound after it tells, and a Workload
    # (a template: its gangs' pods tell the story).
    **each((*TOPOLOGY_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS, NodeUpserted, NodeDeleted, ObjectUndecodable,
            BindRequested, WorkloadUpserted, WorkloadDeleted, *COMPOSITE_EVENTS), None),
    # a gang's quota reasons are in its GangPending events
    **each((*QUOTA_OBJECT_EVENTS, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS), None),
})


def explain_gang(events: Iterable[Event], gang: str) -> list[ExplainLine]:
    """The history of `gang` ("namespace/name"): a lone pod's key works too."""
    explainer = _Explainer(gang)
    for event in events:
        teller = _TOLD[type(event)]
        if teller is not None:
            teller(explainer, event)
    explainer.story.flush()
    return explainer.story.lines
