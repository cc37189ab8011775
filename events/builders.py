"""Small builders of Kubernetes objects and events, for tests and benchmarks (one place, so they read as intent)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import msgspec

from events.model import Event, NodeUpserted, PodGroupUpserted, PodUpserted
from events.objects import (
    GANG_GROUPS_ANNOTATION,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    POD_GROUP_LABEL,
    QUOTA_IS_PARENT_LABEL,
    QUOTA_PARENT_LABEL,
    CapacityElasticQuota,
    Container,
    ElasticQuota,
    ElasticQuotaSpec,
    KaiObjectMeta,
    KaiPodGroup,
    KaiPodGroupSpec,
    KaiQueue,
    KaiQueueResource,
    KaiQueueResources,
    KaiQueueSpec,
    KubeflowJob,
    KubeflowJobSpec,
    KubeflowPodTemplate,
    KubeflowReplicaSpec,
    KubeflowTemplateSpec,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    OwnedMeta,
    OwnerReference,
    Pod,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
    PodSpec,
    PodStatus,
    Queue,
    QueueGuarantee,
    QueueSpec,
    QueueStatus,
    ResourceRequirements,
    SchedulingGate,
    Taint,
    VolcanoJob,
    VolcanoJobSpec,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
)

TOPOGRAPH = "network.topology.nvidia.com/"


def node(
    name: str,
    *,
    gpus: int = 8,
    cpu: str = "96",
    memory: str = "1Ti",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    block: str | None = None,
    spine: str | None = None,
    accelerator: str | None = None,
    taints: list[Taint] | None = None,
    unschedulable: bool = False,
) -> Node:
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    for layer, value in (("accelerator", accelerator), ("block", block), ("spine", spine)):
        if value is not None:
            all_labels[TOPOGRAPH + layer] = value
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return Node(
        metadata=ObjectMeta(name=name, uid=f"uid-{name}", labels=all_labels),
        spec=NodeSpec(taints=taints or [], unschedulable=unschedulable),
        status=NodeStatus(allocatable=allocatable),
    )


def pod(
    name: str,
    *,
    namespace: str = "default",
    gpus: int = 8,
    cpu: str = "8",
    memory: str = "64Gi",
    gang: str | None = None,
    node_name: str = "",
    priority: int | None = None,
    priority_class: str = "",
    scheduler: str = "toposched",
    phase: str = "Pending",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    gates: Sequence[str] = (),
) -> Pod:
    all_labels = dict(labels or {})
    if gang is not None:
        all_labels[POD_GROUP_LABEL] = gang
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    return Pod(
        metadata=ObjectMeta(name=name, namespace=namespace, uid=uid or f"uid-{namespace}-{name}",
                            labels=all_labels, annotations=dict(annotations or {})),
        spec=PodSpec(
            scheduler_name=scheduler,
            node_name=node_name,
            priority=priority,
            priority_class_name=priority_class,
            containers=[Container(name="main", resources=ResourceRequirements(requests=requests))],
            scheduling_gates=[SchedulingGate(name=gate) for gate in gates],
        ),
        status=PodStatus(phase=phase),
    )


def pod_group(
    name: str,
    *,
    namespace: str = "default",
    min_member: int = 1,
    timeout: int | None = None,
    gather: list[dict[str, object]] | None = None,
    gang_group: list[str] | None = None,
    annotations: Mapping[str, str] | None = None,
    api_version: str = "scheduling.sigs.k8s.io/v1alpha1",
    min_resources: Mapping[str, str] | None = None,
) -> PodGroup:
    annotations = dict(annotations or {})
    if gather is not None:
        annotations[NETWORK_TOPOLOGY_SPEC_ANNOTATION] = json.dumps({"gatherStrategy": gather})
    if gang_group is not None:
        annotations[GANG_GROUPS_ANNOTATION] = json.dumps(gang_group)
    return PodGroup(
        api_version=api_version,
        metadata=ObjectMeta(name=name, namespace=namespace, uid=f"uid-pg-{namespace}-{name}",
                            annotations=annotations),
        spec=PodGroupSpec(min_member=min_member, schedule_timeout_seconds=timeout,
                          min_resources=dict(min_resources or {})),
    )


def bound(p: Pod, node_name: str, phase: str = "Running") -> Pod:
    spec = msgspec.structs.replace(p.spec, node_name=node_name)
    return msgspec.structs.replace(p, spec=spec, status=msgspec.structs.replace(p.status, phase=phase))


def node_event(n: Node) -> NodeUpserted:
    return NodeUpserted(node=n)


def pod_event(p: Pod, time: float = 0.0) -> PodUpserted:
    return PodUpserted(pod=p, time=time)


def group_event(g: PodGroup) -> PodGroupUpserted:
    return PodGroupUpserted(pod_group=g)


def elastic_quota(name: str, *, namespace: str = "quotas", minimum: Mapping[str, str] | None = None,
                  maximum: Mapping[str, str] | None = None, parent: str | None = None, is_parent: bool = False,
                  labels: Mapping[str, str] | None = None,
                  annotations: Mapping[str, str] | None = None) -> ElasticQuota:
    """A Koordinator ElasticQuota (scheduling.sigs.k8s.io/v1alpha1)."""
    all_labels = dict(labels or {})
    if parent is not None:
        all_labels[QUOTA_PARENT_LABEL] = parent
    if is_parent:
        all_labels[QUOTA_IS_PARENT_LABEL] = "true"
    return ElasticQuota(
        metadata=ObjectMeta(name=name, namespace=namespace, uid=f"uid-eq-{namespace}-{name}", labels=all_labels,
                            annotations=dict(annotations or {})),
        spec=ElasticQuotaSpec(min=dict(minimum or {}), max=dict(maximum or {})),
    )


def capacity_quota(namespace: str, *, name: str = "quota", minimum: Mapping[str, str] | None = None,
                   maximum: Mapping[str, str] | None = None) -> CapacityElasticQuota:
    """A scheduler-plugins capacity scheduling ElasticQuota (scheduling.x-k8s.io/v1alpha1)."""
    return CapacityElasticQuota(
        metadata=ObjectMeta(name=name, namespace=namespace, uid=f"uid-ceq-{namespace}-{name}"),
        spec=ElasticQuotaSpec(min=dict(minimum or {}), max=dict(maximum or {})),
    )


def queue(name: str, *, weight: int | None = None, capability: Mapping[str, str] | None = None,
          deserved: Mapping[str, str] | None = None, guarantee: Mapping[str, str] | None = None,
          reclaimable: bool | None = None, parent: str = "", state: str = "") -> Queue:
    """A Volcano Queue (scheduling.volcano.sh/v1beta1)."""
    return Queue(
        metadata=ObjectMeta(name=name, uid=f"uid-queue-{name}"),
        spec=QueueSpec(weight=weight, capability=dict(capability or {}), deserved=dict(deserved or {}),
                       guarantee=QueueGuarantee(resource=dict(guarantee or {})), reclaimable=reclaimable,
                       parent=parent),
        status=QueueStatus(state=state),
    )


def volcano_pod_group(name: str, *, namespace: str = "default", min_member: int = 1,
                      queue: str = "", priority_class_name: str = "", phase: str = "",
                      min_resources: dict[str, str] | None = None, job_uid: str = "") -> VolcanoPodGroup:
    """A Volcano PodGroup; with `job_uid`, controlled by that Volcano Job (as its job controller makes one)."""
    owners = [OwnerReference(uid=job_uid, controller=True)] if job_uid else []
    return VolcanoPodGroup(
        metadata=OwnedMeta(name=name, namespace=namespace, uid=f"uid-vpg-{namespace}-{name}", owner_references=owners),
        spec=VolcanoPodGroupSpec(min_member=min_member, queue=queue, priority_class_name=priority_class_name,
                                 min_resources=min_resources or {}),
        status=PodGroupStatus(phase=phase),
    )


def volcano_job(name: str, *, namespace: str = "default", scheduler_name: str = "toposched") -> VolcanoJob:
    return VolcanoJob(metadata=ObjectMeta(name=name, namespace=namespace, uid=f"uid-vcjob-{namespace}-{name}"),
                      spec=VolcanoJobSpec(scheduler_name=scheduler_name))


def kubeflow_job(name: str, *, kind: str = "PyTorchJob", namespace: str = "default",
                 schedulers: Mapping[str, str] | None = None) -> KubeflowJob:
    """A training-operator v1 job of `kind` with replicas `schedulers` (replica type -> its template's
    schedulerName, "" for none; default Master and Worker naming toposched)."""
    named = schedulers if schedulers is not None else {"Master": "toposched", "Worker": "toposched"}
    replicas: dict[str, KubeflowReplicaSpec | None] = {
        replica: KubeflowReplicaSpec(template=KubeflowPodTemplate(spec=KubeflowTemplateSpec(scheduler_name=name)))
        for replica, name in named.items()}
    field = {"PyTorchJob": "pytorch_replica_specs", "TFJob": "tf_replica_specs", "MPIJob": "mpi_replica_specs",
             "XGBoostJob": "xgb_replica_specs", "PaddleJob": "paddle_replica_specs",
             "JAXJob": "jax_replica_specs"}[kind]
    return KubeflowJob(kind=kind, metadata=ObjectMeta(name=name, namespace=namespace,
                                                      uid=f"uid-{kind.lower()}-{namespace}-{name}"),
                       spec=KubeflowJobSpec(**{field: replicas}))


KaiAmounts = tuple[float | None, float | None, float | None]  # KAI's (quota, limit, overQuotaWeight)


def kai_queue(name: str, *, parent: str = "", cpu: KaiAmounts | None = None, memory: KaiAmounts | None = None,
              gpu: KaiAmounts | None = None, priority: int | None = None, preempt_min_runtime: str | None = None,
              reclaim_min_runtime: str | None = None, labels: Mapping[str, str] | None = None) -> KaiQueue:
    """A KAI Scheduler Queue (scheduling.run.ai/v2); each resource given as (quota, limit, overQuotaWeight)
    in KAI's units (millicores, megabytes, GPUs), None for an absent field; an absent resource is absent."""

    def resource(amounts: KaiAmounts | None) -> KaiQueueResource | None:
        if amounts is None:
            return None
        quota, limit, weight = (None if value is None else float(value) for value in amounts)  # as JSON decodes
        return KaiQueueResource(quota=quota, limit=limit, over_quota_weight=weight)

    return KaiQueue(
        metadata=ObjectMeta(name=name, uid=f"uid-kaiq-{name}", labels=dict(labels or {})),
        spec=KaiQueueSpec(parent_queue=parent, priority=priority, resources=KaiQueueResources(
            cpu=resource(cpu), memory=resource(memory), gpu=resource(gpu)), preempt_min_runtime=preempt_min_runtime,
            reclaim_min_runtime=reclaim_min_runtime),
    )


