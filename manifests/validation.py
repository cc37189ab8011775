"""The API server's validation of the objects a scheduler reads: the rules a real server answers 422 for.

Each rule is apimachinery's or k8s.io/kubernetes pkg/apis/*/validation's, with its field path and
its words, so that a manifest devcluster refuses is one a real cluster refuses, for the same reason:

- metadata: label keys are qualified names and label values at most 63 characters of
  `[A-Za-z0-9_.-]` starting and ending alphanumeric; annotation keys are qualified names and all
  annotations together at most 256 KiB (`TotalAnnotationSizeLimitB`).
- Pod: containers present, named (DNS labels, unique) and with an image; resource names that a
  container may ask for; quantities not negative; extended resources (`nvidia.com/gpu`) whole
  numbers, with a limit, and a request equal to it (they cannot be overcommitted); other requests
  at most their limit; preemptionPolicy one of the two policies; nodeSelector values valid label
  values; pod affinity and anti-affinity terms (selectors, namespaces, matchLabelKeys /
  mismatchLabelKeys, a topologyKey; preferred terms' weights 1-100); topology spread constraints
  (maxSkew and minDomains positive, a topologyKey, whenUnsatisfiable and the node inclusion policies
  among their values, no {topologyKey, whenUnsatisfiable} twice, selectors, matchLabelKeys);
  `workloadRef` / `schedulingGroup`
  (the Workload API's pod side) well formed.
- PriorityClass: user classes at most 1e9, `system-` names reserved, value and preemptionPolicy
  immutable.
- Workload (scheduling.k8s.io/v1alpha1, Kubernetes 1.35; v1alpha2, 1.36; v1beta1 and v1alpha3, 1.37) and
  PodGroup (v1alpha2, 1.36; v1beta1 and v1alpha3, 1.37): as `pkg/apis/scheduling/validation` and the
  types' declarative tags say. A 1.36 PodGroup's spec is immutable; a 1.37 one's but for its gang's
  minCount. A 1.36 Workload's templates are immutable; a 1.37 one keeps its templates (none added or
  removed, at any level of a composite tree) and their fields but for a gang's minCount / minGroupCount.
- CompositePodGroup (scheduling.k8s.io/v1alpha3, 1.37 alpha): workloadRef and a basic / gang policy required
  (minGroupCount at least 1), one topology constraint at most, disruptionMode single or all, the priority
  fields; its spec immutable. A PodGroup or CompositePodGroup naming a parent names its Workload too.

`validate(api_version, kind, obj, old)` returns causes `(reason, field, message)` in the form of a
Status's `details.causes`; empty means valid. Pure: no I/O, nothing of ours imported but
`manifests.quantity`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from manifests.quantity import QuantityError, value_of

Obj = dict[str, Any]
Cause = tuple[str, str, str]  # (reason, field, message)

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
LABEL_VALUE_MAX = 63
HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")
WORKLOAD_MAX_POD_GROUPS = 8

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

_QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
_DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _quote(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else json.dumps(value, default=str)


def invalid(field: str, value: Any, message: str) -> Cause:
    return ("FieldValueInvalid", field, f"Invalid value: {_quote(value)}: {message}")


def required(field: str, message: str = "") -> Cause:
    return ("FieldValueRequired", field, f"Required value: {message}" if message else "Required value")


def forbidden(field: str, message: str) -> Cause:
    return ("FieldValueForbidden", field, f"Forbidden: {message}")


def not_supported(field: str, value: Any, supported: tuple[str, ...]) -> Cause:
    listed = ", ".join(f'"{s}"' for s in supported)
    return ("FieldValueNotSupported", field, f"Unsupported value: {_quote(value)}: supported values: {listed}")


def immutable(field: str, value: Any) -> Cause:
    return ("FieldValueInvalid", field, f"Invalid value: {_quote(value)}: field is immutable")


# --------------------------------------------------------------------------- names


@functools.lru_cache(maxsize=65536)  # names repeat across a cluster's objects
def qualified_name_problems(name: str) -> tuple[str, ...]:
    """apimachinery IsQualifiedName: `[prefix/]name`, prefix a DNS subdomain, name at most 63 characters."""
    parts = name.split("/")
    if len(parts) > 2:
        return ("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
                "and '/' (e.g. 'example.com/MyName')",)
    problems: list[str] = []
    short = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            problems.append(f"prefix part {_DNS1123_SUBDOMAIN_MESSAGE}" if len(prefix) <= 253
                            else "prefix part must be no more than 253 characters")
    if not short:
        problems.append("name part must be non-empty")
    else:
        if len(short) > 63:
            problems.append("name part must be no more than 63 characters")
        if not _QUALIFIED_NAME.match(short):
            problems.append(_QUALIFIED_NAME_MESSAGE)
    return tuple(problems)


@functools.lru_cache(maxsize=65536)  # names repeat across a cluster's objects
def label_value_problems(value: str) -> tuple[str, ...]:
    problems: list[str] = []
    if len(value) > LABEL_VALUE_MAX:
        problems.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.match(value):
        problems.append(_LABEL_VALUE_MESSAGE)
    return tuple(problems)


@functools.lru_cache(maxsize=65536)  # names repeat across a cluster's objects
def dns_label_problems(value: str) -> tuple[str, ...]:
    too_long = () if len(value) <= 63 else ("must be no more than 63 characters",)
    return too_long + (() if _DNS1123_LABEL.match(value) else (_DNS1123_LABEL_MESSAGE,))


@functools.lru_cache(maxsize=65536)  # names repeat across a cluster's objects
def dns_subdomain_problems(value: str) -> tuple[str, ...]:
    too_long = () if len(value) <= 253 else ("must be no more than 253 characters",)
    return too_long + (() if _DNS1123_SUBDOMAIN.match(value) else (_DNS1123_SUBDOMAIN_MESSAGE,))


def validate_labels(labels: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(labels, dict):
        return causes
    for key, value in labels.items():
        causes += [invalid(field, key, problem) for problem in qualified_name_problems(str(key))]
        if isinstance(value, str):
            causes += [invalid(field, value, problem) for problem in label_value_problems(value)]
    return causes


def validate_annotations(annotations: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(annotations, dict):
        return causes
    total = 0
    for key, value in annotations.items():
        causes += [invalid(field, key, problem) for problem in qualified_name_problems(str(key).lower())]
        total += len(str(key)) + len(str(value) if value is not None else "")
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(("FieldValueTooLong", field, f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} "
                                                   "bytes"))
    return causes


def validate_metadata(obj: Obj) -> list[Cause]:
    meta = _dict(obj.get("metadata"))
    return (validate_labels(meta.get("labels"), "metadata.labels")
            + validate_annotations(meta.get("annotations"), "metadata.annotations"))


# --------------------------------------------------------------------------- pods

_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def _native(name: str) -> bool:
    """IsNativeResource: no domain, or a kubernetes.io domain."""
    return "/" not in name or "kubernetes.io/" in name


@functools.lru_cache(maxsize=4096)
def _extended(name: str) -> bool:
    """IsExtendedResourceName: outside kubernetes.io, not `requests.`-prefixed, a qualified name."""
    if _native(name) or name.startswith("requests."):
        return False
    return not qualified_name_problems(f"requests.{name}")


def _overcommit_allowed(name: str) -> bool:
    return _native(name) and not name.startswith("hugepages-")


@functools.lru_cache(maxsize=4096)
def _resource_name_problems(name: str) -> tuple[str, ...]:
    problems = qualified_name_problems(name)
    if problems:
        return problems
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            return ("must be a standard resource for containers",)
    elif not _native(name) and not _extended(name):
        return ("doesn't follow extended resource name standard",)
    return ()


def _resource_name(name: str, field: str) -> list[Cause]:
    problems = _resource_name_problems(name)
    return [invalid(field, name, problem) for problem in problems] if problems else []


def _quantities(values: Any, field: str) -> tuple[dict[str, Fraction], list[Cause]]:
    parsed: dict[str, Fraction] = {}
    causes: list[Cause] = []
    if not isinstance(values, dict):
        return parsed, causes
    for name, raw in values.items():
        where = f"{field}[{name}]"
        causes += _resource_name(str(name), where)
        try:
            value = value_of(raw)
        except (QuantityError, TypeError):
            continue  # decoding already refused it (400) or kept it for another reader
        parsed[str(name)] = value
        if value < 0:
            causes.append(invalid(where, str(raw), "must be greater than or equal to 0"))
        elif _extended(str(name)) and value.denominator != 1:
            causes.append(invalid(where, str(raw), "must be an integer"))
    return parsed, causes


def _container_resources(resources: Any, field: str) -> list[Cause]:
    resources = _dict(resources)
    limits, causes = _quantities(resources.get("limits"), f"{field}.limits")
    requests, request_causes = _quantities(resources.get("requests"), f"{field}.requests")
    causes += request_causes
    raw_limits, raw_requests = _dict(resources.get("limits")), _dict(resources.get("requests"))
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is not None:
            if request != limit and not _overcommit_allowed(name):
                causes.append(invalid(f"{field}.requests", str(raw_requests[name]),
                                      f"must be equal to {name} limit of {raw_limits[name]}"))
            elif request > limit:
                causes.append(invalid(f"{field}.requests", str(raw_requests[name]),
                                      f"must be less than or equal to {name} limit of {raw_limits[name]}"))
        elif name not in raw_limits and not _overcommit_allowed(name):
            causes.append(required(f"{field}.limits", "Limit must be set for non overcommitable resources"))
    return causes


def _unique_label_name(name: Any, field: str, seen: set[str], duplicate_field: str, duplicate: Any) -> list[Cause]:
    """A list item's name: required, a DNS label, unique in the list (the Duplicate cause says the item)."""
    if not name:
        return [required(field)]
    causes = [invalid(field, name, p) for p in dns_label_problems(str(name))]
    if name in seen:
        causes.append(("FieldValueDuplicate", duplicate_field, f"Duplicate value: {_quote(duplicate)}"))
    seen.add(str(name))
    return causes


