"""Quotas: the trees of ElasticQuotas and Volcano Queues, and what each quota holds, folded from events.

Three dialects are read into one model (`Quota`: min, max, weight, parent), each into its own tree:
- Koordinator's multi-hierarchy ElasticQuota (scheduling.sigs.k8s.io/v1alpha1). Quotas are known by
  name (`quota.scheduling.koordinator.sh/name` on a pod names one); the tree is in the labels
  `quota.scheduling.koordinator.sh/parent` (absent, "", "root" or "koordinator-root-quota": a top
  quota) and `/is-parent`. `spec.min` is guaranteed, `spec.max` the ceiling, the annotation
  `quota.scheduling.koordinator.sh/shared-weight` (a JSON resource list; default: max) how much
  of idle capacity it gets, and `allow-lent-resource: "false"` keeps its unused min from others.
- scheduler-plugins' capacity scheduling ElasticQuota (scheduling.x-k8s.io/v1alpha1): one per
  namespace, min/max, no hierarchy. It borrows first come, first served: all of them together use
  at most the sum of their mins.
- Volcano's Queue (scheduling.volcano.sh/v1beta1, cluster-scoped; PodGroups name it in
  `spec.queue`, default `default`): `capability` is max, `deserved` (else `guarantee`) is the
  guaranteed level reclaim protects, `guarantee` is reserved (never lent), `weight` (default 1)
  shares idle capacity, `reclaimable: false` protects everything it runs, a Closed or Closing queue
  (`status.state`, else the deprecated `spec.state`) admits no new job, `spec.parent` builds the tree.
- NVIDIA KAI Scheduler's Queue (scheduling.run.ai/v2, cluster-scoped; KAI PodGroups name it in
  `spec.queue`, which KAI's pod-grouper takes from the workload's or pod's label `kai.scheduler/queue`).
  `spec.resources.{cpu,memory,gpu}` each hold `quota` (the guaranteed level: min), `limit` (max) and
  `overQuotaWeight` (the weight for idle capacity), in KAI's units: cpu in millicores, memory in
  megabytes of 10^6 bytes, gpu in GPUs of `nvidia.com/gpu`, each MIG device `nvidia.com/mig-<X>g.<Y>gb`
  a pod asks for counting X of them (`counted_requests`). As KAI reads them (its proportion plugin
  and capacity policy): -1 is unlimited (a quota of -1 deserves everything up to its limit); an absent
  value is 0, so an absent limit (or resource: reported either way) lets no pod of the queue, nor of a
  queue under it, ask for that resource at all, and an absent weight gives the queue no fair share of
  what others leave idle (the runtime here). Every KAI queue thus counts all three resources.
  `spec.parentQueue` builds the tree; only leaf queues take jobs. As in KAI's capacity policy, the
  runtime (its fair share) is no cap at admission: a preemptible job goes up to the limits
  (`placement/quota.py`). Non-preemptible jobs stay within quota and are never
  reclaimed: a KAI PodGroup's `spec.preemptibility: non-preemptible`, or, unset, a PodGroup of priority
  100 or more (`ClusterState.gang_preemptable`); a pod in a KAI queue by its label alone, by its
  priority (its label `priorityClassName`'s, as KAI's pod-grouper reads it: `ClusterState._kai_pod_priority`).
  A PriorityClass event settles the KAI queues' pods again, since their preemptibility may follow it.
  Reclaim measures a KAI queue against its quota or fair share (`placement.quota.reclaim_floor`).
  `spec.priority` (default 100) orders the fair share as KAI's does: idle capacity goes to the sibling
  queues of the highest priority first, by overQuotaWeight among them, and what they leave to the next.
  `spec.preemptMinRuntime` / `spec.reclaimMinRuntime` (Go durations) keep a job that started less than
  that long ago from being taken whole by priority preemption inside its queue / by a reclaim
  (`preempt_min_runtime`, `reclaim_min_runtime`: resolved up the tree as KAI's minruntime plugin does;
  `preemption/reclaim.py` applies them). Read but not implemented (UnsupportedField): `lendingLimit`.
  The label `kai.scheduler/node-pool` (or the key `QuotaBook.kai_node_pool_label` names) puts a queue in
  that KAI node pool (none: the default pool), as KAI's scheduling shards divide the cluster: each pool's
  scheduler sees only its own queues, so a job (its PodGroup's pool, or a labelled pod's own:
  `ClusterState.node_pool_of`) naming a queue of another pool is not placed (the reason says so, and the
  PodGroup's `spec.queue` is warned about), a queue under a parent of another pool is reported, and the
  top queues of each pool share that pool's nodes (the default pool's: every node in no named pool) as
  their runtime.

Which quota a pod belongs to (one at most), first match wins: a quota the pod or its gang names comes
before one its namespace implies, and a gang's PodGroup before a pod's own label (KAI's scheduler reads
the PodGroup's queue; the label is only what its pod-grouper copies there):
1. the Koordinator quota its label `quota.scheduling.koordinator.sh/name` names;
2. the Queue of its Volcano PodGroup (`spec.queue`, or `default`);
3. the KAI Queue of its KAI PodGroup (`spec.queue`, else the pod's `kai.scheduler/queue` label, else
   `default-queue`, what KAI's pod-grouper would have written);
4. the KAI Queue its label `kai.scheduler/queue` names (a pod of no KAI PodGroup);
5. the first Koordinator quota (by name) that is no parent, in the pod's namespace;
6. the capacity scheduling ElasticQuota of the pod's namespace;
7. none: the pod is not limited by any quota (nor protected by one).

What a quota holds (every vector is in milli-units and summed up the tree, parents included):
- `used`: requests of its pods that are bound or assumed (and not finished), plus its pending pods
  holding a nomination: a nomination reserves quota as it reserves nodes, so room reclaimed for a
  gang cannot be taken by another quota's gang meanwhile.
- `used_np`: the part of `used` held by non-preemptible pods (Koordinator: labelled
  `quota.scheduling.koordinator.sh/preemptible: "false"`; they must stay within min).
- `running`: bound or assumed pods only (what the simulator reports as used).
- `requested`: every live pod, pending ones included: Koordinator's "request", from which the
  runtime is computed.

`runtime(state, quota)` is Koordinator's runtime quota, computed top down per resource: each child
of a quota first gets its request up to its min (all of its min when it does not lend), scaled down
together when the parent's runtime cannot hold every min; what is left is shared by weight among
the children asking for more, each capped at its request and max, until nothing is left or nobody
asks. The root of a tree holds the allocatable of every node (the KAI tree's: each node pool's, for the top
queues of that pool). Volcano queues are shared the same
way (their weight being their share), and KAI queues by priority, then overQuotaWeight (their fair
share: no cap at admission, the level reclaim measures them against: see above); capacity scheduling
quotas have no runtime (first come).

Bad input never raises: the object stays, the rule that then applies is recorded as a `Problem`
naming the object and field: a negative or malformed quantity counts as 0; min above max is cut to
max; an unknown parent, or a parent chain that loops, makes the quota a top quota; two Koordinator
quotas of one name (or two capacity quotas in one namespace): the first by key is used; a pod
naming a quota that does not exist (or a parent quota) is not placed until it does (the reason says
so); a PodGroup naming a missing queue other than `default` likewise (a missing `default` queue
means no quota, as Volcano creates it on its own), and a KAI PodGroup or labelled pod naming a missing
KAI queue other than `default-queue`. KAI's own rules give their words: a quota other than -1 below
0, or a limit likewise, counts as 0; a quota above the limit is cut to it.

`QuotaBook` is folded by `ClusterState.apply`: the quota objects through `object_changed` (the
fold's table), every other event after the state has folded it (`observe`); it reads the state's
pods and gangs and never changes them. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec

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
    CapacityElasticQuotaDeleted,
    CapacityElasticQuotaUpserted,
    ElasticQuotaDeleted,
    ElasticQuotaUpserted,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    KaiPodGroupUpserted,
    KaiQueueDeleted,
    KaiQueueUpserted,
    KubePodGroupUpserted,
    NodeDeleted,
    NodeUpserted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodGroupUpserted,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    QueueUpserted,
    SchedulerPluginsPodGroupUpserted,
    VolcanoPodGroupUpserted,
    WorkloadDeleted,
    WorkloadUpserted,
    object_key,
)
from events.objects import (
    KAI_DEFAULT_NODE_POOL,
    KAI_NODE_POOL_LABEL,
    KAI_QUEUE_LABEL,
    QUOTA_ALLOW_LENT_LABEL,
    QUOTA_IS_PARENT_LABEL,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
    QUOTA_PREEMPTIBLE_LABEL,
    QUOTA_SHARED_WEIGHT_ANNOTATION,
    VOLCANO_PREEMPTABLE_ANNOTATION,
    CapacityElasticQuota,
    ElasticQuota,
    KaiQueue,
    KaiQueueResource,
    Queue,
)
from state.gangs import INVALID_QUANTITY, KAI, KAI_POD_GROUP_PROBLEM, UNSUPPORTED_FIELD, Problem
from state.kai_gangs import NON_PREEMPTIBLE_PRIORITY, go_duration_seconds, shown
from state.resources import QuantityError, Resources, format_quantity, parse_quantity

if TYPE_CHECKING:
    from state.cluster import ClusterState, PodInfo

KOORDINATOR: Final = "koordinator"
CAPACITY: Final = "scheduler-plugins"
VOLCANO: Final = "volcano"
KAI_DIALECT: Final = KAI  # "kai", as the gangs' dialect
DIALECTS: Final = (KOORDINATOR, CAPACITY, VOLCANO, KAI_DIALECT)

KOORDINATOR_KIND: Final = "ElasticQuota"
CAPACITY_KIND: Final = "CapacityElasticQuota"
QUEUE_KIND: Final = "Queue"
VOLCANO_POD_GROUP_KIND: Final = "VolcanoPodGroup"
KAI_QUEUE_KIND: Final = "KaiQueue"

KOORDINATOR_ROOT_NAMES: Final = frozenset({"", "root", "koordinator-root-quota"})
VOLCANO_ROOT_QUEUE: Final = "root"
DEFAULT_QUEUE: Final = "default"
CLOSED_STATES: Final = frozenset({"Closed", "Closing"})
DEFAULT_VOLCANO_WEIGHT: Final = 1
# KAI: what its pod-grouper writes into spec.queue when nothing names a queue; the value KAI reads as no
# limit (and as a quota deserving everything); each resource of a KAI Queue, as the pod resource it counts
# and the factor from KAI's unit to milli-units (millicores; megabytes of 10^6 bytes; GPUs).
KAI_DEFAULT_QUEUE: Final = "default-queue"
KAI_DEFAULT_QUEUE_PRIORITY: Final = 100  # a Queue's spec.priority when unset (KAI's DefaultQueuePriority)
GPU_RESOURCE: Final = "nvidia.com/gpu"
MIG_PREFIX: Final = "nvidia.com/mig-"
_MIG_SLICES = re.compile(r"(\d{1,2})g\.")  # mig-<compute slices>g.<memory>gb (at most 7 slices on any GPU)
KAI_UNLIMITED: Final = -1.0
KAI_RESOURCES: Final = (("cpu", "cpu", 1), ("memory", "memory", 10**9), ("gpu", GPU_RESOURCE, 1000))
# A KAI quota of -1 with no limit: a min no request reaches (as `_request_of`'s stand-in for no max).
UNLIMITED_MIN: Final = 1 << 62
_KAI_LARGEST: Final = 1e15  # above this a KAI value is no real amount (and would overflow the milli-units)
# Reasons of the Warning Events these problems become (see daemon/kube/topology_status.py).
INVALID_QUOTA: Final = "InvalidQuota"
QUOTA_NOT_FOUND: Final = "QuotaNotFound"
QUOTA_KINDS: Final = frozenset({KOORDINATOR_KIND, CAPACITY_KIND, QUEUE_KIND, KAI_QUEUE_KIND})


class Quota:
    """One quota of a tree (or a tree's root). Mutated only by `QuotaBook`.

    `min` / `max` hold the resources the object names (a resource absent from `max` is unlimited,
    absent from `min` is 0); `constrained` is every resource named in either: only those are
    counted against the quota. `reserved` is the part of min never lent (Volcano's guarantee,
    Koordinator's allow-lent-resource "false"). `guarded` is the level reclaim never takes usage
    below and under which the quota may reclaim (min; Volcano: deserved, else guarantee).
    """

    __slots__ = ("children", "closed", "constrained", "depth", "dialect", "guarded", "guarded_word", "id",
                 "is_parent", "key", "kind", "label", "max", "max_word", "min", "name", "parent", "pool",
                 "preempt_min_runtime",
                 "reclaim_min_runtime", "reclaimable", "requested", "reserved", "running", "share_priority", "uid",
                 "used", "used_np", "weight", "weight_default")

    def __init__(self, dialect: str, name: str, key: str, kind: str) -> None:
        self.dialect = dialect
        self.name = name
        self.key = key  # the object's key (namespace/name, or the name of a cluster-scoped object)
        self.kind = kind
        self.id = f"{dialect}/{name}"
        self.label = _label(dialect, name)
        self.uid = ""
        self.parent: Quota | None = None
        self.children: list[Quota] = []
        self.depth = 0
        self.is_parent = False
        self.min: Resources = {}
        self.max: Resources = {}
        self.guarded: Resources = {}
        self.reserved: Resources = {}
        self.weight: Resources = {}
        self.weight_default = 0  # a weight for every resource (Volcano); 0: per resource, from max
        # idle capacity goes to the siblings of the highest share priority first, by weight among them
        # (KAI's queue priority; every other dialect: one level)
        self.share_priority = 0
        self.pool = ""  # KAI: the node pool whose scheduler sees the queue (its label; "": the default pool)
        self.constrained: frozenset[str] = frozenset()
        # the fields' names, for reasons
        self.max_word = {VOLCANO: "capability", KAI: "limit"}.get(dialect, "max")
        self.guarded_word = {VOLCANO: "deserved", KAI: "quota"}.get(dialect, "min")
        self.reclaimable = True
        self.closed = False
        # KAI: how long a job of the queue runs before preemption inside it (reclaim from it) may take it, in
        # seconds; None: not said here (a queue above says, else 0: `preempt_min_runtime`, `reclaim_min_runtime`)
        self.preempt_min_runtime: float | None = None
        self.reclaim_min_runtime: float | None = None
        self.used: Resources = {}
        self.used_np: Resources = {}
        self.running: Resources = {}
        self.requested: Resources = {}

    @property
    def is_root(self) -> bool:
        return self.parent is None and self.kind == ""

    def path(self) -> list[Quota]:
        """This quota and its ancestors, below the tree's root."""
        out: list[Quota] = []
        node: Quota | None = self
        while node is not None and not node.is_root:
            out.append(node)
            node = node.parent
        return out

    def weight_of(self, resource: str) -> int:
        if self.weight_default:
            return self.weight_default
        weight = self.weight.get(resource)
        if weight is not None:
            return weight
        return self.max.get(resource) or self.min.get(resource) or 1

    def __repr__(self) -> str:
        return f"Quota({self.id})"


class Share(msgspec.Struct, frozen=True):
    """What one pod adds to its quota (and the quota's ancestors)."""

    quota: str  # Quota.id
    requests: tuple[tuple[str, int], ...]
    used: bool  # placed, or pending with a nomination
    running: bool  # placed (bound or assumed)
    live: bool  # not finished, not removed: counts in `requested`
    preemptible: bool


class Membership(msgspec.Struct, frozen=True):
    """Which quota a pod belongs to; `refusal` says why it may not be placed ("" when it may)."""

    quota: str = ""  # Quota.id, "" for none
    refusal: str = ""


NO_MEMBERSHIP = Membership()


def _label(dialect: str, name: str) -> str:
    if dialect == VOLCANO:
        return f"queue {name}"
    if dialect == KAI:
        return f"KAI queue {name}"
    if dialect == CAPACITY:
        return f"ElasticQuota {name}"
    return f"quota {name}"


def _root(dialect: str) -> Quota:
    root = Quota(dialect, "", "", "")
    root.label = {KOORDINATOR: "the Koordinator quota tree", CAPACITY: "all capacity scheduling ElasticQuotas",
                  VOLCANO: "the Volcano queue tree", KAI: "the KAI queue tree"}[dialect]
    return root


def _quantities(raw: Mapping[str, str], kind: str, key: str, field: str, problems: list[Problem]) -> Resources:
    parsed: Resources = {}
    for name, text in sorted(raw.items()):
        try:
            parsed[name] = parse_quantity(str(text))
        except QuantityError as error:
            problems.append(Problem(kind, key, f"{field}[{name}]", f"{error}; counted as 0", INVALID_QUANTITY))
            parsed[name] = 0
    return parsed


def shown_amount(resource: str, amount: int) -> str:
    """A min or max as quota reports write it: the unlimited min of a KAI quota of -1 as "unlimited"."""
    return "unlimited" if amount >= UNLIMITED_MIN else format_quantity(resource, amount)


def add_into(target: Resources, delta: Iterable[tuple[str, int]], sign: int = 1) -> None:
    for name, amount in delta:
        target[name] = target.get(name, 0) + sign * amount


class QuotaBook:
    """Every quota object, the trees built from them, and what each quota holds; see the module docstring."""

    def __init__(self, kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> None:
        """`kai_node_pool_label`: the label that puts a KAI queue in a node pool ("": no pools)."""
        self.kai_node_pool_label = kai_node_pool_label
        self.elastic_quotas: dict[str, ElasticQuota] = {}
        self.capacity_quotas: dict[str, CapacityElasticQuota] = {}
        self.queues: dict[str, Queue] = {}
        self.queue_refs: set[str] = set()  # Volcano PodGroups naming a queue other than `default`
        self.kai_queues: dict[str, KaiQueue] = {}
        self.kai_queue_refs: set[str] = set()  # KAI PodGroups naming a queue other than `default-queue`
        self.roots: dict[str, Quota] = {dialect: _root(dialect) for dialect in DIALECTS}
        self.quotas: dict[str, Quota] = {}  # by id, every quota of every tree (roots excluded)
        self.by_name: dict[str, dict[str, Quota]] = {dialect: {} for dialect in DIALECTS}
        self.namespace_quota: dict[str, dict[str, Quota]] = {KOORDINATOR: {}, CAPACITY: {}}
        self.problems: dict[tuple[str, str], list[Problem]] = {}
        self.problems_version = 0  # bumped whenever `problems` may have changed (ClusterState passes it on)
        self.shares: dict[str, Share] = {}
        self.members: dict[str, Membership] = {}
        self.version = 0  # bumped by every change to usage, requests or trees (the runtime cache's key)
        self.trees_version = 0  # bumped when the trees are rebuilt from changed quota objects
        self._runtime: dict[str, Resources] = {}
        self._runtime_key: tuple[int, tuple[tuple[str, int], ...], int] | None = None

    @property
    def active(self) -> bool:
        """Any quota object known, or a Volcano or KAI PodGroup naming a queue: only then are pods looked
        at (so a pod's `kai.scheduler/queue` label alone, with no quota object at all, limits nothing)."""
        return bool(self.elastic_quotas or self.capacity_quotas or self.queues or self.queue_refs
                    or self.kai_queues or self.kai_queue_refs)

    # ------------------------------------------------------------------ queries

    def quota_of(self, pod: str) -> Quota | None:
        member = self.members.get(pod)
        return self.quotas.get(member.quota) if member is not None and member.quota else None

    def refusal_of(self, pod: str) -> str:
        member = self.members.get(pod)
        return member.refusal if member is not None else ""

    def all_problems(self) -> Iterator[Problem]:
        for key in sorted(self.problems):
            yield from self.problems[key]

    def in_order(self) -> list[Quota]:
        """Every quota, each tree top down, children by name (how `quota show` and reports list them)."""
        out: list[Quota] = []

        def walk(node: Quota) -> None:
            for child in node.children:
                out.append(child)
                walk(child)

        for dialect in DIALECTS:
            walk(self.roots[dialect])
        return out

    def root_of(self, quota: Quota) -> Quota:
        return self.roots[quota.dialect]

    def runtime(self, state: ClusterState, quota: Quota) -> Resources:
        """Koordinator's runtime of `quota` (see the module docstring); a capacity quota's is what it
        could use now, first come: min(max, used + the unused part of the sum of mins)."""
        total = state.topology.root.allocatable
        kai_top = self.roots[KAI].children
        pooled = any(queue.pool for queue in kai_top)
        key = (self.version, tuple(sorted(total.items())), state.pools_version if pooled else -1)
        if key != self._runtime_key:
            self._runtime = {}
            for dialect in (KOORDINATOR, VOLCANO):
                root = self.roots[dialect]
                self._distribute(root.children, {r: total.get(r, 0) for r in _resources_below(root)})
            if not pooled:
                self._distribute(kai_top, {r: total.get(r, 0) for r in _resources_below(self.roots[KAI])})
            else:  # each KAI node pool's scheduler shares its own nodes among its own queues
                named = state.pool_allocatable()
                for node_pool in sorted({queue.pool for queue in kai_top}):
                    queues = [queue for queue in kai_top if queue.pool == node_pool]
                    room = named.get(node_pool, {}) if node_pool else {
                        r: amount - sum(totals.get(r, 0) for totals in named.values()) for r, amount in total.items()}
                    below = set().union(*(_resources_below(queue) for queue in queues))
                    self._distribute(queues, {r: room.get(r, 0) for r in below})
            self._runtime_key = key
        if quota.dialect == CAPACITY:
            pool = self.capacity_pool()
            pool_used = self.roots[CAPACITY].used
            out: Resources = {}
            for resource in sorted(quota.constrained):
                limits = []
                if resource in pool:
                    idle = max(0, pool[resource] - pool_used.get(resource, 0))
                    limits.append(quota.used.get(resource, 0) + idle)
                if resource in quota.max:
                    limits.append(quota.max[resource])
                if limits:
                    out[resource] = min(limits)
            return out
        return self._runtime.get(quota.id, {})

    def request_of(self, quota: Quota) -> Resources:
        """Koordinator's request of `quota`, per resource it counts: its pods' requests (pending ones
        included), a parent's being its children's each capped at their max; capped at its own max."""
        return {resource: _request_of(quota, resource) for resource in sorted(constrained_in(quota))}

    def usage_of(self, keys: Iterable[str]) -> tuple[dict[str, Resources], dict[str, Resources]]:
        """Per quota id (every level of each pod's path), what the pods `keys` count in `used`, and the
        part of it held by non-preemptible pods (each pod once)."""
        used: dict[str, Resources] = {}
        used_np: dict[str, Resources] = {}
        for key in dict.fromkeys(keys):
            share = self.shares.get(key)
            if share is None or not share.used:
                continue
            node: Quota | None = self.quotas.get(share.quota)
            while node is not None:
                add_into(used.setdefault(node.id, {}), share.requests)
                if not share.preemptible:
                    add_into(used_np.setdefault(node.id, {}), share.requests)
                node = node.parent
        return used, used_np

    def capacity_pool(self) -> Resources:
        """The sum of the capacity scheduling quotas' mins: all of them together use no more."""
        pool: Resources = {}
        for quota in self.roots[CAPACITY].children:
            for resource, amount in quota.min.items():
                pool[resource] = pool.get(resource, 0) + amount
        return pool

    def preemptible(self, pod: PodInfo) -> bool:
        """May another quota reclaim this pod? Koordinator: unless labelled preemptible "false";
        Volcano: only when marked `volcano.sh/preemptable: "true"`; KAI: unless its PodGroup is
        non-preemptible; capacity scheduling: always. (As `settle` last found it.)"""
        share = self.shares.get(pod.key)
        return share is not None and share.preemptible

    # ------------------------------------------------------------------ the fold

    def observe(self, state: ClusterState, event: Event) -> None:
        """Fold one event that `state` has just applied."""
        handler = _HANDLERS[type(event)]
        if handler is not None:
            handler(self, state, event)

    def _pod_event(self, state: ClusterState, event: Any) -> None:
        if not self.active:
            return
        key = event.pod if not isinstance(event, PodUpserted | PodDeleted) else (
            event.key if isinstance(event, PodDeleted) else
            object_key(event.pod.metadata.namespace, event.pod.metadata.name))
        self.settle(state, key)

    def _priority_class_event(self, state: ClusterState, event: Any) -> None:
        """A KAI job's preemptibility may follow a PriorityClass (`ClusterState.gang_preemptable`), and every
        pod's priority does: the pods of KAI queues are settled again (PriorityClasses change rarely)."""
        if not self.active or not self.kai_queues:
            return
        for key in sorted(self.shares):
            share = self.shares[key]
            quota = self.quotas.get(share.quota)
            if quota is not None and quota.dialect == KAI:
                self.settle(state, key)

    def _gang_event(self, state: ClusterState, event: Any) -> None:
        if isinstance(event, VolcanoPodGroupUpserted | PodGroupUpserted | SchedulerPluginsPodGroupUpserted
                      | KubePodGroupUpserted | KaiPodGroupUpserted):
            key = object_key(event.pod_group.metadata.namespace, event.pod_group.metadata.name)
        else:
            key = event.key
        was_active = self.active
        group = state.volcano_pod_groups.get(key) if _volcano_gang(state, key) else None
        if group is not None and (group.spec.queue or DEFAULT_QUEUE) != DEFAULT_QUEUE:
            self.queue_refs.add(key)  # it names a queue: that queue must exist, Queue objects or not
        else:
            self.queue_refs.discard(key)
        kai_group = state.kai_pod_groups.get(key) if _kai_gang(state, key) else None
        if kai_group is not None and (kai_group.spec.queue or KAI_DEFAULT_QUEUE) != KAI_DEFAULT_QUEUE:
            self.kai_queue_refs.add(key)  # likewise, KAI Queue objects or not
        else:
            self.kai_queue_refs.discard(key)
        if self.active != was_active:
            self.rebuild(state)
            return
        if not self.active:
            return
        gang = state.gangs.get(key)
        if gang is not None:
            for member in sorted(gang.members):
                self.settle(state, member)
        self._gang_problems(state, key)

    def object_changed(self, state: ClusterState, event: Any) -> None:
        """Fold an ElasticQuota or (Volcano or KAI) Queue upsert or deletion (`ClusterState` hands them over)."""
        if isinstance(event, ElasticQuotaUpserted):
            changed = _put(self.elastic_quotas, event.quota)
        elif isinstance(event, CapacityElasticQuotaUpserted):
            changed = _put(self.capacity_quotas, event.quota)
        elif isinstance(event, QueueUpserted):
            changed = _put(self.queues, event.queue)
        elif isinstance(event, KaiQueueUpserted):
            changed = _put(self.kai_queues, event.queue)
        elif isinstance(event, KaiQueueDeleted):
            changed = self.kai_queues.pop(event.name, None) is not None
        elif isinstance(event, ElasticQuotaDeleted):
            changed = self.elastic_quotas.pop(event.key, None) is not None
        elif isinstance(event, CapacityElasticQuotaDeleted):
            changed = self.capacity_quotas.pop(event.key, None) is not None
        else:
            changed = self.queues.pop(event.name, None) is not None
        if changed:
            self.rebuild(state)

    def rebuild(self, state: ClusterState) -> None:
        """Build the trees from the objects again and recount every pod (quota objects change rarely)."""
        self.problems = {}
        self.problems_version += 1
        self.roots = {dialect: _root(dialect) for dialect in DIALECTS}
        self.quotas = {}
        self.by_name = {dialect: {} for dialect in DIALECTS}
        self.namespace_quota = {KOORDINATOR: {}, CAPACITY: {}}
        self._build_koordinator()
        self._build_capacity()
        self._build_volcano()
        self._build_kai()
        self.shares = {}
        self.members = {}
        self.version += 1
        self.trees_version += 1
        if not self.active:
            return
        for key in sorted(state.pods):
            self.settle(state, key)
        for key in sorted(state.volcano_pod_groups):
            self._gang_problems(state, key)
        for key in sorted(state.kai_pod_groups):
            self._gang_problems(state, key)

    # ------------------------------------------------------------------ accounting

    def settle(self, state: ClusterState, key: str) -> None:
        """Make the pod's share (and membership) what its state says now."""
        pod = state.pods.get(key)
        if pod is None:
            self._set_share(key, None)
            self.members.pop(key, None)
            self._set_problems("Pod", key, [])
            return
        member, problems = self._resolve(state, pod)
        if member.quota or member.refusal:
            self.members[key] = member
        else:
            self.members.pop(key, None)
        self._set_problems("Pod", key, problems if pod.ours else [])
        quota = self.quotas.get(member.quota) if member.quota else None
        if quota is None:
            self._set_share(key, None)
            return
        gone = pod.removed or pod.terminal
        running = not gone and bool(pod.placed_node)
        reserved = not gone and not running and bool(pod.nominated_node) and not pod.terminating
        live = (not gone and not pod.terminating) or running
        requests = tuple(sorted((r, a) for r, a in counted_requests(quota.dialect, pod.requests).items()
                                if a and r in constrained_in(quota)))
        share = Share(quota=quota.id, requests=requests, used=running or reserved, running=running,
                      live=live, preemptible=_preemptible(state, pod, quota.dialect))
        self._set_share(key, share)

    def _set_share(self, key: str, share: Share | None) -> None:
        old = self.shares.get(key)
        if old == share:
            return
        if old is not None:
            self._apply_share(old, -1)
            del self.shares[key]
        if share is not None:
            self._apply_share(share, 1)
            self.shares[key] = share
        self.version += 1

    def _apply_share(self, share: Share, sign: int) -> None:
        quota: Quota | None = self.quotas.get(share.quota)
        requests = share.requests
        while quota is not None:
            if share.used:
                add_into(quota.used, requests, sign)
                if not share.preemptible:
                    add_into(quota.used_np, requests, sign)
            if share.running:
                add_into(quota.running, requests, sign)
            if share.live:
                add_into(quota.requested, requests, sign)
            quota = quota.parent

    # ------------------------------------------------------------------ membership

    def _resolve(self, state: ClusterState, pod: PodInfo) -> tuple[Membership, list[Problem]]:
        meta = pod.obj.metadata
        name = meta.labels.get(QUOTA_NAME_LABEL, "")
        field = f"metadata.labels[{QUOTA_NAME_LABEL}]"
        if name:
            quota = self.by_name[KOORDINATOR].get(name)
            if quota is None:
                why = f"quota {name} not found (pod label {QUOTA_NAME_LABEL})"
                return Membership(refusal=why), [Problem("Pod", pod.key, field, f"ElasticQuota {name!r} not found; "
                                                         "the pod is not placed until it exists", QUOTA_NOT_FOUND)]
            if quota.is_parent:
                why = f"quota {name} is a parent quota; pods must name a leaf quota"
                return Membership(quota=quota.id, refusal=why), [
                    Problem("Pod", pod.key, field, f"ElasticQuota {name!r} is a parent quota; the pod is not placed")]
            return Membership(quota=quota.id), []
        gang = pod.gang
        info = state.gangs.get(gang) if gang else None
        if info is not None and info.spec is not None and info.spec.dialect == "volcano" \
                and gang in state.volcano_pod_groups:
            queue_name = state.volcano_pod_groups[gang].spec.queue or DEFAULT_QUEUE
            queue = self.by_name[VOLCANO].get(queue_name)
            if queue is not None:
                if queue.is_parent:
                    return Membership(quota=queue.id, refusal=f"queue {queue_name} is a parent queue; "
                                                               "jobs go to leaf queues"), []
                return Membership(quota=queue.id), []
            if queue_name != DEFAULT_QUEUE:
                return Membership(refusal=f"queue {queue_name} not found (PodGroup {gang} spec.queue)"), []
        label = meta.labels.get(KAI_QUEUE_LABEL, "")
        if info is not None and info.spec is not None and info.spec.dialect == KAI and gang in state.kai_pod_groups:
            queue_name = state.kai_pod_groups[gang].spec.queue or label or KAI_DEFAULT_QUEUE
            where = f"PodGroup {gang} spec.queue" if state.kai_pod_groups[gang].spec.queue else (
                f"pod label {KAI_QUEUE_LABEL}" if label else "")
            member = self._kai_membership(queue_name, where, info.spec.kai_node_pool or "")
            if member is not None:
                return member, []
        elif label:
            member = self._kai_membership(label, f"pod label {KAI_QUEUE_LABEL}",
                                          self._pool_of(meta.labels))
            if member is not None:
                problems = [] if self.by_name[KAI].get(label) is not None else [
                    Problem("Pod", pod.key, f"metadata.labels[{KAI_QUEUE_LABEL}]",
                            f"KAI Queue {shown(label)} not found; the pod is not placed until it exists",
                            QUOTA_NOT_FOUND)]
                return member, problems
        namespace = meta.namespace
        for dialect in (KOORDINATOR, CAPACITY):
            quota = self.namespace_quota[dialect].get(namespace)
            if quota is not None:
                return Membership(quota=quota.id), []
        return NO_MEMBERSHIP, []

    def _pool_of(self, labels: Mapping[str, str]) -> str:
        """The KAI node pool an object's `labels` put it in ("": the default pool)."""
        return labels.get(self.kai_node_pool_label, "") if self.kai_node_pool_label else ""

    def _kai_membership(self, queue_name: str, where: str, pool: str) -> Membership | None:
        """A pod's membership in the KAI queue `queue_name`, named at `where`, for a job in node pool `pool`; None
        when that is a missing `default-queue` that nothing named (no quota then, as a missing Volcano
        `default`)."""
        queue = self.by_name[KAI].get(queue_name)
        if queue is not None:
            if queue.pool != pool:
                return Membership(refusal=_other_pool(queue, pool, self.kai_node_pool_label))
            if queue.is_parent:
                return Membership(quota=queue.id, refusal=f"KAI queue {shown(queue_name)} is a parent queue; "
                                                          "jobs go to leaf queues")
            return Membership(quota=queue.id)
        if not where and queue_name == KAI_DEFAULT_QUEUE:
            return None
        return Membership(refusal=f"KAI queue {shown(queue_name)} not found ({where})")

    def _gang_problems(self, state: ClusterState, key: str) -> None:
        self._kai_gang_problems(state, key)
        group = state.volcano_pod_groups.get(key) if _volcano_gang(state, key) else None
        problems: list[Problem] = []
        if group is not None and self.active:
            queue_name = group.spec.queue or DEFAULT_QUEUE
            queue = self.by_name[VOLCANO].get(queue_name)
            if queue is None and queue_name != DEFAULT_QUEUE:
                problems.append(Problem(VOLCANO_POD_GROUP_KIND, key, "spec.queue",
                                        f"queue {queue_name!r} not found; its pods are not placed until it exists",
                                        QUOTA_NOT_FOUND))
            elif queue is not None and queue.is_parent:
                problems.append(Problem(VOLCANO_POD_GROUP_KIND, key, "spec.queue",
                                        f"queue {queue_name!r} is a parent queue; its pods are not placed"))
        self._set_problems(VOLCANO_POD_GROUP_KIND, key, problems)

    def _kai_gang_problems(self, state: ClusterState, key: str) -> None:
        group = state.kai_pod_groups.get(key) if _kai_gang(state, key) else None
        problems: list[Problem] = []
        if group is not None and self.active and group.spec.queue:
            queue = self.by_name[KAI].get(group.spec.queue)
            if queue is None and group.spec.queue != KAI_DEFAULT_QUEUE:
                problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, "spec.queue",
                                        f"KAI Queue {shown(group.spec.queue)} not found; its pods are not placed until "
                                        "it exists", QUOTA_NOT_FOUND))
            elif queue is not None and queue.pool != (pool := self._pool_of(group.metadata.labels)):
                why = _other_pool(queue, pool, self.kai_node_pool_label)
                problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, "spec.queue",
                                        f"{why}: its pods are not placed until the two are in one pool"))
            elif queue is not None and queue.is_parent:
                problems.append(Problem(KAI_POD_GROUP_PROBLEM, key, "spec.queue",
                                        f"KAI Queue {shown(group.spec.queue)} is a parent queue; its pods are not "
                                        "placed"))
        # the book's problems are apart from the fold's own (the gang's): `ClusterState.problems_of` joins them
        self._set_problems(KAI_POD_GROUP_PROBLEM, key, problems)

    def _set_problems(self, kind: str, key: str, problems: list[Problem]) -> None:
        if kind in QUOTA_KINDS:
            problems = [p if p.reason else msgspec.structs.replace(p, reason=INVALID_QUOTA) for p in problems]
        if problems:
            if self.problems.get((kind, key)) != problems:
                self.problems[(kind, key)] = problems
                self.problems_version += 1
        elif self.problems.pop((kind, key), None) is not None:
            self.problems_version += 1

    # ------------------------------------------------------------------ building the trees

    def _build_koordinator(self) -> None:
        kind = KOORDINATOR_KIND
        parents: dict[str, str] = {}
        for key in sorted(self.elastic_quotas):
            obj = self.elastic_quotas[key]
            meta = obj.metadata
            problems: list[Problem] = []
            if meta.name in self.by_name[KOORDINATOR]:
                first = self.by_name[KOORDINATOR][meta.name]
                self._set_problems(kind, key, [Problem(kind, key, "metadata.name",
                                                       f"another ElasticQuota ({first.key}) has this name; "
                                                       "quotas are known by name, so this one is ignored")])
                continue
            quota = Quota(KOORDINATOR, meta.name, key, kind)
            quota.uid = meta.uid
            labels = meta.labels
            quota.is_parent = labels.get(QUOTA_IS_PARENT_LABEL, "").lower() == "true"
            quota.min, quota.max = self._limits(obj.spec.min, obj.spec.max, kind, key, problems)
            raw_weight = meta.annotations.get(QUOTA_SHARED_WEIGHT_ANNOTATION)
            if raw_weight is not None:
                quota.weight = self._shared_weight(raw_weight, kind, key, problems)
            quota.guarded = dict(quota.min)
            if labels.get(QUOTA_ALLOW_LENT_LABEL, "").lower() == "false":
                quota.reserved = dict(quota.min)
            quota.constrained = frozenset(quota.min) | frozenset(quota.max)
            self.by_name[KOORDINATOR][meta.name] = quota
            self.quotas[quota.id] = quota
            parents[quota.id] = labels.get(QUOTA_PARENT_LABEL, "")
            self._set_problems(kind, key, problems)
        self._link(KOORDINATOR, parents, KOORDINATOR_ROOT_NAMES, f"metadata.labels[{QUOTA_PARENT_LABEL}]")
        for name in sorted(self.by_name[KOORDINATOR]):
            quota = self.by_name[KOORDINATOR][name]
            if quota.children and not quota.is_parent:
                self._add_problem(quota, f"metadata.labels[{QUOTA_IS_PARENT_LABEL}]",
                                  "has child quotas but is not labelled \"true\"; treated as a parent")
                quota.is_parent = True
            namespace = quota.key.partition("/")[0] if "/" in quota.key else ""
            if not quota.is_parent and namespace not in self.namespace_quota[KOORDINATOR]:
                self.namespace_quota[KOORDINATOR][namespace] = quota

    def _build_capacity(self) -> None:
        kind = CAPACITY_KIND
        root = self.roots[CAPACITY]
        for key in sorted(self.capacity_quotas):
            obj = self.capacity_quotas[key]
            meta = obj.metadata
            namespace = meta.namespace
            problems: list[Problem] = []
            if namespace in self.namespace_quota[CAPACITY]:
                first = self.namespace_quota[CAPACITY][namespace]
                self._set_problems(kind, key, [Problem(kind, key, "metadata.namespace",
                                                       f"namespace {namespace} already has ElasticQuota {first.key}; "
                                                       "one per namespace, so this one is ignored")])
                continue
            quota = Quota(CAPACITY, key, key, kind)
            quota.uid = meta.uid
            quota.min, quota.max = self._limits(obj.spec.min, obj.spec.max, kind, key, problems)
            quota.guarded = dict(quota.min)
            quota.constrained = frozenset(quota.min) | frozenset(quota.max)
            quota.parent = root
            quota.depth = 1
            root.children.append(quota)
            self.by_name[CAPACITY][key] = quota
            self.quotas[quota.id] = quota
            self.namespace_quota[CAPACITY][namespace] = quota
            self._set_problems(kind, key, problems)

    def _build_volcano(self) -> None:
        kind = QUEUE_KIND
        parents: dict[str, str] = {}
        for name in sorted(self.queues):
            if name == VOLCANO_ROOT_QUEUE:
                continue  # Volcano's own root queue: the tree's root stands for it
            obj = self.queues[name]
            spec = obj.spec
            problems: list[Problem] = []
            quota = Quota(VOLCANO, name, name, kind)
            quota.uid = obj.metadata.uid
            deserved = _quantities(spec.deserved, kind, name, "spec.deserved", problems)
            guarantee = _quantities(spec.guarantee.resource, kind, name, "spec.guarantee.resource", problems)
            capability = _quantities(spec.capability, kind, name, "spec.capability", problems)
            for resource, amount in sorted(deserved.items()):
                if resource in capability and amount > capability[resource]:
                    problems.append(Problem(kind, name, f"spec.deserved[{resource}]",
                                            f"is above spec.capability[{resource}]; cut to it"))
                    deserved[resource] = capability[resource]
            for resource, amount in sorted(guarantee.items()):
                if resource in capability and amount > capability[resource]:
                    problems.append(Problem(kind, name, f"spec.guarantee.resource[{resource}]",
                                            f"is above spec.capability[{resource}]; cut to it"))
                    guarantee[resource] = capability[resource]
            quota.max = capability
            quota.reserved = guarantee
            quota.guarded = {r: max(deserved.get(r, 0), guarantee.get(r, 0)) for r in set(deserved) | set(guarantee)}
            if guarantee and not deserved:
                quota.guarded_word = "guarantee"
            quota.min = dict(quota.guarded)
            weight = spec.weight if spec.weight is not None else DEFAULT_VOLCANO_WEIGHT
            if weight < 1:
                problems.append(Problem(kind, name, "spec.weight", f"{weight} is below 1; using 1"))
                weight = 1
            quota.weight_default = weight
            quota.reclaimable = spec.reclaimable is not False
            state_name = obj.status.state or spec.state
            quota.closed = state_name in CLOSED_STATES
            quota.constrained = frozenset(quota.min) | frozenset(quota.max)
            self.by_name[VOLCANO][name] = quota
            self.quotas[quota.id] = quota
            parents[quota.id] = spec.parent
            self._set_problems(kind, name, problems)
        self._link(VOLCANO, parents, frozenset({"", VOLCANO_ROOT_QUEUE}), "spec.parent")
        # Volcano shares every resource between queues by weight, named in a queue or not: each
        # queue counts every resource some queue of the tree names (a queue naming none counts all
        # that others limit, which is what makes an unlimited queue's usage reclaimable).
        named: frozenset[str] = frozenset()
        for quota in self.by_name[VOLCANO].values():
            named |= quota.constrained
        for quota in self.by_name[VOLCANO].values():
            quota.is_parent = bool(quota.children)
            quota.constrained = named

    def _build_kai(self) -> None:
        kind = KAI_QUEUE_KIND
        parents: dict[str, str] = {}
        for name in sorted(self.kai_queues):
            spec = self.kai_queues[name].spec
            problems: list[Problem] = []
            quota = Quota(KAI, name, name, kind)
            quota.uid = self.kai_queues[name].metadata.uid
            quota.pool = self._pool_of(self.kai_queues[name].metadata.labels)
            resources = spec.resources
            if resources is None:
                problems.append(Problem(kind, name, "spec.resources", "is absent, which KAI reads as a limit of 0 for "
                                        "cpu, memory and gpu: no pod of this queue, nor of a queue under it, is "
                                        "placed (write `limit: -1` for no limit)"))
            for field, resource, factor in KAI_RESOURCES:
                given = getattr(resources, field) if resources is not None else None
                if resources is not None and given is None:
                    problems.append(Problem(kind, name, f"spec.resources.{field}", f"is absent, which KAI reads as a "
                                            f"limit of 0: no pod of this queue, nor of a queue under it, that asks "
                                            f"for {resource} is placed (write `limit: -1` for no limit)"))
                _kai_resource(quota, given or KaiQueueResource(), f"spec.resources.{field}", resource, factor,
                              given is not None, problems)
            quota.guarded = dict(quota.min)
            # every KAI queue counts all three: an absent limit is a limit of 0 (module docstring)
            quota.constrained = frozenset(resource for _, resource, _ in KAI_RESOURCES)
            quota.share_priority = spec.priority if spec.priority is not None else KAI_DEFAULT_QUEUE_PRIORITY
            quota.preempt_min_runtime = _min_runtime(spec.preempt_min_runtime, kind, name, "spec.preemptMinRuntime",
                                                     problems)
            quota.reclaim_min_runtime = _min_runtime(spec.reclaim_min_runtime, kind, name, "spec.reclaimMinRuntime",
                                                     problems)
            self.by_name[KAI][name] = quota
            self.quotas[quota.id] = quota
            parents[quota.id] = spec.parent_queue
            self._set_problems(kind, name, problems)
        self._link(KAI, parents, frozenset({""}), "spec.parentQueue")
        for quota in self.by_name[KAI].values():
            quota.is_parent = bool(quota.children)  # KAI places jobs in leaf queues only
            parent = quota.parent
            if parent is not None and parent is not self.roots[KAI] and parent.pool != quota.pool:
                why = _other_pool(parent, quota.pool, self.kai_node_pool_label)
                self._add_problem(quota, "spec.parentQueue", f"{why}; its share is still counted under "
                                  f"{shown(parent.name)}")

    def _limits(self, raw_min: Mapping[str, str], raw_max: Mapping[str, str], kind: str, key: str,
                problems: list[Problem]) -> tuple[Resources, Resources]:
        low = _quantities(raw_min, kind, key, "spec.min", problems)
        high = _quantities(raw_max, kind, key, "spec.max", problems)
        for resource, amount in sorted(low.items()):
            if resource in high and amount > high[resource]:
                problems.append(Problem(kind, key, f"spec.min[{resource}]",
                                        f"is above spec.max[{resource}]; cut to max"))
                low[resource] = high[resource]
        return low, high

    def _shared_weight(self, raw: str, kind: str, key: str, problems: list[Problem]) -> Resources:
        field = f"metadata.annotations[{QUOTA_SHARED_WEIGHT_ANNOTATION}]"
        try:
            decoded = msgspec.json.decode(raw.encode(), type=dict[str, str | int | float])
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            problems.append(Problem(kind, key, field, f"is not a JSON resource list: {error}; max is the weight"))
            return {}
        weights = _quantities({r: str(v) for r, v in decoded.items()}, kind, key, field, problems)
        return {r: w for r, w in weights.items() if w > 0}

    def _link(self, dialect: str, parents: dict[str, str], root_names: frozenset[str], field: str) -> None:
        """Hang every quota under its parent; unknown parents and loops hang under the root."""
        root = self.roots[dialect]
        by_name = self.by_name[dialect]
        resolved: dict[str, Quota] = {}
        for quota_id in sorted(parents):
            quota = self.quotas[quota_id]
            name = parents[quota_id]
            if name in root_names:
                resolved[quota_id] = root
                continue
            parent = by_name.get(name)
            if parent is None or parent is quota:
                what = "is the quota itself" if parent is quota else "does not exist"
                self._add_problem(quota, field, f"parent {name!r} {what}; it is a top quota instead")
                resolved[quota_id] = root
                continue
            resolved[quota_id] = parent
        # a chain of parents that comes back to itself: every quota on the loop becomes a top quota
        for quota_id in sorted(resolved):
            seen: list[str] = []
            current = quota_id
            while current not in seen:
                seen.append(current)
                parent = resolved[current]
                if parent is root:
                    break
                current = parent.id
            else:
                loop = seen[seen.index(current):]
                names = " -> ".join(self.quotas[q].name for q in [*loop, loop[0]])
                for member in loop:
                    if resolved[member] is not root:
                        self._add_problem(self.quotas[member], field,
                                          f"the parent chain loops ({names}); it is a top quota instead")
                        resolved[member] = root
        for quota_id in sorted(resolved):
            quota = self.quotas[quota_id]
            parent = resolved[quota_id]
            quota.parent = parent
            parent.children.append(quota)

        def depth(node: Quota, level: int) -> None:
            node.depth = level
            node.children.sort(key=lambda q: q.name)
            for child in node.children:
                depth(child, level + 1)

        depth(root, 0)

    def _add_problem(self, quota: Quota, field: str, message: str) -> None:
        self.problems.setdefault((quota.kind, quota.key), []).append(
            Problem(quota.kind, quota.key, field, message, INVALID_QUOTA))
        self.problems_version += 1

    # ------------------------------------------------------------------ runtime

    def _distribute(self, children: list[Quota], runtime: Mapping[str, int]) -> None:
        """Split `runtime` (their parent's, per resource) among `children`, then recurse."""
        if not children:
            return
        shares: dict[str, Resources] = {child.id: {} for child in children}
        for resource in sorted(runtime):
            wanted = [_request_of(child, resource) for child in children]
            given = _water_fill(runtime[resource], children, wanted, resource)
            for child, amount in zip(children, given, strict=True):
                shares[child.id][resource] = amount
        for child in children:
            self._runtime[child.id] = shares[child.id]
            self._distribute(child.children, shares[child.id])

    def canonical(self) -> dict[str, Any]:
        """What the book knows, for `ClusterState.canonical()`: usage per quota and memberships."""
        return {
            "quotas": {q.id: (sorted((r, a) for r, a in q.used.items() if a),
                              sorted((r, a) for r, a in q.requested.items() if a)) for q in self.in_order()},
            "members": sorted((k, m.quota, m.refusal) for k, m in self.members.items()),
        }


