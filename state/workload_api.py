"""Kubernetes' own gangs (the Workload API) read into `GangSpec`.

Two shapes, both alpha behind the GenericWorkload feature gate:
- Kubernetes 1.36: a `scheduling.k8s.io/v1alpha2` PodGroup that pods join with
  `spec.schedulingGroup.podGroupName`. `spec.schedulingPolicy` is `gang: {minCount: N}` (all or
  nothing for N pods) or `basic: {}` (pods may start one by one: minimum 1; placement still keeps
  them as close as room allows). `spec.schedulingConstraints.topology[0].key` names a node label:
  every pod of the group goes on nodes sharing one value of it (`GangSpec.topology_key`; when the
  key is not a layer of the cluster's topology tree, placement builds the domains from the label
  itself, see `placement/constraints.py`). `disruptionMode: PodGroup` means no member is ever
  preempted alone. `resourceClaims` (DRA) and the group's `priorityClassName` / `priority` are read
  but not implemented: each pod's own priority orders and preempts, as for every dialect but Volcano and KAI
  (whose PodGroup's class is the job's priority: `ClusterState.job_priority`).
- Kubernetes 1.35: a `scheduling.k8s.io/v1alpha1` Workload whose `spec.podGroups[]` carry a
  `policy` of the same form; pods join with `spec.workloadRef` (`name`, `podGroup`,
  `podGroupReplicaKey`), and each replica key is a gang of its own (`state/pod_gangs.py` keys them).
Both count running members towards the minimum (waiting-and-running), as kube-scheduler's gang
plugin does. Unlike upstream, toposched preempts for these gangs, by the same rules as for every
other dialect.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from events.objects import KubePodGroup, SchedulingPolicy, Workload
from state.gangs import KUBE_POD_GROUP_PROBLEM, KUBERNETES, UNSUPPORTED_FIELD, WORKLOAD_PROBLEM, GangSpec, Problem

DISRUPT_POD = "Pod"
DISRUPT_POD_GROUP = "PodGroup"


def _min_count(policy: SchedulingPolicy, kind: str, key: str, field: str, problems: list[Problem]) -> int:
    """The minimum of a basic or gang policy (the API server admits exactly one of them)."""
    if policy.gang is not None:
        if policy.basic is not None:
            problems.append(Problem(kind, key, field, "sets both basic and gang; gang is used"))
        count = policy.gang.min_count
        if count < 1:
            problems.append(Problem(kind, key, f"{field}.gang.minCount",
                                    f"{count} is not positive; treated as 1"))
            return 1
        return count
    if policy.basic is None:
        problems.append(Problem(kind, key, field, "sets neither basic nor gang; basic is used"))
    return 1


def kube_pod_group_spec(group: KubePodGroup, key: str) -> tuple[GangSpec, list[Problem]]:
    kind = KUBE_POD_GROUP_PROBLEM
    spec = group.spec
    problems: list[Problem] = []
    min_member = _min_count(spec.scheduling_policy, kind, key, "spec.schedulingPolicy", problems)
    topology_key = ""
    constraints = spec.scheduling_constraints
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
    mode = spec.disruption_mode or DISRUPT_POD
    if mode not in (DISRUPT_POD, DISRUPT_POD_GROUP):
        problems.append(Problem(kind, key, "spec.disruptionMode", f"{mode!r} is not Pod or PodGroup; Pod"))
        mode = DISRUPT_POD
    if spec.resource_claims:
        problems.append(Problem(kind, key, "spec.resourceClaims", "is read but not implemented: dynamic resource "
                                "allocation is not considered", reason=UNSUPPORTED_FIELD))
    if spec.priority_class_name or spec.priority is not None:
        field = "spec.priorityClassName" if spec.priority_class_name else "spec.priority"
        problems.append(Problem(kind, key, field, "is read but not used: each pod's own priority orders and "
                                "preempts", reason=UNSUPPORTED_FIELD))
    return GangSpec(key=key, dialect=KUBERNETES, min_member=min_member, schedule_timeout_seconds=None,
                    gang_group=(key,), topology_key=topology_key,
                    disrupt_whole=mode == DISRUPT_POD_GROUP), problems


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
