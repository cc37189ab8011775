"""The kubelet's admission predicates that read the pod against its node, besides resources and host ports
(those need the pods held on the node: `devcluster.kubelet` keeps them): the OS checks, node affinity and
NoExecute taints, with the real kubelet's reasons and messages (pkg/kubelet/lifecycle/predicate.go).

Each check returns the (reason, message) the kubelet's rejectPod writes, or None. The kubelet decides their order
with its other checks; this module only says what each one refuses.

- OS (predicateAdmitHandler.Admit, before any filter): a pod labelled `kubernetes.io/os` with another OS than the
  kubelet's is PodOSSelectorNodeLabelDoesNotMatch; a pod whose `spec.os.name` is another OS than the kubelet's is
  PodOSNotSupported. The kubelet compares with its own runtime.GOOS (the node's label is overwritten with it), and
  reports that OS in `status.nodeInfo.operatingSystem`: that field is its stand-in here, `linux` (what the fake
  kubelet reports) when the node or the field is absent.
- NodeAffinity (nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)): every `spec.nodeSelector` label equal on
  the node, and, if the pod has `requiredDuringSchedulingIgnoredDuringExecution`, one of its nodeSelectorTerms
  matching (ORed). A term matches when all its matchExpressions (In, NotIn, Exists, DoesNotExist, Gt, Lt over the
  node's labels) and all its matchFields (In, NotIn with one value, over the node's `metadata.name`) hold; a term
  with neither matches nothing, and so does one that does not parse (an unknown operator, In / NotIn without
  values, Exists / DoesNotExist with some, Gt / Lt without exactly one integer value, a matchFields requirement
  without exactly one value). Label keys and values are not checked for syntax (the API server's pod validation
  would refuse them). Gt / Lt compare integers (Go's ParseInt, base 10): a label that is not one does not match.
- TaintToleration (generalFilter, after scheduler.AdmissionCheck): a NoExecute taint of the node no toleration of
  the pod tolerates (FindMatchingUntoleratedTaint; tolerations matched as `node_lifecycle.tolerates`). NoSchedule
  and PreferNoSchedule taints are the scheduler's business, not the kubelet's. Static pods are exempt in kube;
  devcluster has none.

A failed predicate's message is rejectPod's prefix and PredicateFailureError.Error(): `Pod was rejected: Predicate
<name> failed: <the plugin's ErrReason>`.

Pure: reads the pod and node dicts it is given, never the store; never raises.
"""

from __future__ import annotations

import re
from typing import Any

from devcluster.node_lifecycle import no_execute_taints, tolerates
from devcluster.selectors import selector_requirements

Obj = dict[str, Any]
Rejection = tuple[str, str]  # (reason, message) as the pod's status gets them

REJECTED = "Pod was rejected: "  # the kubelet's rejectPod prefixes every admission message with it
OS_LABEL = "kubernetes.io/os"  # v1.LabelOSStable
KUBELET_OS = "linux"  # the OS the fake kubelet reports in a node's status.nodeInfo.operatingSystem

POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH = "PodOSSelectorNodeLabelDoesNotMatch"
POD_OS_SELECTOR_MESSAGE = REJECTED + "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
POD_OS_NOT_SUPPORTED = "PodOSNotSupported"
POD_OS_NOT_SUPPORTED_MESSAGE = REJECTED + "Failed to admit pod as the OS field doesn't match node OS"

NODE_AFFINITY = "NodeAffinity"
NODE_AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"  # nodeaffinity.ErrReasonPod
TAINT_TOLERATION = "TaintToleration"
TAINT_TOLERATION_REASON = "node(s) had taints that the pod didn't tolerate"  # tainttoleration.ErrReasonNotMatch

_NAME_FIELD = "metadata.name"  # the one node field a nodeSelectorTerm's matchFields can read (extractNodeFields)
_INTEGER = re.compile(r"[+-]?[0-9]+")  # what strconv.ParseInt(s, 10, 64) accepts, range aside
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def predicate_message(name: str, reason: str) -> str:
    """The pod's status message for a failed predicate: rejectPod's prefix and PredicateFailureError.Error()."""
    return f"{REJECTED}Predicate {name} failed: {reason}"


NODE_AFFINITY_MESSAGE = predicate_message(NODE_AFFINITY, NODE_AFFINITY_REASON)
TAINT_TOLERATION_MESSAGE = predicate_message(TAINT_TOLERATION, TAINT_TOLERATION_REASON)


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def kubelet_os(node: Obj | None) -> str:
    """The OS of the kubelet serving `node`: what it reports in status.nodeInfo.operatingSystem."""
    reported = _dict(_dict(_dict(node).get("status")).get("nodeInfo")).get("operatingSystem")
    return str(reported) if reported else KUBELET_OS


