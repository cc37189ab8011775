"""The fold: `ClusterState` is what the scheduler knows, built only by applying events.

Rules of this module:
- `apply(event)` is the only way state changes. The same events in the same order always give the
  same state (no clock, no randomness, no I/O), and a state restored from `snapshot()` equals the
  state folded from the first event (`canonical()` is how that is checked).
- Accounting: a pod's requests are counted on exactly one node at a time, the node it is bound to
  (while not terminal) or else the node it is assumed on. Every event that touches a pod ends in
  `_settle(pod)`, which moves the pod's usage to where it should be; nothing else edits `used`.
  Nominated capacity is kept apart (`NodeInfo.nominated`), since whether it blocks a pod depends
  on that pod's priority.
- Bad input never raises out of `apply`: the object is kept and the problem is recorded in
  `problems`, naming the object and field. Nor does a bug: an exception while folding one event is
  caught, the object it concerns gets a problem (`fold_failures`) and, for a pod, is not placed
  until a later event folds cleanly; `apply` returns the exception for the caller to log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import msgspec

from events.dispatch import each, exhaustive
from events.model import (
    QUOTA_OBJECT_EVENTS,
    BindFailed,
    BindRequested,
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
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
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
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodGroupDeleted,
    PodGroupUpserted,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
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
    decode_event,
    object_key,
)
from events.objects import (
    DEFAULT_SCHEDULER_NAME,
    GANG_MIN_AVAILABLE_ANNOTATION,
    KAI_DEFAULT_PRIORITY_CLASS,
    KAI_NODE_POOL_LABEL,
    KAI_PRIORITY_LABEL,
    KAI_QUEUE_LABEL,
    KAI_SUB_GROUP_LABEL,
    LIGHTWEIGHT_MIN_AVAILABLE_LABEL,
    OVERSIZED_ANNOTATION,
    SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    SIDECAR_RESTART_POLICY,
    VOLCANO_PREEMPTABLE_ANNOTATION,
    VOLCANO_TASK_SPEC_ANNOTATION,
    CapacityElasticQuota,
    ClusterNetworkTopology,
    ClusterNetworkTopologySpec,
    CompositePodGroup,
    Container,
    ContainerResourceStatus,
    CSINode,
    ElasticQuota,
    HyperNode,
    KaiPodGroup,
    KaiQueue,
    KaiTopology,
    KubeflowJob,
    KubePodGroup,
    KueueTopology,
    NetworkTopologyLayer,
    Node,
    ObjectMeta,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PodSpec,
    PodStatus,
    PriorityClass,
    Queue,
    StorageClass,
    Taint,
    VolcanoJob,
    VolcanoPodGroup,
    Workload,
    resize_infeasible,
)
from events.parts import PodUpsertedParts, decode_parts
from manifests.defaulting import pod_level_resource
from state.compact import Compactor, Shape
from state.composites import (
    COMPOSITE_PROBLEM,
    LABEL_PATH_SEPARATOR,
    composite_leaf_spec,
    family_of,
    label_tree_name,
    parent_key,
    root_of,
    unread_family,
)
from state.gangs import (
    INTERNAL_ERROR,
    INVALID_QUANTITY,
    KAI,
    KAI_POD_GROUP_PROBLEM,
    KUBE_POD_GROUP_PROBLEM,
    KUBERNETES,
    POD_GANG_PROBLEM,
    POD_GROUP_PROBLEM,
    RECORD_TOO_LARGE,
    SCHEDULER_PLUGINS,
    SCHEDULER_PLUGINS_PROBLEM,
    UNDECODABLE_OBJECT,
    UNSUPPORTED_FIELD,
    VOLCANO,
    WORKLOAD_PROBLEM,
    GangSpec,
    Problem,
    koordinator_gang_spec,
    preemptable_of,
    volcano_gang_spec,
)
from state.indexes import leave
from state.kai_gangs import NON_PREEMPTIBLE_PRIORITY, kai_gang_spec, shown
from state.node_changes import NodeChanges
from state.node_table import NodeTable, node_table, nodes_of
from state.pod_constraints import DRA_NOT_PLACED, shared_device, unconsidered
from state.pod_gangs import annotation_gang_spec, defines_gang, membership, workload_of_gang
from state.pod_table import PodRowTable, PodTable, columns, columns_of_rows, pod_table, pods_of, shared_parts
from state.quota import IDLE_UNLESS_ACTIVE, KAI_QUEUE_KIND, QuotaBook
from state.resources import (
    HOST_PORT_PREFIX,
    MILLI,
    QUANTITY_CACHE,
    QuantityError,
    Resources,
    add_into,
    host_port_resource,
    parse_quantity,
)
from state.topology import TopologyTree
from state.topology_validation import (
    CLUSTER_LAYER,
    DEFAULT_CNT_NAME,
    KAI_TOPOLOGY_KIND,
    KUEUE_TOPOLOGY_KIND,
    NODE_LAYER,
    layer_name_of,
    tier_name_of,
)
from state.volumes import (
    CLAIM_KIND,
    CSI_NODE_KIND,
    INVALID_CSI_NODE,
    NO_NEEDS,
    VolumeBook,
    VolumeNeeds,
    claim_class,
    csi_volumes,
    needs_of,
    spoken_for,
)
from state.workload_api import kube_pod_group_spec, workload_gang_spec, workload_problems

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
NEVER = "Never"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
POD_SLOT_MILLI = 1000  # every pod takes one of the node's `pods` slots
MAX_HOST_PORTS = 128  # host ports a pod of ours may hold (each is checked per node): more, and it is not placed

# Where a gang's spec can come from, the first present winning (a PodGroup object, else a Workload's
# podGroup, else the annotations of its pods), with the problem kind each one's problems are filed under.
SIGS_SOURCE = "scheduling.sigs.k8s.io PodGroup"
X_K8S_SOURCE = "scheduling.x-k8s.io PodGroup"
KUBE_SOURCE = "scheduling.k8s.io PodGroup"
VOLCANO_SOURCE = "scheduling.volcano.sh PodGroup"
VOLCANO_JOB_KIND = "VolcanoJob"
KAI_SOURCE = "scheduling.run.ai PodGroup"
WORKLOAD_SOURCE = "scheduling.k8s.io Workload"
POD_METADATA_SOURCE = "pod annotations"
GANG_SOURCES: tuple[tuple[str, str], ...] = (
    (SIGS_SOURCE, POD_GROUP_PROBLEM),
    (X_K8S_SOURCE, SCHEDULER_PLUGINS_PROBLEM),
    (KUBE_SOURCE, KUBE_POD_GROUP_PROBLEM),
    (VOLCANO_SOURCE, POD_GROUP_PROBLEM),
    (KAI_SOURCE, KAI_POD_GROUP_PROBLEM),
    (WORKLOAD_SOURCE, WORKLOAD_PROBLEM),
    (POD_METADATA_SOURCE, POD_GANG_PROBLEM),
)
_PROBLEM_KIND_OF_SOURCE: dict[str, str] = dict(GANG_SOURCES)


class NodeInfo:
    """A node as the scheduler sees it. Mutated only by `ClusterState`."""

    __slots__ = ("allocatable", "labels", "name", "nominated", "obj", "pods", "taints", "unschedulable", "used")

    def __init__(self, node: Node, allocatable: Resources) -> None:
        self.name = node.metadata.name
        self.obj = node
        self.labels: Mapping[str, str] = node.metadata.labels
        self.taints: list[Taint] = node.spec.taints
        self.unschedulable = node.spec.unschedulable
        self.allocatable = allocatable
        self.used: Resources = {}
        self.pods: set[str] = set()  # pods counted in `used`
        self.nominated: dict[str, PodInfo] = {}  # pods holding a nomination on this node


def _labels_derive(labels: Mapping[str, str]) -> bool:
    """Whether a pod's labels decide more of its derivation than its gang (`_add_new_pod`): whether it may be
    preempted (Volcano's label), in a KAI queue by its label, its priority (`_kai_pod_priority`), or its KAI
    sub-group (its task)."""
    return VOLCANO_PREEMPTABLE_ANNOTATION in labels or KAI_QUEUE_LABEL in labels or KAI_SUB_GROUP_LABEL in labels


# The dialects whose schedulers order and preempt jobs by their PodGroup's priority (`ClusterState.job_priority`).
JOB_PRIORITY_DIALECTS = frozenset((VOLCANO, KAI, KUBERNETES))
_DIALECT_NAMES = {VOLCANO: "Volcano", KAI: "KAI"}

_NO_REQUESTS: Resources = {}  # what a pod asks before it is derived (shared, like every requests vector)


# What `ClusterState._derivation` gives: requests, invalid, ours, priority, preemption policy, task,
# preemptable, gang key, problems.
_Derivation = tuple[Resources, str, bool, int, str, str, bool, str, list[Problem]]
# What a pod not derived yet holds (`PodInfo`): no requests, not ours, priority 0, the default policy.
_UNDERIVED: _Derivation = (_NO_REQUESTS, "", False, 0, PREEMPT_LOWER_PRIORITY, "", True, "", [])


class PodInfo:
    """A pod as the scheduler sees it. Mutated only by `ClusterState`."""

    __slots__ = (
        "assumed_node",
        "bound_at",
        "bound_node",
        "broken",
        "counted_on",
        "eviction_requested",
        "first_seen",
        "gang",
        "invalid",
        "key",
        "nominated_node",
        "nominated_on",
        "obj",
        "ours",
        "own_priority",
        "placed_on",
        "preemptable",
        "preemption_policy",
        "priority",
        "removed",
        "requests",
        "task",
    )

    def __init__(self, key: str, obj: Pod, first_seen: float, derived: _Derivation | None = None) -> None:
        """`derived`: what `ClusterState._derivation` gave for it (its gang and problems aside), else the
        figures of a pod not derived yet."""
        self.key = key
        self.obj = obj
        self.first_seen = first_seen
        self.gang = ""
        self.assumed_node = ""
        self.bound_node = ""  # the API accepted our binding here; the watch has not shown it yet
        self.nominated_node = ""
        self.counted_on = ""
        self.nominated_on = ""
        self.placed_on = ""  # the node name this pod is indexed under in `pods_by_node`
        self.removed = False
        self.bound_at: float | None = None
        self.eviction_requested = False
        self.broken = ""  # why its latest event could not be folded or its latest version decoded ("" if not)
        # requests: shared by pods asking the same (`_RequestsMemo`), never mutated; invalid: the first of its
        # requests that is not a quantity, and why ("" when all are); task: its Volcano task
        # (volcano.sh/task-spec), for minTaskMember; preemptable: False, never a preemption victim
        # (volcano.sh/preemptable: "false").
        # priority: what orders and preempts it, its job's (`ClusterState.job_priority`) while its gang has one,
        # else its own (own_priority: its spec's priority, or its PriorityClass's)
        self.requests: Resources
        self.priority: int
        (self.requests, self.invalid, self.ours, self.priority, self.preemption_policy, self.task, self.preemptable,
         _, _) = derived or _UNDERIVED
        self.own_priority = self.priority

    @property
    def uid(self) -> str:
        return self.obj.metadata.uid

    @property
    def namespace(self) -> str:
        return self.obj.metadata.namespace

    @property
    def name(self) -> str:
        return self.obj.metadata.name

    @property
    def node_name(self) -> str:
        """The node the pod is bound to ('' while unbound): as the API shows it, or as it answered our binding."""
        return self.obj.spec.node_name or self.bound_node

    @property
    def terminal(self) -> bool:
        return self.obj.status.phase in TERMINAL_PHASES

    @property
    def terminating(self) -> bool:
        return self.obj.metadata.deletion_timestamp is not None

    @property
    def placed_node(self) -> str:
        """Where the pod runs or is about to: its bound node, else its assumed node."""
        return self.obj.spec.node_name or self.bound_node or self.assumed_node

    @property
    def unusable(self) -> str:
        """Why placement must not place this pod ("" when it may): a request that is not a quantity, a
        latest version that could not be decoded or folded, or resource claims (dynamic resource
        allocation) that toposched cannot allocate (state/pod_constraints.py)."""
        return self.invalid or self.broken or (DRA_NOT_PLACED if self.obj.spec.resource_claims else "")

    @property
    def pending(self) -> bool:
        """Ours, not bound, not assumed, not on its way out, not held by a scheduling gate: the scheduler
        still has to place it."""
        return (self.ours and not self.removed and not self.obj.spec.node_name and not self.bound_node
                and not self.assumed_node and not self.terminating and not self.terminal and not self.gated)

    @property
    def gated(self) -> bool:
        """It has scheduling gates (spec.schedulingGates): no scheduler may place it until they are all
        removed (the API server refuses its Binding), so it waits outside `ClusterState.pending`."""
        return bool(self.obj.spec.scheduling_gates)


_NO_KINDS: frozenset[str] = frozenset()


class GangInfo:
    """A gang (a PodGroup, a Workload's podGroup, or pods' annotations) and its members. Mutated only
    by `ClusterState`. `spec` is the winning source's (see `GANG_SOURCES`); `sources` holds every
    source present, with its own problems."""

    __slots__ = ("attempts", "definer", "filed", "first_seen", "held", "job_priority", "key", "last_reason",
                 "members", "sources", "spec", "timed_out")

    def __init__(self, key: str, first_seen: float) -> None:
        self.key = key
        self.first_seen = first_seen
        self.spec: GangSpec | None = None
        self.members: set[str] = set()
        self.last_reason = ""
        # `last_reason` says it waits for members (or its defining object) to appear, untried against nodes
        # (`GangPending.held`): its pods are not ready for scheduling rather than unschedulable.
        self.held = False
        self.attempts = 0
        self.timed_out = 0
        self.sources: dict[str, tuple[GangSpec, list[Problem]]] = {}
        # The problem kinds filed under this gang's key; replaced whole, never added to, so gangs that file none
        # (nearly all) share one empty set.
        self.filed: set[str] | frozenset[str] = _NO_KINDS
        self.definer = ""  # the member whose annotations define the gang (annotation gangs only)
        # The priority of the job as a whole, which its members take (`ClusterState.job_priority`); None: each
        # member goes by its own.
        self.job_priority: int | None = None

    @property
    def source(self) -> str:
        """Where the spec in use comes from ("" while none)."""
        return next((name for name, _ in GANG_SOURCES if name in self.sources), "")

    @property
    def problem_kind(self) -> str:
        """The problem kind of the spec in use (what its problems are filed under)."""
        return next((kind for name, kind in GANG_SOURCES if name in self.sources), POD_GROUP_PROBLEM)


class GangObject(msgspec.Struct, frozen=True):
    """The Kubernetes object a gang's status and Events belong on. `status`: it has a PodGroup status of
    the scheduler-plugins / Volcano shape (phase, conditions, scheduled) that the scheduler writes."""

    api_version: str
    kind: str
    key: str
    uid: str
    status: bool


class DecisionRecord(msgspec.Struct, frozen=True, array_like=True):
    pod: str
    uid: str
    node: str
    gang: str = ""
    priority: int = 0


class GangRecord(msgspec.Struct, frozen=True, array_like=True):
    key: str
    first_seen: float
    attempts: int
    last_reason: str
    timed_out: int
    held: bool = False  # absent from the snapshots written before it


class PodRecord(msgspec.Struct, frozen=True, array_like=True):
    pod: Pod
    first_seen: float
    bound_at: float | None
    eviction_requested: bool
    bound_node: str = ""


class _SnapshotObjects(msgspec.Struct, frozen=True, kw_only=True):
    """What both snapshot formats hold besides the pods."""

    version: int
    scheduler_name: str
    last_seq: int
    last_time: float
    pod_groups: list[PodGroup]
    volcano_pod_groups: list[VolcanoPodGroup]
    network_topologies: list[ClusterNetworkTopology]
    hyper_nodes: list[HyperNode]
    priority_classes: list[PriorityClass]
    assumed: list[DecisionRecord]
    nominated: list[DecisionRecord]
    gangs: list[GangRecord]
    undecodable: list[Problem]
    fold_failures: list[Problem] = []
    scheduler_plugins_pod_groups: list[PodGroup] = []
    kube_pod_groups: list[KubePodGroup] = []
    workloads: list[Workload] = []
    elastic_quotas: list[ElasticQuota] = []
    capacity_quotas: list[CapacityElasticQuota] = []
    queues: list[Queue] = []
    storage_classes: list[StorageClass] = []
    persistent_volumes: list[PersistentVolume] = []
    claims: list[PersistentVolumeClaim] = []
    budgets: list[PodDisruptionBudget] = []
    kueue_topologies: list[KueueTopology] = []  # absent from snapshots written before they were read
    kai_topologies: list[KaiTopology] = []  # likewise
    kai_pod_groups: list[KaiPodGroup] = []  # likewise
    kai_queues: list[KaiQueue] = []  # likewise
    csi_nodes: list[CSINode] = []  # likewise
    volcano_jobs: list[VolcanoJob] = []  # likewise
    kubeflow_jobs: list[KubeflowJob] = []  # likewise
    composite_pod_groups: list[CompositePodGroup] = []  # likewise
    kai_node_pool_label: str = KAI_NODE_POOL_LABEL  # likewise: the default


class StateSnapshot(_SnapshotObjects, frozen=True, kw_only=True):
    """Everything needed to rebuild a `ClusterState`: the objects, plus the scheduler's own decisions.
    The nodes are a table (`state.node_table`), and so are the pods (`state.pod_table`): each shared part
    once, a row per node, a column per field of the pods' own."""

    node_table: NodeTable
    pod_table: PodTable


class StateSnapshotV2(_SnapshotObjects, frozen=True, kw_only=True):
    """The snapshot format with each node whole and a row per pod (version 2). Still restored."""

    nodes: list[Node]
    pod_table: PodRowTable


class StateSnapshotV1(_SnapshotObjects, frozen=True, kw_only=True):
    """The snapshot format before the pod tables (version 1): every node and pod written whole. Still restored."""

    nodes: list[Node]
    pods: list[PodRecord]


class _SnapshotVersion(msgspec.Struct):
    version: int = 0


SNAPSHOT_VERSION = 3
SNAPSHOT_VERSION_V2 = 2
SNAPSHOT_VERSION_V1 = 1
_snapshot_encoder = msgspec.msgpack.Encoder()
_snapshot_decoder = msgspec.msgpack.Decoder(StateSnapshot)
_snapshot_decoder_v2 = msgspec.msgpack.Decoder(StateSnapshotV2)
_snapshot_decoder_v1 = msgspec.msgpack.Decoder(StateSnapshotV1)
_version_decoder = msgspec.msgpack.Decoder(_SnapshotVersion)


# How every snapshot this code writes begins: a msgpack map (fixmap, map16 or map32) whose first key is
# "version" (the first field of `_SnapshotObjects`).
_VERSION_KEY = b"\xa7version"
_MAP_HEADER_SIZES = {**dict.fromkeys(range(0x80, 0x90), 1), 0xDE: 3, 0xDF: 5}


def _snapshot_version(payload: bytes | memoryview) -> int:
    """The payload's version, read from its first entry where that is a small integer under "version" (as
    written here), else by decoding the whole map for it (msgspec would walk all of it: ~10 ms at 100k pods)."""
    head = bytes(payload[:16])
    start = _MAP_HEADER_SIZES.get(head[0], 0) if head else 0
    if start and head[start:start + len(_VERSION_KEY)] == _VERSION_KEY:
        value = head[start + len(_VERSION_KEY):start + len(_VERSION_KEY) + 1]
        if value and value[0] < 0x80:  # a positive fixint
            return value[0]
    return _version_decoder.decode(payload).version


def decode_state_snapshot(payload: bytes | memoryview) -> StateSnapshot | StateSnapshotV2 | StateSnapshotV1:
    """A snapshot payload of any format (by its version); ValueError for a version this code does not know,
    msgspec.DecodeError / ValidationError for one that does not decode."""
    version = _snapshot_version(payload)
    if version == SNAPSHOT_VERSION:
        return _snapshot_decoder.decode(payload)
    if version == SNAPSHOT_VERSION_V2:
        return _snapshot_decoder_v2.decode(payload)
    if version == SNAPSHOT_VERSION_V1:
        return _snapshot_decoder_v1.decode(payload)
    raise ValueError(f"snapshot version {version} is not one this toposched reads "
                     f"({SNAPSHOT_VERSION_V1} to {SNAPSHOT_VERSION})")


class UndecodableRecord(Exception):
    """An event log record that does not decode as an event (`ClusterState.fold_records`)."""

    def __init__(self, seq: int, error: msgspec.DecodeError | msgspec.ValidationError) -> None:
        super().__init__(f"record seq {seq} has a valid checksum but does not decode as an event: {error}")
        self.seq = seq


NodePool = tuple[str, str]  # a KAI node pool: (the label key that names pools, the pool; "": the default pool)


class ClusterState:
    def __init__(self, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
                 kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> None:
        """`kai_node_pool_label`: the node label that names KAI node pools (KAI's `nodePoolLabelKey`; "": no
        pools, every node in one)."""
        self.scheduler_name = scheduler_name
        self.kai_node_pool_label = kai_node_pool_label
        self.last_seq = 0
        self.last_time = 0.0
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, PodInfo] = {}
        self.pods_by_node: dict[str, set[str]] = {}  # every pod placed on a node name, even a missing node
        self.pod_groups: dict[str, PodGroup] = {}
        self.volcano_pod_groups: dict[str, VolcanoPodGroup] = {}
        self.scheduler_plugins_pod_groups: dict[str, PodGroup] = {}  # scheduling.x-k8s.io/v1alpha1
        self.kube_pod_groups: dict[str, KubePodGroup] = {}  # scheduling.k8s.io/v1alpha2
        self.composite_pod_groups: dict[str, CompositePodGroup] = {}  # scheduling.k8s.io/v1alpha3 (1.37)
        # A hierarchy's edges (state/composites.py): parent CompositePodGroup key -> its child CompositePodGroups,
        # and -> its child PodGroups; a parent not (yet) held is a key too.
        self._composite_children: dict[str, set[str]] = {}
        self._composite_leaves: dict[str, set[str]] = {}
        self._family_changes: set[str] | None = None  # `deferring_families`: the keys whose hierarchies changed
        self.kai_pod_groups: dict[str, KaiPodGroup] = {}  # scheduling.run.ai/v2alpha2 (KAI Scheduler)
        self.workloads: dict[str, Workload] = {}  # scheduling.k8s.io/v1alpha1
        self._workload_gangs: dict[str, set[str]] = {}  # Workload key -> gang keys of its podGroups with pods
        self.gangs: dict[str, GangInfo] = {}
        self.network_topologies: dict[str, ClusterNetworkTopology] = {}
        self.hyper_nodes: dict[str, HyperNode] = {}
        self.kueue_topologies: dict[str, KueueTopology] = {}  # kueue.x-k8s.io Topology, by name
        self.kai_topologies: dict[str, KaiTopology] = {}  # kai.scheduler Topology, by name
        self.priority_classes: dict[str, PriorityClass] = {}
        self.volumes = VolumeBook()  # claims, PersistentVolumes, StorageClasses (state/volumes.py)
        # `static_spoken`'s volumes by StorageClass and pod, and the (pod changes, volume changes) they were made at
        self._spoken: dict[str, dict[str, list[str]]] = {}
        self._spoken_stamp: tuple[int, int] = (-1, -1)
        # `attach_room`'s figures by node, and the (pod changes, volume changes) they were made at
        self._attach_rooms: dict[str, tuple[dict[str, int], set[str]]] = {}
        self._attach_stamp: tuple[int, int] = (-1, -1)
        # PodDisruptionBudgets by namespace, then `namespace/name`: preemption ranks plans by them
        self.budgets: dict[str, dict[str, PodDisruptionBudget]] = {}
        # Volcano Jobs by `namespace/name`, Kubeflow training jobs by (kind, `namespace/name`), and both by
        # uid: the job that controls a Volcano PodGroup says whose scheduler its pods will be
        # (state/volcano_enqueue.py)
        self.volcano_jobs: dict[str, VolcanoJob] = {}
        self.kubeflow_jobs: dict[tuple[str, str], KubeflowJob] = {}
        self._jobs_by_uid: dict[str, VolcanoJob | KubeflowJob] = {}
        self.pending: set[str] = set()  # keys of our pods waiting to be placed
        self.nominating: set[str] = set()  # keys of the pods holding a nomination on a node (`PodInfo.nominated_on`)
        # pod key -> the node its nomination names while that node is not known (settled when it comes), and
        # node name -> those pods
        self._awaiting_node: dict[str, str] = {}
        self._awaited: dict[str, set[str]] = {}
        self.problems: dict[tuple[str, str], list[Problem]] = {}
        self.undecodable: dict[tuple[str, str], Problem] = {}
        self.fold_failures: dict[tuple[str, str], Problem] = {}  # (kind, key) -> the event that could not be folded
        self.problems_version = 0  # bumped whenever `all_problems()` may have changed (a cheap test for readers)
        # Bumped when a pod counted on a node comes to ask for less (a resize applied): the scheduler loop
        # retries what waits for room. Not part of what the state means (never in a snapshot).
        self.requests_released = 0
        self.topology = TopologyTree()
        # quota trees and usage: a second fold over the same events (state/quota.py)
        self.quotas = QuotaBook(kai_node_pool_label)
        self._default_priority_class = ""
        self._requests_memo = _RequestsMemo()
        self._allocatables: dict[tuple[tuple[str, str], ...], Resources] = {}  # parsed node allocatables, shared
        self._shapes: dict[Shape, _Derivation] = {}  # see `_derive_pod`; emptied when priorities change
        self._unlabelled: dict[tuple[int, int], _Derivation] = {}  # likewise, by head without labels and spec
        self._compactor = Compactor()
        self._largest: Resources | None = None  # cache of `largest_allocatable`, dropped when a node changes
        # Nodes whose capacity picture changed, in order, and what readers derive from them between calls
        # (placement's offerslot table): see state/node_changes.py. Neither is part of the state's meaning.
        self.node_changes = NodeChanges()
        self.pod_changes = NodeChanges()  # likewise the pods whose own figures changed (preemption's victim index)
        # The pods whose priority an event about another object moved (their job's: `_reprice`), for readers that
        # re-read a pod on its own events only (the scheduling queue's indexes).
        self.priority_changes = NodeChanges()
        self.reader_caches: dict[str, object] = {}
        # Kubernetes topology keys that are not layers of `topology`: one tree per key, its domains the
        # label's values, kept like `topology` (nodes, usage) while some gang asks for the key.
        self.label_trees: dict[str, TopologyTree] = {}
        self._label_tree_users: dict[str, set[str]] = {}
        # The nodes in a named KAI node pool (labelled `kai_node_pool_label`): while there are none, KAI's default
        # pool is every node (`node_pool_of`).
        self._pooled_nodes: set[str] = set()
        # Bumped when a node in a named pool changes (joins, leaves, or its allocatable moves), and the named pools'
        # allocatable at that version (`pool_allocatable`)
        self.pools_version = 0
        self._pool_totals: tuple[int, dict[str, Resources]] = (-1, {})
        self._binds: list[PodInfo] | None = None  # bindings not yet counted (`batching_binds`), None: count each

    # ------------------------------------------------------------------ queries

    def problems_of(self, kind: str, key: str) -> list[Problem]:
        return self.problems.get((kind, key), []) + self.quotas.problems.get((kind, key), [])

    def all_problems(self) -> Iterator[Problem]:
        for key in sorted(self.problems):
            yield from self.problems[key]
        for key in sorted(self.undecodable):
            yield self.undecodable[key]
        for key in sorted(self.fold_failures):
            yield self.fold_failures[key]
        yield from self.quotas.all_problems()

    def not_ready_for_scheduling(self, gang: str) -> bool:
        """Whether the gang's pending pods are not ready for scheduling rather than unschedulable: its last
        reason is a wait for members (or its defining object) to appear (`GangInfo.held`), and its own
        scheduler holds such a gang before the queue, untried. kube-scheduler's GangScheduling and
        Koordinator's Coscheduling reject it at PreEnqueue; Volcano's and KAI's sessions skip a job that is
        not ready. Only scheduler-plugins' Coscheduling tries it and fails it at PreFilter, leaving its pods
        `Unschedulable`; so do its pods whose PodGroup does not exist (Permit refuses them)."""
        info = self.gangs.get(gang)
        if info is None or not info.held:
            return False
        if info.spec is not None:
            return info.spec.dialect != SCHEDULER_PLUGINS
        pods = self.pods
        return not any(SCHEDULER_PLUGINS_POD_GROUP_LABEL in pods[key].obj.metadata.labels
                       for key in info.members if key in pods)

    def gang_object(self, gang: str) -> GangObject | None:
        """The object that describes the gang (its winning source), None for a gang of pod annotations
        or one with no spec."""
        info = self.gangs.get(gang)
        source = info.source if info is not None else ""
        found: PodGroup | VolcanoPodGroup | KubePodGroup | KaiPodGroup | Workload | None = None
        if source == SIGS_SOURCE:
            found = self.pod_groups.get(gang)
        elif source == X_K8S_SOURCE:
            found = self.scheduler_plugins_pod_groups.get(gang)
        elif source == VOLCANO_SOURCE:
            found = self.volcano_pod_groups.get(gang)
        elif source == KUBE_SOURCE:
            found = self.kube_pod_groups.get(gang)
        elif source == KAI_SOURCE:
            found = self.kai_pod_groups.get(gang)
        elif source == WORKLOAD_SOURCE:
            workload = workload_of_gang(gang)
            found = self.workloads.get(workload[0]) if workload is not None else None
        if found is None:
            return None
        meta = found.metadata
        return GangObject(found.api_version, found.kind, object_key(meta.namespace, meta.name), meta.uid,
                          status=source in (SIGS_SOURCE, X_K8S_SOURCE, VOLCANO_SOURCE))

    def gang_of(self, pod: PodInfo) -> GangInfo | None:
        return self.gangs.get(pod.gang) if pod.gang else None

    def gang_preemptable(self, spec: GangSpec) -> bool:
        """May the pods of the gang `spec` describes be evicted at all (preempted, or reclaimed by another
        quota)? What its PodGroup says (`volcano.sh/preemptable: "false"`, KAI's `spec.preemptibility`);
        a KAI PodGroup that says nothing is non-preemptible from priority 100 up, its priority being its
        `spec.priorityClassName`'s (`group_priority`), as KAI reads it. Read when asked, so a PriorityClass
        created or changed later counts."""
        if spec.dialect == KAI and not spec.kai_preemptibility:
            return self.group_priority(spec.priority_class_name) < NON_PREEMPTIBLE_PRIORITY
        return spec.preemptable

    def group_priority(self, class_name: str) -> int:
        """A Volcano or KAI PodGroup's priority as their schedulers find it: the value of the PriorityClass its
        `spec.priorityClassName` names, else the globalDefault class's, else 0."""
        found = self.priority_classes.get(class_name) if class_name else None
        if found is None and self._default_priority_class:
            found = self.priority_classes.get(self._default_priority_class)
        return found.value if found is not None else 0

    def node_pool_of(self, pod: PodInfo) -> NodePool | None:
        """The KAI node pool whose nodes alone may take `pod` (its pool "": the default pool, the nodes without
        the label `kai_node_pool_label`), as KAI's scheduling shards divide the cluster; None when any node may.
        A member of a KAI PodGroup is in the PodGroup's pool; a pod in a KAI queue by its own label
        (`kai.scheduler/queue`) and no KAI PodGroup, in the pool its own label names (what KAI's pod-grouper
        would copy to the PodGroup it makes for it); any other pod in none. The default pool is every node
        while no node is in a named one."""
        label = self.kai_node_pool_label
        if not label:
            return None
        gang = self.gangs.get(pod.gang) if pod.gang else None
        spec = gang.spec if gang is not None else None
        if spec is not None and spec.kai_node_pool is not None:
            pool = spec.kai_node_pool
        else:
            labels = pod.obj.metadata.labels
            if KAI_QUEUE_LABEL not in labels:
                return None
            pool = labels.get(label, "")
        return (label, pool) if pool or self._pooled_nodes else None

    def pool_allocatable(self) -> dict[str, Resources]:
        """The allocatable of each named KAI node pool's nodes, summed (the default pool's is the rest of the
        cluster's); kept until a pooled node changes."""
        version, totals = self._pool_totals
        if version != self.pools_version:
            totals = {}
            for name in sorted(self._pooled_nodes):
                info = self.nodes[name]
                pool = totals.setdefault(info.labels[self.kai_node_pool_label], {})
                for resource, amount in info.allocatable.items():
                    pool[resource] = pool.get(resource, 0) + amount
            self._pool_totals = (self.pools_version, totals)
        return totals

    def job_priority(self, spec: GangSpec | None) -> int | None:
        """The priority every pod of the gang `spec` describes takes, as one job: Volcano and KAI order jobs,
        and preempt between them, by their PodGroup's priority (`group_priority` of its `priorityClassName`:
        Volcano's scheduler cache sets a job's priority so, KAI's scheduler likewise), whatever priority the
        pods themselves carry; the pods' own then only matters within the job, where toposched never
        preempts. A Kubernetes PodGroup's priority is so too, as workload-aware preemption takes it: its
        `spec.priority` (which admission resolves from its class), else its class's. None: each pod goes by
        its own, for every other dialect, and for a PodGroup that names no class (Volcano, KAI and Kubernetes'
        admission take the default priority there; toposched keeps the pods' own, so pods that name a class
        where their PodGroup names none keep it)."""
        if spec is None or not spec.priority_class_name or spec.dialect not in JOB_PRIORITY_DIALECTS:
            return None
        if spec.group_priority is not None:  # a Kubernetes PodGroup's, as admission resolved its class
            return spec.group_priority
        return self.group_priority(spec.priority_class_name)

    def kai_non_preemptible_why(self, pod: PodInfo) -> str:
        """Why KAI reads the job of `pod` as non-preemptible, in words for a pending reason ("" when it does not,
        or the pod is no KAI job): its PodGroup says so, or its PodGroup's priority (or the pod's own, for a
        pod of no PodGroup) is 100 or more."""
        info = self.gangs.get(pod.gang) if pod.gang else None
        spec = info.spec if info is not None else None
        if spec is not None and spec.dialect == KAI:
            if spec.kai_preemptibility:
                return f"PodGroup {spec.key} says {spec.kai_preemptibility}" if not spec.preemptable else ""
            priority = self.group_priority(spec.priority_class_name)
            if priority < NON_PREEMPTIBLE_PRIORITY:
                return ""
            named = f"priorityClassName {spec.priority_class_name}" if spec.priority_class_name else "the default class"
            return f"PodGroup {spec.key} is of priority {priority} ({named}), {NON_PREEMPTIBLE_PRIORITY} or more"
        if spec is None and pod.priority >= NON_PREEMPTIBLE_PRIORITY:
            named = pod.obj.metadata.labels.get(KAI_PRIORITY_LABEL, "")
            how = f" (its label {KAI_PRIORITY_LABEL} {named})" if named else ""
            return f"pod {pod.key} is of priority {pod.priority}{how}, {NON_PREEMPTIBLE_PRIORITY} or more"
        return ""

    def kai_lone_kept(self, pod: PodInfo) -> bool:
        """A pod of no gang that a KAI queue label places in a KAI queue, of priority 100 or more: KAI
        would make it a PodGroup of its own (its pod-grouper), non-preemptible by that priority, so it is
        never a victim either (a pod's labels and priority only: the victim index keeps it by them)."""
        return (not pod.gang and pod.priority >= NON_PREEMPTIBLE_PRIORITY
                and KAI_QUEUE_LABEL in pod.obj.metadata.labels)

    def largest_allocatable(self) -> Resources:
        """Per resource, the most any one node has allocatable: no single node can hold more."""
        largest = self._largest
        if largest is None:
            largest = {}
            for info in self.nodes.values():
                for name, amount in info.allocatable.items():
                    if amount > largest.get(name, 0):
                        largest[name] = amount
            self._largest = largest
        return largest

    def free_on(self, node: NodeInfo) -> Resources:
        free = dict(node.allocatable)
        for name, amount in node.used.items():
            free[name] = free.get(name, 0) - amount
        return free

    def nominated_load(self, node: NodeInfo, priority: int, exclude_gangs: Iterable[str] = ()) -> Resources:
        """Capacity on `node` reserved by nominated pods of priority >= `priority` (other gangs only)."""
        excluded = set(exclude_gangs)
        load: Resources = {}
        for pod in node.nominated.values():
            if pod.priority >= priority and (not pod.gang or pod.gang not in excluded) and not pod.counted_on:
                add_into(load, pod.requests)
        return load

    # ------------------------------------------------------------------ the fold

    def apply(self, event: Event) -> Exception | None:
        """Fold one event; returns the exception that folding it raised (None: it folded cleanly)."""
        failure: Exception | None = None
        kind = type(event)
        handler = _HANDLERS[kind]
        try:
            if self._binds and kind is not PodBound:
                self._flush_binds()  # a run of bindings ends (`batching_binds`)
            if handler is not None:
                handler(self, event)
            quotas = self.quotas
            if kind not in IDLE_UNLESS_ACTIVE or quotas.active:
                quota_problems = quotas.problems_version
                quotas.observe(self, event)  # the quota fold reads what the handler just folded
                if quotas.problems_version != quota_problems:
                    self.problems_version += 1
        except Exception as error:  # a bug must cost one object, never the fold (see the module docstring)
            failure = error
            self._fold_failed(event, error)
        else:
            if self.fold_failures or self.undecodable:
                self._folded_cleanly(event)
        if event.seq > self.last_seq:
            self.last_seq = event.seq
        if event.time > self.last_time:
            self.last_time = event.time
        return failure

    def fold_records(self, records: Iterable[tuple[int, bytes]], *, until: int | None = None,
                     failures: list[tuple[Event, Exception]] | None = None, keep: int = 0) -> int:
        """Decode event log records (seq, payload) as `events.model.decode_event` would and fold them, up to
        seq `until`: the fast way to fold a log into this state. A pod in a record is built on the parts this
        state's pods share, each distinct part decoded once (`Compactor.pod_of`); a new pod of a shape folded
        before, placed nowhere, is added without building its event (`_add_new_pod`); a binding is folded
        without the dispatch. Up to `keep` (event, exception) of events that failed to fold are added to
        `failures`. Returns how many records were folded; raises `UndecodableRecord` for a record that does
        not decode (those before it are folded)."""
        compactor, quotas = self._compactor, self.quotas
        folded = 0
        quiet = not (self.fold_failures or self.undecodable or quotas.active)  # see the bindings below
        for seq, payload in records:
            if until is not None and seq > until:
                break
            try:
                parts = decode_parts(payload)
                kind = type(parts)
                obj = compactor.pod_of(parts.pod) if type(parts) is PodUpsertedParts else None
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                raise UndecodableRecord(seq, error) from error
            folded += 1
            event: Event
            failure: Exception | None = None
            if kind is PodBound and quiet:
                event = parts  # type: ignore[assignment]  # a binding, which the quota fold does not look at
                try:  # `apply`, without the steps that find nothing to do
                    self._pod_bound(event, quiet=True)  # type: ignore[arg-type]
                except Exception as error:  # as `apply`: a bug costs one object, never the fold
                    failure = error
                    self._fold_failed(event, error)
                    quiet = False
            elif kind is PodUpsertedParts:
                record: PodUpsertedParts = parts  # type: ignore[assignment]
                if obj is None:
                    try:
                        event = decode_event(payload)  # a table is full: decoded whole
                    except (msgspec.DecodeError, msgspec.ValidationError) as error:
                        raise UndecodableRecord(seq, error) from error
                    failure = self.apply(event)
                    quiet = not (self.fold_failures or self.undecodable or quotas.active)
                elif quiet:
                    try:  # `apply`, for a pod update the quota fold does not look at while no quota is known
                        if self._binds:
                            self._flush_binds()  # a run of bindings ends
                        if not self._add_new_pod(obj, compactor.built_shape, record.time):
                            self._upsert_pod(obj, record.time)
                    except Exception as error:  # as `apply`: a bug costs one object, never the fold
                        failure = error
                    if failure is None:  # no event built
                        compactor.built = None
                        if record.seq > self.last_seq:
                            self.last_seq = record.seq
                        if record.time > self.last_time:
                            self.last_time = record.time
                        continue
                    event = PodUpserted(pod=obj, seq=record.seq, time=record.time)
                    self._fold_failed(event, failure)
                    quiet = False
                else:
                    event = PodUpserted(pod=obj, seq=record.seq, time=record.time)
                    failure = self.apply(event)
                    quiet = not (self.fold_failures or self.undecodable or quotas.active)
            else:
                event = parts  # type: ignore[assignment]  # every other record is the Event itself
                failure = self.apply(event)
                quiet = not (self.fold_failures or self.undecodable or quotas.active)
            if event.seq > self.last_seq:  # as `apply` (which did it already when it ran)
                self.last_seq = event.seq
            if event.time > self.last_time:
                self.last_time = event.time
            if failure is not None and failures is not None and len(failures) < keep:
                failures.append((event, failure))
        return folded

    def _add_new_pod(self, obj: Pod, shape: Shape, time: float) -> bool:
        """`_upsert_pod` of a pod that is new, of a shape derived before without problems (see `_derive_pod`),
        bound nowhere, nominated nowhere, not terminal nor terminating, not gated: what folding it does,
        without the steps that find nothing to do. False (and nothing done) when the pod is not such a pod."""
        meta, status = obj.metadata, obj.status
        if (obj.spec.node_name or status.nominated_node_name or status.phase in TERMINAL_PHASES
                or meta.deletion_timestamp is not None or obj.spec.scheduling_gates or status.container_statuses
                or status.init_container_statuses):
            return False
        key = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
        if key in self.pods:
            return False
        derived = self._shapes.get(shape)
        if derived is None:
            # A pod of a new head: derived alike a pod of its head without labels and its spec (its labels
            # decide only its gang, and whether it may be preempted when it says so there), but for its gang.
            unlabelled = self._unlabelled.get((shape[2], shape[1]))
            if unlabelled is None or _labels_derive(meta.labels):
                return False
            gang_key, gang_problems = membership(obj, key)
            if gang_problems:
                return False
            derived = (*unlabelled[:7], gang_key, [])
            if len(self._shapes) < _RequestsMemo.LIMIT * 10:
                self._shapes[shape] = derived
        pod = self._hold_new_pod(key, obj, time, derived, GANG_MIN_AVAILABLE_ANNOTATION in meta.annotations
                                 or LIGHTWEIGHT_MIN_AVAILABLE_LABEL in meta.labels)
        if self.problems and ("Pod", key) in self.problems:
            self._set_problems("Pod", key, [])
        # `_settle`, for a pod counted nowhere and placed nowhere that stays so
        self.pod_changes.add(key)
        if pod.ours:
            self.pending.add(key)
        elif self.pending:
            self.pending.discard(key)
        return True

    def _hold_new_pod(self, key: str, obj: Pod, first_seen: float, derived: _Derivation, defines: bool) -> PodInfo:
        """A pod the state does not hold yet, of a known derivation, held and a member of its gang (as
        `_derive_pod` makes it, its problems aside); `defines`: its annotations or labels may define a gang.
        Not settled yet."""
        pod = self.pods[key] = PodInfo(key, obj, first_seen, derived)
        if obj.spec.volumes:
            self.volumes.pod_held(obj, key)
        gang_key = derived[7]
        if gang_key:
            gang = self.gangs.get(gang_key)
            if gang is None or defines or gang.definer == key:
                self._join_gang(pod, gang_key)
            else:  # `_join_gang` of a member that defines nothing
                pod.gang = gang_key
                gang.members.add(key)
            if gang is not None and gang.job_priority is not None:
                pod.priority = gang.job_priority
        return pod

    def forget_record_parts(self) -> None:
        """Drop the tables `fold_records` keeps (once a log is folded: the live fold decodes nothing), and
        the derivations numbered by them. The parts stay shared by the pods that hold them."""
        self._compactor.forget_parts()
        self._shapes.clear()
        self._unlabelled.clear()

    def holds_unchanged(self, event: Event) -> bool:
        """Whether folding `event`, an upsert of an object, would change nothing: the state holds an equal
        version (the same resourceVersion, and everything this code decodes of it), and nothing about the
        object is marked broken (a later version that failed to decode or to fold). A relist lists every
        object again, and after a restart nearly all of them are held as they are: those need not be
        logged and folded again. False for any other event, and for an object the state does not hold."""
        kind = type(event)
        held = _HELD_OBJECTS.get(kind)
        if held is None:
            return False
        subject = _UPDATE_SUBJECTS[kind](event)
        if subject in self.fold_failures or subject in self.undecodable:
            return False
        holder, upserted = held
        current = holder(self, *subject)
        return current is not None and current == upserted(event)

    def not_held(self, events: Iterable[Event]) -> list[Event]:
        """The events of a listed page that `holds_unchanged` does not leave out: those a relist records."""
        return [event for event in events if not self.holds_unchanged(event)]

    def apply_all(self, events: Iterable[Event]) -> None:
        for event in events:
            self.apply(event)

    # nodes ------------------------------------------------------------

    def _node_upserted(self, event: NodeUpserted) -> None:
        node = event.node
        self._compactor.node(node)
        self._hold_node(node)

    def _hold_node(self, node: Node) -> None:
        """A node as the API shows it, on shared parts already (`Compactor.node`, or a snapshot's table)."""
        name = node.metadata.name
        raw = node.status.allocatable
        memo_key = tuple(raw.items())
        allocatable = self._allocatables.get(memo_key)
        if allocatable is not None:  # shared by the nodes that have the same (never mutated, as `requests`)
            problems: list[Problem] = []
        else:
            allocatable, problems = _parse_resources(raw, "Node", name, "status.allocatable")
            if not problems and len(self._allocatables) < _RequestsMemo.LIMIT:
                self._allocatables[memo_key] = allocatable
        oversized = node.metadata.annotations.get(OVERSIZED_ANNOTATION) if node.metadata.annotations else None
        if oversized is not None:  # an accounting core (events.objects.node_core): unschedulable already
            problems.append(Problem("Node", name, "object", oversized, RECORD_TOO_LARGE))
        self._set_problems("Node", name, problems)
        self.node_changes.add(name)
        info = self.nodes.get(name)
        if info is None or info.allocatable != allocatable:
            self._largest = None
        relabelled = True
        if info is None:
            info = NodeInfo(node, allocatable)
            self.nodes[name] = info
            # The trees share the node's `used` (the fold keeps it; they are told with `usage_noted`).
            self.topology.node_upserted(name, info.labels, allocatable, info.used)
            for label_key, tree in self.label_trees.items():
                tree.node_upserted(name, _only(info.labels, label_key), allocatable, info.used)
            for key in sorted(self.pods_by_node.get(name, ())):
                pod = self.pods.get(key)
                if pod is not None:
                    self._settle(pod)
                    if pod.nominated_node == name:
                        self._settle_nomination(pod)
            waiting = self._awaited.pop(name, None) if self._awaited else None
            for key in sorted(waiting or ()):  # nominated here before the node was known (the API shows it so)
                self._awaiting_node.pop(key, None)
                pod = self.pods.get(key)
                if pod is not None and pod.nominated_node == name:
                    self._settle_nomination(pod)
        else:
            relabelled = info.labels != node.metadata.labels or info.allocatable != allocatable
            info.obj = node
            info.labels = node.metadata.labels
            info.taints = node.spec.taints
            info.unschedulable = node.spec.unschedulable
            info.allocatable = allocatable
            if relabelled:
                self.topology.node_upserted(name, info.labels, allocatable)
                for label_key, tree in self.label_trees.items():
                    tree.node_upserted(name, _only(info.labels, label_key), allocatable)
        if self.kai_node_pool_label and self.kai_node_pool_label in info.labels:
            if relabelled or name not in self._pooled_nodes:
                self._pooled_nodes.add(name)
                self.pools_version += 1
        elif name in self._pooled_nodes:
            self._pooled_nodes.discard(name)
            self.pools_version += 1

    def _node_deleted(self, event: NodeDeleted) -> None:
        info = self.nodes.pop(event.name, None)
        if info is None:
            return
        self._largest = None
        self.node_changes.add(event.name)
        self._set_problems("Node", event.name, [])
        # Pods stay placed on the name (the API deletes them separately); their usage leaves with the node.
        for key in list(info.pods):
            pod = self.pods.get(key)
            if pod is not None:
                pod.counted_on = ""
        for pod in info.nominated.values():
            pod.nominated_on = ""
            self.nominating.discard(pod.key)
            self._await_node(pod.key, event.name)  # held again if the node comes back
        self.topology.node_deleted(event.name)
        for tree in self.label_trees.values():
            tree.node_deleted(event.name)
        if event.name in self._pooled_nodes:
            self._pooled_nodes.discard(event.name)
            self.pools_version += 1

    # pods -------------------------------------------------------------

    def _pod_upserted(self, event: PodUpserted) -> None:
        self._upsert_pod(event.pod, event.time)

    def _upsert_pod(self, obj: Pod, time: float, bound_node: str = "") -> None:
        """A pod as the API shows it; `bound_node`: and bound there by our binding (a snapshot's record),
        folded as `PodUpserted` then `PodBound` are, with one settling instead of two."""
        compactor = self._compactor
        shape: Shape | None = None
        if obj is compactor.built:  # decoded on shared parts (`decode_record`): nothing to share
            shape = compactor.built_shape
            compactor.built = None
        else:
            compactor.pod(obj)
        meta = obj.metadata
        key = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
        pod = self.pods.get(key)
        if pod is not None and meta.uid and pod.uid != meta.uid:
            # A re-created pod of the same name: nothing of the old one carries over.
            self._remove_pod(pod)
            pod = None
        if pod is None:
            pod = PodInfo(key, obj, time)
            self.pods[key] = pod
            if obj.spec.volumes:
                self.volumes.pod_held(obj, key)
            self._derive_pod(pod, obj, shape)
        else:
            old = pod.obj
            pod.obj = obj
            # Most updates are status or binding changes: re-derive only what the change can affect.
            old_spec, spec = old.spec, obj.spec
            if old_spec.volumes is not spec.volumes and old_spec.volumes != spec.volumes:
                # The API server refuses this for a pod; an object of any other source may still do it.
                if old_spec.volumes:
                    self.volumes.pod_let_go(old, key)
                if spec.volumes:
                    self.volumes.pod_held(obj, key)
            # The same shared parts (`decode_record`) cannot derive differently: skip the comparison.
            same_parts = (old_spec is spec and old.metadata.labels is meta.labels
                          and old.metadata.annotations is meta.annotations)
            old_status, status = old.status, obj.status
            # A resize moving on (the kubelet's figures) may change what is counted with the spec unchanged.
            resized = (old_status.container_statuses or status.container_statuses or old_status.init_container_statuses
                       or status.init_container_statuses) and (
                old_status.container_statuses != status.container_statuses
                or old_status.init_container_statuses != status.init_container_statuses
                or old_status.conditions != status.conditions)
            if resized or (not same_parts and (
                    old_spec.containers != spec.containers or old_spec.init_containers != spec.init_containers
                    or old_spec.overhead != spec.overhead or old_spec.priority != spec.priority
                    or old_spec.priority_class_name != spec.priority_class_name
                    or old_spec.preemption_policy != spec.preemption_policy
                    or old_spec.scheduler_name != spec.scheduler_name
                    or old_spec.scheduling_group != spec.scheduling_group or old_spec.workload_ref != spec.workload_ref
                    or old.metadata.labels != meta.labels or old.metadata.annotations != meta.annotations)):
                old_requests, counted = pod.requests, pod.counted_on
                self._uncount(pod)  # its usage was counted with the old requests; _settle re-adds the new
                self._derive_pod(pod, obj, shape)
                if counted and _released(old_requests, pod.requests):
                    self.requests_released += 1  # the loop retries what waits for room (a resize down, say)
        if obj.spec.node_name:
            if pod.bound_at is None:
                pod.bound_at = time
            pod.assumed_node = ""
            pod.bound_node = ""
        elif bound_node:
            pod.bound_node = bound_node
            pod.assumed_node = ""
            if pod.bound_at is None:
                pod.bound_at = time
        nominated = obj.status.nominated_node_name
        if nominated and nominated != pod.nominated_node and not pod.node_name:
            pod.nominated_node = nominated
        if obj.spec.volumes and obj.status.phase in TERMINAL_PHASES:
            self.volumes.pod_finished(obj)
        self._settle(pod)

    def _derive_pod(self, pod: PodInfo, obj: Pod, shape: Shape | None = None) -> None:
        """Derive what the fold reads of the pod. `shape`: the pod is built on the decoder's shared parts
        (`Compactor.pod_of`) numbered so; pods of one shape derive alike when they have no problems, and
        so do pods of one head without labels and spec, but for their gang (`_add_new_pod`)."""
        key = pod.key
        if shape is not None and _resizing(obj.status):
            shape = None  # its requests depend on its status too: pods of its shape may count otherwise
        derived = self._shapes.get(shape) if shape is not None else None
        if derived is None:
            derived = self._derivation(obj, key)
            if shape is not None and not derived[8] and len(self._shapes) < _RequestsMemo.LIMIT * 10:
                self._shapes[shape] = derived
                if not _labels_derive(obj.metadata.labels):
                    self._unlabelled[(shape[2], shape[1])] = derived
        (pod.requests, pod.invalid, pod.ours, own, pod.preemption_policy, pod.task, pod.preemptable,
         gang_key, problems) = derived
        pod.own_priority = own
        self._join_gang(pod, gang_key)
        gang = self.gangs.get(gang_key) if gang_key else None
        pod.priority = own if gang is None or gang.job_priority is None else gang.job_priority
        if problems or ("Pod", key) in self.problems:
            self._set_problems("Pod", key, problems)

    def _derivation(self, obj: Pod, key: str) -> _Derivation:
        """What the fold reads of a pod object, and its problems. Depends only on the object (its
        namespace, labels, annotations and spec), the priority classes and `key` (which only the
        problems name): pods with equal parts and no problems derive the same."""
        problems: list[Problem] = []
        requests = self._requests_memo.of(obj, key, problems)
        invalid = f"{problems[0].field}: {problems[0].message}" if problems else ""  # only requests so far
        ours = (obj.spec.scheduler_name or "default-scheduler") == self.scheduler_name
        if len(requests) > MAX_HOST_PORTS and ours and not invalid:
            held = sum(1 for name in requests if name.startswith(HOST_PORT_PREFIX))
            if held > MAX_HOST_PORTS:  # each is checked on every node placement looks at: not placed
                problems.append(Problem("Pod", key, "spec.containers[*].ports", (
                    f"{held} host ports: toposched places a pod holding at most {MAX_HOST_PORTS}; the pod is not "
                    f"placed"), UNSUPPORTED_FIELD))
                invalid = f"{problems[-1].field}: {problems[-1].message}"
        annotations, labels = obj.metadata.annotations, obj.metadata.labels
        oversized = annotations.get(OVERSIZED_ANNOTATION) if annotations else None
        if oversized is not None:
            # An accounting core (events.objects.pod_core): counted where it runs, never placed by us.
            ours = False
            problems.append(Problem("Pod", key, "object", oversized, RECORD_TOO_LARGE))
        priority, policy = self._resolve_priority(obj, key, problems)
        if ours:
            device = shared_device(obj)
            if device is not None and not invalid:  # another scheduler's device: never placed by us
                invalid = f"{device[0]}: {device[1]}"
            problems += unconsidered(obj, key, device)
        # The gang protocols' pod side (a hot path: plain lookups, functions only where something is set).
        # Volcano's task, else the KAI leaf sub-group (each dialect's gang reads its own: `KaiSubGroups`).
        task = annotations.get(VOLCANO_TASK_SPEC_ANNOTATION, "") or labels.get(KAI_SUB_GROUP_LABEL, "")
        preemptable = (True if VOLCANO_PREEMPTABLE_ANNOTATION not in annotations
                       and VOLCANO_PREEMPTABLE_ANNOTATION not in labels
                       else preemptable_of(annotations, labels, "Pod", key, problems))
        gang_key, gang_problems = membership(obj, key)
        if gang_problems:
            problems += gang_problems
        if not gang_key and KAI_QUEUE_LABEL in labels:
            priority = self._kai_pod_priority(obj, key, priority, problems)
        return requests, invalid, ours, priority, policy, task, preemptable, gang_key, problems

    def _kai_pod_priority(self, obj: Pod, key: str, own: int, problems: list[Problem]) -> int:
        """The priority of a pod of no gang that a KAI queue label places in a KAI queue, as KAI's pod-grouper
        gives the PodGroup it makes for it: the class its label `priorityClassName` names (KAI's documented
        way), else its own (`own`: its spec.priorityClassName's, or a spec.priority other than the 0 the API
        server's admission writes for a pod naming no class), else KAI's general default, the `train` class;
        a class that does not exist is the globalDefault class's value, else 0 (`group_priority`)."""
        named = obj.metadata.labels.get(KAI_PRIORITY_LABEL, "")
        if named:
            if named not in self.priority_classes:
                problems.append(Problem("Pod", key, f"metadata.labels[{KAI_PRIORITY_LABEL}]", f"PriorityClass "
                                        f"{shown(named)} not found: the default priority, {self.group_priority('')}, "
                                        "taken, as KAI does"))
            return self.group_priority(named)
        if obj.spec.priority_class_name or obj.spec.priority:  # a priority of its own (admission's 0 is none)
            return own
        return self.group_priority(KAI_DEFAULT_PRIORITY_CLASS)

    def _join_gang(self, pod: PodInfo, gang_key: str) -> None:
        """Make the pod a member of `gang_key` ("" for none), leaving its old gang; keep an annotation gang's
        definer true."""
        key = pod.key
        gang = None
        if gang_key != pod.gang:
            if pod.gang:
                self._leave_gang(pod)
            pod.gang = gang_key
            if gang_key:
                gang = self.gangs.get(gang_key)
                if gang is None:
                    gang = self._new_gang(gang_key, pod.first_seen)
                gang.members.add(key)
        if not gang_key:
            return
        annotations, labels = pod.obj.metadata.annotations, pod.obj.metadata.labels
        if (GANG_MIN_AVAILABLE_ANNOTATION in annotations or LIGHTWEIGHT_MIN_AVAILABLE_LABEL in labels
                or (gang or self.gangs[gang_key]).definer == key):  # `defines_gang`, inline
            self._annotations_changed(gang or self.gangs[gang_key], pod)

    def _resolve_priority(self, obj: Pod, key: str, problems: list[Problem]) -> tuple[int, str]:
        class_name = obj.spec.priority_class_name
        priority_class = None
        if class_name:
            priority_class = self.priority_classes.get(class_name)
            if priority_class is None and obj.spec.priority is None:
                problems.append(Problem("Pod", key, "spec.priorityClassName",
                                        f"PriorityClass {class_name!r} not found; priority 0 assumed"))
        elif self._default_priority_class:
            priority_class = self.priority_classes.get(self._default_priority_class)
        if obj.spec.priority is not None:
            priority = obj.spec.priority
        else:
            priority = priority_class.value if priority_class is not None else 0
        policy = obj.spec.preemption_policy or (
            priority_class.preemption_policy if priority_class is not None else None
        ) or PREEMPT_LOWER_PRIORITY
        if policy not in (PREEMPT_LOWER_PRIORITY, NEVER):
            problems.append(Problem("Pod", key, "spec.preemptionPolicy",
                                    f"{policy!r} is not PreemptLowerPriority or Never; using Never"))
            policy = NEVER
        return priority, policy

    def _pod_deleted(self, event: PodDeleted) -> None:
        pod = self.pods.get(event.key)
        if pod is None or (event.uid and pod.uid and event.uid != pod.uid):
            return
        self._remove_pod(pod)

    def _remove_pod(self, pod: PodInfo) -> None:
        pod.assumed_node = ""
        pod.nominated_node = ""
        pod.removed = True
        if pod.obj.spec.volumes:
            self.volumes.pod_let_go(pod.obj, pod.key)
        self._settle(pod)
        if pod.gang:
            self._leave_gang(pod)
        self.pending.discard(pod.key)
        self._set_problems("Pod", pod.key, [])
        del self.pods[pod.key]

    def _leave_gang(self, pod: PodInfo) -> None:
        gang = self.gangs.get(pod.gang)
        if gang is None:
            return
        gang.members.discard(pod.key)
        if gang.definer == pod.key:
            self._find_definer(gang)
        self._forget_gang_if_empty(gang)

    # decisions --------------------------------------------------------

    def _pod_assumed(self, event: PodAssumed) -> None:
        pod = self._decision_target(event.pod, event.uid)
        if pod is not None and not pod.node_name:
            pod.assumed_node = event.node
            self._settle(pod)

    def _pod_forgotten(self, event: PodForgotten) -> None:
        pod = self._decision_target(event.pod, event.uid)
        if pod is not None and pod.assumed_node:
            pod.assumed_node = ""
            self._settle(pod)

    def _bind_failed(self, event: BindFailed) -> None:
        pod = self._decision_target(event.pod, event.uid)
        if pod is not None and not pod.node_name:
            pod.assumed_node = ""
            self._settle(pod)

    def _pod_bound(self, event: PodBound, quiet: bool = False) -> None:
        """`quiet`: the caller knows no quota is known (`fold_records`)."""
        pod = self.pods.get(event.pod)  # `_decision_target` and `node_name`, inline: one per binding
        if pod is None:
            return
        obj, uid = pod.obj, event.uid
        if (uid and obj.metadata.uid and uid != obj.metadata.uid) or obj.spec.node_name or pod.bound_node:
            return
        # The API accepted the binding; the watch will confirm. Until then (and against any stale update
        # from before the binding: a binding is never undone) the pod is bound here.
        pod.bound_node = target = event.node
        pod.assumed_node = ""
        if pod.bound_at is None:
            pod.bound_at = event.time
        binds = self._binds
        if binds is not None:
            if (not (pod.counted_on or pod.placed_on or pod.nominated_node or pod.nominated_on or pod.removed)
                    and target in self.nodes and obj.status.phase not in TERMINAL_PHASES
                    and (quiet or not self.quotas.active)):
                binds.append(pod)  # what `_settle` would do, for `_count_group` (`batching_binds`)
                return
            if binds:
                self._flush_binds()
        self._settle(pod)

    @contextlib.contextmanager
    def batching_binds(self) -> Iterator[None]:
        """Within the block, nothing reads the state (a log being folded): a run of bindings of waiting pods
        to nodes held is counted at once, node by node (`_count_group`), when the run ends (the next other
        event, or the block's end). The state is then the same as folding the bindings one by one."""
        self._binds = []
        try:
            with self.deferring_families():
                yield
        finally:
            if self._binds:
                self._flush_binds()
            self._binds = None

    @contextlib.contextmanager
    def deferring_families(self) -> Iterator[None]:
        """Within the block, a CompositePodGroup hierarchy a change touches is read again once, at the block's end,
        not at each change (a hierarchy of N PodGroups folded one by one would be read N times, each time every
        leaf). For folds nothing reads the state during: a log, a snapshot. The state is then the same."""
        if self._family_changes is not None:  # nested: the outer block reads them
            yield
            return
        self._family_changes = set()
        try:
            yield
        finally:
            changed, self._family_changes = self._family_changes, None
            if changed:
                self._refresh_families(changed, time=self.last_time)

    def _flush_binds(self) -> None:
        binds, self._binds = self._binds or [], []
        keys: list[str] = []
        on_node: dict[str, list[PodInfo]] = {}
        discard = self.pending.discard  # one by one, as `_settle` does (`difference_update` may resize: another order)
        for pod in binds:
            key = pod.key
            keys.append(key)
            discard(key)
            placed = on_node.get(pod.bound_node)
            if placed is None:
                on_node[pod.bound_node] = [pod]
            else:
                placed.append(pod)
        self.pod_changes.extend(keys)  # as `_settle` notes each, in order
        for target, placed in on_node.items():
            self._count_group(target, placed)

    def _pod_nominated(self, event: PodNominated) -> None:
        pod = self._decision_target(event.pod, event.uid)
        if pod is not None:
            pod.nominated_node = event.node
            self._settle(pod)

    def _nomination_cleared(self, event: NominationCleared) -> None:
        pod = self.pods.get(event.pod)
        if pod is not None and pod.nominated_node:
            pod.nominated_node = ""
            self._settle(pod)

    def _eviction_requested(self, event: EvictionRequested) -> None:
        pod = self._decision_target(event.pod, event.uid)
        if pod is not None:
            pod.eviction_requested = True
            self.pod_changes.add(pod.key)

    def _gang_pending(self, event: GangPending) -> None:
        gang = self.gangs.get(event.gang)
        if gang is not None:
            gang.attempts += 1
            gang.last_reason = event.reason
            gang.held = event.held

    def _gang_planned(self, event: GangPlanned) -> None:
        gang = self.gangs.get(event.gang)
        if gang is not None:
            gang.attempts += 1
            gang.last_reason = ""
            gang.held = False

    def _gang_timed_out(self, event: GangTimedOut) -> None:
        gang = self.gangs.get(event.gang)
        if gang is not None:
            gang.timed_out += 1
            gang.last_reason = event.reason
            gang.held = False

    def _decision_target(self, key: str, uid: str) -> PodInfo | None:
        pod = self.pods.get(key)
        if pod is None or (uid and pod.uid and uid != pod.uid):
            return None
        return pod

    # gangs, priorities, topology objects ------------------------------

    def _pod_group_upserted(self, event: PodGroupUpserted) -> None:
        group = event.pod_group
        key = object_key(group.metadata.namespace, group.metadata.name)
        self.pod_groups[key] = group
        self._set_source(key, SIGS_SOURCE, *koordinator_gang_spec(group, key), time=event.time)

    def _pod_group_deleted(self, event: PodGroupDeleted) -> None:
        if self.pod_groups.pop(event.key, None) is not None:
            self._drop_source(event.key, SIGS_SOURCE)

    def _scheduler_plugins_pod_group_upserted(self, event: SchedulerPluginsPodGroupUpserted) -> None:
        group = event.pod_group
        key = object_key(group.metadata.namespace, group.metadata.name)
        self.scheduler_plugins_pod_groups[key] = group
        spec, problems = koordinator_gang_spec(group, key, kind=SCHEDULER_PLUGINS_PROBLEM, dialect=SCHEDULER_PLUGINS)
        self._set_source(key, X_K8S_SOURCE, spec, problems, time=event.time)

    def _scheduler_plugins_pod_group_deleted(self, event: SchedulerPluginsPodGroupDeleted) -> None:
        if self.scheduler_plugins_pod_groups.pop(event.key, None) is not None:
            self._drop_source(event.key, X_K8S_SOURCE)

    def _kube_pod_group_upserted(self, event: KubePodGroupUpserted) -> None:
        group = event.pod_group
        key = object_key(group.metadata.namespace, group.metadata.name)
        old = self.kube_pod_groups.get(key)
        self.kube_pod_groups[key] = group
        old_parent = _parent_of(old) if old is not None else ""
        parent = _parent_of(group)
        if not parent and not old_parent:
            self._set_source(key, KUBE_SOURCE, *kube_pod_group_spec(group, key), time=event.time)
            return
        if old is not None and old.spec == group.spec:
            return  # a status write (toposched's own conditions among them): the hierarchy reads the same
        if old_parent != parent:
            _unlink(self._composite_leaves, old_parent, key)
            if not parent:
                self._set_source(key, KUBE_SOURCE, *kube_pod_group_spec(group, key), time=event.time)
        if parent:
            self._composite_leaves.setdefault(parent, set()).add(key)
            if self._family_changes is not None:  # held at once, as its gang's first sight is now; read later
                spec, problems = kube_pod_group_spec(group, key)
                self._set_source(key, KUBE_SOURCE, composite_leaf_spec(spec, unread_family(key)), problems,
                                 time=event.time)
        self._refresh_families({old_parent, parent}, time=event.time)

    def _kube_pod_group_deleted(self, event: KubePodGroupDeleted) -> None:
        group = self.kube_pod_groups.pop(event.key, None)
        if group is not None:
            self._drop_source(event.key, KUBE_SOURCE)
            parent = _parent_of(group)
            if parent:
                _unlink(self._composite_leaves, parent, event.key)
                self._refresh_families({parent}, time=event.time)

    def _composite_upserted(self, event: CompositePodGroupUpserted) -> None:
        composite = event.composite
        key = object_key(composite.metadata.namespace, composite.metadata.name)
        old = self.composite_pod_groups.get(key)
        old_parent = _parent_of(old) if old is not None else ""
        parent = _parent_of(composite)
        self.composite_pod_groups[key] = composite
        if old is not None and old.spec == composite.spec:
            return
        if old_parent != parent:
            _unlink(self._composite_children, old_parent, key)
        if parent:
            self._composite_children.setdefault(parent, set()).add(key)
        self._refresh_families({key, old_parent, parent}, time=event.time)

    def _composite_deleted(self, event: CompositePodGroupDeleted) -> None:
        composite = self.composite_pod_groups.pop(event.key, None)
        if composite is None:
            return
        parent = _parent_of(composite)
        if parent:
            _unlink(self._composite_children, parent, event.key)
        self._set_problems(COMPOSITE_PROBLEM, event.key, [])
        self._refresh_families({event.key, parent}, time=event.time)

    def _refresh_families(self, keys: AbstractSet[str], *, time: float) -> None:
        """Read again the hierarchies the CompositePodGroups `keys` are in (or would be: a key not held is the
        missing top of the groups naming it): every leaf PodGroup's spec, and each composite's problems."""
        if self._family_changes is not None:
            self._family_changes.update(key for key in keys if key)
            return
        composites = self.composite_pod_groups
        roots = {root_of(key, composites) for key in keys if key}
        for root in sorted(roots):
            family = family_of(root, composites, self._composite_children, self._composite_leaves,
                               self.kube_pod_groups)
            for leaf in family.leaves:
                group = self.kube_pod_groups[leaf]
                spec, problems = kube_pod_group_spec(group, leaf)
                self._set_source(leaf, KUBE_SOURCE, composite_leaf_spec(spec, family), problems, time=time)
            for member in family.composites:
                self._set_problems(COMPOSITE_PROBLEM, member, family.problems.get(member, []))

    def _kai_pod_group_upserted(self, event: KaiPodGroupUpserted) -> None:
        group = event.pod_group
        key = object_key(group.metadata.namespace, group.metadata.name)
        self.kai_pod_groups[key] = group
        self._set_source(key, KAI_SOURCE, *kai_gang_spec(group, key, self.kai_node_pool_label), time=event.time)

    def _kai_pod_group_deleted(self, event: KaiPodGroupDeleted) -> None:
        if self.kai_pod_groups.pop(event.key, None) is not None:
            self._drop_source(event.key, KAI_SOURCE)

    def _volcano_pod_group_upserted(self, event: VolcanoPodGroupUpserted) -> None:
        group = event.pod_group
        key = object_key(group.metadata.namespace, group.metadata.name)
        self.volcano_pod_groups[key] = group
        self._set_source(key, VOLCANO_SOURCE, *volcano_gang_spec(group, key), time=event.time)

    def _volcano_pod_group_deleted(self, event: VolcanoPodGroupDeleted) -> None:
        if self.volcano_pod_groups.pop(event.key, None) is not None:
            self._drop_source(event.key, VOLCANO_SOURCE)

    def _workload_upserted(self, event: WorkloadUpserted) -> None:
        workload = event.workload
        key = object_key(workload.metadata.namespace, workload.metadata.name)
        self.workloads[key] = workload
        self._set_problems(WORKLOAD_PROBLEM, key, workload_problems(workload, key))
        for gang_key in sorted(self._workload_gangs.get(key, ())):
            self._refresh_workload_source(gang_key, event.time)

    def _workload_deleted(self, event: WorkloadDeleted) -> None:
        if self.workloads.pop(event.key, None) is None:
            return
        self._set_problems(WORKLOAD_PROBLEM, event.key, [])
        for gang_key in sorted(self._workload_gangs.get(event.key, ())):
            self._drop_source(gang_key, WORKLOAD_SOURCE)

    # gang specs: every source of a gang, the first in GANG_SOURCES order wins ------------

    def _new_gang(self, key: str, time: float) -> GangInfo:
        gang = self.gangs[key] = GangInfo(key, time)
        found = workload_of_gang(key)
        if found is not None:
            self._workload_gangs.setdefault(found[0], set()).add(key)
            self._refresh_workload_source(key, time)
        return gang

    def _forget_gang_if_empty(self, gang: GangInfo) -> None:
        if gang.members or gang.sources or self.gangs.get(gang.key) is not gang:
            return
        del self.gangs[gang.key]
        found = workload_of_gang(gang.key)
        if found is not None:
            users = self._workload_gangs.get(found[0])
            if users is not None:
                users.discard(gang.key)
                if not users:
                    del self._workload_gangs[found[0]]

    def _refresh_workload_source(self, gang_key: str, time: float) -> None:
        found = workload_of_gang(gang_key)
        workload = self.workloads.get(found[0]) if found is not None else None
        spec = workload_gang_spec(workload, found[1], gang_key) if workload is not None and found else None
        if spec is None:
            self._drop_source(gang_key, WORKLOAD_SOURCE)
        else:
            self._set_source(gang_key, WORKLOAD_SOURCE, spec, [], time=time)

    def _annotations_changed(self, gang: GangInfo, pod: PodInfo) -> None:
        """Keep the annotation source true after `pod` (a member) was derived anew."""
        if defines_gang(pod.obj):
            if not gang.definer or pod.key <= gang.definer:
                gang.definer = pod.key
                self._set_source(gang.key, POD_METADATA_SOURCE, *annotation_gang_spec(pod.obj, gang.key),
                                 time=pod.first_seen)
        elif gang.definer == pod.key:
            self._find_definer(gang)

    def _find_definer(self, gang: GangInfo) -> None:
        """The member with the smallest key whose annotations define the gang, as its source (or none)."""
        candidates = [key for key in gang.members
                      if (member := self.pods.get(key)) is not None and not member.removed and defines_gang(member.obj)]
        if candidates:
            gang.definer = min(candidates)
            definer = self.pods[gang.definer]
            self._set_source(gang.key, POD_METADATA_SOURCE, *annotation_gang_spec(definer.obj, gang.key),
                             time=definer.first_seen)
        else:
            gang.definer = ""
            self._drop_source(gang.key, POD_METADATA_SOURCE)

    def _set_source(self, key: str, source: str, spec: GangSpec, problems: list[Problem], *, time: float) -> None:
        gang = self.gangs.get(key)
        if gang is None:
            gang = self._new_gang(key, time)
        gang.sources[source] = (spec, problems)
        self._choose_spec(gang)

    def _drop_source(self, key: str, source: str) -> None:
        gang = self.gangs.get(key)
        if gang is None or gang.sources.pop(source, None) is None:
            return
        self._choose_spec(gang)
        self._forget_gang_if_empty(gang)

    def _choose_spec(self, gang: GangInfo) -> None:
        """The winning source's spec and problems; every other source present is reported as ignored."""
        old_key = label_tree_name(gang.spec) if gang.spec is not None else ""
        filed: dict[str, list[Problem]] = {}
        if len(gang.sources) == 1:  # the usual case, kept cheap: one object (or annotation set) per gang
            ((name, (spec, problems)),) = gang.sources.items()
            gang.spec = spec
            kind = _PROBLEM_KIND_OF_SOURCE[name]
            if spec.priority_class_name:
                problems = problems + self._missing_class(gang.key, kind, spec)
            if problems or gang.filed or (kind, gang.key) in self.problems:  # else nothing to file or clear
                filed[kind] = problems
        else:
            winner = gang.source
            gang.spec = gang.sources[winner][0] if winner else None
            for name, kind in GANG_SOURCES:
                if name not in gang.sources:
                    continue
                if name == winner:
                    filed.setdefault(kind, []).extend(gang.sources[name][1])
                    filed[kind].extend(self._missing_class(gang.key, kind, gang.sources[name][0]))
                elif kind != WORKLOAD_PROBLEM:  # a Workload's problems are its own (filed on the Workload)
                    verb = "are" if name == POD_METADATA_SOURCE else "is"
                    filed.setdefault(kind, []).append(Problem(
                        kind, gang.key, "metadata.name", f"gang {gang.key} follows its {winner}; its {name} {verb} "
                        "ignored"))
        if gang.filed:
            for kind in gang.filed.difference(filed):
                self._set_problems(kind, gang.key, [])
        if filed:
            for kind, found in filed.items():
                self._set_problems(kind, gang.key, found)
            gang.filed = {kind for kind, found in filed.items() if found}
        elif gang.filed:
            gang.filed = _NO_KINDS
        new_key = label_tree_name(gang.spec) if gang.spec is not None else ""
        if new_key != old_key:
            self._label_tree_unused(old_key, gang.key)
            self._label_tree_used(new_key, gang.key)
        job_priority = self.job_priority(gang.spec)
        if job_priority != gang.job_priority:
            gang.job_priority = job_priority
            self._reprice(gang)

    def _missing_class(self, key: str, kind: str, spec: GangSpec) -> list[Problem]:
        """The problem of a Volcano, KAI or Kubernetes PodGroup whose `priorityClassName` names no PriorityClass (as
        `_resolve_priority`'s of a pod), or none."""
        name = spec.priority_class_name
        if (not name or spec.dialect not in JOB_PRIORITY_DIALECTS or name in self.priority_classes
                or spec.group_priority is not None):  # a Kubernetes PodGroup's admitted priority stands
            return []
        how = ("as the API server gives a PodGroup that names none" if spec.dialect == KUBERNETES
               else f"as {_DIALECT_NAMES[spec.dialect]} does")
        return [Problem(kind, key, "spec.priorityClassName", f"PriorityClass {shown(name)} not found: the job takes "
                        f"the default priority, {self.group_priority('')}, {how}")]

    def _reprice(self, gang: GangInfo) -> None:
        """Give each member of `gang` its job's priority now (`gang.job_priority`), or its own when the job has
        none; a pod whose priority moves is noted in `pod_changes` and `priority_changes`, and so is the node
        it holds a nomination on (what that node offers a pod depends on the priorities nominated there)."""
        job_priority, pods = gang.job_priority, self.pods
        for key in sorted(gang.members):
            pod = pods.get(key)
            if pod is None:
                continue
            priority = pod.own_priority if job_priority is None else job_priority
            if pod.priority != priority:
                pod.priority = priority
                self.pod_changes.add(key)
                self.priority_changes.add(key)
                if pod.nominated_on:
                    self.node_changes.add(pod.nominated_on)

    # label trees (Kubernetes topology keys that are not layers of the topology) -----------

    def _label_tree_used(self, label_key: str, gang: str) -> None:
        if not label_key:
            return
        users = self._label_tree_users.setdefault(label_key, set())
        users.add(gang)
        if label_key in self.label_trees:
            return
        # One layer per key (a CompositePodGroup hierarchy's keys, from its root down: `state.composites`).
        layers: list[NetworkTopologyLayer] = []
        parent = ""
        for depth, key in enumerate(label_key.split(LABEL_PATH_SEPARATOR), 1):
            layer = layer_name_of(tier_name_of("", (key,)), depth)
            if layer in (CLUSTER_LAYER, NODE_LAYER) or any(known.topology_layer == layer for known in layers):
                layer = "TopologyKeyLayer" if depth == 1 else f"TopologyKeyLayer{depth}"
            layers.append(NetworkTopologyLayer(topology_layer=layer, label_key=[key], parent_topology_layer=parent))
            parent = layer
        layers.append(NetworkTopologyLayer(topology_layer=NODE_LAYER, parent_topology_layer=parent))
        tree = TopologyTree()
        tree.network_topology_upserted(ClusterNetworkTopology(
            metadata=ObjectMeta(name=DEFAULT_CNT_NAME),
            spec=ClusterNetworkTopologySpec(network_topology_spec=layers)))
        for name in sorted(self.nodes):
            info = self.nodes[name]
            tree.node_upserted(name, _only(info.labels, label_key), info.allocatable, info.used)
            if info.used:
                tree.usage_noted(name)
        self.label_trees[label_key] = tree

    def _label_tree_unused(self, label_key: str, gang: str) -> None:
        users = self._label_tree_users.get(label_key)
        if users is None:
            return
        users.discard(gang)
        if not users:
            del self._label_tree_users[label_key]
            self.label_trees.pop(label_key, None)

    def _priority_class_upserted(self, event: PriorityClassUpserted) -> None:
        self.priority_classes[event.priority_class.metadata.name] = event.priority_class
        self._refresh_priorities()

    def _priority_class_deleted(self, event: PriorityClassDeleted) -> None:
        if self.priority_classes.pop(event.name, None) is not None:
            self._refresh_priorities()

    def _refresh_priorities(self) -> None:
        self._shapes.clear()
        self._unlabelled.clear()
        defaults = sorted(name for name, pc in self.priority_classes.items() if pc.global_default)
        self._default_priority_class = defaults[0] if defaults else ""
        gangs = self.gangs
        for gang_key in sorted(gangs):
            if gangs[gang_key].job_priority is not None or self.job_priority(gangs[gang_key].spec) is not None:
                self._choose_spec(gangs[gang_key])  # its priority, and whether the class it names is missing, anew
        for key in sorted(self.pods):
            pod = self.pods[key]
            # The pod's problems as a fresh derivation lists them (in its order: a restored state equals
            # this one), with the priority class's now.
            _, _, _, own, pod.preemption_policy, _, _, _, problems = self._derivation(pod.obj, key)
            pod.own_priority = own
            job = gangs[pod.gang].job_priority if pod.gang in gangs else None
            pod.priority = own if job is None else job
            self.pod_changes.add(key)
            self._set_problems("Pod", key, problems)

    # volumes: read where a pod is placed (`volume_needs`), never folded into the pods ---------------

    def _claim_upserted(self, event: ClaimUpserted) -> None:
        key = _meta_key(event.claim.metadata)
        self.volumes.put_claim(key, event.claim)
        self._volumes_of_claim_changed(key)

    def _claim_deleted(self, event: ClaimDeleted) -> None:
        self.volumes.drop_claim(event.key)
        self._volumes_of_claim_changed(event.key)

    def _volume_upserted(self, event: VolumeUpserted) -> None:
        self._volume_changed(event.volume.metadata.name)
        self.volumes.put_volume(event.volume)
        self._volume_changed(event.volume.metadata.name)

    def _volume_deleted(self, event: VolumeDeleted) -> None:
        self._volume_changed(event.name)
        self.volumes.drop_volume(event.name)

    def _volume_changed(self, name: str) -> None:
        """The claim the volume `name` is bound to, as held now, may count it anew on its users' nodes."""
        volume = self.volumes.volumes.get(name)
        ref = volume.spec.claim_ref if volume is not None else None
        if ref is not None and self.volumes.attach_limits:
            self._volumes_of_claim_changed(f"{ref.namespace}/{ref.name}")

    def _storage_class_upserted(self, event: StorageClassUpserted) -> None:
        self.volumes.classes[event.storage_class.metadata.name] = event.storage_class
        self._class_changed()

    def _storage_class_deleted(self, event: StorageClassDeleted) -> None:
        self.volumes.classes.pop(event.name, None)
        self._class_changed()

    def _class_changed(self) -> None:
        """An unbound claim's CSI volume is counted by its class's provisioner: where a CSINode limits a driver,
        every node may count its pods' volumes anew."""
        if self.volumes.attach_limits:
            self.volumes.version += 1
            for name in self.volumes.attach_limits:
                self.node_changes.add(name)

    def _csi_node_upserted(self, event: CSINodeUpserted) -> None:
        name = event.csi_node.metadata.name
        problems = self.volumes.put_csi_node(event.csi_node)
        self._set_problems(CSI_NODE_KIND, name, [Problem(CSI_NODE_KIND, name, field, message, INVALID_CSI_NODE)
                                                 for field, message in problems])
        self.node_changes.add(name)  # what the node offers pods with volumes changed

    def _csi_node_deleted(self, event: CSINodeDeleted) -> None:
        self.volumes.drop_csi_node(event.name)
        self._set_problems(CSI_NODE_KIND, event.name, [])
        self.node_changes.add(event.name)

    def _volumes_of_claim_changed(self, claim: str) -> None:
        """A claim (or its volume) changed: the nodes its placed users count it on may count it anew."""
        if not self.volumes.attach_limits:
            return
        for key in self.volumes.users.get(claim, ()):
            pod = self.pods.get(key)
            if pod is not None and pod.counted_on:
                self.node_changes.add(pod.counted_on)

    def attach_room(self, node: str, ignore: AbstractSet[str] = frozenset()) -> tuple[dict[str, int], set[str]]:
        """NodeVolumeLimits on `node`: per CSI driver it limits, how many more volumes of it may be used there,
        and the unique names of the CSI volumes the pods counted there (but those in `ignore`) use. A volume
        two pods there use counts once; the pods are all those bound or assumed there, ours or not, not
        finished. Kept per node between changes of pods and volume objects."""
        limits = self.volumes.attach_limits.get(node)
        if not limits:
            return {}, set()
        if not ignore:
            stamp = (self.pod_changes.end, self.volumes.version)
            if self._attach_stamp != stamp:
                self._attach_stamp = stamp
                self._attach_rooms.clear()
            kept = self._attach_rooms.get(node)
            if kept is not None:
                return kept
        info = self.nodes.get(node)
        attached: set[str] = set()
        room = dict(limits)
        if info is not None:
            for key in info.pods:
                if key in ignore:
                    continue
                pod = self.pods.get(key)
                if pod is None or not pod.obj.spec.volumes:
                    continue
                for unique, (driver, _) in csi_volumes(self.volumes, pod.obj).items():
                    if unique not in attached:
                        attached.add(unique)
                        if driver in room:
                            room[driver] -= 1
        if not ignore:
            self._attach_rooms[node] = (room, attached)
        return room, attached

    def _budget_upserted(self, event: BudgetUpserted) -> None:
        meta = event.budget.metadata
        self.budgets.setdefault(meta.namespace, {})[_meta_key(meta)] = event.budget

    def _budget_deleted(self, event: BudgetDeleted) -> None:
        namespace = event.key.partition("/")[0]
        in_namespace = self.budgets.get(namespace)
        if in_namespace is not None:
            in_namespace.pop(event.key, None)
            if not in_namespace:
                del self.budgets[namespace]

    def _volcano_job_upserted(self, event: VolcanoJobUpserted) -> None:
        key = _meta_key(event.job.metadata)
        self._hold_job(self.volcano_jobs.get(key), event.job)
        self.volcano_jobs[key] = event.job

    def _volcano_job_deleted(self, event: VolcanoJobDeleted) -> None:
        self._hold_job(self.volcano_jobs.pop(event.key, None), None)

    def _kubeflow_job_upserted(self, event: KubeflowJobUpserted) -> None:
        key = (event.job.kind, _meta_key(event.job.metadata))
        self._hold_job(self.kubeflow_jobs.get(key), event.job)
        self.kubeflow_jobs[key] = event.job

    def _kubeflow_job_deleted(self, event: KubeflowJobDeleted) -> None:
        self._hold_job(self.kubeflow_jobs.pop((event.kind, event.key), None), None)

    def _hold_job(self, old: VolcanoJob | KubeflowJob | None, new: VolcanoJob | KubeflowJob | None) -> None:
        """Keeps the uid index of jobs as `old` (the one held under the key before, if any) becomes `new`."""
        if old is not None and self._jobs_by_uid.get(old.metadata.uid) is old:
            del self._jobs_by_uid[old.metadata.uid]
        if new is not None and new.metadata.uid:
            self._jobs_by_uid[new.metadata.uid] = new

    def job_of(self, group: VolcanoPodGroup) -> VolcanoJob | KubeflowJob | None:
        """The Volcano Job or Kubeflow training job that controls the PodGroup (its controller owner
        reference), if one is known."""
        for owner in group.metadata.owner_references:
            if owner.controller:
                return self._jobs_by_uid.get(owner.uid)
        return None

    def volume_needs(self, pod: PodInfo) -> VolumeNeeds:
        """What the pod's claims ask of its placement now (state/volumes.py)."""
        if not pod.obj.spec.volumes:
            return NO_NEEDS
        return needs_of(self.volumes, pod.obj, self.undecodable, lambda claim: self.claim_holder(claim, pod.key),
                        lambda class_name: self.static_spoken(class_name, {pod.key}), pod.key)

    def static_spoken(self, class_name: str, besides: AbstractSet[str] = frozenset()) -> set[str]:
        """The volumes of StorageClass `class_name`, made in advance, that the unbound claims (named by no
        volume yet) of the pods placed already, but those of `besides`, will get (`volumes.spoken_for`, in
        the order of the pods' keys). Derived once per change of a pod or of a volume object."""
        stamp = (self.pod_changes.end, self.volumes.version)
        if self._spoken_stamp != stamp:
            self._spoken_stamp = stamp
            self._spoken.clear()
        by_pod = self._spoken.get(class_name)
        if by_pod is None:
            by_pod = self._spoken[class_name] = self._spoken_for(class_name)
        return {name for key, names in by_pod.items() if key not in besides for name in names}

    def _spoken_for(self, class_name: str) -> dict[str, list[str]]:
        book = self.volumes
        waiting: dict[str, list[str]] = {}
        for claim_key, users in book.users.items():
            claim = book.claims.get(claim_key)
            if (claim is None or claim.spec.volume_name or claim_class(claim) != class_name
                    or book.is_named(claim_key)):
                continue
            for pod_key in users:
                pod = self.pods.get(pod_key)
                if pod is not None and not pod.removed and not pod.terminal and pod.placed_node:
                    waiting.setdefault(pod_key, []).append(claim_key)
        placed: list[tuple[str, str, Mapping[str, str], list[str]]] = []
        for pod_key in sorted(waiting):
            node_name = self.pods[pod_key].placed_node
            node = self.nodes.get(node_name)
            placed.append((pod_key, node_name, node.labels if node is not None else {}, waiting[pod_key]))
        return spoken_for(book, placed)

    def claim_holder(self, claim: str, key: str) -> str:
        """The pod other than `key` that holds `claim` as a ReadWriteOncePod claim is held ("" when none): one
        placed (bound, or assumed by us) that has not finished, else one of ours, pending, with a smaller key
        (one plan would place both: the first may go)."""
        first_pending = ""
        for other_key in sorted(self.volumes.users.get(claim, ())):
            other = self.pods.get(other_key)
            if other_key == key or other is None or other.removed or other.terminal:
                continue
            if other.placed_node:
                return other_key
            if not first_pending and other_key < key and other_key in self.pending:
                first_pending = other_key
        return first_pending

    def _network_topology_upserted(self, event: NetworkTopologyUpserted) -> None:
        self.network_topologies[event.topology.metadata.name] = event.topology
        self.topology.network_topology_upserted(event.topology)

    def _network_topology_deleted(self, event: NetworkTopologyDeleted) -> None:
        if self.network_topologies.pop(event.name, None) is not None:
            self.topology.network_topology_deleted(event.name)

    def _hyper_node_upserted(self, event: HyperNodeUpserted) -> None:
        self.hyper_nodes[event.hyper_node.metadata.name] = event.hyper_node
        self.topology.hypernode_upserted(event.hyper_node)

    def _hyper_node_deleted(self, event: HyperNodeDeleted) -> None:
        if self.hyper_nodes.pop(event.name, None) is not None:
            self.topology.hypernode_deleted(event.name)

    def _kueue_topology_upserted(self, event: KueueTopologyUpserted) -> None:
        self.kueue_topologies[event.topology.metadata.name] = event.topology
        self.topology.kueue_topology_upserted(event.topology)

    def _kueue_topology_deleted(self, event: KueueTopologyDeleted) -> None:
        if self.kueue_topologies.pop(event.name, None) is not None:
            self.topology.kueue_topology_deleted(event.name)

    def _kai_topology_upserted(self, event: KaiTopologyUpserted) -> None:
        self.kai_topologies[event.topology.metadata.name] = event.topology
        self.topology.kai_topology_upserted(event.topology)

    def _kai_topology_deleted(self, event: KaiTopologyDeleted) -> None:
        if self.kai_topologies.pop(event.name, None) is not None:
            self.topology.kai_topology_deleted(event.name)

    def _quota_object(self, event: Event) -> None:
        """An ElasticQuota or Queue: the quota book (state/quota.py) keeps it and rebuilds its trees."""
        self.quotas.object_changed(self, event)

    def _object_undecodable(self, event: ObjectUndecodable) -> None:
        problem = Problem(event.kind, event.key, "", event.problem, UNDECODABLE_OBJECT)
        if self.undecodable.get((event.kind, event.key)) != problem:
            self.undecodable[(event.kind, event.key)] = problem
            self.problems_version += 1
        pod = self.pods.get(event.key) if event.kind == "Pod" else None
        if pod is not None:  # what we know of it is out of date: not placed on that
            pod.broken = _undecodable_note(event.problem)

    # events that could not be folded ------------------------------------

    def _fold_failed(self, event: Event, error: Exception) -> None:
        kind, key = subject_of(event)
        text = str(error)
        message = (f"could not be folded ({type(error).__name__}: {text[:200]}); "
                   f"{'not placed' if kind == 'Pod' else 'ignored'} until an update of it folds cleanly")
        self.fold_failures[(kind, key)] = Problem(kind, key, "", message, INTERNAL_ERROR)
        self.problems_version += 1
        pod = self.pods.get(key) if kind == "Pod" else None
        if pod is not None:
            pod.broken = message
            # Best effort: count it and list it as pending as its object says, so that its gang waits
            # for it with this reason rather than for a member it cannot see.
            with contextlib.suppress(Exception):
                self._settle(pod)

    def _folded_cleanly(self, event: Event) -> None:
        """An update of an object folded: a fold failure or an undecodable version of it is behind us."""
        update = _UPDATE_SUBJECTS.get(type(event))
        if update is None or type(event) is ObjectUndecodable:
            return  # a decision about an object is not an update of it: its failure stands
        kind, key = update(event)
        failed = self.fold_failures.pop((kind, key), None)
        undecodable = self.undecodable.pop((kind, key), None)
        if failed is None and undecodable is None:
            return
        self.problems_version += 1
        pod = self.pods.get(key) if kind == "Pod" else None
        if pod is not None:
            pod.broken = ""

    # accounting -------------------------------------------------------

    def _settle(self, pod: PodInfo) -> None:
        """Move the pod's usage to the node it should be counted on, and keep the indexes true."""
        # The fold's hottest function: locals instead of repeated attribute and property lookups.
        self.pod_changes.add(pod.key)
        obj = pod.obj
        gone = pod.removed or obj.status.phase in TERMINAL_PHASES
        target = "" if gone else (obj.spec.node_name or pod.bound_node or pod.assumed_node)
        target_node = self.nodes.get(target) if target else None
        counted = target if target_node is not None else ""
        if pod.counted_on != counted:
            if pod.counted_on:
                self._uncount(pod)
            if target_node is not None:
                used = target_node.used
                requests = pod.requests
                for name, amount in requests.items():
                    used[name] = used.get(name, 0) + amount
                target_node.pods.add(pod.key)
                self.node_changes.add(target)
                self.topology.usage_noted(target)  # it shares `used`
                if self.label_trees:
                    for tree in self.label_trees.values():
                        tree.usage_noted(target)
            pod.counted_on = counted
        placed_on = pod.placed_on
        if placed_on != target:  # keep `pods_by_node` true (inline: once a bind)
            key = pod.key
            by_node = self.pods_by_node
            if placed_on:
                left = by_node[placed_on]
                left.discard(key)
                if not left:
                    del by_node[placed_on]
            if target:
                joined = by_node.get(target)
                if joined is None:
                    by_node[target] = {key}
                else:
                    joined.add(key)
            pod.placed_on = target
        if pod.nominated_node or pod.nominated_on:
            if obj.spec.node_name or pod.bound_node:
                pod.nominated_node = ""  # a bound pod needs no reservation
            self._settle_nomination(pod)
        # Same rule as PodInfo.pending: a pod with a target is bound or assumed, hence not pending.
        if (pod.ours and not target and not gone and obj.metadata.deletion_timestamp is None
                and not obj.spec.scheduling_gates):
            self.pending.add(pod.key)
        elif self.pending:
            self.pending.discard(pod.key)

    def _uncount(self, pod: PodInfo) -> None:
        if not pod.counted_on:
            return
        node = self.nodes.get(pod.counted_on)
        if node is not None:
            add_into(node.used, pod.requests, -1)
            node.pods.discard(pod.key)
            self.node_changes.add(node.name)
            self.topology.usage_noted(node.name)
            for tree in self.label_trees.values():
                tree.usage_noted(node.name)
        pod.counted_on = ""

    def _settle_nomination(self, pod: PodInfo) -> None:
        target = pod.nominated_node if pod.nominated_node in self.nodes else ""
        if pod.nominated_on != target:
            if pod.nominated_on:
                old = self.nodes.get(pod.nominated_on)
                if old is not None:
                    old.nominated.pop(pod.key, None)
                    self.node_changes.add(pod.nominated_on)
            if target:
                self.nodes[target].nominated[pod.key] = pod
                self.node_changes.add(target)
                self.nominating.add(pod.key)
            else:
                self.nominating.discard(pod.key)
            pod.nominated_on = target
        if pod.nominated_node and not target:
            self._await_node(pod.key, pod.nominated_node)
        elif self._awaiting_node:
            self._await_node(pod.key, "")

    def _await_node(self, key: str, node: str) -> None:
        """Note that the nomination of pod `key` names `node`, which is not known ("": it waits for none)."""
        before = self._awaiting_node.pop(key, None)
        if before is not None:
            leave(self._awaited, before, key)
        if node:
            self._awaiting_node[key] = node
            self._awaited.setdefault(node, set()).add(key)

    def _set_problems(self, kind: str, key: str, problems: list[Problem]) -> None:
        current = self.problems.get((kind, key))
        if problems:
            if current != problems:
                self.problems[(kind, key)] = problems
                self.problems_version += 1
        elif current is not None:
            del self.problems[(kind, key)]
            self.problems_version += 1

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> bytes:
        return _snapshot_encoder.encode(self.to_snapshot())

    def to_snapshot(self) -> StateSnapshot:
        pods = [self.pods[key] for key in sorted(self.pods)]
        return StateSnapshot(
            version=SNAPSHOT_VERSION,
            scheduler_name=self.scheduler_name,
            kai_node_pool_label=self.kai_node_pool_label,
            last_seq=self.last_seq,
            last_time=self.last_time,
            node_table=node_table(self.nodes[name].obj for name in sorted(self.nodes)),
            pod_table=pod_table((p.obj, p.first_seen, p.bound_at, p.eviction_requested, p.bound_node) for p in pods),
            pod_groups=[self.pod_groups[k] for k in sorted(self.pod_groups)],
            volcano_pod_groups=[self.volcano_pod_groups[k] for k in sorted(self.volcano_pod_groups)],
            scheduler_plugins_pod_groups=[self.scheduler_plugins_pod_groups[k]
                                          for k in sorted(self.scheduler_plugins_pod_groups)],
            kube_pod_groups=[self.kube_pod_groups[k] for k in sorted(self.kube_pod_groups)],
            composite_pod_groups=[self.composite_pod_groups[k] for k in sorted(self.composite_pod_groups)],
            workloads=[self.workloads[k] for k in sorted(self.workloads)],
            network_topologies=[self.network_topologies[k] for k in sorted(self.network_topologies)],
            hyper_nodes=[self.hyper_nodes[k] for k in sorted(self.hyper_nodes)],
            kueue_topologies=[self.kueue_topologies[k] for k in sorted(self.kueue_topologies)],
            kai_topologies=[self.kai_topologies[k] for k in sorted(self.kai_topologies)],
            kai_pod_groups=[self.kai_pod_groups[k] for k in sorted(self.kai_pod_groups)],
            priority_classes=[self.priority_classes[k] for k in sorted(self.priority_classes)],
            assumed=[DecisionRecord(p.key, p.uid, p.assumed_node, p.gang) for p in pods if p.assumed_node],
            nominated=[DecisionRecord(p.key, p.uid, p.nominated_node, p.gang, p.priority)
                       for p in pods if p.nominated_node],
            gangs=[GangRecord(g.key, g.first_seen, g.attempts, g.last_reason, g.timed_out, g.held)
                   for g in (self.gangs[k] for k in sorted(self.gangs))],
            undecodable=[self.undecodable[k] for k in sorted(self.undecodable)],
            fold_failures=[self.fold_failures[k] for k in sorted(self.fold_failures)],
            elastic_quotas=[self.quotas.elastic_quotas[k] for k in sorted(self.quotas.elastic_quotas)],
            capacity_quotas=[self.quotas.capacity_quotas[k] for k in sorted(self.quotas.capacity_quotas)],
            queues=[self.quotas.queues[k] for k in sorted(self.quotas.queues)],
            kai_queues=[self.quotas.kai_queues[k] for k in sorted(self.quotas.kai_queues)],
            storage_classes=[self.volumes.classes[k] for k in sorted(self.volumes.classes)],
            persistent_volumes=[self.volumes.volumes[k] for k in sorted(self.volumes.volumes)],
            claims=[self.volumes.claims[k] for k in sorted(self.volumes.claims)],
            csi_nodes=[self.volumes.csi_nodes[k] for k in sorted(self.volumes.csi_nodes)],
            budgets=[budget for namespace in sorted(self.budgets)
                     for _, budget in sorted(self.budgets[namespace].items())],
            volcano_jobs=[self.volcano_jobs[k] for k in sorted(self.volcano_jobs)],
            kubeflow_jobs=[self.kubeflow_jobs[k] for k in sorted(self.kubeflow_jobs)],
        )

    @classmethod
    def restore(cls, payload: bytes | memoryview) -> ClusterState:
        return cls.from_snapshot(decode_state_snapshot(payload))

    @classmethod
    def from_snapshot(cls, snap: StateSnapshot | StateSnapshotV2 | StateSnapshotV1) -> ClusterState:
        if snap.version not in (SNAPSHOT_VERSION, SNAPSHOT_VERSION_V2, SNAPSHOT_VERSION_V1):
            raise ValueError(f"snapshot version {snap.version} is not one of {SNAPSHOT_VERSION_V1} to "
                             f"{SNAPSHOT_VERSION}")
        state = cls(snap.scheduler_name, snap.kai_node_pool_label)
        with state.deferring_families():  # a hierarchy is read once, not once per PodGroup of it
            state._fill_from(snap)
        return state

    def _fill_from(self, snap: StateSnapshot | StateSnapshotV2 | StateSnapshotV1) -> None:
        """The snapshot's objects and decisions folded into this new state (`from_snapshot`)."""
        for priority_class in snap.priority_classes:
            self.apply(PriorityClassUpserted(priority_class=priority_class))
        for topology in snap.network_topologies:
            self.apply(NetworkTopologyUpserted(topology=topology))
        for hyper_node in snap.hyper_nodes:
            self.apply(HyperNodeUpserted(hyper_node=hyper_node))
        for kueue_topology in snap.kueue_topologies:
            self.apply(KueueTopologyUpserted(topology=kueue_topology))
        for kai_topology in snap.kai_topologies:
            self.apply(KaiTopologyUpserted(topology=kai_topology))
        for quota in snap.elastic_quotas:
            self.apply(ElasticQuotaUpserted(quota=quota))
        for capacity_quota in snap.capacity_quotas:
            self.apply(CapacityElasticQuotaUpserted(quota=capacity_quota))
        for queue in snap.queues:
            self.apply(QueueUpserted(queue=queue))
        for kai_queue in snap.kai_queues:
            self.apply(KaiQueueUpserted(queue=kai_queue))
        for storage_class in snap.storage_classes:
            self.apply(StorageClassUpserted(storage_class=storage_class))
        for volume in snap.persistent_volumes:
            self.apply(VolumeUpserted(volume=volume))
        for claim in snap.claims:
            self.apply(ClaimUpserted(claim=claim))
        for csi_node in snap.csi_nodes:
            self.apply(CSINodeUpserted(csi_node=csi_node))
        for budget in snap.budgets:
            self.apply(BudgetUpserted(budget=budget))
        for job in snap.volcano_jobs:
            self.apply(VolcanoJobUpserted(job=job))
        for kubeflow_job in snap.kubeflow_jobs:
            self.apply(KubeflowJobUpserted(job=kubeflow_job))
        if isinstance(snap, StateSnapshot):
            try:
                for node in nodes_of(snap.node_table, self._compactor):
                    try:
                        self._hold_node(node)
                    except Exception as error:  # as `apply` does: the one node is marked, the restore goes on
                        self._fold_failed(NodeUpserted(node=node), error)
            except IndexError as error:  # refused like a snapshot that does not decode (the log recovers)
                raise ValueError(f"snapshot's node table has a number pointing past its tables ({error})") from error
        else:
            for node in snap.nodes:
                self.apply(NodeUpserted(node=node))
        for group in snap.pod_groups:
            self.apply(PodGroupUpserted(pod_group=group))
        for vgroup in snap.volcano_pod_groups:
            self.apply(VolcanoPodGroupUpserted(pod_group=vgroup))
        for xgroup in snap.scheduler_plugins_pod_groups:
            self.apply(SchedulerPluginsPodGroupUpserted(pod_group=xgroup))
        for kgroup in snap.kube_pod_groups:
            self.apply(KubePodGroupUpserted(pod_group=kgroup))
        for composite in snap.composite_pod_groups:
            self.apply(CompositePodGroupUpserted(composite=composite))
        for workload in snap.workloads:
            self.apply(WorkloadUpserted(workload=workload))
        for kai_group in snap.kai_pod_groups:
            self.apply(KaiPodGroupUpserted(pod_group=kai_group))
        if isinstance(snap, StateSnapshotV1):
            for record in snap.pods:
                self._restore_pod(record.pod, record.first_seen, record.bound_at, record.eviction_requested,
                                   record.bound_node)
        else:
            table = snap.pod_table if isinstance(snap, StateSnapshot) else columns_of_rows(snap.pod_table)
            try:
                self._restore_pod_table(table)
            except IndexError as error:  # refused like a snapshot that does not decode (the log recovers)
                raise ValueError(f"snapshot's pod table has a number pointing past its tables ({error})") from error
        for decision in snap.assumed:
            self.apply(PodAssumed(pod=decision.pod, uid=decision.uid, node=decision.node, gang=decision.gang))
        for decision in snap.nominated:
            self.apply(PodNominated(pod=decision.pod, uid=decision.uid, node=decision.node, gang=decision.gang,
                                     priority=decision.priority))
        for record_gang in snap.gangs:
            gang = self.gangs.get(record_gang.key)
            if gang is None:
                gang = self.gangs[record_gang.key] = GangInfo(record_gang.key, record_gang.first_seen)
            gang.first_seen = record_gang.first_seen
            gang.attempts = record_gang.attempts
            gang.last_reason = record_gang.last_reason
            gang.held = record_gang.held
            gang.timed_out = record_gang.timed_out
        for problem in snap.undecodable:
            self.undecodable[(problem.kind, problem.key)] = problem
            stale = self.pods.get(problem.key) if problem.kind == "Pod" else None
            if stale is not None:
                stale.broken = _undecodable_note(problem.message)
        # The snapshot's own failures stand as they were recorded (an object that failed to fold fails again
        # here, in other words); one that failed only now (this code differs from the code that wrote the
        # snapshot) is kept too, so it is reported, not lost.
        failed_now = dict(self.fold_failures)
        self.fold_failures.clear()
        for problem in snap.fold_failures:
            self.fold_failures[(problem.kind, problem.key)] = problem
            failed = self.pods.get(problem.key) if problem.kind == "Pod" else None
            if failed is not None:
                failed.broken = problem.message
        for subject, problem in failed_now.items():
            self.fold_failures.setdefault(subject, problem)
        self.last_seq = snap.last_seq
        self.last_time = snap.last_time

    def _restore_pod(self, obj: Pod, first_seen: float, bound_at: float | None, eviction_requested: bool,
                     bound_node: str) -> None:
        """One pod of a snapshot, folded as an update of it (then its record's own fields)."""
        try:
            self._upsert_pod(obj, first_seen, bound_node)
        except Exception as error:  # as `apply` does: the one pod is marked, the restore goes on
            self._fold_failed(PodUpserted(pod=obj, time=first_seen), error)
        pod = self.pods[object_key(obj.metadata.namespace, obj.metadata.name)]
        pod.first_seen = first_seen
        pod.bound_at = bound_at
        pod.eviction_requested = eviction_requested
        if self.quotas.active:  # folded without `apply`: the quota book counts it here
            self.quotas.settle(self, pod.key)

    def _restore_pod_table(self, table: PodTable) -> None:
        """The pods of a snapshot's tables, in bulk: what a pod derives is computed once per distinct head
        and spec (pods with problems each on their own), and the indexes and usage are built once at the
        end, per node rather than per pod. Gives what `_restore_pod` of each would (the property tests
        compare). With quotas the quota book settles pod by pod, so those go the per-pod way."""
        if self.quotas.active:
            for entry in pods_of(table, self._compactor):
                self._restore_pod(*entry)
            return
        pods, pending, gangs = self.pods, self.pending, self.gangs
        heads, specs, statuses = shared_parts(table, self._compactor)
        # Per (head, spec), numbered head * len(specs) + spec: its derivation, and whether its annotations or
        # labels may define a gang.
        shapes: dict[int, tuple[_Derivation, bool]] = {}
        spec_count = len(specs)
        # Per (head without labels, spec): the derivation of a pod of them without problems. A gang's pods have
        # a head of their own (their labels name the gang), and the labels decide only the gang (and
        # preemptability when they say so): the heads of many gangs derive alike but for it, as `_add_new_pod`
        # derives the pods of a new head.
        unlabelled: dict[tuple[str, str, str, int, int], _Derivation] = {}
        # `_settle` of each, gathered: the pods bound to each node are counted at the end, node by node, and
        # those holding a nomination settled then.
        on_node: dict[str, list[PodInfo]] = {}
        nominating: list[PodInfo] = []
        for (name, uid, version, head_number, spec_number, status_number, first_seen, bound_at, bound_node,
             timestamp, grace, generation) in columns(table):
            head, spec, status = heads[head_number], specs[spec_number], statuses[status_number]
            namespace = head.namespace
            # `pod_of`, inline: this loop runs once per pod of the cluster
            obj = Pod(api_version=head.api_version, kind=head.kind, metadata=ObjectMeta(
                name=name, namespace=namespace, uid=uid, resource_version=version, generation=generation,
                labels=head.labels, annotations=head.annotations, deletion_timestamp=timestamp,
                deletion_grace_period_seconds=grace),
                spec=spec, status=status)
            key = f"{namespace}/{name}" if namespace else name
            if key in pods:
                known = None
            else:
                shape = head_number * spec_count + spec_number
                known = shapes.get(shape)
                if known is None:
                    known = self._restored_shape(obj, key, spec_number, unlabelled)
                    if known is not None and not known[0][8]:  # problems name their pod: theirs only
                        shapes[shape] = known
            if known is None:
                self._restore_pod(obj, first_seen, bound_at, False, bound_node)
                continue
            derived, defines = known
            # `_hold_new_pod`, inline
            pod = pods[key] = PodInfo(key, obj, first_seen, derived)
            if spec.volumes:
                self.volumes.pod_held(obj, key)
            gang_key = derived[7]
            if gang_key:
                gang = gangs.get(gang_key)
                if gang is None or defines or gang.definer == key:
                    self._join_gang(pod, gang_key)
                else:
                    pod.gang = gang_key
                    gang.members.add(key)
                if gang is not None and gang.job_priority is not None:
                    pod.priority = gang.job_priority
            if derived[8]:
                self._set_problems("Pod", key, derived[8])
            pod.bound_at = bound_at
            target = spec.node_name
            if not target:
                if bound_node:
                    target = pod.bound_node = bound_node
                elif status.nominated_node_name:
                    pod.nominated_node = status.nominated_node_name
                    nominating.append(pod)
            if status.phase not in TERMINAL_PHASES:
                if target:
                    placed = on_node.get(target)
                    if placed is None:
                        on_node[target] = [pod]
                    else:
                        placed.append(pod)
                elif pod.ours and timestamp is None and not spec.scheduling_gates:
                    pending.add(key)
        for number in table.evicting:  # a plain mark, read by nothing the restore does
            namespace, name = heads[table.head_of(number)].namespace, table.names[number]
            evicted = pods.get(f"{namespace}/{name}" if namespace else name)
            if evicted is not None:  # None: its fold failed (marked so)
                evicted.eviction_requested = True
        for pod in nominating:
            self._settle_nomination(pod)
        for target, placed in on_node.items():
            self._count_group(target, placed)

    def _restored_shape(self, obj: Pod, key: str, spec_number: int,
                        unlabelled: dict[tuple[str, str, str, int, int], _Derivation],
                        ) -> tuple[_Derivation, bool] | None:
        """The derivation of a snapshot's pod of a shape not met yet, and whether its annotations or labels
        may define a gang; None when it cannot be derived (the per-pod way marks it). Taken from a pod of the
        same head without labels and spec when there is one (`unlabelled`, filled here), as `_add_new_pod`
        takes it."""
        meta = obj.metadata
        labels, annotations = meta.labels, meta.annotations
        defines = GANG_MIN_AVAILABLE_ANNOTATION in annotations or LIGHTWEIGHT_MIN_AVAILABLE_LABEL in labels
        alike = (obj.api_version, obj.kind, meta.namespace, id(annotations), spec_number)
        known = unlabelled.get(alike) if not _labels_derive(labels) else None
        if known is not None:
            gang_key, gang_problems = membership(obj, key)
            if not gang_problems:
                return (*known[:7], gang_key, []), defines
        try:
            derived = self._derivation(obj, key)
        except Exception:  # the per-pod way marks it
            return None
        if not derived[8] and not _labels_derive(labels):
            unlabelled[alike] = derived
        return derived, defines

    def _count_group(self, target: str, placed: list[PodInfo]) -> None:
        """`_settle` of pods counted nowhere and placed nowhere that belong on `target` (bound there, not
        terminal, holding no nomination), at once: they join its sets together, and its usage grows by each
        run of pods asking the same (shared) requests vector at once, in the order `_settle` one by one would
        grow it (a node's pods mostly ask one vector: one run). `placed` is not empty."""
        keys = [pod.key for pod in placed]
        indexed = self.pods_by_node.get(target)
        if indexed is None:
            self.pods_by_node[target] = set(keys)
        else:
            indexed.update(keys)
        node = self.nodes.get(target)
        if node is None:
            for pod in placed:
                pod.placed_on = target
            return
        node.pods.update(keys)
        self.node_changes.add(target)
        used = node.used
        requests, count = placed[0].requests, 0
        for pod in placed:
            pod.placed_on = pod.counted_on = target
            if pod.requests is not requests:
                for name, amount in requests.items():
                    used[name] = used.get(name, 0) + amount * count
                requests, count = pod.requests, 0
            count += 1
        for name, amount in requests.items():
            used[name] = used.get(name, 0) + amount * count
        self.topology.usage_noted(target)
        for tree in self.label_trees.values():
            tree.usage_noted(target)

    def canonical(self) -> bytes:
        """A byte string equal for two states exactly when they hold the same knowledge."""
        derived = {
            # A resource used and released leaves a 0 entry behind; that is the same knowledge as none.
            # Amounts are spelled out: a node running pods of huge requests can use more than 2^64 milli-units.
            "used": {name: sorted((k, str(v)) for k, v in info.used.items() if v)
                     for name, info in sorted(self.nodes.items())},
            "pods_on": {name: sorted(info.pods) for name, info in sorted(self.nodes.items())},
            "pending": sorted(self.pending),
            "nominating": sorted(self.nominating),
            "members": {key: sorted(g.members) for key, g in sorted(self.gangs.items())},
            "priorities": {key: (p.priority, p.preemption_policy) for key, p in sorted(self.pods.items())},
            "tasks": {key: p.task for key, p in sorted(self.pods.items()) if p.task},  # Volcano's, KAI's leaf
            "problems": [str(problem) for problem in self.all_problems()],
            "quotas": self.quotas.canonical(),
        }
        return self.snapshot() + msgspec.msgpack.encode(derived)


def _parent_of(group: KubePodGroup | CompositePodGroup) -> str:
    """The key of the CompositePodGroup a group names as its parent ("" for none)."""
    return parent_key(group.metadata.namespace, group.spec.parent_composite_pod_group_name)


def _unlink(edges: dict[str, set[str]], parent: str, child: str) -> None:
    children = edges.get(parent)
    if children is not None:
        children.discard(child)
        if not children:
            del edges[parent]


def _parse_resources(raw: Mapping[str, str], kind: str, key: str, field: str) -> tuple[Resources, list[Problem]]:
    parsed: Resources = {}
    problems: list[Problem] = []
    for name, text in raw.items():
        try:
            parsed[name] = parse_quantity(text)
        except QuantityError as error:
            problems.append(Problem(kind, key, f"{field}[{name}]", f"{error}; counted as 0", INVALID_QUANTITY))
    return parsed, problems


def _undecodable_note(problem: str) -> str:
    return f"its latest version cannot be decoded ({problem}); not placed until one can"


def _add_requests(total: Resources, raw: Mapping[str, str], key: str, problems: list[Problem], field: str,
                  index: int = -1, where_in: str = ".resources.requests") -> None:
    for name, text in raw.items():
        amount = QUANTITY_CACHE.get(text)
        if amount is None:
            try:
                amount = parse_quantity(text)
            except QuantityError as error:
                where = f"{field}[{index}]{where_in}" if index >= 0 else field
                problems.append(Problem("Pod", key, f"{where}[{name}]", f"{error}; the pod is not placed",
                                        INVALID_QUANTITY))
                continue
        total[name] = total.get(name, 0) + amount


# One container's requests as one of kube's three views of them reads it: (the requests or None, the
# field they come from and the container's index, for a problem's name).
_ContainerRequests = Callable[[Container, str, int], tuple[Mapping[str, str] | None, str, int, str]]


def _spec_requests(container: Container, field: str, index: int) -> tuple[Mapping[str, str] | None, str, int, str]:
    return container.resources.requests, field, index, ".resources.requests"


def _aggregate_requests(spec: PodSpec, key: str, problems: list[Problem],
                        requested: _ContainerRequests = _spec_requests) -> Resources:
    """The containers' requests as kube-scheduler and the kubelet's admission sum them (KEP-753, native
    sidecars): the containers and the sidecars (init containers with restartPolicy Always) run together,
    so their requests add up; each other init container runs alone beside the sidecars declared before
    it, so it needs its own requests plus theirs; the pod takes the larger of the two per resource.
    `requested` reads each container's requests (the spec's, or the kubelet's figures of a resize)."""
    total: Resources = {}
    for index, container in enumerate(spec.containers):
        raw, field, at, where_in = requested(container, "spec.containers", index)
        if raw:
            _add_requests(total, raw, key, problems, field, at, where_in)
    if spec.init_containers:
        sidecars: Resources = {}  # the sidecars started so far
        starting: Resources = {}  # the most any moment of the pod's start needs
        for index, container in enumerate(spec.init_containers):
            alone: Resources = {}
            raw, field, at, where_in = requested(container, "spec.initContainers", index)
            if raw:
                _add_requests(alone, raw, key, problems, field, at, where_in)
            if container.restart_policy == SIDECAR_RESTART_POLICY:
                add_into(total, alone)
                add_into(sidecars, alone)
                alone = sidecars
            elif sidecars:
                add_into(alone, sidecars)
            for name, amount in alone.items():
                if amount > starting.get(name, 0):
                    starting[name] = amount
        for name, amount in starting.items():
            if amount > total.get(name, 0):
                total[name] = amount
    return total


def _resized_requests(obj: Pod, spec_total: Resources, key: str, problems: list[Problem]) -> Resources:
    """The containers' requests of a pod whose status reports a resize (`events.objects.resize_status`),
    as kube-scheduler counts them with in-place resize on (component-helpers' AggregateContainerRequests
    with UseStatusResources): the larger, per resource, of the spec's, the kubelet's allocation and what
    it applied (each summed as `_aggregate_requests` sums the spec's), so a pod resized down holds its
    old requests until the kubelet has applied the new ones, and a resize up waiting for room holds
    the new ones already. A resize the kubelet found infeasible is counted at its allocation and applied
    figures alone. A container the status does not report counts its spec's requests in both (none in
    either with an infeasible resize)."""
    status, spec = obj.status, obj.spec
    reported: dict[str, tuple[ContainerResourceStatus, str, int]] = {}
    for field, statuses in (("status.initContainerStatuses", status.init_container_statuses),
                            ("status.containerStatuses", status.container_statuses)):
        for index, entry in enumerate(statuses):
            reported[entry.name] = (entry, field, index)  # the containers' statuses win, as kube looks them up
    infeasible = resize_infeasible(status)

    def allocated(container: Container, field: str, index: int) -> tuple[Mapping[str, str] | None, str, int, str]:
        found = reported.get(container.name)
        if found is not None and found[0].allocated_resources is not None:
            return found[0].allocated_resources, found[1], found[2], ".allocatedResources"
        return (None if infeasible else container.resources.requests), field, index, ".resources.requests"

    def applied(container: Container, field: str, index: int) -> tuple[Mapping[str, str] | None, str, int, str]:
        found = reported.get(container.name)
        if found is not None:
            entry, status_field, at = found
            if entry.resources is not None and entry.resources.requests:
                return entry.resources.requests, status_field, at, ".resources.requests"
        return allocated(container, field, index)

    views = [_aggregate_requests(spec, key, problems, allocated), _aggregate_requests(spec, key, problems, applied)]
    if not infeasible:
        views.append(spec_total)
    total: Resources = {}
    for view in views:
        for name, amount in view.items():
            if amount > total.get(name, 0):
                total[name] = amount
    return total


def _resizing(status: PodStatus) -> bool:
    """Whether the pod's status carries a resize's figures (`events.objects.resize_status` keeps them only
    while they differ from the spec's requests)."""
    return bool(status.container_statuses or status.init_container_statuses)


def _released(before: Resources, after: Resources) -> bool:
    """Whether `after` asks for less of some resource than `before` did."""
    return any(amount > after.get(name, 0) for name, amount in before.items())


def _pod_requests(obj: Pod, key: str, problems: list[Problem]) -> Resources:
    """What the pod takes of a node, per resource, as kube-scheduler and the kubelet's admission count it:
    its containers' (`_aggregate_requests`; with a resize under way, `_resized_requests`); pod-level
    requests (KEP-2837) of cpu, memory and hugepages replace that figure for their resource; plus
    overhead and one pod slot."""
    spec = obj.spec
    total = _aggregate_requests(spec, key, problems)
    if obj.status.container_statuses or obj.status.init_container_statuses:
        total = _resized_requests(obj, total, key, problems)
    if spec.resources is not None and spec.resources.requests:
        pod_level: Resources = {}
        _add_requests(pod_level, {name: text for name, text in spec.resources.requests.items()
                                  if pod_level_resource(name)}, key, problems, "spec.resources.requests")
        total.update(pod_level)
    if spec.overhead:
        _add_requests(total, spec.overhead, key, problems, "spec.overhead")
    total["pods"] = total.get("pods", 0) + POD_SLOT_MILLI
    # Host ports, as kube-scheduler's NodePorts reads them: the containers' (not the init containers').
    for container in spec.containers:
        for port in container.ports:
            if port.host_port > 0:
                total[host_port_resource(port.protocol, port.host_port)] = MILLI
    return total


class _RequestsMemo:
    """One shared requests vector per distinct single-container request: a cluster's pods ask for a few
    shapes, so 100,000 pods hold a handful of dicts instead of 100,000 (and skip parsing them again).
    Only vectors that parsed without a problem are shared; the vectors are never mutated."""

    __slots__ = ("vectors",)

    LIMIT = 10_000

    def __init__(self) -> None:
        self.vectors: dict[tuple[object, ...], Resources] = {}

    def of(self, obj: Pod, key: str, problems: list[Problem]) -> Resources:
        spec, status = obj.spec, obj.status
        if (len(spec.containers) != 1 or spec.init_containers or spec.overhead or spec.resources is not None
                or status.container_statuses or status.init_container_statuses):
            return _pod_requests(obj, key, problems)
        container = spec.containers[0]
        memo_key: tuple[object, ...] = tuple(container.resources.requests.items())
        if container.ports:  # host ports join the vector (and containers differing only in ports are rare)
            memo_key = (*memo_key, tuple(container.ports))
        shared = self.vectors.get(memo_key)
        if shared is not None:
            return shared
        found = len(problems)
        vector = _pod_requests(obj, key, problems)
        if len(problems) == found and len(self.vectors) < self.LIMIT:
            self.vectors[memo_key] = vector
        return vector


def _meta_key(meta: ObjectMeta) -> str:
    return object_key(meta.namespace, meta.name)


def _only(labels: Mapping[str, str], key: str) -> dict[str, str]:
    """The labels a label tree is built from (one, or a hierarchy's joined by LABEL_PATH_SEPARATOR), so that other
    relabels never rebuild it."""
    if LABEL_PATH_SEPARATOR not in key:
        value = labels.get(key)
        return {} if value is None else {key: value}
    # A hierarchy's: each value qualified by those above it (rack-a of block b0 is "b0/rack-a"), as its domains
    # nest (a rack's pods share one value of the rack label and of the block's); a node lacking a key is in no
    # domain of it nor below.
    found: dict[str, str] = {}
    path = ""
    for name in key.split(LABEL_PATH_SEPARATOR):
        value = labels.get(name)
        if value is None:
            break
        path = f"{path}/{value}" if path else value
        found[name] = path
    return found


# What each event is about, as (kind, key); the first group are updates of the object itself.
_UPDATE_SUBJECTS: dict[type, Callable[[Any], tuple[str, str]]] = {
    NodeUpserted: lambda e: ("Node", e.node.metadata.name),
    NodeDeleted: lambda e: ("Node", e.name),
    PodUpserted: lambda e: ("Pod", _meta_key(e.pod.metadata)),
    PodDeleted: lambda e: ("Pod", e.key),
    PodGroupUpserted: lambda e: ("PodGroup", _meta_key(e.pod_group.metadata)),
    PodGroupDeleted: lambda e: ("PodGroup", e.key),
    VolcanoPodGroupUpserted: lambda e: ("VolcanoPodGroup", _meta_key(e.pod_group.metadata)),
    VolcanoPodGroupDeleted: lambda e: ("VolcanoPodGroup", e.key),
    SchedulerPluginsPodGroupUpserted: lambda e: (SCHEDULER_PLUGINS_PROBLEM, _meta_key(e.pod_group.metadata)),
    SchedulerPluginsPodGroupDeleted: lambda e: (SCHEDULER_PLUGINS_PROBLEM, e.key),
    KubePodGroupUpserted: lambda e: (KUBE_POD_GROUP_PROBLEM, _meta_key(e.pod_group.metadata)),
    KubePodGroupDeleted: lambda e: (KUBE_POD_GROUP_PROBLEM, e.key),
    CompositePodGroupUpserted: lambda e: (COMPOSITE_PROBLEM, _meta_key(e.composite.metadata)),
    CompositePodGroupDeleted: lambda e: (COMPOSITE_PROBLEM, e.key),
    KaiPodGroupUpserted: lambda e: (KAI_POD_GROUP_PROBLEM, _meta_key(e.pod_group.metadata)),
    KaiPodGroupDeleted: lambda e: (KAI_POD_GROUP_PROBLEM, e.key),
    WorkloadUpserted: lambda e: (WORKLOAD_PROBLEM, _meta_key(e.workload.metadata)),
    WorkloadDeleted: lambda e: (WORKLOAD_PROBLEM, e.key),
    NetworkTopologyUpserted: lambda e: ("ClusterNetworkTopology", e.topology.metadata.name),
    NetworkTopologyDeleted: lambda e: ("ClusterNetworkTopology", e.name),
    HyperNodeUpserted: lambda e: ("HyperNode", e.hyper_node.metadata.name),
    HyperNodeDeleted: lambda e: ("HyperNode", e.name),
    KueueTopologyUpserted: lambda e: (KUEUE_TOPOLOGY_KIND, e.topology.metadata.name),
    KueueTopologyDeleted: lambda e: (KUEUE_TOPOLOGY_KIND, e.name),
    KaiTopologyUpserted: lambda e: (KAI_TOPOLOGY_KIND, e.topology.metadata.name),
    KaiTopologyDeleted: lambda e: (KAI_TOPOLOGY_KIND, e.name),
    PriorityClassUpserted: lambda e: ("PriorityClass", e.priority_class.metadata.name),
    PriorityClassDeleted: lambda e: ("PriorityClass", e.name),
    ObjectUndecodable: lambda e: (e.kind, e.key),
    ElasticQuotaUpserted: lambda e: ("ElasticQuota", _meta_key(e.quota.metadata)),
    ElasticQuotaDeleted: lambda e: ("ElasticQuota", e.key),
    CapacityElasticQuotaUpserted: lambda e: ("CapacityElasticQuota", _meta_key(e.quota.metadata)),
    CapacityElasticQuotaDeleted: lambda e: ("CapacityElasticQuota", e.key),
    QueueUpserted: lambda e: ("Queue", e.queue.metadata.name),
    QueueDeleted: lambda e: ("Queue", e.name),
    KaiQueueUpserted: lambda e: (KAI_QUEUE_KIND, e.queue.metadata.name),
    KaiQueueDeleted: lambda e: (KAI_QUEUE_KIND, e.name),
    ClaimUpserted: lambda e: (CLAIM_KIND, _meta_key(e.claim.metadata)),
    ClaimDeleted: lambda e: (CLAIM_KIND, e.key),
    VolumeUpserted: lambda e: ("PersistentVolume", e.volume.metadata.name),
    VolumeDeleted: lambda e: ("PersistentVolume", e.name),
    StorageClassUpserted: lambda e: ("StorageClass", e.storage_class.metadata.name),
    StorageClassDeleted: lambda e: ("StorageClass", e.name),
    CSINodeUpserted: lambda e: (CSI_NODE_KIND, e.csi_node.metadata.name),
    CSINodeDeleted: lambda e: (CSI_NODE_KIND, e.name),
    BudgetUpserted: lambda e: ("PodDisruptionBudget", _meta_key(e.budget.metadata)),
    BudgetDeleted: lambda e: ("PodDisruptionBudget", e.key),
    VolcanoJobUpserted: lambda e: (VOLCANO_JOB_KIND, _meta_key(e.job.metadata)),
    VolcanoJobDeleted: lambda e: (VOLCANO_JOB_KIND, e.key),
    KubeflowJobUpserted: lambda e: (e.job.kind, _meta_key(e.job.metadata)),
    KubeflowJobDeleted: lambda e: (e.kind, e.key),
}


def _held_pod(state: ClusterState, _kind: str, key: str) -> Pod | None:
    pod = state.pods.get(key)
    if pod is None or pod.removed or pod.broken:
        return None
    obj = pod.obj
    # What `_upsert_pod` does with an unchanged object besides holding it: a bound pod drops the node we
    # assumed or bound it to, and the API's nominatedNodeName replaces a nomination of ours made since.
    # Folding such a pod again would change it: it is not held unchanged.
    if obj.spec.node_name and (pod.bound_at is None or pod.assumed_node or pod.bound_node):
        return None
    nominated = obj.status.nominated_node_name
    if nominated and nominated != pod.nominated_node and not pod.node_name:
        return None
    return obj


def _held_node(state: ClusterState, _kind: str, name: str) -> Node | None:
    node = state.nodes.get(name)
    return node.obj if node is not None else None


# Per kind of upsert: the version of its object the state holds (by the key `_UPDATE_SUBJECTS` gives), and
# the object the upsert carries (`ClusterState.holds_unchanged`).
_HELD_OBJECTS: dict[type, tuple[Callable[[ClusterState, str, str], object], Callable[[Any], object]]] = {
    NodeUpserted: (_held_node, lambda e: e.node),
    PodUpserted: (_held_pod, lambda e: e.pod),
    PodGroupUpserted: (lambda s, _, k: s.pod_groups.get(k), lambda e: e.pod_group),
    VolcanoPodGroupUpserted: (lambda s, _, k: s.volcano_pod_groups.get(k), lambda e: e.pod_group),
    SchedulerPluginsPodGroupUpserted: (lambda s, _, k: s.scheduler_plugins_pod_groups.get(k), lambda e: e.pod_group),
    KubePodGroupUpserted: (lambda s, _, k: s.kube_pod_groups.get(k), lambda e: e.pod_group),
    CompositePodGroupUpserted: (lambda s, _, k: s.composite_pod_groups.get(k), lambda e: e.composite),
    KaiPodGroupUpserted: (lambda s, _, k: s.kai_pod_groups.get(k), lambda e: e.pod_group),
    WorkloadUpserted: (lambda s, _, k: s.workloads.get(k), lambda e: e.workload),
    NetworkTopologyUpserted: (lambda s, _, k: s.network_topologies.get(k), lambda e: e.topology),
    HyperNodeUpserted: (lambda s, _, k: s.hyper_nodes.get(k), lambda e: e.hyper_node),
    KueueTopologyUpserted: (lambda s, _, k: s.kueue_topologies.get(k), lambda e: e.topology),
    KaiTopologyUpserted: (lambda s, _, k: s.kai_topologies.get(k), lambda e: e.topology),
    PriorityClassUpserted: (lambda s, _, k: s.priority_classes.get(k), lambda e: e.priority_class),
    ElasticQuotaUpserted: (lambda s, _, k: s.quotas.elastic_quotas.get(k), lambda e: e.quota),
    CapacityElasticQuotaUpserted: (lambda s, _, k: s.quotas.capacity_quotas.get(k), lambda e: e.quota),
    QueueUpserted: (lambda s, _, k: s.quotas.queues.get(k), lambda e: e.queue),
    KaiQueueUpserted: (lambda s, _, k: s.quotas.kai_queues.get(k), lambda e: e.queue),
    ClaimUpserted: (lambda s, _, k: s.volumes.claims.get(k), lambda e: e.claim),
    VolumeUpserted: (lambda s, _, k: s.volumes.volumes.get(k), lambda e: e.volume),
    StorageClassUpserted: (lambda s, _, k: s.volumes.classes.get(k), lambda e: e.storage_class),
    CSINodeUpserted: (lambda s, _, k: s.volumes.csi_nodes.get(k), lambda e: e.csi_node),
    BudgetUpserted: (lambda s, _, k: s.budgets.get(k.partition("/")[0], {}).get(k), lambda e: e.budget),
    VolcanoJobUpserted: (lambda s, _, k: s.volcano_jobs.get(k), lambda e: e.job),
    KubeflowJobUpserted: (lambda s, kind, k: s.kubeflow_jobs.get((kind, k)), lambda e: e.job),
}


def _pod_subject(event: PodAssumed | PodForgotten | BindRequested | PodBound | BindFailed | PodNominated
                 | NominationCleared | EvictionRequested) -> tuple[str, str]:
    return "Pod", event.pod


def _gang_subject(event: GangTimedOut | GangPending | GangPlanned | PreemptionPlanned) -> tuple[str, str]:
    return "PodGroup", event.gang


# What each event is about, as (kind, key): the object an update is of, a decision's pod, or its
# gang's PodGroup (a lone pod's key for a lone pod's GangPending). Exhaustive (events.dispatch).
_SUBJECTS: dict[type, Callable[[Any], tuple[str, str]]] = exhaustive("subject_of", {
    **_UPDATE_SUBJECTS,
    **each((PodAssumed, PodForgotten, BindRequested, PodBound, BindFailed, PodNominated, NominationCleared,
            EvictionRequested), _pod_subject),
    **each((GangTimedOut, GangPending, GangPlanned, PreemptionPlanned), _gang_subject),
})


def subject_of(event: Event) -> tuple[str, str]:
    """(kind, key) of the object an event is about: a decision's pod, or its gang's PodGroup."""
    return _SUBJECTS[type(event)](event)


# Event type -> how the fold applies it; None: kept for the record (explain, replay), changes nothing
# the scheduler reads. Exhaustive (events.dispatch): a new event type must say what it folds to.
_HANDLERS: dict[type, Callable[[ClusterState, Any], None] | None] = exhaustive("the fold", {
    NodeUpserted: ClusterState._node_upserted,
    NodeDeleted: ClusterState._node_deleted,
    PodUpserted: ClusterState._pod_upserted,
    PodDeleted: ClusterState._pod_deleted,
    PodGroupUpserted: ClusterState._pod_group_upserted,
    PodGroupDeleted: ClusterState._pod_group_deleted,
    VolcanoPodGroupUpserted: ClusterState._volcano_pod_group_upserted,
    VolcanoPodGroupDeleted: ClusterState._volcano_pod_group_deleted,
    SchedulerPluginsPodGroupUpserted: ClusterState._scheduler_plugins_pod_group_upserted,
    SchedulerPluginsPodGroupDeleted: ClusterState._scheduler_plugins_pod_group_deleted,
    KubePodGroupUpserted: ClusterState._kube_pod_group_upserted,
    KubePodGroupDeleted: ClusterState._kube_pod_group_deleted,
    CompositePodGroupUpserted: ClusterState._composite_upserted,
    CompositePodGroupDeleted: ClusterState._composite_deleted,
    KaiPodGroupUpserted: ClusterState._kai_pod_group_upserted,
    KaiPodGroupDeleted: ClusterState._kai_pod_group_deleted,
    WorkloadUpserted: ClusterState._workload_upserted,
    WorkloadDeleted: ClusterState._workload_deleted,
    NetworkTopologyUpserted: ClusterState._network_topology_upserted,
    NetworkTopologyDeleted: ClusterState._network_topology_deleted,
    HyperNodeUpserted: ClusterState._hyper_node_upserted,
    HyperNodeDeleted: ClusterState._hyper_node_deleted,
    KueueTopologyUpserted: ClusterState._kueue_topology_upserted,
    KueueTopologyDeleted: ClusterState._kueue_topology_deleted,
    KaiTopologyUpserted: ClusterState._kai_topology_upserted,
    KaiTopologyDeleted: ClusterState._kai_topology_deleted,
    PriorityClassUpserted: ClusterState._priority_class_upserted,
    PriorityClassDeleted: ClusterState._priority_class_deleted,
    ObjectUndecodable: ClusterState._object_undecodable,
    PodAssumed: ClusterState._pod_assumed,
    PodForgotten: ClusterState._pod_forgotten,
    BindRequested: None,
    PodBound: ClusterState._pod_bound,
    BindFailed: ClusterState._bind_failed,
    PodNominated: ClusterState._pod_nominated,
    NominationCleared: ClusterState._nomination_cleared,
    EvictionRequested: ClusterState._eviction_requested,
    GangTimedOut: ClusterState._gang_timed_out,
    GangPending: ClusterState._gang_pending,
    GangPlanned: ClusterState._gang_planned,
    PreemptionPlanned: None,
    **each(QUOTA_OBJECT_EVENTS, ClusterState._quota_object),
    ClaimUpserted: ClusterState._claim_upserted,
    ClaimDeleted: ClusterState._claim_deleted,
    VolumeUpserted: ClusterState._volume_upserted,
    VolumeDeleted: ClusterState._volume_deleted,
    StorageClassUpserted: ClusterState._storage_class_upserted,
    StorageClassDeleted: ClusterState._storage_class_deleted,
    CSINodeUpserted: ClusterState._csi_node_upserted,
    CSINodeDeleted: ClusterState._csi_node_deleted,
    BudgetUpserted: ClusterState._budget_upserted,
    BudgetDeleted: ClusterState._budget_deleted,
    VolcanoJobUpserted: ClusterState._volcano_job_upserted,
    VolcanoJobDeleted: ClusterState._volcano_job_deleted,
    KubeflowJobUpserted: ClusterState._kubeflow_job_upserted,
    KubeflowJobDeleted: ClusterState._kubeflow_job_deleted,
})
