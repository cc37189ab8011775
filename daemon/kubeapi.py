"""The real cluster-API adapter: the scheduler's decisions carried out as Kubernetes API writes.

What each write is, and how its answer is read:
- bind: POST pods/NAME/binding, the Binding carrying the pod's metadata.uid (a re-created pod of the
  same name fails the uid precondition and is never bound by mistake). The API answers with a Status;
  it is read raw. 429/5xx are retried (Retry-After honoured); a 409 is read back with a GET: bound to
  our node = success, anything else = failed. Never retried blindly, so no pod is bound twice.
- evict: POST pods/NAME/eviction (policy/v1 Eviction, the pod's grace period, uid precondition); when
  the Eviction API is not served (404 not naming the pod, 405) the pod is deleted with its grace
  period instead. A pod already gone counts as evicted.
- nominate: merge patch of pods/NAME/status `status.nominatedNodeName` (null clears it).
- disruption condition: strategic merge patch of pods/NAME/status adding the `DisruptionTarget`
  condition (reason `PreemptionByScheduler`, message naming the preemptor job and triggering pod).
- gang report: merge patch of the PodGroup's status subresource (the object itself when the CRD has
  no status subresource), plus a core/v1 Event on the PodGroup; a repeat of the same Event bumps its
  count with a patch instead of creating another.

Every call made anywhere in the daemon is listed in `API_CALLS` (group, resource, subresource, verb),
the one place the ops RBAC test checks the ClusterRole against. Every write first asks the leader's
`WriteGate`: a replica without a valid lease writes nothing.

Must never: decide anything (the loop decides, this only carries out), or report success it has not
read back from the API.
"""

from __future__ import annotations

import datetime
import os
import socket
from collections.abc import Mapping
from typing import Any, Literal

import anyio
import msgspec
import structlog

from daemon.kubeclient import MERGE_PATCH, STRATEGIC_MERGE_PATCH, ApiError, KubeClient, Response, decode_status
from daemon.leader import LeaseConflict, LeaseRecord, LeaseStoreError, WriteGate
from daemon.metrics import Metrics
from events.ingest import KINDS
from events.objects import KOORDINATOR_POD_GROUP_API

log = structlog.get_logger("toposched.kubeapi")

ApiCall = tuple[str, str, str, str]  # (API group, resource, subresource, verb)

# Every call the daemon makes. Keep in step with the code below: the ops RBAC test reads this.
API_CALLS: tuple[ApiCall, ...] = (
    *((info.group, info.plural, "", verb) for info in KINDS for verb in ("list", "watch")),
    ("", "pods", "", "get"),  # read back a 409 binding; read conditions before a status patch
    ("", "pods", "binding", "create"),
    ("", "pods", "eviction", "create"),
    ("", "pods", "", "delete"),  # eviction API not served
    ("", "pods", "status", "patch"),  # nominatedNodeName, DisruptionTarget condition
    ("scheduling.sigs.k8s.io", "podgroups", "status", "patch"),
    ("scheduling.sigs.k8s.io", "podgroups", "", "patch"),  # CRD without a status subresource
    ("scheduling.volcano.sh", "podgroups", "status", "patch"),
    ("scheduling.volcano.sh", "podgroups", "", "patch"),
    ("", "events", "", "create"),
    ("", "events", "", "patch"),
    ("coordination.k8s.io", "leases", "", "get"),
    ("coordination.k8s.io", "leases", "", "create"),
    ("coordination.k8s.io", "leases", "", "update"),
)

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
COMPONENT = "toposched"


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return namespace or "default", name


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class BindResult(msgspec.Struct, frozen=True):
    """What came of one binding: `bound` (read back from the API when it was in doubt) or why not."""

    pod: str
    node: str
    bound: bool
    reason: str = ""


class EvictResult(msgspec.Struct, frozen=True):
    pod: str
    evicted: bool
    via: Literal["eviction", "delete", "gone", ""] = ""
    reason: str = ""


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


class GangCondition(msgspec.Struct, frozen=True):
    """One condition written on a PodGroup's status (Volcano's shape, which both dialects accept)."""

    type: str  # Scheduled | Unschedulable | TimedOut
    status: str  # "True" | "False"
    reason: str
    message: str


