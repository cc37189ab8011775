"""Kubernetes' own gangs (the Workload API) read into `GangSpec`.

Two shapes:
- Kubernetes 1.36 and 1.37: a `scheduling.k8s.io` PodGroup that pods join with
  `spec.schedulingGroup.podGroupName`, at v1beta1 or v1alpha3 (1.37) or v1alpha2 (1.36; one type reads
  the three, `events.objects.KubePodGroupSpec`). `spec.schedulingPolicy` is `gang: {minCount: N}` (all
  or nothing for N pods; 1.37 lets N change, and the new N counts from the next attempt on) or
  `basic: {}` (pods may start one by one: minimum 1; placement still keeps them as close as room allows).
  `spec.schedulingConstraints.topology[0].key` names a node label: every pod of the group goes on nodes
  sharing one value of it (`GangSpec.topology_key`; when the key is not a layer of the cluster's
  topology tree, placement builds the domains from the label itself, see `placement/constraints.py`).
  `disruptionMode` PodGroup (v1alpha2) or `all: {}` (1.37) means no member is ever preempted alone.
  The priority of a PodGroup that names a `priorityClassName` (its `spec.priority`, which the Priority
  admission controller resolves from the class; else the class's value) is the priority of every pod
  of the group, as workload-aware preemption takes it (`ClusterState.job_priority`; a PodGroup naming
  no class leaves each pod its own, as for Volcano and KAI), and `preemptionPolicy: Never` keeps the
  group from preempting.
  `resourceClaims` (DRA) is read but not implemented: it is reported. A PodGroup naming a
  `parentCompositePodGroupName` (1.37's alpha CompositePodGroup) is a leaf of a hierarchy, whose leaves are
  one GangGroup: `state/composites.py` reads it from this spec.
- Kubernetes 1.35: a `scheduling.k8s.io/v1alpha1` Workload whose `spec.podGroups[]` carry a
  `policy` of the same form; pods join with `spec.workloadRef` (`name`, `podGroup`,
  `podGroupReplicaKey`), and each replica key is a gang of its own (`state/pod_gangs.py` keys them).
Both count running members towards the minimum (waiting-and-running), as kube-scheduler's gang
plugin does. Unlike upstream, toposched preempts for these gangs, by the same rules as for every
other dialect.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from events.objects import DisruptionModeChoice, KubePodGroup, SchedulingConstraints, SchedulingPolicy, Workload
from state.gangs import KUBE_POD_GROUP_PROBLEM, KUBERNETES, UNSUPPORTED_FIELD, WORKLOAD_PROBLEM, GangSpec, Problem

DISRUPT_POD = "Pod"
DISRUPT_POD_GROUP = "PodGroup"
PREEMPTION_NEVER = "Never"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
MAX_PRIORITY = 2**31 - 1  # an int32, as the API server keeps it (a scenario or log may say anything)


def policy_minimum(basic: object | None, count: int | None, kind: str, key: str, field: str, count_name: str,
                   problems: list[Problem]) -> int:
    """The minimum of a basic or gang policy (`count`: the gang's minCount, or a CompositePodGroup's
    minGroupCount; None without a gang): the API server admits exactly one of the two; basic is 1."""
    if count is not None:
        if basic is not None:
            problems.append(Problem(kind, key, field, "sets both basic and gang; gang is used"))
        if count < 1:
            problems.append(Problem(kind, key, f"{field}.gang.{count_name}", f"{count} is not positive; treated as 1"))
            return 1
        return count
    if basic is None:
        problems.append(Problem(kind, key, field, "sets neither basic nor gang; basic is used"))
    return 1


def _min_count(policy: SchedulingPolicy, kind: str, key: str, field: str, problems: list[Problem]) -> int:
    return policy_minimum(policy.basic, policy.gang.min_count if policy.gang is not None else None, kind, key, field,
                          "minCount", problems)


def kube_pod_group_spec(group: KubePodGroup, key: str) -> tuple[GangSpec, list[Problem]]:
    kind = KUBE_POD_GROUP_PROBLEM
    spec = group.spec
    problems: list[Problem] = []
    min_member = _min_count(spec.scheduling_policy, kind, key, "spec.schedulingPolicy", problems)
    topology_key = topology_key_of(spec.scheduling_constraints, kind, key, problems)
    whole = disrupts_whole(spec.disruption_mode, kind, key, problems)
    if spec.resource_claims:
        problems.append(Problem(kind, key, "spec.resourceClaims", "is read but not implemented: dynamic resource "
                                "allocation is not considered", reason=UNSUPPORTED_FIELD))
    never = preempts_never(spec.preemption_policy, kind, key, problems)
    priority = int32_priority(spec.priority, kind, key, problems)
    return GangSpec(key=key, dialect=KUBERNETES, min_member=min_member, schedule_timeout_seconds=None,
                    gang_group=(key,), topology_key=topology_key, disrupt_whole=whole,
                    priority_class_name=spec.priority_class_name, group_priority=priority,
                    preempt_never=never), problems


def topology_key_of(constraints: SchedulingConstraints | None, kind: str, key: str, problems: list[Problem]) -> str:
    """`spec.schedulingConstraints.topology[0].key` of a PodGroup or CompositePodGroup ("" for none): the first
    non-empty one (the API server admits one at most)."""
    topology_key = ""
    if constraints is not None:
        for index, constraint in enumerate(constraints.topology):
            field = f"spec.schedulingConstraints.topology[{index}].key"
            if not constraint.key:
                problems.append(Problem(kind, key, field, "is empty; ignored"))
            elif topology_key:
                problems.append(Problem(kind, key, field, f"only one topology constraint is honoured "
                                        f"({topology_key!r}); {constraint.key!r} is ignored"))
            else:
                topology_key = constraint.key
    return topology_key


def preempts_never(policy: str, kind: str, key: str, problems: list[Problem]) -> bool:
    """`spec.preemptionPolicy` is Never (anything but Never and PreemptLowerPriority is read as the latter)."""
    if policy and policy not in (PREEMPTION_NEVER, PREEMPT_LOWER_PRIORITY):
        problems.append(Problem(kind, key, "spec.preemptionPolicy",
                                f"{policy!r} is not Never or PreemptLowerPriority; PreemptLowerPriority"))
    return policy == PREEMPTION_NEVER


def int32_priority(priority: int | None, kind: str, key: str, problems: list[Problem]) -> int | None:
    """`spec.priority` when it is an int32, as the API server keeps it (a scenario or log may say anything)."""
    if priority is not None and not -MAX_PRIORITY - 1 <= priority <= MAX_PRIORITY:
        problems.append(Problem(kind, key, "spec.priority", f"{priority} is not an int32; ignored"))
        return None
    return priority


def disrupts_whole(mode: str | DisruptionModeChoice | None, kind: str, key: str, problems: list[Problem]) -> bool:
    """Whether `spec.disruptionMode` says the group is disrupted only whole: v1alpha2's string (Pod, PodGroup)
    or 1.37's object (exactly one of `single: {}`, `all: {}`); unset is Pod / single."""
    if mode is None:
        return False
    if isinstance(mode, DisruptionModeChoice):
        if mode.single is not None and mode.all is not None:
            problems.append(Problem(kind, key, "spec.disruptionMode", "sets both single and all; single"))
            return False
        if mode.single is None and mode.all is None:
            problems.append(Problem(kind, key, "spec.disruptionMode", "sets neither single nor all; single"))
            return False
        return mode.all is not None
    if mode not in ("", DISRUPT_POD, DISRUPT_POD_GROUP):
        problems.append(Problem(kind, key, "spec.disruptionMode", f"{mode!r} is not Pod or PodGroup; Pod"))
        return False
    return mode == DISRUPT_POD_GROUP


