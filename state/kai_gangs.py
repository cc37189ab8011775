"""NVIDIA KAI Scheduler's gangs read into `GangSpec`.

A KAI PodGroup (`scheduling.run.ai/v2alpha2`, namespaced) is made by KAI's pod-grouper for each
workload; pods join it with the annotation `pod-group-name: <podgroup name>` (`state/pod_gangs.py`).
What is read, and what it becomes:
- `spec.minMember`: the gang's size (all or nothing for that many pods); absent or below 1 is 1,
  reported. Running members count towards it (waiting-and-running), as KAI counts them.
- `spec.topologyConstraint`: `topology` names the KAI `Topology` the levels belong to;
  `requiredTopologyLevel` is a node label key (or, with newer KAI, a level's alias) whose one
  domain must hold every pod: it is the gang's topology key (`GangSpec.topology_key`, as a
  Kubernetes PodGroup's), so a MustGather at the layer of the tree built from that label (or whose
  alias it is), and, when no layer is (another KAI Topology than the one in use, which KAI allows
  per workload), the gang is planned on the domains that label's values form, nodes without it
  never used, as KAI places a required level ("not on nodes lacking the label")
  (`placement/constraints.py`); `kubernetes.io/hostname` thus holds the gang to one node. A value
  that is not a label key at all is reported, and the gang stays pending.
  `preferredTopologyLevel` is a PreferGather at its layer (a wish: the search is tightest first
  anyway). KAI's pod-grouper fills these from the workload's (top owner's) annotations
  `kai.scheduler/topology`, `kai.scheduler/topology-required-placement` and
  `kai.scheduler/topology-preferred-placement`, and copies the annotations themselves onto the
  PodGroup; toposched does not read the workload objects, so it reads the annotations where they
  reach it, on the PodGroup, for any of the three fields the spec leaves empty (the spec wins when
  both are set and differ, said in a problem).
- `spec.preemptibility` (kept as `GangSpec.kai_preemptibility`): `non-preemptible` makes the gang never a
  victim of preemption or reclaim and keeps it within its queue's quota; `preemptible` makes it a victim
  like any other; unset (or a value KAI does not define, reported), the PodGroup's priority decides, as
  KAI's `CalculatePreemptibility` does: the value of the PriorityClass its `spec.priorityClassName` names
  (else of the cluster's globalDefault class, else 0), non-preemptible from `NON_PREEMPTIBLE_PRIORITY`
  (100: KAI's `build` and `inference` classes; its `train` class is 50). `ClusterState.gang_preemptable`
  resolves it, so a PriorityClass created or changed later counts.
- `spec.priorityClassName` (kept as `GangSpec.priority_class_name`) is also the job's priority: every
  member is ordered and preempts, and is preempted, by it rather than by its own, as KAI's scheduler does
  (`ClusterState.job_priority`; a class that does not exist is reported, and the default priority taken).
- `spec.subGroups` and `spec.minSubGroup` (`KaiSubGroups`, KAI's hierarchical PodGroup): sub-groups form a
  tree by `parent` (none: a child of the PodGroup); pods belong to a leaf by their label
  `kai.scheduler/subgroup-name` (`PodInfo.task`). A leaf is ready with its `minMember` pods, any other
  node (the PodGroup too) with its `minSubGroup` direct children ready (all of them when unset) and, when
  it also sets `minMember`, that many pods under it. The gang's minMember is the fewest pods that make the
  PodGroup ready (or its own `minMember` when larger). Each sub-group's `topologyConstraint` holds its pods
  inside one domain of its required level, inside its parent's domain (`placement/kai_subgroups.py`). A
  tree KAI's webhook refuses (duplicate or empty names, a parent that does not exist, a cycle) is reported
  and the gang waits, as does one beyond `MAX_SUB_GROUPS` sub-groups or `MAX_SUB_GROUP_DEPTH` levels; thresholds
  KAI's rules refuse (minSubGroup on a leaf, below 1, above the children)
  are reported and read as KAI's default (all children).
- `spec.queue` names the KAI Queue whose quota the gang's pods count against (`state/quota.py`).
- The label `kai.scheduler/node-pool` (kept as `GangSpec.kai_node_pool`; the key is KAI's `nodePoolLabelKey`,
  which the daemon's `kai_node_pool_label` sets, "" for no pools) is the node pool the PodGroup
  belongs to, as KAI's scheduling shards read it: KAI runs one scheduler per pool, each seeing only the
  nodes labelled with its pool (the default shard: the nodes without the label) and the PodGroups
  labelled so. The gang's pods go only on its pool's nodes (`ClusterState.node_pool_of`,
  `placement/fit.py`); on a cluster where no node carries the label, every node is in the default pool.
  KAI's pod-grouper copies the label from the workload, and a user may relabel the PodGroup to move a
  job that has not started. An empty value (no shard takes it) is reported and read as the default pool.
Whether the levels are layers of the tree in use and the Topology the one the tree is built from
needs the tree: `kai_wish_problems` reports each that is not (`state/topology_wishes.py` runs it).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from events.objects import (
    KAI_LAST_EVICTION_ANNOTATION,
    KAI_NODE_POOL_LABEL,
    KAI_PREEMPTION_DELAY_ANNOTATION,
    KAI_PREFERRED_PLACEMENT_ANNOTATION,
    KAI_REQUIRED_PLACEMENT_ANNOTATION,
    KAI_TOPOLOGY_ANNOTATION,
    KaiObjectMeta,
    KaiPodGroup,
    KaiPodGroupSpec,
    KaiSchedulingCondition,
    KaiSubGroup,
    KaiTopologyConstraint,
)
from state.gangs import (
    KAI,
    KAI_POD_GROUP_PROBLEM,
    UNSUPPORTED_FIELD,
    GangSpec,
    KaiConstraint,
    KaiSubGroupRule,
    KaiSubGroups,
    Problem,
)
from state.topology import (
    SOURCE_CNT,
    SOURCE_HYPERNODES,
    SOURCE_KAI,
    SOURCE_KUEUE,
    TopologyError,
    TopologyTree,
)
from state.topology_validation import HOSTNAME_LABEL, label_key_problem

PREEMPTIBLE = "preemptible"
NON_PREEMPTIBLE = "non-preemptible"
# KAI: a workload whose priority is this or more is non-preemptible unless its PodGroup says otherwise
# (`CalculatePreemptibility` of KAI's pkg/common/podgroup; its `build` class is 100, `inference` 125).
NON_PREEMPTIBLE_PRIORITY = 100
# spec.schedulingBackoff: -1 (KAI's default) tries the gang in its node pool until placed; 1 tries it there once
NO_SCHEDULING_BACKOFF = -1
SINGLE_SCHEDULING_BACKOFF = 1
# Bounds on a sub-group tree (KAI sets none; an API server lets ~1.5 MB of them through): the tree is walked
# recursively, and real ones (Grove's, KAI's examples) are a few levels of at most hundreds of replicas.
MAX_SUB_GROUPS = 4096
MAX_SUB_GROUP_DEPTH = 16
_MAX_SHOWN = 80


# A Go duration (time.ParseDuration, how a metav1.Duration decodes): a sign, then numbers with units.
_GO_DURATION = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+|[-+]?0")
_GO_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_GO_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                    "h": 3600.0}


_GO_DURATION_MAX = (2**63 - 1) / 1e9  # ~292 years


def go_duration_seconds(text: str) -> float | None:
    """Seconds of a duration as Go writes one (`10m`, `1h30m`, `1.5h`, `90s`, `-2m`, `0`); None when `text`
    is not one, or longer than Go can hold (~292 years)."""
    if len(text) > 64 or not _GO_DURATION.fullmatch(text):
        return None
    seconds = float(sum(float(number) * _GO_UNIT_SECONDS[unit] for number, unit in _GO_DURATION_PART.findall(text)))
    if seconds > _GO_DURATION_MAX:
        return None  # Go's time.ParseDuration refuses it (an int64 of nanoseconds overflows)
    return -seconds if text.startswith("-") else seconds


def shown(value: str) -> str:
    """A value for a message: repr'd, long ones cut (every field here is untrusted input)."""
    return repr(value if len(value) <= _MAX_SHOWN else value[:_MAX_SHOWN] + "...")


