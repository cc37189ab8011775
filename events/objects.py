"""Slim, typed shapes of the Kubernetes objects toposched reads.

Decoded straight from the API's JSON (camelCase keys, unknown fields ignored) with msgspec, and
stored in the event log as msgpack. These are *not* the OpenAPI model classes: only the fields the
scheduler reads are here (no images, limits, owner references, creation time or node capacity:
nothing reads them; the generation only so a pod's conditions can say which they were written for),
so decoding a 100 KB pod costs what its few scheduling fields cost, in time, in the log and in memory,
where a cluster holds hundreds of thousands of them.

Values that need interpretation (resource quantities, annotation JSON) stay raw strings here; the
fold in `state/` interprets them and records a problem naming the object and field when they are
malformed, so one bad object never breaks decoding of the stream.

Annotations are the one open-ended field: `kubectl apply` copies the whole object into
`kubectl.kubernetes.io/last-applied-configuration`, and tools hang megabytes there. `slim()` keeps
only the annotations toposched reads (`KEPT_ANNOTATIONS`, and the simulator's `sim.toposched.io/`
family), and drops a pod's status conditions but a pending pod's `PodScheduled=False`
(`scheduling_conditions`) and its container statuses, but while an in-place resize is under way
(`resize_status`); every object is
slimmed as it is decoded (`events.ingest.decode_object`), so the rest never reaches the event log
or the memory. Labels are kept whole: node labels feed the topology and
node affinity, pod labels feed sub-group selectors, and either may use any key.

An object whose slim form is still larger than the log's record cap is logged as its accounting
core (`pod_core`, `node_core`): what capacity accounting needs, marked with `OVERSIZED_ANNOTATION`,
so it is counted where it runs but never placed on or placed (see `daemon.scheduling.journal`).

Pure data: no I/O, nothing of ours imported.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec

# Every integer field: what the API server's int32/int64 fields can hold. A larger number (which a
# real API server refuses, but a hand-made object or a stray client may carry) makes the object
# undecodable, with the field named, instead of breaking the event log's msgpack encoding later.
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class _K8s(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, frozen=True, gc=False):
    """Base for Kubernetes shapes: camelCase on the wire, defaults omitted when encoding.

    `gc=False`: these are trees of plain data that never form reference cycles, and a cluster holds
    hundreds of thousands of them; untracked, the cyclic GC never walks them.
    """


# --------------------------------------------------------------------------- metadata


class ObjectMeta(_K8s, frozen=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    # A pod's, since Kubernetes 1.34 (KEP-5067): 1 at creation, one more per change of its spec. A condition
    # written on a pod names the generation it was decided for (`Condition.observed_generation`). 0: not set.
    generation: Int64 = 0
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: Int64 | None = None


# --------------------------------------------------------------------------- nodes


class Taint(_K8s, frozen=True):
    key: str = ""
    value: str = ""
    effect: str = ""


class NodeSpec(_K8s, frozen=True):
    taints: list[Taint] = []
    unschedulable: bool = False


class NodeStatus(_K8s, frozen=True):
    allocatable: dict[str, str] = {}


class Node(_K8s, frozen=True):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = ObjectMeta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


# --------------------------------------------------------------------------- pods


class ResourceRequirements(_K8s, frozen=True):
    """Requests only: the API server has already defaulted requests from limits, and fit reads requests."""

    requests: dict[str, str] = {}


class ContainerPort(_K8s, frozen=True):
    """A container port as far as placement is concerned: the host port it holds on its node (0: none;
    the API server sets it to the container port for a pod on the host network), of which protocol
    (the API server defaults it to TCP), on which host IP ("": all of them)."""

    host_port: Int64 = 0
    protocol: str = "TCP"
    host_ip: str = ""


SIDECAR_RESTART_POLICY = "Always"  # an init container's restartPolicy that makes it a sidecar


class Container(_K8s, frozen=True):
    name: str = ""
    resources: ResourceRequirements = ResourceRequirements()
    ports: list[ContainerPort] = []
    # "Always" on an init container makes it a sidecar (native sidecars, GA in Kubernetes 1.33): it runs
    # beside the containers, so its requests add to theirs (`state.cluster._pod_requests`).
    restart_policy: str = ""


class Toleration(_K8s, frozen=True):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: Int64 | None = None


class NodeSelectorRequirement(_K8s, frozen=True):
    key: str = ""
    operator: str = ""
    values: list[str] = []


class NodeSelectorTerm(_K8s, frozen=True):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(_K8s, frozen=True):
    node_selector_terms: list[NodeSelectorTerm] = []


class NodeAffinity(_K8s, frozen=True):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class PodAffinityTerm(_K8s, frozen=True):
    """One required term of podAffinity / podAntiAffinity (`placement/pod_affinity.py` places by it). A
    nil labelSelector selects no pod, an empty one every pod; namespaces and namespaceSelector both
    absent mean the namespace of the pod that carries the term."""

    topology_key: str = ""
    label_selector: LabelSelector | None = None
    namespaces: list[str] = []
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] = []
    mismatch_label_keys: list[str] = []


class PodAffinity(_K8s, frozen=True):
    """podAffinity or podAntiAffinity, as far as toposched reads it: its required terms (preferred ones
    only score, and toposched does not score by them)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = []


class Affinity(_K8s, frozen=True):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(_K8s, frozen=True):
    """One of `spec.topologySpreadConstraints` (`placement/pod_spread.py` places by those with
    `whenUnsatisfiable: DoNotSchedule`). Absent policies and minDomains take kube-scheduler's defaults
    there (Honor, Ignore, 1); a nil labelSelector selects no pod. `maxSkew` is required by the API
    server: None is a record written before toposched kept it (its next update brings it)."""

    topology_key: str = ""
    when_unsatisfiable: str = ""
    max_skew: Int64 | None = None
    label_selector: LabelSelector | None = None
    min_domains: Int64 | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


class PodResourceClaim(_K8s, frozen=True):
    name: str = ""


class SchedulingGroup(_K8s, frozen=True):
    """Pod.spec.schedulingGroup (Kubernetes 1.36 on, Workload API): the scheduling.k8s.io PodGroup it joins."""

    pod_group_name: str = ""


class WorkloadReference(_K8s, frozen=True):
    """Pod.spec.workloadRef (Kubernetes 1.35, Workload API): a podGroup of a scheduling.k8s.io/v1alpha1
    Workload; each `podGroupReplicaKey` is its own gang."""

    name: str = ""
    pod_group: str = ""
    pod_group_replica_key: str = ""


class SchedulingGate(_K8s, frozen=True):
    """One of Pod.spec.schedulingGates (Pod Scheduling Readiness, GA in Kubernetes 1.30): while a pod
    has any, no scheduler may place it (the API server refuses its Binding)."""

    name: str = ""


class PersistentVolumeClaimVolumeSource(_K8s, frozen=True):
    claim_name: str = ""


class ClaimTemplateSpec(_K8s, frozen=True):
    storage_class_name: str | None = None


class ClaimTemplate(_K8s, frozen=True):
    spec: ClaimTemplateSpec = ClaimTemplateSpec()


