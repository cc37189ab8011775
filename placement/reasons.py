"""Why a job cannot go anywhere yet, in words a user and preemption can both act on.

The reason names the job, the constraint that failed (`placement/plan.py` tags), the closest
domain and how close it came: "MustGather at BlockLayer: no BlockLayer domain can hold all 16 pods;
closest is BlockLayer b3 with room for 12 of 16". When even the whole cluster has no room, the
nodes' refusals are counted the way kube-scheduler does ("30 Insufficient nvidia.com/gpu, 2
node(s) had untolerated taint {...}"), and a pod no node can ever take is `pod-fit`.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from placement.constraints import Constraints
from placement.fit import Shape, admits, without_rules
from placement.gather import Job, Solver
from placement.members import domain_label, where
from placement.plan import CAPACITY, POD_FIT, Unschedulable
from placement.pod_affinity import ANTI_AFFINITY, EXISTING_ANTI_AFFINITY
from state.resources import fits


def job_label(group: Sequence[str]) -> str:
    return f"gang {group[0]}" if len(group) == 1 else f"GangGroup {', '.join(group)}"



# Refusals that running pods set, which evicting them lifts: kube-scheduler's InterPodAffinity filter
# says Unschedulable (preemption may help) for these, UnschedulableAndUnresolvable for unmet affinity.
LIFTED_BY_EVICTION = frozenset({ANTI_AFFINITY, EXISTING_ANTI_AFFINITY})


def takes_some_node(solver: Solver, shape: Shape, nodes: Iterable[str]) -> bool:
    """Whether some node of `nodes` would take a pod of `shape` were it empty of other pods: its filters
    pass (refusals for required anti-affinity aside, which evicting the pods behind them lifts) and its
    allocatable holds the requests. False: no preemption can help that shape."""
    requests = dict(shape.requests)
    infos = solver.state.nodes
    lifted: Shape | None = None
    for node in nodes:
        why = solver.reason(shape, node)
        if why in LIFTED_BY_EVICTION:
            if lifted is None:
                lifted = without_rules(shape, LIFTED_BY_EVICTION)
            why = admits(lifted, infos[node])
        if not why and fits(requests, infos[node].allocatable):
            return True
    return False


def explain_failure(solver: Solver, job: Job, group: tuple[str, ...], label: str,
                    constraints: Constraints) -> Unschedulable:
    """Which constraint failed, the closest domain and how close it came."""
    tree = solver.tree
    needed = job.size
    everywhere = solver.closest(job, 0)
    root_fit = everywhere.fit
    if constraints.top_level > 0 and root_fit >= needed:
        level = tree.levels[constraints.top_level]
        best = solver.closest(job, constraints.top_level)
        fit = best.fit
        if best.domain is None:
            closest = f"no {level.layer} domain can take any of {needed}"
        elif fit >= needed:  # kinds of pod each counted alone (`Solver.fit`), competing for the same nodes
            fit = needed - 1
            closest = (f"closest is {level.layer} {best.domain.name}, with room for each of its {len(job.demands)} "
                       f"kinds of pod on its own, not for all {needed} at once")
        else:
            closest = f"closest is {level.layer} {best.domain.name} with room for {fit} of {needed}"
        anchored = " together with its running members" if job.anchor is not None else ""
        return Unschedulable(
            gangs=group, constraint=constraints.kind, level=level.layer,
            best_domain=domain_label(best.domain) if best.domain is not None else "",
            fit=fit, needed=needed,
            reason=(f"{label}: {constraints.source}: no {level.layer} domain can hold all {needed} pods"
                    f"{anchored}; {closest}"))
    # Not even the whole cluster holds it: say why nodes refuse, as kube-scheduler does.
    scope = tree.root
    reasons: dict[str, int] = {}
    fitless = False
    for demand in job.demands:
        counts = solver.rejections(demand.shape, scope.nodes)
        for why, count in counts.items():
            reasons[why] = max(reasons.get(why, 0), count)
        if not takes_some_node(solver, demand.shape, scope.nodes):
            fitless = True  # no node passes this shape's filters or is big enough, whatever runs where
    detail = ", ".join(f"{count} {why}" for why, count in sorted(reasons.items(), key=lambda i: (-i[1], i[0])))
    nodes = len(scope.nodes)
    summary = f"{nodes} node(s)" + (f": {detail}" if detail else "")
    if fitless:
        return Unschedulable(gangs=group, constraint=POD_FIT, needed=needed, fit=0,
                             best_domain=domain_label(scope),
                             reason=f"{label}: no node can ever take its pods ({summary})")
    if root_fit >= needed:
        # Pods of several shapes, each counted on the free room alone (`Solver.fit`): each kind fits apart,
        # but they compete for the same nodes, so "room for all" would contradict the refusal.
        return Unschedulable(
            gangs=group, constraint=CAPACITY, needed=needed, fit=needed - 1, level=scope.layer,
            best_domain=domain_label(scope),
            reason=(f"{label}: {where(scope)} has room for each of its {len(job.demands)} kinds of pod on its "
                    f"own, not for all {needed} pods at once ({summary})"))
    return Unschedulable(
        gangs=group, constraint=CAPACITY, needed=needed, fit=root_fit, level=scope.layer,
        best_domain=domain_label(scope),
        reason=f"{label}: {where(scope)} has room for {root_fit} of {needed} pods ({summary})")
