"""What Volcano's job controller (vc-controller-manager, pkg/controllers/job) writes for a
`batch.volcano.sh/v1alpha1` Job, as pure functions: its PodGroup, its pods and its status.

PodGroup (job_controller_actions.go `createOrUpdatePodGroup`): `scheduling.volcano.sh/v1beta1`, named
`<job name>-<job uid>` (`generateRelatedPodGroupName`; older Volcano named it after the job alone), in the
job's namespace, with the job's annotations and labels, an ownerReference to the job (NewControllerRef:
controller and blockOwnerDeletion true); spec minMember = spec.minAvailable, minTaskMember = each task's
minAvailable, else its replicas (`getMinTaskMember`), queue, priorityClassName (when set), minResources
(`calcPGMinResources`, below) and networkTopology (mode, then highestTierAllowed or else highestTierName).
No status: the scheduler writes it. An existing one is brought back to the job's priorityClassName,
minMember, minResources and minTaskMember (`shouldUpdateExistingPodGroup`).

minResources (`calcPGMinResources`, job_controller_util.go `TasksPriority`): the tasks ordered by the value of
their template's PriorityClass, highest first (a stable order among equals, as Go's sort of so few tasks
keeps it); if spec.minAvailable is below the sum of the tasks' minAvailable (or replicas), the resources of
the first minAvailable pods in that order (`CalcFirstCountResources`); otherwise each task's minAvailable
pods, then the other replicas in the same order until minAvailable pods are counted (`CalcPGMinResources`).
A pod counts what `util.GetPodQuotaUsage` counts: kube's quota PodUsageFunc (`count/pods` 1, `pods` 1, cpu /
memory / ephemeral-storage requests under their name and `requests.<name>`, their limits as `limits.<name>`,
hugepages-* requests under both names, an extended resource's request as `requests.<name>`) plus, for a
non-native `requests.<name>`, the same amount as `<name>`. The pod's requests and limits are resource
helper's PodRequests / PodLimits over the template (containers summed, init containers by the max rule with
sidecars, pod-level requests, overhead); the template is not defaulted (a CRD's is not), so a container
with limits only has no requests in it.

Pods (job_controller_util.go `createJobPod`): `<job>-<task>-<index>` for index < replicas, in the job's
namespace, ownerReference to the job; the template's labels, annotations and spec; spec.schedulerName the
job's when the template has none, spec.priorityClassName the job's when the template has none. Annotations
`volcano.sh/task-index`, `volcano.sh/task-spec` (the task), `scheduling.k8s.io/group-name` (the PodGroup),
`volcano.sh/job-name`, `volcano.sh/queue-name`, `volcano.sh/job-version` (status.version),
`volcano.sh/template-uid` (`<job>-<task>`), `volcano.sh/job-retry-count` (status.retryCount), and the job's
own `volcano.sh/preemptable`, `volcano.sh/cooldown-time`, `volcano.sh/revocable-zone`,
`volcano.sh/jdb-min-available` (else `volcano.sh/jdb-max-unavailable`). Labels `volcano.sh/task-index`,
`volcano.sh/job-name`, `volcano.sh/task-spec`, `volcano.sh/job-namespace`, `volcano.sh/queue-name`, and the
job's labels `volcano.sh/preemptable` and `volcano.sh/cooldown-time`.

Status (`syncJob`, state/pending.go and running.go): pending / running / succeeded / failed / unknown count
the pods by phase, terminating those being deleted, taskStatusCount per task and phase; minAvailable from
the spec. The phase: Pending until spec.minAvailable <= running + succeeded + failed, then Running; Running
until every replica has succeeded or failed, then Completed (Failed if minSuccess is set and not reached, or
a task's succeeded pods fall short of its minAvailable when the job's minAvailable covers every task's, or
fewer than minAvailable succeeded), or Completed once minSuccess pods succeeded.

Pure: no I/O, no clock (times are passed in).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from fractions import Fraction
from typing import Any

from manifests.quantity import DECIMAL_SI, QuantityError, format_value, parse

Obj = dict[str, Any]
Amounts = dict[str, tuple[Fraction, str]]  # resource -> (exact value, quantity format)

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
JOB_KIND = "Job"
POD_GROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"

GROUP_NAME = "scheduling.k8s.io/group-name"  # scheduling v1beta1 KubeGroupNameAnnotationKey
TASK_INDEX = "volcano.sh/task-index"
TASK_SPEC = "volcano.sh/task-spec"
JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
JOB_VERSION = "volcano.sh/job-version"
TEMPLATE_UID = "volcano.sh/template-uid"  # batch v1alpha1 PodTemplateKey
JOB_RETRY_COUNT = "volcano.sh/job-retry-count"
PREEMPTABLE = "volcano.sh/preemptable"
COOLDOWN_TIME = "volcano.sh/cooldown-time"
REVOCABLE_ZONE = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"

PENDING, RUNNING, COMPLETED, FAILED = "Pending", "Running", "Completed", "Failed"
POD_GROUP_PENDING = "Pending"

_PHASE_COUNTS = {"Pending": "pending", "Running": "running", "Succeeded": "succeeded", "Failed": "failed"}
_COUNTS = ("pending", "running", "succeeded", "failed", "terminating", "unknown")
_NATIVE_USAGE = ("cpu", "memory", "ephemeral-storage")


def as_dict(value: Any) -> Obj:
    """`value` when it is a mapping, else an empty one (a job is untrusted JSON; admission reads it too)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0