def _field(spec_value: str, spec_field: str, annotations: dict[str, str], annotation: str, key: str,
           problems: list[Problem]) -> tuple[str, str]:
    """(value, the field it was read from) of one topologyConstraint field, the spec first."""
    from_annotation = annotations.get(annotation, "")
    where = f"metadata.annotations[{annotation}]"
    if spec_value:
        if from_annotation and from_annotation != spec_value:
            problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, where,
                                    f"{shown(from_annotation)} differs from {spec_field} {shown(spec_value)}; "
                                    f"{spec_field} is used"))
        return spec_value, spec_field
    if from_annotation:
        return from_annotation, where
    return "", ""


def kai_gang_spec(group: KaiPodGroup, key: str,
                  pool_label: str = KAI_NODE_POOL_LABEL) -> tuple[GangSpec, list[Problem]]:
    """The gang `group` defines, and its problems; `pool_label`: the node label that names KAI node pools ("":
    none)."""
    kind = KAI_POD_GROUP_PROBLEM
    spec = group.spec
    problems: list[Problem] = []
    min_member = spec.min_member
    sub_groups = _sub_groups(spec, key, problems) if spec.sub_groups else None
    if sub_groups is not None:  # a tree KAI refuses keeps the gang pending: its size does not matter then
        min_member = max(min_member or 0, 0 if sub_groups.invalid else sub_groups.least_pods(), 1)
    elif min_member is None:
        problems.append(Problem(kind, key, "spec.minMember", "is missing: a gang needs at least 1; treated as 1"))
        min_member = 1
    elif min_member < 1:
        problems.append(Problem(kind, key, "spec.minMember", f"{min_member} is below 1; treated as 1"))
        min_member = 1
    if spec.min_sub_group is not None and not spec.sub_groups:
        problems.append(Problem(kind, key, "spec.minSubGroup", "counts sub-groups, and spec.subGroups names none: "
                                "it has no effect"))
    stated = spec.preemptibility
    if stated not in ("", PREEMPTIBLE, NON_PREEMPTIBLE):
        problems.append(Problem(kind, key, "spec.preemptibility", f"{shown(stated)} is not {PREEMPTIBLE} or "
                                f"{NON_PREEMPTIBLE}; read as unset: the PodGroup's priority decides, as KAI "
                                f"decides it (non-preemptible from {NON_PREEMPTIBLE_PRIORITY})"))
        stated = ""
    preemptable = stated != NON_PREEMPTIBLE
    annotations = group.metadata.annotations
    raw = spec.topology_constraint
    topology, topology_field = _field(raw.topology, "spec.topologyConstraint.topology", annotations,
                                      KAI_TOPOLOGY_ANNOTATION, key, problems)
    required, required_field = _field(raw.required_topology_level, "spec.topologyConstraint.requiredTopologyLevel",
                                      annotations, KAI_REQUIRED_PLACEMENT_ANNOTATION, key, problems)
    preferred, preferred_field = _field(raw.preferred_topology_level,
                                        "spec.topologyConstraint.preferredTopologyLevel", annotations,
                                        KAI_PREFERRED_PLACEMENT_ANNOTATION, key, problems)
    topology_key = required
    if required:
        bad = label_key_problem(required)
        if bad is not None:  # neither a node label nor a level alias (KAI's CRD gives aliases the same form)
            topology_key = ""
            problems.append(Problem(kind, key, required_field, f"{bad}; the gang stays pending"))
    constraint = None
    if required or preferred or topology:
        constraint = KaiConstraint(topology=topology,
                                   topology_field=topology_field or "spec.topologyConstraint.topology",
                                   required=required, required_field=required_field, preferred=preferred,
                                   preferred_field=preferred_field)
    if spec.staleness_grace_period is not None:
        problems.append(Problem(kind, key, "spec.stalenessGracePeriod", f"{shown(spec.staleness_grace_period)} is "
                                "read but not implemented: toposched never evicts a gang for running below its "
                                "minimum, whatever the period", reason=UNSUPPORTED_FIELD))
    backoff = spec.scheduling_backoff
    if backoff is not None and backoff not in (NO_SCHEDULING_BACKOFF, SINGLE_SCHEDULING_BACKOFF):
        problems.append(Problem(kind, key, "spec.schedulingBackoff", f"{backoff} is not one KAI supports (-1 or 1); "
                                "read as 1, as KAI's scheduler reads any value but -1: the gang is tried in its node "
                                "pool once, then waits for a move to another pool"))
    delay = _preemption_delay(spec.preemption_delay or "", annotations, key, problems)
    node_pool = group.metadata.labels.get(pool_label, "") if pool_label else None
    if pool_label in group.metadata.labels and not node_pool:
        problems.append(Problem(kind, key, f"metadata.labels[{pool_label}]", "is empty: KAI's scheduling "
                                "shards take no PodGroup with an empty pool (the default shard takes those without "
                                "the label); read as the default pool, the nodes without the label"))
    return GangSpec(key=key, dialect=KAI, min_member=min_member, schedule_timeout_seconds=None, gang_group=(key,),
                    priority_class_name=spec.priority_class_name, preemptable=preemptable, topology_key=topology_key,
                    kai=constraint, kai_preemptibility=stated, kai_sub_groups=sub_groups,
                    kai_preemption_delay=delay, marks_unschedulable=spec.mark_unschedulable is not False,
                    kai_delay_from=_delay_from(group.metadata, key, problems) if delay else None,
                    kai_node_pool=node_pool,
                    kai_tries_once=backoff is not None and backoff != NO_SCHEDULING_BACKOFF), problems


