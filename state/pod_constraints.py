"""What a pod asks of its placement that toposched reads but does not place by, reported per pod.

Placement honours requests, priority, nodeSelector, required node affinity, required pod affinity
and anti-affinity, tolerations and the nodes' taints and `unschedulable` (see the README's limits).
A pod of ours that also asks for one of these would be placed as if it did not, and a user would
learn it only from a pod that does not start or a job spread wrong; so the fold reports each as a
problem of the pod (reason `UnsupportedField`: a Warning Event on the pod, a log line, a count),
naming the field:

- a required pod affinity or anti-affinity term with a non-empty `namespaceSelector`: toposched reads
  no Namespace objects, so the term is read as looking in every namespace (the terms themselves are
  placed by: `placement/pod_affinity.py`); and the terms past the first `MAX_REQUIRED_TERMS` of a kind;
- a topology spread constraint with `whenUnsatisfiable: DoNotSchedule` that no API server admits
  (`spread_problem`: maxSkew below 1, no topologyKey, minDomains below 1, a node inclusion policy other
  than Honor / Ignore, a selector that does not parse): it is not placed by (the usable ones are:
  `placement/pod_spread.py`), and those past the first `MAX_SPREAD_CONSTRAINTS`;
- a host port of an init container (`spec.initContainers[*].ports[*].hostPort`): kube-scheduler's
  NodePorts reads the containers' host ports only, and so does toposched (placement keeps one holder
  of a host port per node: `state.resources.host_port_resource`);
- dynamic resource allocation (`spec.resourceClaims`): toposched allocates no ResourceClaim, and the
  kubelet starts no pod whose claims are not allocated and reserved for it, so such a pod is not placed
  at all (`DRA_NOT_PLACED`, the reason it waits with) rather than bound to a node where it never starts.

- a device that another scheduler hands out itself (`shared_device`): a share of a GPU, or a device
  Koordinator's DeviceShare allocates, asked for as a resource (`koordinator.sh/gpu-core`,
  `volcano.sh/vgpu-number`, HAMi's `nvidia.com/gpumem`, ...) or, for KAI's fractional GPUs, as an annotation
  (`gpu-fraction`, `gpu-memory`). That scheduler chooses the device when it places the pod and writes it on
  the pod for its node agent or device plugin; toposched chooses none, so such a pod would start without
  its device (or not at all): it is not placed (`PodInfo.unusable`), and waits with that reason.

Preferences (preferred affinities, `ScheduleAnyway` spreads) are not reported: ignoring a
preference places a pod worse, never wrong. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from events.objects import (
    KAI_GPU_FRACTION_ANNOTATION,
    KAI_GPU_FRACTION_DEVICES_ANNOTATION,
    KAI_GPU_MEMORY_ANNOTATION,
    Container,
    Pod,
    TopologySpreadConstraint,
)
from state.gangs import UNSUPPORTED_FIELD, Problem
from state.label_selectors import selector_problems

_NONE: Sequence[Problem] = ()
# Required podAffinity / podAntiAffinity terms placed by per pod and kind: any pod may carry thousands
# (the API server bounds only the object's size), and each costs every placement of the pods near it.
MAX_REQUIRED_TERMS = 64
# DoNotSchedule spread constraints placed by per pod: the API server wants their keys distinct, nothing
# more, and each costs every placement of the pod a pass over the nodes.
MAX_SPREAD_CONSTRAINTS = 64
DO_NOT_SCHEDULE = "DoNotSchedule"
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")
DRA_NOT_PLACED = (
    "spec.resourceClaims: dynamic resource allocation is not supported by toposched: it allocates no "
    "ResourceClaim, and the kubelet does not start a pod whose claims are not allocated, so the pod is not "
    "placed (ask for the devices as extended resources, e.g. nvidia.com/gpu, or leave the pod to "
    "default-scheduler)")


# Devices another scheduler allocates itself, by resource name prefix, and what to say of each: Koordinator's
# DeviceShare (GPU shares, RDMA, FPGA), Volcano's deviceshare plugin (vGPU, and its older GPU share), HAMi.
_SHARED_DEVICE_RESOURCES: tuple[tuple[str, str], ...] = (
    ("koordinator.sh/gpu", "koordinator"), ("koordinator.sh/rdma", "koordinator"),
    ("koordinator.sh/fpga", "koordinator"), ("volcano.sh/vgpu-", "volcano"), ("volcano.sh/gpu-", "volcano"),
    ("nvidia.com/gpumem", "hami"), ("nvidia.com/gpucores", "hami"))
_SHARED_DEVICE_PREFIXES = tuple(prefix for prefix, _ in _SHARED_DEVICE_RESOURCES)
# KAI Scheduler's fractional GPUs: pod annotations its scheduler and binder act on.
KAI_FRACTION_ANNOTATIONS = (KAI_GPU_FRACTION_ANNOTATION, KAI_GPU_MEMORY_ANNOTATION, KAI_GPU_FRACTION_DEVICES_ANNOTATION)
_WHO_ALLOCATES = {
    "koordinator": ("Koordinator's DeviceShare allocates in koord-scheduler (it writes the chosen devices into the "
                    "pod's scheduling.koordinator.sh/device-allocated annotation, which its node agent applies)",
                    "koord-scheduler"),
    "volcano": ("Volcano's deviceshare plugin allocates in its scheduler (it writes the chosen GPU into the pod's "
                "annotations, which its device plugin reads)", "volcano"),
    "hami": ("HAMi's scheduler allocates (it writes the chosen GPU into the pod's annotations, which its device "
             "plugin reads)", "HAMi's scheduler"),
    "kai": ("KAI Scheduler allocates (its binder reserves a GPU and shares it among such pods)", "kai-scheduler"),
}


def shared_device(pod: Pod) -> tuple[str, str] | None:
    """The first device `pod` asks for that another scheduler hands out itself, as (field, message): a
    resource of Koordinator's DeviceShare, Volcano's vGPU or HAMi's GPU shares, or a KAI fractional-GPU
    annotation. None for the usual pod (its annotations looked up, its requests' names read)."""
    annotations = pod.metadata.annotations
    if annotations:
        for name in KAI_FRACTION_ANNOTATIONS:
            if name in annotations:
                return f"metadata.annotations[{name}]", _device_message("a fractional GPU", "kai")
    spec = pod.spec
    for kind, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for index, container in enumerate(containers):
            for name in container.resources.requests:
                if name.startswith(_SHARED_DEVICE_PREFIXES):
                    who = next(vendor for prefix, vendor in _SHARED_DEVICE_RESOURCES if name.startswith(prefix))
                    return f"spec.{kind}[{index}].resources.requests[{name}]", _device_message(name, who)
    return None


def _device_message(what: str, who: str) -> str:
    how, scheduler = _WHO_ALLOCATES[who]
    return (f"{what} is a device {how}; toposched allocates no device, so the pod would start without it: it is not "
            f"placed (ask for whole GPUs as nvidia.com/gpu, or leave the pod to {scheduler})")


_LOOK: tuple[str, str] = ("", "")


def unconsidered(pod: Pod, key: str, device: tuple[str, str] | None = _LOOK) -> Sequence[Problem]:
    """The constraints of `pod` (key `key`) that toposched does not place by, each a problem naming its
    field; empty for the usual pod (a few attribute reads). `device`: its `shared_device`, when the caller
    has looked already."""
    spec = pod.spec
    affinity = spec.affinity
    if device is _LOOK:
        device = shared_device(pod)
    if ((affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None))
            and not spec.topology_spread_constraints and not spec.resource_claims and device is None
            and not (spec.init_containers and _any_ports(spec.init_containers))):
        return _NONE
    problems: list[Problem] = []

    def report(field: str, message: str) -> None:
        problems.append(Problem("Pod", key, field, message, reason=UNSUPPORTED_FIELD))

    if device is not None:
        report(*device)

    if affinity is not None:
        for name, which, consequence in (
                ("podAffinity", affinity.pod_affinity, "pods of any namespace that its selector matches satisfy it"),
                ("podAntiAffinity", affinity.pod_anti_affinity,
                 "the pod keeps away from the pods its selector matches in every namespace")):
            terms = which.required_during_scheduling_ignored_during_execution if which is not None else []
            if len(terms) > MAX_REQUIRED_TERMS:
                report(f"spec.affinity.{name}.requiredDuringSchedulingIgnoredDuringExecution",
                       f"{len(terms)} required terms: toposched places by the first {MAX_REQUIRED_TERMS} only "
                       f"(the rest are not considered)")
            for index, term in enumerate(terms[:MAX_REQUIRED_TERMS]):
                chosen = term.namespace_selector
                if chosen is not None and (chosen.match_labels or chosen.match_expressions):
                    report(f"spec.affinity.{name}.requiredDuringSchedulingIgnoredDuringExecution[{index}]"
                           ".namespaceSelector",
                           f"a namespaceSelector chooses namespaces by their labels, and toposched reads no "
                           f"Namespace objects: the term is read as looking in every namespace ({consequence})")
    hard = 0
    for index, spread in enumerate(spec.topology_spread_constraints):
        if spread.when_unsatisfiable == DO_NOT_SCHEDULE:
            hard += 1
            if hard > MAX_SPREAD_CONSTRAINTS:
                report(f"spec.topologySpreadConstraints[{index}]",
                       f"toposched places by the first {MAX_SPREAD_CONSTRAINTS} DoNotSchedule constraints only "
                       f"(this one, topologyKey {spread.topology_key!r}, and those after it are not considered)")
                break
            found = spread_problem(spread)
            if found:
                where, message = found
                report(f"spec.topologySpreadConstraints[{index}]{where}",
                       f"{message}: the constraint (topologyKey {spread.topology_key!r}) is not considered by "
                       f"toposched, so the pods may be placed more unevenly than it asks")
    held = next(((index, number, port.host_port) for index, container in enumerate(spec.init_containers)
                 for number, port in enumerate(container.ports) if port.host_port), None)
    if held is not None:
        index, number, host_port = held
        report(f"spec.initContainers[{index}].ports[{number}].hostPort",
               f"host port {host_port} of an init container is not considered by toposched (nor by "
               f"kube-scheduler): a pod holding it may be placed on the same node")
    if spec.resource_claims:
        report("spec.resourceClaims", DRA_NOT_PLACED.partition(": ")[2])
    return problems