def _containers(spec: Obj, name: str, field: str, seen: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    containers = spec.get(name)
    if not isinstance(containers, list):
        return causes
    for index, container in enumerate(containers):
        where = f"{field}.{name}[{index}]"
        container = _dict(container)
        causes += _unique_label_name(container.get("name"), f"{where}.name", seen, f"{where}.name",
                                     container.get("name"))
        if not container.get("image"):
            causes.append(required(f"{where}.image"))
        causes += _container_resources(container.get("resources"), f"{where}.resources")
    return causes


def _pod_workload_fields(spec: Obj) -> list[Cause]:
    causes: list[Cause] = []
    ref = spec.get("workloadRef")
    if isinstance(ref, dict):
        if not ref.get("name"):
            causes.append(required("spec.workloadRef.name"))
        else:
            causes += [invalid("spec.workloadRef.name", ref["name"], p)
                       for p in dns_subdomain_problems(str(ref["name"]))]
        if not ref.get("podGroup"):
            causes.append(required("spec.workloadRef.podGroup"))
        else:
            causes += [invalid("spec.workloadRef.podGroup", ref["podGroup"], p)
                       for p in dns_label_problems(str(ref["podGroup"]))]
        key = ref.get("podGroupReplicaKey")
        if key:
            causes += [invalid("spec.workloadRef.podGroupReplicaKey", key, p) for p in dns_label_problems(str(key))]
    group = spec.get("schedulingGroup")
    if isinstance(group, dict):
        name = group.get("podGroupName")
        if not name:
            causes.append(required("spec.schedulingGroup.podGroupName"))
        else:
            causes += [invalid("spec.schedulingGroup.podGroupName", name, p)
                       for p in dns_subdomain_problems(str(name))]
    return causes


# --------------------------------------------------------------------------- pod (anti-)affinity

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def validate_label_selector(selector: Any, field: str) -> list[Cause]:
    """apimachinery's ValidateLabelSelector (label values in expressions checked, as on create)."""
    causes: list[Cause] = []
    if not isinstance(selector, dict):
        return causes
    causes += validate_labels(selector.get("matchLabels"), f"{field}.matchLabels")
    for index, expression in enumerate(selector.get("matchExpressions") or []):
        where = f"{field}.matchExpressions[{index}]"
        expression = _dict(expression)
        operator, values = expression.get("operator"), expression.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(required(f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(forbidden(f"{where}.values",
                                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            causes.append(invalid(f"{where}.operator", operator, "not a valid selector operator"))
        causes += [invalid(f"{where}.key", expression.get("key"), problem)
                   for problem in qualified_name_problems(str(expression.get("key") or ""))]
        for value_index, value in enumerate(values):
            causes += [invalid(f"{where}.values[{value_index}]", value, problem)
                       for problem in label_value_problems(str(value))]
    return causes


def _label_keys(keys: Any, selector: Any, field: str) -> list[Cause]:
    if not keys:
        return []
    if selector is None:
        return [forbidden(field, "must not be specified when labelSelector is not set")]
    return [invalid(f"{field}[{index}]", key, problem) for index, key in enumerate(keys)
            for problem in qualified_name_problems(str(key))]


def _merged_label_keys(match_keys: Any, selector: Any, field: str) -> list[Cause]:
    """validateMatchLabelKeysAndMismatchLabelKeys's matchLabelKeys part, after the API server merged them
    into the selector (its field paths: a key in both is `field[index]`)."""
    causes = _label_keys(match_keys, selector, f"{field}.matchLabelKeys")
    if isinstance(selector, dict) and match_keys:
        # A key of matchLabelKeys merged in (`key In (value)`) and also written in the selector.
        position = {key: index for index, key in enumerate(match_keys) if isinstance(key, str)}
        seen = set(_dict(selector.get("matchLabels")))
        for expression in selector.get("matchExpressions") or []:
            key = _dict(expression).get("key")
            if isinstance(key, str) and key in position and key in seen:
                causes.append(invalid(f"{field}[{position[key]}]", key,
                                      "exists in both matchLabelKeys and labelSelector"))
            if isinstance(key, str):
                seen.add(key)
    return causes


WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")
NOT_POSITIVE = "must be greater than zero"


def _topology_spread(spec: Obj, field: str) -> list[Cause]:
    """validateTopologySpreadConstraints, on constraints whose matchLabelKeys the API server has merged into
    their selectors (MatchLabelKeysInPodTopologySpreadSelectorMerge, on by default since 1.34)."""
    causes: list[Cause] = []
    constraints = [_dict(c) for c in spec.get("topologySpreadConstraints") or []]
    for index, constraint in enumerate(constraints):
        at = f"{field}.topologySpreadConstraints[{index}]"
        skew = constraint.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
            causes.append(invalid(f"{at}.maxSkew", skew, NOT_POSITIVE))
        key, when = constraint.get("topologyKey") or "", constraint.get("whenUnsatisfiable")
        if not key:
            causes.append(required(f"{at}.topologyKey", "can not be empty"))
        if when not in WHEN_UNSATISFIABLE:
            causes.append(not_supported(f"{at}.whenUnsatisfiable", when, WHEN_UNSATISFIABLE))
        if any((other.get("topologyKey") or "") == key and other.get("whenUnsatisfiable") == when
               for other in constraints[index + 1:]):
            causes.append(("FieldValueDuplicate", f"{at}.{{topologyKey, whenUnsatisfiable}}",
                           f"Duplicate value: {_quote(f'{{{key}, {when}}}')}"))
        domains = constraint.get("minDomains")
        if domains is not None:
            if not isinstance(domains, int) or isinstance(domains, bool) or domains <= 0:
                causes.append(invalid(f"{at}.minDomains", domains, NOT_POSITIVE))
            if when != "DoNotSchedule":
                causes.append(invalid(f"{at}.minDomains", domains,
                                      f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}"))
        for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = constraint.get(name)
            if policy is not None and policy not in NODE_INCLUSION_POLICIES:
                causes.append(not_supported(f"{at}.{name}", policy, NODE_INCLUSION_POLICIES))
        selector = constraint.get("labelSelector")
        causes += _merged_label_keys(constraint.get("matchLabelKeys") or [], selector, at)
        causes += validate_label_selector(selector, f"{at}.labelSelector")
    return causes


def _pod_affinity_term(term: Obj, field: str) -> list[Cause]:
    """validatePodAffinityTerm, on a term whose matchLabelKeys the API server has merged into its selector."""
    selector = term.get("labelSelector")
    causes = validate_label_selector(selector, f"{field}.labelSelector")
    causes += validate_label_selector(term.get("namespaceSelector"), f"{field}.namespaceSelector")
    for name in term.get("namespaces") or []:
        causes += [invalid(f"{field}.namespace", name, problem) for problem in dns_label_problems(str(name))]
    match_keys, mismatch_keys = term.get("matchLabelKeys") or [], term.get("mismatchLabelKeys") or []
    causes += _merged_label_keys(match_keys, selector, field)
    causes += _label_keys(mismatch_keys, selector, f"{field}.mismatchLabelKeys")
    for index, key in enumerate(match_keys):
        if key in mismatch_keys:
            causes.append(invalid(f"{field}.matchLabelKeys[{index}]", key,
                                  "exists in both matchLabelKeys and mismatchLabelKeys"))
    topology_key = str(term.get("topologyKey") or "")
    if not topology_key:
        causes.append(required(f"{field}.topologyKey", "can not be empty"))
    causes += [invalid(f"{field}.topologyKey", topology_key, problem)
               for problem in qualified_name_problems(topology_key)]
    return causes


def _pod_affinity(spec: Obj, field: str) -> list[Cause]:
    """validatePodAffinity / validatePodAntiAffinity: each required term, and each preferred term's weight
    (1-100) and term."""
    causes: list[Cause] = []
    affinity = _dict(spec.get("affinity"))
    for name in ("podAffinity", "podAntiAffinity"):
        part = _dict(affinity.get(name))
        where = f"{field}.affinity.{name}"
        for index, term in enumerate(part.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            causes += _pod_affinity_term(_dict(term),
                                         f"{where}.requiredDuringSchedulingIgnoredDuringExecution[{index}]")
        for index, weighted in enumerate(part.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            weighted = _dict(weighted)
            at = f"{where}.preferredDuringSchedulingIgnoredDuringExecution[{index}]"
            weight = weighted.get("weight")
            if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
                causes.append(invalid(f"{at}.weight", weight, "must be in the range 1-100"))
            causes += _pod_affinity_term(_dict(weighted.get("podAffinityTerm")), f"{at}.podAffinityTerm")
    return causes


def validate_pod_spec(spec: Obj, field: str = "spec") -> list[Cause]:
    causes: list[Cause] = []
    if not spec.get("containers"):
        causes.append(required(f"{field}.containers"))
    seen: set[str] = set()
    causes += _containers(spec, "containers", field, seen)
    causes += _containers(spec, "initContainers", field, seen)
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        causes.append(not_supported(f"{field}.preemptionPolicy", policy, PREEMPTION_POLICIES))
    causes += validate_labels(spec.get("nodeSelector"), f"{field}.nodeSelector")
    causes += _pod_affinity(spec, field)
    causes += _topology_spread(spec, field)
    return causes


def validate_placement_rules(spec: Obj, field: str = "spec") -> list[Cause]:
    """The rules a pod's spec asks of its placement that the API server refuses as written: its pod
    (anti-)affinity terms and topology spread constraints (`toposched validate` checks these; images and
    the rest are for `kubectl apply --dry-run=server`)."""
    return _pod_affinity(spec, field) + _topology_spread(spec, field)


def validate_pod(spec: Obj) -> list[Cause]:
    """A pod's spec on create: every rule but metadata's."""
    return validate_pod_spec(spec) + _pod_workload_fields(spec)


def _pod(obj: Obj, old: Obj | None) -> list[Cause]:
    spec = _dict(obj.get("spec"))
    causes = validate_pod(spec)
    if old is not None:
        old_spec = _dict(old.get("spec"))
        for name in ("workloadRef", "schedulingGroup"):
            if name in old_spec and spec.get(name) != old_spec.get(name):
                causes.append(immutable(f"spec.{name}", spec.get(name)))
    return causes


# --------------------------------------------------------------------------- priority classes


def _priority_class(obj: Obj, old: Obj | None) -> list[Cause]:
    causes: list[Cause] = []
    name = str(_dict(obj.get("metadata")).get("name") or "")
    value = obj.get("value")
    if "value" not in obj:
        causes.append(required("value"))
    elif name.startswith("system-"):
        if SYSTEM_PRIORITY_CLASSES.get(name) != value or obj.get("globalDefault"):
            causes.append(forbidden("metadata.name", "priority class names with 'system-' prefix are reserved for "
                                                     f"system use only. error: {_system_class_error(name, value)}"))
    elif isinstance(value, int) and value > HIGHEST_USER_PRIORITY:
        causes.append(forbidden("value", "maximum allowed value of a user defined priority is "
                                         f"{HIGHEST_USER_PRIORITY}"))
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        causes.append(not_supported("preemptionPolicy", policy, PREEMPTION_POLICIES))
    if old is not None:
        if obj.get("value") != old.get("value"):
            causes.append(forbidden("value", "may not be changed in an update."))
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy"):
            causes.append(immutable("preemptionPolicy", obj.get("preemptionPolicy")))
    return causes


def _system_class_error(name: str, value: Any) -> str:
    if name not in SYSTEM_PRIORITY_CLASSES:
        return f"{name!r} is not a known system priority class"
    return f"value of {name!r} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}, not {value}"


# --------------------------------------------------------------------------- the Workload API


def _one_of(union: Obj, members: tuple[str, ...], field: str) -> list[Cause]:
    """A union of object members (`basic` / `gang`, `single` / `all`): exactly one set, as the declarative
    `+union` validation words it."""
    listed = ", ".join(f"`{name}`" for name in members)
    chosen = [f"`{name}`" for name in members if union.get(name) is not None]
    if not chosen:
        return [invalid(field, "", f"must specify one of: {listed}")]
    if len(chosen) > 1:
        return [invalid(field, "{" + ", ".join(chosen) + "}",
                        f"exactly one of {listed} is required, but multiple fields are set")]
    return []


def _gang_policy(policy: Obj, field: str, count_name: str = "minCount") -> list[Cause]:
    """A `basic` / `gang` policy; the gang's count (`minCount`, a composite's `minGroupCount`) required and
    positive (declarative validation reads 0 as unset: Required)."""
    causes = _one_of(policy, ("basic", "gang"), field)
    gang = policy.get("gang")
    if causes or not isinstance(gang, dict):
        return causes
    count = gang.get(count_name)
    if not count:
        return [required(f"{field}.gang.{count_name}")]
    if isinstance(count, int) and count < 0:
        return [invalid(f"{field}.gang.{count_name}", count, "must be greater than zero")]
    return []


def _workload(obj: Obj, old: Obj | None) -> list[Cause]:
    """scheduling.k8s.io/v1alpha1 Workload (Kubernetes 1.35): spec.podGroups[].policy."""
    spec = _dict(obj.get("spec"))
    causes: list[Cause] = []
    ref = spec.get("controllerRef")
    if isinstance(ref, dict):
        for key in ("kind", "name"):
            if not ref.get(key):
                causes.append(required(f"spec.controllerRef.{key}"))
    groups = spec.get("podGroups")
    if not isinstance(groups, list) or not groups:
        causes.append(required("spec.podGroups", "must have at least one item"))
    elif len(groups) > WORKLOAD_MAX_POD_GROUPS:
        causes.append(("FieldValueTooMany", "spec.podGroups",
                       f"Too many: {len(groups)}: must have at most {WORKLOAD_MAX_POD_GROUPS} items"))
    else:
        seen: set[str] = set()
        for index, group in enumerate(groups):
            where = f"spec.podGroups[{index}]"
            group = _dict(group)
            causes += _unique_label_name(group.get("name"), f"{where}.name", seen, where, group)
            causes += _gang_policy(_dict(group.get("policy")), f"{where}.policy")
    if old is not None:
        old_spec = _dict(old.get("spec"))
        if spec.get("podGroups") != old_spec.get("podGroups"):
            causes.append(immutable("spec.podGroups", spec.get("podGroups")))
        if old_spec.get("controllerRef") is not None and spec.get("controllerRef") != old_spec.get("controllerRef"):
            causes.append(immutable("spec.controllerRef", spec.get("controllerRef")))
    return causes


def _names(ref: Obj, checks: tuple[tuple[str, Callable[[str], tuple[str, ...]]], ...], where: str) -> list[Cause]:
    """Required names of a reference, each checked (DNS subdomain, DNS label)."""
    causes: list[Cause] = []
    for key, check in checks:
        value = ref.get(key)
        if not value:
            causes.append(required(f"{where}.{key}"))
        else:
            causes += [invalid(f"{where}.{key}", value, p) for p in check(str(value))]
    return causes


def _topology_constraints(spec: Obj, field: str = "spec") -> list[Cause]:
    """<field>.schedulingConstraints.topology: at most one item, its key a qualified name (label key)."""
    constraints = spec.get("schedulingConstraints")
    topology = constraints.get("topology") if isinstance(constraints, dict) else None
    if not isinstance(topology, list):
        return []
    causes: list[Cause] = []
    if len(topology) > 1:
        causes.append(("FieldValueTooMany", f"{field}.schedulingConstraints.topology",
                       f"Too many: {len(topology)}: must have at most 1 item"))
    for index, constraint in enumerate(topology):
        where = f"{field}.schedulingConstraints.topology[{index}].key"
        topology_key = _dict(constraint).get("key")
        if not topology_key:
            causes.append(required(where))
        else:
            causes += [invalid(where, topology_key, p) for p in qualified_name_problems(str(topology_key))]
    return causes


def _immutable_fields(spec: Obj, old_spec: Obj, names: tuple[str, ...]) -> list[Cause]:
    return [immutable(f"spec.{name}", spec.get(name)) for name in names if spec.get(name) != old_spec.get(name)]


POD_GROUP_DISRUPTION_MODES = ("Pod", "PodGroup")  # v1alpha2's strings


def _pod_group_v1alpha2(obj: Obj, old: Obj | None) -> list[Cause]:
    """scheduling.k8s.io/v1alpha2 PodGroup (Kubernetes 1.36): the runtime group pods join by name. Its spec is
    immutable, the gang's minCount included."""
    spec = _dict(obj.get("spec"))
    causes = _gang_policy(_dict(spec.get("schedulingPolicy")), "spec.schedulingPolicy")
    ref = spec.get("podGroupTemplateRef")
    if isinstance(ref, dict):
        workload = ref.get("workload")
        if not isinstance(workload, dict):
            causes.append(invalid("spec.podGroupTemplateRef", "", "must specify one of: `workload`"))
        else:
            causes += _names(workload, (("workloadName", dns_subdomain_problems),
                                        ("podGroupTemplateName", dns_label_problems)),
                             "spec.podGroupTemplateRef.workload")
    causes += _topology_constraints(spec)
    mode = spec.get("disruptionMode")
    if mode is not None and mode not in POD_GROUP_DISRUPTION_MODES:
        causes.append(not_supported("spec.disruptionMode", mode, POD_GROUP_DISRUPTION_MODES))
    if old is not None:
        causes += _immutable_fields(spec, _dict(old.get("spec")), (
            "podGroupTemplateRef", "schedulingPolicy", "schedulingConstraints", "disruptionMode", "priorityClassName",
            "priority", "resourceClaims"))
    return causes


# Every spec field of a 1.37 PodGroup but schedulingPolicy, which is immutable but for its gang's minCount.
_POD_GROUP_IMMUTABLE = ("schedulingConstraints", "disruptionMode", "workloadRef", "parentCompositePodGroupName",
                        "priorityClassName", "priority", "preemptionPolicy", "resourceClaims")


def _pod_group_v1beta1(obj: Obj, old: Obj | None) -> list[Cause]:
    """scheduling.k8s.io/v1beta1 and v1alpha3 PodGroup (Kubernetes 1.37): disruptionMode an object union,
    workloadRef for v1alpha2's podGroupTemplateRef, and a gang's minCount mutable (workload scaling) while
    the policy stays basic or gang as created."""
    spec = _dict(obj.get("spec"))
    causes = _gang_policy(_dict(spec.get("schedulingPolicy")), "spec.schedulingPolicy")
    mode = spec.get("disruptionMode")
    if mode is not None:
        causes += _one_of(_dict(mode), ("single", "all"), "spec.disruptionMode")
    ref = spec.get("workloadRef")
    if isinstance(ref, dict):
        causes += _names(ref, (("workloadName", dns_subdomain_problems), ("templateName", dns_label_problems)),
                         "spec.workloadRef")
    causes += _topology_constraints(spec)
    causes += _parent_name(spec)
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        causes.append(not_supported("spec.preemptionPolicy", policy, PREEMPTION_POLICIES))
    if old is not None:
        old_spec = _dict(old.get("spec"))
        new_policy, old_policy = _dict(spec.get("schedulingPolicy")), _dict(old_spec.get("schedulingPolicy"))
        kinds = [sorted(k for k in ("basic", "gang") if p.get(k) is not None) for p in (new_policy, old_policy)]
        if kinds[0] != kinds[1] or new_policy.get("basic") != old_policy.get("basic"):
            causes.append(immutable("spec.schedulingPolicy", spec.get("schedulingPolicy")))
        causes += _immutable_fields(spec, old_spec, _POD_GROUP_IMMUTABLE)
    return causes


def _parent_name(spec: Obj, *, workload_required: bool = False) -> list[Cause]:
    """parentCompositePodGroupName (a PodGroup's or a CompositePodGroup's): a DNS subdomain; a PodGroup naming a
    parent names its Workload too (`+k8s:dependentRequired`; a CompositePodGroup's `workload_required` anyway)."""
    parent = spec.get("parentCompositePodGroupName")
    if not parent:
        return []
    causes = [invalid("spec.parentCompositePodGroupName", parent, p) for p in dns_subdomain_problems(str(parent))]
    if not workload_required and "workloadRef" not in spec:
        causes.append(required("spec.workloadRef", "must be set when spec.parentCompositePodGroupName is set"))
    return causes


# Every spec field of a CompositePodGroup: all immutable (its gang's minGroupCount too, in 1.37).
_COMPOSITE_FIELDS = ("parentCompositePodGroupName", "workloadRef", "schedulingPolicy", "schedulingConstraints",
                     "disruptionMode", "priorityClassName", "priority", "preemptionPolicy")


def _composite_pod_group(obj: Obj, old: Obj | None) -> list[Cause]:
    """scheduling.k8s.io/v1alpha3 CompositePodGroup (Kubernetes 1.37, alpha): a non-leaf group of a hierarchy.
    workloadRef and schedulingPolicy required (gang's minGroupCount at least 1), one topology constraint at
    most, a disruptionMode union, the priority fields; its spec immutable."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[Cause] = []
    policy = spec.get("schedulingPolicy")
    if not isinstance(policy, dict):
        causes.append(required("spec.schedulingPolicy"))
    else:
        causes += _gang_policy(policy, "spec.schedulingPolicy", "minGroupCount")
    ref = spec.get("workloadRef")
    if not isinstance(ref, dict):
        causes.append(required("spec.workloadRef"))
    else:
        causes += _names(ref, (("workloadName", dns_subdomain_problems), ("templateName", dns_label_problems)),
                         "spec.workloadRef")
    causes += _parent_name(spec, workload_required=True)
    causes += _topology_constraints(spec)
    mode = spec.get("disruptionMode")
    if mode is not None:
        causes += _one_of(_dict(mode), ("single", "all"), "spec.disruptionMode")
    causes += _priority_fields(spec, "spec")
    if old is not None:
        causes += _immutable_fields(spec, _dict(old.get("spec")), _COMPOSITE_FIELDS)
    return causes


# --------------------------------------------------------------------------- the 1.36 / 1.37 Workload

WORKLOAD_MAX_POD_GROUP_TEMPLATES = 8  # per list: podGroupTemplates, compositePodGroupTemplates, at every level
WORKLOAD_MAX_TREE_DEPTH = 4  # levels of a tree of templates, a top-level template the first
MAX_POD_GROUP_RESOURCE_CLAIMS = 4
_TEMPLATE_LISTS = ("podGroupTemplates", "compositePodGroupTemplates")
# The fields of a 1.37 template that `+k8s:immutable` freezes (schedulingPolicy: its basic / gang choice only).
_TEMPLATE_IMMUTABLE = ("schedulingConstraints", "resourceClaims", "disruptionMode", "priorityClassName", "priority",
                       "preemptionPolicy")

TemplateCheck = Callable[[Obj, str], list[Cause]]


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _too_many(field: str, count: int, limit: int) -> Cause:
    return ("FieldValueTooMany", field, f"Too many: {count}: must have at most {limit} items")


def _named_list(items: list[Any], field: str, check: TemplateCheck, limit: int) -> list[Cause]:
    """A `+listType=map` list keyed by name: at most `limit` items, each named (a DNS label) once, and checked."""
    if len(items) > limit:
        return [_too_many(field, len(items), limit)]
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        item = _dict(item)
        causes += _unique_label_name(item.get("name"), f"{where}.name", seen, where, item)
        causes += check(item, where)
    return causes


def _resource_claim(claim: Obj, field: str) -> list[Cause]:
    """PodGroupResourceClaim: exactly one of resourceClaimName / resourceClaimTemplateName, a DNS subdomain."""
    members = ("resourceClaimName", "resourceClaimTemplateName")
    causes = _one_of(claim, members, field)
    for member in members:
        value = claim.get(member)
        if value is not None:
            causes += [invalid(f"{field}.{member}", value, p) for p in dns_subdomain_problems(str(value))]
    return causes


def _priority_fields(template: Obj, field: str) -> list[Cause]:
    """priorityClassName (a DNS subdomain), priority (at most HighestUserDefinablePriority), preemptionPolicy."""
    causes: list[Cause] = []
    name = template.get("priorityClassName")
    if name:
        causes += [invalid(f"{field}.priorityClassName", name, p) for p in dns_subdomain_problems(str(name))]
    priority = template.get("priority")
    if isinstance(priority, int) and priority > HIGHEST_USER_PRIORITY:
        causes.append(invalid(f"{field}.priority", priority,
                              f"must be less than or equal to {HIGHEST_USER_PRIORITY}"))
    policy = template.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        causes.append(not_supported(f"{field}.preemptionPolicy", policy, PREEMPTION_POLICIES))
    return causes


def _pod_group_template(template: Obj, field: str, *, string_modes: bool = False) -> list[Cause]:
    """One PodGroupTemplate: its policy, constraints, shared claims, disruption mode and priority."""
    causes = _gang_policy(_dict(template.get("schedulingPolicy")), f"{field}.schedulingPolicy")
    causes += _topology_constraints(template, field)
    causes += _named_list(_items(template.get("resourceClaims")), f"{field}.resourceClaims", _resource_claim,
                          MAX_POD_GROUP_RESOURCE_CLAIMS)
    mode = template.get("disruptionMode")
    if string_modes:  # 1.36: "Pod" / "PodGroup"
        if mode is not None and mode not in POD_GROUP_DISRUPTION_MODES:
            causes.append(not_supported(f"{field}.disruptionMode", mode, POD_GROUP_DISRUPTION_MODES))
    elif mode is not None:
        causes += _one_of(_dict(mode), ("single", "all"), f"{field}.disruptionMode")
    return causes + _priority_fields(template, field)


def _composite_template(depth: int) -> TemplateCheck:
    """A CompositePodGroupTemplate at `depth` (1 at the top): at least one child template, the tree at most
    WORKLOAD_MAX_TREE_DEPTH levels deep."""
    def check(template: Obj, field: str) -> list[Cause]:
        causes = _gang_policy(_dict(template.get("schedulingPolicy")), f"{field}.schedulingPolicy", "minGroupCount")
        causes += _topology_constraints(template, field)
        mode = template.get("disruptionMode")
        if mode is not None:
            causes += _one_of(_dict(mode), ("single", "all"), f"{field}.disruptionMode")
        causes += _priority_fields(template, field)
        children = {name: _items(template.get(name)) for name in _TEMPLATE_LISTS}
        if not any(children.values()):
            return [*causes, invalid(field, template.get("name", ""),
                                     "must have at least one child PodGroupTemplate or CompositePodGroupTemplate")]
        if depth >= WORKLOAD_MAX_TREE_DEPTH:
            return causes + [forbidden(f"{field}.{name}", f"a Workload's templates may be at most "
                                                          f"{WORKLOAD_MAX_TREE_DEPTH} levels deep")
                             for name, items in children.items() if items]
        causes += _named_list(children["podGroupTemplates"], f"{field}.podGroupTemplates", _pod_group_template,
                              WORKLOAD_MAX_POD_GROUP_TEMPLATES)
        return causes + _named_list(children["compositePodGroupTemplates"], f"{field}.compositePodGroupTemplates",
                                    _composite_template(depth + 1), WORKLOAD_MAX_POD_GROUP_TEMPLATES)
    return check


def _controller_ref(spec: Obj) -> list[Cause]:
    """TypedLocalObjectReference: kind and name required path segment names, apiGroup a DNS subdomain."""
    ref = spec.get("controllerRef")
    if not isinstance(ref, dict):
        return []
    causes: list[Cause] = []
    for key in ("kind", "name"):
        value = ref.get(key)
        if not value:
            causes.append(required(f"spec.controllerRef.{key}"))
        elif str(value) in (".", "..") or "/" in str(value) or "%" in str(value):
            causes.append(invalid(f"spec.controllerRef.{key}", value,
                                  "may not be '.' or '..' and may not contain '/' or '%'"))
    group = ref.get("apiGroup")
    if group:
        causes += [invalid("spec.controllerRef.apiGroup", group, p) for p in dns_subdomain_problems(str(group))]
    return causes


def _templates_union(spec: Obj) -> list[Cause]:
    """Exactly one of podGroupTemplates / compositePodGroupTemplates, in the declarative union's words."""
    listed = ", ".join(f"`{name}`" for name in _TEMPLATE_LISTS)
    chosen = [name for name in _TEMPLATE_LISTS if _items(spec.get(name))]
    if not chosen:
        return [invalid("spec", "", f"must specify one of: {listed}")]
    if len(chosen) > 1:
        return [invalid("spec", "{" + ", ".join(chosen) + "}", f"must specify exactly one of: {listed}")]
    return []


def _same_items(items: list[Any], old_items: list[Any], field: str) -> tuple[list[Cause], list[tuple[Obj, Obj, str]]]:
    """`+k8s:update=NoAddItem,NoRemoveItem` on a list keyed by name: the causes, and the (new, old, field) pairs
    of the items kept."""
    old_by_name = {str(_dict(item).get("name")): _dict(item) for item in old_items}
    names = {str(_dict(item).get("name")) for item in items}
    causes: list[Cause] = []
    kept: list[tuple[Obj, Obj, str]] = []
    for index, item in enumerate(items):
        item = _dict(item)
        old = old_by_name.get(str(item.get("name")))
        if old is None:
            causes.append(forbidden(f"{field}[{index}]", "items may not be added"))
        else:
            kept.append((item, old, f"{field}[{index}]"))
    causes += [forbidden(field, f"items may not be removed: {_quote(name)}") for name in old_by_name
               if name not in names]
    return causes, kept


def _policy_kind_kept(template: Obj, old: Obj, field: str) -> list[Cause]:
    """A schedulingPolicy stays basic or gang as created (basic immutable; gang NoSet / NoUnset): its count may
    change."""
    new_policy, old_policy = _dict(template.get("schedulingPolicy")), _dict(old.get("schedulingPolicy"))
    kinds = [sorted(k for k in ("basic", "gang") if p.get(k) is not None) for p in (new_policy, old_policy)]
    if kinds[0] != kinds[1] or new_policy.get("basic") != old_policy.get("basic"):
        return [immutable(f"{field}.schedulingPolicy", template.get("schedulingPolicy"))]
    return []


def _template_update(template: Obj, old: Obj, field: str) -> list[Cause]:
    causes = _policy_kind_kept(template, old, field)
    causes += [immutable(f"{field}.{name}", template.get(name)) for name in _TEMPLATE_IMMUTABLE
               if template.get(name) != old.get(name)]
    for name in _TEMPLATE_LISTS:  # a composite's children: none added or removed, each as a template
        if name in template or name in old:
            causes += _lists_update(_items(template.get(name)), _items(old.get(name)), f"{field}.{name}")
    return causes


def _lists_update(items: list[Any], old_items: list[Any], field: str) -> list[Cause]:
    causes, kept = _same_items(items, old_items, field)
    for template, old, where in kept:
        causes += _template_update(template, old, where)
    return causes


def _workload_1_37(obj: Obj, old: Obj | None) -> list[Cause]:
    """scheduling.k8s.io/v1beta1 and v1alpha3 Workload (Kubernetes 1.37): podGroupTemplates or (CompositePodGroup)
    compositePodGroupTemplates, 8 at most in a list, a tree 4 levels deep at most. On update no template is added
    or removed and a template's fields are immutable, but for a gang's minCount / minGroupCount."""
    spec = _dict(obj.get("spec"))
    causes = _controller_ref(spec) + _templates_union(spec)
    causes += _named_list(_items(spec.get("podGroupTemplates")), "spec.podGroupTemplates", _pod_group_template,
                          WORKLOAD_MAX_POD_GROUP_TEMPLATES)
    causes += _named_list(_items(spec.get("compositePodGroupTemplates")), "spec.compositePodGroupTemplates",
                          _composite_template(1), WORKLOAD_MAX_POD_GROUP_TEMPLATES)
    if old is not None:
        old_spec = _dict(old.get("spec"))
        if spec.get("controllerRef") != old_spec.get("controllerRef"):
            causes.append(immutable("spec.controllerRef", spec.get("controllerRef")))
        for name in _TEMPLATE_LISTS:
            causes += _lists_update(_items(spec.get(name)), _items(old_spec.get(name)), f"spec.{name}")
    return causes


def _string_mode_template(template: Obj, field: str) -> list[Cause]:
    return _pod_group_template(template, field, string_modes=True)


def _workload_v1alpha2(obj: Obj, old: Obj | None) -> list[Cause]:
    """scheduling.k8s.io/v1alpha2 Workload (Kubernetes 1.36): podGroupTemplates only (required), disruptionMode a
    string, no preemptionPolicy; controllerRef and podGroupTemplates immutable, minCount included."""
    spec = _dict(obj.get("spec"))
    causes = _controller_ref(spec)
    templates = _items(spec.get("podGroupTemplates"))
    if not templates:
        causes.append(required("spec.podGroupTemplates", "must have at least one item"))
    causes += _named_list(templates, "spec.podGroupTemplates", _string_mode_template,
                          WORKLOAD_MAX_POD_GROUP_TEMPLATES)
    if old is not None:
        causes += _immutable_fields(spec, _dict(old.get("spec")), ("controllerRef", "podGroupTemplates"))
    return causes


_RULES: dict[tuple[str, str], Callable[[Obj, Obj | None], list[Cause]]] = {
    ("v1", "Pod"): _pod,
    ("scheduling.k8s.io/v1", "PriorityClass"): _priority_class,
    ("scheduling.k8s.io/v1alpha1", "Workload"): _workload,
    ("scheduling.k8s.io/v1alpha2", "Workload"): _workload_v1alpha2,
    ("scheduling.k8s.io/v1alpha3", "Workload"): _workload_1_37,
    ("scheduling.k8s.io/v1beta1", "Workload"): _workload_1_37,
    ("scheduling.k8s.io/v1alpha2", "PodGroup"): _pod_group_v1alpha2,
    ("scheduling.k8s.io/v1alpha3", "PodGroup"): _pod_group_v1beta1,
    ("scheduling.k8s.io/v1beta1", "PodGroup"): _pod_group_v1beta1,
    ("scheduling.k8s.io/v1alpha3", "CompositePodGroup"): _composite_pod_group,
}


def validate(api_version: str, kind: str, obj: Obj, old: Obj | None = None) -> list[Cause]:
    """Why a real API server would refuse `obj` (422), as Status causes; `old` is the stored object on update."""
    rules = _RULES.get((api_version, kind))
    return validate_metadata(obj) + (rules(obj, old) if rules is not None else [])
