"""The leader keeps the topology objects' status current and reports bad input, topology and other.

What it writes (only these, only when the value differs from what the folded object already says):
- the Koordinator ClusterNetworkTopology named `default`: `status.detailStatus`, the tree as
  `TopologyTree.detail_status()` gives it, while that object is the tree's source (also when the
  last good layer chain of an object that turned bad is in use);
- every Volcano HyperNode: `status.nodeCount` (`TopologyTree.hypernode_node_counts()`), while
  HyperNodes are the tree's source (when a ClusterNetworkTopology wins, their counts are left alone).

What it reports: every distinct problem of the objects the daemon reads (`object_problems`): the
topology and gang problems (the tree's `problems`, Kueue and KAI Topologies' among them, plus the state's
problems about HyperNodes, ClusterNetworkTopologies, PodGroups of every dialect, Workloads and gangs
of pod annotations (reported on the pod whose annotations define the gang), plus each gang's layer and tier names the
tree does not have, `state/topology_wishes.py`, the same check `toposched validate` makes) and every other problem
the fold found: a pod or node quantity that is not one, a pod's unknown PriorityClass, an object
that could not be decoded (the field msgspec refused) or folded, a record too large to log. Each
once: one structured log line (`object.problem`, keyed by the object, with the field), one count of
`toposched_invalid_objects_total{kind,reason}` (not for a fold failure, which
`toposched_internal_errors_total` counts), and one Warning Event on the object (message `field:
what is wrong`; reason the problem's own (`InvalidQuantity`, `UndecodableObject`,
`RecordTooLarge`, `InternalError`, `UnsupportedField` for a field read but not implemented,
`InvalidQuota` for an ElasticQuota or Queue, `QuotaNotFound` for a pod or PodGroup naming a quota that
does not exist), else `InvalidPodGroup` for a PodGroup or CompositePodGroup, `InvalidWorkload`, `InvalidGang`,
`InvalidPod`, `InvalidPriorityClass`, `InvalidCSINode` for a CSINode entry not read, and `InvalidTopology` for topology
objects and nodes). A problem that goes
away and comes back is reported again; what was reported is not persisted, so a new leader
reports the problems still present once more. The tree keeps its last good structure, and a pod
with an unusable request is not placed (its gang waits with the field in its reason), so
scheduling goes on meanwhile.

When: the journal tells `notice_all()` about every batch of events it folded; only kinds that can change
the tree, the topology objects or their problems (nodes, topology objects, PodGroups, undecodable
objects), or a batch after which the state's `problems_version` moved (a pod whose problems changed) mark
the status dirty, so pod churn costs nothing; a pass finding the tree's `version` unchanged
(a node heartbeat) and no PodGroup, topology object or problem changed returns at once (10,000 nodes in 4
layers: a full pass with nothing to write takes ~9 ms, a heartbeat pass ~0). `run()` makes one
pass as soon as something is dirty, then waits `interval` seconds before the next (changes
meanwhile are coalesced into that one pass): at most one pass per interval. A pass whose writes
failed is retried, backing off. A write already made is not repeated while the object's
resourceVersion is unchanged (the watch has not brought our own write back yet).

Runs only inside the leader's work (`daemon.cli.run`), and every write goes through the adapter's
`WriteGate`, so a standby writes nothing. Must never: write on every pod event, write a value the
object already holds, or stop the daemon over a failed write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol

import anyio
import msgspec
import structlog

from daemon.scheduling.ports import ApiOutcome
from daemon.telemetry.metrics import Metrics
from events.dispatch import each, exhaustive
from events.model import (
    BUDGET_EVENTS,
    COMPOSITE_EVENTS,
    JOB_OBJECT_EVENTS,
    POD_GROUP_EVENTS,
    PRIORITY_CLASS_EVENTS,
    QUOTA_OBJECT_EVENTS,
    TOPOLOGY_OBJECT_EVENTS,
    VOLUME_EVENTS,
    BindFailed,
    BindRequested,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    WorkloadDeleted,
    WorkloadUpserted,
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
    KUEUE_TOPOLOGY_API,
    SCHEDULER_PLUGINS_POD_GROUP_API,
    VOLCANO_POD_GROUP_API,
    VOLCANO_QUEUE_API,
    WORKLOAD_API,
    TopologyDetail,
)
from state.cluster import ClusterState
from state.composites import COMPOSITE_PROBLEM
from state.gangs import (
    INTERNAL_ERROR,
    KAI_POD_GROUP_PROBLEM,
    KUBE_POD_GROUP_PROBLEM,
    POD_GANG_PROBLEM,
    SCHEDULER_PLUGINS_PROBLEM,
    WORKLOAD_PROBLEM,
    Problem,
)
from state.hypernodes import HYPERNODE_KIND
from state.quota import CAPACITY_KIND, KAI_QUEUE_KIND, QUEUE_KIND, QUOTA_KINDS
from state.topology import SOURCE_CNT, SOURCE_HYPERNODES
from state.topology_validation import CNT_KIND, DEFAULT_CNT_NAME, KAI_TOPOLOGY_KIND, KUEUE_TOPOLOGY_KIND, NODE_KIND
from state.topology_wishes import POD_GROUP_KIND, wish_problems
from state.volumes import CLAIM_KIND, CSI_NODE_KIND

log = structlog.get_logger("toposched.topology")

INVALID_TOPOLOGY: Final = "InvalidTopology"
INVALID_POD_GROUP: Final = "InvalidPodGroup"
INVALID_POD: Final = "InvalidPod"
INVALID_PRIORITY_CLASS: Final = "InvalidPriorityClass"
INVALID_WORKLOAD: Final = "InvalidWorkload"
INVALID_GANG: Final = "InvalidGang"  # on the pod whose annotations define a gang of pod annotations
POD_KIND: Final = "Pod"
PRIORITY_CLASS_KIND: Final = "PriorityClass"
DEFAULT_INTERVAL: Final = 1.0
MAX_RETRY_SECONDS: Final = 30.0
MAX_EVENTS_PER_PASS: Final = 50

# Event type -> what folding it can change of what this module writes: the tree (or a topology
# object), the problems held in the state too, or nothing (pod churn and the loop's decisions).
# Exhaustive (events.dispatch): a new event type must say which.
_TREE: Final = "tree"
_PROBLEMS: Final = "problems"
_CHANGES: Final[dict[type, str | None]] = exhaustive("the topology status", {
    **each((NodeUpserted, NodeDeleted), _TREE),  # a node's problems change only with the tree's version
    **each((*POD_GROUP_EVENTS, *TOPOLOGY_OBJECT_EVENTS, ObjectUndecodable, WorkloadUpserted, WorkloadDeleted,
            *COMPOSITE_EVENTS),
           _PROBLEMS),
    **each(QUOTA_OBJECT_EVENTS, _PROBLEMS),  # quota problems (state/quota.py)
    **each((*PRIORITY_CLASS_EVENTS, PodUpserted, PodDeleted, PodAssumed, PodForgotten, BindRequested, PodBound,
            BindFailed, PodNominated, NominationCleared, EvictionRequested, GangTimedOut, GangPending, GangPlanned,
            PreemptionPlanned, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS), None),
})
# Problem kinds taken from `state.all_problems()` (the tree's own problems are all taken).
_STATE_KINDS: Final = frozenset({CNT_KIND, HYPERNODE_KIND, POD_GROUP_KIND, "VolcanoPodGroup", SCHEDULER_PLUGINS_PROBLEM,
                                 KUBE_POD_GROUP_PROBLEM, KAI_POD_GROUP_PROBLEM, WORKLOAD_PROBLEM, POD_GANG_PROBLEM,
                                 COMPOSITE_PROBLEM})


class TopologyStatusWriter(Protocol):
    """The writes this module makes (`daemon.kube.cluster_api.KubeClusterAPI` implements them)."""

    async def set_network_topology_status(self, name: str, detail_status: Sequence[TopologyDetail]) -> ApiOutcome: ...

    async def set_hypernode_status(self, name: str, node_count: int) -> ApiOutcome: ...

    async def report_object(self, key: str, api_version: str, kind: str, uid: str, reason: str,
                            message: str) -> ApiOutcome: ...


class StatusPlan(msgspec.Struct, frozen=True):
    """The status writes one pass should make: None / empty when nothing differs."""

    detail_status: list[TopologyDetail] | None = None  # for the ClusterNetworkTopology `default`
    node_counts: dict[str, int] = {}  # HyperNode name -> nodeCount


class ObjectRef(msgspec.Struct, frozen=True):
    """The object a problem is about, as an Event's involvedObject names it."""

    key: str
    api_version: str
    kind: str
    uid: str = ""


