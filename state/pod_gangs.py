"""Which gang a pod joins, in every dialect, and Koordinator's gangs made of pod annotations alone.

A pod names its gang in one of these ways (the first one present wins; a pod naming two different
gangs joins the first and gets a problem naming the other):
1. label `pod-group.scheduling.sigs.k8s.io` (Koordinator, scheduler-plugins before its rename),
2. label `scheduling.x-k8s.io/pod-group` (scheduler-plugins),
3. annotation `gang.scheduling.koordinator.sh/name` (Koordinator's annotation-only gangs),
4. label `pod-group.scheduling.sigs.k8s.io/name` (scheduler-plugins' deprecated lightweight coscheduling,
   still read by Koordinator),
5. annotation `scheduling.k8s.io/group-name` (Volcano),
6. annotation `pod-group-name` (KAI Scheduler: its pod-grouper writes it; a scheduling.run.ai PodGroup),
7. `spec.schedulingGroup.podGroupName` (Kubernetes 1.36: a scheduling.k8s.io/v1alpha2 PodGroup),
8. `spec.workloadRef` (Kubernetes 1.35: a podGroup of a scheduling.k8s.io/v1alpha1 Workload; each
   `podGroupReplicaKey` is a gang of its own).
Gangs 1-7 are keyed `namespace/name`; a Workload's are `namespace/workload:podGroup[:replicaKey]`
(`:` cannot occur in a Kubernetes name, so these never collide with a PodGroup's key, and the key's
namespace part stays what it is).

A gang with no PodGroup object is described by its pods' annotations when they carry
`gang.scheduling.koordinator.sh/min-available` (or the lightweight label
`pod-group.scheduling.sigs.k8s.io/min-available`): `/waiting-time` (a Go duration: the Permit
timeout), `/total-number`, `/mode`, `/groups`, `/match-policy` (default once-satisfied, as in
Koordinator) and `/network-topology-spec` as on a PodGroup. Koordinator initialises such a gang
from the first pod it sees; a fold must not depend on arrival order, so here the member with the
smallest key that carries min-available defines the gang (`definer_of`), and its problems are
reported on that pod.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from events.model import object_key
from events.objects import (
    GANG_MIN_AVAILABLE_ANNOTATION,
    GANG_NAME_ANNOTATION,
    GANG_WAITING_TIME_ANNOTATION,
    KAI_POD_GROUP_ANNOTATION,
    LIGHTWEIGHT_GANG_NAME_LABEL,
    LIGHTWEIGHT_MIN_AVAILABLE_LABEL,
    POD_GROUP_LABEL,
    SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    VOLCANO_TASK_SPEC_ANNOTATION,
    Pod,
)
from state.gangs import (
    KOORDINATOR_PODS,
    ONCE_SATISFIED,
    POD_GANG_PROBLEM,
    GangSpec,
    Problem,
    go_int,
    koordinator_annotation_rules,
)

WORKLOAD_KEY_SEPARATOR = ":"


def workload_gang_key(namespace: str, workload: str, pod_group: str, replica_key: str = "") -> str:
    """The gang of a Workload's podGroup (and replica): `namespace/workload:podGroup[:replicaKey]`."""
    name = f"{workload}{WORKLOAD_KEY_SEPARATOR}{pod_group}"
    if replica_key:
        name += f"{WORKLOAD_KEY_SEPARATOR}{replica_key}"
    return object_key(namespace, name)


def workload_of_gang(key: str) -> tuple[str, str] | None:
    """(Workload key `namespace/name`, podGroup name) of a Workload gang key; None for any other key."""
    namespace, slash, name = key.rpartition("/")
    if WORKLOAD_KEY_SEPARATOR not in name:
        return None
    workload, _, rest = name.partition(WORKLOAD_KEY_SEPARATOR)
    pod_group = rest.partition(WORKLOAD_KEY_SEPARATOR)[0]
    return (f"{namespace}{slash}{workload}", pod_group)


