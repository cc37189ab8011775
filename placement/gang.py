"""`plan_gang`: plan a whole GangGroup at once, or say precisely why it cannot go anywhere yet.

What a plan covers:
- Every gang of `spec.gang_group` is planned together as one job (a heterogeneous GangGroup's
  gangs may ask for different pod shapes; they share the one domain that holds the job).
- The pods placed are the group's pending pods (`state.pending`); members already bound or assumed
  stay where they are, and the job's domain must hold them too (a partly running gang grows next to
  its running members: their lowest common domain anchors the search, derived from state alone).
- Members: if fewer pods exist (pending + running) than minMember summed over the group, nothing
  is planned (constraint "members", saying how many are missing, and how many more exist but are held
  by scheduling gates: a gated pod is not pending, so it neither counts nor is placed until its gates
  are all removed, as kube-scheduler and Koordinator treat it).
- A scheduler-plugins PodGroup's `spec.minResources` (and minMember pods) must fit the whole cluster's free
  room first, as its Coscheduling's PreFilter checks (`resource_gap`); else nothing is planned (constraint
  "min-resources", which the loop never preempts for).
- Subset rule: all pending pods are tried first. If they cannot all go anywhere the constraints
  allow, the planner places the largest set that fits and still reaches minMember: the *minimum*
  (for each gang the first `minMember - running` pending pods in network-topology-index order, then
  name) plus the longest prefix of the other pending pods, in the same order, that fits with it
  (found by bisection; at least one pod when minMember is already met by running members). Pods
  left out stay pending and are planned again later, next to the ones placed now. If even the
  minimum does not fit, the reason describes the minimum (`needed` = its size).
- `ignore_pods` are treated as gone (their requests are free capacity, their nominations hold
  nothing, they are not members). Nothing is copied: the Capacity view adds them back per node.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

import msgspec

from events.objects import KAI_DEFAULT_NODE_POOL, KAI_NODE_POOL_LABEL
from placement.constraints import InvalidConstraint, planning_tree, resolve
from placement.fit import Capacity
from placement.gather import Found, Job, Solver
from placement.kai_subgroups import plan_composite, plan_kai_sub_groups, uses_kai_sub_groups
from placement.members import (
    counted,
    demands_for,
    domain_label,
    is_running,
    kai_minimum,
    minimum_of,
    pod_order,
    pod_shapes,
    where,
)
from placement.plan import (
    BACKOFF,
    INVALID,
    MEMBERS,
    MIN_RESOURCES,
    MUST_GATHER,
    POD_AFFINITY,
    POD_SPREAD,
    VOLUME,
    Assignment,
    GangPlan,
    Unschedulable,
)
from placement.pod_affinity import gather_level, plan_violation
from placement.pod_spread import has_spreads
from placement.pod_spread import plan_violation as spread_violation
from placement.quota import admitted_pending
from placement.reasons import explain_failure, job_label
from placement.subgroups import plan_sub_groups, uses_sub_groups
from placement.volume_binding import choose_volumes
from state.cluster import POD_SLOT_MILLI, ClusterState, GangInfo, PodInfo
from state.gangs import KUBERNETES, GangSpec
from state.kai_gangs import latest_condition
from state.pod_gangs import missing_spec
from state.resources import format_quantity
from state.topology import TopologyTree


def plan_gang(state: ClusterState, gang: str, *,
              ignore_pods: AbstractSet[str] = frozenset()) -> GangPlan | Unschedulable:
    """Plan every gang of `gang`'s GangGroup together; see the module docstring for the rules."""
    info = state.gangs.get(gang)
    if info is None or info.spec is None:
        return Unschedulable(gangs=(gang,), reason=f"gang {gang}: {missing_spec(gang, state.undecodable)}",
                             constraint=MEMBERS)
    group = info.spec.gang_group
    infos: list[GangInfo] = []
    specs: list[GangSpec] = []
    for key in group:
        member = state.gangs.get(key)
        if member is None or member.spec is None:
            why = missing_spec(key, state.undecodable)
            return Unschedulable(gangs=group, reason=f"gang {gang}: gang {key} of its GangGroup: {why}",
                                 constraint=MEMBERS)
        infos.append(member)
        specs.append(member.spec)
    waiting_pods, members_running, nominated, unusable, gated = _roster(state, infos, ignore_pods)
    running = {key: [pod.placed_node for pod in pods] for key, pods in members_running.items()}
    label = job_label(group)
    if unusable:
        return Unschedulable(gangs=group, constraint=INVALID, reason=f"{label}: {unusable}")
    composite = specs[0].composite  # a hierarchy's leaves: its tree says what is enough
    if composite is not None and composite.invalid:  # a group above its pods is missing, or no root
        return Unschedulable(gangs=group, constraint=MEMBERS, reason=f"{label}: {composite.invalid}")
    for spec in specs:
        waits = backoff_wait(state, spec) if spec.kai_tries_once and not nominated else ""
        if waits:
            return Unschedulable(gangs=group, constraint=BACKOFF, reason=f"{label}: {waits}")
    blocked = _volume_blocked(state, waiting_pods)
    if blocked:
        return Unschedulable(gangs=group, constraint=VOLUME, reason=f"{label}: {blocked}")
    min_total = composite.least_pods() if composite is not None else sum(
        spec.min_member for spec in specs)
    pending_count = sum(len(v) for v in waiting_pods.values())
    running_count = sum(len(v) for v in running.values())
    have = sum(counted(spec, members_running[spec.key]) for spec in specs)
    if pending_count + have < min_total:
        missing = min_total - pending_count - have
        only_waiting = " (only-waiting: running members do not count)" if have < running_count else ""
        held = f"; {gated} more held by their scheduling gates (spec.schedulingGates)" if gated else ""
        return Unschedulable(
            gangs=group, constraint=MEMBERS, needed=min_total, fit=pending_count + have,
            reason=(f"{label}: {pending_count + have} of minMember {min_total} pods exist "
                    f"({have} running, {pending_count} pending){only_waiting}: {missing} missing{held}"))
    pending = _in_order(waiting_pods)
    minimum: list[str] = []
    extras: list[str] = []
    if composite is not None:  # the fewest pods that make the hierarchy ready (a leaf may stay short)
        everything = [state.pods[key] for spec in specs for key in pending[spec.key]]
        needed, short = kai_minimum(composite, [pod for spec in specs for pod in members_running[spec.key]],
                                    everything, composite=True)
        if short:
            return Unschedulable(gangs=group, constraint=MEMBERS, reason=f"{label}: {short}")
        minimum.extend(needed)
        chosen = set(needed)
        extras.extend(pod.key for pod in everything if pod.key not in chosen)
    for spec in specs if composite is None else ():
        waiting = [state.pods[key] for key in pending[spec.key]]
        needed, short = minimum_of(spec, members_running[spec.key], waiting)
        if short:
            return Unschedulable(gangs=group, constraint=MEMBERS, reason=f"{label}: gang {spec.key}: {short}")
        minimum.extend(needed)
        chosen = set(needed)
        extras.extend(key for key in pending[spec.key] if key not in chosen)
    for spec in specs:
        if spec.min_resources and pending[spec.key]:
            gap = resource_gap(state, spec, members_running[spec.key], ignore_pods)
            if gap:
                lacking = ", ".join(f"{resource} {format_quantity(resource, amount)}" for resource, amount in gap)
                return Unschedulable(
                    gangs=group, constraint=MIN_RESOURCES,
                    reason=(f"{label}: gang {spec.key}: resource gap: the cluster's free room lacks {lacking} of "
                            f"the PodGroup's spec.minResources and its {spec.min_member} pods (scheduler-plugins' "
                            "Coscheduling checks them before trying the gang)"))
    quota_note = ""
    if pending_count:  # quota admission comes first, as a PreFilter: all of minMember or nothing
        admitted = admitted_pending(state, group, label, minimum, extras, ignore_pods=ignore_pods,
                                    starting=running_count == 0)
        if isinstance(admitted, Unschedulable):
            return admitted
        kept, quota_note = admitted
        if quota_note:
            placed = set(minimum) | set(kept)
            extras = kept
            pending = {key: [pod for pod in pods if pod in placed] for key, pods in pending.items()}
            pending_count = len(placed)
    result = _place_admitted(state, group, label, specs, pending, minimum, extras, running, nominated, ignore_pods,
                             pending_count, running_count)
    if isinstance(result, GangPlan) and result.assignments:
        pairs = [(assignment.pod, assignment.node) for assignment in result.assignments]
        broken = plan_violation(state, pairs, frozenset(ignore_pods))
        if broken:
            return Unschedulable(gangs=group, constraint=POD_AFFINITY, needed=len(result.assignments),
                                 reason=f"{label}: {broken}")
        shapes = pod_shapes(state)
        spread = spread_violation(state, pairs, {key: shapes.own_shape(state.pods[key]) for key, _ in pairs
                                                 if key in state.pods and has_spreads(state.pods[key].obj)},
                                  frozenset(ignore_pods))
        if spread:
            return Unschedulable(gangs=group, constraint=POD_SPREAD, needed=len(result.assignments),
                                 reason=f"{label}: {spread}")
        _, no_volume = choose_volumes(state, pairs)
        if no_volume:
            return Unschedulable(gangs=group, constraint=VOLUME, needed=len(result.assignments),
                                 reason=f"{label}: {no_volume}")
    if quota_note and isinstance(result, GangPlan):  # the loop reports the pods left out as waiting
        return GangPlan(gangs=result.gangs, assignments=result.assignments, domain=result.domain,
                        level=result.level, explanation=f"{result.explanation}; {quota_note}")
    return result


