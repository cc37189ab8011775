"""The pods/resize subresource as kube-apiserver serves it (KEP-1287 in-place pod resize; InPlacePodVerticalScaling
on by default since 1.33, the rules of 1.34): what a write through it keeps, and the validation it adds.

A PUT or PATCH of `pods/<name>/resize` carries a whole pod. The server keeps from it only each container's and
each init container's `resources` and `resizePolicy`, and takes everything else (the rest of the spec, the
metadata, the status) from the stored pod: the resize strategy's dropNonResizeUpdates, so other changes are
dropped, not refused. A body whose containers or init containers differ in number, or in name at some index,
is kept as it is, for validation to refuse. Then ValidatePodResize, after the pod validation every update gets:

- a pod with pod-level resources (`spec.resources`), a static pod (the mirror-pod annotation) or a Windows pod
  (`spec.os.name: windows`) cannot be resized: that one Forbidden cause, nothing else;
- the QoS class may not change (`spec: Invalid value: "<class>": Pod QOS Class may not change as a result of
  resizing`, the class the pod's status reports, or the one its old spec computes to when it reports none);
- a pod whose first running container reports no `resources` in its status runs on a node without resize
  support (`spec: Forbidden: Pod running on node without support for resize`);
- requests or limits of a container or sidecar may not be removed once set (`...resources.requests: Forbidden:
  resource requests cannot be removed`, `limits` likewise);
- only cpu and memory may change, and `resizePolicy` may not (`spec: Forbidden: only cpu and memory resources
  are mutable`, `... for sidecar containers are mutable`), and a non-sidecar init container not at all (`spec:
  Forbidden: resources for non-sidecar init containers are immutable`). As the server compares, a container's
  resource list that was absent stays absent, so a list added where there was none is not seen, and
  `resources.claims` is dropped from the comparison (a container with claims cannot be resized).

Memory limits may decrease, as 1.34 allows (1.33 refused a decrease unless the memory resizePolicy was
RestartContainer). The API server does not default `resizePolicy` here (the `manifests` defaulting has no
setDefaultResizePolicy), so a pod carries only what its author wrote.

Pure: no I/O, no store; causes are `(reason, field, message)` as `manifests.validation` makes them.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from manifests.quantity import QuantityError, value_of
from manifests.validation import Cause, forbidden, invalid

Obj = dict[str, Any]

RESIZABLE = ("cpu", "memory")  # the only resources a resize may change (and those the QoS class is computed on)
GUARANTEED, BURSTABLE, BEST_EFFORT = "Guaranteed", "Burstable", "BestEffort"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
_ONLY_CPU_MEMORY = "only cpu and memory resources are mutable"


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def sidecar(container: Any) -> bool:
    """A restartable init container (restartPolicy Always): it runs beside the containers and can be resized."""
    return isinstance(container, dict) and container.get("restartPolicy") == "Always"


def _amount(raw: Any) -> Fraction:
    try:
        return value_of(raw)
    except (QuantityError, TypeError):  # never stored: the server decodes every quantity
        return Fraction(0)


def qos_class(spec: Obj) -> str:
    """The pod's QoS class computed from its spec (ComputePodQOS): every container and init container counted;
    BestEffort without any cpu or memory request or limit above 0; Guaranteed when every container has both a
    cpu and a memory limit and the requests summed equal the limits summed; Burstable otherwise."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in [*_list(spec.get("containers")), *_list(spec.get("initContainers"))]:
        resources = _dict(_dict(container).get("resources"))
        for name, raw in _dict(resources.get("requests")).items():
            value = _amount(raw)
            if name in RESIZABLE and value > 0:
                requests[name] = requests.get(name, Fraction(0)) + value
        limited = set()
        for name, raw in _dict(resources.get("limits")).items():
            value = _amount(raw)
            if name in RESIZABLE and value > 0:
                limited.add(name)
                limits[name] = limits.get(name, Fraction(0)) + value
        if not limited.issuperset(RESIZABLE):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()) \
            and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE


def _merged_containers(new: list[Any], old: list[Any]) -> list[Any]:
    """dropNonResizeUpdatesForContainers: the old containers with the new ones' resources and resizePolicy, or
    the new list as it is when a name differs at some index (validation refuses it)."""
    if not new:
        return new
    merged = []
    for fresh, stored in zip(new, old, strict=True):
        fresh, stored = _dict(fresh), _dict(stored)
        if fresh.get("name") != stored.get("name"):
            return new
        kept = {key: value for key, value in stored.items() if key not in ("resources", "resizePolicy")}
        for key in ("resources", "resizePolicy"):
            if key in fresh:
                kept[key] = fresh[key]
        merged.append(kept)
    return merged


def kept_from(old: Obj, new: Obj) -> Obj:
    """What a write of `new` through the resize subresource of the stored `old` becomes: `old` with the
    containers' and init containers' resources and resizePolicy of `new` (dropNonResizeUpdates)."""
    old_spec, new_spec = _dict(old.get("spec")), _dict(new.get("spec"))
    containers, inits = _list(new_spec.get("containers")), _list(new_spec.get("initContainers"))
    old_containers, old_inits = _list(old_spec.get("containers")), _list(old_spec.get("initContainers"))
    if len(containers) != len(old_containers) or len(inits) != len(old_inits):
        return {**old, "spec": new_spec}
    spec = {**old_spec}
    if "containers" in old_spec or containers:
        spec["containers"] = _merged_containers(containers, old_containers)
    if "initContainers" in old_spec or inits:
        spec["initContainers"] = _merged_containers(inits, old_inits)
    return {**old, "spec": spec}