_QuotaObject = TypeVar("_QuotaObject", ElasticQuota, CapacityElasticQuota, Queue, KaiQueue)


def _put(objects: dict[str, _QuotaObject], obj: _QuotaObject) -> bool:
    """Store the object; whether anything the trees read changed (a status write, ours or another
    scheduler's, changes nothing: the trees are not rebuilt for it)."""
    meta = obj.metadata
    key = object_key(meta.namespace, meta.name)
    old = objects.get(key)
    objects[key] = obj
    return old is None or _shape(old) != _shape(obj)


def _shape(obj: ElasticQuota | CapacityElasticQuota | Queue | KaiQueue) -> tuple[object, ...]:
    meta = obj.metadata
    if isinstance(obj, Queue):
        return (meta.uid, obj.spec, obj.status.state)
    if isinstance(obj, KaiQueue):
        return (meta.uid, meta.labels, obj.spec)  # the labels: its node pool
    # the runtime and request annotations are the scheduler's own output, not read by the trees
    return (meta.uid, meta.labels, meta.annotations.get(QUOTA_SHARED_WEIGHT_ANNOTATION), obj.spec)


def _other_pool(queue: Quota, pool: str, label: str) -> str:
    """Why a job in KAI node pool `pool` cannot run in `queue`, of another pool: KAI's scheduler for a pool sees
    only the queues labelled with it."""
    return (f"KAI queue {shown(queue.name)} is in node pool {queue.pool or KAI_DEFAULT_NODE_POOL} (its label "
            f"{label}), the job in {pool or KAI_DEFAULT_NODE_POOL}, whose KAI scheduler does not see "
            "that queue")


