"""Storage object in use protection, as a cluster's control plane keeps it: a claim a pod still uses, or
a volume still bound, is not removed when it is deleted, only marked (`deletionTimestamp`) until it is
free.

kube-apiserver's StorageObjectInUseProtection admission plugin puts the finalizer
`kubernetes.io/pvc-protection` on every PersistentVolumeClaim it creates and `kubernetes.io/pv-protection`
on every PersistentVolume (`storage.admit_in_use_protection`); kube-controller-manager's pvc-protection
and pv-protection controllers (this one) add it to those that lack it and take it off a deleted one
once it is free, and the store then removes it:
- a claim is in use while a pod that was scheduled (`spec.nodeName` set) names it in
  `spec.volumes[].persistentVolumeClaim`, whatever the pod's phase, until the pod object is gone; or
  holds it as its generic ephemeral volume (`<pod>-<volume>`, controlled by the pod) and is not shut
  down (a deletionTimestamp with a grace period of 0: the kubelet is done with it, or it was
  force-deleted);
- a volume is in use while its `status.phase` is `Bound`.

So a pod that waits for a claim sees it "being deleted" while a running pod holds it, as in a real
cluster, rather than "not found".

Runs on the store's event loop: a change of a claim or a volume schedules one pass over both kinds; a
pod's change schedules one only while a deleted claim is held (the common case costs nothing). It acts
only through the store, as an API client would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devcluster.controller import StoreController
from devcluster.errors import ApiError
from devcluster.resources import ResourceDef
from devcluster.store import Store, resolve
from devcluster.watch import WatchEvent

Obj = dict[str, Any]

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"

_CLAIMS = resolve("persistentvolumeclaims")
_VOLUMES = resolve("persistentvolumes")
_PODS = resolve("pods")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def shut_down(pod: Obj) -> bool:
    """The kubelet is done with the pod, or it was force-deleted: deleted with a grace period of 0."""
    meta = _dict(pod.get("metadata"))
    return bool(meta.get("deletionTimestamp")) and meta.get("deletionGracePeriodSeconds") == 0


def uses_claim(pod: Obj, claim: Obj) -> bool:
    """`pod` keeps `claim` from being removed (see the module docstring)."""
    spec = _dict(pod.get("spec"))
    if not spec.get("nodeName"):
        return False  # the kubelet never starts a pod whose claim is being deleted: it may go
    meta, claim_meta = _dict(pod.get("metadata")), _dict(claim.get("metadata"))
    name = claim_meta.get("name")
    for volume in spec.get("volumes") or []:
        volume = _dict(volume)
        source = _dict(volume.get("persistentVolumeClaim"))
        if source and source.get("claimName") == name:
            return True
        if (volume.get("ephemeral") is not None and not shut_down(pod)
                and f"{meta.get('name')}-{volume.get('name')}" == name
                and any(_dict(owner).get("controller") and _dict(owner).get("uid") == meta.get("uid")
                        for owner in claim_meta.get("ownerReferences") or [])):
            return True
    return False


class ProtectionController(StoreController):
    """Keeps the protection finalizers of claims and volumes until `stop()` (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._held = False  # a deleted claim is still in use: pod changes may free it

    def _started(self) -> None:
        self._schedule()

    def _on_event(self, event: WatchEvent) -> None:
        if event.key in (_CLAIMS.key, _VOLUMES.key) or (event.key == _PODS.key and self._held):
            self._schedule()

    def _sync(self) -> None:
        held = False
        for claim in self.store.list(_CLAIMS):
            try:
                held = self._sync_object(_CLAIMS, claim, PVC_PROTECTION, self._claim_in_use) or held
            except ApiError:  # a conflicting write meanwhile: its event brings another pass
                continue
        for volume in self.store.list(_VOLUMES):
            try:
                self._sync_object(_VOLUMES, volume, PV_PROTECTION,
                                  lambda bound: _dict(bound.get("status")).get("phase") == "Bound")
            except ApiError:
                continue
        self._held = held

    def _claim_in_use(self, claim: Obj) -> bool:
        namespace = str(claim["metadata"].get("namespace", ""))
        return any(uses_claim(pod, claim) for pod in self.store.list(_PODS, namespace))

    def _sync_object(self, resource: ResourceDef, obj: Obj, finalizer: str, in_use: Callable[[Obj], bool]) -> bool:
        """Add the finalizer to a live object that lacks it, take it off a deleted one that is free; whether
        a deleted object is still held."""
        meta = obj["metadata"]
        finalizers = [str(name) for name in meta.get("finalizers") or []]
        if not meta.get("deletionTimestamp"):
            if finalizer not in finalizers:
                self._write(resource, obj, [*finalizers, finalizer])
            return False
        if finalizer not in finalizers:
            return False
        if in_use(obj):
            return True
        self._write(resource, obj, [name for name in finalizers if name != finalizer])
        return False

    def _write(self, resource: ResourceDef, obj: Obj, finalizers: list[str]) -> None:
        meta = {key: value for key, value in obj["metadata"].items() if key != "finalizers"}
        if finalizers:
            meta["finalizers"] = finalizers
        self.store.update_in(resource, str(obj["metadata"]["name"]), str(obj["metadata"].get("namespace", "")),
                             {**obj, "metadata": meta})