def plan_status(state: ClusterState) -> StatusPlan:
    """What differs between the tree and the topology objects' status as folded (pure)."""
    tree = state.topology
    detail: list[TopologyDetail] | None = None
    cnt = state.network_topologies.get(DEFAULT_CNT_NAME)
    if cnt is not None and tree.source == SOURCE_CNT:
        desired = tree.detail_status()
        if desired != cnt.status.detail_status:
            detail = desired
    counts: dict[str, int] = {}
    if tree.source == SOURCE_HYPERNODES:
        for name, count in tree.hypernode_node_counts().items():
            hyper_node = state.hyper_nodes.get(name)
            if hyper_node is not None and hyper_node.status.node_count != count:
                counts[name] = count
    return StatusPlan(detail_status=detail, node_counts=counts)


def topology_problems(state: ClusterState) -> list[Problem]:
    """Every topology-related problem now, deduplicated, in a stable order."""
    found = set(state.topology.problems)
    found.update(problem for problem in state.all_problems() if problem.kind in _STATE_KINDS)
    for gang in state.gangs.values():  # layer and tier names checked against the tree as it is now
        if gang.spec is not None:  # filed under the kind of the gang's own object
            kind = gang.problem_kind
            found.update(problem if problem.kind == kind else msgspec.structs.replace(problem, kind=kind)
                         for problem in wish_problems(gang.spec, state.topology))
    return sorted(found, key=lambda p: (p.kind, p.key, p.field, p.message))


