"""Kubernetes 1.37's CompositePodGroups (`scheduling.k8s.io/v1alpha3`, alpha) read into the gangs below them.

A workload's hierarchy is a tree of objects in one namespace: a root CompositePodGroup (it names no parent), the
CompositePodGroups below it, and at the leaves Kubernetes PodGroups, which pods join by name
(`spec.schedulingGroup.podGroupName`). Each child names its parent in `spec.parentCompositePodGroupName`.

How toposched reads a hierarchy (`family_of`), as kube-scheduler's gang plugin does:
- its leaf PodGroups are one GangGroup (`GangSpec.gang_group`: every leaf, sorted), planned together, all or
  nothing, as kube-scheduler admits the hierarchy from its root in one cycle;
- the tree itself (`GangSpec.composite`, a `KaiSubGroups` whose first node is the root and whose leaves are named
  by their gang keys) says what is enough: a leaf PodGroup is ready when its `gang.minCount` pods run or are
  placed (a `basic` one: 1 pod), a CompositePodGroup when `gang.minGroupCount` of its direct children are (a
  `basic` one: 1 child), and the plan must make the root ready; children already running count;
- `schedulingConstraints.topology[0].key` of each group (composite or leaf) names a node label: the pods below
  it share one value of it, inside the domain of its parent (placement resolves them top-down, the root's as
  the job's required domain). The hierarchy is planned on the cluster's topology when each key is (one of the
  keys of) one of its layers, else on a tree of its own keys (`key_path`, `label_tree_name`), each value
  qualified by those above it;
- the root's priority (`spec.priority`, else its `priorityClassName`'s value), `preemptionPolicy: Never` and
  `disruptionMode: {all: {}}` are the whole hierarchy's: kube-scheduler requires every pod of a hierarchy to
  carry the root's priority and preemption policy, and preempts it as a unit from its root.

A hierarchy whose parents are not all there yet (a child naming a CompositePodGroup not created, or deleted)
waits, with the reason (`KaiSubGroups.invalid`): kube-scheduler holds its pods until every group above them
exists. So does one whose parents make a cycle (it has no root), and one deeper than `MAX_LEVELS` (the Workload
API's templates allow 4 levels; toposched plans any hierarchy up to that bound and refuses deeper ones rather
than recurse without end on a hostile chain). Each CompositePodGroup's own problems (a policy naming neither or
both of basic and gang, a minGroupCount below 1, more than one topology constraint, a disruptionMode naming
neither or both modes) are reported on it (kind `CompositePodGroup`), with what is done instead.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

import msgspec

from events.model import object_key
from events.objects import CompositePodGroup, KubePodGroup, SchedulingConstraints
from state.gangs import GangSpec, KaiConstraint, KaiSubGroupRule, KaiSubGroups, Problem
from state.workload_api import disrupts_whole, int32_priority, policy_minimum, preempts_never, topology_key_of

COMPOSITE_PROBLEM = "CompositePodGroup"
# The deepest hierarchy planned (levels of groups from the root to the leaf PodGroups); the Workload API allows 4.
MAX_LEVELS = 32
# Joins a hierarchy's topology keys into the name of the label tree it is planned on when they are not all layers
# of the cluster's topology (`ClusterState.label_trees`): no label key holds a newline.
LABEL_PATH_SEPARATOR = "\n"


@dataclass
class Family:
    """One hierarchy as it stands: its root (the topmost CompositePodGroup found), its leaf PodGroups' gang keys,
    the tree for placement, and the root's priority and disruption settings for every leaf."""

    root: str
    leaves: tuple[str, ...]
    tree: KaiSubGroups
    priority_class_name: str = ""
    priority: int | None = None
    preempt_never: bool = False
    disrupt_whole: bool = False
    composites: tuple[str, ...] = ()  # every CompositePodGroup in it (keys)
    problems: dict[str, list[Problem]] = field(default_factory=dict)  # per CompositePodGroup key
    tree_name: str | None = None  # `label_tree_name` of its leaves (worked out by the first `composite_leaf_spec`)


def parent_key(namespace: str, name: str) -> str:
    return object_key(namespace, name) if name else ""


def root_of(key: str, composites: Mapping[str, CompositePodGroup]) -> str:
    """The topmost CompositePodGroup above `key` (a CompositePodGroup's key) that exists: the root when the
    chain is whole, else the highest one found (its parent is missing); a cycle stops at its first repeat."""
    path: list[str] = []
    on_path: set[str] = set()
    current = key
    while current not in on_path:
        path.append(current)
        on_path.add(current)
        found = composites.get(current)
        if found is None:
            return current
        parent = parent_key(found.metadata.namespace, found.spec.parent_composite_pod_group_name)
        if not parent or parent not in composites:
            return current
        current = parent
    # A cycle: its least member stands for it (and for whatever hangs below it), whichever key was asked.
    return min(path[path.index(current):])


