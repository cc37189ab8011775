"""KAI's hierarchical PodGroup: sub-groups, each inside one domain of its required level, inside its parent's.

The tree (`state.gangs.KaiSubGroups`, read by `state/kai_gangs.py`) has the PodGroup at its top and pods at
its leaves (a pod's label `kai.scheduler/subgroup-name`, `PodInfo.task`); a pod whose label names no leaf
(or that has none) is *loose*: it only has to sit inside the PodGroup's domain.

Placement goes down the tree:
- the PodGroup's domain is chosen like any gang's (its own required level from `constraints`, lowest level
  first, least leftover), and the tree is filled inside it;
- a sub-group whose `requiredTopologyLevel` lies below the domain its parent got takes one domain of that
  level inside it (candidates tightest first; the next is tried when its children do not all fit), else
  its parent's domain; a leaf's pods are then searched for inside its domain, tightest first, next to
  the leaf's running members (so a `preferredTopologyLevel` is met whenever the pods fit that tightly);
- first every pending pod is tried; failing that, the minimum: a leaf its `minMember` pods (its others
  wait for a later attempt, so they never take the room a sibling needs), a node its `minSubGroup`
  children (the others may stay unplaced), and what is placed must make the PodGroup ready
  (`KaiSubGroups.ready`) with its running members.
A plan is all or nothing like any gang's: the minimum of every required sub-group, in their domains, or
nothing.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from placement.constraints import Constraints, layer_of_key
from placement.gather import Job, Solver
from placement.members import demands_for, domain_label, is_running, leaf_counts, pod_order, where
from placement.plan import INVALID, MEMBERS, MUST_GATHER, SUB_GROUP, Assignment, GangPlan, Unschedulable
from placement.reasons import explain_failure
from placement.subgroups import least_needs, ranked_domains
from state.cluster import ClusterState, PodInfo
from state.gangs import GangSpec, KaiSubGroups
from state.kai_gangs import kai_level, shown, tree_words
from state.topology import Domain, TopologyError, TopologyTree

Placed = list[tuple[str, str]]


def uses_kai_sub_groups(spec: GangSpec) -> bool:
    return spec.kai_sub_groups is not None


def _task(pod: PodInfo) -> str:
    return pod.task


def _gang(pod: PodInfo) -> str:
    return pod.gang


class _Tree:
    """One plan's view of the sub-group tree: each node's level, its pending pods and running members. A pod
    belongs to a leaf by its sub-group label (a KAI PodGroup's tree), or by its gang (`composite`: a
    CompositePodGroup hierarchy, whose leaves are PodGroups); `gangs` are the gangs whose running members
    count; `min_total` pods (running and placed) are needed besides the tree's readiness."""

    def __init__(self, state: ClusterState, solver: Solver, sub_groups: KaiSubGroups, levels: list[int],
                 pending: Sequence[str], constraints: Constraints, *, gangs: Sequence[str], min_total: int,
                 composite: bool) -> None:
        self.state = state
        self.solver = solver
        self.groups = sub_groups.groups
        self.sub_groups = sub_groups
        self.levels = levels
        self.constraints = constraints
        self.composite = composite
        self.min_total = min_total
        leaf_of: Callable[[PodInfo], str] = _gang if composite else _task
        self.leaf_of = leaf_of
        # the words of its reasons
        self.noun, self.count_word = ("PodGroup", "minCount") if composite else ("sub-group", "minMember")
        self.level_words = "its topology key" if composite else "its required level"
        self.whole_words = ("the groups of its hierarchy cannot all be placed, each inside one domain of its "
                            "topology key" if composite else
                            "its KAI sub-groups cannot all be placed, each inside its required level")
        self.plan_words = ("each group of its hierarchy inside one domain of its topology key" if composite else
                           "each KAI sub-group inside one domain of its required level")
        count = len(self.groups)
        leaves = {group.name: at for at, group in enumerate(self.groups) if at and not group.children}
        self.pending: list[list[str]] = [[] for _ in range(count)]  # every node: the pending pods under it
        self.running: list[list[str]] = [[] for _ in range(count)]  # every node: its running members' nodes
        self.loose: list[str] = []
        ignore = solver.capacity.ignore
        for key in pending:
            at = leaves.get(leaf_of(state.pods[key]))
            if at is None:
                self.loose.append(key)
            else:
                self.pending[at].append(key)
        members = sorted((pod for gang in gangs for key in state.gangs[gang].members
                          if key not in ignore and (pod := state.pods.get(key)) is not None
                          and key not in state.pending and is_running(pod)), key=pod_order)
        self.running_members = members
        self.running_nodes = [pod.placed_node for pod in members]
        for pod in members:
            at = leaves.get(leaf_of(pod))
            if at is not None:
                self.running[at].append(pod.placed_node)
        self.parent = [0] * count
        for up, group in enumerate(self.groups):
            for child in group.children:
                self.parent[child] = up
        for at in range(count - 1, -1, -1):  # breadth-first order: children come after their parent
            children = self.groups[at].children
            if children:  # only leaves hold pods: each pod is copied once per level above it
                self.pending[at] = [key for child in children for key in self.pending[child]]
                self.running[at] = [node for child in children for node in self.running[child]]

    def job(self, keys: Sequence[str], top_level: int, running_nodes: Sequence[str]) -> Job:
        return Job(demands_for(self.state, keys, self.constraints.multiples, self.solver.capacity.ignore),
                   top_level=top_level, running_nodes=running_nodes, tree=self.solver.tree)

    def fill(self, at: int, domain: Domain, require_all: bool) -> Placed | str:
        """Node `at` placed inside `domain`: its pods' places, or why not (the first sub-group that failed)."""
        level = self.levels[at]
        if level <= domain.level:  # the parent's domain already lies inside one domain of that level
            return self.inside(at, domain, require_all)
        solver = self.solver
        group = self.groups[at]
        keys = self.pending[at]
        job = self.job(keys, level, self.running[at])
        first = ""
        for candidate in ranked_domains(solver, job, domain, level, job.total() if require_all else {}):
            mark = solver.mark()
            outcome = self.inside(at, candidate, require_all)
            if not isinstance(outcome, str):
                return outcome
            solver.rollback(mark)
            first = first or outcome
        layer = solver.tree.levels[level].layer
        return first or (f"{self.noun} {group.name!r} ({len(keys)} pending) fits in no {layer} domain inside "
                         f"{where(domain)}")

    def inside(self, at: int, domain: Domain, require_all: bool) -> Placed | str:
        group = self.groups[at]
        solver = self.solver
        if not group.children:
            keys = self.pending[at]
            running = self.running[at]
            need = max(0, group.min_member - len(running))
            if not keys:
                return [] if need == 0 else (f"{self.noun} {group.name!r} ({len(running)} of {self.count_word} "
                                             f"{group.min_member} pods)")
            if not require_all:  # the minimum only: a leaf's extras must not take the room a sibling needs
                if need == 0:
                    return []
                keys = keys[:need]
            found = solver.search(self.job(keys, domain.level, running), within=domain)
            if found is not None:
                return found.assignments
            return f"{self.noun} {group.name!r} ({len(keys)} {'pending' if require_all else 'of its minimum'})"
        children = sorted(group.children, key=lambda child: (-len(self.pending[child]), self.groups[child].name))
        allowed = 0 if require_all else len(children) - group.required_children
        placed: Placed = []
        failed = 0
        first = ""
        for child in children:
            mark = solver.mark()
            outcome = self.fill(child, domain, require_all)
            if isinstance(outcome, str):
                solver.rollback(mark)
                failed += 1
                first = first or outcome
                if failed > allowed:
                    return first
                continue
            placed += outcome
        if at == 0 and self.loose:
            loose = solver.place(self.job(self.loose, domain.level, self.running_nodes), domain)
            if loose is not None:
                placed += loose
            elif require_all:
                return first or f"{len(self.loose)} pods of no sub-group"
        return placed

    def ready(self, placed: Placed) -> bool:
        """Whether the PodGroup is ready with its running members and `placed`."""
        counts = leaf_counts(self.running_members, self.composite)
        for key, _ in placed:
            leaf = self.leaf_of(self.state.pods[key])
            counts[leaf] = counts.get(leaf, 0) + 1
        return self.sub_groups.ready(counts) and len(self.running_nodes) + len(placed) >= self.min_total