class EphemeralVolumeSource(_K8s, frozen=True):
    """A generic ephemeral volume: the ephemeral volume controller creates its claim from the template,
    named `<pod name>-<volume name>` and controlled by the pod (the simulator, its own controller, reads
    the template's class)."""

    volume_claim_template: ClaimTemplate = ClaimTemplate()


class Volume(_K8s, frozen=True):
    """One of Pod.spec.volumes that is backed by a PersistentVolumeClaim (`slim()` drops the others:
    configMap, secret, emptyDir and projected volumes never constrain where a pod may go)."""

    name: str = ""
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None

    @property
    def uses_claim(self) -> bool:
        return self.persistent_volume_claim is not None or self.ephemeral is not None


class PodSpec(_K8s, frozen=True):
    node_name: str = ""
    scheduler_name: str = ""
    priority: Int64 | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    affinity: Affinity | None = None
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: dict[str, str] = {}
    termination_grace_period_seconds: Int64 | None = None
    scheduling_group: SchedulingGroup | None = None
    workload_ref: WorkloadReference | None = None
    scheduling_gates: list[SchedulingGate] = []
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    resource_claims: list[PodResourceClaim] = []
    # Pod-level resources (KEP-2837, beta and on by default since Kubernetes 1.34): where set, its cpu,
    # memory and hugepages requests are the pod's, whatever its containers ask.
    resources: ResourceRequirements | None = None
    volumes: list[Volume] = []  # only those backed by a claim (see `Volume`)


class Condition(_K8s, frozen=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: Int64 = 0  # the object's generation the condition was decided for (0: not said)


class ContainerResourceStatus(_K8s, frozen=True):
    """Of a container's status, what in-place resize (KEP-1287, on by default since Kubernetes 1.33)
    makes kube-scheduler count: the requests the kubelet allocated to the container and those it has
    applied (`resources.requests`). None: not reported (the pod's spec answers instead)."""

    name: str = ""
    allocated_resources: dict[str, str] | None = None
    resources: ResourceRequirements | None = None


class PodStatus(_K8s, frozen=True):
    phase: str = ""
    nominated_node_name: str = ""
    conditions: list[Condition] = []
    # Why a pod failed, as the kubelet writes it: a pod its admission refused is Failed with reason
    # OutOf<resource>, NodePorts, ... and a message "Pod was rejected: ..." (empty for most pods).
    reason: str = ""
    message: str = ""
    # Kept by `slim` only while a resize makes them differ from the spec's requests (`resize_status`).
    container_statuses: list[ContainerResourceStatus] = []
    init_container_statuses: list[ContainerResourceStatus] = []


class Pod(_K8s, frozen=True):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


# --------------------------------------------------------------------------- persistent volumes


class OwnerReference(_K8s, frozen=True):
    uid: str = ""
    controller: bool = False


class OwnedMeta(ObjectMeta, frozen=True):
    """Metadata with the owner references too: a claim's (a generic ephemeral volume's claim must be
    controlled by the pod that uses it), a Volcano PodGroup's (a Volcano Job's is controlled by the Job)."""

    owner_references: list[OwnerReference] = []


READ_WRITE_ONCE_POD = "ReadWriteOncePod"  # a claim's access mode: one pod in the cluster may use it


class VolumeResourceRequirements(_K8s, frozen=True):
    requests: dict[str, str] = {}


class PersistentVolumeClaimSpec(_K8s, frozen=True):
    storage_class_name: str | None = None
    volume_name: str = ""
    access_modes: list[str] = []
    # What a volume made in advance must offer to be bound to the claim (kube-scheduler's VolumeBinding
    # matches one for a WaitForFirstConsumer claim): its size, labels, mode and attributes class.
    resources: VolumeResourceRequirements | None = None
    selector: LabelSelector | None = None
    volume_mode: str | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimStatus(_K8s, frozen=True):
    phase: str = ""


class PersistentVolumeClaim(_K8s, frozen=True):
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    metadata: OwnedMeta = OwnedMeta()
    spec: PersistentVolumeClaimSpec = PersistentVolumeClaimSpec()
    status: PersistentVolumeClaimStatus = PersistentVolumeClaimStatus()


class VolumeNodeAffinity(_K8s, frozen=True):
    required: NodeSelector | None = None


class ClaimReference(_K8s, frozen=True):
    namespace: str = ""
    name: str = ""
    uid: str = ""


class CSIPersistentVolumeSource(_K8s, frozen=True):
    """A PersistentVolume's spec.csi: the driver and its id of the volume (what kube-scheduler's
    NodeVolumeLimits counts a volume by, `<driver>/<volumeHandle>`)."""

    driver: str = ""
    volume_handle: str = ""


class AWSElasticBlockStoreVolumeSource(_K8s, frozen=True):
    volume_id: str = msgspec.field(default="", name="volumeID")


class GCEPersistentDiskVolumeSource(_K8s, frozen=True):
    pd_name: str = ""


class AzureDiskVolumeSource(_K8s, frozen=True):
    disk_uri: str = msgspec.field(default="", name="diskURI")


class CinderVolumeSource(_K8s, frozen=True):
    volume_id: str = msgspec.field(default="", name="volumeID")


class PersistentVolumeSpec(_K8s, frozen=True):
    storage_class_name: str = ""
    csi: CSIPersistentVolumeSource | None = None
    # In-tree sources whose plugins migrated to CSI drivers: kube-scheduler counts them against those
    # drivers' attach limits (csi-translation-lib), and so does state/volumes.py.
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    azure_disk: AzureDiskVolumeSource | None = None
    cinder: CinderVolumeSource | None = None
    node_affinity: VolumeNodeAffinity | None = None
    claim_ref: ClaimReference | None = None
    capacity: dict[str, str] = {}
    access_modes: list[str] = []
    volume_mode: str | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeStatus(_K8s, frozen=True):
    phase: str = ""


class PersistentVolume(_K8s, frozen=True):
    api_version: str = "v1"
    kind: str = "PersistentVolume"
    metadata: ObjectMeta = ObjectMeta()  # its zone / region labels constrain nodes too (VolumeZone)
    spec: PersistentVolumeSpec = PersistentVolumeSpec()
    status: PersistentVolumeStatus = PersistentVolumeStatus()


class TopologySelectorLabelRequirement(_K8s, frozen=True):
    key: str = ""
    values: list[str] = []


class TopologySelectorTerm(_K8s, frozen=True):
    match_label_expressions: list[TopologySelectorLabelRequirement] = []


class StorageClass(_K8s, frozen=True):
    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"
    metadata: ObjectMeta = ObjectMeta()
    provisioner: str = ""
    volume_binding_mode: str = ""  # "" is Immediate, the API server's default
    allowed_topologies: list[TopologySelectorTerm] = []


class VolumeNodeResources(_K8s, frozen=True):
    count: Int64 | None = None  # int32 >= 0 on a real API server; None: the driver sets no limit


class CSINodeDriver(_K8s, frozen=True):
    name: str = ""
    node_id: str = msgspec.field(default="", name="nodeID")
    allocatable: VolumeNodeResources | None = None


class CSINodeSpec(_K8s, frozen=True):
    drivers: list[CSINodeDriver] = []


class CSINode(_K8s, frozen=True):
    """A storage.k8s.io/v1 CSINode: named as its node, the kubelet's record of the CSI drivers registered
    there and how many volumes of each may be used there at once (`allocatable.count`), which
    kube-scheduler's NodeVolumeLimits enforces (state/volumes.py)."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSINode"
    metadata: ObjectMeta = ObjectMeta()
    spec: CSINodeSpec = CSINodeSpec()


# --------------------------------------------------------------------------- priority classes


class PriorityClass(_K8s, frozen=True):
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta = ObjectMeta()
    value: Int64 = 0
    global_default: bool = False
    preemption_policy: str | None = None
    description: str = ""


# --------------------------------------------------------------------------- pod groups


class PodGroupSpec(_K8s, frozen=True):
    """scheduling.sigs.k8s.io/v1alpha1 (the coscheduling PodGroup Koordinator reads), and its successor
    scheduling.x-k8s.io/v1alpha1 (scheduler-plugins' current group: the same fields)."""

    min_member: Int64 = 0
    schedule_timeout_seconds: Int64 | None = None
    min_resources: dict[str, str] = {}


class PodGroupStatus(_K8s, frozen=True):
    phase: str = ""
    scheduled: Int64 = 0
    running: Int64 = 0
    conditions: list[Condition] = []


class PodGroup(_K8s, frozen=True):
    api_version: str = "scheduling.sigs.k8s.io/v1alpha1"
    kind: str = "PodGroup"
    metadata: ObjectMeta = ObjectMeta()
    spec: PodGroupSpec = PodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()


class NetworkTopologySpec(_K8s, frozen=True):
    """Volcano's networkTopology: mode hard|soft and the highest tier the job may span."""

    mode: str = "hard"
    highest_tier_allowed: Int64 | None = None
    highest_tier_name: str = ""


class LabelSelectorRequirement(_K8s, frozen=True):
    key: str = ""
    operator: str = ""
    values: list[str] = []


class LabelSelector(_K8s, frozen=True):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class PodDisruptionBudgetSpec(_K8s, frozen=True):
    selector: LabelSelector | None = None


class PodDisruptionBudgetStatus(_K8s, frozen=True):
    disruptions_allowed: Int64 = 0
    disrupted_pods: dict[str, str] = {}  # pod name -> when the API server admitted its eviction


class PodDisruptionBudget(_K8s, frozen=True):
    """A policy/v1 PodDisruptionBudget: preemption prefers victims whose budgets allow the disruption."""

    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = ObjectMeta()
    spec: PodDisruptionBudgetSpec = PodDisruptionBudgetSpec()
    status: PodDisruptionBudgetStatus = PodDisruptionBudgetStatus()


class SubGroupPolicy(_K8s, frozen=True):
    name: str = ""
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: Int64 | None = None
    min_sub_groups: Int64 | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] = []


class VolcanoPodGroupSpec(_K8s, frozen=True):
    min_member: Int64 = 0
    min_task_member: dict[str, Int64] = {}
    queue: str = ""
    priority_class_name: str = ""
    min_resources: dict[str, str] = {}
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicy] = []


