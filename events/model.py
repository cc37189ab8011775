"""The events toposched records: what it saw of the cluster and what it decided.

Everything the scheduler knows is the fold of these events (see `state/`), so they are the
system's source of truth and its on-disk format. Each is a frozen msgspec Struct tagged by a short,
stable name (the tag is what is written to disk: never rename one). Every event carries `seq`, its
position in the log (assigned when it is appended), and `time`, seconds on the clock of whoever
produced it (wall time in the daemon, virtual time in `simulate`).

Keys: a namespaced object is `"namespace/name"`; a gang is named by its PodGroup key.

Pure data: no I/O, nothing of ours imported but the object shapes.
"""

from __future__ import annotations

from typing import TypeAlias

import msgspec

from events.objects import (
    CapacityElasticQuota,
    ClusterNetworkTopology,
    CompositePodGroup,
    CSINode,
    ElasticQuota,
    HyperNode,
    KaiPodGroup,
    KaiQueue,
    KaiTopology,
    KubeflowJob,
    KubePodGroup,
    KueueTopology,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    StorageClass,
    VolcanoJob,
    VolcanoPodGroup,
    Workload,
)


class EventBase(msgspec.Struct, frozen=True, kw_only=True, tag_field="t", omit_defaults=True, gc=False):
    """Events are acyclic plain data (see `events.objects._K8s` for why `gc=False`)."""

    seq: int = 0
    time: float = 0.0


# --------------------------------------------------------------------------- observed objects


class NodeUpserted(EventBase, tag="node", frozen=True):
    node: Node


class NodeDeleted(EventBase, tag="node-", frozen=True):
    name: str


class PodUpserted(EventBase, tag="pod", frozen=True):
    pod: Pod


class PodDeleted(EventBase, tag="pod-", frozen=True):
    key: str
    uid: str = ""


class PodGroupUpserted(EventBase, tag="pg", frozen=True):
    pod_group: PodGroup


class PodGroupDeleted(EventBase, tag="pg-", frozen=True):
    key: str


class VolcanoPodGroupUpserted(EventBase, tag="vpg", frozen=True):
    pod_group: VolcanoPodGroup


class VolcanoPodGroupDeleted(EventBase, tag="vpg-", frozen=True):
    key: str


class VolcanoJobUpserted(EventBase, tag="vcjob", frozen=True):
    """A Volcano Job (batch.volcano.sh/v1alpha1): whose scheduler its PodGroup's pods will be."""

    job: VolcanoJob


class VolcanoJobDeleted(EventBase, tag="vcjob-", frozen=True):
    key: str


class KubeflowJobUpserted(EventBase, tag="kfjob", frozen=True):
    """A Kubeflow training-operator v1 job (kubeflow.org/v1, any of its kinds): whose scheduler its Volcano
    PodGroup's pods will be."""

    job: KubeflowJob


class KubeflowJobDeleted(EventBase, tag="kfjob-", frozen=True):
    kind: str  # PyTorchJob, TFJob, ...: jobs of different kinds may share a namespace and name
    key: str


class SchedulerPluginsPodGroupUpserted(EventBase, tag="xpg", frozen=True):
    """A scheduling.x-k8s.io/v1alpha1 PodGroup (scheduler-plugins' current group; Koordinator's fields)."""

    pod_group: PodGroup


class SchedulerPluginsPodGroupDeleted(EventBase, tag="xpg-", frozen=True):
    key: str


class KubePodGroupUpserted(EventBase, tag="kpg", frozen=True):
    """A scheduling.k8s.io PodGroup (Kubernetes' own, Workload API: v1alpha2, v1alpha3 or v1beta1)."""

    pod_group: KubePodGroup


class KubePodGroupDeleted(EventBase, tag="kpg-", frozen=True):
    key: str


class CompositePodGroupUpserted(EventBase, tag="cpg", frozen=True):
    """A scheduling.k8s.io/v1alpha3 CompositePodGroup (Kubernetes 1.37, alpha): a non-leaf group of a hierarchy."""

    composite: CompositePodGroup


