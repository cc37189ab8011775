"""The leader writes each quota's usage back where the quota's own dialect keeps it.

What is written, per dialect, as the project that owns the dialect writes it:
- Koordinator ElasticQuota (scheduling.sigs.k8s.io/v1alpha1): `status.used`, and the annotations
  `quota.scheduling.koordinator.sh/runtime` and `/request` (JSON resource lists), which is what
  koord-scheduler keeps on every quota of the tree, parents included (the runtime as
  `QuotaBook.runtime`, the request as `QuotaBook.request_of`).
- scheduler-plugins' capacity scheduling ElasticQuota (scheduling.x-k8s.io/v1alpha1): `status.used`,
  every resource its min or max names (0 when unused), as its ElasticQuota controller writes it.
- Volcano Queue: `status.allocated`, summed up the tree (a parent holds its children's; the queue
  named `root` holds everything), the one field of a Queue's status the Volcano scheduler writes.
  The queue's `state` and its PodGroup counts (pending, running, inqueue, ...) belong to Volcano's
  queue controller and are left alone: two writers of one field would undo each other.
- KAI Queue: nothing. All of its status (allocated, requested, childQueues) is written by KAI's queue
  controller from its PodGroups, not by KAI's scheduler; `toposched quota show` and the metrics say what
  toposched counts.

"Used" (and "allocated") is what the quota's placed pods request: bound or assumed, not finished,
not nominated only (a nomination holds quota inside the scheduler, as `toposched quota show`
counts it, but no dialect reports it as used). Quantities are written as users write them; only
resources the quota counts are written (those its tree names in min/max, capability, deserved or
guarantee).

When: the journal tells `notice_all()` about every batch of events it folded; only quota objects, nodes
(the runtime's total) and batches after which the quota book's `version` moved mark the pass dirty. `run()` makes
one pass as soon as something is dirty, then waits `interval` before the next: pod churn costs at
most one pass per interval. A pass compares what it would write with what the folded object says
(quantities parsed, zeros dropped, so "1000m" and "1" are one value) and writes only what differs;
a write made is not repeated while the object's resourceVersion is unchanged (our write has not
come back by watch yet). A failed write is retried on the next pass, backing off.

Runs only inside the leader's work (`daemon.cli.run`), and every write goes through the adapter's
`WriteGate`, so a standby writes nothing. Must never: write on every pod event, write a value the
object already holds, or stop the daemon over a failed write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final, Protocol

import anyio
import msgspec
import structlog

from daemon.scheduling.ports import ApiOutcome
from events.dispatch import each, exhaustive
from events.model import (
    BUDGET_EVENTS,
    COMPOSITE_EVENTS,
    JOB_OBJECT_EVENTS,
    POD_GROUP_EVENTS,
    PRIORITY_CLASS_EVENTS,
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
    KaiQueueDeleted,
    KaiQueueUpserted,
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
    QueueDeleted,
    QueueUpserted,
    WorkloadDeleted,
    WorkloadUpserted,
)
from events.objects import (
    CAPACITY_QUOTA_API,
    KOORDINATOR_QUOTA_API,
    QUOTA_REQUEST_ANNOTATION,
    QUOTA_RUNTIME_ANNOTATION,
    VOLCANO_QUEUE_API,
)
from state.cluster import ClusterState
from state.quota import (
    CAPACITY,
    CAPACITY_KIND,
    KOORDINATOR_KIND,
    QUEUE_KIND,
    VOLCANO,
    VOLCANO_ROOT_QUEUE,
    constrained_in,
)
from state.resources import QuantityError, Resources, format_quantity, parse_quantity

log = structlog.get_logger("toposched.quota")

DEFAULT_INTERVAL: Final = 1.0
MAX_RETRY_SECONDS: Final = 30.0

# Event type -> whether folding it can change what this module writes (quota objects: somebody else
# may have written their status; nodes: the runtime's total). Everything else is caught by the
# quota book's version (`notice`). Exhaustive (events.dispatch).
_MARKS: Final[dict[type, bool]] = exhaustive("the quota status", {
    **each((ElasticQuotaUpserted, ElasticQuotaDeleted, CapacityElasticQuotaUpserted, CapacityElasticQuotaDeleted,
            QueueUpserted, QueueDeleted, NodeUpserted, NodeDeleted), True),
    # nothing of a KAI Queue is written (module docstring)
    **each((KaiQueueUpserted, KaiQueueDeleted), False),
    **each((*POD_GROUP_EVENTS, *TOPOLOGY_OBJECT_EVENTS, *PRIORITY_CLASS_EVENTS, PodUpserted, PodDeleted, PodAssumed,
            PodForgotten, BindRequested, PodBound, BindFailed, PodNominated, NominationCleared, EvictionRequested,
            GangTimedOut, GangPending, GangPlanned, PreemptionPlanned, WorkloadUpserted, WorkloadDeleted,
            *COMPOSITE_EVENTS, ObjectUndecodable, *VOLUME_EVENTS, *BUDGET_EVENTS, *JOB_OBJECT_EVENTS), False),
})

_PLURAL: Final = "elasticquotas"
_QUEUES: Final = "queues"


class QuotaWrite(msgspec.Struct, frozen=True):
    """What one quota object needs written: a status merge patch and/or annotations (None: nothing)."""

    kind: str  # state.quota's kind: ElasticQuota, CapacityElasticQuota or Queue
    key: str  # namespace/name, or the name of a Queue
    api_version: str
    plural: str
    resource_version: str
    status: dict[str, dict[str, str | None]] | None = None  # e.g. {"used": {"nvidia.com/gpu": "16"}}
    annotations: dict[str, str] | None = None


class QuotaStatusWriter(Protocol):
    """The write this module makes (`daemon.kube.cluster_api.KubeClusterAPI` implements it)."""

    async def set_quota_status(self, api_version: str, plural: str, key: str, *,
                               status: Mapping[str, Mapping[str, str | None]] | None,
                               annotations: Mapping[str, str] | None) -> ApiOutcome: ...


def _quantities(values: Resources, resources: frozenset[str] | set[str]) -> dict[str, str]:
    return {resource: format_quantity(resource, values.get(resource, 0)) for resource in sorted(resources)}


def _parsed(raw: Mapping[str, str]) -> dict[str, int] | None:
    """A resource list as written, parsed, zeros dropped; None when something in it is not a quantity."""
    out: dict[str, int] = {}
    for resource, text in raw.items():
        try:
            amount = parse_quantity(str(text))
        except QuantityError:
            return None
        if amount:
            out[resource] = amount
    return out


def _differs(current: Mapping[str, str], desired: Mapping[str, str]) -> bool:
    return _parsed(current) != _parsed(desired)


def _list_patch(current: Mapping[str, str], desired: Mapping[str, str]) -> dict[str, str | None]:
    """A merge patch turning the resource list `current` into `desired` (keys no longer there: null)."""
    patch: dict[str, str | None] = dict.fromkeys(sorted(set(current) - set(desired)))
    patch.update(desired)
    return patch


def _json_list(raw: str | None) -> dict[str, str]:
    if not raw:
        return {}
    try:
        decoded = msgspec.json.decode(raw.encode(), type=dict[str, str | int | float])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {"": "unreadable"}  # never equal to what we would write: it is written again
    return {resource: str(value) for resource, value in decoded.items()}


def _encode_list(values: Mapping[str, str]) -> str:
    return msgspec.json.encode(dict(sorted(values.items()))).decode()


def plan_quota_status(state: ClusterState) -> list[QuotaWrite]:
    """Every quota object whose written usage differs from the quota book's, with what to write (pure)."""
    book = state.quotas
    if not book.active:
        return []
    out: list[QuotaWrite] = []
    for quota in book.in_order():
        if quota.kind == KOORDINATOR_KIND:
            elastic = book.elastic_quotas.get(quota.key)
            if elastic is None:
                continue
            used = _quantities(quota.running, constrained_in(quota))
            status = {"used": _list_patch(elastic.status.used, used)} if _differs(elastic.status.used, used) else None
            annotations: dict[str, str] = {}
            runtime = book.runtime(state, quota)
            wanted = {QUOTA_RUNTIME_ANNOTATION: _quantities(runtime, set(runtime)),
                      QUOTA_REQUEST_ANNOTATION: _quantities(book.request_of(quota), constrained_in(quota))}
            for name, values in wanted.items():
                if _differs(_json_list(elastic.metadata.annotations.get(name)), values):
                    annotations[name] = _encode_list(values)
            if status is not None or annotations:
                out.append(QuotaWrite(KOORDINATOR_KIND, quota.key, KOORDINATOR_QUOTA_API, _PLURAL,
                                      elastic.metadata.resource_version, status, annotations or None))
        elif quota.dialect == CAPACITY:
            capacity = book.capacity_quotas.get(quota.key)
            if capacity is None:
                continue
            used = _quantities(quota.running, quota.constrained)
            if _differs(capacity.status.used, used):
                out.append(QuotaWrite(CAPACITY_KIND, quota.key, CAPACITY_QUOTA_API, _PLURAL,
                                      capacity.metadata.resource_version,
                                      {"used": _list_patch(capacity.status.used, used)}))
        elif quota.dialect == VOLCANO:
            write = _queue_write(state, quota.key, quota.running, quota.constrained)
            if write is not None:
                out.append(write)
    volcano = book.roots[VOLCANO]
    if volcano.children:  # Volcano's own root queue holds every queue's
        counted: set[str] = set()
        for child in volcano.children:
            counted |= child.constrained
        write = _queue_write(state, VOLCANO_ROOT_QUEUE, volcano.running, counted)
        if write is not None:
            out.append(write)
    return out


