"""What a Kubernetes API server writes into an object before anyone reads it: decoding and defaulting.

Every write of a built-in kind goes through decoding (quantities parsed and re-encoded in canonical
form, `manifests.quantity`) and the kind's `SetDefaults_*` functions (k8s.io/kubernetes
pkg/apis/*/v1/defaults.go). A stored object always carries these defaults, so the scheduler, a
simulation and a test all read the same thing. The defaults written here are the ones placement or
a user reading the object meets:

- Pod (`SetDefaults_Pod`, `SetDefaults_PodSpec`, `SetDefaults_Container`): a container's request
  for every resource it has a limit for but no request (extended resources included: NVIDIA's docs
  write `limits: {nvidia.com/gpu: 8}` only), for containers and init containers but not pod
  templates; schedulerName `default-scheduler`, terminationGracePeriodSeconds 30, restartPolicy
  `Always`, dnsPolicy `ClusterFirst`, securityContext `{}`, enableServiceLinks true; per container
  terminationMessagePath, terminationMessagePolicy `File`, imagePullPolicy (`Always` for `:latest`
  or no tag, else `IfNotPresent`), port protocol `TCP`, and on the host network each port's
  `hostPort` its `containerPort`; pod-level requests (`spec.resources`, KEP-2837) of cpu, memory and
  hugepages from the pod-level limits.
- Node: canonical capacity and allocatable.
- PriorityClass: preemptionPolicy `PreemptLowerPriority`.

Functions return new dicts and never mutate their input. A quantity that cannot be decoded raises
`UndecodableQuantity` naming the field (the server answers 400, see `admission`).

Pure: no I/O, nothing of ours imported but `manifests.quantity`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from manifests.quantity import QuantityError, canonical

Obj = dict[str, Any]


class UndecodableQuantity(ValueError):
    """A quantity the API server cannot decode; `field` names it, the message is apimachinery's."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def canonical_quantities(values: Any, field: str) -> Any:
    """A resource list with every quantity in canonical form (anything else is left to validation)."""
    if not isinstance(values, dict):
        return values
    result: Obj = {}
    changed = False
    for name, raw in values.items():
        if raw is None:
            result[name] = raw
            continue
        try:
            text = canonical(raw)
        except QuantityError as error:
            raise UndecodableQuantity(f"{field}[{name}]", str(error)) from None
        changed = changed or text != raw
        result[name] = text
    return result if changed else values


def _resources(resources: Any, field: str, from_limits: bool) -> Any:
    if not isinstance(resources, dict):
        return resources
    limits = canonical_quantities(resources.get("limits"), f"{field}.limits")
    requests = canonical_quantities(resources.get("requests"), f"{field}.requests")
    if from_limits and isinstance(limits, dict) and limits:
        # SetDefaults_Pod: "If limits are specified, but requests are not, default requests to limits".
        merged = dict(requests) if isinstance(requests, dict) else {}
        for name, value in limits.items():
            merged.setdefault(name, value)
        requests = merged
    result = dict(resources)
    if limits is not None:
        result["limits"] = limits
    if requests is not None:
        result["requests"] = requests
    return result


def _image_pull_policy(image: Any) -> str:
    name = str(image or "")
    last = name.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _container(container: Any, field: str, pod: bool, host_network: bool) -> Any:
    if not isinstance(container, dict):
        return container
    result = dict(container)
    if "resources" in result:
        result["resources"] = _resources(result["resources"], f"{field}.resources", from_limits=pod)
    result.setdefault("terminationMessagePath", "/dev/termination-log")
    result.setdefault("terminationMessagePolicy", "File")
    if "image" in result:
        result.setdefault("imagePullPolicy", _image_pull_policy(result["image"]))
    if isinstance(result.get("ports"), list):
        result["ports"] = [_port(port, host_network) for port in result["ports"]]
    return result


def _port(port: Any, host_network: bool) -> Any:
    """A container port: protocol TCP, and on the host network its host port the container port
    (`defaultHostNetworkPorts`: the pod holds that port of its node)."""
    if not isinstance(port, dict):
        return port
    result = {**port, "protocol": port.get("protocol") or "TCP"}
    if host_network and not port.get("hostPort") and "containerPort" in port:
        result["hostPort"] = port["containerPort"]
    return result


