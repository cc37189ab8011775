"""Turning Kubernetes objects (raw JSON from a watch, dicts from a YAML file) into events.

One table, `KINDS`, says for every kind toposched reads: its API group/version and plural (what a
watcher lists), whether it is namespaced, its slim type (what msgspec decodes into) and which events
record its creation/update and deletion. The daemon's watchers and the scenario loader both use it,
so there is one mapping from the API to the log.

An object that cannot be decoded is not dropped: it becomes an `ObjectUndecodable` event naming the
object and the field msgspec rejected, so the problem is visible in the state and in replays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from events.model import (
    BudgetDeleted,
    BudgetUpserted,
    CapacityElasticQuotaDeleted,
    CapacityElasticQuotaUpserted,
    ClaimDeleted,
    ClaimUpserted,
    CompositePodGroupDeleted,
    CompositePodGroupUpserted,
    CSINodeDeleted,
    CSINodeUpserted,
    ElasticQuotaDeleted,
    ElasticQuotaUpserted,
    Event,
    HyperNodeDeleted,
    HyperNodeUpserted,
    KaiPodGroupDeleted,
    KaiPodGroupUpserted,
    KaiQueueDeleted,
    KaiQueueUpserted,
    KaiTopologyDeleted,
    KaiTopologyUpserted,
    KubeflowJobDeleted,
    KubeflowJobUpserted,
    KubePodGroupDeleted,
    KubePodGroupUpserted,
    KueueTopologyDeleted,
    KueueTopologyUpserted,
    NetworkTopologyDeleted,
    NetworkTopologyUpserted,
    NodeDeleted,
    NodeUpserted,
    ObjectUndecodable,
    PodDeleted,
    PodGroupDeleted,
    PodGroupUpserted,
    PodUpserted,
    PriorityClassDeleted,
    PriorityClassUpserted,
    QueueDeleted,
    QueueUpserted,
    SchedulerPluginsPodGroupDeleted,
    SchedulerPluginsPodGroupUpserted,
    StorageClassDeleted,
    StorageClassUpserted,
    VolcanoJobDeleted,
    VolcanoJobUpserted,
    VolcanoPodGroupDeleted,
    VolcanoPodGroupUpserted,
    VolumeDeleted,
    VolumeUpserted,
    WorkloadDeleted,
    WorkloadUpserted,
    object_key,
)
from events.objects import (
    CAPACITY_QUOTA_API,
    CLUSTER_NETWORK_TOPOLOGY_API,
    COMPOSITE_POD_GROUP_API,
    HYPERNODE_API,
    KAI_POD_GROUP_API,
    KAI_QUEUE_API,
    KAI_TOPOLOGY_API,
    KOORDINATOR_POD_GROUP_API,
    KOORDINATOR_QUOTA_API,
    KUBE_POD_GROUP_API,
    KUBE_POD_GROUP_OLDER_APIS,
    KUBEFLOW_JOB_API,
    KUBEFLOW_JOB_KINDS,
    KUEUE_TOPOLOGY_API,
    KUEUE_TOPOLOGY_OLDER_APIS,
    SCHEDULER_PLUGINS_POD_GROUP_API,
    VOLCANO_JOB_API,
    VOLCANO_POD_GROUP_API,
    VOLCANO_QUEUE_API,
    WORKLOAD_API,
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
    ObjectMeta,
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
    slim,
)

KubeObject = (Node | Pod | PodGroup | VolcanoPodGroup | KubePodGroup | CompositePodGroup | Workload
              | ClusterNetworkTopology | HyperNode | KueueTopology | KaiTopology | KaiPodGroup | PriorityClass
              | ElasticQuota | CapacityElasticQuota | Queue | KaiQueue | PersistentVolumeClaim | PersistentVolume
              | StorageClass | CSINode | PodDisruptionBudget | VolcanoJob | KubeflowJob)


@dataclass(frozen=True)
class KindInfo:
    """How one kind maps between the API and the log."""

    name: str  # our name for the kind: unique even where Kubernetes kinds collide (two PodGroups)
    api_version: str
    kind: str
    plural: str
    namespaced: bool
    type: type[KubeObject]
    upsert: Callable[[Any], Event]
    delete: Callable[[str, str], Event]  # (key, uid) -> event
    # Older apiVersions serving the same objects, in a shape `type` reads: a watcher lists the kind at the
    # first one served when `api_version` is not, and a scenario may use any; an object keeps the version it
    # was served or written at (an Event about it names that one).
    older_api_versions: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


def _kubeflow_job_kind(kind: str, plural: str) -> KindInfo:
    """One of training-operator v1's job kinds: all read as `KubeflowJob`, deleted by kind and key."""
    return KindInfo(kind, KUBEFLOW_JOB_API, kind, plural, True, KubeflowJob,
                    lambda o: KubeflowJobUpserted(job=o), lambda k, u: KubeflowJobDeleted(kind=kind, key=k))


