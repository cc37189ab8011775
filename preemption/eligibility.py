"""May this job preempt at all, right now? The questions asked before any victim is looked at.

- Who preempts: the pending pods of the job (every gang of the GangGroup, or one lone pod). Their
  priority is the lowest among them (a victim must be below every preemptor pod).
- preemptionPolicy Never (on the pod, or from its PriorityClass; `PodInfo.preemption_policy` has it
  resolved) on any preemptor pod, or on a Kubernetes PodGroup of the job (`GangSpec.preempt_never`): no
  preemption, as kube-scheduler does for such pods and PodGroups.
- No redundant preemption: if the job already holds nominations on nodes where pods it (or anyone)
  asked to evict are still terminating, room is already on its way; preempting again would evict
  more jobs for the same pods. The job waits for them.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

import msgspec

from placement.members import is_running, kai_minimum, minimum_of, pod_order
from preemption.plan import NEVER_POLICY, NOT_PREEMPTABLE, WAITING, NoPreemption
from state.cluster import NEVER, ClusterState, PodInfo


class Preemptor(msgspec.Struct, frozen=True):
    """The job asking for room: its key, its gangs (() for a lone pod), pending pods and priority."""

    key: str
    gangs: tuple[str, ...]
    pending: tuple[str, ...]
    priority: int


def preemptor_of(state: ClusterState, key: str) -> Preemptor | NoPreemption:
    """The preemptor for a gang key (its whole GangGroup) or a lone pod key."""
    gang = state.gangs.get(key)
    if gang is not None:
        group = gang.spec.gang_group if gang.spec is not None else (key,)
        pending = sorted(member for g in group if (info := state.gangs.get(g)) is not None
                         for member in info.members if member in state.pending)
        gangs = tuple(group)
    else:
        pod = state.pods.get(key)
        pending = [key] if pod is not None and key in state.pending else []
        gangs = ()
    if not pending:
        return NoPreemption(key, NOT_PREEMPTABLE, "no preemption: no pending pod to make room for")
    priority = min(state.pods[p].priority for p in pending)
    return Preemptor(key=key, gangs=gangs, pending=tuple(pending), priority=priority)


def minimum_pending(state: ClusterState, preemptor: Preemptor) -> list[str]:
    """The pending pods each gang of the job needs placed together now to reach its minimum (as
    placement counts them, `placement.members.minimum_of`; a CompositePodGroup hierarchy's, the fewest that
    satisfy its root); [] for a lone pod."""
    keys: list[str] = []
    first = state.gangs.get(preemptor.gangs[0]) if preemptor.gangs else None
    tree = first.spec.composite if first is not None and first.spec is not None else None
    if tree is not None:  # a CompositePodGroup hierarchy: the fewest pods that satisfy its root
        members = [state.pods[m] for g in preemptor.gangs if (info := state.gangs.get(g)) is not None
                   for m in info.members if m in state.pods]
        waiting = sorted((pod for pod in members if pod.key in state.pending), key=pod_order)
        return kai_minimum(tree, [pod for pod in members if is_running(pod)], waiting, composite=True)[0]
    for gang_key in preemptor.gangs:
        info = state.gangs.get(gang_key)
        if info is None or info.spec is None:
            continue
        members = [state.pods[m] for m in info.members if m in state.pods]
        running = [pod for pod in members if is_running(pod)]
        waiting = sorted((pod for pod in members if pod.key in state.pending), key=pod_order)
        keys.extend(minimum_of(info.spec, running, waiting)[0])
    return keys


def has_running_member(state: ClusterState, preemptor: Preemptor) -> bool:
    """Does a gang of the job run already (a job that started: a Closed queue still admits its pods)?"""
    return any(is_running(state.pods[m]) for g in preemptor.gangs if (info := state.gangs.get(g)) is not None
               for m in info.members if m in state.pods)


def check_eligibility(state: ClusterState, preemptor: Preemptor) -> NoPreemption | None:
    """None when the preemptor may preempt now, else why not."""
    for gang_key in preemptor.gangs:
        info = state.gangs.get(gang_key)
        if info is not None and info.spec is not None and info.spec.preempt_never:
            return NoPreemption(preemptor.key, NEVER_POLICY,
                                f"no preemption: PodGroup {gang_key} has preemptionPolicy Never; "
                                "it waits for free capacity")
    for key in preemptor.pending:
        pod = state.pods[key]
        if pod.preemption_policy == NEVER:
            source = "its PriorityClass" if not pod.obj.spec.preemption_policy else "the pod"
            return NoPreemption(preemptor.key, NEVER_POLICY,
                                f"no preemption: pod {key} has preemptionPolicy Never (from {source}); "
                                "it waits for free capacity")
    leaving = _victims_still_leaving(state, preemptor)
    if leaving:
        shown = ", ".join(leaving[:5]) + (f" and {len(leaving) - 5} more" if len(leaving) > 5 else "")
        return NoPreemption(preemptor.key, WAITING,
                            f"waiting for {len(leaving)} preempted pod(s) to terminate on its nominated nodes "
                            f"({shown}); no further preemption until they are gone")
    return None


def _victims_still_leaving(state: ClusterState, preemptor: Preemptor) -> list[str]:
    members: list[PodInfo] = []
    for gang_key in preemptor.gangs:
        gang = state.gangs.get(gang_key)
        if gang is not None:
            members.extend(state.pods[m] for m in sorted(gang.members) if m in state.pods)
    if not preemptor.gangs:
        members = [state.pods[preemptor.key]]
    nodes = sorted({pod.nominated_node for pod in members if pod.nominated_node and not pod.node_name})
    leaving: list[str] = []
    for name in nodes:
        node = state.nodes.get(name)
        if node is None:
            continue
        for key in sorted(node.pods):
            pod = state.pods.get(key)
            if pod is not None and (pod.terminating or pod.eviction_requested) and pod.priority < preemptor.priority:
                leaving.append(key)
    return leaving
