"""The real cluster-API adapter: the scheduler's decisions carried out as Kubernetes API writes.

What each write is, and how its answer is read:
- bind: POST pods/NAME/binding, the Binding carrying the pod's metadata.uid (a re-created pod of the
  same name fails the uid precondition and is never bound by mistake). The API answers with a Status;
  it is read raw. 429/5xx are retried (Retry-After honoured); a 409 is read back with a GET: bound to
  our node = success, anything else = failed. Never retried blindly, so no pod is bound twice.
- evict: POST pods/NAME/eviction (policy/v1 Eviction, the pod's grace period, uid precondition); when
  the Eviction API is not served (404 not naming the pod, 405) the pod is deleted with its grace
  period instead. A pod already gone counts as evicted. A PodDisruptionBudget's refusal (429, cause
  DisruptionBudget; or, for a pod more than one budget selects, a failure Status answered with 201)
  is not retried: preemption outranks budgets, as kube-scheduler's does (it deletes its victims), so
  the victim is deleted with its grace period, and a `pod.evicted_over_disruption_budget` log line
  names the budget.
- nominate: merge patch of pods/NAME/status `status.nominatedNodeName` (null clears it).
- disruption condition: strategic merge patch of pods/NAME/status adding the `DisruptionTarget`
  condition (reason `PreemptionByScheduler`, message naming the preemptor job and triggering pod),
  before the eviction and again once it went through: the eviction handler rewrites it to its own
  `EvictionByEvictionAPI` (Kubernetes 1.31+).
- gang report: merge patch of the PodGroup's status subresource (the object itself when the CRD has
  no status subresource), plus a core/v1 Event on the PodGroup (FailedScheduling, Scheduled,
  GangTimeout, Preempted; on the first pending pod of a gang with no PodGroup object).
- a bound pod gets kube-scheduler's `Scheduled` Event ("Successfully assigned ns/pod to node"), an
  evicted victim its `Preempted` Event ("Preempted by pod <uid> on node <node>", then the job and
  why), both written in the background. While a gang's Bindings are out (`hold_scheduled_events`) its
  pods' `Scheduled` Events are held and recorded when the gang settles (`release_scheduled_events`),
  stamped with the time of their binding, or before another Event on one of those pods recorded
  meanwhile, so a pod's Events keep the order of what they report.
- Events: through `events` (`daemon.kube.event_recorder`), correlated as client-go's recorder does
  (similar messages aggregated, repeats counted, a spam filter per object) and written in the
  background; `record_event` waits for the write, `event` does not.
- quota usage (`daemon.kube.quota_status` decides what and when): merge patch of the status
  subresource of an ElasticQuota (`status.used`) or Volcano Queue (`status.allocated`), the object
  itself when the CRD has no status subresource; Koordinator's runtime and request annotations by a
  merge patch of the ElasticQuota.
- topology status (`daemon.kube.topology_status` decides when): merge patch of the status subresource of
  the ClusterNetworkTopology (`status.detailStatus`) or of a HyperNode (`status.nodeCount`); a bad
  topology object gets a Warning Event (`report_object`, cluster-scoped objects' Events live in
  `default`, like the kubelet's Node Events).

Every call made anywhere in the daemon is listed in `API_CALLS` (group, resource, subresource, verb),
the one place the ops RBAC test checks the ClusterRole against. Every write goes through the leader's
`WriteGate` (`KubeClient.call(..., gate=)`): asked before every attempt, retries included, and
cancelled in flight the moment the lease is lost; a replica without a valid lease writes nothing.
Every attempt of every write is counted in `toposched_api_requests_total{verb,resource,code}`
(retries included; `code` `refused` for an attempt the gate refused, `cancelled` for one in flight
when the lease ran out). Reads (the read-back of a conflicting binding) are not gated; the Lease
itself is written by the elector outside the gate, protected by its resourceVersion.

Must never: decide anything (the loop decides, this only carries out), or report success it has not
read back from the API.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import anyio
import msgspec
import structlog

from daemon.kube.client import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    KubeApiError,
    KubeClient,
    Response,
    decode_status,
    disruption_budget_refusal,
)
from daemon.kube.event_correlator import ObjectRef
from daemon.kube.event_recorder import EventRecorder
from daemon.kube.leader import NotLeader, WriteGate
from daemon.scheduling.decisions import NOT_READY_REASON
from daemon.scheduling.kai_status import kai_scheduling_conditions
from daemon.scheduling.ports import OK, ApiOutcome, BindOutcome, GangPhase
from daemon.telemetry.metrics import Metrics
from events.ingest import KINDS
from events.objects import (
    CLUSTER_NETWORK_TOPOLOGY_API,
    HYPERNODE_API,
    KAI_LAST_EVICTION_ANNOTATION,
    KAI_POD_GROUP_API,
    SELECTED_NODE_ANNOTATION,
    VOLCANO_POD_GROUP_API,
    TopologyDetail,
)
from placement.members import TASK_SHORT
from placement.plan import QuotaShortfall
from state.cluster import ClusterState
from state.volcano_enqueue import INQUEUE

log = structlog.get_logger("toposched.kubeapi")

ApiCall = tuple[str, str, str, str]  # (API group, resource, subresource, verb)

# What kube-scheduler's volume binder writes on a volume it pre-binds to a claim (written, never read).
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"

# Every call the daemon makes. Keep in step with the code below: the ops RBAC test reads this.
API_CALLS: tuple[ApiCall, ...] = (
    *((info.group, info.plural, "", verb) for info in KINDS for verb in ("list", "watch")),
    ("", "pods", "", "get"),  # read back a 409 binding; read conditions before a status patch
    ("", "pods", "binding", "create"),
    ("", "persistentvolumeclaims", "", "patch"),  # volume.kubernetes.io/selected-node before a Binding
    ("", "persistentvolumes", "", "patch"),  # claimRef of a volume made in advance before a Binding
    ("", "pods", "eviction", "create"),
    ("", "pods", "", "delete"),  # eviction API not served
    ("", "pods", "status", "patch"),  # nominatedNodeName, the DisruptionTarget and PodScheduled=False conditions
    ("scheduling.sigs.k8s.io", "podgroups", "status", "patch"),
    ("scheduling.sigs.k8s.io", "podgroups", "", "patch"),  # CRD without a status subresource
    ("scheduling.x-k8s.io", "podgroups", "status", "patch"),
    ("scheduling.x-k8s.io", "podgroups", "", "patch"),
    ("scheduling.volcano.sh", "podgroups", "status", "patch"),
    ("scheduling.volcano.sh", "podgroups", "", "patch"),
    ("scheduling.k8s.io", "podgroups", "status", "patch"),  # PodGroup[Initially]Scheduled, DisruptionTarget
    ("scheduling.run.ai", "podgroups", "status", "patch"),  # KAI: status.schedulingConditions
    ("scheduling.run.ai", "podgroups", "", "patch"),  # KAI: kai.scheduler/last-eviction-timestamp
    ("", "events", "", "create"),
    ("", "events", "", "patch"),
    ("scheduling.koordinator.sh", "clusternetworktopologies", "status", "patch"),  # status.detailStatus
    ("topology.volcano.sh", "hypernodes", "status", "patch"),  # status.nodeCount
    ("scheduling.sigs.k8s.io", "elasticquotas", "", "patch"),  # runtime/request annotations; status without /status
    ("scheduling.sigs.k8s.io", "elasticquotas", "status", "patch"),  # status.used
    ("scheduling.x-k8s.io", "elasticquotas", "status", "patch"),  # status.used
    ("scheduling.x-k8s.io", "elasticquotas", "", "patch"),
    ("scheduling.volcano.sh", "queues", "status", "patch"),  # status.allocated
    ("scheduling.volcano.sh", "queues", "", "patch"),
    ("coordination.k8s.io", "leases", "", "get"),
    ("coordination.k8s.io", "leases", "", "create"),
    ("coordination.k8s.io", "leases", "", "update"),
)

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
# A Kubernetes PodGroup's conditions (k8s.io/api scheduling): v1alpha2's, and 1.37's terminal one.
KUBE_POD_GROUP_GROUP = "scheduling.k8s.io/"
KUBE_SCHEDULED_CONDITION = "PodGroupScheduled"
KUBE_INITIALLY_SCHEDULED_CONDITION = "PodGroupInitiallyScheduled"
UNSCHEDULABLE = "Unschedulable"
COMPONENT = "toposched"


# What a gang's state is called in each PodGroup dialect, and the condition that says why.
# A preempted gang has lost pods below what it needs to run: it is pending again until re-placed.
_KOORDINATOR_PHASE: dict[str, str] = {"Pending": "Pending", "Scheduled": "Scheduled", "TimedOut": "Pending",
                                      "Preempted": "Pending"}
_VOLCANO_PHASE: dict[str, str] = {"Pending": "Pending", "Scheduled": "Running", "TimedOut": "Pending",
                                  "Preempted": "Pending"}
_CONDITION_TYPE: dict[str, str] = {"Pending": "Unschedulable", "Scheduled": "Scheduled", "TimedOut": "Unschedulable",
                                   "Preempted": "Preempted"}
FAILED_SCHEDULING = "FailedScheduling"  # kube-scheduler's (and Volcano's) Event reason for a pod it could not place
SCHEDULED = "Scheduled"  # kube-scheduler's Event on a pod it bound
PREEMPTED = "Preempted"  # kube-scheduler's Event on a victim
# The Event's reason per phase (the condition keeps the loop's reason: Unschedulable, Scheduled, GangTimeout).
_EVENT_REASON: dict[str, str] = {"Pending": FAILED_SCHEDULING, "TimedOut": "GangTimeout", "Scheduled": SCHEDULED,
                                 "Preempted": PREEMPTED}
# KAI's scheduler: the Event reasons on a PodGroup (its scheduling conditions: daemon/scheduling/kai_status.py).
KAI_NOT_READY = "NotReady"
KAI_EVICT = "Evict"
_EVICTED = "evicted"
_DELETED = "deleted (no Eviction API)"
_DELETED_OVER_BUDGET = "deleted: its PodDisruptionBudget refused the eviction, and preemption outranks it"


def _volcano_not_ready(message: str) -> str:
    """The reason Volcano's gang plugin gives the Unschedulable condition of a job short of members (its JobValid):
    `NotEnoughPodsOfTask` for a task below its minTaskMember, else `NotEnoughTasks`."""
    return "NotEnoughPodsOfTask" if TASK_SHORT in message else "NotEnoughTasks"


def _event_of(phase: GangPhase, reason: str, *, kai: bool = False) -> tuple[Literal["Normal", "Warning"], str]:
    """A gang report's Event type and reason. A gang held for its missing members is not failing: a Normal
    `NotReadyForScheduling`, as kube-scheduler records for a pod its PreEnqueue holds. A KAI PodGroup gets
    the Events KAI's scheduler records on one: all Normal, `NotReady`, `Unschedulable` and `Evict`."""
    if kai and phase != "Scheduled":
        return "Normal", (KAI_NOT_READY if reason == NOT_READY_REASON
                          else KAI_EVICT if phase == "Preempted" else UNSCHEDULABLE)
    if reason == NOT_READY_REASON:
        return "Normal", NOT_READY_REASON
    return ("Normal" if phase in ("Scheduled", "Preempted") else "Warning"), _EVENT_REASON[phase]


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return namespace or "default", name


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _PodBinding(msgspec.Struct, frozen=True):
    nodeName: str = ""