def object_problems(state: ClusterState) -> list[Problem]:
    """Every problem of an object the daemon reads, topology or not, deduplicated, in a stable order."""
    found = set(topology_problems(state))
    found.update(problem for problem in state.all_problems() if problem.kind not in _STATE_KINDS)
    return sorted(found, key=lambda p: (p.kind, p.key, p.field, p.message))


def reason_of(problem: Problem) -> str:
    """The Warning Event's reason for a problem (see the module docstring)."""
    if problem.reason:
        return problem.reason
    if problem.kind in (POD_GROUP_KIND, "VolcanoPodGroup", SCHEDULER_PLUGINS_PROBLEM, KUBE_POD_GROUP_PROBLEM,
                        KAI_POD_GROUP_PROBLEM, COMPOSITE_PROBLEM):
        return INVALID_POD_GROUP
    if problem.kind == WORKLOAD_PROBLEM:
        return INVALID_WORKLOAD
    if problem.kind == POD_GANG_PROBLEM:
        return INVALID_GANG
    if problem.kind == POD_KIND:
        return INVALID_POD
    if problem.kind == PRIORITY_CLASS_KIND:
        return INVALID_PRIORITY_CLASS
    return INVALID_TOPOLOGY


def object_of(state: ClusterState, problem: Problem) -> ObjectRef:
    """The Kubernetes object a problem names (uid when the state knows the object)."""
    key = problem.key
    if problem.kind == POD_KIND:
        pod = state.pods.get(key)
        return ObjectRef(key, "v1", POD_KIND, pod.uid if pod else "")
    if problem.kind == PRIORITY_CLASS_KIND:
        priority_class = state.priority_classes.get(key)
        return ObjectRef(key, "scheduling.k8s.io/v1", PRIORITY_CLASS_KIND,
                         priority_class.metadata.uid if priority_class else "")
    if problem.kind == CNT_KIND:
        cnt = state.network_topologies.get(key)
        return ObjectRef(key, CLUSTER_NETWORK_TOPOLOGY_API, CNT_KIND, cnt.metadata.uid if cnt else "")
    if problem.kind == HYPERNODE_KIND:
        hyper_node = state.hyper_nodes.get(key)
        return ObjectRef(key, HYPERNODE_API, HYPERNODE_KIND, hyper_node.metadata.uid if hyper_node else "")
    if problem.kind == KUEUE_TOPOLOGY_KIND:
        kueue = state.kueue_topologies.get(key)
        return ObjectRef(key, KUEUE_TOPOLOGY_API, "Topology", kueue.metadata.uid if kueue else "")
    if problem.kind == KAI_TOPOLOGY_KIND:
        kai = state.kai_topologies.get(key)
        return ObjectRef(key, KAI_TOPOLOGY_API, "Topology", kai.metadata.uid if kai else "")
    if problem.kind == NODE_KIND:
        node = state.nodes.get(key)
        return ObjectRef(key, "v1", NODE_KIND, node.obj.metadata.uid if node else "")
    if problem.kind in QUOTA_KINDS:
        return _quota_object(state, problem)
    if problem.kind in _VOLUME_KINDS:
        return _volume_object(state, problem)
    if problem.kind == "PodDisruptionBudget":
        budget = state.budgets.get(key.partition("/")[0], {}).get(key)
        return ObjectRef(key, "policy/v1", "PodDisruptionBudget", budget.metadata.uid if budget else "")
    if problem.kind == "VolcanoPodGroup":
        volcano = state.volcano_pod_groups.get(key)
        return ObjectRef(key, VOLCANO_POD_GROUP_API, POD_GROUP_KIND, volcano.metadata.uid if volcano else "")
    if problem.kind == SCHEDULER_PLUGINS_PROBLEM:
        group = state.scheduler_plugins_pod_groups.get(key)
        return ObjectRef(key, SCHEDULER_PLUGINS_POD_GROUP_API, POD_GROUP_KIND, group.metadata.uid if group else "")
    if problem.kind == KUBE_POD_GROUP_PROBLEM:
        kube = state.kube_pod_groups.get(key)
        if kube is None:
            return ObjectRef(key, KUBE_POD_GROUP_API, POD_GROUP_KIND, "")
        return ObjectRef(key, kube.api_version, POD_GROUP_KIND, kube.metadata.uid)  # the version it is served at
    if problem.kind == KAI_POD_GROUP_PROBLEM:
        kai_group = state.kai_pod_groups.get(key)
        return ObjectRef(key, KAI_POD_GROUP_API, POD_GROUP_KIND, kai_group.metadata.uid if kai_group else "")
    if problem.kind == WORKLOAD_PROBLEM:
        workload = state.workloads.get(key)
        return ObjectRef(key, WORKLOAD_API, "Workload", workload.metadata.uid if workload else "")
    if problem.kind == COMPOSITE_PROBLEM:
        composite = state.composite_pod_groups.get(key)
        return ObjectRef(key, COMPOSITE_POD_GROUP_API, COMPOSITE_PROBLEM, composite.metadata.uid if composite else "")
    if problem.kind == POD_GANG_PROBLEM:  # a gang of pod annotations: the pod whose annotations define it
        gang = state.gangs.get(key)
        pod = state.pods.get(gang.definer) if gang is not None else None
        return ObjectRef(pod.key, "v1", POD_KIND, pod.uid) if pod is not None else ObjectRef(key, "v1", POD_KIND)
    koordinator = state.pod_groups.get(key)
    if koordinator is not None:
        return ObjectRef(key, KOORDINATOR_POD_GROUP_API, POD_GROUP_KIND, koordinator.metadata.uid)
    volcano = state.volcano_pod_groups.get(key)
    if volcano is not None:
        return ObjectRef(key, VOLCANO_POD_GROUP_API, POD_GROUP_KIND, volcano.metadata.uid)
    return ObjectRef(key, KOORDINATOR_POD_GROUP_API, POD_GROUP_KIND)


