"""PodDisruptionBudgets in preemption: how many victims a plan takes beyond what their budgets allow.

Preemption outranks a budget: a victim whose budget is exhausted is still evicted when no better plan
exists (the daemon deletes it when the eviction is refused, as kube-scheduler does). But among plans
that evict no higher priority, toposched takes the one that breaks the fewest budgets, counted as
kube-scheduler's preemption counts them: a budget applies to a victim in its namespace whose labels its
selector selects (a budget without a selector, or with an empty one, applies to none here, as in
kube-scheduler's preemption); each victim uses one of its budget's `status.disruptionsAllowed`, unless
the budget already lists the pod in `status.disruptedPods` (an eviction admitted before); a victim
that takes any of its budgets below zero is a violation. kube-scheduler ranks violations before the
victims' priority; toposched ranks them right after it (preemption/cost.py), so sparing a budget
never costs evicting higher-priority pods.

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Iterable

from state.cluster import ClusterState, PodInfo
from state.label_selectors import selects


def budget_violations(state: ClusterState, pods: Iterable[PodInfo]) -> int:
    """How many of `pods`, evicted together, take one of their budgets below what it allows."""
    budgets = state.budgets
    if not budgets:
        return 0
    allowed: dict[str, int] = {}
    violations = 0
    for pod in sorted(pods, key=_by_key):  # one order, so a pod under two budgets counts the same way each time
        in_namespace = budgets.get(pod.namespace)
        if not in_namespace:
            continue
        meta = pod.obj.metadata
        violated = False
        for key, budget in in_namespace.items():
            selector = budget.spec.selector
            if (selector is None or not (selector.match_labels or selector.match_expressions)
                    or not selects(selector, meta.labels) or meta.name in budget.status.disrupted_pods):
                continue
            left = allowed.get(key, budget.status.disruptions_allowed) - 1
            allowed[key] = left
            if left < 0:
                violated = True
        if violated:
            violations += 1
    return violations


def _by_key(pod: PodInfo) -> str:
    return pod.key
