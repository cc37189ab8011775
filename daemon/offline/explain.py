"""`replay --explain`: one gang's history, read back from the event log.

Answers the question an operator asks of a stuck or oddly placed job: when did it arrive, how often
was it tried, why did it wait, where did it go and why there, whom did it preempt (and why those),
and was it ever preempted itself. Everything comes from recorded events, so the story is exactly
what the scheduler knew and decided at the time, not a reconstruction from today's state.

Pure: events in, lines out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import msgspec

from events.model import (
    BindFailed,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    NominationCleared,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodGroupDeleted,
    PodGroupUpserted,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    object_key,
)
from events.objects import POD_GROUP_LABEL, VOLCANO_GROUP_ANNOTATION


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
    name = meta.labels.get(POD_GROUP_LABEL) or meta.annotations.get(VOLCANO_GROUP_ANNOTATION, "")
    return object_key(meta.namespace, name) if name else ""


def explain_gang(events: Iterable[Event], gang: str) -> list[ExplainLine]:
    """The history of `gang` ("namespace/name"): a lone pod's key works too."""
    story = _Story()
    members: set[str] = set()
    bound_seen: set[str] = set()
    seen_group = False
    for event in events:
        if isinstance(event, PodGroupUpserted | VolcanoPodGroupUpserted):
            meta = event.pod_group.metadata
            if object_key(meta.namespace, meta.name) == gang and not seen_group:
                seen_group = True
                story.add(event, f"PodGroup created (minMember {event.pod_group.spec.min_member})")
        elif isinstance(event, PodGroupDeleted | VolcanoPodGroupDeleted):
            if event.key == gang:
                story.add(event, "PodGroup deleted")
        elif isinstance(event, PodUpserted):
            meta = event.pod.metadata
            key = object_key(meta.namespace, meta.name)
            if key == gang or _gang_of(event) == gang:
                if key not in members:
                    members.add(key)
                    story.pod_decision(event, "created", "")
                if event.pod.spec.node_name and key not in bound_seen:
                    bound_seen.add(key)
                    story.pod_decision(event, "running (API confirms)", event.pod.spec.node_name)
        elif isinstance(event, PodDeleted):
            if event.key in members:
                members.discard(event.key)
                bound_seen.discard(event.key)
                story.pod_decision(event, "deleted", "")
        elif isinstance(event, GangPending) and event.gang == gang:
            story.add(event, f"attempt {event.attempt or '?'}: could not be placed: {event.reason}")
        elif isinstance(event, GangPlanned) and event.gang == gang:
            where = f"{event.layer} {event.domain}" if event.domain else "the cluster"
            story.add(event, f"attempt {event.attempt or '?'}: planned {event.pods} pods in {where}"
                             + (f": {event.explanation}" if event.explanation else ""))
        elif isinstance(event, GangTimedOut) and event.gang == gang:
            story.add(event, f"timed out waiting at Permit: {event.reason}" if event.reason else "timed out")
        elif isinstance(event, PreemptionPlanned):
            if event.gang == gang:
                story.add(event, f"preempting {len(event.victims)} pods of {len(event.victim_jobs)} job(s) "
                                 f"({', '.join(event.victim_jobs)}): {event.explanation}")
            elif any(victim in members for victim in event.victims):
                story.add(event, f"chosen as a preemption victim of {event.gang}")
        elif isinstance(event, EvictionRequested) and event.pod in members:
            story.pod_decision(event, "evicted", "", f"preempted by {event.preemptor}")
        elif isinstance(event, PodAssumed) and event.pod in members:
            story.pod_decision(event, "assumed", event.node)
        elif isinstance(event, PodBound) and event.pod in members:
            story.pod_decision(event, "bound", event.node)
        elif isinstance(event, BindFailed) and event.pod in members:
            story.pod_decision(event, "bind failed", event.node, event.reason)
        elif isinstance(event, PodForgotten) and event.pod in members:
            story.pod_decision(event, "released", "", event.reason)
        elif isinstance(event, PodNominated) and event.pod in members:
            story.pod_decision(event, "nominated", event.node)
        elif isinstance(event, NominationCleared) and event.pod in members:
            story.pod_decision(event, "nomination cleared", "", event.reason)
    story.flush()
    return story.lines
