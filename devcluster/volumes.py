"""The PersistentVolume controller and an external provisioner for every StorageClass, as a cluster's
kube-controller-manager (pkg/controller/volume/persistentvolume) and CSI external-provisioner sidecars
(sigs.k8s.io/sig-storage-lib-external-provisioner) run them, so that volume binding can be tested.

A claim that names no volume (`spec.volumeName` empty) is, on each pass:
- bound to a PersistentVolume pre-bound to it (`spec.claimRef` naming it, without a uid or with its uid),
  whatever the class's binding mode (the scheduler's volume binder pre-binds static volumes so);
- for an `Immediate` class (or no class, or class ""), bound to the smallest Available volume that
  matches: same storageClassName, same volumeMode, every access mode of the claim, capacity >= the
  request, the claim's `spec.selector` matching the volume's labels (findBestMatchForClaim);
- otherwise provisioned, if its class's provisioner is not `kubernetes.io/no-provisioner`: at once for an
  `Immediate` class, once the scheduler wrote `volume.kubernetes.io/selected-node` for a
  `WaitForFirstConsumer` one (until then it stays Pending). The PV controller first annotates the claim
  with `volume.kubernetes.io/storage-provisioner` and `volume.beta.kubernetes.io/storage-provisioner`;
  the provisioner then creates PersistentVolume `pvc-<claim uid>`: the claim's request as capacity, its
  access modes and volume mode, the class's name and reclaim policy and mount options, a `csi` source of
  the provisioner's name, `claimRef` to the claim with its uid, annotation
  `pv.kubernetes.io/provisioned-by`, and `spec.nodeAffinity.required`: for a selected node, the class's
  allowedTopologies keys with the node's values, else the node's `topology.kubernetes.io/zone`, else
  `kubernetes.io/hostname` (its label, or its name), as a topology-aware or local-disk provisioner
  does; without a selected node, the class's allowedTopologies, or none. A Normal event
  `ProvisioningSucceeded` is recorded. A selected node that does not exist is the provisioner's
  reschedule: a Warning event `ProvisioningFailed` (`node "<name>" not found`) and the annotation removed.

Binding writes what the PV controller writes: the volume's `claimRef` (with
`pv.kubernetes.io/bound-by-controller: "yes"` when the controller set it) and `status.phase: Bound`; the
claim's `spec.volumeName` with `pv.kubernetes.io/bind-completed: "yes"` and
`pv.kubernetes.io/bound-by-controller: "yes"` (when the controller set the name), then its status:
phase Bound, the volume's access modes and capacity. A claim that names a volume is bound to it (a
pre-bound claim); one whose volume is gone is `Lost`.

Volumes: Available when no claim is bound (no claimRef, or one without uid), Released when the claim
they were bound to is gone (deleted, or recreated with another uid); a Released volume with the
`Delete` reclaim policy is then deleted (as the provisioner deletes it; devcluster deletes a static
one too), a `Retain` one stays Released.

The `kubernetes.io/pvc-protection` and `pv-protection` finalizers are kept by protection.py.

Not done: events other than the provisioner's two above
(WaitForFirstConsumer, ExternalProvisioning, FailedBinding), the Recycle policy, volume expansion and
a claim's dataSource.

Runs on the store's event loop: a change of a claim, volume or class schedules one pass over all of
them (passes run until nothing changes); it acts only through the store, as an API client would.
"""

from __future__ import annotations

import uuid
from fractions import Fraction
from typing import Any

from devcluster.controller import StoreController
from devcluster.errors import ApiError
from devcluster.selectors import labels_match, selector_requirements
from devcluster.store import Store, now_rfc3339, resolve
from devcluster.watch import WatchEvent
from manifests import storage
from manifests.quantity import QuantityError, value_of

Obj = dict[str, Any]

CLAIMS = resolve("persistentvolumeclaims")
VOLUMES = resolve("persistentvolumes")
CLASSES = resolve("storageclasses.storage.k8s.io")
_EVENTS = resolve("events")
_WATCHED = frozenset({CLAIMS.key, VOLUMES.key, CLASSES.key})

NO_PROVISIONER = "kubernetes.io/no-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _quantity(raw: Any) -> Fraction | None:
    try:
        return value_of(raw) if isinstance(raw, (str, int, float)) and not isinstance(raw, bool) else None
    except QuantityError:
        return None


