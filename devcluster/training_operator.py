"""What Kubeflow's training-operator (v1.8 / v1.9) writes for a `kubeflow.org/v1` job, as pure functions: its
PodGroup, its pods and its Created condition, for each gang mode its `--gang-scheduler-name` flag chooses
(cmd/training-operator.v1/main.go; `GangScheduler`): `volcano` (any case: VolcanoControl), another non-empty
name (SchedulerPluginsControl with that name: a scheduler-plugins PodGroup), or "" (no gang scheduling; "None"
too, as `EnableGangScheduling` reads it).

The kinds (`KINDS`): PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob and MPIJob, their replicas in
spec.pytorchReplicaSpecs / tfReplicaSpecs / xgbReplicaSpecs / paddleReplicaSpecs / jaxReplicaSpecs /
mpiReplicaSpecs, a map from replica type (Master, Worker, PS, Chief, Launcher, ...) to {replicas,
restartPolicy, template}. A replica's missing `replicas` counts 1, as the defaulting webhook sets it.

PodGroup (common/job.go `ReconcileJobs`, common/scheduling.go `SyncPodGroup`): named as the job, in its namespace,
with the job's annotations (not its labels) and a controller ownerReference to the job (`GenOwnerReference`:
kubeflow.org/v1, the kind, controller and blockOwnerDeletion true); none without gang scheduling. Its spec is
written whole, from minMember = runPolicy.schedulingPolicy.minAvailable, else the sum of the replicas
(`GetTotalReplicas`), and minResources = schedulingPolicy.minResources, else `CalcPGMinResources` (common/util.go):
the replica types ordered by the value of their template's PriorityClass, highest first (an unknown or no class:
0), then the first minMember pods in that order, each adding every container's requests, or its limits when it
has no requests at all (`AddResourceList`; no init containers, overhead or pod-level resources); among equal
priorities Go walks the map in random order, here the order the job lists them; quantities written canonical,
as Go's Quantity writes them. No status: the scheduler writes it.
- volcano: `scheduling.volcano.sh/v1beta1`, spec {minMember, queue = the existing PodGroup's queue if it has
  one, else schedulingPolicy.queue, else "default"; priorityClassName = schedulingPolicy.priorityClass (omitted
  when empty); minResources (a pointer: `{}` when empty)}.
- scheduler-plugins (the `default:` fill function): `scheduling.x-k8s.io/v1alpha1`, spec {minMember,
  minResources (a plain ResourceList: omitted when empty), scheduleTimeoutSeconds =
  schedulingPolicy.scheduleTimeoutSeconds (when set, 0 too)}; no queue, no priority class.
A zero minMember is omitted in both (omitempty).

Pods (common/pod.go `createNewPod`), `<job>-<replica type lowercased>-<index>` (`GenGeneralName`): the
template's labels plus training.kubeflow.org/operator-name (`<kind lowercased>-controller`),
training.kubeflow.org/job-name, training.kubeflow.org/replica-type (lowercased),
training.kubeflow.org/replica-index, and training.kubeflow.org/job-role: master for the master role
(`IsMasterRole`: PyTorch, XGBoost, Paddle: Master; TF: Chief or Master, else Worker 0 when there is neither;
JAX: index 0); the template's annotations; spec the template's with restartPolicy the replica's (ExitCode:
Never; none: none, so the pod's default); a controller ownerReference to the job. Then the gang mode's
`DecoratePodTemplateSpec` (control/podgroup_control.go), which sets schedulerName only when the template names
none:
- volcano: annotations scheduling.k8s.io/group-name (the job) and volcano.sh/task-spec (the replica type
  lowercased, as `ReconcilePods` passes it); schedulerName "volcano". Created only once the PodGroup's
  status.phase is set and not Pending (`DelayPodCreationDueToPodGroup`).
- scheduler-plugins: label scheduling.x-k8s.io/pod-group (the job); schedulerName the flag's name. Created at
  once (its `DelayPodCreationDueToPodGroup` is false), once the PodGroup is synced.
- none: nothing added; the pods at once, schedulerName the template's (the API server's default-scheduler when
  it names none).
The environment (MASTER_ADDR, TF_CONFIG, ...), PyTorch's init container and the headless Services are not
written: no scheduler reads them. MPIJob builds its pods itself (mpi/mpijob_controller.go: `<job>-launcher`
once the workers are ready, `<job>-worker-<i>`, a ConfigMap, a ServiceAccount, a Role): not emulated, an
MPIJob gets its PodGroup only.

Status: the Created condition the controllers' create event sets (type Created, status True, reason
`<Kind>Created`, message `<Kind> <name> is created.`), and replicaStatuses per replica type (active: running
pods, succeeded, failed; zero counts omitted, as Go writes them) once the pods are reconciled.

Pure: no I/O, no clock (times are passed in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from devcluster.volcano_job import (
    GROUP_NAME,
    POD_GROUP_API_VERSION,
    TASK_SPEC,
    Amounts,
    Obj,
    add_amounts,
    amounts,
    as_dict,
    as_int,
    as_list,
    formatted,
    pod_group_admits_pods,
)

API_VERSION = "kubeflow.org/v1"

JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_ROLE = "training.kubeflow.org/job-role"

VOLCANO = "volcano"  # GangSchedulerVolcano, VolcanoControl.GetSchedulerName
DEFAULT_QUEUE = "default"
CREATED = "Created"

SCHEDULER_PLUGINS_POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins v1alpha1 PodGroupLabel


@dataclass(frozen=True)
class GangScheduler:
    """The operator's `--gang-scheduler-name`, as main.go and JobControllerConfiguration read it."""

    name: str = VOLCANO

    @property
    def volcano(self) -> bool:
        """VolcanoControl (strings.EqualFold with "volcano"); else SchedulerPluginsControl."""
        return self.name.lower() == VOLCANO

    @property
    def enabled(self) -> bool:
        """EnableGangScheduling: a PodGroup is synced and the pods decorated."""
        return self.name not in ("", "None")

    @property
    def scheduler_name(self) -> str:
        """GetSchedulerName: what a pod whose template names no scheduler gets."""
        return VOLCANO if self.volcano else self.name

    @property
    def pod_group_api_version(self) -> str:
        return POD_GROUP_API_VERSION if self.volcano else SCHEDULER_PLUGINS_POD_GROUP_API_VERSION

    def delays_pods(self, group: Obj | None) -> bool:
        """DelayPodCreationDueToPodGroup: Volcano's until the PodGroup's phase is set and not Pending."""
        return self.volcano and not pod_group_admits_pods(group)