def family_of(root: str, composites: Mapping[str, CompositePodGroup],
              child_composites: Mapping[str, Set[str]], child_groups: Mapping[str, Set[str]],
              groups: Mapping[str, KubePodGroup]) -> Family:
    """The hierarchy below CompositePodGroup `root` (as `root_of` gives it): its leaves, tree and settings."""
    top = composites.get(root)
    problems: dict[str, list[Problem]] = {}
    rules: list[KaiSubGroupRule] = []
    leaves: list[str] = []
    members: list[str] = []
    invalid = ""
    seen: set[str] = set()
    # Depth first, without recursion (a hostile chain of parents may be long): (key, level, parent's position).
    stack: list[tuple[str, int, int]] = [(root, 1, -1)] if top is not None else []
    children_of: dict[int, list[int]] = {}
    minimums: dict[int, int] = {}
    while stack:
        key, level, up = stack.pop()
        at = len(rules)
        if up >= 0:
            children_of.setdefault(up, []).append(at)
        composite = composites[key]
        seen.add(key)
        members.append(key)
        own: list[Problem] = []
        minimum, constraint = _composite_rule(composite, key, own)
        own += _setting_problems(composite, key)
        if own:
            problems[key] = own
        minimums[at] = minimum
        rules.append(KaiSubGroupRule(name=key, index=-1, children=(), min_member=0, min_sub_group=None,
                                     constraint=constraint))
        below = sorted(child_composites.get(key, ()))
        if level + 1 > MAX_LEVELS and (below or child_groups.get(key)):
            invalid = invalid or (f"the hierarchy under CompositePodGroup {root} is more than {MAX_LEVELS} levels "
                                  f"deep (below {key}); toposched does not plan it")
            continue
        for child in sorted(child_groups.get(key, ())):
            group = groups.get(child)
            if group is not None:
                leaves.append(child)
                children_of.setdefault(at, []).append(len(rules))
                rules.append(_leaf_rule(group, child))
        for child in reversed(below):  # popped in name order
            if child in seen:
                invalid = invalid or (f"CompositePodGroup {child} is its own ancestor "
                                      "(spec.parentCompositePodGroupName makes a cycle)")
            else:
                stack.append((child, level + 1, at))
    if top is None:  # only children naming it: they wait for it
        collect = [root]
        while collect:
            key = collect.pop()
            if key in seen:
                continue
            seen.add(key)
            leaves.extend(child for child in child_groups.get(key, ()) if child in groups)
            collect.extend(child_composites.get(key, ()))
        return Family(root=root, leaves=tuple(sorted(leaves)),
                      tree=KaiSubGroups(groups=(), invalid=(f"CompositePodGroup {root} not found; kube-scheduler "
                                                            "holds the pods until every group above them exists")))
    for at, rule in enumerate(rules):
        if at not in minimums:
            continue
        children = tuple(children_of.get(at, ()))
        rules[at] = msgspec.structs.replace(rule, children=children, min_sub_group=minimums[at])
        if len(children) < minimums[at]:  # kube-scheduler's PreEnqueue: waiting for the tree to meet quorum
            invalid = invalid or (f"CompositePodGroup {rule.name} has {len(children)} child group(s) of its "
                                  f"minimum {minimums[at]}; it waits for the others to be created")
    parent = top.spec.parent_composite_pod_group_name
    if parent:
        named = object_key(top.metadata.namespace, parent)
        invalid = (f"CompositePodGroup {named} not found (named parent of {root}); kube-scheduler holds the pods "
                   "until every group above them exists") if named not in composites else (
            f"CompositePodGroup {root} is its own ancestor (spec.parentCompositePodGroupName makes a cycle): the "
            "hierarchy has no root")
    spec = top.spec
    said: list[Problem] = []  # (said in `problems` already)
    return Family(root=root, leaves=tuple(sorted(leaves)), tree=KaiSubGroups(groups=tuple(rules), invalid=invalid),
                  priority_class_name=spec.priority_class_name,
                  priority=int32_priority(spec.priority, COMPOSITE_PROBLEM, root, said),
                  preempt_never=preempts_never(spec.preemption_policy, COMPOSITE_PROBLEM, root, said),
                  disrupt_whole=disrupts_whole(spec.disruption_mode, COMPOSITE_PROBLEM, root, said),
                  composites=tuple(sorted(members)), problems=problems)


def unread_family(leaf: str) -> Family:
    """What a leaf PodGroup waits with while its hierarchy is not read yet (`ClusterState.deferring_families`)."""
    return Family(root="", leaves=(leaf,), tree=KaiSubGroups(groups=(), invalid="its hierarchy is not read yet"))