# The kinds (`events.ingest.KindInfo.name`) of the objects keyed as the gang they define.
_GANG_OBJECT_KINDS = ("PodGroup", "SchedulerPluginsPodGroup", "VolcanoPodGroup", "KubernetesPodGroup", "KaiPodGroup")


def missing_spec(gang: str, unreadable: Mapping[tuple[str, str], Problem] | None = None) -> str:
    """Why a gang that pods name has no spec, in words for its pending reason; `unreadable`: the objects the
    state could not decode (`ClusterState.undecodable`), so that a PodGroup that exists but cannot be read
    is not said to be missing."""
    if unreadable:
        for kind in _GANG_OBJECT_KINDS:
            problem = unreadable.get((kind, gang))
            if problem is not None:
                return f"its {kind} cannot be read ({problem.message}); see its Warning Event"
    found = workload_of_gang(gang)
    if found is not None:
        return f"Workload {found[0]} not found, or it has no podGroup {found[1]!r}"
    return f"PodGroup not found (nor a member with annotation {GANG_MIN_AVAILABLE_ANNOTATION})"


_NONE: tuple[Problem, ...] = ()


def membership(pod: Pod, key: str) -> tuple[str, Sequence[Problem]]:
    """The gang key the pod joins ("" for none) and the problems of how it names it (kind "Pod")."""
    # The fold's hot path: one name at most, no workload reference, is every ordinary pod.
    meta = pod.metadata
    spec = pod.spec
    if spec.scheduling_group is None and spec.workload_ref is None:
        labels, annotations = meta.labels, meta.annotations
        first = labels.get(POD_GROUP_LABEL)
        second = labels.get(SCHEDULER_PLUGINS_POD_GROUP_LABEL)
        third = annotations.get(GANG_NAME_ANNOTATION)
        fourth = labels.get(LIGHTWEIGHT_GANG_NAME_LABEL)
        fifth = annotations.get(VOLCANO_GROUP_ANNOTATION)
        sixth = annotations.get(KAI_POD_GROUP_ANNOTATION)
        name = first or second or third or fourth or fifth or sixth
        if not name:
            return "", _NONE
        if not ((second and second != name) or (third and third != name) or (fourth and fourth != name)
                or (fifth and fifth != name) or (sixth and sixth != name)):
            return f"{meta.namespace}/{name}" if meta.namespace else name, _NONE
    return _membership(pod, key)


def _membership(pod: Pod, key: str) -> tuple[str, Sequence[Problem]]:
    meta = pod.metadata
    labels, annotations = meta.labels, meta.annotations
    named: list[tuple[str, str]] = []  # (gang name or key, how)
    for how, value in (
        (f"label {POD_GROUP_LABEL}", labels.get(POD_GROUP_LABEL)),
        (f"label {SCHEDULER_PLUGINS_POD_GROUP_LABEL}", labels.get(SCHEDULER_PLUGINS_POD_GROUP_LABEL)),
        (f"annotation {GANG_NAME_ANNOTATION}", annotations.get(GANG_NAME_ANNOTATION)),
        (f"label {LIGHTWEIGHT_GANG_NAME_LABEL}", labels.get(LIGHTWEIGHT_GANG_NAME_LABEL)),
        (f"annotation {VOLCANO_GROUP_ANNOTATION}", annotations.get(VOLCANO_GROUP_ANNOTATION)),
        (f"annotation {KAI_POD_GROUP_ANNOTATION}", annotations.get(KAI_POD_GROUP_ANNOTATION)),
    ):
        if value:
            named.append((object_key(meta.namespace, value), how))
    problems: list[Problem] = []
    group = pod.spec.scheduling_group
    if group is not None:
        if group.pod_group_name:
            named.append((object_key(meta.namespace, group.pod_group_name), "spec.schedulingGroup"))
        else:
            problems.append(Problem("Pod", key, "spec.schedulingGroup.podGroupName", "is empty; ignored"))
    ref = pod.spec.workload_ref
    if ref is not None:
        if ref.name and ref.pod_group:
            named.append((workload_gang_key(meta.namespace, ref.name, ref.pod_group, ref.pod_group_replica_key),
                          "spec.workloadRef"))
        else:
            problems.append(Problem("Pod", key, "spec.workloadRef", "needs both name and podGroup; ignored"))
    if not named:
        return "", problems
    gang, how = named[0]
    for other, other_how in named[1:]:
        if other != gang:
            problems.append(Problem("Pod", key, _field_of(other_how),
                                    f"names gang {other}, but the pod's {how} names {gang} first; it joins {gang}"))
    return gang, problems


