"""A gang's topology wishes checked against the cluster's topology tree.

The PodGroup rules that need the tree: a Koordinator `gatherStrategy` layer and a Volcano
`highestTierAllowed` / `highestTierName` (of the gang or of a `subGroupPolicy`) must name a level of
it (and a KAI PodGroup's `topologyConstraint` must name the KAI Topology in use, and node labels of
its layers: `state/kai_gangs.py`), resolved exactly as placement resolves them
(`TopologyTree.resolve_level`: a layer name, a tierName or a tier number). The rules that need
nothing but the object are in `state/gangs.py`, and `validate_pod_group` /
`validate_volcano_pod_group` here are both together, so there is one rule set: `toposched validate`
applies it to the files, with the topology they describe; the daemon applies the first half as it
folds a PodGroup and this half whenever the tree or a PodGroup changes
(`daemon/kube/topology_status.py`, which posts each problem as an `InvalidPodGroup` Warning Event).

Each message says what the scheduler does, as placement does it: a MustGather or a hard limit on a
level the cluster does not have keeps the gang pending (its reason says so); a PreferGather or a
soft limit there is only a wish, and is dropped.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import msgspec

from events.model import object_key
from events.objects import (
    KAI_NODE_POOL_LABEL,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    CompositePodGroup,
    KaiPodGroup,
    KubePodGroup,
    PodGroup,
    VolcanoPodGroup,
    Workload,
)
from state.composites import composite_problems
from state.gangs import (
    KAI_POD_GROUP_PROBLEM,
    KUBE_POD_GROUP_PROBLEM,
    MUST_GATHER,
    SCHEDULER_PLUGINS,
    SCHEDULER_PLUGINS_PROBLEM,
    GangSpec,
    Problem,
    TierLimit,
    koordinator_gang_spec,
    volcano_gang_spec,
)
from state.kai_gangs import kai_gang_spec, kai_wish_problems
from state.topology import TopologyError, TopologyTree
from state.workload_api import kube_pod_group_spec, workload_problems

POD_GROUP_KIND = "PodGroup"
_PENDING = "the gang stays pending until the cluster has it"


def wish_problems(spec: GangSpec, tree: TopologyTree) -> list[Problem]:
    """Every layer, tier or tierName the gang names that the tree does not have."""
    key = spec.key
    problems: list[Problem] = []
    annotation = f"metadata.annotations[{NETWORK_TOPOLOGY_SPEC_ANNOTATION}]"
    for rule in spec.gather:
        try:
            tree.resolve_level(rule.layer)
        except TopologyError as error:
            consequence = _PENDING if rule.strategy == MUST_GATHER else "this PreferGather wish is dropped"
            problems.append(Problem(POD_GROUP_KIND, key, f"{annotation}.gatherStrategy[{rule.index}].layer",
                                    f"{rule.layer!r} {error.message}; {consequence}"))
    if spec.kai is not None:
        problems += kai_wish_problems(spec.kai, POD_GROUP_KIND, key, tree)
    if spec.kai_sub_groups is not None:
        for group in spec.kai_sub_groups.groups:
            if group.constraint is not None:
                problems += kai_wish_problems(group.constraint, POD_GROUP_KIND, key, tree)
    gang_level = None
    if spec.tier_limit is not None:
        gang_level = _limit_level(spec.tier_limit, key, "spec.networkTopology", tree, problems)
    for sub in spec.sub_groups:
        if sub.limit is None:
            continue
        where = f"spec.subGroupPolicy[{sub.index}].networkTopology"
        level = _limit_level(sub.limit, key, where, tree, problems)
        if level is not None and gang_level is not None and level < gang_level:  # level 0 is the cluster root
            mine, gangs = tree.levels[level], tree.levels[gang_level]
            problems.append(Problem(POD_GROUP_KIND, key, where,
                                    f"a sub-group may span up to tier {mine.tier} ({mine.layer}), above the whole "
                                    f"gang's limit, tier {gangs.tier} ({gangs.layer}); the gang's limit applies"))
    return problems


def _limit_level(limit: TierLimit, key: str, where: str, tree: TopologyTree, problems: list[Problem]) -> int | None:
    """The level a tier limit allows (None when it sets none or names nothing the tree has)."""
    if limit.highest_tier is not None:
        top = tree.levels[0].tier
        if limit.highest_tier > top:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.highestTierAllowed",
                                    f"{limit.highest_tier} is above the cluster's top tier {top}; "
                                    "the whole cluster is allowed"))
        try:
            return tree.resolve_level(limit.highest_tier)  # at least 1: lower ones were dropped when parsed
        except TopologyError as error:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.highestTierAllowed",
                                    f"{limit.highest_tier} {error.message}; {_consequence(limit)}"))
            return None
    if limit.highest_tier_name:
        try:
            return tree.resolve_level(limit.highest_tier_name)
        except TopologyError as error:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.highestTierName",
                                    f"{limit.highest_tier_name!r} {error.message}; {_consequence(limit)}"))
    return None


def _consequence(limit: TierLimit) -> str:
    return _PENDING if limit.mode == "hard" else "this soft limit is dropped"



def validate_pod_group(group: PodGroup, tree: TopologyTree | None = None) -> list[Problem]:
    """Every problem of a Koordinator PodGroup; its topology wishes only when the cluster's tree is known."""
    spec, problems = koordinator_gang_spec(group, pod_group_key(group.metadata.namespace, group.metadata.name))
    return problems + (wish_problems(spec, tree) if tree is not None else [])


