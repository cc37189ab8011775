"""The API server's side of storage: decoding, defaulting, the DefaultStorageClass and
StorageObjectInUseProtection admission plugins and the validation of PersistentVolumeClaim,
PersistentVolume and storage.k8s.io/v1 StorageClass writes.

What kube-apiserver does to these kinds before it stores them, as far as a client can see it:

- decoding: `spec.resources.requests` / `limits` of a claim and `spec.capacity` of a volume are stored in
  canonical form (`1024Mi` is `1Gi`); a value that is not a quantity is 400 BadRequest;
- defaulting (`SetDefaults_*`): a claim's and a volume's `spec.volumeMode` is `Filesystem`, a volume's
  `persistentVolumeReclaimPolicy` is `Retain`, both start in `status.phase: Pending`; a class's
  `reclaimPolicy` is `Delete` and its `volumeBindingMode` `Immediate`;
- DefaultStorageClass (plugin/pkg/admission/storage/storageclass/setdefault): a claim created with no
  class (neither `spec.storageClassName` nor the beta annotation `volume.beta.kubernetes.io/storage-class`)
  gets the name of the class annotated `storageclass.kubernetes.io/is-default-class: "true"` (or the beta
  annotation); with several, the newest by creationTimestamp, ties by name ascending (GetDefaultClass);
  none leaves it unset. An explicit `storageClassName: ""` is a class ("no class") and stays;
- StorageObjectInUseProtection (plugin/pkg/admission/storage/storageobjectinuseprotection): a claim is
  created with the finalizer `kubernetes.io/pvc-protection`, a volume with `kubernetes.io/pv-protection`
  (devcluster/protection.py takes them off once the deleted object is free);
- validation (pkg/apis/core/validation, pkg/apis/storage/validation), the rules a manifest author meets:
  a claim needs access modes (of the supported four, ReadWriteOncePod alone) and a positive
  `resources.requests.storage`; once created its spec is immutable ("spec is immutable after creation
  except resources.requests and volumeAttributesClassName for bound claims"), except `volumeName` while it
  is empty (the PV controller binds through it), `storageClassName` while it is unset (retroactive
  default class) and the storage request of a Bound claim (not below status.capacity); a volume needs a
  capacity, access modes and exactly one volume source (`spec: Required value: must specify a volume
  type`; each source after the first in the server's order `Forbidden: may not specify more than 1
  volume type`), a `local` one an absolute-or-relative path without `..` and node affinity with
  required terms (`spec.nodeAffinity: Required value: Local volume requires node affinity`; an
  affinity without `required` is refused for any volume), its reclaim policy and volume mode are among
  the supported values, its
  `nodeAffinity` may be set when it had none but never changed once set (field path `nodeAffinity`,
  as the real server writes it); a class needs a provisioner, a supported reclaim policy and binding mode,
  and its `provisioner`, `parameters` and `reclaimPolicy` are Forbidden to change, its
  `volumeBindingMode` immutable; a CSINode (ValidateCSINode) is named as a node (a DNS subdomain), each of
  its `spec.drivers[]` has a `name` (a DNS subdomain, unique in the list: `Duplicate value`), a `nodeID` of
  at most 192 characters, an `allocatable.count` >= 0 (an int32: more does not decode), `topologyKeys` that
  are unique qualified names; on update a driver entry of the same name may change only its `allocatable`
  (MutableCSINodeAllocatableCount, on by default since 1.34).

The real server appends a diff of the two specs to the "spec is immutable" message; devcluster does
not. Pure: no I/O, nothing stored; the caller passes the classes in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from manifests.admission import with_finalizer
from manifests.defaulting import UndecodableQuantity, canonical_quantities
from manifests.quantity import QuantityError, value_of
from manifests.validation import (
    Cause,
    dns_subdomain_problems,
    forbidden,
    immutable,
    invalid,
    not_supported,
    qualified_name_problems,
    required,
)

Obj = dict[str, Any]

CLAIM = ("v1", "PersistentVolumeClaim")
VOLUME = ("v1", "PersistentVolume")
CLASS = ("storage.k8s.io/v1", "StorageClass")
CSI_NODE = ("storage.k8s.io/v1", "CSINode")
KINDS = frozenset({CLAIM, VOLUME, CLASS, CSI_NODE})

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BETA_DEFAULT_CLASS_ANNOTATION = "storageclass.beta.kubernetes.io/is-default-class"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")  # sorted, as listed in errors
VOLUME_MODES = ("Block", "Filesystem")
# A volume's sources in the order ValidatePersistentVolumeSpec checks them: past the first one present,
# each is refused (flexVolume is counted but never refused), so the field a message names depends on it.
VOLUME_SOURCES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs", "rbd",
                  "quobyte", "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile", "vsphereVolume",
                  "photonPersistentDisk", "portworxVolume", "azureDisk", "scaleIO", "local", "storageos", "csi")
_SOURCE_PATHS = {"cephfs": "cephFS"}  # where the server's message spells a source otherwise
CLASS_RECLAIM_POLICIES = ("Delete", "Retain")
VOLUME_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
_CLAIM_IMMUTABLE = "spec is immutable after creation except resources.requests and volumeAttributesClassName " \
                   "for bound claims"


class UndecodableStorage(ValueError):
    """A quantity that is not one: the 400 BadRequest message the API server answers."""


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _canonical(values: Any, field: str, kind: str) -> Any:
    try:
        return canonical_quantities(values, field)
    except UndecodableQuantity as error:
        raise UndecodableStorage(f'{kind} in version "v1" cannot be handled as a {kind}: '
                                 f"{error.field}: {error.message}") from None


def decode_and_default(api_version: str, kind: str, obj: Obj) -> Obj:
    """The object as stored after decoding and `SetDefaults_*` (a new dict where anything changes)."""
    key = (api_version, kind)
    if key == CLAIM:
        spec = dict(_dict(obj.get("spec")))
        resources = dict(_dict(spec.get("resources")))
        for part in ("requests", "limits"):
            if part in resources:
                resources[part] = _canonical(resources[part], f"spec.resources.{part}", kind)
        if resources:
            spec["resources"] = resources
        spec.setdefault("volumeMode", "Filesystem")
        status = dict(_dict(obj.get("status")))
        if "capacity" in status:
            status["capacity"] = _canonical(status["capacity"], "status.capacity", kind)
        status["phase"] = status.get("phase") or "Pending"
        return {**obj, "spec": spec, "status": status}
    if key == VOLUME:
        spec = dict(_dict(obj.get("spec")))
        if "capacity" in spec:
            spec["capacity"] = _canonical(spec["capacity"], "spec.capacity", kind)
        spec.setdefault("volumeMode", "Filesystem")
        spec["persistentVolumeReclaimPolicy"] = spec.get("persistentVolumeReclaimPolicy") or "Retain"
        status = dict(_dict(obj.get("status")))
        status["phase"] = status.get("phase") or "Pending"
        return {**obj, "spec": spec, "status": status}
    if key == CLASS:
        return {**obj, "reclaimPolicy": obj.get("reclaimPolicy") or "Delete",
                "volumeBindingMode": obj.get("volumeBindingMode") or "Immediate"}
    return obj


# --------------------------------------------------------------------------- DefaultStorageClass


def is_default_class(storage_class: Obj) -> bool:
    annotations = _dict(_dict(storage_class.get("metadata")).get("annotations"))
    return annotations.get(DEFAULT_CLASS_ANNOTATION) == "true" or \
        annotations.get(BETA_DEFAULT_CLASS_ANNOTATION) == "true"


def default_class(classes: Iterable[Obj]) -> Obj | None:
    """The default StorageClass: of those annotated default, the newest, ties by name ascending."""
    defaults = [c for c in classes if is_default_class(c)]
    if not defaults:
        return None
    # creationTimestamp is RFC 3339 at second precision in UTC: its text orders as its time does.
    defaults.sort(key=lambda c: str(c["metadata"]["name"]))
    return max(defaults, key=lambda c: str(c["metadata"].get("creationTimestamp") or ""))


def has_class(claim: Obj) -> bool:
    """The claim names a class, "" included (helper.PersistentVolumeClaimHasClass)."""
    annotations = _dict(_dict(claim.get("metadata")).get("annotations"))
    return BETA_CLASS_ANNOTATION in annotations or _dict(claim.get("spec")).get("storageClassName") is not None


def claim_class(claim: Obj) -> str:
    """The claim's class name, "" for none (the beta annotation first, as the controllers read it)."""
    annotations = _dict(_dict(claim.get("metadata")).get("annotations"))
    if BETA_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_CLASS_ANNOTATION])
    return str(_dict(claim.get("spec")).get("storageClassName") or "")