def transition_number(text: str) -> int:
    """A KAI scheduling condition's `transitionID` as a number (one that is not reads as -1, as KAI reads it)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else -1


def latest_condition(group: KaiPodGroup) -> KaiSchedulingCondition | None:
    """The PodGroup's latest scheduling condition, as KAI finds it: the highest `transitionID` (the first of
    equals); None when it has none."""
    return max(group.status.scheduling_conditions, key=lambda c: transition_number(c.transition_id), default=None)


def _preemption_delay(spec_value: str, annotations: dict[str, str], key: str, problems: list[Problem]) -> float:
    """Seconds the gang must have been pending before it may evict anyone (0: no delay). KAI ignores a value
    that is not a Go duration, with a warning: so does toposched, in a problem."""
    value, field = _field(spec_value, "spec.preemptionDelay", annotations, KAI_PREEMPTION_DELAY_ANNOTATION, key,
                          problems)
    if not value:
        return 0.0
    seconds = go_duration_seconds(value)
    if seconds is None:
        problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, field, f"{shown(value)} is not a duration as KAI reads "
                                "one (Go's form, such as 30s, 5m or 1h30m; a number alone has no unit): ignored, "
                                "so the gang may preempt as soon as it cannot fit"))
        return 0.0
    if seconds < 0:
        problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, field, f"{shown(value)} is negative: ignored, so the "
                                "gang may preempt as soon as it cannot fit"))
        return 0.0
    return seconds


def _delay_from(meta: KaiObjectMeta, key: str, problems: list[Problem]) -> float | None:
    """When the preemption delay starts (epoch seconds): the PodGroup's creation, or the last time its pods
    were evicted when later (KAI's `kai.scheduler/last-eviction-timestamp`). None when neither is known:
    the delay then counts from when toposched first saw the gang."""
    created = rfc3339_seconds(meta.creation_timestamp)
    stamp = meta.annotations.get(KAI_LAST_EVICTION_ANNOTATION, "")
    evicted = rfc3339_seconds(stamp)
    if stamp and evicted is None:
        problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, f"metadata.annotations[{KAI_LAST_EVICTION_ANNOTATION}]",
                                f"{shown(stamp)} is not an RFC 3339 time: ignored; the preemption delay counts "
                                "from the PodGroup's creation"))
    known = [at for at in (created, evicted) if at is not None]
    return max(known) if known else None


def rfc3339_seconds(text: str) -> float | None:
    """Epoch seconds of an RFC 3339 time as the API server writes one (`2026-07-12T10:33:43Z`); None when
    `text` is empty or not one. A time without a zone is read as UTC."""
    if not text or len(text) > 64:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _sub_groups(spec: KaiPodGroupSpec, key: str, problems: list[Problem]) -> KaiSubGroups:
    """spec.subGroups as a tree under the PodGroup (`KaiSubGroups`), checked as KAI's webhook and rules check it."""
    kind = KAI_POD_GROUP_PROBLEM
    raw = spec.sub_groups
    position: dict[str, int] = {}
    for index, sub in enumerate(raw):
        if not sub.name:
            return _refused(key, f"spec.subGroups[{index}].name", "is empty", problems)
        if sub.name in position:
            return _refused(key, f"spec.subGroups[{index}].name",
                            f"{shown(sub.name)} is also spec.subGroups[{position[sub.name]}]'s", problems)
        position[sub.name] = index
    children: dict[int, list[int]] = {-1: []}  # spec.subGroups positions under each (-1: the PodGroup)
    for index, sub in enumerate(raw):
        parent = -1
        if sub.parent is not None:
            if sub.parent not in position:
                return _refused(key, f"spec.subGroups[{index}].parent",
                                f"{shown(sub.parent)} names no sub-group of this PodGroup", problems)
            parent = position[sub.parent]
        children.setdefault(parent, []).append(index)
    if len(raw) > MAX_SUB_GROUPS:
        return _refused(key, "spec.subGroups", f"lists {len(raw)} sub-groups, more than the {MAX_SUB_GROUPS} "
                        "toposched plans", problems, by_kai=False)
    order: list[int] = [-1]  # breadth first from the PodGroup: a sub-group in a cycle is never reached
    depth = {-1: 0}
    for at in order:
        for child in children.get(at, ()):
            order.append(child)
            depth[child] = depth[at] + 1
            if depth[child] > MAX_SUB_GROUP_DEPTH:
                return _refused(key, f"spec.subGroups[{child}].parent", f"nests the sub-group {depth[child]} deep, "
                                f"deeper than the {MAX_SUB_GROUP_DEPTH} levels toposched plans", problems,
                                by_kai=False)
    if len(order) != len(raw) + 1:
        stranded = min(set(range(len(raw))) - set(order))
        return _refused(key, f"spec.subGroups[{stranded}].parent",
                        f"{shown(raw[stranded].parent or '')} makes a cycle: the sub-group is under itself", problems)
    node_of = {index: number for number, index in enumerate(order)}
    groups: list[KaiSubGroupRule] = []
    for index in order:
        below = tuple(node_of[child] for child in children.get(index, ()))
        field = "spec" if index < 0 else f"spec.subGroups[{index}]"
        own: KaiPodGroupSpec | KaiSubGroup = spec if index < 0 else raw[index]
        min_member = own.min_member or 0
        if min_member < 0:
            problems.append(Problem(kind, key, f"{field}.minMember", f"{min_member} is below 0; read as 0"))
            min_member = 0
        min_sub_group = own.min_sub_group
        if min_sub_group is not None:
            if not below:
                problems.append(Problem(kind, key, f"{field}.minSubGroup",
                                        f"{min_sub_group} counts sub-groups and this one has none under it (a leaf "
                                        "counts pods, with minMember): it has no effect"))
                min_sub_group = None
            elif not 1 <= min_sub_group <= len(below):
                problems.append(Problem(kind, key, f"{field}.minSubGroup",
                                        f"{min_sub_group} is not between 1 and its {len(below)} direct sub-groups; "
                                        "read as all of them, KAI's default"))
                min_sub_group = None
        constraint = None
        if index >= 0 and (raw_constraint := raw[index].topology_constraint) is not None:
            constraint = _sub_group_constraint(raw_constraint, field, key, problems)
        name = "" if index < 0 else raw[index].name
        groups.append(KaiSubGroupRule(name=name, index=index, children=below, min_member=min_member,
                                      min_sub_group=min_sub_group, constraint=constraint))
    return KaiSubGroups(groups=tuple(groups))


def _refused(key: str, field: str, message: str, problems: list[Problem], *, by_kai: bool = True) -> KaiSubGroups:
    who = "KAI refuses such sub-groups" if by_kai else "toposched does not plan such sub-groups"
    problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, field, f"{message}: {who}; the gang stays pending until "
                            "they are mended"))
    return KaiSubGroups(groups=(), invalid=f"{field} {message}: {who}")


