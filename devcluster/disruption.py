"""PodDisruptionBudgets as the eviction subresource enforces them.

kube-apiserver's eviction handler (pkg/registry/core/pod/storage/eviction.go) reads the budget's
status, which the disruption controller keeps; devcluster runs no disruption controller, so the status
is computed here, at the moment of the eviction, the way that controller would compute it
(pkg/controller/disruption/disruption.go):

- the budget's pods: the pods of its namespace its `spec.selector` selects (a null selector selects
  none, an empty one `{}` all of them, as policy/v1 has it);
- `currentHealthy`: those not being deleted whose `Ready` condition is True;
- `expectedPods`: for an integer `minAvailable`, how many pods it selects (the controller's own rule).
  For `maxUnavailable` and a percentage `minAvailable` the controller adds up the scale of the pods'
  owning controllers (a Deployment's replicas, ...); devcluster has no such controllers and takes the
  selected pods instead. Pods being deleted count, as they do in a controller's scale (an eviction
  does not shrink it), so evicting a pod is seen by the next eviction; once it is gone for good (its
  grace period over, or at once with none) it no longer counts, where a real controller would have
  replaced it;
- `desiredHealthy`: `minAvailable` (a percentage of expectedPods, rounded up), or expectedPods minus
  `maxUnavailable` (likewise, not below 0); with neither set (policy/v1 defaults neither) expectedPods
  and desiredHealthy are 0;
- `disruptionsAllowed`: currentHealthy - desiredHealthy, 0 when that is negative or expectedPods is 0.
  A value that is neither an integer nor a percentage makes the controller's sync fail: no disruptions
  allowed, and the refusal says so.

The eviction then follows the handler: a pod Pending, Succeeded, Failed or already being deleted is
evicted without looking at budgets (`ignores_budgets`); more than one budget selecting the pod is the
handler's failure Status (code 500); no budget, evicted. With one: a pod that is not Ready goes if the
budget's `unhealthyPodEvictionPolicy` is `AlwaysAllow`, or (`IfHealthyBudget`, the default) if
currentHealthy >= desiredHealthy > 0; otherwise, as a Ready pod, only if disruptionsAllowed >= 1, else
429 TooManyRequests with a `DisruptionBudget` cause. The handler's own bookkeeping (decrementing
`status.disruptionsAllowed`, the `disruptedPods` map) is not written: a pod it lets go is being deleted
or gone at once, so the next computation already leaves it out. The budget's stored status, whatever a
client wrote there, is not read.

Pure: no I/O, nothing stored; refusals are raised as `ApiError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import msgspec

from devcluster import errors
from devcluster.selectors import labels_match, selector_requirements

Obj = dict[str, Any]

_PERCENT = re.compile(r"^([+-]?[0-9]+)%$")


class BudgetStatus(msgspec.Struct, frozen=True):
    """What the disruption controller would write in a budget's status now."""

    current_healthy: int
    desired_healthy: int
    expected_pods: int
    disruptions_allowed: int
    sync_failure: str = ""  # why the controller could not compute the status ("" when it could)


def ignores_budgets(pod: Obj) -> bool:
    """A pod the eviction handler deletes without looking at budgets: Pending, terminal or being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Pending", "Succeeded", "Failed") or bool(pod["metadata"].get("deletionTimestamp"))


def is_ready(pod: Obj) -> bool:
    """The pod's `Ready` condition is True (podutil.IsPodReady, the budgets' notion of healthy)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def selects(budget: Obj, pod: Obj) -> bool:
    requirements = selector_requirements((budget.get("spec") or {}).get("selector"))
    return requirements is not None and labels_match(requirements, pod)


def _scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent rounding up; ValueError with the controller's words."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise ValueError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    match = _PERCENT.match(value)
    if match is None:
        raise ValueError(f'invalid value for IntOrString: invalid value "{value}": strconv.Atoi: parsing '
                         f'"{value[:-1]}": invalid syntax')
    return math.ceil(int(match.group(1)) * total / 100)


def budget_status(budget: Obj, pods: list[Obj]) -> BudgetStatus:
    """The status of `budget` over `pods` (the pods of its namespace), computed as the disruption
    controller would (see the module docstring for how expectedPods differs)."""
    selected = [pod for pod in pods if selects(budget, pod)]
    healthy = sum(1 for pod in selected if not pod["metadata"].get("deletionTimestamp") and is_ready(pod))
    spec = budget.get("spec") or {}
    expected = desired = 0
    try:
        if spec.get("maxUnavailable") is not None:
            expected = len(selected)
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        elif spec.get("minAvailable") is not None:
            expected = len(selected)
            desired = _scaled(spec["minAvailable"], expected)
    except ValueError as failure:  # the controller's failSafe: nothing allowed, the reason in a condition
        return BudgetStatus(0, 0, 0, 0, str(failure))
    allowed = healthy - desired
    return BudgetStatus(healthy, desired, expected, allowed if expected > 0 and allowed > 0 else 0)


def _refusal(name: str, status: BudgetStatus) -> str:
    if status.sync_failure:
        return f"The disruption budget {name} does not allow evicting pods currently because it failed sync: " \
               f"{status.sync_failure}"
    if status.current_healthy <= status.desired_healthy:
        return f"The disruption budget {name} needs {status.desired_healthy} healthy pods and has " \
               f"{status.current_healthy} currently"
    return f"The disruption budget {name} does not allow evicting pods currently"


def check_eviction(pod: Obj, budgets: list[Obj], pods: Callable[[], list[Obj]]) -> None:
    """Raise what the eviction handler answers when `pod` may not be evicted now; return if it may.

    `budgets` are the PodDisruptionBudgets of the pod's namespace, `pods()` its pods (listed only when a
    budget selects the pod). The caller has already let a pod that `ignores_budgets` go.
    """
    matching = [budget for budget in budgets if selects(budget, pod)]
    if len(matching) > 1:
        raise errors.multiple_disruption_budgets()
    if not matching:
        return
    budget = matching[0]
    status = budget_status(budget, pods())
    if not is_ready(pod):
        if (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return
        if status.current_healthy >= status.desired_healthy > 0:
            return
    if status.disruptions_allowed < 1:
        raise errors.disruption_budget_refused(_refusal(str(budget["metadata"]["name"]), status))