def tasks(job: Obj) -> list[Obj]:
    return [as_dict(task) for task in as_list(as_dict(job.get("spec")).get("tasks"))]


def pod_group_name(job: Obj) -> str:
    meta = job["metadata"]
    return f"{meta['name']}-{meta['uid']}"


def owner_reference(job: Obj) -> Obj:
    """metav1.NewControllerRef(job, JobKind)."""
    meta = job["metadata"]
    return {"apiVersion": JOB_API_VERSION, "kind": JOB_KIND, "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def controller_uid(obj: Obj, api_version: str = JOB_API_VERSION, kinds: Container[str] = (JOB_KIND,)) -> str | None:
    """The uid of the object controlling `obj` if it is of `api_version` and one of `kinds` (by default a Volcano
    Job)."""
    for ref in as_list(as_dict(obj.get("metadata")).get("ownerReferences")):
        ref = as_dict(ref)
        if ref.get("controller") and ref.get("apiVersion") == api_version and ref.get("kind") in kinds:
            return str(ref.get("uid") or "")
    return None


def min_task_member(task: Obj) -> int:
    found = task.get("minAvailable")
    return as_int(found) if found is not None else as_int(task.get("replicas"))


# ----------------------------------------------------------------------------- minResources

def amounts(listed: Any) -> Amounts:
    """A ResourceList's quantities, parsed (an unparsable one left out)."""
    found: Amounts = {}
    for name, raw in as_dict(listed).items():
        try:
            found[str(name)] = parse(raw)
        except (QuantityError, TypeError):
            continue
    return found


def add_amounts(total: Amounts, more: Amounts, times: int = 1) -> None:
    """quantity.Add of each of `more` (times `times`) into `total`; a new name keeps its own format."""
    for name, (value, form) in more.items():
        if name in total:
            total[name] = (total[name][0] + value * times, total[name][1])
        else:
            total[name] = (value * times, form)


def _max(total: Amounts, more: Amounts) -> None:
    for name, (value, form) in more.items():
        if name not in total or value > total[name][0]:
            total[name] = (value, form)


def _pod_figure(spec: Obj, field: str) -> Amounts:
    """PodRequests (`field` "requests") or PodLimits ("limits") of a pod spec, as kube's resource helper
    computes them."""
    total: Amounts = {}
    for container in as_list(spec.get("containers")):
        add_amounts(total, amounts(as_dict(as_dict(container).get("resources")).get(field)))
    sidecars: Amounts = {}
    starting: Amounts = {}
    for container in as_list(spec.get("initContainers")):
        alone = amounts(as_dict(as_dict(container).get("resources")).get(field))
        if as_dict(container).get("restartPolicy") == "Always":
            add_amounts(total, alone)
            add_amounts(sidecars, alone)
            alone = dict(sidecars)
        else:
            add_amounts(alone, sidecars)
        _max(starting, alone)
    _max(total, starting)
    pod_level = amounts(as_dict(spec.get("resources")).get(field))
    for name in ("cpu", "memory"):
        if name in pod_level:
            total[name] = pod_level[name]
    overhead = amounts(spec.get("overhead"))
    if field == "requests":
        add_amounts(total, overhead)
    else:
        add_amounts(total, {name: amount for name, amount in overhead.items() if name in total})
    return total


def _native(name: str) -> bool:
    """v1helper.IsNativeResource: no domain, or one under kubernetes.io."""
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    """v1helper.IsExtendedResourceName: not native, not `requests.`-prefixed."""
    return not _native(name) and not name.startswith("requests.")


def pod_usage(pod_spec: Obj) -> Amounts:
    """Volcano's util.GetPodQuotaUsage of a pod with this spec (no status: never terminal)."""
    requests, limits = _pod_figure(pod_spec, "requests"), _pod_figure(pod_spec, "limits")
    usage: Amounts = {"count/pods": (Fraction(1), DECIMAL_SI), "pods": (Fraction(1), DECIMAL_SI)}
    for name in _NATIVE_USAGE:
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = amount
        if _extended(name):
            usage[f"requests.{name}"] = amount
    for name, amount in list(usage.items()):
        if name.startswith("requests.") and not _native(name):
            usage[name.removeprefix("requests.")] = amount
    return usage


def _by_priority(job: Obj, priorities: Mapping[str, int]) -> list[Obj]:
    def value(task: Obj) -> int:
        name = as_dict(as_dict(task.get("template")).get("spec")).get("priorityClassName")
        return priorities.get(str(name), 0) if name else 0
    return sorted(tasks(job), key=value, reverse=True)  # stable: equals keep the job's order


def min_resources(job: Obj, priorities: Mapping[str, int]) -> dict[str, str]:
    """calcPGMinResources; `priorities` are the PriorityClasses' values by name."""
    ordered = _by_priority(job, priorities)
    job_min = as_int(as_dict(job.get("spec")).get("minAvailable"))
    total: Amounts = {}

    def take(task: Obj, count: int) -> None:
        if count > 0:
            add_amounts(total, pod_usage(as_dict(as_dict(task.get("template")).get("spec"))), count)

    if job_min < sum(min_task_member(task) for task in ordered):  # CalcFirstCountResources
        left = job_min
        for task in ordered:
            replicas = as_int(task.get("replicas"))
            take(task, min(left, replicas))
            if left <= replicas:
                break
            left -= replicas
    else:  # CalcPGMinResources
        counted = 0
        for task in ordered:
            if task.get("minAvailable") is None:
                continue
            valid = min(as_int(task.get("minAvailable")), job_min - counted)
            take(task, valid)
            counted += valid
            if counted >= job_min:
                break
        left = job_min - counted
        for task in ordered:
            if left <= 0:
                break
            replicas = as_int(task.get("replicas"))
            spare = replicas if task.get("minAvailable") is None else replicas - as_int(task.get("minAvailable"))
            if spare <= 0:
                continue
            take(task, min(left, spare))
            left -= min(left, spare)
    return formatted(total)


def formatted(total: Amounts) -> dict[str, str]:
    """A ResourceList as the API server writes it: each quantity canonical, in its own format."""
    return {name: format_value(value, form) for name, (value, form) in sorted(total.items())}


# ----------------------------------------------------------------------------- PodGroup

def pod_group_spec(job: Obj, priorities: Mapping[str, int]) -> Obj:
    spec = as_dict(job.get("spec"))
    group: Obj = {
        "minMember": as_int(spec.get("minAvailable")),
        "minTaskMember": {str(task.get("name") or ""): min_task_member(task) for task in tasks(job)},
        "queue": str(spec.get("queue") or ""),
        "minResources": min_resources(job, priorities),
    }
    if spec.get("priorityClassName"):
        group["priorityClassName"] = spec["priorityClassName"]
    topology = as_dict(spec.get("networkTopology"))
    if spec.get("networkTopology") is not None:
        written: Obj = {"mode": topology.get("mode", "")}
        if topology.get("highestTierAllowed") is not None:
            written["highestTierAllowed"] = topology["highestTierAllowed"]
        elif topology.get("highestTierName"):
            written["highestTierName"] = topology["highestTierName"]
        group["networkTopology"] = written
    return group


def pod_group_for(job: Obj, priorities: Mapping[str, int]) -> Obj:
    """The PodGroup createOrUpdatePodGroup creates for a job that has none."""
    meta = job["metadata"]
    metadata: Obj = {"name": pod_group_name(job), "namespace": meta["namespace"],
                     "ownerReferences": [owner_reference(job)]}
    for field in ("annotations", "labels"):
        if meta.get(field):
            metadata[field] = dict(meta[field])
    return {"apiVersion": POD_GROUP_API_VERSION, "kind": "PodGroup", "metadata": metadata,
            "spec": pod_group_spec(job, priorities)}


def pod_group_updated(group: Obj, job: Obj, priorities: Mapping[str, int]) -> Obj | None:
    """shouldUpdateExistingPodGroup: the PodGroup with the job's priorityClassName, minMember, minResources
    and minTaskMember, or None if it has them already."""
    spec = dict(as_dict(group.get("spec")))
    wanted = pod_group_spec(job, priorities)
    changed = False
    if spec.get("priorityClassName", "") != wanted.get("priorityClassName", ""):
        if wanted.get("priorityClassName"):
            spec["priorityClassName"] = wanted["priorityClassName"]
        else:
            spec.pop("priorityClassName", None)
        changed = True
    if spec.get("minMember") != wanted["minMember"] or spec.get("minResources") != wanted["minResources"]:
        spec["minMember"], spec["minResources"] = wanted["minMember"], wanted["minResources"]
        changed = True
    members = dict(as_dict(spec.get("minTaskMember")))
    for task, count in wanted["minTaskMember"].items():
        if members.get(task) != count:
            members[task] = count
            changed = True
    if spec.get("minTaskMember") is None:
        changed = True
    spec["minTaskMember"] = members
    return {**group, "spec": spec} if changed else None


def pod_group_admits_pods(group: Obj | None) -> bool:
    """syncJob creates the pods only once the PodGroup's phase is set and not Pending (the scheduler's
    enqueue made it Inqueue)."""
    phase = as_dict(as_dict(group).get("status")).get("phase") if group is not None else None
    return bool(phase) and phase != POD_GROUP_PENDING


# ----------------------------------------------------------------------------- pods

def pod_name(job: Obj, task: str, index: int) -> str:
    return f"{job['metadata']['name']}-{task}-{index}"


def pod_for(job: Obj, task: Obj, index: int) -> Obj:
    """createJobPod: the pod `index` of `task`."""
    meta, spec, status = job["metadata"], as_dict(job.get("spec")), as_dict(job.get("status"))
    template = as_dict(task.get("template"))
    template_meta = as_dict(template.get("metadata"))
    task_name = str(task.get("name") or "") or "default"
    queue = str(spec.get("queue") or "")
    pod_spec = dict(as_dict(template.get("spec")))
    if not pod_spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec.get("schedulerName", "")
    if not pod_spec.get("priorityClassName") and spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec["priorityClassName"]
    job_annotations, job_labels = as_dict(meta.get("annotations")), as_dict(meta.get("labels"))
    annotations = {
        **as_dict(template_meta.get("annotations")),
        TASK_INDEX: str(index), TASK_SPEC: task_name, GROUP_NAME: pod_group_name(job), JOB_NAME: meta["name"],
        QUEUE_NAME: queue, JOB_VERSION: str(as_int(status.get("version"))),
        TEMPLATE_UID: f"{meta['name']}-{task_name}", JOB_RETRY_COUNT: str(as_int(status.get("retryCount"))),
    }
    for key in (PREEMPTABLE, COOLDOWN_TIME, REVOCABLE_ZONE):
        if key in job_annotations:
            annotations[key] = job_annotations[key]
    if JDB_MIN_AVAILABLE in job_annotations:
        annotations[JDB_MIN_AVAILABLE] = job_annotations[JDB_MIN_AVAILABLE]
    elif JDB_MAX_UNAVAILABLE in job_annotations:
        annotations[JDB_MAX_UNAVAILABLE] = job_annotations[JDB_MAX_UNAVAILABLE]
    labels = {
        **as_dict(template_meta.get("labels")),
        TASK_INDEX: str(index), JOB_NAME: meta["name"], TASK_SPEC: task_name, JOB_NAMESPACE: meta["namespace"],
        QUEUE_NAME: queue,
    }
    for key in (PREEMPTABLE, COOLDOWN_TIME):
        if key in job_labels:
            labels[key] = job_labels[key]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name(job, task_name, index), "namespace": meta["namespace"],
                     "labels": labels, "annotations": annotations, "ownerReferences": [owner_reference(job)]},
        "spec": pod_spec,
    }


