"""Label and field selectors, parsed from their query-string form and matched against objects.

Label selectors follow the apimachinery grammar: comma-separated requirements, each one of
`key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`. A structured
`LabelSelector` (an object's `matchLabels` / `matchExpressions`) becomes the same requirements, as
`metav1.LabelSelectorAsSelector` converts it.
Field selectors are `path=value`, `path==value` or `path!=value` over a per-kind set of supported
paths (as the real server, an unsupported path is a 400).

Pure: parsing raises `ApiError` (400) on malformed input; matching never fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from devcluster.errors import bad_request


class Requirement(msgspec.Struct, frozen=True):
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        op = self.operator
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        # "!=" and "notin" match objects without the key too.
        return labels.get(self.key) not in self.values


_SPLIT = re.compile(r",(?![^()]*\))")
_SET = re.compile(r"^\s*([^\s!=()]+)\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EQ = re.compile(r"^\s*([^\s!=()]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def parse_label_selector(text: str) -> tuple[Requirement, ...]:
    """Requirements of a label selector; all must match. Empty text selects everything."""
    if not text.strip():
        return ()
    requirements: list[Requirement] = []
    for term in _SPLIT.split(text):
        if match := _SET.match(term):
            values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
            requirements.append(Requirement(match.group(1), match.group(2), values))
        elif match := _EQ.match(term):
            operator = "!=" if match.group(2) == "!=" else "="
            requirements.append(Requirement(match.group(1), operator, frozenset((match.group(3),))))
        elif match := _EXISTS.match(term):
            requirements.append(Requirement(match.group(2), "!" if match.group(1) else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: found '{term.strip()}', expected: label selector term")
    return tuple(requirements)


_SELECTOR_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def selector_requirements(selector: Any) -> tuple[Requirement, ...] | None:
    """The requirements of a structured `LabelSelector`, or None when it selects nothing.

    As `metav1.LabelSelectorAsSelector`: a null selector selects nothing, an empty one (`{}`) everything;
    one it cannot convert (an unknown operator, `In`/`NotIn` without values, `Exists`/`DoesNotExist` with
    some) is None too, since its users then match nothing by it.
    """
    if not isinstance(selector, dict):
        return None
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, list):
        return None
    requirements = [Requirement(str(key), "=", frozenset((str(value),))) for key, value in match_labels.items()]
    for expression in expressions:
        if not isinstance(expression, dict):
            return None
        operator = _SELECTOR_OPERATORS.get(str(expression.get("operator")))
        values = expression.get("values") or []
        if operator is None or not isinstance(values, list) or bool(values) != (operator in ("in", "notin")):
            return None
        requirements.append(Requirement(str(expression.get("key", "")), operator, frozenset(str(v) for v in values)))
    return tuple(requirements)


def labels_match(requirements: tuple[Requirement, ...], obj: dict[str, Any]) -> bool:
    if not requirements:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


class FieldRequirement(msgspec.Struct, frozen=True):
    path: tuple[str, ...]
    value: str
    negate: bool


_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
_KIND_FIELDS: dict[str, frozenset[str]] = {
    "Pod": frozenset({
        "spec.nodeName", "spec.schedulerName", "status.phase", "spec.restartPolicy", "spec.serviceAccountName",
        "status.podIP", "status.nominatedNodeName", "spec.hostNetwork",
    }),
    "Node": frozenset({"spec.unschedulable"}),
    "Namespace": frozenset({"status.phase"}),
    "Event": frozenset({
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
        "reportingComponent", "source", "type", "regarding.kind", "regarding.name", "regarding.namespace",
        "regarding.uid",
    }),
}


def parse_field_selector(text: str, kind: str) -> tuple[FieldRequirement, ...]:
    """Requirements of a field selector for objects of `kind`; 400 on an unsupported field."""
    if not text.strip():
        return ()
    allowed = _COMMON_FIELDS | _KIND_FIELDS.get(kind, frozenset())
    requirements: list[FieldRequirement] = []
    for term in text.split(","):
        term = term.strip()
        if "!=" in term:
            path, value, negate = *term.split("!=", 1), True
        elif "==" in term:
            path, value, negate = *term.split("==", 1), False
        elif "=" in term:
            path, value, negate = *term.split("=", 1), False
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        path = path.strip()
        if path not in allowed:
            raise bad_request(f'field label not supported: {path}')
        requirements.append(FieldRequirement(tuple(path.split(".")), value.strip(), negate))
    return tuple(requirements)


def _field(obj: dict[str, Any], path: tuple[str, ...]) -> str:
    value: Any = obj
    for part in path:
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fields_match(requirements: tuple[FieldRequirement, ...], obj: dict[str, Any]) -> bool:
    for requirement in requirements:
        equal = _field(obj, requirement.path) == requirement.value
        if equal == requirement.negate:
            return False
    return True


def matcher(labels: str, fields: str, kind: str) -> Callable[[dict[str, Any]], bool] | None:
    """One predicate for both selectors, or None when nothing is filtered."""
    label_reqs = parse_label_selector(labels)
    field_reqs = parse_field_selector(fields, kind)
    if not label_reqs and not field_reqs:
        return None
    return lambda obj: labels_match(label_reqs, obj) and fields_match(field_reqs, obj)