def validate_volcano_pod_group(group: VolcanoPodGroup, tree: TopologyTree | None = None) -> list[Problem]:
    """Every problem of a Volcano PodGroup; its topology wishes only when the cluster's tree is known."""
    spec, problems = volcano_gang_spec(group, pod_group_key(group.metadata.namespace, group.metadata.name))
    return problems + (wish_problems(spec, tree) if tree is not None else [])


def validate_gang_object(kind_name: str, obj: PodGroup | KubePodGroup | CompositePodGroup | KaiPodGroup | Workload,
                         tree: TopologyTree | None = None, *,
                         kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> list[Problem]:
    """Every problem of a scheduler-plugins PodGroup ("SchedulerPluginsPodGroup"), a Kubernetes
    PodGroup ("KubernetesPodGroup"), a CompositePodGroup, a KAI PodGroup ("KaiPodGroup") or a Workload, with the
    same functions the fold uses."""
    key = pod_group_key(obj.metadata.namespace, obj.metadata.name)
    if isinstance(obj, Workload):
        return workload_problems(obj, key)
    if isinstance(obj, CompositePodGroup):
        return composite_problems(obj, key)
    if isinstance(obj, KaiPodGroup):
        spec, problems = kai_gang_spec(obj, key, kai_node_pool_label)
        wishes = wish_problems(spec, tree) if tree is not None else []
        return problems + [msgspec.structs.replace(p, kind=KAI_POD_GROUP_PROBLEM) for p in wishes]
    if isinstance(obj, KubePodGroup):
        spec, problems = kube_pod_group_spec(obj, key)
    else:
        spec, problems = koordinator_gang_spec(obj, key, kind=SCHEDULER_PLUGINS_PROBLEM, dialect=SCHEDULER_PLUGINS)
    wishes = wish_problems(spec, tree) if tree is not None else []
    kind = problems[0].kind if problems else (KUBE_POD_GROUP_PROBLEM if isinstance(obj, KubePodGroup)
                                              else SCHEDULER_PLUGINS_PROBLEM)
    return problems + [msgspec.structs.replace(p, kind=kind) for p in wishes]


def pod_group_key(namespace: str, name: str) -> str:
    """The gang key the fold uses; a manifest without a namespace is applied to `default`."""
    return object_key(namespace or "default", name)