class KubeClusterAPI:
    """Binds, evicts, nominates and reports through the API server; only while the gate is open."""

    def __init__(self, client: KubeClient, gate: WriteGate, metrics: Metrics | None = None,
                 *, bind_concurrency: int = 64) -> None:
        self.client = client
        self.gate = gate
        self.metrics = metrics or Metrics()
        self.bind_limiter = anyio.CapacityLimiter(bind_concurrency)
        self._events: dict[tuple[str, str, str], tuple[str, int]] = {}  # (object uid, reason, message) -> (name, count)
        self._event_prefix = f"{socket.gethostname()}-{os.getpid()}".lower().replace("_", "-")[:40]
        self._event_serial = 0
        self._status_subresource: dict[str, bool] = {}  # podgroups API version -> has /status

    # ------------------------------------------------------------------ plumbing

    async def _write(self, verb: str, resource: str, method: str, path: str, *,
                     body: Mapping[str, Any] | None = None, content_type: str = "application/json") -> Response:
        self.gate.check()
        started = anyio.current_time()
        try:
            response = await self.client.call(method, path, body=body, content_type=content_type)
        except ApiError as error:
            self.metrics.api_requests.labels(verb, resource, str(error.status or "transport")).inc()
            raise
        finally:
            self.metrics.api_duration.labels(verb, resource).observe(anyio.current_time() - started)
        self.metrics.api_requests.labels(verb, resource, str(response.status)).inc()
        return response

    async def _read_pod(self, key: str) -> _PodReadBack | None:
        namespace, name = _split(key)
        response = await self.client.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        if response.status == 404:
            return None
        if not response.ok:
            raise ApiError("GET", f"pods/{name}", response.status, response.reason())
        return _pod_decoder.decode(response.body)

    # ------------------------------------------------------------------ bind

    async def bind(self, pod: str, uid: str, node: str) -> BindResult:
        """Bind one pod (bounded concurrency); the result is what the API says, read back when in doubt."""
        async with self.bind_limiter:
            self.metrics.binds_in_flight.inc()
            try:
                result = await self._bind(pod, uid, node)
            finally:
                self.metrics.binds_in_flight.dec()
        self.metrics.binds.labels("bound" if result.bound else "failed").inc()
        if not result.bound:
            log.warning("bind.failed", pod=pod, node=node, reason=result.reason)
        return result

    async def _bind(self, pod: str, uid: str, node: str) -> BindResult:
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
        except ApiError as error:
            # Retries ran out; the last try may still have landed: the API is the judge.
            return await self._read_back(pod, uid, node, f"binding failed: {error.reason}")
        if response.ok:
            return BindResult(pod, node, True)
        if response.status == 409:
            return await self._read_back(pod, uid, node, response.reason())
        if response.status == 404:
            return BindResult(pod, node, False, "pod not found (deleted before it could be bound)")
        return BindResult(pod, node, False, f"HTTP {response.status}: {response.reason()}")

    async def _read_back(self, pod: str, uid: str, node: str, problem: str) -> BindResult:
        try:
            current = await self._read_pod(pod)
        except ApiError as error:
            return BindResult(pod, node, False, f"{problem}; read-back failed: {error.reason}")
        if current is None:
            return BindResult(pod, node, False, f"{problem}; the pod no longer exists")
        if uid and current.metadata.uid != uid:
            return BindResult(pod, node, False, f"{problem}; the pod was re-created (uid {current.metadata.uid})")
        if current.spec.nodeName == node:
            return BindResult(pod, node, True)
        if current.spec.nodeName:
            return BindResult(pod, node, False, f"{problem}; already bound to {current.spec.nodeName}")
        return BindResult(pod, node, False, problem)

    # ------------------------------------------------------------------ evict

    async def evict(self, pod: str, uid: str, grace_period_seconds: int | None = None) -> EvictResult:
        namespace, name = _split(pod)
        delete_options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            delete_options["gracePeriodSeconds"] = grace_period_seconds
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
        if response.ok:
            return EvictResult(pod, True, "eviction")
        status = decode_status(response.body)
        if response.status == 404 and status.details is not None and status.details.kind == "pods":
            return EvictResult(pod, True, "gone")
        if response.status == 409:  # uid precondition: the pod we meant is gone, a new one stands in its name
            return EvictResult(pod, True, "gone", "the pod was re-created")
        if response.status in (404, 405):
            return await self._delete(pod, delete_options)
        return EvictResult(pod, False, "", f"HTTP {response.status}: {response.reason()}")

    async def _delete(self, pod: str, delete_options: Mapping[str, Any]) -> EvictResult:
        namespace, name = _split(pod)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        response = await self._write("delete", "pods", "DELETE", path, body=delete_options)
        if response.ok:
            return EvictResult(pod, True, "delete")
        if response.status in (404, 409):
            return EvictResult(pod, True, "gone")
        return EvictResult(pod, False, "", f"HTTP {response.status}: {response.reason()}")

    # ------------------------------------------------------------------ pod status

    async def set_nominated_node(self, pod: str, node: str | None) -> bool:
        """Write (or clear, with None/"") status.nominatedNodeName. False when the pod is gone."""
        namespace, name = _split(pod)
        body = {"status": {"nominatedNodeName": node or None}}
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        response = await self._write("patch", "pods/status", "PATCH", path, body=body, content_type=MERGE_PATCH)
        if response.status == 404:
            return False
        if not response.ok:
            raise ApiError("PATCH", path, response.status, response.reason())
        return True

    async def set_disruption_condition(self, pod: str, preemptor: str, trigger: str) -> bool:
        """Mark a victim with DisruptionTarget=True before it is evicted. False when the pod is gone."""
        namespace, name = _split(pod)
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": f"{COMPONENT}: preempting to accommodate job {preemptor} (triggered by pod {trigger})",
            "lastTransitionTime": _now(),
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        response = await self._write("patch", "pods/status", "PATCH", path,
                                     body={"status": {"conditions": [condition]}}, content_type=STRATEGIC_MERGE_PATCH)
        if response.status == 415:
            # No strategic merge (a CRD-style server): merge the list ourselves, guarded by resourceVersion.
            current = await self._read_pod(pod)
            if current is None:
                return False
            kept = [c for c in current.status.conditions if c.get("type") != DISRUPTION_TARGET]
            body: dict[str, Any] = {"metadata": {"resourceVersion": current.metadata.resourceVersion},
                    "status": {"conditions": [*kept, condition]}}
            response = await self._write("patch", "pods/status", "PATCH", path, body=body, content_type=MERGE_PATCH)
        if response.status == 404:
            return False
        if not response.ok:
            raise ApiError("PATCH", path, response.status, response.reason())
        return True

    # ------------------------------------------------------------------ gangs

    async def report_gang(self, gang: str, *, api_version: str = KOORDINATOR_POD_GROUP_API, uid: str = "",
                          phase: str, condition: GangCondition, scheduled: int | None = None,
                          event_type: Literal["Normal", "Warning"] = "Normal") -> None:
        """Write the PodGroup's status (phase + condition) and an Event saying the same. Best effort."""
        status: dict[str, Any] = {"phase": phase}
        if scheduled is not None:
            status["scheduled"] = scheduled
        status["conditions"] = [{
            "type": condition.type, "status": condition.status, "reason": condition.reason,
            "message": condition.message, "lastTransitionTime": _now(),
        }]
        try:
            await self._patch_pod_group_status(gang, api_version, status)
        except ApiError as error:
            log.warning("gang.status_failed", gang=gang, error=str(error))
        try:
            await self.record_event(gang, api_version, "PodGroup", uid, event_type, condition.reason,
                                    condition.message)
        except ApiError as error:
            log.warning("gang.event_failed", gang=gang, error=str(error))

    async def _patch_pod_group_status(self, gang: str, api_version: str, status: Mapping[str, Any]) -> None:
        namespace, name = _split(gang)
        group = api_version.rpartition("/")[0]
        base = f"/apis/{api_version}/namespaces/{namespace}/podgroups/{name}"
        body = {"status": status}
        if self._status_subresource.get(api_version, True):
            response = await self._write("patch", "podgroups/status", "PATCH", f"{base}/status", body=body,
                                         content_type=MERGE_PATCH)
            if response.ok:
                self._status_subresource[api_version] = True
                return
            details = decode_status(response.body).details
            object_missing = details is not None and details.name == name
            if response.status != 404 or object_missing:
                raise ApiError("PATCH", f"{group} podgroups/status", response.status, response.reason())
            self._status_subresource[api_version] = False
        response = await self._write("patch", "podgroups", "PATCH", base, body=body, content_type=MERGE_PATCH)
        if not response.ok:
            raise ApiError("PATCH", f"{group} podgroups", response.status, response.reason())

    async def record_event(self, key: str, api_version: str, kind: str, uid: str,
                           event_type: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        """A core/v1 Event on the object; the same (object, reason, message) again bumps the count."""
        namespace, name = _split(key)
        now = _now()
        identity = (uid or key, reason, message)
        known = self._events.get(identity)
        if known is not None:
            event_name, count = known
            path = f"/api/v1/namespaces/{namespace}/events/{event_name}"
            response = await self._write("patch", "events", "PATCH", path,
                                         body={"count": count + 1, "lastTimestamp": now}, content_type=MERGE_PATCH)
            if response.ok:
                self._events[identity] = (event_name, count + 1)
                return
            if response.status != 404:
                raise ApiError("PATCH", path, response.status, response.reason())
        self._event_serial += 1
        event_name = f"{name}.{self._event_prefix}.{self._event_serial:x}"[:253]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name, "namespace": namespace},
            "involvedObject": {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace,
                               **({"uid": uid} if uid else {})},
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        path = f"/api/v1/namespaces/{namespace}/events"
        response = await self._write("create", "events", "POST", path, body=body)
        if not response.ok:
            raise ApiError("POST", path, response.status, response.reason())
        if len(self._events) > 10_000:
            self._events.clear()
        self._events[identity] = (event_name, 1)