_VOLUME_KINDS: Final = frozenset({CLAIM_KIND, "PersistentVolume", "StorageClass", CSI_NODE_KIND})


def _volume_object(state: ClusterState, problem: Problem) -> ObjectRef:
    book, key = state.volumes, problem.key
    if problem.kind == CLAIM_KIND:
        claim = book.claims.get(key)
        return ObjectRef(key, "v1", CLAIM_KIND, claim.metadata.uid if claim else "")
    if problem.kind == "PersistentVolume":
        volume = book.volumes.get(key)
        return ObjectRef(key, "v1", "PersistentVolume", volume.metadata.uid if volume else "")
    if problem.kind == CSI_NODE_KIND:
        csi_node = book.csi_nodes.get(key)
        return ObjectRef(key, "storage.k8s.io/v1", CSI_NODE_KIND, csi_node.metadata.uid if csi_node else "")
    storage_class = book.classes.get(key)
    return ObjectRef(key, "storage.k8s.io/v1", "StorageClass", storage_class.metadata.uid if storage_class else "")


def _quota_object(state: ClusterState, problem: Problem) -> ObjectRef:
    book = state.quotas
    if problem.kind == QUEUE_KIND:
        queue = book.queues.get(problem.key)
        return ObjectRef(problem.key, VOLCANO_QUEUE_API, "Queue", queue.metadata.uid if queue else "")
    if problem.kind == KAI_QUEUE_KIND:
        kai_queue = book.kai_queues.get(problem.key)
        return ObjectRef(problem.key, KAI_QUEUE_API, "Queue", kai_queue.metadata.uid if kai_queue else "")
    if problem.kind == CAPACITY_KIND:
        capacity = book.capacity_quotas.get(problem.key)
        return ObjectRef(problem.key, CAPACITY_QUOTA_API, "ElasticQuota", capacity.metadata.uid if capacity else "")
    koordinator = book.elastic_quotas.get(problem.key)
    uid = koordinator.metadata.uid if koordinator else ""
    return ObjectRef(problem.key, KOORDINATOR_QUOTA_API, "ElasticQuota", uid)