IN_USE_FINALIZERS = {CLAIM: "kubernetes.io/pvc-protection", VOLUME: "kubernetes.io/pv-protection"}


def admit_in_use_protection(kind: tuple[str, str], obj: Obj) -> Obj:
    """The StorageObjectInUseProtection admission plugin on a claim's or a volume's create: its protection
    finalizer (devcluster/protection.py takes it off once the object is deleted and free)."""
    finalizer = IN_USE_FINALIZERS.get(kind)
    return obj if finalizer is None else with_finalizer(obj, finalizer)


def admit_default_class(claim: Obj, classes: Iterable[Obj]) -> Obj:
    """The DefaultStorageClass admission plugin on a claim's create."""
    if has_class(claim):
        return claim
    found = default_class(classes)
    if found is None:
        return claim
    return {**claim, "spec": {**_dict(claim.get("spec")), "storageClassName": found["metadata"]["name"]}}


# --------------------------------------------------------------------------- validation


def _quantity_value(raw: Any) -> Any:
    try:
        return value_of(raw) if isinstance(raw, (str, int, float)) and not isinstance(raw, bool) else None
    except QuantityError:
        return None


def _class_name(value: Any, field: str) -> list[Cause]:
    if not isinstance(value, str) or not value:
        return []
    return [invalid(field, value, problem) for problem in dns_subdomain_problems(value)]