class CompositePodGroupDeleted(EventBase, tag="cpg-", frozen=True):
    key: str


class WorkloadUpserted(EventBase, tag="wl", frozen=True):
    """A scheduling.k8s.io/v1alpha1 Workload (Kubernetes 1.35): its podGroups are gangs."""

    workload: Workload


class WorkloadDeleted(EventBase, tag="wl-", frozen=True):
    key: str


class NetworkTopologyUpserted(EventBase, tag="cnt", frozen=True):
    topology: ClusterNetworkTopology


class NetworkTopologyDeleted(EventBase, tag="cnt-", frozen=True):
    name: str


class HyperNodeUpserted(EventBase, tag="hn", frozen=True):
    hyper_node: HyperNode


class HyperNodeDeleted(EventBase, tag="hn-", frozen=True):
    name: str


class KueueTopologyUpserted(EventBase, tag="kt", frozen=True):
    """A Kueue `Topology` (kueue.x-k8s.io): levels of node label keys."""

    topology: KueueTopology


class KueueTopologyDeleted(EventBase, tag="kt-", frozen=True):
    name: str


class KaiTopologyUpserted(EventBase, tag="kait", frozen=True):
    """A KAI Scheduler `Topology` (kai.scheduler): levels of node label keys."""

    topology: KaiTopology


class KaiTopologyDeleted(EventBase, tag="kait-", frozen=True):
    name: str


class KaiPodGroupUpserted(EventBase, tag="kaipg", frozen=True):
    """A KAI Scheduler PodGroup (scheduling.run.ai/v2alpha2)."""

    pod_group: KaiPodGroup


class KaiPodGroupDeleted(EventBase, tag="kaipg-", frozen=True):
    key: str


class PriorityClassUpserted(EventBase, tag="pc", frozen=True):
    priority_class: PriorityClass


class PriorityClassDeleted(EventBase, tag="pc-", frozen=True):
    name: str


class ElasticQuotaUpserted(EventBase, tag="eq", frozen=True):
    quota: ElasticQuota


class ElasticQuotaDeleted(EventBase, tag="eq-", frozen=True):
    key: str


class CapacityElasticQuotaUpserted(EventBase, tag="ceq", frozen=True):
    quota: CapacityElasticQuota


class CapacityElasticQuotaDeleted(EventBase, tag="ceq-", frozen=True):
    key: str


class QueueUpserted(EventBase, tag="queue", frozen=True):
    queue: Queue


class QueueDeleted(EventBase, tag="queue-", frozen=True):
    name: str


class KaiQueueUpserted(EventBase, tag="kaiq", frozen=True):
    """A KAI Scheduler Queue (scheduling.run.ai/v2)."""

    queue: KaiQueue


class KaiQueueDeleted(EventBase, tag="kaiq-", frozen=True):
    name: str


class ClaimUpserted(EventBase, tag="pvc", frozen=True):
    """A v1 PersistentVolumeClaim: a pod using it may go only where its volume can be reached."""

    claim: PersistentVolumeClaim


class ClaimDeleted(EventBase, tag="pvc-", frozen=True):
    key: str


class VolumeUpserted(EventBase, tag="pv", frozen=True):
    volume: PersistentVolume


class VolumeDeleted(EventBase, tag="pv-", frozen=True):
    name: str


class StorageClassUpserted(EventBase, tag="sc", frozen=True):
    storage_class: StorageClass


class StorageClassDeleted(EventBase, tag="sc-", frozen=True):
    name: str


class CSINodeUpserted(EventBase, tag="csinode", frozen=True):
    """A storage.k8s.io/v1 CSINode: how many volumes of each CSI driver its node may use (state/volumes.py)."""

    csi_node: CSINode


class CSINodeDeleted(EventBase, tag="csinode-", frozen=True):
    name: str