def _sub_group_constraint(raw: KaiTopologyConstraint, field: str, key: str,
                          problems: list[Problem]) -> KaiConstraint | None:
    if not (raw.topology or raw.required_topology_level or raw.preferred_topology_level):
        return None
    where = f"{field}.topologyConstraint"
    required = raw.required_topology_level
    if required:
        bad = label_key_problem(required)
        if bad is not None:
            problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, f"{where}.requiredTopologyLevel",
                                    f"{bad}; the gang stays pending"))
    return KaiConstraint(topology=raw.topology, topology_field=f"{where}.topology", required=required,
                         required_field=f"{where}.requiredTopologyLevel", preferred=raw.preferred_topology_level,
                         preferred_field=f"{where}.preferredTopologyLevel")


def kai_level(tree: TopologyTree, value: str) -> int:
    """The level of `tree` a KAI topology level names: the layer built from exactly that node label key, else
    the one whose KAI alias it is, as placement resolves a topology key (`placement.constraints.key_level`).
    Raises TopologyError when no layer is (the hostname is the node itself)."""
    if value == HOSTNAME_LABEL:
        raise TopologyError("Level", value, "", f"is the node itself ({HOSTNAME_LABEL}), not a network domain "
                            "layer")
    levels = tree.levels
    for level in levels[1:]:
        if level.label_keys == (value,):
            return level.index
    for level in levels[1:]:
        if level.alias and level.alias == value:
            return level.index
    known = ", ".join(f"{level.layer} ({'/'.join(level.label_keys) or level.tier_name})" for level in levels[1:])
    raise TopologyError("Level", value, "", f"is not the node label (or alias) of a layer of the topology in use, "
                        f"{tree_words(tree)} (layers: {known or 'none'})")


