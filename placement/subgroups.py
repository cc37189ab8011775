"""Volcano `subGroupPolicy`: a job split into partitions, each kept inside its own tier limit.

Partitioning (members running or pending, in network-topology-index order, then name):
- A pod belongs to the first policy whose `labelSelector` selects it and which finds a non-empty
  value for every one of its `matchLabelKeys` on the pod (`SubGroupRule.takes`, Volcano's rule);
  pods with equal values of those keys form one group. A pod no policy takes is *loose*: it only
  has to sit inside the job's domain.
- With `subGroupSize` n a group is cut into partitions of n pods in order; a last partition with
  fewer than n pods is incomplete: its pending pods wait (they are not placed) until it fills up.
  Without `subGroupSize` the group is one partition.

Placement is two-level: the job's domain is chosen like any gang's (lowest level first within the
job's own limit, least leftover), and inside it every partition gets its own tightest domain within
the partition's tier limit (hard: never above it; soft or none: lowest level first), next to its own
running members. Partitions are all-or-nothing. A job domain is accepted when every partition and
every loose pod fits; failing that anywhere, when at least `minSubGroups` partitions of every policy
(all of them when it is 0) and minMember pods in total can run, the others waiting.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.constraints import Constraints, tier_level
from placement.gather import Job, Solver, primary_resource
from placement.members import demands_for, domain_label, is_running, pod_order, where
from placement.plan import INVALID, MEMBERS, SUB_GROUP, Assignment, GangPlan, Unschedulable
from placement.reasons import explain_failure
from state.cluster import ClusterState, PodInfo
from state.gangs import GangSpec, SubGroupRule
from state.resources import Resources
from state.topology import Domain, TopologyError


class Partition:
    __slots__ = ("name", "pending", "policy", "running_nodes", "top_level")

    def __init__(self, name: str, policy: int) -> None:
        self.name = name
        self.policy = policy
        self.pending: list[str] = []
        self.running_nodes: list[str] = []
        self.top_level = 0


def uses_sub_groups(spec: GangSpec) -> bool:
    return bool(spec.sub_groups)


def _policy_of(rules: Sequence[SubGroupRule], pod: PodInfo) -> tuple[int, tuple[str, ...]] | None:
    labels = pod.obj.metadata.labels
    for index, rule in enumerate(rules):
        if rule.takes(labels):
            return index, tuple(labels[key] for key in rule.match_label_keys)
    return None


def partitions_of(state: ClusterState, spec: GangSpec, members: Sequence[PodInfo]
                  ) -> tuple[list[Partition], list[str], list[str]]:
    """(complete partitions, loose pending pods, pending pods waiting for their partition to fill)."""
    rules = spec.sub_groups
    grouped: dict[tuple[int, tuple[str, ...]], list[PodInfo]] = {}
    loose: list[str] = []
    for pod in sorted(members, key=pod_order):
        found = _policy_of(rules, pod)
        if found is None:
            if pod.key in state.pending:
                loose.append(pod.key)
            continue
        grouped.setdefault(found, []).append(pod)
    partitions: list[Partition] = []
    waiting: list[str] = []
    for (policy, values), pods in sorted(grouped.items()):
        rule = rules[policy]
        size = rule.size or len(pods)
        chunks = [pods[i:i + size] for i in range(0, len(pods), size)]
        for number, chunk in enumerate(chunks):
            if len(chunk) < size:
                waiting.extend(p.key for p in chunk if p.key in state.pending)
                continue
            name = rule.name + (f"[{','.join(values)}]" if values else "") + (f"#{number}" if len(chunks) > 1 else "")
            partition = Partition(name, policy)
            for pod in chunk:
                if pod.key in state.pending:
                    partition.pending.append(pod.key)
                else:
                    partition.running_nodes.append(pod.placed_node)
            partitions.append(partition)
    return partitions, loose, waiting


def least_needs(whole: Job, pods: int) -> Resources:
    """The least any acceptable placement of `whole` needs: `pods` pods (at least 1) of its smallest shape; a
    candidate domain whose aggregates cannot give that much is not tried at all."""
    least: dict[str, int] = {}
    for demand in whole.demands:
        for name, amount in demand.shape.requests:
            least[name] = min(least.get(name, amount), amount)
    return {name: amount * max(pods, 1) for name, amount in least.items()
            if all(dict(d.shape.requests).get(name, 0) > 0 for d in whole.demands)}


def ranked_domains(solver: Solver, job: Job, within: Domain, level: int, needs: Resources) -> list[Domain]:
    """The domains at `level` inside `within` that may hold `job` and offer `needs`, tightest fit for the whole
    job first (least of its primary resource left over), then inside the busiest parent, then by name."""
    total = job.total()
    names = list(total)
    primary = primary_resource(total)
    ranked: list[tuple[int, tuple[int, ...], str, Domain]] = []
    for domain in solver.candidates(job, within, level):
        free = solver.upper_free(domain, names)
        if not all(free.get(name, 0) >= amount for name, amount in needs.items()):
            continue
        ranked.append((free.get(primary, 0) - total.get(primary, 0), solver.ancestry(domain, primary),
                       domain.name, domain))
    ranked.sort(key=lambda item: (item[0], item[1], item[2]))
    return [domain for _, _, _, domain in ranked]


def plan_sub_groups(state: ClusterState, solver: Solver, spec: GangSpec, label: str, pending: Sequence[str],
                    running_nodes: Sequence[str], constraints: Constraints) -> GangPlan | Unschedulable:
    tree = solver.tree
    group = (spec.key,)
    info = state.gangs[spec.key]
    members = [state.pods[key] for key in sorted(info.members)
               if key in state.pods and key not in solver.capacity.ignore
               and (key in state.pending or is_running(state.pods[key]))]
    partitions, loose, waiting = partitions_of(state, spec, members)
    for partition in partitions:
        limit = spec.sub_groups[partition.policy].limit
        if limit is not None and limit.mode == "hard":
            try:
                level = tier_level(tree, limit)
            except TopologyError as error:
                return Unschedulable(gangs=group, constraint=INVALID,
                                     reason=f"{label}: sub-group {partition.name}: networkTopology: {error.message}")
            partition.top_level = level or 0
    held_back = set(waiting)
    placeable = [key for key in pending if key not in held_back]
    if not placeable:
        return Unschedulable(gangs=group, constraint=MEMBERS, needed=len(pending),
                             reason=(f"{label}: its {len(pending)} pending pods belong to sub-group partitions "
                                     "that do not have subGroupSize members yet; they wait for the rest"))
    whole = Job(demands_for(state, placeable, constraints.multiples, solver.capacity.ignore),
                top_level=constraints.top_level, running_nodes=running_nodes, tree=tree)
    if whole.anchor is not None and whole.anchor.level < constraints.top_level:
        return Unschedulable(gangs=group, constraint=constraints.kind,
                             level=tree.levels[constraints.top_level].layer,
                             reason=f"{label}: {constraints.source}: running members already span "
                                    f"{where(whole.anchor)}")
    running_count = len(running_nodes)
    total = whole.total()
    deepest = len(tree.levels) - 1
    least = least_needs(whole, spec.min_member - running_count)
    best_attempt: tuple[int, str] = (-1, "")
    for require_all in (True, False):
        needs = total if require_all else least
        for level in range(deepest, constraints.top_level - 1, -1):
            for domain in ranked_domains(solver, whole, tree.root, level, needs):
                mark = solver.mark()
                outcome = _fill_domain(state, solver, spec, domain, partitions, loose, running_nodes, constraints,
                                       require_all, running_count)
                if isinstance(outcome, list):
                    placed = len({p.name for p in partitions if p.pending and p.pending[0] in dict(outcome)})
                    note = "" if require_all else f"; only the minimum could be placed ({len(outcome)} pods)"
                    return GangPlan(
                        gangs=group, assignments=tuple(Assignment(pod=p, node=n) for p, n in outcome),
                        domain=domain_label(domain), level=domain.layer,
                        explanation=(f"{label}: {where(domain)}: tightest domain holding the job; "
                                     f"{placed} sub-group partition(s) each in its own tightest domain"
                                     f"{note}"))
                solver.rollback(mark)
                if outcome[0] > best_attempt[0]:
                    best_attempt = outcome
    return _failure(solver, spec, label, group, partitions, best_attempt, constraints, whole)


def _fill_domain(state: ClusterState, solver: Solver, spec: GangSpec, domain: Domain, partitions: list[Partition],
                 loose: list[str], running_nodes: Sequence[str], constraints: Constraints, require_all: bool,
                 running_count: int) -> list[tuple[str, str]] | tuple[int, str]:
    tree = solver.tree
    assignments: list[tuple[str, str]] = []
    placed_per_policy: dict[int, int] = {}
    failed: dict[int, int] = {}
    spare: dict[int, int] = {}  # partitions of each policy that may fail and still leave minSubGroups
    for policy, rule in enumerate(spec.sub_groups):
        count = sum(1 for p in partitions if p.policy == policy)
        spare[policy] = count - (rule.min_sub_groups or count)
    first_failure = ""
    for partition in sorted(partitions, key=lambda p: (-len(p.pending), p.name)):
        if not partition.pending:
            placed_per_policy[partition.policy] = placed_per_policy.get(partition.policy, 0) + 1
            continue
        job = Job(demands_for(state, partition.pending, constraints.multiples, solver.capacity.ignore),
                  top_level=max(partition.top_level, domain.level), running_nodes=partition.running_nodes, tree=tree)
        found = solver.search(job, within=domain)
        if found is None:
            first_failure = first_failure or partition.name
            failed[partition.policy] = failed.get(partition.policy, 0) + 1
            if require_all or failed[partition.policy] > spare.get(partition.policy, 0):
                return (len(assignments), first_failure)  # too few partitions of its policy can be left
            continue
        assignments.extend(found.assignments)
        placed_per_policy[partition.policy] = placed_per_policy.get(partition.policy, 0) + 1
    if loose:
        job = Job(demands_for(state, loose, constraints.multiples, solver.capacity.ignore), top_level=domain.level,
                  running_nodes=running_nodes, tree=tree)
        placed = solver.place(job, domain)
        if placed is None:
            if require_all:
                return (len(assignments), first_failure or "pods outside any sub-group")
        else:
            assignments.extend(placed)
    if require_all:
        return assignments
    for policy, rule in enumerate(spec.sub_groups):
        have = placed_per_policy.get(policy, 0)
        wanted = rule.min_sub_groups or sum(1 for p in partitions if p.policy == policy)
        if have < wanted:
            return (len(assignments), first_failure or rule.name)
    if not assignments or len(assignments) + running_count < spec.min_member:
        return (len(assignments), first_failure)
    return assignments


def _failure(solver: Solver, spec: GangSpec, label: str, group: tuple[str, ...], partitions: list[Partition],
             best_attempt: tuple[int, str], constraints: Constraints, whole: Job) -> Unschedulable:
    tree = solver.tree
    needed = whole.size
    if whole.demands:
        everywhere = solver.closest(whole, constraints.top_level)
        if everywhere.fit < needed:
            return explain_failure(solver, whole, group, label, constraints)
    # The job fits as a whole: a partition is what cannot go. Name the first that fits nowhere alone.
    for partition in sorted(partitions, key=lambda p: (-len(p.pending), p.name)):
        if not partition.pending:
            continue
        job = Job(demands_for(solver.state, partition.pending, constraints.multiples,
                              solver.capacity.ignore),
                  top_level=partition.top_level, running_nodes=partition.running_nodes, tree=tree)
        mark = solver.mark()
        found = solver.search(job)
        solver.rollback(mark)
        if found is None:
            level = tree.levels[partition.top_level]
            best = solver.closest(job, partition.top_level)
            return Unschedulable(
                gangs=group, constraint=SUB_GROUP, level=level.layer,
                best_domain=domain_label(best.domain) if best.domain is not None else "",
                fit=best.fit, needed=len(partition.pending),
                reason=(f"{label}: sub-group {partition.name} ({len(partition.pending)} pods) fits in no "
                        f"{level.layer} domain (its tier limit); closest "
                        f"{best.domain.name if best.domain is not None else 'none'} has room for {best.fit}"))
    top = tree.levels[constraints.top_level]
    return Unschedulable(
        gangs=group, constraint=SUB_GROUP, level=top.layer, fit=max(best_attempt[0], 0), needed=needed,
        reason=(f"{label}: its sub-group partitions cannot all be placed together inside one {top.layer} domain; "
                f"the best try placed {max(best_attempt[0], 0)} of {needed} pods"
                + (f" and could not fit {best_attempt[1]}" if best_attempt[1] else "")))