def _volcano_gang(state: ClusterState, key: str) -> bool:
    """Is the gang `key` defined by its Volcano PodGroup (the first source of a gang wins, state/gangs.py)?"""
    info = state.gangs.get(key)
    return info is not None and info.spec is not None and info.spec.dialect == "volcano"


def _kai_gang(state: ClusterState, key: str) -> bool:
    """Is the gang `key` defined by its KAI PodGroup?"""
    info = state.gangs.get(key)
    return info is not None and info.spec is not None and info.spec.dialect == KAI


def _kai_resource(quota: Quota, given: KaiQueueResource, field: str, resource: str, factor: int, stated: bool,
                  problems: list[Problem]) -> None:
    """One resource of a KAI Queue into `quota`'s min, max and weight, as KAI reads it (module docstring)."""
    kind, name = quota.kind, quota.name

    def amount(value: float | None, sub: str, unlimited_ok: bool) -> float:
        """The value in KAI's unit, KAI_UNLIMITED for -1 where that means unlimited; bad values count as 0."""
        if value is None:
            return 0.0
        if unlimited_ok and value == KAI_UNLIMITED:
            return KAI_UNLIMITED
        if not math.isfinite(value) or abs(value) > _KAI_LARGEST:
            problems.append(Problem(kind, name, f"{field}.{sub}", f"{value} is no amount; counted as 0",
                                    INVALID_QUANTITY))
            return 0.0
        if value < 0:
            only = "only -1 (unlimited) may be" if unlimited_ok else "it may not be"
            problems.append(Problem(kind, name, f"{field}.{sub}", f"{value:g} is negative ({only}); counted as 0"))
            return 0.0
        return value

    limit = amount(given.limit, "limit", True)
    quota_value = amount(given.quota, "quota", True)
    weight = amount(given.over_quota_weight, "overQuotaWeight", False)
    if stated and given.limit is None:
        problems.append(Problem(kind, name, f"{field}.limit", f"is absent, which KAI reads as 0: no pod of this queue "
                                f"that asks for {resource} is placed (-1 is no limit)"))
    if given.lending_limit is not None:
        problems.append(Problem(kind, name, f"{field}.lendingLimit", f"{given.lending_limit:g} is read but not "
                                "implemented: all of the unused quota is lent", reason=UNSUPPORTED_FIELD))
    if limit != KAI_UNLIMITED:
        quota.max[resource] = round(limit * factor) if limit else 0
    if quota_value == KAI_UNLIMITED:  # deserves all it asks for, up to its limit
        quota.min[resource] = quota.max.get(resource, UNLIMITED_MIN)
    elif quota_value:
        quota.min[resource] = round(quota_value * factor)
        cap = quota.max.get(resource)
        if cap is not None and quota.min[resource] > cap:
            if given.limit is not None:  # an absent limit is reported as such, above
                problems.append(Problem(kind, name, f"{field}.quota", f"{quota_value:g} is above {field}.limit "
                                        f"{limit:g}; cut to it"))
            quota.min[resource] = cap
    quota.weight[resource] = round(weight * 1000) if weight else 0


