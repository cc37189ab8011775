"""Slim, typed shapes of the Kubernetes objects toposched reads.

Decoded straight from the API's JSON (camelCase keys, unknown fields ignored) with msgspec, and
stored in the event log as msgpack. These are *not* the OpenAPI model classes: only the fields the
scheduler reads are here, so decoding a 100 KB pod costs what its few scheduling fields cost.

Values that need interpretation (resource quantities, annotation JSON) stay raw strings here; the
fold in `state/` interprets them and records a problem naming the object and field when they are
malformed, so one bad object never breaks decoding of the stream.

Pure data: no I/O, nothing of ours imported.
"""

from __future__ import annotations

import msgspec


class _K8s(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, frozen=True, gc=False):
    """Base for Kubernetes shapes: camelCase on the wire, defaults omitted when encoding.

    `gc=False`: these are trees of plain data that never form reference cycles, and a cluster holds
    hundreds of thousands of them; untracked, the cyclic GC never walks them.
    """


# --------------------------------------------------------------------------- metadata


class OwnerReference(_K8s, frozen=True):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(_K8s, frozen=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    owner_references: list[OwnerReference] = []


# --------------------------------------------------------------------------- nodes


class Taint(_K8s, frozen=True):
    key: str = ""
    value: str = ""
    effect: str = ""


class NodeSpec(_K8s, frozen=True):
    taints: list[Taint] = []
    unschedulable: bool = False


class NodeStatus(_K8s, frozen=True):
    capacity: dict[str, str] = {}
    allocatable: dict[str, str] = {}


class Node(_K8s, frozen=True):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = ObjectMeta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


# --------------------------------------------------------------------------- pods


class ResourceRequirements(_K8s, frozen=True):
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}


class Container(_K8s, frozen=True):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = ResourceRequirements()


class Toleration(_K8s, frozen=True):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


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


class Affinity(_K8s, frozen=True):
    node_affinity: NodeAffinity | None = None


class PodSpec(_K8s, frozen=True):
    node_name: str = ""
    scheduler_name: str = ""
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    affinity: Affinity | None = None
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: dict[str, str] = {}
    termination_grace_period_seconds: int | None = None


class Condition(_K8s, frozen=True):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class PodStatus(_K8s, frozen=True):
    phase: str = ""
    nominated_node_name: str = ""
    conditions: list[Condition] = []


class Pod(_K8s, frozen=True):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


# --------------------------------------------------------------------------- priority classes


class PriorityClass(_K8s, frozen=True):
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta = ObjectMeta()
    value: int = 0
    global_default: bool = False
    preemption_policy: str | None = None
    description: str = ""


# --------------------------------------------------------------------------- pod groups


class PodGroupSpec(_K8s, frozen=True):
    """scheduling.sigs.k8s.io/v1alpha1 (the coscheduling PodGroup Koordinator reads)."""

    min_member: int = 0
    schedule_timeout_seconds: int | None = None
    min_resources: dict[str, str] = {}


class PodGroupStatus(_K8s, frozen=True):
    phase: str = ""
    scheduled: int = 0
    running: int = 0
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
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""


class LabelSelectorRequirement(_K8s, frozen=True):
    key: str = ""
    operator: str = ""
    values: list[str] = []


class LabelSelector(_K8s, frozen=True):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class SubGroupPolicy(_K8s, frozen=True):
    name: str = ""
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: int | None = None
    min_sub_groups: int | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] = []


class VolcanoPodGroupSpec(_K8s, frozen=True):
    min_member: int = 0
    queue: str = ""
    priority_class_name: str = ""
    min_resources: dict[str, str] = {}
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicy] = []


class VolcanoPodGroup(_K8s, frozen=True):
    api_version: str = "scheduling.volcano.sh/v1beta1"
    kind: str = "PodGroup"
    metadata: ObjectMeta = ObjectMeta()
    spec: VolcanoPodGroupSpec = VolcanoPodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()


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
    node_num: int = 0


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
    tier: int = 0
    tier_name: str = ""
    members: list[HyperNodeMember] = []


class HyperNodeStatus(_K8s, frozen=True):
    node_count: int = 0


class HyperNode(_K8s, frozen=True):
    api_version: str = "topology.volcano.sh/v1alpha1"
    kind: str = "HyperNode"
    metadata: ObjectMeta = ObjectMeta()
    spec: HyperNodeSpec = HyperNodeSpec()
    status: HyperNodeStatus = HyperNodeStatus()


# --------------------------------------------------------------------------- well-known names

POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
GANG_GROUPS_ANNOTATION = "gang.scheduling.koordinator.sh/groups"
NETWORK_TOPOLOGY_SPEC_ANNOTATION = "gang.scheduling.koordinator.sh/network-topology-spec"
NETWORK_TOPOLOGY_INDEX_ANNOTATION = "gang.scheduling.koordinator.sh/network-topology-index"
DEFAULT_SCHEDULER_NAME = "toposched"

KOORDINATOR_POD_GROUP_API = "scheduling.sigs.k8s.io/v1alpha1"
VOLCANO_POD_GROUP_API = "scheduling.volcano.sh/v1beta1"
CLUSTER_NETWORK_TOPOLOGY_API = "scheduling.koordinator.sh/v1alpha1"
HYPERNODE_API = "topology.volcano.sh/v1alpha1"