class VolcanoPodGroup(_K8s, frozen=True):
    api_version: str = "scheduling.volcano.sh/v1beta1"
    kind: str = "PodGroup"
    metadata: OwnedMeta = OwnedMeta()
    spec: VolcanoPodGroupSpec = VolcanoPodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()


class VolcanoJobSpec(_K8s, frozen=True):
    scheduler_name: str = ""  # Volcano's webhook defaults it to "volcano"


class VolcanoJob(_K8s, frozen=True):
    """A Volcano Job (batch.volcano.sh/v1alpha1): read for its schedulerName only. Volcano's job controller
    makes its PodGroup (controlled by the Job) and creates its pods once the PodGroup is enqueued
    (`state/volcano_enqueue.py`)."""

    api_version: str = "batch.volcano.sh/v1alpha1"
    kind: str = "Job"
    metadata: ObjectMeta = ObjectMeta()
    spec: VolcanoJobSpec = VolcanoJobSpec()


# --------------------------------------------------------------------------- Kubeflow training-operator (v1)


class KubeflowTemplateSpec(_K8s, frozen=True):
    scheduler_name: str = ""  # training-operator writes its gang scheduler's name ("volcano") into an empty one


class KubeflowPodTemplate(_K8s, frozen=True):
    spec: KubeflowTemplateSpec = KubeflowTemplateSpec()


class KubeflowReplicaSpec(_K8s, frozen=True):
    template: KubeflowPodTemplate = KubeflowPodTemplate()


class KubeflowJobSpec(_K8s, frozen=True):
    """The replica specs of each kind training-operator v1 serves (one is set, per the job's kind), by
    replica type (Master, Worker, PS, Chief, Launcher, ...). A null replica decodes as None."""

    pytorch_replica_specs: dict[str, KubeflowReplicaSpec | None] = {}
    tf_replica_specs: dict[str, KubeflowReplicaSpec | None] = {}
    mpi_replica_specs: dict[str, KubeflowReplicaSpec | None] = {}
    xgb_replica_specs: dict[str, KubeflowReplicaSpec | None] = {}
    paddle_replica_specs: dict[str, KubeflowReplicaSpec | None] = {}
    jax_replica_specs: dict[str, KubeflowReplicaSpec | None] = {}


class KubeflowJob(_K8s, frozen=True):
    """A Kubeflow training-operator v1 job (PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, JAXJob in
    kubeflow.org/v1): read for its replicas' schedulerNames only. With Volcano gang scheduling
    (`--gang-scheduler-name=volcano`) training-operator makes a Volcano PodGroup named as the job (controlled
    by it) and creates the job's pods only once that PodGroup is enqueued (`state/volcano_enqueue.py`)."""

    api_version: str = "kubeflow.org/v1"
    kind: str = "PyTorchJob"
    metadata: ObjectMeta = ObjectMeta()
    spec: KubeflowJobSpec = KubeflowJobSpec()

    def replica_schedulers(self) -> list[tuple[str, str, str]]:
        """(replica specs field as written, replica type, its pod template's schedulerName or "") of every
        replica, in the order written."""
        spec = self.spec
        return [(field, replica_type, replica.template.spec.scheduler_name if replica is not None else "")
                for field, replicas in (("pytorchReplicaSpecs", spec.pytorch_replica_specs),
                                        ("tfReplicaSpecs", spec.tf_replica_specs),
                                        ("mpiReplicaSpecs", spec.mpi_replica_specs),
                                        ("xgbReplicaSpecs", spec.xgb_replica_specs),
                                        ("paddleReplicaSpecs", spec.paddle_replica_specs),
                                        ("jaxReplicaSpecs", spec.jax_replica_specs))
                for replica_type, replica in replicas.items()]


# --------------------------------------------------------------------------- KAI Scheduler (scheduling.run.ai)


class KaiTopologyConstraint(_K8s, frozen=True):
    """A KAI PodGroup's (or SubGroup's) topologyConstraint: the KAI Topology by name, and node label keys
    (or level aliases) of its levels: all pods within one domain of `requiredTopologyLevel`, kept
    together at `preferredTopologyLevel` when they can be."""

    topology: str = ""
    required_topology_level: str = ""
    preferred_topology_level: str = ""


