"""Kubernetes label selectors (`matchLabels` + `matchExpressions`): when one is usable, and what it selects.

One set of rules for every selector toposched reads from untrusted objects (a HyperNode member's
`labelMatch`, a Volcano `subGroupPolicy[].labelSelector`), the same ones apimachinery's
`LabelSelectorAsSelector` applies (where Volcano and kube-scheduler turn a selector into a
matcher): an operator is `In`, `NotIn`, `Exists` or `DoesNotExist`; `In` / `NotIn` need at least
one value, `Exists` / `DoesNotExist` take none; keys are qualified names (`prefix/name`, name at
most 63 characters of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric; prefix a DNS
subdomain) and values are empty or such a name. A selector that breaks a rule is unusable as a
whole (apimachinery returns an error, so Volcano's member selects nothing); callers report every
problem and decide what that means for their object.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from events.objects import LabelSelector

OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")

# Fixed patterns over short strings (checked for length first): no backtracking blow-up possible.
_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if not key:
        return "is empty"
    if slash and not prefix:
        return f"{key!r} has an empty prefix before '/'"
    if len(name) > 63 or not _NAME.fullmatch(name):
        return (f"{key!r} is not a valid label key (name part: at most 63 characters, alphanumerics, '-', '_', '.', "
                "starting and ending alphanumeric)")
    if prefix and (len(prefix) > 253 or not all(_DNS_LABEL.fullmatch(part) for part in prefix.split("."))):
        return f"{key!r} is not a valid label key (its prefix must be a lowercase DNS subdomain)"
    return None


def _value_problem(value: str) -> str | None:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        return (f"{value!r} is not a valid label value (at most 63 characters, alphanumerics, '-', '_', '.', "
                "starting and ending alphanumeric)")
    return None


def selector_problems(selector: LabelSelector) -> list[tuple[str, str]]:
    """Every rule the selector breaks, as (field below the selector, message); empty when usable."""
    found: list[tuple[str, str]] = []
    for key, value in sorted(selector.match_labels.items()):
        where = f"matchLabels[{key}]"
        problem = _key_problem(key) or _value_problem(value)
        if problem is not None:
            found.append((where, problem))
    for index, expression in enumerate(selector.match_expressions):
        where = f"matchExpressions[{index}]"
        key_problem = _key_problem(expression.key)
        if key_problem is not None:
            found.append((f"{where}.key", key_problem))
        operator = expression.operator
        if operator not in OPERATORS:
            found.append((f"{where}.operator", f"{operator!r} is not In, NotIn, Exists or DoesNotExist"))
        elif operator in ("In", "NotIn") and not expression.values:
            found.append((f"{where}.values", f"must not be empty for operator {operator}"))
        elif operator in ("Exists", "DoesNotExist") and expression.values:
            found.append((f"{where}.values", f"must be empty for operator {operator}"))
        for value_index, value in enumerate(expression.values):
            value_problem = _value_problem(value)
            if value_problem is not None:
                found.append((f"{where}.values[{value_index}]", value_problem))
    return found


def selects(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes semantics: every matchLabels pair and every matchExpression holds (for a usable selector)."""
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for expression in selector.match_expressions:
        operator = expression.operator
        present = expression.key in labels
        if operator == "In":
            if not present or labels[expression.key] not in expression.values:
                return False
        elif operator == "NotIn":
            if present and labels[expression.key] in expression.values:
                return False
        elif operator == "Exists":
            if not present:
                return False
        elif operator == "DoesNotExist":
            if present:
                return False
        else:
            return False  # unusable; callers reject it before matching
    return True