def _preemptible(state: ClusterState, pod: PodInfo, dialect: str) -> bool:
    if dialect == KAI:
        info = state.gangs.get(pod.gang) if pod.gang else None
        spec = info.spec if info is not None else None
        if spec is not None and spec.dialect == KAI:
            return state.gang_preemptable(spec)
        # a pod in a KAI queue by its label: KAI's pod-grouper would give it a PodGroup of its own priority
        return pod.priority < NON_PREEMPTIBLE_PRIORITY and (spec is None or spec.preemptable)
    meta = pod.obj.metadata
    if dialect == KOORDINATOR:
        return meta.labels.get(QUOTA_PREEMPTIBLE_LABEL, "").lower() != "false"
    if dialect == VOLCANO:
        mark = meta.annotations.get(VOLCANO_PREEMPTABLE_ANNOTATION) or meta.labels.get(
            VOLCANO_PREEMPTABLE_ANNOTATION, "")
        return mark.lower() == "true"
    return True


def _min_runtime(value: str | None, kind: str, key: str, field: str, problems: list[Problem]) -> float | None:
    """A KAI Queue's `preemptMinRuntime` / `reclaimMinRuntime` in seconds (None: unset, or unusable and
    reported)."""
    if value is None:
        return None
    seconds = go_duration_seconds(value)
    if seconds is None:
        problems.append(Problem(kind, key, field, f"{shown(value)} is not a duration as KAI reads one (Go's form, "
                                "such as 10m, 1h30m or 90s): not used, as if unset"))
        return None
    if seconds < 0:
        problems.append(Problem(kind, key, field, f"{shown(value)} is negative: no job is kept by it, as with 0"))
        return 0.0
    return seconds