def composite_problems(composite: CompositePodGroup, key: str) -> list[Problem]:
    """What is wrong with one CompositePodGroup, each with what is done instead (the daemon's Warning Events and
    `toposched validate` alike)."""
    problems: list[Problem] = []
    _composite_rule(composite, key, problems)
    return problems + _setting_problems(composite, key)


def _setting_problems(composite: CompositePodGroup, key: str) -> list[Problem]:
    """What is wrong with a CompositePodGroup's priority, preemption policy and disruption mode."""
    problems: list[Problem] = []
    spec = composite.spec
    int32_priority(spec.priority, COMPOSITE_PROBLEM, key, problems)
    preempts_never(spec.preemption_policy, COMPOSITE_PROBLEM, key, problems)
    disrupts_whole(spec.disruption_mode, COMPOSITE_PROBLEM, key, problems)
    return problems


def composite_leaf_spec(spec: GangSpec, family: Family) -> GangSpec:
    """A leaf PodGroup's own spec (`state.workload_api.kube_pod_group_spec`) as a gang of its hierarchy: one
    GangGroup with the other leaves, the tree (whose keys placement resolves, the root's first), and the root's
    priority (when it names one), preemption policy and disruption mode."""
    tree = family.tree
    root = tree.groups[0] if tree.groups else None
    if family.tree_name is None:
        family.tree_name = LABEL_PATH_SEPARATOR.join(key_path(tree))
    named = bool(family.priority_class_name) or family.priority is not None
    return msgspec.structs.replace(
        spec, gang_group=family.leaves if spec.key in family.leaves else (spec.key,), composite=tree,
        composite_tree_name=family.tree_name,
        topology_key="",  # the root's key is the tree's first node's: placement resolves every level of it
        priority_class_name=family.priority_class_name if named else spec.priority_class_name,
        group_priority=family.priority if named else spec.group_priority,
        preempt_never=family.preempt_never if root is not None else spec.preempt_never,
        disrupt_whole=family.disrupt_whole or spec.disrupt_whole, composite_disrupt_whole=family.disrupt_whole)


def _composite_rule(composite: CompositePodGroup, key: str, problems: list[Problem]
                    ) -> tuple[int, KaiConstraint | None]:
    """A CompositePodGroup's minimum of ready children and its required topology level."""
    policy = composite.spec.scheduling_policy
    # (basic: at least one child placed, as kube-scheduler's gang plugin asks)
    minimum = policy_minimum(policy.basic, policy.gang.min_group_count if policy.gang is not None else None,
                             COMPOSITE_PROBLEM, key, "spec.schedulingPolicy", "minGroupCount", problems)
    return minimum, _constraint(composite.spec.scheduling_constraints, COMPOSITE_PROBLEM, key, problems)


def _leaf_rule(group: KubePodGroup, key: str) -> KaiSubGroupRule:
    policy = group.spec.scheduling_policy
    minimum = max(1, policy.gang.min_count) if policy.gang is not None else 1  # basic: one pod
    # (a PodGroup's own problems are `state.workload_api`'s to report)
    return KaiSubGroupRule(name=key, index=-1, children=(), min_member=minimum, min_sub_group=None,
                           constraint=_constraint(group.spec.scheduling_constraints, "PodGroup", key, []))


def _constraint(constraints: SchedulingConstraints | None, kind: str, key: str, problems: list[Problem]
                ) -> KaiConstraint | None:
    """A group's topology key as the required level of its node of the tree (None: it names none)."""
    chosen = topology_key_of(constraints, kind, key, problems)
    if not chosen:
        return None
    return KaiConstraint(required=chosen, required_field=f"{kind} {key} spec.schedulingConstraints.topology[0].key")


def key_path(tree: KaiSubGroups) -> tuple[str, ...]:
    """The topology keys a hierarchy names, from its root down (a key first named deeper comes later; keys first
    named at one depth in name order): the layers of the label tree it is planned on when the cluster's topology
    does not have them all."""
    depth = [0] * len(tree.groups)
    first: dict[str, tuple[int, str]] = {}
    for at, rule in enumerate(tree.groups):
        for child in rule.children:
            depth[child] = depth[at] + 1
        if rule.constraint is not None and rule.constraint.required:
            key = rule.constraint.required
            first[key] = min(first.get(key, (depth[at], key)), (depth[at], key))
    return tuple(sorted(first, key=first.__getitem__))


def label_tree_name(spec: GangSpec) -> str:
    """The label tree a gang is planned on when its keys are not layers of the cluster's topology: a hierarchy's
    keys joined, else the PodGroup's own topology key ("" for none)."""
    return spec.composite_tree_name if spec.composite is not None else spec.topology_key