def _access_modes(modes: Any, field: str) -> list[Cause]:
    listed = modes if isinstance(modes, list) else []
    if not listed:
        return [required(field, "at least 1 access mode is required")]
    causes = [not_supported(field, mode, ACCESS_MODES) for mode in listed if mode not in ACCESS_MODES]
    if "ReadWriteOncePod" in listed and any(m in ACCESS_MODES and m != "ReadWriteOncePod" for m in listed):
        causes.append(forbidden(field, "may not use ReadWriteOncePod with other access modes"))
    return causes


def _positive_storage(values: Any, field: str) -> list[Cause]:
    raw = _dict(values).get("storage")
    if raw is None:
        return [required(field)]
    value = _quantity_value(raw)
    if value is not None and value <= 0:
        return [invalid(field, raw, "must be greater than zero")]
    return []


def _claim(claim: Obj, old: Obj | None) -> list[Cause]:
    spec = _dict(claim.get("spec"))
    causes = _access_modes(spec.get("accessModes"), "spec.accessModes")
    causes += _positive_storage(_dict(spec.get("resources")).get("requests"), "spec.resources[storage]")
    causes += _class_name(spec.get("storageClassName"), "spec.storageClassName")
    if spec.get("volumeMode") not in VOLUME_MODES:
        causes.append(not_supported("spec.volumeMode", spec.get("volumeMode"), VOLUME_MODES))
    if old is None:
        return causes
    old_spec, bound = _dict(old.get("spec")), _dict(claim.get("status")).get("phase") == "Bound"
    comparable_old, comparable_new = dict(old_spec), dict(spec)
    if not old_spec.get("volumeName"):  # the PV controller sets volumeName once
        comparable_old["volumeName"] = spec.get("volumeName")
    if old_spec.get("storageClassName") is None:  # a default class may be written later (retroactively)
        comparable_old["storageClassName"] = spec.get("storageClassName")
    comparable_new.pop("volumeAttributesClassName", None)
    comparable_old.pop("volumeAttributesClassName", None)
    if bound:  # a Bound claim may ask for more storage (expansion)
        new_requests = dict(_dict(_dict(spec.get("resources")).get("requests")))
        old_requests = _dict(_dict(old_spec.get("resources")).get("requests"))
        if "storage" in old_requests:
            new_requests["storage"] = old_requests["storage"]
        comparable_new["resources"] = {**_dict(spec.get("resources")), "requests": new_requests}
    if {k: v for k, v in comparable_new.items() if v is not None} != \
            {k: v for k, v in comparable_old.items() if v is not None}:
        causes.append(forbidden("spec", _CLAIM_IMMUTABLE))
    new_size = _quantity_value(_dict(_dict(spec.get("resources")).get("requests")).get("storage"))
    old_size = _quantity_value(_dict(_dict(old_spec.get("resources")).get("requests")).get("storage"))
    if new_size is not None and old_size is not None and new_size < old_size:
        status_size = _quantity_value(_dict(_dict(old.get("status")).get("capacity")).get("storage"))
        if status_size is None or new_size <= status_size:  # RecoverVolumeExpansionFailure, GA in 1.34
            causes.append(forbidden("spec.resources.requests.storage", "field can not be less than status.capacity"))
    return causes


