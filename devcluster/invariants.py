"""Per-kind rules the real API server enforces on create and update beyond the schema.

The schema (`validation.py`) refuses unknown fields and wrong types; these rules refuse well-typed
objects a real server calls Invalid (422): a Deployment whose selector does not select its own
template, a disruption budget with both minAvailable and maxUnavailable, a binding without a role,
a CustomResourceDefinition not named
`<plural>.<group>`. Only rules a manifest author meets are here, with the real field paths and
reasons; a kind without rules passes as written. Pods, priority classes and the Workload API's kinds
are validated by `manifests.validation`, which the scenario loader shares.

Pure: `problems(kind, obj)` returns the causes (reason, field, message); it never raises and does no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
Cause = tuple[str, str, str]
_REQUIRED = "Required value"


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _selects(selector: Obj, labels: dict[str, Any]) -> bool:
    for name, value in _dict(selector.get("matchLabels")).items():
        if labels.get(name) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        expression = _dict(expression)
        label, operator = str(expression.get("key", "")), expression.get("operator")
        values = expression.get("values") or []
        present = label in labels
        if operator == "In" and not (present and labels[label] in values):
            return False
        if operator == "NotIn" and present and labels[label] in values:
            return False
        if (operator == "Exists") != present and operator in ("Exists", "DoesNotExist"):
            return False
    return True


def _workload(kind: str) -> Callable[[Obj], list[Cause]]:
    def rules(obj: Obj) -> list[Cause]:
        spec = _dict(obj.get("spec"))
        selector = _dict(spec.get("selector"))
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            return [("FieldValueRequired", "spec.selector", _REQUIRED),
                    ("FieldValueInvalid", "spec.selector", f"Invalid value: {json.dumps(selector)}: empty selector "
                                                           f"is invalid for {kind.lower()}")]
        labels = _dict(_dict(_dict(spec.get("template")).get("metadata")).get("labels"))
        if not _selects(selector, labels):
            return [("FieldValueInvalid", "spec.template.metadata.labels",
                     f"Invalid value: {json.dumps(labels, sort_keys=True)}: `selector` does not match template "
                     "`labels`")]
        return []
    return rules


def _disruption_budget(obj: Obj) -> list[Cause]:
    spec = _dict(obj.get("spec"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        return [("FieldValueInvalid", "spec", "Invalid value: minAvailable and maxUnavailable cannot be both set")]
    return []


def _binding(role_kinds: tuple[str, ...]) -> Callable[[Obj], list[Cause]]:
    def rules(obj: Obj) -> list[Cause]:
        ref = _dict(obj.get("roleRef"))
        causes: list[Cause] = []
        if ref.get("kind") not in role_kinds:
            supported = ", ".join(f'"{k}"' for k in role_kinds)
            causes.append(("FieldValueNotSupported", "roleRef.kind",
                           f'Unsupported value: "{ref.get("kind") or ""}": supported values: {supported}'))
        if not ref.get("name"):
            causes.append(("FieldValueRequired", "roleRef.name", _REQUIRED))
        return causes
    return rules


def _custom_resource_definition(obj: Obj) -> list[Cause]:
    spec = _dict(obj.get("spec"))
    name = _dict(obj.get("metadata")).get("name")
    expected = f"{_dict(spec.get('names')).get('plural', '')}.{spec.get('group', '')}"
    if name != expected:
        return [("FieldValueInvalid", "metadata.name",
                 f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group')]
    return []


_RULES: dict[str, Callable[[Obj], list[Cause]]] = {
    "Deployment": _workload("Deployment"),
    "StatefulSet": _workload("StatefulSet"),
    "DaemonSet": _workload("DaemonSet"),
    "PodDisruptionBudget": _disruption_budget,
    "RoleBinding": _binding(("Role", "ClusterRole")),
    "ClusterRoleBinding": _binding(("ClusterRole",)),
    "CustomResourceDefinition": _custom_resource_definition,
}


def problems(kind: str, obj: Obj) -> list[Cause]:
    """The causes that make `obj` Invalid for `kind` (empty: valid)."""
    rules = _RULES.get(kind)
    return rules(obj) if rules is not None else []