def plan_kai_sub_groups(state: ClusterState, solver: Solver, spec: GangSpec, label: str, pending: Sequence[str],
                        running_nodes: Sequence[str], constraints: Constraints) -> GangPlan | Unschedulable:
    sub_groups = spec.kai_sub_groups
    assert sub_groups is not None
    return _plan_tree(state, solver, (spec.key,), sub_groups, label, pending, running_nodes, constraints,
                      min_total=spec.min_member, composite=False)


def plan_composite(state: ClusterState, solver: Solver, group: tuple[str, ...], tree: KaiSubGroups, label: str,
                   pending: Sequence[str], running_nodes: Sequence[str], constraints: Constraints
                   ) -> GangPlan | Unschedulable:
    """A hierarchy of Kubernetes PodGroups under CompositePodGroups (`state/composites.py`): its leaves' gangs
    (`group`) placed together down the tree, each group inside one domain of its topology key, inside its
    parent's; enough is what makes the root ready (each CompositePodGroup its minGroupCount of children, each
    PodGroup its minCount)."""
    if tree.invalid:
        return Unschedulable(gangs=group, constraint=MEMBERS, reason=f"{label}: {tree.invalid}")
    root = tree.groups[0].constraint if tree.groups else None
    if root is not None and root.required:  # the root's key bounds the whole job, as a required domain
        level = layer_of_key(solver.tree, root.required)
        if level is not None and level > constraints.top_level:
            constraints = msgspec.structs.replace(
                constraints, top_level=level, kind=MUST_GATHER,
                source=f"{root.required_field} {root.required} ({solver.tree.levels[level].layer})")
    return _plan_tree(state, solver, group, tree, label, pending, running_nodes, constraints, min_total=0,
                      composite=True)