def _field_of(how: str) -> str:
    kind, _, name = how.partition(" ")
    if kind == "label":
        return f"metadata.labels[{name}]"
    if kind == "annotation":
        return f"metadata.annotations[{name}]"
    return how


def task_of(pod: Pod) -> str:
    """The Volcano task a pod is part of (its `volcano.sh/task-spec` annotation; "" for none)."""
    return pod.metadata.annotations.get(VOLCANO_TASK_SPEC_ANNOTATION, "")


def defines_gang(pod: Pod) -> bool:
    """Whether the pod's own annotations (or lightweight labels) say how big its gang is."""
    return (GANG_MIN_AVAILABLE_ANNOTATION in pod.metadata.annotations
            or LIGHTWEIGHT_MIN_AVAILABLE_LABEL in pod.metadata.labels)


def annotation_gang_spec(pod: Pod, gang: str) -> tuple[GangSpec, list[Problem]]:
    """The gang `gang` as the annotations of its defining member `pod` describe it."""
    kind = POD_GANG_PROBLEM
    meta = pod.metadata
    annotations = meta.annotations
    problems: list[Problem] = []
    if LIGHTWEIGHT_MIN_AVAILABLE_LABEL in meta.labels:  # Koordinator reads the label first
        raw = meta.labels[LIGHTWEIGHT_MIN_AVAILABLE_LABEL]
        field = f"metadata.labels[{LIGHTWEIGHT_MIN_AVAILABLE_LABEL}]"
    else:
        raw = annotations.get(GANG_MIN_AVAILABLE_ANNOTATION, "")
        field = f"metadata.annotations[{GANG_MIN_AVAILABLE_ANNOTATION}]"
    source = f" (on pod {object_key(meta.namespace, meta.name)})"
    value = go_int(raw.strip())
    if value is None or value < 1:
        problems.append(Problem(kind, gang, field, f"{raw!r} is not a positive integer{source}; treated as 1"))
        min_member = 1
    else:
        min_member = value
    timeout: float | None = None
    raw_wait = annotations.get(GANG_WAITING_TIME_ANNOTATION)
    if raw_wait is not None:
        timeout = parse_go_duration(raw_wait)
        if timeout is None or timeout <= 0:
            problems.append(Problem(kind, gang, f"metadata.annotations[{GANG_WAITING_TIME_ANNOTATION}]",
                                    f"{raw_wait!r} is not a positive duration like \"600s\" or \"1h\"{source}; "
                                    "the default schedule timeout applies"))
            timeout = None
    gang_group, gather, policy = koordinator_annotation_rules(annotations, kind, gang, min_member, ONCE_SATISFIED,
                                                              problems)
    spec = GangSpec(key=gang, dialect=KOORDINATOR_PODS, min_member=min_member,
                    schedule_timeout_seconds=timeout, gang_group=gang_group, gather=gather, match_policy=policy)
    return spec, problems


_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float | None:
    """Seconds of a Go duration string ("300ms", "1.5h", "1h30m", "-2s", "0"); None when Go's
    time.ParseDuration would refuse it."""
    body = text.strip()
    sign = 1.0
    if body and body[0] in "+-":
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        return None
    total = 0.0
    position = 0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    return sign * total