class KaiSubGroup(_K8s, frozen=True):
    """One of a KAI PodGroup's spec.subGroups: a leaf holds the pods labelled with its name
    (`KAI_SUB_GROUP_LABEL`); one other sub-groups name as `parent` holds those sub-groups."""

    name: str = ""
    min_member: Int64 | None = None
    min_sub_group: Int64 | None = None
    parent: str | None = None
    topology_constraint: KaiTopologyConstraint | None = None


class KaiPodGroupSpec(_K8s, frozen=True):
    min_member: Int64 | None = None
    min_sub_group: Int64 | None = None
    queue: str = ""
    priority_class_name: str = ""
    preemptibility: str = ""
    topology_constraint: KaiTopologyConstraint = KaiTopologyConstraint()
    sub_groups: list[KaiSubGroup] = []
    # KAI 0.17: how long the gang waits pending before it may evict others (a Go duration, metav1.Duration)
    preemption_delay: str | None = None
    mark_unschedulable: bool | None = None  # False: its pods get no PodScheduled=False/Unschedulable condition
    # -1 (or unset): tried in its node pool until placed; any other value (KAI documents 1 only): tried there
    # once, then left until moved to another pool (Run:ai's node-pool assigner moves it on that condition)
    scheduling_backoff: Int64 | None = None
    staleness_grace_period: str | None = None  # read only to say it is not implemented (no stale-gang eviction)


class KaiUnschedulableExplanation(_K8s, frozen=True):
    """One of a KAI scheduling condition's `reasons` (KAI's UnschedulableExplanation): a one-word reason
    (`OverLimit`, `NonPreemptibleOverQuota`, `QueueDoesNotExist`, ...), its message, and structured details
    (the queue's figures), kept as written so that a condition of another pool is written back whole."""

    reason: str = ""
    message: str = ""
    details: dict[str, object] | None = None


class KaiSchedulingCondition(_K8s, frozen=True):
    """One of a KAI PodGroup's status.schedulingConditions (KAI's scheduler writes `UnschedulableOnNodePool`
    per node pool while the gang cannot be placed there; so does toposched, for its gang's pool)."""

    type: str = ""
    node_pool: str = ""
    reason: str = ""
    message: str = ""
    reasons: list[KaiUnschedulableExplanation] = []
    transition_id: str = msgspec.field(default="", name="transitionID")  # KAI spells it so, not camelCase
    last_transition_time: str = ""
    status: str = ""


class KaiPodGroupStatus(_K8s, frozen=True):
    phase: str = ""
    scheduling_conditions: list[KaiSchedulingCondition] = []


class KaiObjectMeta(ObjectMeta, frozen=True):
    """A KAI PodGroup's metadata: its creation time too, from which its preemption delay counts."""

    creation_timestamp: str = ""


class KaiPodGroup(_K8s, frozen=True):
    """KAI Scheduler's PodGroup (scheduling.run.ai/v2alpha2, namespaced), which KAI's pod-grouper makes
    for each workload and which pods join with the annotation `pod-group-name`."""

    api_version: str = "scheduling.run.ai/v2alpha2"
    kind: str = "PodGroup"
    metadata: KaiObjectMeta = KaiObjectMeta()
    spec: KaiPodGroupSpec = KaiPodGroupSpec()
    status: KaiPodGroupStatus = KaiPodGroupStatus()


# --------------------------------------------------------------------------- the Workload API (scheduling.k8s.io)


class BasicSchedulingPolicy(_K8s, frozen=True):
    """`basic: {}`: the pods are scheduled one by one; the group is a label."""


class GangSchedulingPolicy(_K8s, frozen=True):
    min_count: Int64 = 0


class SchedulingPolicy(_K8s, frozen=True):
    """Exactly one of `basic` and `gang` (the API server refuses anything else)."""

    basic: BasicSchedulingPolicy | None = None
    gang: GangSchedulingPolicy | None = None


class TopologyConstraint(_K8s, frozen=True):
    key: str = ""  # a node label key: every pod of the group on nodes with one value of it


class SchedulingConstraints(_K8s, frozen=True):
    topology: list[TopologyConstraint] = []


class PodGroupResourceClaim(_K8s, frozen=True):
    name: str = ""
    resource_claim_name: str = ""
    resource_claim_template_name: str = ""


class WorkloadTemplateReference(_K8s, frozen=True):
    workload_name: str = ""
    pod_group_template_name: str = ""


class PodGroupTemplateReference(_K8s, frozen=True):
    workload: WorkloadTemplateReference | None = None


class PodGroupWorkloadReference(_K8s, frozen=True):
    """A PodGroup's v1beta1 / v1alpha3 `spec.workloadRef` (v1alpha2's `podGroupTemplateRef.workload`)."""

    workload_name: str = ""
    template_name: str = ""


class DisruptionModeChoice(_K8s, frozen=True):
    """v1beta1 / v1alpha3 `spec.disruptionMode`: exactly one of `single: {}` (members disrupted one by one,
    v1alpha2's "Pod") and `all: {}` (only together, v1alpha2's "PodGroup")."""

    single: BasicSchedulingPolicy | None = None  # an empty object, as `basic: {}`
    all: BasicSchedulingPolicy | None = None


class KubePodGroupSpec(_K8s, frozen=True):
    """scheduling.k8s.io PodGroup, the runtime group pods join by name: v1alpha2 (Kubernetes 1.36), v1beta1 and
    v1alpha3 (1.37). One shape reads all three: `disruptionMode` is a string in v1alpha2 and an object in
    the others; `podGroupTemplateRef` became `workloadRef`; `parentCompositePodGroupName` and
    `preemptionPolicy` are 1.37's."""

    scheduling_policy: SchedulingPolicy = SchedulingPolicy()
    scheduling_constraints: SchedulingConstraints | None = None
    pod_group_template_ref: PodGroupTemplateReference | None = None
    workload_ref: PodGroupWorkloadReference | None = None
    priority_class_name: str = ""
    priority: Int64 | None = None
    preemption_policy: str = ""
    disruption_mode: str | DisruptionModeChoice = ""
    parent_composite_pod_group_name: str = ""
    resource_claims: list[PodGroupResourceClaim] = []


class KubePodGroupStatus(_K8s, frozen=True):
    conditions: list[Condition] = []


class KubePodGroup(_K8s, frozen=True):
    api_version: str = "scheduling.k8s.io/v1alpha2"
    kind: str = "PodGroup"
    metadata: ObjectMeta = ObjectMeta()
    spec: KubePodGroupSpec = KubePodGroupSpec()
    status: KubePodGroupStatus = KubePodGroupStatus()


class CompositeGangSchedulingPolicy(_K8s, frozen=True):
    min_group_count: Int64 = 0  # child groups that must be schedulable (or scheduled) at once


class CompositeSchedulingPolicy(_K8s, frozen=True):
    """A CompositePodGroup's `spec.schedulingPolicy`: exactly one of `basic: {}` and `gang: {minGroupCount}`."""

    basic: BasicSchedulingPolicy | None = None
    gang: CompositeGangSchedulingPolicy | None = None


