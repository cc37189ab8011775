"""Objects in use are protected, as a cluster's control plane keeps them: deleted while still in use, they
are not removed, only marked (`deletionTimestamp`) until they are free; a protection finalizer holds them.

Storage objects (StorageObjectInUseProtection). kube-apiserver's admission plugin puts the finalizer
`kubernetes.io/pvc-protection` on every PersistentVolumeClaim it creates and `kubernetes.io/pv-protection`
on every PersistentVolume (`storage.admit_in_use_protection`); kube-controller-manager's pvc-protection
and pv-protection controllers (`StorageProtectionController`) add it to those that lack it and take it off
a deleted one once it is free, and the store then removes it:
- a claim is in use while a pod that was scheduled (`spec.nodeName` set) names it in
  `spec.volumes[].persistentVolumeClaim`, whatever the pod's phase, until the pod object is gone; or
  holds it as its generic ephemeral volume (`<pod>-<volume>`, controlled by the pod) and is not shut
  down (a deletionTimestamp with a grace period of 0: the kubelet is done with it, or it was
  force-deleted);
- a volume is in use while its `status.phase` is `Bound`.
So a pod that waits for a claim sees it "being deleted" while a running pod holds it, as in a real
cluster, rather than "not found".

Workload API PodGroups (GenericWorkload, 1.36+). The PodGroupProtection admission plugin puts the finalizer
`scheduling.k8s.io/podgroup-protection` on every PodGroup created, at whatever version
(`admission.admit_pod_group_protection`; devcluster's store also on those it loads: no PodGroup predates
the plugin); kube-controller-manager's podgroup-protection controller (`PodGroupProtectionController`)
only takes it off: from a deleted PodGroup once no pod of its namespace that names it
(`spec.schedulingGroup.podGroupName`) is non-terminal, i.e. each is gone or Succeeded / Failed (a pod being
deleted that still runs holds it). So a gang's PodGroup outlives the delete while its pods run down.

Both run on the store's event loop and act only through the store, as API clients would, and cost
nothing in the common case: the storage controller makes one pass over claims and volumes on a change of
either, and on a pod's change only while a deleted claim is held; the PodGroup controller looks only at
the PodGroups being deleted with its finalizer, and on a pod's change only if the pod names one it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devcluster.controller import StoreController
from devcluster.errors import ApiError
from devcluster.resources import ResourceDef
from devcluster.store import Store, resolve
from devcluster.watch import WatchEvent
from manifests.admission import POD_GROUP_PROTECTION

Obj = dict[str, Any]

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"

_CLAIMS = resolve("persistentvolumeclaims")
_VOLUMES = resolve("persistentvolumes")
_PODS = resolve("pods")
_POD_GROUPS = resolve("podgroups.scheduling.k8s.io")


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


class _FinalizerController(StoreController):
    """What both protection controllers do to an object: keep its finalizer, or take it off once it is free."""

    def _sync_object(self, resource: ResourceDef, obj: Obj, finalizer: str, in_use: Callable[[Obj], bool]) -> bool:
        """Add the finalizer to a live object that lacks it, take it off a deleted one that is free; whether
        a deleted object is still held."""
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp"):
            finalizers = [str(name) for name in meta.get("finalizers") or []]
            if finalizer not in finalizers:
                self._write(resource, obj, [*finalizers, finalizer])
            return False
        return self._release(resource, obj, finalizer, in_use)

    def _release(self, resource: ResourceDef, obj: Obj, finalizer: str, in_use: Callable[[Obj], bool]) -> bool:
        """Take the finalizer off a deleted object that is free (the store then removes it); whether it is
        still held."""
        meta = obj["metadata"]
        finalizers = [str(name) for name in meta.get("finalizers") or []]
        if not meta.get("deletionTimestamp") or finalizer not in finalizers:
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


class StorageProtectionController(_FinalizerController):
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


def pod_group_name(pod: Obj) -> str:
    """The Workload API PodGroup the pod belongs to (`spec.schedulingGroup.podGroupName`), "" for none."""
    name = _dict(_dict(pod.get("spec")).get("schedulingGroup")).get("podGroupName")
    return str(name) if name else ""


def terminal(pod: Obj) -> bool:
    """The pod is done: phase Succeeded or Failed."""
    return _dict(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def _candidate(pod_group: Obj) -> bool:
    """Deleted and still carrying the protection finalizer: the controller has to look at it."""
    meta = _dict(pod_group.get("metadata"))
    return bool(meta.get("deletionTimestamp")) and POD_GROUP_PROTECTION in (meta.get("finalizers") or [])


class PodGroupProtectionController(_FinalizerController):
    """Takes the podgroup-protection finalizer off deleted PodGroups no pod runs in, until `stop()` (see the
    module docstring)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._pending: set[tuple[str, str]] = set()  # (namespace, name) of the PodGroups to look at next pass
        self._held: set[tuple[str, str]] = set()  # deleted PodGroups a non-terminal pod still names

    def _started(self) -> None:
        for pod_group in self.store.list(_POD_GROUPS):
            if _candidate(pod_group):
                self._pending.add(_key(pod_group))
        if self._pending:
            self._schedule()

    def _stopped(self) -> None:
        self._pending.clear()
        self._held.clear()

    def _on_event(self, event: WatchEvent) -> None:
        if event.key == _POD_GROUPS.key:
            key = (event.namespace, str(event.obj["metadata"]["name"]))
            if event.type != "DELETED" and _candidate(event.obj):
                self._pending.add(key)
                self._schedule()
            else:
                self._held.discard(key)
        elif event.key == _PODS.key and self._held:
            key = (event.namespace, pod_group_name(event.obj))
            if key in self._held:
                self._pending.add(key)
                self._schedule()

    def _sync(self) -> None:
        pending, self._pending = self._pending, set()
        for namespace, name in sorted(pending):
            pod_group = self.store.find(_POD_GROUPS, name, namespace)
            if pod_group is None:
                self._held.discard((namespace, name))
                continue
            try:
                held = self._release(_POD_GROUPS, pod_group, POD_GROUP_PROTECTION, self._in_use)
            except ApiError:  # a conflicting write meanwhile: its event brings another pass
                continue
            if held:
                self._held.add((namespace, name))
            else:
                self._held.discard((namespace, name))

    def _in_use(self, pod_group: Obj) -> bool:
        meta = pod_group["metadata"]
        name = str(meta["name"])
        return any(pod_group_name(pod) == name and not terminal(pod)
                   for pod in self.store.list(_PODS, str(meta.get("namespace", ""))))


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return str(meta.get("namespace", "")), str(meta["name"])