def kai_pod_group(name: str, *, namespace: str = "default", min_member: int = 1, queue: str = "",
                  preemptibility: str = "", priority_class_name: str = "", preemption_delay: str | None = None,
                  created: str = "", annotations: dict[str, str] | None = None,
                  mark_unschedulable: bool | None = None, labels: Mapping[str, str] | None = None,
                  scheduling_backoff: int | None = None) -> KaiPodGroup:
    """A KAI Scheduler PodGroup (scheduling.run.ai/v2alpha2); pods join it with `pod-group-name`."""
    return KaiPodGroup(
        metadata=KaiObjectMeta(name=name, namespace=namespace, uid=f"uid-kaipg-{namespace}-{name}",
                               creation_timestamp=created, annotations=annotations or {}, labels=dict(labels or {})),
        spec=KaiPodGroupSpec(min_member=min_member, queue=queue, preemptibility=preemptibility,
                             priority_class_name=priority_class_name, preemption_delay=preemption_delay,
                             mark_unschedulable=mark_unschedulable, scheduling_backoff=scheduling_backoff),
    )


def gpus(count: int) -> dict[str, str]:
    return {"nvidia.com/gpu": str(count)}


def gpu_nodes(count: int, *, per_block: int = 2) -> list[Event]:
    """`count` 8-GPU nodes `n0`.. in blocks of `per_block` under one spine, as NodeUpserted events."""
    return [node_event(node(f"n{index}", block=f"b{index // per_block}", spine="s0")) for index in range(count)]