def pod_level_resource(name: str) -> bool:
    """IsSupportedPodLevelResource: what pod-level requests may set (cpu, memory, hugepages-<size>)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _pod_level_requests(resources: Any) -> Any:
    """Pod-level resources (KEP-2837): a request the pod-level limits set and the requests do not, for a
    resource pod-level requests may set (cpu, memory, hugepages-*), defaults to the limit (the API
    server's `defaultPodRequests`; its hugepages from the containers' requests are not done here)."""
    if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict) or not resources["limits"]:
        return resources
    requests = dict(resources["requests"]) if isinstance(resources.get("requests"), dict) else {}
    for name, limit in resources["limits"].items():
        if pod_level_resource(str(name)):
            requests.setdefault(name, limit)
    return {**resources, "requests": requests} if requests else resources


def default_pod_spec(spec: Any, field: str = "spec", *, pod: bool = True) -> Any:
    """`SetDefaults_PodSpec` and its containers' (and, for a Pod rather than a template, requests from limits)."""
    if not isinstance(spec, dict):
        return spec
    result = dict(spec)
    host_network = result.get("hostNetwork") is True
    for name in ("containers", "initContainers"):
        if isinstance(result.get(name), list):
            result[name] = [_container(c, f"{field}.{name}[{i}]", pod, host_network)
                            for i, c in enumerate(result[name])]
    if "overhead" in result:
        result["overhead"] = canonical_quantities(result["overhead"], f"{field}.overhead")
    if "resources" in result:
        result["resources"] = _resources(result["resources"], f"{field}.resources", from_limits=False)
        if pod:
            result["resources"] = _pod_level_requests(result["resources"])
    result.setdefault("restartPolicy", "Always")
    result.setdefault("terminationGracePeriodSeconds", 30)
    result.setdefault("dnsPolicy", "ClusterFirst")
    result.setdefault("securityContext", {})
    result.setdefault("schedulerName", "default-scheduler")
    if pod:
        result.setdefault("enableServiceLinks", True)
    return result


def default_pod(pod: Obj) -> Obj:
    return {**pod, "spec": default_pod_spec(_dict(pod.get("spec")))}


def default_node(node: Obj) -> Obj:
    status = node.get("status")
    if not isinstance(status, dict):
        return node
    result = dict(status)
    for name in ("capacity", "allocatable"):
        if name in result:
            result[name] = canonical_quantities(result[name], f"status.{name}")
    return {**node, "status": result}


def default_priority_class(priority_class: Obj) -> Obj:
    if priority_class.get("preemptionPolicy"):
        return priority_class
    return {**priority_class, "preemptionPolicy": "PreemptLowerPriority"}


def _template_owner(path: tuple[str, ...]) -> Callable[[Obj], Obj]:
    """Workloads: their pod template gets the pod spec defaults except requests from limits."""
    def default(obj: Obj) -> Obj:
        spec = _dict(obj.get("spec"))
        template = _dict(spec.get(path[0]))
        if not isinstance(template.get("spec"), dict):
            return obj
        new_template = {**template, "spec": default_pod_spec(template["spec"], f"spec.{path[0]}.spec", pod=False)}
        return {**obj, "spec": {**spec, path[0]: new_template}}
    return default


_DEFAULTS: dict[tuple[str, str], Callable[[Obj], Obj]] = {
    ("v1", "Pod"): default_pod,
    ("v1", "Node"): default_node,
    ("scheduling.k8s.io/v1", "PriorityClass"): default_priority_class,
    ("apps/v1", "Deployment"): _template_owner(("template",)),
    ("apps/v1", "StatefulSet"): _template_owner(("template",)),
    ("apps/v1", "DaemonSet"): _template_owner(("template",)),
}


def apply_defaults(api_version: str, kind: str, obj: Obj) -> Obj:
    """The object as the API server stores it after decoding and defaulting (unchanged for other kinds)."""
    default = _DEFAULTS.get((api_version, kind))
    return default(obj) if default is not None else obj