def _any_ports(containers: list[Container]) -> bool:
    if len(containers) == 1:  # the usual pod, on the path of every derivation: no generator
        return bool(containers[0].ports)
    return any(container.ports for container in containers)


def spread_problem(spread: TopologySpreadConstraint) -> tuple[str, str] | None:
    """Why a DoNotSchedule spread constraint cannot be placed by, as (field below the constraint, message):
    what the API server's validateTopologySpreadConstraints refuses, so only a log or a scenario written
    by hand carries it. None when it is usable."""
    if spread.max_skew is None:
        return ".maxSkew", ("maxSkew is missing (the API server requires it; an event log written before "
                            "toposched read the field holds none until the pod is listed or updated again)")
    if spread.max_skew < 1:
        return ".maxSkew", f"maxSkew {spread.max_skew} must be greater than zero"
    if not spread.topology_key:
        return ".topologyKey", "topologyKey can not be empty"
    if spread.min_domains is not None and spread.min_domains < 1:
        return ".minDomains", f"minDomains {spread.min_domains} must be greater than zero"
    for name, policy in (("nodeAffinityPolicy", spread.node_affinity_policy),
                         ("nodeTaintsPolicy", spread.node_taints_policy)):
        if policy is not None and policy not in NODE_INCLUSION_POLICIES:
            return f".{name}", f"{name} {policy!r} is not Honor or Ignore"
    if spread.label_selector is not None:
        broken = selector_problems(spread.label_selector)
        if broken:
            where, message = broken[0]
            return f".labelSelector.{where}", message
    return None