class BudgetUpserted(EventBase, tag="pdb", frozen=True):
    """A policy/v1 PodDisruptionBudget: read by preemption only (preemption/budgets.py)."""

    budget: PodDisruptionBudget


class BudgetDeleted(EventBase, tag="pdb-", frozen=True):
    key: str


# Event types of one kind of object, for the exhaustive dispatch tables (events.dispatch): a table that
# handles every type of a group alike names the group, so a new kind joins its group once, here.
BUDGET_EVENTS = (BudgetUpserted, BudgetDeleted)
# The objects a pod's volumes depend on (state/volumes.py): claims, volumes, classes, CSINodes' attach limits.
VOLUME_EVENTS = (ClaimUpserted, ClaimDeleted, VolumeUpserted, VolumeDeleted, StorageClassUpserted,
                 StorageClassDeleted, CSINodeUpserted, CSINodeDeleted)
# Every dialect's PodGroup (the Workload API's Workload apart: it defines several gangs).
POD_GROUP_EVENTS = (PodGroupUpserted, PodGroupDeleted, VolcanoPodGroupUpserted, VolcanoPodGroupDeleted,
                    SchedulerPluginsPodGroupUpserted, SchedulerPluginsPodGroupDeleted, KubePodGroupUpserted,
                    KubePodGroupDeleted, KaiPodGroupUpserted, KaiPodGroupDeleted)
# The objects the topology tree may be built from (state/topology.py; nodes' labels apart).
TOPOLOGY_OBJECT_EVENTS = (NetworkTopologyUpserted, NetworkTopologyDeleted, HyperNodeUpserted, HyperNodeDeleted,
                          KueueTopologyUpserted, KueueTopologyDeleted, KaiTopologyUpserted, KaiTopologyDeleted)
# Every dialect's quota object (state/quota.py).
QUOTA_OBJECT_EVENTS = (ElasticQuotaUpserted, ElasticQuotaDeleted, CapacityElasticQuotaUpserted,
                       CapacityElasticQuotaDeleted, QueueUpserted, QueueDeleted, KaiQueueUpserted, KaiQueueDeleted)
PRIORITY_CLASS_EVENTS = (PriorityClassUpserted, PriorityClassDeleted)
# 1.37's CompositePodGroups: the non-leaf groups of a hierarchy of Kubernetes PodGroups (state/composites.py).
COMPOSITE_EVENTS = (CompositePodGroupUpserted, CompositePodGroupDeleted)
# The workload objects whose PodGroups toposched enqueues (state/volcano_enqueue.py).
JOB_OBJECT_EVENTS = (VolcanoJobUpserted, VolcanoJobDeleted, KubeflowJobUpserted, KubeflowJobDeleted)


class ObjectUndecodable(EventBase, tag="bad", frozen=True):
    """An object the watch delivered that could not be decoded at all (kept for the record)."""

    kind: str
    key: str
    problem: str


# --------------------------------------------------------------------------- decisions


class PodAssumed(EventBase, tag="assume", frozen=True):
    """Placement put the pod on a node; its capacity is held until bound or forgotten."""

    pod: str
    uid: str
    node: str
    gang: str = ""


class PodForgotten(EventBase, tag="forget", frozen=True):
    """An assumed pod was released without binding (permit failed, timed out, rolled back)."""

    pod: str
    uid: str = ""
    reason: str = ""


class BindRequested(EventBase, tag="bind", frozen=True):
    pod: str
    uid: str
    node: str


class PodBound(EventBase, tag="bound", frozen=True):
    pod: str
    uid: str
    node: str


class BindFailed(EventBase, tag="bindfail", frozen=True):
    pod: str
    uid: str
    node: str
    reason: str


class PodNominated(EventBase, tag="nominate", frozen=True):
    """Capacity on `node` is reserved for the pod (a preemptor) until it binds or gives up."""

    pod: str
    uid: str
    node: str
    gang: str = ""
    priority: int = 0