def _volume(volume: Obj, old: Obj | None) -> list[Cause]:
    spec = _dict(volume.get("spec"))
    causes = _positive_storage(spec.get("capacity"), "spec.capacity[storage]") if "capacity" in spec else \
        [required("spec.capacity")]
    causes += _access_modes(spec.get("accessModes"), "spec.accessModes")
    causes += _volume_source(spec)
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy not in VOLUME_RECLAIM_POLICIES:
        causes.append(not_supported("spec.persistentVolumeReclaimPolicy", policy, VOLUME_RECLAIM_POLICIES))
    causes += _class_name(spec.get("storageClassName"), "spec.storageClassName")
    if spec.get("volumeMode") not in VOLUME_MODES:
        causes.append(not_supported("spec.volumeMode", spec.get("volumeMode"), VOLUME_MODES))
    if old is None:
        return causes
    old_spec = _dict(old.get("spec"))
    if spec.get("volumeMode") != old_spec.get("volumeMode"):
        causes.append(immutable("volumeMode", spec.get("volumeMode")))
    # Setting nodeAffinity on a volume that had none is allowed; once set it is immutable (the
    # MutablePVNodeAffinity gate of 1.35 is alpha, off by default).
    if old_spec.get("nodeAffinity") is not None and spec.get("nodeAffinity") != old_spec.get("nodeAffinity"):
        causes.append(immutable("nodeAffinity", spec.get("nodeAffinity")))
    return causes


def _volume_source(spec: Obj) -> list[Cause]:
    causes: list[Cause] = []
    affinity = spec.get("nodeAffinity")
    if affinity is not None and _dict(affinity).get("required") is None:
        causes.append(required("spec.nodeAffinity.required", "must specify required node constraints"))
    found = 0
    for source in VOLUME_SOURCES:
        if spec.get(source) is None:
            continue
        if found and source != "flexVolume":
            causes.append(forbidden(f"spec.{_SOURCE_PATHS.get(source, source)}",
                                    "may not specify more than 1 volume type"))
            continue
        found += 1
        if source == "local":
            path = _dict(spec.get("local")).get("path")
            if not path:
                causes.append(required("spec.local.path"))
            elif ".." in str(path).split("/"):
                causes.append(invalid("spec.local.path", path, "must not contain '..'"))
            if affinity is None:
                causes.append(required("spec.nodeAffinity", "Local volume requires node affinity"))
    if not found:
        causes.append(required("spec", "must specify a volume type"))
    return causes