def workload_problems(workload: Workload, key: str) -> list[Problem]:
    """What is wrong with a Workload's podGroups (reported once, on the Workload)."""
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, pod_group in enumerate(workload.spec.pod_groups):
        field = f"spec.podGroups[{index}]"
        if not pod_group.name:
            problems.append(Problem(WORKLOAD_PROBLEM, key, f"{field}.name", "is empty; no pod can join it"))
        elif pod_group.name in seen:
            problems.append(Problem(WORKLOAD_PROBLEM, key, f"{field}.name",
                                    f"{pod_group.name!r} appears twice; the first is used"))
        seen.add(pod_group.name)
        _min_count(pod_group.policy, WORKLOAD_PROBLEM, key, f"{field}.policy", problems)
    return problems


def workload_gang_spec(workload: Workload, pod_group: str, gang: str) -> GangSpec | None:
    """The gang `gang` of the Workload's podGroup `pod_group` (None when the Workload has no such podGroup)."""
    for entry in workload.spec.pod_groups:
        if entry.name == pod_group:
            min_member = _min_count(entry.policy, WORKLOAD_PROBLEM, gang, "", [])
            return GangSpec(key=gang, dialect=KUBERNETES, min_member=min_member, schedule_timeout_seconds=None,
                            gang_group=(gang,))
    return None