class CompositePodGroupSpec(_K8s, frozen=True):
    """1.37's alpha CompositePodGroup (`scheduling.k8s.io/v1alpha3`): a non-leaf group of a workload's
    hierarchy, whose children (CompositePodGroups and PodGroups) name it as their
    `parentCompositePodGroupName`; a root names none."""

    scheduling_policy: CompositeSchedulingPolicy = CompositeSchedulingPolicy()
    parent_composite_pod_group_name: str = ""
    workload_ref: PodGroupWorkloadReference | None = None
    scheduling_constraints: SchedulingConstraints | None = None
    disruption_mode: DisruptionModeChoice | None = None
    priority_class_name: str = ""
    priority: Int64 | None = None
    preemption_policy: str = ""


class CompositePodGroup(_K8s, frozen=True):
    api_version: str = "scheduling.k8s.io/v1alpha3"
    kind: str = "CompositePodGroup"
    metadata: ObjectMeta = ObjectMeta()
    spec: CompositePodGroupSpec = CompositePodGroupSpec()
    status: KubePodGroupStatus = KubePodGroupStatus()


class WorkloadPodGroup(_K8s, frozen=True):
    name: str = ""
    policy: SchedulingPolicy = SchedulingPolicy()


class TypedLocalObjectReference(_K8s, frozen=True):
    api_group: str = ""
    kind: str = ""
    name: str = ""


class WorkloadSpec(_K8s, frozen=True):
    controller_ref: TypedLocalObjectReference | None = None
    pod_groups: list[WorkloadPodGroup] = []


class Workload(_K8s, frozen=True):
    """scheduling.k8s.io/v1alpha1 Workload (Kubernetes 1.35): pods join a podGroup by `spec.workloadRef`."""

    api_version: str = "scheduling.k8s.io/v1alpha1"
    kind: str = "Workload"
    metadata: ObjectMeta = ObjectMeta()
    spec: WorkloadSpec = WorkloadSpec()


# --------------------------------------------------------------------------- topology objects


class NetworkTopologyLayer(_K8s, frozen=True):
    topology_layer: str = ""
    label_key: list[str] = []
    parent_topology_layer: str = ""


class ClusterNetworkTopologySpec(_K8s, frozen=True):
    network_topology_spec: list[NetworkTopologyLayer] = []


class TopologyInfo(_K8s, frozen=True):
    topology_layer: str = ""
    topology_name: str = ""


class TopologyDetail(_K8s, frozen=True):
    topology_info: TopologyInfo = TopologyInfo()
    parent_topology_info: TopologyInfo | None = None
    child_topology_layer: str = ""
    child_topology_names: list[str] = []
    node_num: Int64 = 0


class ClusterNetworkTopologyStatus(_K8s, frozen=True):
    detail_status: list[TopologyDetail] = []


class ClusterNetworkTopology(_K8s, frozen=True):
    api_version: str = "scheduling.koordinator.sh/v1alpha1"
    kind: str = "ClusterNetworkTopology"
    metadata: ObjectMeta = ObjectMeta()
    spec: ClusterNetworkTopologySpec = ClusterNetworkTopologySpec()
    status: ClusterNetworkTopologyStatus = ClusterNetworkTopologyStatus()


class ExactMatch(_K8s, frozen=True):
    name: str = ""


class RegexMatch(_K8s, frozen=True):
    pattern: str = ""


class MemberSelector(_K8s, frozen=True):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None


class HyperNodeMember(_K8s, frozen=True):
    type: str = ""
    selector: MemberSelector = MemberSelector()


class HyperNodeSpec(_K8s, frozen=True):
    tier: Int64 = 0
    tier_name: str = ""
    members: list[HyperNodeMember] = []


class HyperNodeStatus(_K8s, frozen=True):
    node_count: Int64 = 0


class HyperNode(_K8s, frozen=True):
    api_version: str = "topology.volcano.sh/v1alpha1"
    kind: str = "HyperNode"
    metadata: ObjectMeta = ObjectMeta()
    spec: HyperNodeSpec = HyperNodeSpec()
    status: HyperNodeStatus = HyperNodeStatus()


class KueueTopologyLevel(_K8s, frozen=True):
    node_label: str = ""


class KueueTopologySpec(_K8s, frozen=True):
    levels: list[KueueTopologyLevel] = []


class KueueTopology(_K8s, frozen=True):
    """Kueue's cluster-scoped `Topology` (kueue.x-k8s.io v1beta2, and v1beta1 in the same shape): the
    network as node label keys, top level first (`spec.levels[].nodeLabel`). It has no status."""

    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "Topology"
    metadata: ObjectMeta = ObjectMeta()
    spec: KueueTopologySpec = KueueTopologySpec()


class KaiTopologyLevel(_K8s, frozen=True):
    node_label: str = ""
    alias: str = ""  # newer KAI releases: a name usable in place of nodeLabel in a workload's constraint


class KaiTopologySpec(_K8s, frozen=True):
    levels: list[KaiTopologyLevel] = []


class KaiTopology(_K8s, frozen=True):
    """NVIDIA KAI Scheduler's cluster-scoped `Topology` (kai.scheduler/v1alpha1), derived from Kueue's:
    the network as node label keys, top level first (`spec.levels[].nodeLabel`, and an optional `alias`).
    It has no status."""

    api_version: str = "kai.scheduler/v1alpha1"
    kind: str = "Topology"
    metadata: ObjectMeta = ObjectMeta()
    spec: KaiTopologySpec = KaiTopologySpec()


# --------------------------------------------------------------------------- quotas


class ElasticQuotaSpec(_K8s, frozen=True):
    """min and max per resource (quantities stay raw strings; `state/quota.py` parses them)."""

    min: dict[str, str] = {}
    max: dict[str, str] = {}


class ElasticQuotaStatus(_K8s, frozen=True):
    used: dict[str, str] = {}


class ElasticQuota(_K8s, frozen=True):
    """Koordinator's multi-hierarchy ElasticQuota (scheduling.sigs.k8s.io/v1alpha1): the tree is in
    the labels `quota.scheduling.koordinator.sh/parent` and `/is-parent`."""

    api_version: str = "scheduling.sigs.k8s.io/v1alpha1"
    kind: str = "ElasticQuota"
    metadata: ObjectMeta = ObjectMeta()
    spec: ElasticQuotaSpec = ElasticQuotaSpec()
    status: ElasticQuotaStatus = ElasticQuotaStatus()


class CapacityElasticQuota(_K8s, frozen=True):
    """scheduler-plugins' capacity scheduling ElasticQuota (scheduling.x-k8s.io/v1alpha1), one per namespace."""

    api_version: str = "scheduling.x-k8s.io/v1alpha1"
    kind: str = "ElasticQuota"
    metadata: ObjectMeta = ObjectMeta()
    spec: ElasticQuotaSpec = ElasticQuotaSpec()
    status: ElasticQuotaStatus = ElasticQuotaStatus()


class QueueGuarantee(_K8s, frozen=True):
    resource: dict[str, str] = {}


class QueueSpec(_K8s, frozen=True):
    weight: int | None = None
    capability: dict[str, str] = {}
    deserved: dict[str, str] = {}
    guarantee: QueueGuarantee = QueueGuarantee()
    reclaimable: bool | None = None
    parent: str = ""
    state: str = ""  # deprecated in favour of status.state; read when status.state is empty


class QueueStatus(_K8s, frozen=True):
    state: str = ""
    allocated: dict[str, str] = {}  # written by the scheduler (toposched: daemon/kube/quota_status.py)