def preempt_min_runtime(quota: Quota) -> float:
    """How long a job of the KAI queue `quota` runs before priority preemption inside its queue may take it,
    in seconds: the first `preemptMinRuntime` said from the queue up its parents, else 0 (KAI's minruntime
    plugin, its scheduler's default)."""
    for level in quota.path():
        if level.preempt_min_runtime is not None:
            return level.preempt_min_runtime
    return 0.0


def reclaim_min_runtime(reclaimer: Quota | None, victim: Quota) -> float:
    """How long a job of the KAI queue `victim` runs before a job of `reclaimer` (another queue) may reclaim it,
    in seconds, resolved as KAI's minruntime plugin does by default (its `lca` method): from the victim's
    ancestor just below the lowest queue both are under (the victim's top queue when none is), up its
    parents, the first `reclaimMinRuntime` said, else 0. So a setting counts only against reclaimers from
    outside the branch it is on."""
    path = victim.path()  # the victim's queue first, its top queue last
    above = {level.id for level in reclaimer.path()} if reclaimer is not None else set()
    start = len(path) - 1
    for depth, level in enumerate(path):
        if level.id in above:
            start = max(depth - 1, 0)
            break
    for level in path[start:]:
        if level.reclaim_min_runtime is not None:
            return level.reclaim_min_runtime
    return 0.0