KINDS: tuple[KindInfo, ...] = (
    KindInfo("PriorityClass", "scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False, PriorityClass,
             lambda o: PriorityClassUpserted(priority_class=o), lambda k, u: PriorityClassDeleted(name=k)),
    KindInfo("ClusterNetworkTopology", CLUSTER_NETWORK_TOPOLOGY_API, "ClusterNetworkTopology",
             "clusternetworktopologies", False, ClusterNetworkTopology,
             lambda o: NetworkTopologyUpserted(topology=o), lambda k, u: NetworkTopologyDeleted(name=k)),
    KindInfo("HyperNode", HYPERNODE_API, "HyperNode", "hypernodes", False, HyperNode,
             lambda o: HyperNodeUpserted(hyper_node=o), lambda k, u: HyperNodeDeleted(name=k)),
    KindInfo("KueueTopology", KUEUE_TOPOLOGY_API, "Topology", "topologies", False, KueueTopology,
             lambda o: KueueTopologyUpserted(topology=o), lambda k, u: KueueTopologyDeleted(name=k),
             KUEUE_TOPOLOGY_OLDER_APIS),
    KindInfo("KaiTopology", KAI_TOPOLOGY_API, "Topology", "topologies", False, KaiTopology,
             lambda o: KaiTopologyUpserted(topology=o), lambda k, u: KaiTopologyDeleted(name=k)),
    # Quotas come before the pods they hold, so a relist folds each pod into its quota at once.
    KindInfo("ElasticQuota", KOORDINATOR_QUOTA_API, "ElasticQuota", "elasticquotas", True, ElasticQuota,
             lambda o: ElasticQuotaUpserted(quota=o), lambda k, u: ElasticQuotaDeleted(key=k)),
    KindInfo("CapacityElasticQuota", CAPACITY_QUOTA_API, "ElasticQuota", "elasticquotas", True,
             CapacityElasticQuota, lambda o: CapacityElasticQuotaUpserted(quota=o),
             lambda k, u: CapacityElasticQuotaDeleted(key=k)),
    KindInfo("Queue", VOLCANO_QUEUE_API, "Queue", "queues", False, Queue,
             lambda o: QueueUpserted(queue=o), lambda k, u: QueueDeleted(name=k)),
    KindInfo("KaiQueue", KAI_QUEUE_API, "Queue", "queues", False, KaiQueue,
             lambda o: KaiQueueUpserted(queue=o), lambda k, u: KaiQueueDeleted(name=k)),
    # Volumes: what a pod's claims let it reach (state/volumes.py).
    KindInfo("StorageClass", "storage.k8s.io/v1", "StorageClass", "storageclasses", False, StorageClass,
             lambda o: StorageClassUpserted(storage_class=o), lambda k, u: StorageClassDeleted(name=k)),
    KindInfo("PersistentVolume", "v1", "PersistentVolume", "persistentvolumes", False, PersistentVolume,
             lambda o: VolumeUpserted(volume=o), lambda k, u: VolumeDeleted(name=k)),
    # Named as their nodes; read before the nodes so a relist knows each node's attach limits at once.
    KindInfo("CSINode", "storage.k8s.io/v1", "CSINode", "csinodes", False, CSINode,
             lambda o: CSINodeUpserted(csi_node=o), lambda k, u: CSINodeDeleted(name=k)),
    KindInfo("PersistentVolumeClaim", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True,
             PersistentVolumeClaim, lambda o: ClaimUpserted(claim=o), lambda k, u: ClaimDeleted(key=k)),
    KindInfo("PodDisruptionBudget", "policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True,
             PodDisruptionBudget, lambda o: BudgetUpserted(budget=o), lambda k, u: BudgetDeleted(key=k)),
    KindInfo("Node", "v1", "Node", "nodes", False, Node,
             lambda o: NodeUpserted(node=o), lambda k, u: NodeDeleted(name=k)),
    # Before the PodGroups: whose scheduler a Volcano or Kubeflow Job's PodGroup is for is known when it is read.
    KindInfo("VolcanoJob", VOLCANO_JOB_API, "Job", "jobs", True, VolcanoJob,
             lambda o: VolcanoJobUpserted(job=o), lambda k, u: VolcanoJobDeleted(key=k)),
    *(_kubeflow_job_kind(kind, plural) for kind, plural in KUBEFLOW_JOB_KINDS),
    KindInfo("PodGroup", KOORDINATOR_POD_GROUP_API, "PodGroup", "podgroups", True, PodGroup,
             lambda o: PodGroupUpserted(pod_group=o), lambda k, u: PodGroupDeleted(key=k)),
    KindInfo("VolcanoPodGroup", VOLCANO_POD_GROUP_API, "PodGroup", "podgroups", True, VolcanoPodGroup,
             lambda o: VolcanoPodGroupUpserted(pod_group=o), lambda k, u: VolcanoPodGroupDeleted(key=k)),
    KindInfo("SchedulerPluginsPodGroup", SCHEDULER_PLUGINS_POD_GROUP_API, "PodGroup", "podgroups", True, PodGroup,
             lambda o: SchedulerPluginsPodGroupUpserted(pod_group=o),
             lambda k, u: SchedulerPluginsPodGroupDeleted(key=k)),
    KindInfo("KubernetesPodGroup", KUBE_POD_GROUP_API, "PodGroup", "podgroups", True, KubePodGroup,
             lambda o: KubePodGroupUpserted(pod_group=o), lambda k, u: KubePodGroupDeleted(key=k),
             KUBE_POD_GROUP_OLDER_APIS),
    # After the PodGroups: a hierarchy's leaves are held when its composites come (state/composites.py).
    KindInfo("CompositePodGroup", COMPOSITE_POD_GROUP_API, "CompositePodGroup", "compositepodgroups", True,
             CompositePodGroup, lambda o: CompositePodGroupUpserted(composite=o),
             lambda k, u: CompositePodGroupDeleted(key=k)),
    KindInfo("KaiPodGroup", KAI_POD_GROUP_API, "PodGroup", "podgroups", True, KaiPodGroup,
             lambda o: KaiPodGroupUpserted(pod_group=o), lambda k, u: KaiPodGroupDeleted(key=k)),
    KindInfo("Workload", WORKLOAD_API, "Workload", "workloads", True, Workload,
             lambda o: WorkloadUpserted(workload=o), lambda k, u: WorkloadDeleted(key=k)),
    KindInfo("Pod", "v1", "Pod", "pods", True, Pod,
             lambda o: PodUpserted(pod=o), lambda k, u: PodDeleted(key=k, uid=u)),
)