def _pod_level_resources(spec: Obj) -> bool:
    resources = _dict(spec.get("resources"))
    return bool(_dict(resources.get("requests")) or _dict(resources.get("limits")))


def _resize_supported(pod: Obj) -> bool:
    """isPodResizeRequestSupported: the first running container's status reports its resources (a node whose
    kubelet resizes writes them); with no running container the server cannot tell and allows it."""
    for status in _list(_dict(pod.get("status")).get("containerStatuses")):
        if _dict(_dict(status).get("state")).get("running") is not None:
            return status.get("resources") is not None
    return True


def _removed(new: Any, old: Any) -> bool:
    new_names, old_names = set(_dict(new)), set(_dict(old))
    return not old_names <= new_names


def _container_causes(new: Obj, old: Obj, field: str) -> list[Cause]:
    """validateContainerResize: requests and limits once set cannot be removed."""
    new_resources, old_resources = _dict(new.get("resources")), _dict(old.get("resources"))
    causes = []
    if _removed(new_resources.get("requests"), old_resources.get("requests")):
        causes.append(forbidden(f"{field}.requests", "resource requests cannot be removed"))
    if _removed(new_resources.get("limits"), old_resources.get("limits")):
        causes.append(forbidden(f"{field}.limits", "resource limits cannot be removed"))
    return causes


def _without_cpu_memory_changes(container: Obj, old: Obj) -> Obj:
    """dropCPUMemoryResourcesFromContainer: `container` with the old cpu and memory values in place of its own,
    so that any other difference from `old` shows. A list the old container lacked stays absent, and only
    requests and limits are kept (claims are not)."""
    old_resources, resources = _dict(old.get("resources")), _dict(container.get("resources"))
    munged: Obj = {}
    for key in ("limits", "requests"):
        old_list = old_resources.get(key)
        if old_list is None:
            continue
        values = {name: value for name, value in _dict(resources.get(key)).items() if name not in RESIZABLE}
        values.update({name: value for name, value in _dict(old_list).items() if name in RESIZABLE})
        munged[key] = values
    return {**container, "resources": munged}


def _same(container: Obj, old: Obj) -> bool:
    """Semantic equality of two containers: an absent, null or empty list, map or resources is the same."""
    same: bool = _normalized(container) == _normalized(old)
    return same


def _normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _normalized(item) for key, item in value.items() if item not in (None, {}, [])}
    if isinstance(value, list):
        return [_normalized(item) for item in value]
    return value


def problems(old: Obj, new: Obj, general: list[Cause]) -> list[Cause]:
    """ValidatePodResize of `new` (already `kept_from(old, ...)`, decoded and defaulted) over the stored `old`,
    after `general`, the causes of the pod validation every update runs: every cause, in the server's order."""
    old_spec, new_spec = _dict(old.get("spec")), _dict(new.get("spec"))
    if _pod_level_resources(old_spec) or _pod_level_resources(new_spec):
        return [forbidden("", "pods with pod-level resources cannot be resized")]
    if MIRROR_POD_ANNOTATION in _dict(_dict(old.get("metadata")).get("annotations")):
        return [forbidden("", "static pods cannot be resized")]
    if _dict(old_spec.get("os")).get("name") == "windows":
        return [forbidden("", "windows pods cannot be resized")]
    causes = list(general)
    reported = _dict(old.get("status")).get("qosClass") or qos_class(old_spec)
    if reported != qos_class(new_spec):
        causes.append(invalid("spec", reported, "Pod QOS Class may not change as a result of resizing"))
    if not _resize_supported(old):
        causes.append(forbidden("spec", "Pod running on node without support for resize"))
    containers, old_containers = _list(new_spec.get("containers")), _list(old_spec.get("containers"))
    inits, old_inits = _list(new_spec.get("initContainers")), _list(old_spec.get("initContainers"))
    if len(containers) != len(old_containers) or len(inits) != len(old_inits):
        return [*causes, forbidden("spec", _ONLY_CPU_MEMORY)]  # added or removed containers
    for index, stored in enumerate(old_inits):
        if sidecar(stored):
            causes += _container_causes(_dict(inits[index]), _dict(stored),
                                        f"spec.initContainers[{index}].resources")
    for index, stored in enumerate(old_containers):
        causes += _container_causes(_dict(containers[index]), _dict(stored), f"spec.containers[{index}].resources")
    for container, stored in zip(containers, old_containers, strict=True):
        if not _same(_without_cpu_memory_changes(_dict(container), _dict(stored)), _dict(stored)):
            causes.append(forbidden("spec", _ONLY_CPU_MEMORY))
    for container, stored in zip(inits, old_inits, strict=True):
        if sidecar(container):
            if not _same(_without_cpu_memory_changes(_dict(container), _dict(stored)), _dict(stored)):
                causes.append(forbidden("spec", "only cpu and memory resources for sidecar containers are mutable"))
        elif not _same(_dict(container), _dict(stored)):
            causes.append(forbidden("spec", "resources for non-sidecar init containers are immutable"))
    if causes:
        return causes
    rest_new = {key: value for key, value in new_spec.items() if key not in ("containers", "initContainers")}
    rest_old = {key: value for key, value in old_spec.items() if key not in ("containers", "initContainers")}
    if _normalized(rest_new) != _normalized(rest_old):
        return [forbidden("spec", _ONLY_CPU_MEMORY)]
    return []