def tree_words(tree: TopologyTree) -> str:
    """What the tree in use is built from, in words."""
    source, name = tree.source, tree.source_name
    if source == SOURCE_KAI:
        return f"KAI Topology {name!r}"
    if source == SOURCE_KUEUE:
        return f"Kueue Topology {name!r}"
    if source == SOURCE_CNT:
        return f"ClusterNetworkTopology {name!r}"
    if source == SOURCE_HYPERNODES:
        return "Volcano HyperNodes"
    return "node labels"


def kai_wish_problems(constraint: KaiConstraint, kind: str, key: str, tree: TopologyTree) -> list[Problem]:
    """A KAI topologyConstraint checked against the tree in use: its Topology must be the one the tree is
    built from, and its levels layers of it (each message says what is done instead)."""
    problems: list[Problem] = []
    if not constraint.topology:
        if constraint.required or constraint.preferred:
            problems.append(Problem(kind, key, constraint.topology_field,
                                    "is empty: KAI needs the Topology its levels belong to named; they are looked up "
                                    f"in the topology in use, {tree_words(tree)}"))
    elif not (tree.source == SOURCE_KAI and tree.source_name == constraint.topology):
        known = constraint.topology in tree.kai_topology_names()
        problems.append(Problem(kind, key, constraint.topology_field,
                                f"{shown(constraint.topology)} is not the topology in use"
                                f"{'' if known else ' (no KAI Topology has that name)'}: the tree is built from "
                                f"{tree_words(tree)}, and the levels are looked up in it"))
    required_level = None
    if constraint.required and label_key_problem(constraint.required) is None:  # else reported as folded
        try:
            required_level = kai_level(tree, constraint.required)
        except TopologyError as error:
            consequence = ("every pod of the gang goes on one node" if constraint.required == HOSTNAME_LABEL else
                           "the gang goes on nodes sharing one value of that node label (nodes without it are not "
                           "used), the layers of the topology in use not looked at inside it")
            problems.append(Problem(kind, key, constraint.required_field,
                                    f"{shown(constraint.required)} {error.message}; {consequence}"))
    if constraint.preferred:
        try:
            preferred_level = kai_level(tree, constraint.preferred)
        except TopologyError as error:
            problems.append(Problem(kind, key, constraint.preferred_field,
                                    f"{shown(constraint.preferred)} {error.message}; this preference is dropped"))
        else:
            if required_level is not None and preferred_level < required_level:
                problems.append(Problem(kind, key, constraint.preferred_field,
                                        f"{shown(constraint.preferred)} is above the required level "
                                        f"{shown(constraint.required)}: it has no effect"))
    return problems
