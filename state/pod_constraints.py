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

Preferences (preferred affinities, `ScheduleAnyway` spreads) are not reported: ignoring a
preference places a pod worse, never wrong. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from events.objects import Container, Pod, TopologySpreadConstraint
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


def unconsidered(pod: Pod, key: str) -> Sequence[Problem]:
    """The constraints of `pod` (key `key`) that toposched does not place by, each a problem naming its
    field; empty for the usual pod (a few attribute reads)."""
    spec = pod.spec
    affinity = spec.affinity
    if ((affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None))
            and not spec.topology_spread_constraints and not spec.resource_claims
            and not (spec.init_containers and _any_ports(spec.init_containers))):
        return _NONE
    problems: list[Problem] = []

    def report(field: str, message: str) -> None:
        problems.append(Problem("Pod", key, field, message, reason=UNSUPPORTED_FIELD))

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