class NominationCleared(EventBase, tag="unnominate", frozen=True):
    pod: str
    reason: str = ""


class EvictionRequested(EventBase, tag="evict", frozen=True):
    pod: str
    uid: str
    preemptor: str
    reason: str = ""


class GangTimedOut(EventBase, tag="timeout", frozen=True):
    gang: str
    reason: str = ""


class GangPending(EventBase, tag="pending", frozen=True):
    """The gang could not be placed in this attempt; `reason` is what the user is shown. `held`: it was not
    tried against nodes at all, because members (or the object defining it) have yet to appear: what
    kube-scheduler's PreEnqueue holds back (its pods are not ready for scheduling, not unschedulable)."""

    gang: str
    reason: str
    attempt: int = 0
    held: bool = False


class GangPlanned(EventBase, tag="planned", frozen=True):
    """Placement chose a spot for the gang; `explanation` says where and why."""

    gang: str
    domain: str = ""
    layer: str = ""
    pods: int = 0
    explanation: str = ""
    attempt: int = 0


class PreemptionPlanned(EventBase, tag="preempt", frozen=True):
    """Job-level preemption chose victims for the gang; `explanation` says what was weighed.

    `reclaim_from` names the quotas a quota reclaim takes borrowed capacity back from (empty for
    priority preemption, which never leaves the preemptor's own quota).
    """

    gang: str
    victims: list[str] = []
    victim_jobs: list[str] = []
    nodes: list[str] = []
    explanation: str = ""
    reclaim_from: list[str] = []


Event: TypeAlias = (
    NodeUpserted
    | NodeDeleted
    | PodUpserted
    | PodDeleted
    | PodGroupUpserted
    | PodGroupDeleted
    | VolcanoPodGroupUpserted
    | VolcanoPodGroupDeleted
    | SchedulerPluginsPodGroupUpserted
    | SchedulerPluginsPodGroupDeleted
    | KubePodGroupUpserted
    | KubePodGroupDeleted
    | CompositePodGroupUpserted
    | CompositePodGroupDeleted
    | WorkloadUpserted
    | WorkloadDeleted
    | NetworkTopologyUpserted
    | NetworkTopologyDeleted
    | HyperNodeUpserted
    | HyperNodeDeleted
    | KueueTopologyUpserted
    | KueueTopologyDeleted
    | KaiTopologyUpserted
    | KaiTopologyDeleted
    | KaiPodGroupUpserted
    | KaiPodGroupDeleted
    | PriorityClassUpserted
    | PriorityClassDeleted
    | ElasticQuotaUpserted
    | ElasticQuotaDeleted
    | CapacityElasticQuotaUpserted
    | CapacityElasticQuotaDeleted
    | QueueUpserted
    | QueueDeleted
    | KaiQueueUpserted
    | KaiQueueDeleted
    | ClaimUpserted
    | ClaimDeleted
    | VolumeUpserted
    | VolumeDeleted
    | StorageClassUpserted
    | StorageClassDeleted
    | CSINodeUpserted
    | CSINodeDeleted
    | BudgetUpserted
    | BudgetDeleted
    | VolcanoJobUpserted
    | VolcanoJobDeleted
    | KubeflowJobUpserted
    | KubeflowJobDeleted
    | ObjectUndecodable
    | PodAssumed
    | PodForgotten
    | BindRequested
    | PodBound
    | BindFailed
    | PodNominated
    | NominationCleared
    | EvictionRequested
    | GangTimedOut
    | GangPending
    | GangPlanned
    | PreemptionPlanned
)

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Event] = msgspec.msgpack.Decoder(Event)


def encode_event(event: Event) -> bytes:
    return _encoder.encode(event)


def decode_event(payload: bytes) -> Event:
    return _decoder.decode(payload)


def with_seq(event: Event, seq: int) -> Event:
    replaced: Event = msgspec.structs.replace(event, seq=seq)
    return replaced


def object_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name