def _storage_class(storage_class: Obj, old: Obj | None) -> list[Cause]:
    causes: list[Cause] = []
    provisioner = storage_class.get("provisioner")
    if not provisioner:
        causes.append(required("provisioner"))
    if storage_class.get("reclaimPolicy") not in CLASS_RECLAIM_POLICIES:
        causes.append(not_supported("reclaimPolicy", storage_class.get("reclaimPolicy"), CLASS_RECLAIM_POLICIES))
    if storage_class.get("volumeBindingMode") not in BINDING_MODES:
        causes.append(not_supported("volumeBindingMode", storage_class.get("volumeBindingMode"), BINDING_MODES))
    if old is None:
        return causes
    if (storage_class.get("parameters") or {}) != (old.get("parameters") or {}):
        causes.append(forbidden("parameters", "updates to parameters are forbidden."))
    if provisioner != old.get("provisioner"):
        causes.append(forbidden("provisioner", "updates to provisioner are forbidden."))
    if storage_class.get("reclaimPolicy") != old.get("reclaimPolicy"):
        causes.append(forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
    if storage_class.get("volumeBindingMode") != old.get("volumeBindingMode"):
        causes.append(immutable("volumeBindingMode", storage_class.get("volumeBindingMode")))
    return causes


CSI_NODE_ID_MAX_LENGTH = 192  # csiNodeIDLongerMaxLength (128 without AllowLongNodeID)
INT32_MAX = 2**31 - 1


def _csi_node(csi_node: Obj, old: Obj | None) -> list[Cause]:
    causes: list[Cause] = []
    name = str(_dict(csi_node.get("metadata")).get("name") or "")
    causes += [invalid("metadata.name", name, message) for message in dns_subdomain_problems(name)] if name else \
        [required("metadata.name", "name or generateName is required")]
    drivers = _dict(csi_node.get("spec")).get("drivers")
    if drivers is None:
        drivers = []
    if not isinstance(drivers, list):
        return [*causes, invalid("spec.drivers", drivers, "must be a list")]
    seen: set[str] = set()
    for index, driver in enumerate(drivers):
        at = f"spec.drivers[{index}]"
        entry = _dict(driver)
        driver_name = str(entry.get("name") or "")
        if not driver_name:
            causes.append(required(f"{at}.name"))
        else:
            causes += [invalid(f"{at}.name", driver_name, message) for message in dns_subdomain_problems(driver_name)]
        node_id = str(entry.get("nodeID") or "")
        if not node_id:
            causes.append(required(f"{at}.nodeID"))
        elif len(node_id) > CSI_NODE_ID_MAX_LENGTH:
            causes.append(invalid(f"{at}.nodeID", node_id, f"must be {CSI_NODE_ID_MAX_LENGTH} characters or less"))
        count = _dict(entry.get("allocatable")).get("count")
        if count is not None:
            if not isinstance(count, int) or isinstance(count, bool) or count > INT32_MAX:
                causes.append(invalid(f"{at}.allocatable.count", count, "must be an int32"))
            elif count < 0:
                causes.append(invalid(f"{at}.allocatable.count", count, "must be greater than or equal to 0"))
        if driver_name in seen:
            causes.append(("FieldValueDuplicate", f"{at}.name", f'Duplicate value: "{driver_name}"'))
        seen.add(driver_name)
        keys: set[str] = set()
        for key in entry.get("topologyKeys") or []:
            key = str(key)
            if not key:
                causes.append(required(at))
            elif key in keys:
                causes.append(("FieldValueDuplicate", at, f'Duplicate value: "{key}"'))
            else:
                causes += [invalid(at, key, message) for message in qualified_name_problems(key)]
            keys.add(key)
    if old is None:
        return causes
    before = {str(_dict(d).get("name")): _dict(d) for d in _dict(old.get("spec")).get("drivers") or []}
    for driver in drivers:
        entry = _dict(driver)
        previous = before.get(str(entry.get("name")))
        if previous is not None and {k: v for k, v in entry.items() if k != "allocatable"} != \
                {k: v for k, v in previous.items() if k != "allocatable"}:
            causes.append(immutable("spec.drivers", entry))
    return causes


def problems(api_version: str, kind: str, obj: Obj, old: Obj | None = None) -> list[Cause]:
    """Why kube-apiserver would refuse this write of a storage kind (422 causes); `old` on update."""
    key = (api_version, kind)
    if key == CLAIM:
        return _claim(obj, old)
    if key == VOLUME:
        return _volume(obj, old)
    if key == CLASS:
        return _storage_class(obj, old)
    if key == CSI_NODE:
        return _csi_node(obj, old)
    return []