def os_rejection(pod: Obj, node: Obj | None) -> Rejection | None:
    """The kubelet's OS checks, in its order: the pod's `kubernetes.io/os` label (rejectPodAdmissionBasedOnOSSelector:
    the pod's own label, not its nodeSelector), then `spec.os` (rejectPodAdmissionBasedOnOSField)."""
    running = kubelet_os(node)
    labels = _dict(_dict(pod.get("metadata")).get("labels"))
    if OS_LABEL in labels and labels[OS_LABEL] != running:
        return POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH, POD_OS_SELECTOR_MESSAGE
    pod_os = _dict(pod.get("spec")).get("os")
    if isinstance(pod_os, dict) and str(pod_os.get("name") or "") != running:
        return POD_OS_NOT_SUPPORTED, POD_OS_NOT_SUPPORTED_MESSAGE
    return None


def _integer(text: Any) -> int | None:
    """The value of `text` as Go's strconv.ParseInt(text, 10, 64) reads it, None if it does not parse."""
    if not isinstance(text, str) or not _INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None


def _expression_matches(expression: Any, labels: dict[str, Any]) -> bool | None:
    """Whether one matchExpressions requirement holds on the node's labels; None if it does not parse
    (labels.NewRequirement's checks of the operator and the number of values)."""
    if not isinstance(expression, dict):
        return None
    operator = expression.get("operator")
    if operator in ("Gt", "Lt"):
        values = _list(expression.get("values"))
        bound = _integer(values[0]) if len(values) == 1 else None
        if bound is None:
            return None
        key = str(expression.get("key", ""))
        found = _integer(labels[key]) if key in labels else None
        if found is None:
            return False
        return found > bound if operator == "Gt" else found < bound
    requirements = selector_requirements({"matchExpressions": [expression]})
    if requirements is None:
        return None
    return all(requirement.matches(labels) for requirement in requirements)


def _field_matches(requirement: Any, fields: dict[str, str]) -> bool | None:
    """Whether one matchFields requirement holds on the node's fields; None if it does not parse (In / NotIn with
    exactly one value)."""
    if not isinstance(requirement, dict):
        return None
    operator, values = requirement.get("operator"), _list(requirement.get("values"))
    if operator not in ("In", "NotIn") or len(values) != 1:
        return None
    equal = fields.get(str(requirement.get("key", "")), "") == str(values[0])
    return equal if operator == "In" else not equal


def _term_matches(term: Any, labels: dict[str, Any], fields: dict[str, str]) -> bool:
    """Whether a nodeSelectorTerm matches: all its expressions and fields hold; an empty term, or one with a
    requirement that does not parse, matches nothing."""
    expressions, requirements = _list(_dict(term).get("matchExpressions")), _list(_dict(term).get("matchFields"))
    if not expressions and not requirements:
        return False
    label_results = [_expression_matches(expression, labels) for expression in expressions]
    field_results = [_field_matches(requirement, fields) for requirement in requirements]
    if None in label_results or None in field_results:
        return False
    # A node without a name has no fields, and then kube does not check matchFields at all.
    return all(label_results) and (not fields or all(field_results))


def matches_node_affinity(pod: Obj, node: Obj) -> bool:
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match(node): the pod's nodeSelector, then its required node
    affinity's terms, ORed."""
    spec = _dict(pod.get("spec"))
    meta = _dict(node.get("metadata"))
    labels = _dict(meta.get("labels"))
    for key, value in _dict(spec.get("nodeSelector")).items():
        if key not in labels or labels[key] != value:
            return False
    node_affinity = _dict(_dict(spec.get("affinity")).get("nodeAffinity"))
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    name = str(meta.get("name") or "")
    fields = {_NAME_FIELD: name} if name else {}
    return any(_term_matches(term, labels, fields) for term in _list(_dict(required).get("nodeSelectorTerms")))


def node_affinity_rejection(pod: Obj, node: Obj) -> Rejection | None:
    """The NodeAffinity predicate's failure, if the node does not match the pod's nodeSelector / required node
    affinity."""
    return None if matches_node_affinity(pod, node) else (NODE_AFFINITY, NODE_AFFINITY_MESSAGE)


def taint_rejection(pod: Obj, node: Obj) -> Rejection | None:
    """The TaintToleration failure the kubelet reports, if one of the node's NoExecute taints is not tolerated by
    any of the pod's tolerations."""
    tolerations = _list(_dict(pod.get("spec")).get("tolerations"))
    for taint in no_execute_taints(node):
        if not any(tolerates(toleration, taint) for toleration in tolerations):
            return TAINT_TOLERATION, TAINT_TOLERATION_MESSAGE
    return None
