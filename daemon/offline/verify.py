"""`replay --verify`: re-run the scheduler's decisions over a recorded log and check they come out the same.

The loop decides at *planning points*: it plans a unit (placement), and either records the plan
(`GangPlanned`, then one `PodAssumed` per assignment, synchronously, before anything else can be
folded) or, when nothing fits, may plan a preemption (`PreemptionPlanned`, also recorded at once).
At each such point the state is exactly the fold of every event before it, which the log holds.
So replay folds the log and, at every planning point, asks the very same placement and preemption
code the loop uses (`placement.plan_gang` / `plan_pod`, the default `JobPreemptor`) what it decides on
that state, on a virtual clock and with no API at all, and compares:

- a plan: the same pods on the same nodes, in the same order, in the same domain;
- a preemption: the same victims and the same nominated nodes.

`GangPending` reasons are reported asynchronously by the loop (after the API call that posts them),
so their position in the log is not a planning point; they are not re-derived, only counted.
A mismatch means the decision was not a deterministic function of the recorded state: a bug in the
fold, in placement, or an input the log did not capture.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from daemon.offline.replay import bulk_fold
from daemon.scheduling.ports import Preemptee, Preemptor
from daemon.scheduling.queue import Unit, pending_units
from events.model import Event, GangPending, GangPlanned, PodAssumed, PreemptionPlanned
from events.objects import DEFAULT_SCHEDULER_NAME
from placement import GangPlan, Unschedulable, plan_gang, plan_pod
from preemption import JobPreemptor
from state.cluster import ClusterState


@dataclass
class DecisionCheck:
    plans: int = 0
    lone_pods: int = 0
    preemptions: int = 0
    pending_reasons: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def checked(self) -> int:
        return self.plans + self.lone_pods + self.preemptions


def _unit_for(state: ClusterState, key: str) -> Unit | None:
    for unit in pending_units(state):
        if unit.key == key or key in unit.gangs or (not unit.gangs and key in unit.pods):
            return unit
    return None


def _plan(state: ClusterState, unit: Unit) -> GangPlan | Unschedulable:
    return plan_gang(state, unit.target) if unit.is_gang else plan_pod(state, unit.target)


def _describe(assignments: Iterable[tuple[str, str]]) -> str:
    pairs = list(assignments)
    shown = ", ".join(f"{pod}->{node}" for pod, node in pairs[:4])
    return shown + (f", … ({len(pairs)} in all)" if len(pairs) > 4 else "")


def verify_decisions(events: list[Event], *, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
                     preemptor: Preemptor | None = None, limit: int = 20,
                     start: ClusterState | None = None) -> DecisionCheck:
    """Fold `events` (onto `start`, e.g. a pruned log's base snapshot, else an empty state) and re-decide
    at every planning point; at most `limit` mismatches are described."""
    hook: Preemptor = preemptor or JobPreemptor()
    state = start if start is not None else ClusterState(scheduler_name)
    check = DecisionCheck()
    index = 0
    total = len(events)

    def mismatch(event: Event, text: str) -> None:
        if len(check.mismatches) < limit:
            check.mismatches.append(f"seq {event.seq}: {text}")
        elif len(check.mismatches) == limit:
            check.mismatches.append("… more mismatches not shown")

    with bulk_fold():
        while index < total:
            event = events[index]
            if isinstance(event, GangPlanned) or (isinstance(event, PodAssumed) and not event.gang):
                # A planning point: the plan's GangPlanned records, then its PodAssumed records, in a row.
                end = index
                while end < total and isinstance(events[end], GangPlanned):
                    end += 1
                recorded_domain = event.domain if isinstance(event, GangPlanned) else ""
                assumed_start = end
                while end < total and isinstance(events[end], PodAssumed) and (
                        end == assumed_start or isinstance(event, GangPlanned)):
                    end += 1
                recorded = [(e.pod, e.node) for e in events[assumed_start:end] if isinstance(e, PodAssumed)]
                key = event.gang if isinstance(event, GangPlanned) else event.pod
                unit = _unit_for(state, key)
                if isinstance(event, GangPlanned):
                    check.plans += 1
                else:
                    check.lone_pods += 1
                if unit is None:
                    mismatch(event, f"{key}: the log plans it but nothing of it is pending in the recorded state")
                else:
                    result = _plan(state, unit)
                    if isinstance(result, Unschedulable):
                        mismatch(event, f"{key}: recorded a plan ({_describe(recorded)}) but re-planning says: "
                                        f"{result.reason}")
                    else:
                        replanned = [(a.pod, a.node) for a in result.assignments if a.pod in state.pending]
                        if replanned != recorded:
                            mismatch(event, f"{key}: recorded {_describe(recorded)}; re-planned {_describe(replanned)}")
                        elif isinstance(event, GangPlanned) and recorded_domain != result.domain:
                            mismatch(event, f"{key}: recorded domain {recorded_domain!r}; re-planned {result.domain!r}")
                for replayed in events[index:end]:
                    state.apply(replayed)
                index = end
                continue
            if isinstance(event, PreemptionPlanned):
                check.preemptions += 1
                unit = _unit_for(state, event.gang)
                if unit is None:
                    mismatch(event, f"{event.gang}: preempted for, but nothing of it is pending in the recorded state")
                else:
                    failure = _plan(state, unit)
                    if not isinstance(failure, Unschedulable):
                        mismatch(event, f"{event.gang}: preempted for, but re-planning finds room without preemption")
                    else:
                        preemptee = Preemptee(key=unit.key, gangs=unit.gangs, pods=unit.pods, priority=unit.priority)
                        plan = hook.plan(state, preemptee, failure)
                        victims = sorted(plan.victims) if plan is not None else []
                        nodes = sorted({a.node for a in plan.nominations}) if plan is not None else []
                        if victims != sorted(event.victims):
                            mismatch(event, f"{event.gang}: recorded victims {sorted(event.victims)}; "
                                            f"re-planned {victims}")
                        elif event.nodes and nodes != sorted(event.nodes):
                            mismatch(event, f"{event.gang}: recorded nominated nodes {sorted(event.nodes)}; "
                                            f"re-planned {nodes}")
            elif isinstance(event, GangPending):
                check.pending_reasons += 1
            state.apply(event)
            index += 1
    return check