def counted_requests(dialect: str, requests: Mapping[str, int]) -> Mapping[str, int]:
    """What a quota of `dialect` counts of a pod's `requests`: the requests themselves, but for KAI, which
    counts each MIG device `nvidia.com/mig-<X>g.<Y>gb` as X GPUs of its queue's gpu quota and limit
    (KAI's docs/queues: "a `mig-7g.*` device counts as 7"), so MIG pods cannot pass a queue's GPU limit."""
    if dialect != KAI:
        return requests
    extra = 0
    for name, amount in requests.items():
        if amount > 0 and name.startswith(MIG_PREFIX):
            found = _MIG_SLICES.match(name, len(MIG_PREFIX))
            if found is not None:
                extra += int(found.group(1)) * amount
    if not extra:
        return requests
    counted = dict(requests)
    counted[GPU_RESOURCE] = counted.get(GPU_RESOURCE, 0) + extra
    return counted


def constrained_in(quota: Quota) -> frozenset[str]:
    """Resources counted for a pod of `quota`: those it or an ancestor names (a parent may limit more)."""
    names: frozenset[str] = frozenset()
    node: Quota | None = quota
    while node is not None:
        names |= node.constrained
        node = node.parent
    return names


def _resources_below(quota: Quota) -> set[str]:
    names: set[str] = set(quota.constrained)
    for child in quota.children:
        names |= _resources_below(child)
    return names