class Queue(_K8s, frozen=True):
    """Volcano's Queue (scheduling.volcano.sh/v1beta1, cluster-scoped); PodGroups name it in spec.queue."""

    api_version: str = "scheduling.volcano.sh/v1beta1"
    kind: str = "Queue"
    metadata: ObjectMeta = ObjectMeta()
    spec: QueueSpec = QueueSpec()
    status: QueueStatus = QueueStatus()


class KaiQueueResource(_K8s, frozen=True):
    """One resource of a KAI Queue, in KAI's units (cpu: millicores, memory: megabytes of 10^6 bytes, gpu:
    GPUs); -1 is unlimited. An absent field is None here (KAI reads it as 0) so the fold can say which
    value it is reading."""

    quota: float | None = None
    over_quota_weight: float | None = None
    limit: float | None = None
    lending_limit: float | None = None  # newer KAI releases only


class KaiQueueResources(_K8s, frozen=True):
    cpu: KaiQueueResource | None = None
    memory: KaiQueueResource | None = None
    gpu: KaiQueueResource | None = None


class KaiQueueSpec(_K8s, frozen=True):
    display_name: str = ""
    parent_queue: str = ""
    resources: KaiQueueResources | None = None
    priority: Int64 | None = None
    preempt_min_runtime: str | None = None
    reclaim_min_runtime: str | None = None


class KaiQueue(_K8s, frozen=True):
    """NVIDIA KAI Scheduler's Queue (scheduling.run.ai/v2, cluster-scoped); KAI PodGroups name it in
    spec.queue, and the pod-grouper takes it from the label `kai.scheduler/queue`. Its status is KAI's
    own output (allocated, childQueues) and is not read."""

    api_version: str = "scheduling.run.ai/v2"
    kind: str = "Queue"
    metadata: ObjectMeta = ObjectMeta()
    spec: KaiQueueSpec = KaiQueueSpec()


# --------------------------------------------------------------------------- well-known names

POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
SCHEDULER_PLUGINS_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
GANG_GROUPS_ANNOTATION = "gang.scheduling.koordinator.sh/groups"
NETWORK_TOPOLOGY_SPEC_ANNOTATION = "gang.scheduling.koordinator.sh/network-topology-spec"
NETWORK_TOPOLOGY_INDEX_ANNOTATION = "gang.scheduling.koordinator.sh/network-topology-index"
# Koordinator's gangs described by annotations alone (on pods; mode, total-number and match-policy on
# PodGroups too); and the deprecated lightweight-coscheduling labels Koordinator still reads.
GANG_NAME_ANNOTATION = "gang.scheduling.koordinator.sh/name"
GANG_MIN_AVAILABLE_ANNOTATION = "gang.scheduling.koordinator.sh/min-available"
GANG_TOTAL_NUMBER_ANNOTATION = "gang.scheduling.koordinator.sh/total-number"
GANG_MODE_ANNOTATION = "gang.scheduling.koordinator.sh/mode"
GANG_WAITING_TIME_ANNOTATION = "gang.scheduling.koordinator.sh/waiting-time"
GANG_MATCH_POLICY_ANNOTATION = "gang.scheduling.koordinator.sh/match-policy"
GANG_MATCH_POLICY_ALIAS_ANNOTATION = "pod-group.scheduling.sigs.k8s.io/match-policy"
LIGHTWEIGHT_GANG_NAME_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
LIGHTWEIGHT_MIN_AVAILABLE_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"
# Volcano: which task of the job a pod is (minTaskMember counts per task), and whether it may be preempted
# (on pods and PodGroups, as an annotation or else a label).
VOLCANO_TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
VOLCANO_PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
# KAI Scheduler: a pod joins the PodGroup its `pod-group-name` annotation names (KAI's pod-grouper writes it);
# the pod-grouper copies a workload's (top owner's) topology annotations onto the PodGroup it makes, where
# they are read when spec.topologyConstraint leaves them unset.
KAI_POD_GROUP_ANNOTATION = "pod-group-name"
KAI_TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
KAI_REQUIRED_PLACEMENT_ANNOTATION = "kai.scheduler/topology-required-placement"
KAI_PREFERRED_PLACEMENT_ANNOTATION = "kai.scheduler/topology-preferred-placement"
# KAI Scheduler 0.17: a workload's preemption delay (the pod-grouper writes it into spec.preemptionDelay; read
# on the PodGroup when the spec leaves it unset), and the time its scheduler last evicted the PodGroup's pods,
# from which the delay counts again (RFC 3339; toposched stamps it as KAI's scheduler does).
KAI_PREEMPTION_DELAY_ANNOTATION = "kai.scheduler/preemption-delay"
KAI_LAST_EVICTION_ANNOTATION = "kai.scheduler/last-eviction-timestamp"
# KAI Scheduler's fractional GPUs, on a pod: a share of one GPU, GPU memory in MiB, how many GPUs to share
# (read only to refuse such a pod: toposched allocates no GPU share, state/pod_constraints.py)
KAI_GPU_FRACTION_ANNOTATION = "gpu-fraction"
KAI_GPU_MEMORY_ANNOTATION = "gpu-memory"
KAI_GPU_FRACTION_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
# KAI Scheduler: the leaf sub-group of its PodGroup (spec.subGroups) a pod belongs to.
KAI_SUB_GROUP_LABEL = "kai.scheduler/subgroup-name"
SIMULATION_ANNOTATION_PREFIX = "sim.toposched.io/"
# Set by toposched itself on the accounting core of an object too large to log; `slim()` drops it
# from what the API sends, so no object can claim it.
OVERSIZED_ANNOTATION = "toposched.io/record-too-large"
DEFAULT_SCHEDULER_NAME = "toposched"
# Quotas (Koordinator): pods join with QUOTA_NAME_LABEL (else their namespace's quota); the tree is in
# the quotas' parent / is-parent labels; pods labelled preemptible "false" stay within min.
QUOTA_NAME_LABEL = "quota.scheduling.koordinator.sh/name"
QUOTA_PARENT_LABEL = "quota.scheduling.koordinator.sh/parent"
QUOTA_IS_PARENT_LABEL = "quota.scheduling.koordinator.sh/is-parent"
QUOTA_PREEMPTIBLE_LABEL = "quota.scheduling.koordinator.sh/preemptible"
QUOTA_ALLOW_LENT_LABEL = "quota.scheduling.koordinator.sh/allow-lent-resource"
QUOTA_SHARED_WEIGHT_ANNOTATION = "quota.scheduling.koordinator.sh/shared-weight"
# Written by the scheduler on every Koordinator ElasticQuota (JSON resource lists, as koord-scheduler
# writes them): the quota's runtime and its request; read back only to write them when they change.
QUOTA_RUNTIME_ANNOTATION = "quota.scheduling.koordinator.sh/runtime"
QUOTA_REQUEST_ANNOTATION = "quota.scheduling.koordinator.sh/request"
# Volcano: only pods marked preemptable "true" (annotation or label) may be reclaimed by another queue.
VOLCANO_PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
# KAI Scheduler: the queue a workload (its top owner) or pod names; KAI's pod-grouper copies it into the
# PodGroup's spec.queue, which is what KAI's scheduler reads.
KAI_QUEUE_LABEL = "kai.scheduler/queue"
# KAI Scheduler's node pools (scheduling shards): a node belongs to the pool its label names, and a PodGroup
# (labelled by KAI's pod-grouper as its workload is) is scheduled only on its pool's nodes; a PodGroup without the
# label belongs to the default pool, the nodes without it. KAI's default `nodePoolLabelKey`.
KAI_NODE_POOL_LABEL = "kai.scheduler/node-pool"
KAI_DEFAULT_NODE_POOL = "default"  # the name KAI's conditions give the pool of nodes without the label
# KAI Scheduler: the PriorityClass a workload (or pod) names by label, which KAI's pod-grouper reads before the
# pod's own spec.priorityClassName and copies into the PodGroup; none at all is KAI's `train` class.
KAI_PRIORITY_LABEL = "priorityClassName"
KAI_DEFAULT_PRIORITY_CLASS = "train"
# Persistent volumes, as the PV controller and kube-scheduler's VolumeBinding plugin write and read them:
# a claim is bound once the PV controller has marked the binding complete; the deprecated class
# annotation still names a claim's StorageClass before spec.storageClassName; the scheduler writes the
# node it chose on a WaitForFirstConsumer claim, which the provisioner then provisions for.
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"