KIND_BY_NAME: dict[str, KindInfo] = {info.name: info for info in KINDS}
KIND_BY_API: dict[tuple[str, str], KindInfo] = {
    (api_version, info.kind): info for info in KINDS for api_version in (info.api_version, *info.older_api_versions)}


class _Meta(msgspec.Struct):
    metadata: ObjectMeta = ObjectMeta()


def kind_of(api_version: str, kind: str) -> KindInfo | None:
    return KIND_BY_API.get((api_version, kind))


def key_of(meta: ObjectMeta) -> str:
    return object_key(meta.namespace, meta.name)


def decode_object(info: KindInfo, raw: bytes | Mapping[str, Any],
                  api_version: str = "") -> KubeObject | ObjectUndecodable:
    """Decode one object of a known kind from JSON bytes or a parsed dict, or say why it cannot be.

    The object comes back slimmed (`events.objects.slim`): annotations toposched never reads are gone.
    Its apiVersion and kind are the kind's (`api_version`: the one of its `older_api_versions` it was
    served at): the API server serves every object of an endpoint in that version, and writes neither
    field on a list's items of a built-in kind (kubernetes/kubernetes#3030), where the type's defaults
    would otherwise answer (a scheduler-plugins PodGroup shares its type with the Koordinator one, whose
    group it would get).
    """
    served = api_version or info.api_version
    try:
        if isinstance(raw, bytes | bytearray | memoryview):
            decoded = msgspec.json.decode(raw, type=info.type)
        else:
            decoded = msgspec.convert(raw, type=info.type)
        if decoded.api_version != served or decoded.kind != info.kind:
            decoded = msgspec.structs.replace(decoded, api_version=served, kind=info.kind)
        return slim(decoded)
    except msgspec.ValidationError as error:
        return ObjectUndecodable(kind=info.name, key=_best_effort_key(raw), problem=_field_message(error))
    except msgspec.DecodeError as error:
        return ObjectUndecodable(kind=info.name, key=_best_effort_key(raw), problem=f"malformed JSON: {error}")


def upsert_event(info: KindInfo, raw: bytes | Mapping[str, Any], api_version: str = "") -> Event:
    decoded = decode_object(info, raw, api_version)
    if isinstance(decoded, ObjectUndecodable):
        return decoded
    return info.upsert(decoded)


def delete_event(info: KindInfo, meta: ObjectMeta) -> Event:
    return info.delete(key_of(meta), meta.uid)


def _best_effort_key(raw: bytes | Mapping[str, Any]) -> str:
    try:
        if isinstance(raw, bytes | bytearray | memoryview):
            meta = msgspec.json.decode(raw, type=_Meta).metadata
        else:
            meta = msgspec.convert(raw, type=_Meta).metadata
    except (msgspec.ValidationError, msgspec.DecodeError):
        return "<unnamed>"
    return key_of(meta) or "<unnamed>"


def _field_message(error: msgspec.ValidationError) -> str:
    # msgspec says e.g. "Expected `int`, got `str` - at `$.spec.minMember`"; turn the path into a field name.
    text = str(error)
    message, _, path = text.partition(" - at `$.")
    if path:
        return f"{path.rstrip('`')}: {message}"
    return text