def _request_of(quota: Quota, resource: str) -> int:
    """Koordinator's request of a quota: a leaf's pods, a parent's children each capped at their max."""
    if quota.children:
        wanted = sum(min(_request_of(child, resource), child.max.get(resource, 1 << 62)) for child in quota.children)
    else:
        wanted = quota.requested.get(resource, 0)
    return min(wanted, quota.max.get(resource, 1 << 62))


def _water_fill(total: int, children: list[Quota], wanted: list[int], resource: str) -> list[int]:
    """Each child's part of `total`: its request up to min first (reserved min whatever it asks),
    scaled down when the mins do not fit, then the rest by weight, capped at each request, to the
    children of the highest share priority first (KAI's queue priority: the next level gets what they
    leave); a share left over by a child that needs less goes round again to the others. Shares are
    whole units handed by largest remainder, so the parts always sum to what was shared."""
    base = [max(min(w, c.min.get(resource, 0)), c.reserved.get(resource, 0)) for c, w in zip(children, wanted,
                                                                                             strict=True)]
    floor = sum(base)
    if floor > total:
        base = _apportion(total, base) if floor else base
    given = list(base)
    remaining = total - sum(given)
    for level in sorted({child.share_priority for child in children}, reverse=True):
        hungry = [i for i, w in enumerate(wanted) if w > given[i] and children[i].share_priority == level]
        while remaining > 0 and hungry:
            shares = _apportion(remaining, [children[i].weight_of(resource) for i in hungry])
            handed = 0
            for i, share in zip(hungry, shares, strict=True):
                add = min(share, wanted[i] - given[i])
                given[i] += add
                handed += add
            if handed == 0:
                break
            remaining -= handed
            hungry = [i for i in hungry if wanted[i] > given[i]]
    return given