class _PodMeta(msgspec.Struct, frozen=True):
    uid: str = ""
    resourceVersion: str = ""


class _PodStatus(msgspec.Struct, frozen=True):
    conditions: list[dict[str, object]] = []  # kept whole: a merge patch must write them back unchanged


class _PodReadBack(msgspec.Struct, frozen=True):
    metadata: _PodMeta = _PodMeta()
    spec: _PodBinding = _PodBinding()
    status: _PodStatus = _PodStatus()


_pod_decoder = msgspec.json.Decoder(_PodReadBack)


class KubeClusterAPI:
    """`daemon.scheduling.ports.ClusterAPI` over HTTP: binds, evicts, nominates, reports; only while the gate is open.

    `state` (read only) tells which PodGroup dialect and uid a gang has, for its status and Events.
    """

    def __init__(self, client: KubeClient, gate: WriteGate, state: ClusterState | None = None,
                 metrics: Metrics | None = None, *, bind_concurrency: int = 64) -> None:
        self.client = client
        self.gate = gate
        self.state = state
        self.metrics = metrics or Metrics()
        # A semaphore that takes a free slot without a trip through the event loop (a CapacityLimiter
        # yields on every acquire: a task switch per Binding).
        self.bind_limiter = anyio.Semaphore(bind_concurrency, fast_acquire=True)
        self.events = EventRecorder(self, COMPONENT, now=time.time, on_drop=self.metrics.events_dropped.inc)
        self._status_subresource: dict[tuple[str, str], bool] = {}  # (API version, plural) -> has /status
        # The metrics' children by label values, looked up once (two lookups per call otherwise).
        self._attempt_counters: dict[tuple[str, str, str], Any] = {}
        self._durations: dict[tuple[str, str], Callable[[float], None]] = {}
        self._counting: dict[tuple[str, str], Callable[[str], None]] = {}
        self._binds_by_result = {result: self.metrics.binds.labels(result) for result in ("bound", "failed")}
        self._holds = 0  # `hold_scheduled_events` not yet released
        # (pod, uid, node, when) bound while held: their Events to record; and those pods' keys
        self._held: list[tuple[str, str, str, float]] = []
        self._held_pods: set[str] = set()

    # ------------------------------------------------------------------ plumbing

    async def _write(self, verb: str, resource: str, method: str, path: str, *,
                     body: Mapping[str, Any] | None = None, content_type: str = "application/json",
                     pipelined: bool = False) -> Response:
        count = self._counting.get((verb, resource))
        if count is None:
            count = self._counting[verb, resource] = self._counter(verb, resource)
        started = time.monotonic()
        try:
            return await self.client.call(method, path, body=body, content_type=content_type, gate=self.gate,
                                          on_attempt=count, pipelined=pipelined)
        finally:
            observe = self._durations.get((verb, resource))
            if observe is None:
                observe = self._durations[verb, resource] = self.metrics.api_duration.labels(verb, resource).observe
            observe(time.monotonic() - started)

    def _counter(self, verb: str, resource: str) -> Callable[[str], None]:
        """What counts the attempts of one kind of call, by outcome: retries, and those the lease gate
        refused (`toposched_api_requests_total`)."""
        counters = self._attempt_counters
        requests = self.metrics.api_requests

        def count(code: str) -> None:
            counter = counters.get((verb, resource, code))
            if counter is None:
                counter = counters[verb, resource, code] = requests.labels(verb, resource, code)
            counter.inc()

        return count

    async def _read_pod(self, key: str) -> _PodReadBack | None:
        namespace, name = _split(key)
        response = await self.client.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        if response.status == 404:
            return None
        if not response.ok:
            raise KubeApiError("GET", f"pods/{name}", response.status, response.reason())
        return _pod_decoder.decode(response.body)

    # ------------------------------------------------------------------ bind

    async def bind(self, pod: str, uid: str, node: str) -> BindOutcome:
        """Bind one pod (bounded concurrency); the outcome is what the API says, read back when in doubt."""
        async with self.bind_limiter:
            self.metrics.binds_in_flight.inc()
            try:
                outcome = await self._bind(pod, uid, node)
            except NotLeader as error:
                outcome = BindOutcome("failed", reason=str(error), retriable=True)
            finally:
                self.metrics.binds_in_flight.dec()
        self._binds_by_result["bound" if outcome.placed else "failed"].inc()
        if outcome.status == "bound":  # ours (a 409 read back on another node is not)
            if self._holds:
                self._held.append((pod, uid, outcome.node or node, self.events.now()))
                self._held_pods.add(pod)
            else:
                self._scheduled(pod, uid, outcome.node or node, None)
        if not outcome.placed:
            log.warning("bind.failed", pod=pod, node=node, reason=outcome.reason, retriable=outcome.retriable)
        return outcome

    def hold_scheduled_events(self) -> None:
        """`ClusterAPI.hold_scheduled_events`: a gang's Bindings start."""
        self._holds += 1

    def release_scheduled_events(self) -> None:
        """`ClusterAPI.release_scheduled_events`: the held Events are written once no hold is left."""
        self._holds = max(0, self._holds - 1)
        if not self._holds:
            self._write_held()

    def _write_held(self) -> None:
        held, self._held = self._held, []
        self._held_pods.clear()
        for pod, uid, node, when in held:
            self._scheduled(pod, uid, node, when)

    def _scheduled(self, pod: str, uid: str, node: str, when: float | None) -> None:
        """kube-scheduler's `Scheduled` Event for a pod our Binding bound (`when`: the time of the binding)."""
        namespace, name = _split(pod)
        self.events.record(_involved(pod, "v1", "Pod", uid, False), "Normal", SCHEDULED,
                           f"Successfully assigned {namespace}/{name} to {node}", at=when)

    async def _bind(self, pod: str, uid: str, node: str) -> BindOutcome:
        namespace, name = _split(pod)
        metadata: dict[str, str] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
        try:
            response = await self._write("create", "pods/binding", "POST", path, body=body)
        except KubeApiError as error:
            # Retries ran out; the last try may still have landed: the API is the judge.
            return await self._read_back(pod, uid, node, f"binding failed: {error.reason}")
        if response.ok:
            return BindOutcome("bound", node=node)
        if response.status == 409:
            return await self._read_back(pod, uid, node, response.reason())
        if response.status == 404:
            return BindOutcome("failed", reason="pod not found (deleted before it could be bound)", retriable=False)
        return BindOutcome("failed", reason=f"HTTP {response.status}: {response.reason()}",
                           retriable=response.status >= 500 or response.status == 429)

    async def select_node(self, claim: str, node: str) -> ApiOutcome:
        """`ClusterAPI.select_node`: a merge patch of the claim's annotation, through the write gate."""
        namespace, name = _split(claim)
        path = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"
        body = {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node}}}
        return await self._outcome("patch", "persistentvolumeclaims", path, body, MERGE_PATCH)

    async def bind_volume(self, volume: str, claim: str) -> ApiOutcome:
        """`ClusterAPI.bind_volume`: a merge patch of the volume's claimRef, through the write gate, on the
        condition that the volume is still at the version the state holds (409 otherwise)."""
        held = self.state.volumes if self.state is not None else None
        found = held.volumes.get(volume) if held is not None else None
        wanted = held.claims.get(claim) if held is not None else None
        if found is None or wanted is None:
            return ApiOutcome(ok=False, reason=f"persistentvolume {volume} or claim {claim} is not known",
                              retriable=False)
        namespace, name = _split(claim)
        metadata: dict[str, Any] = {"resourceVersion": found.metadata.resource_version}
        ref = found.spec.claim_ref
        if ref is None or ref.namespace != namespace or ref.name != name:  # not pre-bound by a user
            metadata["annotations"] = {BOUND_BY_CONTROLLER: "yes"}
        claim_ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": name,
                     "uid": wanted.metadata.uid, "resourceVersion": wanted.metadata.resource_version}
        body = {"metadata": metadata, "spec": {"claimRef": claim_ref}}
        return await self._outcome("patch", "persistentvolumes", f"/api/v1/persistentvolumes/{volume}", body,
                                   MERGE_PATCH)

    async def _read_back(self, pod: str, uid: str, node: str, problem: str) -> BindOutcome:
        try:
            current = await self._read_pod(pod)
        except KubeApiError as error:
            return BindOutcome("failed", reason=f"{problem}; read-back failed: {error.reason}", retriable=True)
        if current is None:
            return BindOutcome("failed", reason=f"{problem}; the pod no longer exists", retriable=False)
        if uid and current.metadata.uid != uid:
            return BindOutcome("failed", reason=f"{problem}; the pod was re-created (uid {current.metadata.uid})",
                               retriable=False)
        if current.spec.nodeName == node:
            return BindOutcome("bound", node=node)
        if current.spec.nodeName:
            return BindOutcome("already-bound", node=current.spec.nodeName,
                               reason=f"already bound to {current.spec.nodeName}")
        return BindOutcome("failed", reason=problem, retriable=True)

    # ------------------------------------------------------------------ evict

    async def evict(self, pod: str, uid: str, *, preemptor: str, message: str,
                    grace_seconds: int | None) -> ApiOutcome:
        victim = self.state.pods.get(pod) if self.state is not None else None
        node_of_victim = victim.placed_node if victim is not None else ""
        try:
            outcome = await self._evict(pod, uid, grace_seconds)
        except (KubeApiError, NotLeader) as error:
            outcome = ApiOutcome(ok=False, reason=str(error), retriable=True)
        if outcome.ok and outcome.reason == _EVICTED:
            # The eviction handler (Kubernetes 1.31+) rewrites a DisruptionTarget condition to its own
            # EvictionByEvictionAPI: the preemptor's, written before, is written again, so the victim ends
            # as kube-scheduler's (which deletes its victims) do, saying who preempted it.
            await self.set_disruption_condition(pod, uid, preemptor=preemptor, message=message)
        if outcome.ok:
            self.metrics.preemption_victims.inc()
            log.info("pod.evicted", pod=pod, preemptor=preemptor, detail=outcome.reason)
            if outcome.reason in (_EVICTED, _DELETED, _DELETED_OVER_BUDGET):  # nothing for a victim already gone
                self.event(pod, "v1", "Pod", uid, "Normal", PREEMPTED,
                           self._preempted_message(preemptor, node_of_victim, message))
        else:
            log.warning("pod.evict_failed", pod=pod, preemptor=preemptor, reason=outcome.reason)
        return outcome

    def _preempted_message(self, preemptor: str, node: str, message: str) -> str:
        """kube-scheduler's words ("Preempted by pod <uid> on node <node>"), the pod being the preemptor
        itself or, for a gang, its first pending pod; then the job and why, in ours."""
        representative = ""
        if self.state is not None:
            pods = self.state.pods
            if preemptor in pods:
                representative = pods[preemptor].uid
            else:
                gang = self.state.gangs.get(preemptor)
                members = sorted(gang.members) if gang is not None else []
                waiting = [key for key in members if key in self.state.pending] or members
                representative = pods[waiting[0]].uid if waiting and waiting[0] in pods else ""
        said = f"Preempted by {f'pod {representative}' if representative else preemptor} on node {node or 'unknown'}"
        return f"{said}: {message}" if message else said

    async def _evict(self, pod: str, uid: str, grace_seconds: int | None) -> ApiOutcome:
        namespace, name = _split(pod)
        delete_options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_seconds is not None:
            delete_options["gracePeriodSeconds"] = grace_seconds
        if uid:
            delete_options["preconditions"] = {"uid": uid}
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": delete_options,
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        response = await self._write("create", "pods/eviction", "POST", path, body=body)
        # A failure Status can come with a 201: the eviction handler's answer for a pod that more than one
        # PodDisruptionBudget selects ("... which the eviction subresource does not support").
        if response.ok and b'"Failure"' not in response.body:
            return ApiOutcome(ok=True, reason=_EVICTED)
        status = decode_status(response.body)
        if response.ok and status.status != "Failure":
            return ApiOutcome(ok=True, reason=_EVICTED)
        budget = status.message if response.ok else disruption_budget_refusal(response)
        if budget:
            # Preemption outranks a PodDisruptionBudget, as kube-scheduler's does (it deletes its victims;
            # budgets are respected only where a choice of victims allows): the victim is deleted.
            log.warning("pod.evicted_over_disruption_budget", pod=pod, budget=budget)
            deleted = await self._delete(pod, delete_options)
            if deleted.reason == _DELETED:
                return ApiOutcome(ok=True, reason=_DELETED_OVER_BUDGET)
            return deleted
        if response.status == 404 and status.details is not None and status.details.kind == "pods":
            return ApiOutcome(ok=True, reason="already gone")
        if response.status == 409:  # uid precondition: the pod we meant is gone, a new one stands in its name
            return ApiOutcome(ok=True, reason="already gone (re-created under the same name)")
        if response.status in (404, 405):
            return await self._delete(pod, delete_options)
        return ApiOutcome(ok=False, reason=f"HTTP {response.status}: {response.reason()}",
                          retriable=response.status >= 500 or response.status == 429)

    async def _delete(self, pod: str, delete_options: Mapping[str, Any]) -> ApiOutcome:
        namespace, name = _split(pod)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        response = await self._write("delete", "pods", "DELETE", path, body=delete_options)
        if response.ok:
            return ApiOutcome(ok=True, reason=_DELETED)
        if response.status in (404, 409):
            return ApiOutcome(ok=True, reason="already gone")
        return ApiOutcome(ok=False, reason=f"HTTP {response.status}: {response.reason()}",
                          retriable=response.status >= 500 or response.status == 429)

    # ------------------------------------------------------------------ pod status

    async def set_nominated_node(self, pod: str, uid: str, node: str | None) -> ApiOutcome:
        """Write (or clear, with None) status.nominatedNodeName."""
        namespace, name = _split(pod)
        body: dict[str, Any] = {"status": {"nominatedNodeName": node or None}}
        if uid:
            body["metadata"] = {"uid": uid}
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        return await self._outcome("patch", "pods/status", path, body, MERGE_PATCH)

    async def set_disruption_condition(self, pod: str, uid: str, *, preemptor: str, message: str) -> ApiOutcome:
        """Mark a victim with DisruptionTarget=True (reason PreemptionByScheduler) before it is evicted."""
        return await self._pod_condition(pod, uid, {
            "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
            "message": message or f"{COMPONENT}: preempted to make room for {preemptor}",
            "lastTransitionTime": _now(), **self._observed_generation(pod),
        })

    async def set_pod_condition(self, pod: str, uid: str, condition: dict[str, Any]) -> ApiOutcome:
        """Add or replace one condition of the pod (by type), keeping the others: PodScheduled=False of a
        pending gang member (`daemon.kube.pod_conditions`)."""
        return await self._pod_condition(pod, uid, condition)

    async def remove_pod_condition(self, pod: str, uid: str, resource_version: str, condition_type: str
                                   ) -> ApiOutcome:
        """Delete the pod's condition of `condition_type`, only while the pod is still at `resource_version`: a
        pod that changed since (bound, say, its PodScheduled now True) is left alone, not retried (its change
        comes by watch and is judged again)."""
        return await self._patch_condition(pod, uid, condition_type, None, resource_version)

    async def _pod_condition(self, pod: str, uid: str, condition: dict[str, Any]) -> ApiOutcome:
        return await self._patch_condition(pod, uid, condition["type"], condition)

    async def _patch_condition(self, pod: str, uid: str, condition_type: str, condition: dict[str, Any] | None,
                               resource_version: str = "") -> ApiOutcome:
        """Replace (or with None delete) the pod's condition of `condition_type`, its other conditions kept: a
        strategic merge patch by type, or, where the server has none (415), the list merged here and guarded by
        the resourceVersion read. `resource_version`: only while the pod is at it (a 409 is not retried)."""
        namespace, name = _split(pod)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        meta: dict[str, Any] = {"uid": uid} if uid else {}
        if resource_version:
            meta["resourceVersion"] = resource_version
        change = condition if condition is not None else {"type": condition_type, "$patch": "delete"}
        body: dict[str, Any] = {"status": {"conditions": [change]}}
        if meta:
            body["metadata"] = meta
        try:
            response = await self._write("patch", "pods/status", "PATCH", path, body=body,
                                         content_type=STRATEGIC_MERGE_PATCH)
            if response.status == 415:
                current = await self._read_pod(pod)
                if current is None:
                    return ApiOutcome(ok=False, reason="pod not found", retriable=False)
                if resource_version and current.metadata.resourceVersion != resource_version:
                    return ApiOutcome(ok=False, reason="the pod changed", retriable=False)
                kept = [c for c in current.status.conditions if c.get("type") != condition_type]
                body = {"metadata": {"resourceVersion": current.metadata.resourceVersion},
                        "status": {"conditions": [*kept, *([condition] if condition is not None else [])]}}
                response = await self._write("patch", "pods/status", "PATCH", path, body=body,
                                             content_type=MERGE_PATCH)
        except (KubeApiError, NotLeader) as error:
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        if response.status == 409 and resource_version:
            return ApiOutcome(ok=False, reason="the pod changed", retriable=False)
        return _outcome_of(response)

    async def _outcome(self, verb: str, resource: str, path: str, body: Mapping[str, Any],
                       content_type: str) -> ApiOutcome:
        try:
            response = await self._write(verb, resource, "PATCH", path, body=body, content_type=content_type)
        except (KubeApiError, NotLeader) as error:
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        return _outcome_of(response)

    # ------------------------------------------------------------------ reports

    async def report_gang(self, gang: str, phase: GangPhase, reason: str, message: str,
                          quota: QuotaShortfall | None = None) -> ApiOutcome:
        """PodGroup status (phase + one condition) and an Event on it saying the same. Best effort."""
        target = self.state.gang_object(gang) if self.state is not None else None
        if target is None:
            return await self._report_objectless_gang(gang, phase, reason, message)
        api_version = target.api_version
        kube = api_version.startswith(KUBE_POD_GROUP_GROUP)
        kai = api_version == KAI_POD_GROUP_API
        status: dict[str, Any] | None = None
        annotations: dict[str, str] | None = None
        if kube:
            # A group held before the queue has had no scheduling cycle, so kube-scheduler writes it no condition.
            if reason != NOT_READY_REASON:
                status = self._kube_pod_group_status(gang, api_version, phase, message)
        elif kai:
            conditions = (kai_scheduling_conditions(self.state, gang, phase, reason, message, quota, _now())
                          if self.state is not None else None)
            if conditions is not None:
                status = {"schedulingConditions": conditions or None}
            if phase == "Preempted":  # its preemption delay counts again from now (KAI's scheduler stamps it too)
                annotations = {KAI_LAST_EVICTION_ANNOTATION: _now()}
        elif target.status:
            volcano = api_version == VOLCANO_POD_GROUP_API
            phases = _VOLCANO_PHASE if volcano else _KOORDINATOR_PHASE
            written_phase = self._volcano_phase(gang, phase) if volcano else phases[phase]
            status = {
                **({"phase": written_phase} if written_phase is not None else {}),
                "conditions": [{
                    "type": _CONDITION_TYPE[phase], "status": "True",
                    "reason": _volcano_not_ready(message) if volcano and reason == NOT_READY_REASON else reason,
                    "message": message[:1024],
                    "lastTransitionTime": _now(),
                }],
            }
            if phase == "Scheduled" and self.state is not None and gang in self.state.gangs:
                members = self.state.gangs[gang].members
                pods = self.state.pods
                status["scheduled"] = sum(1 for key in members if key in pods and pods[key].placed_node)
        try:
            # After the Events recorded before it (its pods' Scheduled, Preempted): a report never
            # overtakes them.
            await self.events.drain()
            if annotations is not None:
                path = _object_path(api_version, "podgroups", gang)
                response = await self._write("patch", "podgroups", "PATCH", path,
                                             body={"metadata": {"annotations": annotations}}, content_type=MERGE_PATCH)
                if not response.ok:
                    raise KubeApiError("PATCH", f"{api_version} podgroups", response.status, response.reason())
            if status is not None:
                await self._patch_status(api_version, "podgroups", gang, status, object_fallback=not (kube or kai))
            await self.record_event(target.key, api_version, target.kind, target.uid,
                                    *_event_of(phase, reason, kai=kai), message)
        except (KubeApiError, NotLeader) as error:
            log.warning("gang.report_failed", gang=gang, phase=phase, error=str(error))
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        return OK

    def _kube_pod_group_status(self, gang: str, api_version: str, phase: GangPhase,
                               message: str) -> dict[str, Any] | None:
        """A Kubernetes PodGroup's conditions as kube-scheduler keeps them: whether the group has been
        scheduled (`PodGroupScheduled` at v1alpha2; 1.37's `PodGroupInitiallyScheduled`, which stays True
        once True), False with reason `Unschedulable` while it waits, and `DisruptionTarget` (reason
        `PreemptionByScheduler`) once preemption takes it. The other conditions are kept, and a condition's
        transition time moves only when its status does. None: nothing to change."""
        scheduled_type = (KUBE_SCHEDULED_CONDITION if api_version.endswith("/v1alpha2")
                          else KUBE_INITIALLY_SCHEDULED_CONDITION)
        group = self.state.kube_pod_groups.get(gang) if self.state is not None else None
        current = {c.type: c for c in group.status.conditions} if group is not None else {}
        if phase == "Preempted":
            wanted = (DISRUPTION_TARGET, "True", PREEMPTION_BY_SCHEDULER)
        elif phase == "Scheduled":
            wanted = (scheduled_type, "True", SCHEDULED)
        else:
            held = current.get(scheduled_type)
            if scheduled_type == KUBE_INITIALLY_SCHEDULED_CONDITION and held is not None and held.status == "True":
                return None  # terminal: a group scheduled once stays so, even when its pods go
            wanted = (scheduled_type, "False", UNSCHEDULABLE)
        kind, value, why = wanted
        text = message[:1024]
        held = current.get(kind)
        if held is not None and (held.status, held.reason, held.message) == (value, why, text):
            return None
        moved = held is None or held.status != value or not held.last_transition_time
        condition = {"type": kind, "status": value, "reason": why, "message": text,
                     "lastTransitionTime": _now() if moved or held is None else held.last_transition_time}
        kept = [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                 "lastTransitionTime": c.last_transition_time}
                for c in current.values() if c.type != kind and c.last_transition_time]
        return {"conditions": [*kept, condition]}

    def _volcano_phase(self, gang: str, phase: GangPhase) -> str | None:
        """A Volcano PodGroup's `status.phase` for a report, as Volcano's session keeps it: `Running` once
        scheduled; else `Pending`, but a PodGroup `Inqueue` (enqueued, its job's pods being created or
        placed) stays so, and one `Pending` is not written again (None: leave it), so that a report never
        takes back an enqueue still on its way."""
        wanted = _VOLCANO_PHASE[phase]
        group = self.state.volcano_pod_groups.get(gang) if self.state is not None else None
        if wanted == "Pending" and group is not None and group.status.phase in ("Pending", INQUEUE):
            return None
        return wanted

    async def enqueue_pod_group(self, gang: str) -> ApiOutcome:
        """Move a Volcano PodGroup to `Inqueue` (merge patch of `status.phase` through the status
        subresource), as Volcano's enqueue action does; its job controller then creates the job's pods."""
        try:
            await self._patch_status(VOLCANO_POD_GROUP_API, "podgroups", gang, {"phase": INQUEUE},
                                     object_fallback=False)
        except NotLeader as error:
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        except KubeApiError as error:
            return ApiOutcome(ok=False, reason=str(error), retriable=error.status != 404)
        log.info("gang.enqueued", gang=gang)
        return OK

    async def _report_objectless_gang(self, gang: str, phase: GangPhase, reason: str, message: str) -> ApiOutcome:
        """A gang of pod annotations (Koordinator's, no PodGroup object): its Event goes on its first member
        still pending (else its first member), the pod a user looks at; there is no status to write."""
        info = self.state.gangs.get(gang) if self.state is not None else None
        if info is None or not info.members or phase in ("Scheduled", "Preempted") or self.state is None:
            return OK  # its pods each get their own Scheduled or Preempted Event
        pending = sorted(key for key in info.members if key in self.state.pending)
        first = pending[0] if pending else min(info.members)
        pod = self.state.pods.get(first)
        try:
            await self.record_event(first, "v1", "Pod", pod.uid if pod is not None else "", *_event_of(phase, reason),
                                    message)
        except (KubeApiError, NotLeader) as error:
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        return OK

    async def report_pod(self, pod: str, uid: str, reason: str, message: str) -> ApiOutcome:
        """A pod without a gang: PodScheduled=False with the reason, and a FailedScheduling Event on the pod
        (kube-scheduler's condition and Event; the transition time kept while it stays False)."""
        outcome = await self._pod_condition(pod, uid, {
            "type": "PodScheduled", "status": "False", "reason": reason, "message": message[:1024],
            "lastTransitionTime": self._transition_time(pod), **self._observed_generation(pod),
        })
        if not outcome.ok:
            return outcome
        try:
            await self.record_event(pod, "v1", "Pod", uid, "Warning", FAILED_SCHEDULING, message)
        except (KubeApiError, NotLeader) as error:
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        return OK

    def _observed_generation(self, pod: str) -> dict[str, int]:
        """A condition kube-scheduler writes on a pod names the pod's generation it was decided for
        (PodObservedGenerationTracking, on since Kubernetes 1.34); nothing where the pod has none (an older server)."""
        info = self.state.pods.get(pod) if self.state is not None else None
        generation = info.obj.metadata.generation if info is not None else 0
        return {"observedGeneration": generation} if generation else {}

    def _transition_time(self, pod: str) -> str:
        """A PodScheduled=False condition keeps the time it became False (kube-scheduler's UpdatePodCondition)."""
        info = self.state.pods.get(pod) if self.state is not None else None
        if info is not None:
            for condition in info.obj.status.conditions:
                if condition.type == "PodScheduled" and condition.status == "False" and condition.last_transition_time:
                    return condition.last_transition_time
        return _now()

    async def _patch_status(self, api_version: str, plural: str, key: str, status: Mapping[str, Any], *,
                            object_fallback: bool = True) -> None:
        """Merge patch `status` through the status subresource, or of the object itself when its CRD
        has none (a 404 that does not name the object; not for a built-in kind, `object_fallback` False,
        which always has one); KubeApiError when the write failed."""
        name = key.rpartition("/")[2]
        group = api_version.rpartition("/")[0]
        base = _object_path(api_version, plural, key)
        body = {"status": status}
        kind = (api_version, plural)
        if self._status_subresource.get(kind, True):
            response = await self._write("patch", f"{plural}/status", "PATCH", f"{base}/status", body=body,
                                         content_type=MERGE_PATCH)
            if response.ok:
                self._status_subresource[kind] = True
                return
            details = decode_status(response.body).details
            object_missing = details is not None and details.name == name
            if response.status != 404 or object_missing or not object_fallback:
                raise KubeApiError("PATCH", f"{group} {plural}/status", response.status, response.reason())
            self._status_subresource[kind] = False
        response = await self._write("patch", plural, "PATCH", base, body=body, content_type=MERGE_PATCH)
        if not response.ok:
            raise KubeApiError("PATCH", f"{group} {plural}", response.status, response.reason())

    # ------------------------------------------------------------------ quota status

    async def set_quota_status(self, api_version: str, plural: str, key: str, *,
                               status: Mapping[str, Mapping[str, str | None]] | None,
                               annotations: Mapping[str, str] | None) -> ApiOutcome:
        """A quota's usage (`daemon.kube.quota_status`): annotations by a merge patch of the object
        (Koordinator's runtime and request), `status` through the status subresource (the object
        itself when the CRD has none, as Koordinator's own ElasticQuota CRD)."""
        try:
            if annotations:
                response = await self._write("patch", plural, "PATCH", _object_path(api_version, plural, key),
                                             body={"metadata": {"annotations": dict(annotations)}},
                                             content_type=MERGE_PATCH)
                if not response.ok:
                    return _outcome_of(response)
            if status:
                await self._patch_status(api_version, plural, key, status)
        except NotLeader as error:
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        except KubeApiError as error:
            if error.status == 404:
                return ApiOutcome(ok=False, reason="not found", retriable=False)
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        return OK

    # ------------------------------------------------------------------ topology status

    async def set_network_topology_status(self, name: str, detail_status: Sequence[TopologyDetail]) -> ApiOutcome:
        """Merge patch `status.detailStatus` of a ClusterNetworkTopology (the list is replaced whole)."""
        path = f"/apis/{CLUSTER_NETWORK_TOPOLOGY_API}/clusternetworktopologies/{name}/status"
        body = {"status": {"detailStatus": msgspec.to_builtins(list(detail_status))}}
        return await self._outcome("patch", "clusternetworktopologies/status", path, body, MERGE_PATCH)

    async def set_hypernode_status(self, name: str, node_count: int) -> ApiOutcome:
        """Merge patch `status.nodeCount` of a HyperNode."""
        path = f"/apis/{HYPERNODE_API}/hypernodes/{name}/status"
        return await self._outcome("patch", "hypernodes/status", path, {"status": {"nodeCount": node_count}},
                                   MERGE_PATCH)

    async def report_object(self, key: str, api_version: str, kind: str, uid: str, reason: str,
                            message: str) -> ApiOutcome:
        """A Warning Event on any object (`key` without a namespace: a cluster-scoped one)."""
        try:
            await self.record_event(key, api_version, kind, uid, "Warning", reason, message,
                                    cluster_scoped="/" not in key)
        except (KubeApiError, NotLeader) as error:
            return ApiOutcome(ok=False, reason=str(error), retriable=True)
        return OK

    async def record_event(self, key: str, api_version: str, kind: str, uid: str,
                           event_type: Literal["Normal", "Warning"], reason: str, message: str, *,
                           cluster_scoped: bool = False) -> None:
        """A core/v1 Event on the object, correlated as client-go does (`daemon.kube.event_recorder`),
        and written before this returns (with whatever else was waiting); KubeApiError if it was not."""
        if key in self._held_pods:
            self._write_held()  # as `event`: a pod's Events keep the order of what they report
        failure = await self.events.post(_involved(key, api_version, kind, uid, cluster_scoped), event_type, reason,
                                         message)
        if failure:
            raise KubeApiError("POST", "events", 0, failure)

    def event(self, key: str, api_version: str, kind: str, uid: str, event_type: Literal["Normal", "Warning"],
              reason: str, message: str, *, cluster_scoped: bool = False) -> None:
        """A core/v1 Event on the object, written in the background (never waits). On a pod whose Scheduled
        Event is held for its gang's Bindings, the held ones are recorded first, so a pod's Events keep
        the order of what they report (its Scheduled before its Preempted)."""
        if key in self._held_pods:
            self._write_held()
        self.events.record(_involved(key, api_version, kind, uid, cluster_scoped), event_type, reason, message)

    async def send_event(self, method: str, path: str, body: Mapping[str, Any], content_type: str) -> Response:
        """`EventSink`: one Event create or patch, through the write gate; pipelined with the other
        writes of Events in the same turn (`KubeClient.request`: nothing waits for an Event)."""
        verb = "create" if method == "POST" else "patch"
        return await self._write(verb, "events", method, path, body=body, content_type=content_type, pipelined=True)


def _object_path(api_version: str, plural: str, key: str) -> str:
    """The object's path: `key` is namespace/name, or a bare name for a cluster-scoped object."""
    namespace, _, name = key.rpartition("/")
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{api_version}{where}/{plural}/{name}"


def _involved(key: str, api_version: str, kind: str, uid: str, cluster_scoped: bool) -> ObjectRef:
    namespace, name = _split(key)
    return ObjectRef(api_version=api_version, kind=kind, namespace="" if cluster_scoped else namespace, name=name,
                     uid=uid)


def _outcome_of(response: Response) -> ApiOutcome:
    if response.ok:
        return OK
    if response.status == 404:
        return ApiOutcome(ok=False, reason="not found", retriable=False)
    return ApiOutcome(ok=False, reason=f"HTTP {response.status}: {response.reason()}",
                      retriable=response.status >= 500 or response.status in (409, 429))