def backoff_wait(state: ClusterState, spec: GangSpec) -> str:
    """Why a KAI gang with `spec.schedulingBackoff` (not -1) is not tried ("" when it is): its PodGroup's
    latest scheduling condition names the node pool it is in now, so that pool has tried it once and could
    not place it; KAI's scheduler then leaves it to a move to another pool (its pool label changed, which
    Run:ai's node-pool assigner makes on that condition) or to the condition's removal. The caller does not
    ask while the gang holds nominations (room its preemption freed): it is placed there when they come free."""
    group = state.kai_pod_groups.get(spec.key)
    latest = latest_condition(group) if group is not None else None
    pool = spec.kai_node_pool or KAI_DEFAULT_NODE_POOL
    if group is None or latest is None or latest.node_pool != pool:
        return ""
    label = state.kai_node_pool_label or KAI_NODE_POOL_LABEL
    backoff = group.spec.scheduling_backoff
    return (f"not tried in node pool {pool!r} again: spec.schedulingBackoff {backoff} tries it "
            f"there once, and its latest scheduling condition ({latest.type or 'no type'}, transitionID "
            f"{latest.transition_id or 'none'}) says that pool could not place it; it waits for a move to another "
            f"pool (its label {label}) or for that condition to go, as KAI's scheduler leaves it")


