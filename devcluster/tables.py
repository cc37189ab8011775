"""Server-side printing: objects as `meta.k8s.io/v1 Table`s, the way `kubectl get` asks for them.

kubectl requests `Accept: application/json;as=Table;g=meta.k8s.io;v=v1` and prints the columns the
server returns (priority-0 columns normally, all of them with `-o wide`). The columns here follow
the real server's printers for nodes, pods, namespaces, leases, priority classes, events, the storage
kinds (claims, volumes, storage classes) and the stored-only kinds (config maps, secrets, service
accounts, services, deployments, stateful sets, daemon sets, disruption budgets, RBAC, CRDs); custom
resources get NAME and AGE as a CRD without printer columns does.

Pure: no I/O; the age column reads the injected clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from devcluster.resources import ResourceDef

Obj = dict[str, Any]
Cell = Callable[[Obj, float], Any]


def _age(obj: Obj, now: float, field: str = "creationTimestamp") -> str:
    stamp = obj.get("metadata", {}).get(field)
    return _since(stamp, now)


def _since(stamp: Any, now: float) -> str:
    if not stamp:
        return "<unknown>"
    try:
        then = dt.datetime.strptime(str(stamp)[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return "<invalid>"
    seconds = int(max(0.0, now - then))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _name(obj: Obj, _: float) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _node_status(obj: Obj, _: float) -> str:
    ready = next((c for c in obj.get("status", {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    text = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if obj.get("spec", {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(obj: Obj, _: float) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix):] for k in obj.get("metadata", {}).get("labels") or {} if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _node_address(kind: str) -> Cell:
    def cell(obj: Obj, _: float) -> str:
        for address in obj.get("status", {}).get("addresses") or []:
            if address.get("type") == kind:
                return str(address.get("address", ""))
        return "<none>"
    return cell


def _node_info(field: str) -> Cell:
    return lambda obj, _: str((obj.get("status", {}).get("nodeInfo") or {}).get(field, "")) or "<unknown>"


def _pod_ready(obj: Obj, _: float) -> str:
    containers = obj.get("spec", {}).get("containers") or []
    statuses = obj.get("status", {}).get("containerStatuses") or []
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(containers)}"


def _pod_status(obj: Obj, _: float) -> str:
    if obj.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    status = obj.get("status", {})
    # kubectl's printer shows a pod the API server marked {PodScheduled, reason SchedulingGated} as SchedulingGated
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
           for c in status.get("conditions") or [] if isinstance(c, dict)):
        return "SchedulingGated"
    return str(status.get("reason") or status.get("phase") or "Unknown")


def _pod_restarts(obj: Obj, _: float) -> int:
    return sum(int(s.get("restartCount", 0)) for s in obj.get("status", {}).get("containerStatuses") or [])


def _path(*keys: str, default: str = "<none>") -> Cell:
    def cell(obj: Obj, _: float) -> Any:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return default if value in (None, "") else value
    return cell


def _object_ref(obj: Obj, _: float) -> str:
    ref = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _last_seen(obj: Obj, now: float) -> str:
    stamp = obj.get("lastTimestamp") or obj.get("eventTime") or obj.get("metadata", {}).get("creationTimestamp")
    return _since(stamp, now)


def _age_cell(obj: Obj, now: float) -> str:
    return _age(obj, now)


def _created_at(obj: Obj, _: float) -> str:
    return str(obj.get("metadata", {}).get("creationTimestamp") or "<unknown>")


def _count(*fields: str) -> Cell:
    return lambda obj, _: sum(len(obj.get(f) or {}) for f in fields)


def _status_int(field: str) -> Cell:
    return lambda obj, _: int((obj.get("status") or {}).get(field) or 0)


def _ready_of(replicas: str) -> Cell:
    def cell(obj: Obj, _: float) -> str:
        status, spec = obj.get("status") or {}, obj.get("spec") or {}
        wanted = spec.get("replicas", 1) if replicas == "spec" else status.get(replicas, 0)
        return f"{int(status.get('readyReplicas') or 0)}/{int(wanted or 0)}"
    return cell


def _template_list(field: str) -> Cell:
    def cell(obj: Obj, _: float) -> str:
        containers = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        return ",".join(str(c.get(field, "")) for c in containers if isinstance(c, dict)) or "<none>"
    return cell


def _selector(obj: Obj, _: float) -> str:
    selector = (obj.get("spec") or {}).get("selector") or {}
    labels = selector.get("matchLabels", selector) if isinstance(selector, dict) else {}
    text = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if isinstance(v, str))
    if selector.get("matchExpressions"):
        text = ",".join(filter(None, [text, *(
            f"{e.get('key')} {str(e.get('operator', '')).lower()} ({','.join(e.get('values') or [])})"
            for e in selector["matchExpressions"] if isinstance(e, dict))]))
    return text or "<none>"


def _node_selector(obj: Obj, _: float) -> str:
    selector = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"


def _service_external_ip(obj: Obj, _: float) -> str:
    spec = obj.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return str(spec.get("externalName", "<none>"))
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    found = [str(i.get("ip") or i.get("hostname")) for i in ingress if isinstance(i, dict)]
    found += [str(ip) for ip in spec.get("externalIPs") or []]
    if found:
        return ",".join(found)
    return "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"


def _service_ports(obj: Obj, _: float) -> str:
    ports = []
    for port in (obj.get("spec") or {}).get("ports") or []:
        if isinstance(port, dict):
            node = f":{port['nodePort']}" if port.get("nodePort") else ""
            ports.append(f"{port.get('port')}{node}/{port.get('protocol', 'TCP')}")
    return ",".join(ports) or "<none>"


def _disruption(field: str) -> Cell:
    return lambda obj, _: str((obj.get("spec") or {}).get(field, "N/A"))


def _role_ref(obj: Obj, _: float) -> str:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _subjects(kind: str) -> Cell:
    def cell(obj: Obj, _: float) -> str:
        found = [(f"{s.get('namespace', '')}/{s.get('name', '')}" if kind == "ServiceAccount" else str(s.get("name")))
                 for s in obj.get("subjects") or [] if isinstance(s, dict) and s.get("kind") == kind]
        return ", ".join(found)
    return cell


_BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
_DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                              "storageclass.beta.kubernetes.io/is-default-class")
# kubectl's short names for access modes, in the order its printer writes them.
_ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
                 ("ReadWriteOncePod", "RWOP"))


def _access_modes(modes: Any) -> str:
    present = set(modes) if isinstance(modes, list) else set()
    return ",".join(short for mode, short in _ACCESS_MODES if mode in present)


def _phase_or_terminating(obj: Obj, _: float) -> str:
    if obj.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    return str((obj.get("status") or {}).get("phase") or "")


def _claim_capacity(obj: Obj, _: float) -> str:
    """A claim's capacity, shown once it names its volume (the printer's rule), from its status."""
    if not (obj.get("spec") or {}).get("volumeName"):
        return ""
    return str(((obj.get("status") or {}).get("capacity") or {}).get("storage") or "0")


def _claim_access_modes(obj: Obj, _: float) -> str:
    if not (obj.get("spec") or {}).get("volumeName"):
        return ""
    return _access_modes((obj.get("status") or {}).get("accessModes"))


def _storage_class_of(obj: Obj, _: float) -> str:
    """The beta annotation first, then spec.storageClassName (the printer's GetPersistentVolume[Claim]Class)."""
    annotations = obj.get("metadata", {}).get("annotations") or {}
    if _BETA_CLASS_ANNOTATION in annotations:
        return str(annotations[_BETA_CLASS_ANNOTATION])
    return str((obj.get("spec") or {}).get("storageClassName") or "")


def _volume_claim(obj: Obj, _: float) -> str:
    ref = (obj.get("spec") or {}).get("claimRef")
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if isinstance(ref, dict) else ""


def _storage_class_name(obj: Obj, _: float) -> str:
    annotations = obj.get("metadata", {}).get("annotations") or {}
    default = any(annotations.get(key) == "true" for key in _DEFAULT_CLASS_ANNOTATIONS)
    return _name(obj, 0.0) + (" (default)" if default else "")


# (name, type, priority, cell)
Column = tuple[str, str, int, Cell]

_NAME: Column = ("Name", "string", 0, _name)
_AGE: Column = ("Age", "string", 0, _age_cell)
_CREATED_AT: list[Column] = [_NAME, ("Created At", "date", 0, _created_at)]
_BINDING_COLUMNS: list[Column] = [
    _NAME, ("Role", "string", 0, _role_ref), _AGE, ("Users", "string", 1, _subjects("User")),
    ("Groups", "string", 1, _subjects("Group")), ("ServiceAccounts", "string", 1, _subjects("ServiceAccount")),
]
_TEMPLATE_COLUMNS: list[Column] = [
    ("Containers", "string", 1, _template_list("name")), ("Images", "string", 1, _template_list("image")),
    ("Selector", "string", 1, _selector),
]

COLUMNS: dict[str, list[Column]] = {
    "Node": [
        _NAME, ("Status", "string", 0, _node_status), ("Roles", "string", 0, _node_roles), _AGE,
        ("Version", "string", 0, _node_info("kubeletVersion")),
        ("Internal-IP", "string", 1, _node_address("InternalIP")),
        ("External-IP", "string", 1, _node_address("ExternalIP")),
        ("OS-Image", "string", 1, _node_info("osImage")), ("Kernel-Version", "string", 1, _node_info("kernelVersion")),
        ("Container-Runtime", "string", 1, _node_info("containerRuntimeVersion")),
    ],
    "Pod": [
        _NAME, ("Ready", "string", 0, _pod_ready), ("Status", "string", 0, _pod_status),
        ("Restarts", "string", 0, _pod_restarts), _AGE, ("IP", "string", 1, _path("status", "podIP")),
        ("Node", "string", 1, _path("spec", "nodeName")),
        ("Nominated Node", "string", 1, _path("status", "nominatedNodeName")),
        ("Readiness Gates", "string", 1, lambda obj, _: "<none>"),
    ],
    "Namespace": [_NAME, ("Status", "string", 0, _path("status", "phase", default="")), _AGE],
    "Lease": [_NAME, ("Holder", "string", 0, _path("spec", "holderIdentity", default="")), _AGE],
    "PriorityClass": [
        _NAME, ("Value", "integer", 0, _path("value", default="0")),
        ("Global-Default", "boolean", 0, lambda obj, _: bool(obj.get("globalDefault", False))), _AGE,
        ("PreemptionPolicy", "string", 0, _path("preemptionPolicy", default="PreemptLowerPriority")),
    ],
    "Event": [
        ("Last Seen", "string", 0, _last_seen), ("Type", "string", 0, _path("type", default="")),
        ("Reason", "string", 0, _path("reason", default="")), ("Object", "string", 0, _object_ref),
        ("Message", "string", 0, lambda obj, _: str(obj.get("message") or obj.get("note") or "")),
    ],
    "PersistentVolumeClaim": [
        _NAME, ("Status", "string", 0, _phase_or_terminating),
        ("Volume", "string", 0, _path("spec", "volumeName", default="")),
        ("Capacity", "string", 0, _claim_capacity), ("Access Modes", "string", 0, _claim_access_modes),
        ("StorageClass", "string", 0, _storage_class_of),
        ("VolumeAttributesClass", "string", 0, _path("spec", "volumeAttributesClassName", default="<unset>")), _AGE,
        ("VolumeMode", "string", 1, _path("spec", "volumeMode", default="<unset>")),
    ],
    "PersistentVolume": [
        _NAME, ("Capacity", "string", 0, _path("spec", "capacity", "storage", default="0")),
        ("Access Modes", "string", 0, lambda obj, _: _access_modes((obj.get("spec") or {}).get("accessModes"))),
        ("Reclaim Policy", "string", 0, _path("spec", "persistentVolumeReclaimPolicy", default="")),
        ("Status", "string", 0, _phase_or_terminating), ("Claim", "string", 0, _volume_claim),
        ("StorageClass", "string", 0, _storage_class_of),
        ("VolumeAttributesClass", "string", 0, _path("spec", "volumeAttributesClassName", default="<unset>")),
        ("Reason", "string", 0, _path("status", "reason", default="")), _AGE,
        ("VolumeMode", "string", 1, _path("spec", "volumeMode", default="<unset>")),
    ],
    "StorageClass": [
        ("Name", "string", 0, _storage_class_name), ("Provisioner", "string", 0, _path("provisioner", default="")),
        ("ReclaimPolicy", "string", 0, _path("reclaimPolicy", default="Delete")),
        ("VolumeBindingMode", "string", 0, _path("volumeBindingMode", default="Immediate")),
        ("AllowVolumeExpansion", "string", 0, lambda obj, _: str(bool(obj.get("allowVolumeExpansion"))).lower()),
        _AGE,
    ],
    "CSINode": [_NAME, ("Drivers", "integer", 0, lambda obj, _: len((obj.get("spec") or {}).get("drivers") or [])),
                _AGE],
    "ConfigMap": [_NAME, ("Data", "integer", 0, _count("data", "binaryData")), _AGE],
    "Secret": [_NAME, ("Type", "string", 0, _path("type", default="Opaque")),
               ("Data", "integer", 0, _count("data")), _AGE],
    "ServiceAccount": [_NAME, ("Secrets", "integer", 0, _count("secrets")), _AGE],
    "Service": [
        _NAME, ("Type", "string", 0, _path("spec", "type", default="ClusterIP")),
        ("Cluster-IP", "string", 0, _path("spec", "clusterIP")), ("External-IP", "string", 0, _service_external_ip),
        ("Port(s)", "string", 0, _service_ports), _AGE, ("Selector", "string", 1, _selector),
    ],
    "Deployment": [
        _NAME, ("Ready", "string", 0, _ready_of("spec")), ("Up-to-date", "integer", 0, _status_int("updatedReplicas")),
        ("Available", "integer", 0, _status_int("availableReplicas")), _AGE, *_TEMPLATE_COLUMNS,
    ],
    "StatefulSet": [_NAME, ("Ready", "string", 0, _ready_of("spec")), _AGE, *_TEMPLATE_COLUMNS[:2]],
    "DaemonSet": [
        _NAME, ("Desired", "integer", 0, _status_int("desiredNumberScheduled")),
        ("Current", "integer", 0, _status_int("currentNumberScheduled")),
        ("Ready", "integer", 0, _status_int("numberReady")),
        ("Up-to-date", "integer", 0, _status_int("updatedNumberScheduled")),
        ("Available", "integer", 0, _status_int("numberAvailable")),
        ("Node Selector", "string", 0, _node_selector), _AGE,
        *_TEMPLATE_COLUMNS,
    ],
    "PodDisruptionBudget": [
        _NAME, ("Min Available", "string", 0, _disruption("minAvailable")),
        ("Max Unavailable", "string", 0, _disruption("maxUnavailable")),
        ("Allowed Disruptions", "integer", 0, _status_int("disruptionsAllowed")), _AGE,
    ],
    "Role": _CREATED_AT,
    "ClusterRole": _CREATED_AT,
    "RoleBinding": _BINDING_COLUMNS,
    "ClusterRoleBinding": _BINDING_COLUMNS,
    "CustomResourceDefinition": _CREATED_AT,
}


def columns_for(resource: ResourceDef) -> list[Column]:
    return COLUMNS.get(resource.kind, [_NAME, _AGE]) if not resource.custom else [_NAME, _AGE]


def column_definitions(resource: ResourceDef) -> list[Obj]:
    return [
        {"name": name, "type": kind, "format": "name" if name == "Name" else "", "description": "",
         "priority": priority}
        for name, kind, priority, _ in columns_for(resource)
    ]


def row(resource: ResourceDef, obj: Obj, now: float, columns: list[Column] | None = None,
        include: str = "Metadata") -> Obj:
    """One row; `include` is the request's includeObject: None, Metadata (default) or Object."""
    cells = [cell(obj, now) for _, _, _, cell in (columns or columns_for(resource))]
    if include == "None":
        return {"cells": cells}
    if include == "Object":
        return {"cells": cells, "object": obj}
    metadata = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
    return {
        "cells": cells,
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata},
    }


def table(resource: ResourceDef, objects: list[Obj], now: float, resource_version: str,
          continue_token: str = "", include: str = "Metadata") -> Obj:
    columns = columns_for(resource)
    metadata: Obj = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": column_definitions(resource),
        "rows": [row(resource, obj, now, columns, include) for obj in objects],
    }