def _annotations(obj: Obj) -> dict[str, str]:
    return dict(_dict(_dict(obj.get("metadata")).get("annotations")))


def _with_annotations(obj: Obj, annotations: dict[str, str]) -> Obj:
    return {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}


def claim_ref(claim: Obj) -> Obj:
    """The ObjectReference a volume's spec.claimRef holds for `claim`."""
    meta = claim["metadata"]
    return {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"],
            "uid": meta["uid"], "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion", "")}


def refers_to(ref: Any, claim: Obj) -> bool:
    """`ref` (a volume's claimRef) names `claim`: same namespace and name, and its uid if it has one."""
    if not isinstance(ref, dict):
        return False
    meta = claim["metadata"]
    return ref.get("name") == meta["name"] and ref.get("namespace") == meta["namespace"] and \
        (not ref.get("uid") or ref.get("uid") == meta["uid"])


def satisfies(volume: Obj, claim: Obj) -> bool:
    """The volume can serve the claim: class, volume mode, access modes, capacity and selector."""
    spec, claim_spec = _dict(volume.get("spec")), _dict(claim.get("spec"))
    if str(spec.get("storageClassName") or "") != storage.claim_class(claim):
        return False
    if (spec.get("volumeMode") or "Filesystem") != (claim_spec.get("volumeMode") or "Filesystem"):
        return False
    if not set(claim_spec.get("accessModes") or []) <= set(spec.get("accessModes") or []):
        return False
    capacity = _quantity(_dict(spec.get("capacity")).get("storage"))
    request = _quantity(_dict(_dict(claim_spec.get("resources")).get("requests")).get("storage"))
    if capacity is None or request is None or capacity < request:
        return False
    if claim_spec.get("selector") is not None:
        requirements = selector_requirements(claim_spec["selector"])
        if requirements is None or not labels_match(requirements, volume):
            return False
    return True


def best_match(claim: Obj, volumes: list[Obj], *, prebound_only: bool) -> Obj | None:
    """The volume the PV controller binds `claim` to: one pre-bound to it, else (unless `prebound_only`, a
    WaitForFirstConsumer claim) the smallest unbound one that satisfies it; None if there is none."""
    candidates: list[tuple[Fraction, str, Obj]] = []
    for volume in volumes:
        if volume["metadata"].get("deletionTimestamp"):
            continue
        spec = _dict(volume.get("spec"))
        ref = spec.get("claimRef")
        if ref is not None:
            if refers_to(ref, claim) and satisfies(volume, claim):
                return volume
            continue
        if prebound_only or _dict(volume.get("status")).get("phase") not in (None, "Pending", "Available"):
            continue
        if satisfies(volume, claim):
            capacity = _quantity(_dict(spec.get("capacity")).get("storage")) or Fraction(0)
            candidates.append((capacity, str(volume["metadata"]["name"]), volume))
    return min(candidates, key=lambda c: (c[0], c[1]))[2] if candidates else None


def node_affinity(storage_class: Obj, node: Obj | None) -> Obj | None:
    """The `spec.nodeAffinity` of a volume provisioned for this class, on `node` if one was selected."""
    topologies = [_dict(t) for t in storage_class.get("allowedTopologies") or []]
    if node is None:
        if not topologies:
            return None
        terms = [{"matchExpressions": [{"key": e.get("key"), "operator": "In", "values": list(e.get("values") or [])}
                                       for e in t.get("matchLabelExpressions") or [] if isinstance(e, dict)]}
                 for t in topologies]
        return {"required": {"nodeSelectorTerms": terms}}
    labels = _dict(node["metadata"].get("labels"))
    keys = list(dict.fromkeys(str(_dict(e).get("key")) for t in topologies
                              for e in t.get("matchLabelExpressions") or []))
    expressions = [{"key": key, "operator": "In", "values": [labels[key]]} for key in keys if key in labels]
    if not expressions:
        if ZONE_LABEL in labels:
            expressions = [{"key": ZONE_LABEL, "operator": "In", "values": [labels[ZONE_LABEL]]}]
        else:
            hostname = labels.get(HOSTNAME_LABEL) or node["metadata"]["name"]
            expressions = [{"key": HOSTNAME_LABEL, "operator": "In", "values": [hostname]}]
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}