# Every annotation any part of toposched reads. An annotation not named here (or under
# SIMULATION_ANNOTATION_PREFIX) is dropped when the object is decoded: a reader of a new annotation
# must add it here (tests/unit/events/test_objects.py checks every *_ANNOTATION constant is kept).
KEPT_ANNOTATIONS: frozenset[str] = frozenset({
    VOLCANO_GROUP_ANNOTATION,
    GANG_GROUPS_ANNOTATION,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    NETWORK_TOPOLOGY_INDEX_ANNOTATION,
    GANG_NAME_ANNOTATION,
    GANG_MIN_AVAILABLE_ANNOTATION,
    GANG_TOTAL_NUMBER_ANNOTATION,
    GANG_MODE_ANNOTATION,
    GANG_WAITING_TIME_ANNOTATION,
    GANG_MATCH_POLICY_ANNOTATION,
    GANG_MATCH_POLICY_ALIAS_ANNOTATION,
    VOLCANO_TASK_SPEC_ANNOTATION,
    QUOTA_SHARED_WEIGHT_ANNOTATION,
    QUOTA_RUNTIME_ANNOTATION,
    QUOTA_REQUEST_ANNOTATION,
    VOLCANO_PREEMPTABLE_ANNOTATION,
    BIND_COMPLETED_ANNOTATION,
    BETA_STORAGE_CLASS_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    KAI_POD_GROUP_ANNOTATION,
    KAI_TOPOLOGY_ANNOTATION,
    KAI_REQUIRED_PLACEMENT_ANNOTATION,
    KAI_PREFERRED_PLACEMENT_ANNOTATION,
    KAI_PREEMPTION_DELAY_ANNOTATION,
    KAI_LAST_EVICTION_ANNOTATION,
    KAI_GPU_FRACTION_ANNOTATION,
    KAI_GPU_MEMORY_ANNOTATION,
    KAI_GPU_FRACTION_DEVICES_ANNOTATION,
})

KOORDINATOR_POD_GROUP_API = "scheduling.sigs.k8s.io/v1alpha1"
SCHEDULER_PLUGINS_POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
# Kubernetes' PodGroup: v1beta1 (1.37), else v1alpha3 (1.37, alpha), else v1alpha2 (1.36, removed in 1.37).
KUBE_POD_GROUP_API = "scheduling.k8s.io/v1beta1"
KUBE_POD_GROUP_OLDER_APIS = ("scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1alpha2")
WORKLOAD_API = "scheduling.k8s.io/v1alpha1"
COMPOSITE_POD_GROUP_API = "scheduling.k8s.io/v1alpha3"  # 1.37's alpha, behind the CompositePodGroup gate
VOLCANO_POD_GROUP_API = "scheduling.volcano.sh/v1beta1"
VOLCANO_JOB_API = "batch.volcano.sh/v1alpha1"
KUBEFLOW_JOB_API = "kubeflow.org/v1"
# training-operator v1's job kinds (kind, plural), each a `KubeflowJob`.
KUBEFLOW_JOB_KINDS = (("PyTorchJob", "pytorchjobs"), ("TFJob", "tfjobs"), ("MPIJob", "mpijobs"),
                      ("XGBoostJob", "xgboostjobs"), ("PaddleJob", "paddlejobs"), ("JAXJob", "jaxjobs"))
CLUSTER_NETWORK_TOPOLOGY_API = "scheduling.koordinator.sh/v1alpha1"
HYPERNODE_API = "topology.volcano.sh/v1alpha1"
KUEUE_TOPOLOGY_API = "kueue.x-k8s.io/v1beta2"
# Kueue releases before v0.15 serve Topology as v1beta1 only (same fields); the daemon lists it there when
# v1beta2 is not served, and a scenario may use either.
KUEUE_TOPOLOGY_OLDER_APIS = ("kueue.x-k8s.io/v1beta1",)
KAI_TOPOLOGY_API = "kai.scheduler/v1alpha1"
KAI_POD_GROUP_API = "scheduling.run.ai/v2alpha2"
KOORDINATOR_QUOTA_API = "scheduling.sigs.k8s.io/v1alpha1"
CAPACITY_QUOTA_API = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_QUEUE_API = "scheduling.volcano.sh/v1beta1"
KAI_QUEUE_API = "scheduling.run.ai/v2"


# --------------------------------------------------------------------------- slimming


def keeps_annotation(key: str) -> bool:
    """Whether `slim()` keeps an annotation: toposched reads it (or it is a simulation annotation)."""
    return key in KEPT_ANNOTATIONS or key.startswith(SIMULATION_ANNOTATION_PREFIX)


_Object = TypeVar(
    "_Object",
    bound=Node | Pod | PodGroup | VolcanoPodGroup | KubePodGroup | CompositePodGroup | Workload | ClusterNetworkTopology
    | HyperNode | KueueTopology | KaiTopology | KaiPodGroup | PriorityClass | ElasticQuota | CapacityElasticQuota
    | Queue | KaiQueue | PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode | PodDisruptionBudget
    | VolcanoJob | KubeflowJob,
)


def slim(obj: _Object) -> _Object:
    """`obj` without what toposched never reads (the same object when there is nothing to drop): the
    annotations not in `KEPT_ANNOTATIONS`, a pod's status conditions (the kubelet rewrites them on
    every status change; scheduling reads the phase) but a pending pod's `PodScheduled=False`
    (`scheduling_conditions`), its container statuses but while a resize is under way (`resize_status`),
    and its volumes that no claim backs (every pod has its own `kube-api-access-<random>` volume: kept,
    it would make each pod's spec unique)."""
    slimmed = obj
    annotations = obj.metadata.annotations
    if annotations and not all(keeps_annotation(key) for key in annotations):
        kept = {key: value for key, value in annotations.items() if keeps_annotation(key)}
        slimmed = msgspec.structs.replace(slimmed, metadata=msgspec.structs.replace(obj.metadata, annotations=kept))
    if isinstance(slimmed, Pod):
        status = slimmed.status
        if status.container_statuses or status.init_container_statuses:
            kept_status = resize_status(slimmed)
            if kept_status is not status:
                slimmed = msgspec.structs.replace(slimmed, status=kept_status)
        elif status.conditions:  # the usual pod, on every watch event
            said = scheduling_conditions(slimmed)
            if said != status.conditions:
                slimmed = msgspec.structs.replace(slimmed, status=msgspec.structs.replace(status, conditions=said))
    if isinstance(slimmed, Pod) and slimmed.spec.volumes and not all(v.uses_claim for v in slimmed.spec.volumes):
        claimed = [volume for volume in slimmed.spec.volumes if volume.uses_claim]
        slimmed = msgspec.structs.replace(slimmed, spec=msgspec.structs.replace(slimmed.spec, volumes=claimed))
    return slimmed


