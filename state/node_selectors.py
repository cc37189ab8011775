"""Required node selector terms, as the API server and kube-scheduler read them (a pod's required node
affinity, a PersistentVolume's node affinity): a term holds when all its matchExpressions (on the node's
labels) and matchFields (on `metadata.name`, the only field they may name) hold; the terms of a selector
are ORed.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping

from events.objects import NodeSelectorRequirement, NodeSelectorTerm

HOSTNAME_FIELD = "metadata.name"


def requirement_matches(requirement: NodeSelectorRequirement, value: str | None) -> bool:
    """One matchExpressions / matchFields entry against the node's value for its key (None: absent)."""
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(requirement.values) != 1:
            return False
        try:
            have, bound = int(value), int(requirement.values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False  # an unknown operator selects nothing, as the API server would reject it


def term_matches(term: NodeSelectorTerm, name: str, labels: Mapping[str, str]) -> bool:
    """A term matches when all its expressions and fields do; an empty term matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    for requirement in term.match_expressions:
        if not requirement_matches(requirement, labels.get(requirement.key)):
            return False
    for requirement in term.match_fields:
        value = name if requirement.key == HOSTNAME_FIELD else None
        if not requirement_matches(requirement, value):
            return False
    return True