def _composite_level(tree: TopologyTree, label_key: str) -> int:
    """The level of `tree` a hierarchy's topology key names (`placement.constraints.layer_of_key`)."""
    level = layer_of_key(tree, label_key)
    if level is None:
        known = ", ".join(f"{item.layer} ({'/'.join(item.label_keys) or item.tier_name})" for item in tree.levels[1:])
        raise TopologyError("Level", label_key, "", f"is not a node label of a layer of the topology in use, "
                            f"{tree_words(tree)} (layers: {known or 'none'})")
    return level


def _plan_tree(state: ClusterState, solver: Solver, group: tuple[str, ...], sub_groups: KaiSubGroups, label: str,
               pending: Sequence[str], running_nodes: Sequence[str], constraints: Constraints, *,
               min_total: int, composite: bool) -> GangPlan | Unschedulable:
    """`group`'s pending pods placed down its tree (a KAI PodGroup's sub-groups, or `composite`: a
    CompositePodGroup hierarchy), all of them if they fit, else the fewest that make the tree ready."""
    tree = solver.tree
    if sub_groups.invalid:
        return Unschedulable(gangs=group, constraint=INVALID, reason=f"{label}: {sub_groups.invalid}")
    levels: list[int] = []
    for rule in sub_groups.groups:
        constraint = rule.constraint
        level = 0
        if constraint is not None and constraint.required:
            try:
                level = (_composite_level if composite else kai_level)(tree, constraint.required)
            except TopologyError as error:
                return Unschedulable(gangs=group, constraint=INVALID,
                                     reason=(f"{label}: {constraint.required_field} {shown(constraint.required)} "
                                             f"{error.message}"))
        levels.append(level)
    view = _Tree(state, solver, sub_groups, levels, pending, constraints, gangs=group, min_total=min_total,
                 composite=composite)
    whole = view.job(list(pending), constraints.top_level, running_nodes)
    if whole.anchor is not None and whole.anchor.level < constraints.top_level:
        return Unschedulable(gangs=group, constraint=constraints.kind,
                             level=tree.levels[constraints.top_level].layer,
                             reason=f"{label}: {constraints.source}: running members already span "
                                    f"{where(whole.anchor)}")
    total = whole.total()
    deepest = len(tree.levels) - 1
    least = least_needs(whole, (min_total or sub_groups.least_pods()) - len(running_nodes))
    first = ""
    for require_all in (True, False):
        needs = total if require_all else least
        for level in range(deepest, constraints.top_level - 1, -1):
            for domain in ranked_domains(solver, whole, tree.root, level, needs):
                mark = solver.mark()
                outcome = view.inside(0, domain, require_all)
                if isinstance(outcome, list) and outcome and view.ready(outcome):
                    note = "" if require_all else f"; only the minimum could be placed ({len(outcome)} pods)"
                    return GangPlan(
                        gangs=group, assignments=tuple(Assignment(pod=p, node=n) for p, n in outcome),
                        domain=domain_label(domain), level=domain.layer,
                        explanation=(f"{label}: {where(domain)}: tightest domain holding the job; "
                                     f"{view.plan_words}{note}"))
                solver.rollback(mark)
                if isinstance(outcome, str):
                    first = first or outcome
    return _failure(solver, view, label, group, constraints, whole, first)


def _failure(solver: Solver, view: _Tree, label: str, group: tuple[str, ...], constraints: Constraints,
             whole: Job, first: str) -> Unschedulable:
    tree = solver.tree
    if whole.demands and solver.closest(whole, constraints.top_level).fit < whole.size:
        return explain_failure(solver, whole, group, label, constraints)
    # The job fits as a whole: a sub-group is what cannot go. Name the first leaf that fits nowhere alone.
    for at, rule in enumerate(view.groups):
        keys = view.pending[at]
        if rule.children or not keys:
            continue
        level = max(view.levels[up] for up in _path(view, at))
        job = view.job(keys, level, view.running[at])
        mark = solver.mark()
        found = solver.search(job)
        solver.rollback(mark)
        if found is None:
            best = solver.closest(job, level)
            layer = tree.levels[level].layer
            return Unschedulable(
                gangs=group, constraint=SUB_GROUP, level=layer,
                best_domain=domain_label(best.domain) if best.domain is not None else "",
                fit=best.fit, needed=len(keys),
                reason=(f"{label}: {view.noun} {rule.name!r} ({len(keys)} pods) fits in no {layer} domain "
                        f"({view.level_words}); closest {best.domain.name if best.domain is not None else 'none'} "
                        f"has room for {best.fit}"))
    top = tree.levels[constraints.top_level]
    return Unschedulable(
        gangs=group, constraint=SUB_GROUP, level=top.layer, needed=whole.size,
        reason=(f"{label}: {view.whole_words}, within one {top.layer} domain"
                + (f"; first short: {first}" if first else "")))


def _path(view: _Tree, at: int) -> list[int]:
    """Node `at` and its ancestors up to the PodGroup."""
    path = [at]
    while at:
        at = view.parent[at]
        path.append(at)
    return path