class TopologyStatus:
    """One leader's status keeper and problem reporter (see the module docstring)."""

    def __init__(self, state: ClusterState, writer: TopologyStatusWriter, *, interval: float = DEFAULT_INTERVAL,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep, metrics: Metrics | None = None) -> None:
        self.state = state
        self.writer = writer
        self.metrics = metrics
        self._problems_version = state.problems_version
        self.interval = interval
        self._sleep = sleep
        self._dirty = anyio.Event()
        self._dirty.set()  # the first pass runs at once
        self._failures = 0
        self._settled_version = -1  # the tree version of the last pass that left nothing to do
        self._state_problems_changed = True
        self._written: dict[tuple[str, str], tuple[str, object]] = {}  # (kind, name) -> (resourceVersion, value)
        self._logged: set[Problem] = set()
        self._reported: set[Problem] = set()
        self.passes = 0
        self.writes = 0
        self.events_posted = 0

    def notice_all(self, events: Sequence[Event]) -> None:
        """Journal listener (per batch: `Journal.subscribe_batches`): mark dirty when an event can
        change what this module writes."""
        if self.state.problems_version != self._problems_version:  # e.g. a pod whose request is not a quantity
            self._problems_version = self.state.problems_version
            self._dirty.set()
            self._state_problems_changed = True
            return
        for event in events:
            change = _CHANGES[type(event)]
            if change is not None:
                self._dirty.set()
                if change == _PROBLEMS:
                    self._state_problems_changed = True
                    return

    async def run(self) -> None:
        """Until cancelled: one pass whenever something changed, at most one per `interval`."""
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            complete = await self.sync_once()
            if complete:
                self._failures = 0
                await self._sleep(self.interval)
            else:
                self._dirty.set()
                self._failures += 1
                await self._sleep(min(MAX_RETRY_SECONDS, self.interval * 2 ** (self._failures - 1)))

    async def sync_once(self) -> bool:
        """Write the statuses that differ and report new problems; False when something is left to retry."""
        self.passes += 1
        version = self.state.topology.version  # structure changes bump it; object (status) changes come via notice
        if version == self._settled_version and not self._state_problems_changed:
            return True  # a node heartbeat: nothing this module writes can have changed
        self._state_problems_changed = False
        complete = await self._write_statuses()
        complete = await self._report_problems() and complete
        if complete:
            self._settled_version = version
        else:
            self._state_problems_changed = True  # retry everything next pass
        return complete

    # ------------------------------------------------------------------ status

    def _already_written(self, kind: str, name: str, resource_version: str, value: object) -> bool:
        return self._written.get((kind, name)) == (resource_version, value)

    async def _write_statuses(self) -> bool:
        plan = plan_status(self.state)
        complete = True
        if plan.detail_status is not None:
            cnt = self.state.network_topologies[DEFAULT_CNT_NAME]
            version = cnt.metadata.resource_version
            if not self._already_written(CNT_KIND, DEFAULT_CNT_NAME, version, plan.detail_status):
                outcome = await self.writer.set_network_topology_status(DEFAULT_CNT_NAME, plan.detail_status)
                complete &= self._after_write(CNT_KIND, DEFAULT_CNT_NAME, version, plan.detail_status, outcome,
                                              domains=len(plan.detail_status))
        for name, count in sorted(plan.node_counts.items()):
            hyper_node = self.state.hyper_nodes.get(name)
            if hyper_node is None:
                continue
            version = hyper_node.metadata.resource_version
            if self._already_written(HYPERNODE_KIND, name, version, count):
                continue
            outcome = await self.writer.set_hypernode_status(name, count)
            complete &= self._after_write(HYPERNODE_KIND, name, version, count, outcome, node_count=count)
        return complete

    def _after_write(self, kind: str, name: str, resource_version: str, value: object, outcome: ApiOutcome,
                     **fields: int) -> bool:
        if outcome.ok:
            self.writes += 1
            self._written[(kind, name)] = (resource_version, value)
            log.info("topology.status_written", kind=kind, object=name, **fields)
            return True
        log.warning("topology.status_write_failed", kind=kind, object=name, reason=outcome.reason,
                    retriable=outcome.retriable)
        return not outcome.retriable  # a 404 (object gone) is not retried; its deletion comes by watch

    # ------------------------------------------------------------------ problems

    async def _report_problems(self) -> bool:
        current = object_problems(self.state)
        present = set(current)
        self._logged &= present
        self._reported &= present
        posted = 0
        complete = True
        for problem in current:
            reason = reason_of(problem)
            if problem not in self._logged:
                self._logged.add(problem)
                log.warning("object.problem", kind=problem.kind, object=problem.key, field=problem.field,
                            problem=problem.message, reason=reason)
                if self.metrics is not None and reason != INTERNAL_ERROR:  # that one has its own counter
                    self.metrics.invalid_objects.labels(problem.kind, reason).inc()
            if problem in self._reported:
                continue
            if posted >= MAX_EVENTS_PER_PASS:
                complete = False  # the rest go out on the next pass
                continue
            if problem.key.startswith("<"):  # an undecodable object without a name: the log line is all we can do
                self._reported.add(problem)
                continue
            target = object_of(self.state, problem)
            message = f"{problem.field}: {problem.message}" if problem.field else problem.message
            outcome = await self.writer.report_object(target.key, target.api_version, target.kind, target.uid,
                                                      reason, message)
            posted += 1
            if outcome.ok:
                self._reported.add(problem)
                self.events_posted += 1
            else:
                complete = False
                log.warning("topology.event_failed", kind=problem.kind, object=problem.key, reason=outcome.reason)
        return complete