def _queue_write(state: ClusterState, name: str, running: Resources, counted: frozenset[str] | set[str]
                 ) -> QuotaWrite | None:
    queue = state.quotas.queues.get(name)
    if queue is None:
        return None
    allocated = _quantities(running, counted)
    if not _differs(queue.status.allocated, allocated):
        return None
    return QuotaWrite(QUEUE_KIND, name, VOLCANO_QUEUE_API, _QUEUES, queue.metadata.resource_version,
                      {"allocated": _list_patch(queue.status.allocated, allocated)})


class QuotaStatus:
    """One leader's quota usage writer (see the module docstring)."""

    def __init__(self, state: ClusterState, writer: QuotaStatusWriter, *, interval: float = DEFAULT_INTERVAL,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> None:
        self.state = state
        self.writer = writer
        self.interval = interval
        self._sleep = sleep
        self._dirty = anyio.Event()
        self._dirty.set()  # the first pass runs at once
        self._version = state.quotas.version
        self._failures = 0
        self._written: dict[tuple[str, str], tuple[str, QuotaWrite]] = {}  # (kind, key) -> (resourceVersion, write)
        self.passes = 0
        self.writes = 0

    def notice_all(self, events: Sequence[Event]) -> None:
        """Journal listener (per batch: `Journal.subscribe_batches`): mark dirty when an event can
        change what this module writes."""
        book = self.state.quotas
        if book.version != self._version:
            self._version = book.version
            self._dirty.set()
        elif book.active and any(_MARKS[type(event)] for event in events):
            self._dirty.set()

    async def run(self) -> None:
        """Until cancelled: one pass whenever something changed, at most one per `interval`."""
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            if await self.sync_once():
                self._failures = 0
                await self._sleep(self.interval)
            else:
                self._dirty.set()
                self._failures += 1
                await self._sleep(min(MAX_RETRY_SECONDS, self.interval * 2 ** (self._failures - 1)))

    async def sync_once(self) -> bool:
        """Write what differs; False when a write failed and is worth retrying."""
        self.passes += 1
        complete = True
        for write in plan_quota_status(self.state):
            slot = (write.kind, write.key)
            if self._written.get(slot) == (write.resource_version, write):
                continue  # written already; the watch has not brought it back yet
            outcome = await self.writer.set_quota_status(write.api_version, write.plural, write.key,
                                                         status=write.status, annotations=write.annotations)
            if outcome.ok:
                self.writes += 1
                self._written[slot] = (write.resource_version, write)
                log.debug("quota.status_written", kind=write.kind, object=write.key,
                         status=write.status, annotations=sorted(write.annotations or {}))
                continue
            log.warning("quota.status_write_failed", kind=write.kind, object=write.key, reason=outcome.reason,
                        retriable=outcome.retriable)
            complete &= not outcome.retriable  # a 404 (object gone) is not retried; its deletion comes by watch
        return complete