def wanted_pods(job: Obj) -> list[tuple[Obj, int]]:
    """(task, index) of every pod the job should have, in the job's order."""
    return [(task, index) for task in tasks(job) for index in range(max(0, as_int(task.get("replicas"))))]


# ----------------------------------------------------------------------------- status

def initial_status(job: Obj, stamp: str) -> Obj:
    """initJobStatus: a new job's status (phase Pending, its minAvailable, the Pending condition)."""
    status = dict(as_dict(job.get("status")))
    status["state"] = {"phase": PENDING, "lastTransitionTime": stamp}
    minimum = as_int(as_dict(job.get("spec")).get("minAvailable"))
    if minimum:
        status["minAvailable"] = minimum
    status["conditions"] = [*as_list(status.get("conditions")), {"status": PENDING, "lastTransitionTime": stamp}]
    return status


def counted_status(job: Obj, pods: Iterable[Obj]) -> Obj:
    """The status syncJob computes from the job's pods (the state left as it is); zero counts omitted, as Go
    writes them."""
    status = dict(as_dict(job.get("status")))
    counts = dict.fromkeys(_COUNTS, 0)
    per_task: dict[str, dict[str, int]] = {}
    for pod in pods:
        if as_dict(pod.get("metadata")).get("deletionTimestamp"):
            counts["terminating"] += 1
            continue
        phase = str(as_dict(pod.get("status")).get("phase") or "")
        counts[_PHASE_COUNTS.get(phase, "unknown")] += 1
        task = as_dict(as_dict(pod.get("metadata")).get("annotations")).get(TASK_SPEC)
        if task is not None:
            phases = per_task.setdefault(str(task), {})
            key = phase if phase in _PHASE_COUNTS else "Unknown"
            phases[key] = phases.get(key, 0) + 1
    for name, count in counts.items():
        if count:
            status[name] = count
        else:
            status.pop(name, None)
    minimum = as_int(as_dict(job.get("spec")).get("minAvailable"))
    if minimum:
        status["minAvailable"] = minimum
    else:
        status.pop("minAvailable", None)
    if per_task:
        status["taskStatusCount"] = {task: {"phase": phases} for task, phases in sorted(per_task.items())}
    else:
        status.pop("taskStatusCount", None)
    return status