def _apportion(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights`, in whole units, by largest remainder (ties: first)."""
    weight_sum = sum(weights)
    if weight_sum <= 0:
        return [0] * len(weights)
    parts = [total * w // weight_sum for w in weights]
    left = total - sum(parts)
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % weight_sum), i))
    for i in order[:left]:
        parts[i] += 1
    return parts


_Handler = Callable[[QuotaBook, "ClusterState", Any], None]
# Event type -> what it changes in the book (exhaustive, events.dispatch). Nodes change only the
# runtime's total, which `runtime()` reads from the tree each time; decisions about gangs, topology
# and priorities change nothing here.
_HANDLERS: dict[type, _Handler | None] = exhaustive("the quota fold", {
    **each((PodUpserted, PodDeleted, PodAssumed, PodForgotten, PodBound, BindFailed, PodNominated,
            NominationCleared), QuotaBook._pod_event),
    **each(POD_GROUP_EVENTS, QuotaBook._gang_event),
    **each(PRIORITY_CLASS_EVENTS, QuotaBook._priority_class_event),
    **each((*TOPOLOGY_OBJECT_EVENTS, NodeUpserted, NodeDeleted, ObjectUndecodable, BindRequested, EvictionRequested,
            GangTimedOut, GangPending, GangPlanned, PreemptionPlanned, WorkloadUpserted, WorkloadDeleted,
            *COMPOSITE_EVENTS), None),
    # quota objects reach the book through the fold's own table (ClusterState._quota_object)
    **each((*QUOTA_OBJECT_EVENTS, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS), None),
})

# Event types `QuotaBook.observe` does nothing with while the book is not active: the fold skips the call.
# Among them the upserts of the PodGroups that outrank both a Volcano and a KAI one (state.cluster.GANG_SOURCES):
# after one, neither of the same key defines its gang, so no queue is referenced, and an idle book stays
# idle. (Their deletions can hand the gang to a Volcano or KAI PodGroup: those are observed.)
OUTRANK_VOLCANO_UPSERTS: frozenset[type] = frozenset((PodGroupUpserted, SchedulerPluginsPodGroupUpserted,
                                                       KubePodGroupUpserted))
IDLE_UNLESS_ACTIVE: frozenset[type] = frozenset(
    kind for kind, handler in _HANDLERS.items() if handler is None or handler is QuotaBook._pod_event
) | OUTRANK_VOLCANO_UPSERTS