POD_SCHEDULED = "PodScheduled"
# The longest condition message toposched writes (as an Event's note, 1 kB); one longer is never one of ours.
CONDITION_MESSAGE_LIMIT = 1024


def scheduling_conditions(pod: Pod) -> list[Condition]:
    """Of a pod's conditions, those `slim` keeps: while the pod is not bound, its `PodScheduled=False` (what a
    scheduler, this one included, last said of it; `daemon.kube.pod_conditions` keeps its transition time and
    writes it only on change), its message cut one past `CONDITION_MESSAGE_LIMIT` (longer, it still differs from
    any toposched writes); none once the pod is bound (the API server set PodScheduled=True)."""
    if pod.spec.node_name:
        return []
    for condition in pod.status.conditions:
        if condition.type == POD_SCHEDULED:
            if condition.status != "False":
                return []
            if len(condition.message) > CONDITION_MESSAGE_LIMIT + 1:
                condition = msgspec.structs.replace(condition, message=condition.message[:CONDITION_MESSAGE_LIMIT + 1])
            return [condition]
    return []


RESIZE_PENDING = "PodResizePending"  # the pod condition of a resize the kubelet has not taken (1.33+)
RESIZE_INFEASIBLE = "Infeasible"  # its reason when the node can never hold the new requests


def resize_infeasible(status: PodStatus) -> bool:
    """Whether the kubelet has found the pod's resize infeasible (kube's IsPodResizeInfeasible: the
    first PodResizePending condition decides)."""
    for condition in status.conditions:
        if condition.type == RESIZE_PENDING:
            return condition.reason == RESIZE_INFEASIBLE
    return False


def resize_status(pod: Pod) -> PodStatus:
    """The pod's status as `slim` keeps it: no conditions and no container statuses, unless a resize
    makes the kubelet's figures differ from the spec's requests.

    kube-scheduler counts a pod at the larger of its spec's requests and what the kubelet allocated
    to and applied on each container (`status.containerStatuses[*].allocatedResources` and
    `.resources.requests`), or, when the kubelet found the resize infeasible, at those two alone
    (component-helpers' PodRequests with UseStatusResources). On a node where no resize is under
    way every figure the kubelet reports equals the spec's, and the count is the spec's: then nothing
    is kept, so a running pod's status stays as small, and as shareable, as a pending one's. While they
    differ the statuses are kept whole (requests only), and with an infeasible resize the
    PodResizePending condition too, by type and reason (the fold counts them: `state.cluster`)."""
    status = pod.status
    if not (status.container_statuses or status.init_container_statuses) or _resize_settled(pod):
        if status.conditions or status.container_statuses or status.init_container_statuses:
            return msgspec.structs.replace(status, conditions=[], container_statuses=[], init_container_statuses=[])
        return status
    infeasible = [Condition(type=RESIZE_PENDING, reason=RESIZE_INFEASIBLE)] if resize_infeasible(status) else []
    if status.conditions == infeasible:
        return status
    return msgspec.structs.replace(status, conditions=infeasible)


def _resize_settled(pod: Pod) -> bool:
    """Whether every request the kubelet reports of the pod's containers equals the spec's (compared as
    the API server writes them: canonical quantities), with no infeasible resize (which counts the
    kubelet's figures without the spec's)."""
    wanted = {container.name: container.resources.requests
              for containers in (pod.spec.containers, pod.spec.init_containers) for container in containers}
    for statuses in (pod.status.container_statuses, pod.status.init_container_statuses):
        for reported in statuses:
            requests = wanted.get(reported.name)
            if requests is None:
                continue  # names no container: kube looks statuses up by the spec's names
            allocated = reported.allocated_resources
            if allocated and any(requests.get(name) != value for name, value in allocated.items()):
                return False
            applied = reported.resources.requests if reported.resources is not None else None
            if applied and any(requests.get(name) != value for name, value in applied.items()):
                return False
    return not resize_infeasible(pod.status)


def pod_core(pod: Pod, note: str) -> Pod:
    """What capacity accounting needs of a pod too large to log, marked `OVERSIZED_ANNOTATION: note`.

    Kept: identity, deletion, the node it is bound to, the scheduler and priority fields, every
    request (containers, init containers and which are sidecars, pod-level, overhead), the host ports
    it holds, the phase, and what a resize under way counts (`resize_status`).
    Dropped: labels, annotations, node selector, affinity, tolerations, conditions (but an infeasible
    resize's): so the core is
    never placed (the fold treats a marked pod as not its own) but is counted on the node it runs on.
    """
    meta, spec = pod.metadata, pod.spec
    return Pod(
        metadata=ObjectMeta(name=meta.name, namespace=meta.namespace, uid=meta.uid,
                            resource_version=meta.resource_version, deletion_timestamp=meta.deletion_timestamp,
                            annotations={OVERSIZED_ANNOTATION: note}),
        spec=PodSpec(node_name=spec.node_name, scheduler_name=spec.scheduler_name, priority=spec.priority,
                     priority_class_name=spec.priority_class_name, preemption_policy=spec.preemption_policy,
                     containers=[_requests_only(c) for c in spec.containers],
                     init_containers=[_requests_only(c) for c in spec.init_containers], overhead=spec.overhead,
                     resources=spec.resources),
        status=PodStatus(phase=pod.status.phase,
                         conditions=[c for c in pod.status.conditions if c.type == RESIZE_PENDING],
                         container_statuses=pod.status.container_statuses,
                         init_container_statuses=pod.status.init_container_statuses),
    )


def node_core(node: Node, note: str) -> Node:
    """What capacity accounting needs of a node too large to log, marked `OVERSIZED_ANNOTATION: note`.

    Kept: identity and allocatable, so pods bound there are counted. Dropped: labels and taints;
    the core is unschedulable, so nothing is placed on a node toposched could not read whole.
    """
    meta = node.metadata
    return Node(
        metadata=ObjectMeta(name=meta.name, uid=meta.uid, resource_version=meta.resource_version,
                            annotations={OVERSIZED_ANNOTATION: note}),
        spec=NodeSpec(unschedulable=True),
        status=NodeStatus(allocatable=node.status.allocatable),
    )


def _requests_only(container: Container) -> Container:
    """What a container's requests count for: the requests, whether it is a sidecar, its host ports, and
    its name (what its status is found by in a resize)."""
    return Container(name=container.name, resources=ResourceRequirements(requests=container.resources.requests),
                     restart_policy=container.restart_policy,
                     ports=[port for port in container.ports if port.host_port > 0])