VOLCANO_GANG = GangScheduler()

MasterRole = Callable[[Mapping[str, Obj], str, int], bool]  # IsMasterRole(replicas, replica type, index)


def _typed(*types: str) -> MasterRole:
    return lambda replicas, rtype, index: rtype in types


def _tf_master(replicas: Mapping[str, Obj], rtype: str, index: int) -> bool:
    if "Chief" in replicas or "Master" in replicas:  # ContainsChiefOrMasterSpec
        return rtype in ("Chief", "Master")
    return rtype == "Worker" and index == 0


@dataclass(frozen=True)
class JobKind:
    """One kubeflow.org/v1 kind: its names, where its replicas are and which replica is the master."""

    kind: str
    plural: str
    replica_specs: str  # the spec field holding the replica specs
    master_role: MasterRole
    creates_pods: bool = True

    @property
    def operator_name(self) -> str:
        return f"{self.kind.lower()}-controller"


KINDS: tuple[JobKind, ...] = (
    JobKind("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", _typed("Master")),
    JobKind("TFJob", "tfjobs", "tfReplicaSpecs", _tf_master),
    JobKind("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", _typed("Master")),
    JobKind("PaddleJob", "paddlejobs", "paddleReplicaSpecs", _typed("Master")),
    JobKind("JAXJob", "jaxjobs", "jaxReplicaSpecs", lambda replicas, rtype, index: index == 0),
    JobKind("MPIJob", "mpijobs", "mpiReplicaSpecs", _typed("Launcher"), creates_pods=False),
)
BY_KIND = {kind.kind: kind for kind in KINDS}


def kind_of(job: Obj) -> JobKind:
    return BY_KIND[str(job.get("kind"))]


def replica_specs(job: Obj) -> dict[str, Obj]:
    """The replica specs by replica type, in the job's order."""
    specs = as_dict(as_dict(job.get("spec")).get(kind_of(job).replica_specs))
    return {str(rtype): as_dict(spec) for rtype, spec in specs.items()}


def replicas(spec: Obj) -> int:
    """A replica spec's replicas (missing: 1, the defaulting webhook's)."""
    return as_int(spec["replicas"]) if spec.get("replicas") is not None else 1