def resource_gap(state: ClusterState, spec: GangSpec, running: Sequence[PodInfo],
                 ignore_pods: AbstractSet[str] = frozenset()) -> list[tuple[str, int]]:
    """What of a scheduler-plugins PodGroup's spec.minResources, with `pods` its minMember, the whole cluster's
    free room lacks (none: it has room), as its Coscheduling's PreFilter checks before it tries the gang
    (read, no code copied: CheckClusterResource): every node's allocatable less what its pods ask, the gang's
    own placed pods (`running`) not counted, summed over all nodes, ready or not. An amount no node offers is
    never covered. `ignore_pods` are treated as gone."""
    wanted = dict(spec.min_resources)
    wanted["pods"] = spec.min_member * POD_SLOT_MILLI
    given_back: dict[str, dict[str, int]] = {}  # node -> requests of pods not counted there
    pods = state.pods
    for pod in (*running, *(pods[key] for key in ignore_pods if key in pods)):
        if pod.placed_node:
            giving = given_back.setdefault(pod.placed_node, {})
            for resource, amount in pod.requests.items():
                giving[resource] = giving.get(resource, 0) + amount
    for info in state.nodes.values():
        back = given_back.get(info.name)
        for resource in list(wanted):
            free = info.allocatable.get(resource, 0) - info.used.get(resource, 0)
            if back is not None:
                free += back.get(resource, 0)
            left = wanted[resource] - free
            if left <= 0:
                del wanted[resource]
            else:
                wanted[resource] = left
        if not wanted:
            return []
    return sorted(wanted.items())