class VolumeController(StoreController):
    """Binds claims to volumes and provisions volumes for them until `stop()` (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.provisioned = 0

    def _started(self) -> None:
        self._schedule()

    def _on_event(self, event: WatchEvent) -> None:
        if event.key in _WATCHED:
            self._schedule()

    def _sync(self) -> None:
        for claim in self.store.list(CLAIMS):
            try:
                self._sync_claim(claim)
            except ApiError:  # a conflicting write meanwhile: its event brings another pass
                continue
        for volume in self.store.list(VOLUMES):
            try:
                self._sync_volume(volume)
            except ApiError:
                continue

    # ----------------------------------------------------------------------- claims

    def _sync_claim(self, claim: Obj) -> None:
        meta, spec = claim["metadata"], _dict(claim.get("spec"))
        if meta.get("deletionTimestamp"):
            return
        if spec.get("volumeName"):
            volume = self.store.find(VOLUMES, str(spec["volumeName"]))
            if volume is None:
                if _dict(claim.get("status")).get("phase") == "Bound":
                    self._claim_status(claim, {**_dict(claim.get("status")), "phase": "Lost"})
                return
            ref = _dict(volume.get("spec")).get("claimRef")
            if ref is not None and not refers_to(ref, claim):
                return  # the volume is bound to another claim: this one waits
            self._bind(claim, volume)
            return
        class_name = storage.claim_class(claim)
        storage_class = self.store.find(CLASSES, class_name) if class_name else None
        if class_name and storage_class is None:
            return
        waits = storage_class is not None and storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"
        volume = best_match(claim, self.store.list(VOLUMES), prebound_only=waits)
        if volume is not None:
            self._bind(claim, volume)
        elif storage_class is not None and storage_class.get("provisioner") != NO_PROVISIONER:
            selected = _annotations(claim).get(SELECTED_NODE)
            if not waits or selected:
                self._provision(claim, storage_class, selected)

    def _bind(self, claim: Obj, volume: Obj) -> None:
        """Bind both ways, in the PV controller's order: the volume, its phase, the claim, its status."""
        meta = claim["metadata"]
        volume_name = str(volume["metadata"]["name"])
        ref = _dict(volume.get("spec")).get("claimRef")
        if not isinstance(ref, dict) or not ref.get("uid"):
            annotations = {**_annotations(volume), BOUND_BY_CONTROLLER: "yes"}
            volume = self.store.update_in(VOLUMES, volume_name, "", {
                **_with_annotations(volume, annotations), "spec": {**volume["spec"], "claimRef": claim_ref(claim)},
            }, strict=True, manager="persistentvolume-controller")
        if _dict(volume.get("status")).get("phase") != "Bound":
            volume = self.store.update_in(VOLUMES, volume_name, "", {
                **volume, "status": {**_dict(volume.get("status")), "phase": "Bound"}}, subresource="status")
        spec = _dict(claim.get("spec"))
        annotations = _annotations(claim)
        wanted = {**annotations, BIND_COMPLETED: "yes"}
        if not spec.get("volumeName"):
            wanted[BOUND_BY_CONTROLLER] = "yes"
        if spec.get("volumeName") != volume_name or wanted != annotations:
            claim = self.store.update_in(CLAIMS, str(meta["name"]), str(meta["namespace"]), {
                **_with_annotations(claim, wanted), "spec": {**spec, "volumeName": volume_name},
            }, strict=True, manager="persistentvolume-controller")
        volume_spec = _dict(volume.get("spec"))
        status = {**_dict(claim.get("status")), "phase": "Bound",
                  "accessModes": list(volume_spec.get("accessModes") or []),
                  "capacity": dict(_dict(volume_spec.get("capacity")))}
        if status != claim.get("status"):
            self._claim_status(claim, status)

    def _claim_status(self, claim: Obj, status: Obj) -> None:
        meta = claim["metadata"]
        self.store.update_in(CLAIMS, str(meta["name"]), str(meta["namespace"]), {**claim, "status": status},
                             subresource="status")

    # ----------------------------------------------------------------------- provisioning

    def _provision(self, claim: Obj, storage_class: Obj, selected: str | None) -> None:
        meta = claim["metadata"]
        provisioner = str(storage_class.get("provisioner") or "")
        annotations = _annotations(claim)
        if annotations.get(STORAGE_PROVISIONER) != provisioner or \
                annotations.get(BETA_STORAGE_PROVISIONER) != provisioner:
            # The PV controller hands the claim to the external provisioner by annotating it.
            claim = self.store.update_in(CLAIMS, str(meta["name"]), str(meta["namespace"]), _with_annotations(
                claim, {**annotations, STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner}),
                strict=True, manager="persistentvolume-controller")
            meta = claim["metadata"]
        node: Obj | None = None
        if selected:
            node = self.store.find("nodes", selected)
            if node is None:  # the provisioner asks the scheduler to choose again
                self._record(claim, "Warning", "ProvisioningFailed", f'node "{selected}" not found', provisioner)
                remaining = {k: v for k, v in _annotations(claim).items() if k != SELECTED_NODE}
                self.store.update_in(CLAIMS, str(meta["name"]), str(meta["namespace"]),
                                     _with_annotations(claim, remaining), strict=True, manager=provisioner)
                return
        name = f"pvc-{meta['uid']}"
        volume = self.store.find(VOLUMES, name)
        if volume is None:
            volume = self.store.create_in(VOLUMES, self._volume_for(claim, storage_class, node, name), "",
                                          keep_status=False)
            self.provisioned += 1
            self._record(claim, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume {name}",
                         provisioner)
        self._bind(claim, volume)

    @staticmethod
    def _volume_for(claim: Obj, storage_class: Obj, node: Obj | None, name: str) -> Obj:
        claim_spec = _dict(claim.get("spec"))
        provisioner = str(storage_class.get("provisioner") or "")
        spec: Obj = {
            "capacity": {"storage": _dict(_dict(claim_spec.get("resources")).get("requests")).get("storage")},
            "accessModes": list(claim_spec.get("accessModes") or []),
            "claimRef": claim_ref(claim),
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
            "storageClassName": storage_class["metadata"]["name"],
            "volumeMode": claim_spec.get("volumeMode") or "Filesystem",
            "csi": {"driver": provisioner, "volumeHandle": name},
        }
        if storage_class.get("mountOptions"):
            spec["mountOptions"] = list(storage_class["mountOptions"])
        affinity = node_affinity(storage_class, node)
        if affinity is not None:
            spec["nodeAffinity"] = affinity
        return {"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "annotations": {PROVISIONED_BY: provisioner}}, "spec": spec}

    def _record(self, claim: Obj, kind: str, reason: str, message: str, component: str) -> None:
        meta, stamp = claim["metadata"], now_rfc3339(self.store.clock)
        self.store.create_in(_EVENTS, {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
            "involvedObject": {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"],
                               "uid": meta["uid"], "apiVersion": "v1",
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": kind, "source": {"component": component},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "reportingComponent": component,
        }, str(meta["namespace"]), keep_status=True)

    # ----------------------------------------------------------------------- volumes

    def _sync_volume(self, volume: Obj) -> None:
        meta, spec = volume["metadata"], _dict(volume.get("spec"))
        if meta.get("deletionTimestamp"):
            return
        phase = _dict(volume.get("status")).get("phase")
        ref = spec.get("claimRef")
        if not isinstance(ref, dict) or not ref.get("uid"):
            if phase != "Available":
                self._volume_phase(volume, "Available")
            return
        claim = self.store.find(CLAIMS, str(ref.get("name")), str(ref.get("namespace")))
        if claim is not None and claim["metadata"]["uid"] == ref.get("uid"):
            return  # bound, or being bound: the claim's pass does it
        if phase not in ("Released", "Failed"):
            self._volume_phase(volume, "Released")
        elif phase == "Released" and spec.get("persistentVolumeReclaimPolicy") == "Delete":
            self.store.delete(VOLUMES, str(meta["name"]))

    def _volume_phase(self, volume: Obj, phase: str) -> None:
        self.store.update_in(VOLUMES, str(volume["metadata"]["name"]), "",
                             {**volume, "status": {**_dict(volume.get("status")), "phase": phase}},
                             subresource="status")