def next_phase(job: Obj, status: Obj) -> str:
    """The phase the Pending and Running states' sync moves the job to (its phase if it stays)."""
    spec = as_dict(job.get("spec"))
    phase = str(as_dict(status.get("state")).get("phase") or "")
    running, succeeded, failed = (as_int(status.get(name)) for name in ("running", "succeeded", "failed"))
    minimum = as_int(spec.get("minAvailable"))
    if phase == PENDING:
        return RUNNING if minimum <= running + succeeded + failed else PENDING
    if phase != RUNNING:
        return phase
    replicas = sum(as_int(task.get("replicas")) for task in tasks(job))
    if replicas == 0:
        return phase
    min_success = spec.get("minSuccess")
    if min_success is not None and succeeded >= as_int(min_success):
        return COMPLETED
    if succeeded + failed != replicas:
        return phase
    if minimum >= sum(min_task_member(task) for task in tasks(job)):
        counts = as_dict(status.get("taskStatusCount"))
        for task in tasks(job):
            if task.get("minAvailable") is None or str(task.get("name")) not in counts:
                continue
            done = as_int(as_dict(as_dict(counts[str(task.get("name"))]).get("phase")).get("Succeeded"))
            if done < as_int(task["minAvailable"]):
                return FAILED
    if min_success is not None and succeeded < as_int(min_success):
        return FAILED
    return COMPLETED if succeeded >= minimum else FAILED


def with_phase(status: Obj, phase: str, stamp: str) -> Obj:
    """The status moved to `phase`: the state's lastTransitionTime and a condition for it."""
    state = {**as_dict(status.get("state")), "phase": phase, "lastTransitionTime": stamp}
    conditions = [*as_list(status.get("conditions")), {"status": phase, "lastTransitionTime": stamp}]
    return {**status, "state": state, "conditions": conditions}