def _place_admitted(state: ClusterState, group: tuple[str, ...], label: str, specs: list[GangSpec],
                    pending: dict[str, list[str]], minimum: list[str], extras: list[str],
                    running: dict[str, list[str]], nominated: list[str], ignore_pods: AbstractSet[str],
                    pending_count: int, running_count: int) -> GangPlan | Unschedulable:
    """Place the pending pods the quotas admitted (all of them, else the minimum and as many more as fit)."""
    tree = planning_tree(state, specs)
    resolved = resolve(tree, specs)
    if isinstance(resolved, InvalidConstraint):
        # A GangGroup's reason names which of its gangs asks for it; a lone gang is named once.
        whose = label if group == (resolved.gang,) else f"{label}: gang {resolved.gang}"
        return Unschedulable(gangs=group, constraint=INVALID, reason=f"{whose}: {resolved.message}")
    # Pods with required affinity to their own kind over a layer's key go in one domain of that layer (a
    # layer read from one of several keys, as topograph's accelerator label or nvidia.com/gpu.clique, by
    # each: the whole-plan check below still holds the plan to the key the term names).
    layers: dict[str, int] = {}
    for tier in tree.levels:
        for key in tier.label_keys:
            layers[key] = max(layers.get(key, 0), tier.index)
    level, source = gather_level(state, layers, (key for keys in pending.values() for key in keys))
    if level > resolved.top_level:
        resolved = msgspec.structs.replace(resolved, top_level=level, kind=MUST_GATHER, source=source)
    running_nodes = [node for nodes in running.values() for node in nodes]
    capacity = Capacity(state, frozenset(group), ignore_pods)
    solver = Solver(state, capacity, tree)
    if pending_count == 0:
        anchor = Job([], running_nodes=running_nodes, tree=tree, nominated_nodes=nominated).anchor or tree.root
        return GangPlan(gangs=group, assignments=(), domain=domain_label(anchor), level=anchor.layer,
                        explanation=f"{label}: nothing pending; {running_count} members run in {where(anchor)}")
    composite = specs[0].composite
    if composite is not None:
        return plan_composite(state, solver, group, composite, label,
                              [key for gang_key in group for key in pending[gang_key]], running_nodes, resolved)
    if len(specs) == 1 and uses_kai_sub_groups(specs[0]):
        return plan_kai_sub_groups(state, solver, specs[0], label, pending[specs[0].key], running_nodes, resolved)
    if len(specs) == 1 and uses_sub_groups(specs[0]):
        return plan_sub_groups(state, solver, specs[0], label, pending[specs[0].key], running_nodes, resolved)

    everything = [key for gang_key in group for key in pending[gang_key]]
    job = Job(demands_for(state, everything, resolved.multiples, ignore_pods), top_level=resolved.top_level,
              running_nodes=running_nodes, tree=tree, nominated_nodes=nominated)
    if job.anchor is not None and job.anchor.level < resolved.top_level:
        return Unschedulable(
            gangs=group, constraint=resolved.kind, level=tree.levels[resolved.top_level].layer,
            best_domain=domain_label(job.anchor), needed=pending_count,
            reason=(f"{label}: {resolved.source}: its {running_count} running members already span "
                    f"{where(job.anchor)}, above that layer; the missing {pending_count} cannot join them"))
    found = solver.search(job, keep=False)
    if found is not None:
        return _plan(group, label, job, found, running_count, tree)
    if extras and (minimum or len(extras) > 1):  # else the smallest try is the job that just failed
        def job_of(extra: int) -> Job:
            return Job(demands_for(state, minimum + extras[:extra], resolved.multiples, ignore_pods),
                       top_level=resolved.top_level,
                       running_nodes=running_nodes, tree=tree, nominated_nodes=nominated)

        subset = _largest_fitting(solver, job_of, 0 if minimum else 1, len(extras) - 1)
        if isinstance(subset, tuple):
            best_job, best = subset
            plan = _plan(group, label, best_job, best, running_count, tree)
            note = (f"; {best_job.size} of {pending_count} pending placed (minMember needs "
                    f"{len(minimum)} more; no room for all)")
            return GangPlan(gangs=plan.gangs, assignments=plan.assignments, domain=plan.domain,
                            level=plan.level, explanation=plan.explanation + note)
        job = subset
    return explain_failure(solver, job, group, label, resolved)


