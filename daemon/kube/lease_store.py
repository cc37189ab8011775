"""The Lease the leader election reads and writes: a coordination.k8s.io/v1 Lease over HTTP.

`KubeLeaseStore` is the elector's `LeaseStore` (`daemon/kube/leader.py`): get, create and update
(PUT with the resourceVersion it read, so two candidates never both win; a 409 is a
`LeaseConflict`). Its writes are not gated by the `WriteGate`: the Lease is what the gate is judged
by, and its resourceVersion protects it.

Must never: decide who leads (the elector does), or write anything but the Lease.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from daemon.kube.client import KubeApiError, KubeClient, Response
from daemon.kube.leader import LeaseConflict, LeaseRecord, LeaseStoreError


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
        except KubeApiError as error:
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