# --------------------------------------------------------------------------- the Lease


class _LeaseSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    holderIdentity: str | None = None
    leaseDurationSeconds: int | None = None
    acquireTime: str | None = None
    renewTime: str | None = None
    leaseTransitions: int | None = None


class _LeaseMeta(msgspec.Struct, frozen=True):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""


class _Lease(msgspec.Struct, frozen=True):
    metadata: _LeaseMeta = _LeaseMeta()
    spec: _LeaseSpec = _LeaseSpec()


_lease_decoder = msgspec.json.Decoder(_Lease)


class KubeLeaseStore:
    """A coordination.k8s.io/v1 Lease as the leader elector's `LeaseStore`."""

    def __init__(self, client: KubeClient, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

    def _record(self, body: bytes) -> LeaseRecord:
        lease = _lease_decoder.decode(body)
        return LeaseRecord(
            holder=lease.spec.holderIdentity or "",
            duration_seconds=lease.spec.leaseDurationSeconds or 0,
            acquire_time=lease.spec.acquireTime,
            renew_time=lease.spec.renewTime,
            transitions=lease.spec.leaseTransitions or 0,
            resource_version=lease.metadata.resourceVersion,
        )

    def _body(self, record: LeaseRecord) -> dict[str, Any]:
        metadata: dict[str, str] = {"name": self.name, "namespace": self.namespace}
        if record.resource_version:
            metadata["resourceVersion"] = record.resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": record.holder,
                "leaseDurationSeconds": record.duration_seconds,
                "acquireTime": record.acquire_time,
                "renewTime": record.renew_time,
                "leaseTransitions": record.transitions,
            },
        }

    async def _send(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Response:
        try:
            return await self.client.request(method, path, body=body)
        except ApiError as error:
            raise LeaseStoreError(str(error)) from error

    async def get(self) -> LeaseRecord | None:
        response = await self._send("GET", f"{self.collection}/{self.name}")
        if response.status == 404:
            return None
        if not response.ok:
            raise LeaseStoreError(f"GET lease: HTTP {response.status} {response.reason()}")
        return self._record(response.body)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        response = await self._send("POST", self.collection, self._body(record))
        if response.status == 409:
            raise LeaseConflict("lease already exists")
        if not response.ok:
            raise LeaseStoreError(f"create lease: HTTP {response.status} {response.reason()}")
        return self._record(response.body)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        response = await self._send("PUT", f"{self.collection}/{self.name}", self._body(record))
        if response.status == 409:
            raise LeaseConflict("lease changed since it was read")
        if not response.ok:
            raise LeaseStoreError(f"update lease: HTTP {response.status} {response.reason()}")
        return self._record(response.body)