def _roster(state: ClusterState, infos: list[GangInfo], ignore_pods: AbstractSet[str]
            ) -> tuple[dict[str, list[PodInfo]], dict[str, list[PodInfo]], list[str], str, int]:
    """Per gang: pending pods (`_in_order` sorts them), and the running members; plus the nodes nominated
    for the pending ones, why the first pending pod that must not be placed cannot ("" when every one
    may), and how many members of ours wait for their scheduling gates. Pods in `ignore_pods` are left
    out."""
    pending: dict[str, list[PodInfo]] = {}
    running: dict[str, list[PodInfo]] = {}
    nominated: list[str] = []
    unusable = ""
    foreign = ""  # the first member of a Kubernetes PodGroup that names another scheduler, not placed
    gated = 0
    for member in infos:
        waiting: list[PodInfo] = []
        placed: list[PodInfo] = []
        one_scheduler = member.spec is not None and member.spec.dialect == KUBERNETES  # see `foreign` below
        for key in member.members:
            if key in ignore_pods:
                continue
            pod = state.pods.get(key)
            if pod is None:
                continue
            if key in state.pending:
                waiting.append(pod)
                if pod.nominated_on:
                    nominated.append(pod.nominated_on)
                if pod.unusable and (not unusable or key < unusable):
                    unusable = key
            elif is_running(pod):
                placed.append(pod)
            elif pod.ours and pod.gated and not (pod.terminating or pod.terminal):
                gated += 1
            elif (one_scheduler and not pod.ours and not (pod.terminating or pod.terminal or pod.removed)
                  and (not foreign or key < foreign)):
                foreign = key
        pending[member.key] = waiting
        running[member.key] = placed
    why = f"pod {unusable}: {state.pods[unusable].unusable}" if unusable else ""
    if foreign and not why:
        # Kubernetes' gang scheduling needs every pod of a PodGroup to name one scheduler: kube-scheduler
        # rejects the whole group otherwise, and so does toposched, rather than start part of it.
        other = state.pods[foreign].obj.spec.scheduler_name or "default-scheduler"
        why = (f"pod {foreign} names scheduler {other!r}, not {state.scheduler_name!r}: the pods of a PodGroup "
               "must all name one scheduler, or none of them is scheduled")
    return pending, running, nominated, why, gated


def _volume_blocked(state: ClusterState, waiting: dict[str, list[PodInfo]]) -> str:
    """Why the first pending member (by key) whose claims keep it from any node cannot go ("" if none):
    all or nothing, so the gang waits for it (a claim not bound yet, not created yet, ...)."""
    first = ""
    why = ""
    for pods in waiting.values():
        for pod in pods:
            if pod.obj.spec.volumes and (not first or pod.key < first):
                blocked = state.volume_needs(pod).blocked
                if blocked:
                    first, why = pod.key, blocked
    return f"pod {first}: {why}" if first else ""


def _in_order(waiting: dict[str, list[PodInfo]]) -> dict[str, list[str]]:
    """Per gang, its pending pods' keys in placement order (sorted only once the gang has enough pods:
    while it waits for its members, each arrival tries it again)."""
    return {key: [pod.key for pod in sorted(pods, key=pod_order)] for key, pods in waiting.items()}


def _largest_fitting(solver: Solver, job_of: Callable[[int], Job], low: int, high: int
                     ) -> tuple[Job, Found] | Job:
    """Bisect the number of extra pods in [low, high] for the largest job that fits; when even
    `low` does not, that smallest job (for the failure reason)."""
    def attempt(extra: int) -> tuple[Job, Found | None]:
        trial = job_of(extra)
        mark = solver.mark()
        outcome = solver.search(trial, keep=False)
        solver.rollback(mark)
        return trial, outcome

    smallest, fits = attempt(low)
    if fits is None:
        return smallest
    best_job, best = smallest, fits
    while low < high:
        middle = (low + high + 1) // 2
        trial, outcome = attempt(middle)
        if outcome is not None:
            low, best_job, best = middle, trial, outcome
        else:
            high = middle - 1
    return best_job, best


def _plan(group: tuple[str, ...], label: str, job: Job, found: Found, running_count: int,
          tree: TopologyTree) -> GangPlan:
    domain = found.domain
    size = job.size
    levels = tree.levels
    with_running = f" with its {running_count} running members" if running_count else ""
    left = f"({format_quantity(found.primary, max(found.leftover, 0))} free {found.primary} left)"
    if found.node:
        explanation = (f"{label}: node {found.node} in {where(domain)}: one node holds all {size} pods"
                       f"{with_running}; least leftover there {left}")
    else:
        below = f" (no {levels[domain.level + 1].layer} domain could)" if domain.level + 1 < len(levels) else ""
        explanation = (f"{label}: {where(domain)}: tightest domain that holds all {size} pods{with_running}{below}; "
                       f"least leftover of {found.candidates} candidate(s) {left}")
    return GangPlan(gangs=group, assignments=tuple(Assignment(pod=p, node=n) for p, n in found.assignments),
                    domain=domain_label(domain), level=domain.layer, explanation=explanation)