def _scheduling_policy(job: Obj) -> Obj:
    return as_dict(as_dict(as_dict(job.get("spec")).get("runPolicy")).get("schedulingPolicy"))


def suspended(job: Obj) -> bool:
    return as_dict(as_dict(job.get("spec")).get("runPolicy")).get("suspend") is True


def owner_reference(job: Obj) -> Obj:
    """JobController.GenOwnerReference."""
    meta = job["metadata"]
    return {"apiVersion": API_VERSION, "kind": job["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


# ----------------------------------------------------------------------------- PodGroup

def min_member(job: Obj) -> int:
    found = _scheduling_policy(job).get("minAvailable")
    return as_int(found) if found is not None else sum(replicas(spec) for spec in replica_specs(job).values())


def _container_resources(pod_spec: Obj) -> Amounts:
    """AddResourceList over a pod's containers: each one's requests, or its limits if it has none."""
    total: Amounts = {}
    for container in as_list(pod_spec.get("containers")):
        resources = as_dict(as_dict(container).get("resources"))
        listed = resources.get("requests") if resources.get("requests") is not None else resources.get("limits")
        add_amounts(total, amounts(listed))
    return total


def min_resources(job: Obj, priorities: Mapping[str, int]) -> dict[str, str]:
    """CalcPGMinResources; `priorities` are the PriorityClasses' values by name."""
    def value(spec: Obj) -> int:
        name = as_dict(as_dict(spec.get("template")).get("spec")).get("priorityClassName")
        return priorities.get(str(name), 0) if name else 0

    ordered = sorted(replica_specs(job).values(), key=value, reverse=True)
    left, total = min_member(job), Amounts()
    for spec in ordered:
        count = min(left, replicas(spec))
        if count > 0:
            add_amounts(total, _container_resources(as_dict(as_dict(spec.get("template")).get("spec"))), count)
            left -= count
    return formatted(total)


def _min_resources(job: Obj, priorities: Mapping[str, int]) -> dict[str, str]:
    """schedulingPolicy.minResources (as Go's Quantity writes them), else CalcPGMinResources."""
    given = _scheduling_policy(job).get("minResources")
    return formatted(amounts(given)) if given is not None else min_resources(job, priorities)


def pod_group_spec(job: Obj, priorities: Mapping[str, int], existing_queue: str = "") -> Obj:
    """The spec ReconcileJobs' Volcano fill function writes (the whole spec)."""
    policy = _scheduling_policy(job)
    spec: Obj = {}
    member = min_member(job)
    if member:
        spec["minMember"] = member
    spec["queue"] = existing_queue or str(policy.get("queue") or "") or DEFAULT_QUEUE
    if policy.get("priorityClass"):
        spec["priorityClassName"] = str(policy["priorityClass"])
    spec["minResources"] = _min_resources(job, priorities)
    return spec


def scheduler_plugins_pod_group_spec(job: Obj, priorities: Mapping[str, int]) -> Obj:
    """The spec ReconcileJobs' `default:` fill function writes for scheduler-plugins' PodGroup (the whole spec)."""
    spec: Obj = {}
    member = min_member(job)
    if member:
        spec["minMember"] = member
    resources = _min_resources(job, priorities)
    if resources:
        spec["minResources"] = resources
    timeout = _scheduling_policy(job).get("scheduleTimeoutSeconds")
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = as_int(timeout)
    return spec


def _spec_for(gang: GangScheduler, job: Obj, priorities: Mapping[str, int], existing_queue: str = "") -> Obj:
    if gang.volcano:
        return pod_group_spec(job, priorities, existing_queue)
    return scheduler_plugins_pod_group_spec(job, priorities)


def pod_group_for(job: Obj, priorities: Mapping[str, int], gang: GangScheduler = VOLCANO_GANG) -> Obj:
    """The PodGroup SyncPodGroup creates for a job that has none (gang scheduling enabled)."""
    meta = job["metadata"]
    metadata: Obj = {"name": meta["name"], "namespace": meta["namespace"], "ownerReferences": [owner_reference(job)]}
    if meta.get("annotations"):
        metadata["annotations"] = dict(meta["annotations"])
    return {"apiVersion": gang.pod_group_api_version, "kind": "PodGroup", "metadata": metadata,
            "spec": _spec_for(gang, job, priorities)}


def pod_group_updated(group: Obj, job: Obj, priorities: Mapping[str, int],
                      gang: GangScheduler = VOLCANO_GANG) -> Obj | None:
    """SyncPodGroup on an existing PodGroup: its spec rewritten (a Volcano PodGroup's own queue kept), or None if
    unchanged (Go sends the Update anyway; an unchanged one changes nothing)."""
    spec = _spec_for(gang, job, priorities, str(as_dict(group.get("spec")).get("queue") or ""))
    return None if spec == group.get("spec") else {**group, "spec": spec}


# ----------------------------------------------------------------------------- pods

def pod_name(job: Obj, rtype: str, index: int) -> str:
    """GenGeneralName."""
    return f"{job['metadata']['name']}-{rtype.lower()}-{index}".replace("/", "-")


def pod_for(job: Obj, rtype: str, index: int, gang: GangScheduler = VOLCANO_GANG) -> Obj:
    """createNewPod: the pod `index` of replica type `rtype`, decorated for the gang mode."""
    meta, kind = job["metadata"], kind_of(job)
    specs = replica_specs(job)
    spec = specs[rtype]
    template = as_dict(spec.get("template"))
    template_meta = as_dict(template.get("metadata"))
    rt = rtype.lower()
    labels = {**as_dict(template_meta.get("labels")), OPERATOR_NAME: kind.operator_name,
              JOB_NAME: str(meta["name"]).replace("/", "-"), REPLICA_TYPE: rt, REPLICA_INDEX: str(index)}
    if kind.master_role(specs, rtype, index):
        labels[JOB_ROLE] = "master"
    annotations = dict(as_dict(template_meta.get("annotations")))
    pod_spec = dict(as_dict(template.get("spec")))
    restart = str(spec.get("restartPolicy") or "")  # SetRestartPolicy
    if restart:
        pod_spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
    else:
        pod_spec.pop("restartPolicy", None)
    if gang.enabled:  # DecoratePodTemplateSpec
        if not pod_spec.get("schedulerName"):
            pod_spec["schedulerName"] = gang.scheduler_name
        if gang.volcano:
            annotations.update({GROUP_NAME: meta["name"], TASK_SPEC: rt})
        else:
            labels[POD_GROUP_LABEL] = meta["name"]
    metadata: Obj = {"name": pod_name(job, rtype, index), "namespace": meta["namespace"], "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner_reference(job)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def wanted_pods(job: Obj) -> list[tuple[str, int]]:
    """(replica type, index) of every pod the job should have, in the job's order (none for an MPIJob)."""
    if not kind_of(job).creates_pods:
        return []
    return [(rtype, index) for rtype, spec in replica_specs(job).items() for index in range(max(0, replicas(spec)))]


# ----------------------------------------------------------------------------- status

def created_condition(job: Obj, stamp: str) -> Obj:
    kind = str(job["kind"])
    return {"type": CREATED, "status": "True", "reason": f"{kind}{CREATED}",
            "message": f"{kind} {job['metadata']['name']} is created.", "lastUpdateTime": stamp,
            "lastTransitionTime": stamp}


def with_created(job: Obj, stamp: str) -> Obj:
    """The job's status with the Created condition, added if it has none."""
    status = dict(as_dict(job.get("status")))
    conditions = [as_dict(c) for c in as_list(status.get("conditions"))]
    if not any(c.get("type") == CREATED for c in conditions):
        status["conditions"] = [*conditions, created_condition(job, stamp)]
    return status


def replica_statuses(job: Obj, pods: Iterable[Obj]) -> dict[str, Obj]:
    """updateJobReplicaStatuses over the job's pods: per replica type, active (Running), succeeded, failed."""
    by_type = {rtype.lower(): rtype for rtype in replica_specs(job)}
    counts: dict[str, dict[str, int]] = {rtype: {} for rtype in replica_specs(job)}
    for pod in pods:
        rtype = by_type.get(str(as_dict(as_dict(pod.get("metadata")).get("labels")).get(REPLICA_TYPE)))
        field = {"Running": "active", "Succeeded": "succeeded", "Failed": "failed"}.get(
            str(as_dict(pod.get("status")).get("phase") or ""))
        if rtype is not None and field is not None:
            counts[rtype][field] = counts[rtype].get(field, 0) + 1
    return dict(counts)
