"""PodDisruptionBudgets: their status as the disruption controller computes it, and the eviction
subresource's rules over it.

Two callers share this one computation. The disruption controller (devcluster/disruption_controller.py,
as kube-controller-manager's pkg/controller/disruption/disruption.go) writes it into each budget's
status; kube-apiserver's eviction handler (pkg/registry/core/pod/storage/eviction.go) decides on the
status it reads. devcluster's eviction does not read the stored status: it computes it afresh at the
moment of the eviction, so that an eviction right after a pod change never sees a status the controller
has not caught up with yet (the controller runs one loop step after each change), and so that evictions
keep their budgets with the controller turned off. Only the stored `disruptedPods` is read, as the
controller reads it. The status:

- the budget's pods: the pods of its namespace its `spec.selector` selects (a null selector selects
  none, an empty one `{}` all of them, as policy/v1 has it);
- `disruptedPods`: the entries of the stored map whose pod is still selected and not being deleted, and
  whose eviction is less than `DELETION_TIMEOUT` old (the controller's buildDisruptedPodMap: an
  eviction it has not yet seen turn into a deletion; a pod already being deleted, gone, or not deleted
  in time leaves the map);
- `currentHealthy`: the pods not being deleted, not in `disruptedPods`, whose `Ready` condition is True;
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
  allowed, and the refusal says so;
- `observedGeneration`: the budget's generation; the `DisruptionAllowed` condition True with reason
  `SufficientPods` when disruptionsAllowed > 0, else False with `InsufficientPods` (a failed sync:
  False, `SyncFailed`, the failure as message, the rest of the old status kept, as the controller's
  failSafe writes it). A condition keeps its lastTransitionTime while its status stays.

The eviction then follows the handler: a pod Pending, Succeeded, Failed or already being deleted is
evicted without looking at budgets (`ignores_budgets`); more than one budget selecting the pod is the
handler's failure Status (code 500); no budget, evicted. With one: a pod that is not Ready goes if the
budget's `unhealthyPodEvictionPolicy` is `AlwaysAllow`, or (`IfHealthyBudget`, the default) if
currentHealthy >= desiredHealthy > 0, spending nothing; otherwise, as a Ready pod, only if
disruptionsAllowed >= 1, else 429 TooManyRequests with a `DisruptionBudget` cause. A disruption spent
is the handler's bookkeeping (`evicted_status`): the status it decided on with disruptionsAllowed one
less (the condition turned False at 0) and the pod's name in `disruptedPods` with the time. Every
eviction that goes marks the pod first with the `DisruptionTarget` condition (`with_disruption_target`,
as the handler does with PodDisruptionConditions, GA in 1.31; but a DisruptionTarget=True condition
already there is left as it is, where the real handler rewrites its reason: see that function).

Pure: no I/O, nothing stored; refusals are raised as `ApiError`; times are passed in.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from typing import Any

import msgspec

from devcluster import errors
from devcluster.selectors import labels_match, selector_requirements

Obj = dict[str, Any]

# How long an eviction's disruptedPods entry waits for the pod's deletion (the controller's
# DeletionTimeout, two minutes): past it the controller assumes the pod will not be deleted.
DELETION_TIMEOUT = 120.0

DISRUPTION_ALLOWED = "DisruptionAllowed"  # policy/v1 DisruptionAllowedCondition
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"

DISRUPTION_TARGET = "DisruptionTarget"  # v1 pod condition type
EVICTED_BY_EVICTION_API = "EvictionByEvictionAPI"
EVICTION_MESSAGE = "Eviction API: evicting"  # the eviction handler's words

_PERCENT = re.compile(r"^([+-]?[0-9]+)%$")


class BudgetStatus(msgspec.Struct, frozen=True):
    """What the disruption controller would write in a budget's status now."""

    current_healthy: int
    desired_healthy: int
    expected_pods: int
    disruptions_allowed: int
    sync_failure: str = ""  # why the controller could not compute the status ("" when it could)
    # pod name -> RFC 3339 time of its eviction, for evictions still waiting for the pod's deletion
    disrupted_pods: dict[str, str] = msgspec.field(default_factory=dict)
    # when the first of those times out (clock seconds), so that the controller looks again then
    recheck_at: float | None = None


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


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _seconds(stamp: Any) -> float | None:
    """The clock seconds of an RFC 3339 time as metav1.Time writes it; None if it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).timestamp()


def _awaited_disruptions(budget: Obj, selected: list[Obj], now: float) -> tuple[dict[str, str], float | None]:
    """The stored disruptedPods entries still awaited at `now`, and when the first of them times out
    (buildDisruptedPodMap). An entry whose time cannot be read is dropped, as a timed-out one."""
    stored = _dict(_dict(budget.get("status")).get("disruptedPods"))
    if not stored:
        return {}, None
    awaited: dict[str, str] = {}
    recheck_at: float | None = None
    for pod in selected:
        meta = pod["metadata"]
        name = meta["name"]
        if meta.get("deletionTimestamp") or name not in stored:
            continue
        evicted_at = _seconds(stored[name])
        if evicted_at is None or evicted_at + DELETION_TIMEOUT < now:
            continue
        awaited[name] = stored[name]
        recheck_at = evicted_at + DELETION_TIMEOUT if recheck_at is None else \
            min(recheck_at, evicted_at + DELETION_TIMEOUT)
    return awaited, recheck_at


def budget_status(budget: Obj, pods: list[Obj], now: float) -> BudgetStatus:
    """The status of `budget` over `pods` (the pods of its namespace) at clock time `now`, computed as the
    disruption controller would (see the module docstring for how expectedPods differs)."""
    selected = [pod for pod in pods if selects(budget, pod)]
    disrupted, recheck_at = _awaited_disruptions(budget, selected, now)
    healthy = sum(1 for pod in selected if not pod["metadata"].get("deletionTimestamp")
                  and pod["metadata"]["name"] not in disrupted and is_ready(pod))
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
    return BudgetStatus(healthy, desired, expected, allowed if expected > 0 and allowed > 0 else 0,
                        disrupted_pods=disrupted, recheck_at=recheck_at)


def _with_condition(conditions: Any, wanted: Obj, stamp: str) -> list[Obj]:
    """`conditions` with `wanted` set in place of the condition of its type (apimeta.SetStatusCondition):
    its lastTransitionTime is `stamp` if the status changed or it is new, else the one it had."""
    current = [c for c in conditions if isinstance(c, dict)] if isinstance(conditions, list) else []
    for index, condition in enumerate(current):
        if condition.get("type") == wanted["type"]:
            kept = condition.get("lastTransitionTime") if condition.get("status") == wanted["status"] else None
            current[index] = {**wanted, "lastTransitionTime": kept or stamp}
            return current
    return [*current, {**wanted, "lastTransitionTime": stamp}]


def _allowed_condition(status: str, reason: str, generation: Any, message: str = "") -> Obj:
    """A metav1.Condition of type DisruptionAllowed, its fields in the API's order (message is required
    there, so an empty one is written; observedGeneration is left out when unset)."""
    condition: Obj = {"type": DISRUPTION_ALLOWED, "status": status}
    if generation:
        condition["observedGeneration"] = generation
    return {**condition, "lastTransitionTime": "", "reason": reason, "message": message}


def _status_object(generation: Any, disrupted: dict[str, str], allowed: int, status: BudgetStatus,
                   conditions: list[Obj]) -> Obj:
    """A PodDisruptionBudgetStatus as the API writes it: its fields in order, disruptedPods left out
    when empty (omitempty)."""
    written: Obj = {"observedGeneration": generation}
    if disrupted:
        written["disruptedPods"] = dict(disrupted)
    written.update({"disruptionsAllowed": allowed, "currentHealthy": status.current_healthy,
                    "desiredHealthy": status.desired_healthy, "expectedPods": status.expected_pods,
                    "conditions": conditions})
    return written


def controller_status(budget: Obj, status: BudgetStatus, stamp: str) -> Obj:
    """The status the disruption controller writes for `budget` given its computed `status`, `stamp`
    being now as RFC 3339 (a changed condition's lastTransitionTime). Equal to the stored status when the
    controller has nothing to write."""
    old = _dict(budget.get("status"))
    if status.sync_failure:  # failSafe: the old status, but no disruption allowed and why
        condition = _allowed_condition("False", SYNC_FAILED, old.get("observedGeneration"), status.sync_failure)
        return {**old, "disruptionsAllowed": 0,
                "conditions": _with_condition(old.get("conditions"), condition, stamp)}
    generation = budget["metadata"].get("generation")
    allowed = status.disruptions_allowed
    condition = _allowed_condition("True", SUFFICIENT_PODS, generation) if allowed > 0 else \
        _allowed_condition("False", INSUFFICIENT_PODS, generation)
    return _status_object(generation, status.disrupted_pods, allowed, status,
                          _with_condition(old.get("conditions"), condition, stamp))


def evicted_status(budget: Obj, status: BudgetStatus, pod_name: str, stamp: str) -> Obj:
    """The status the eviction handler writes when evicting `pod_name` spends one of `budget`'s
    disruptions (checkAndDecrement): the status it decided on, one disruption fewer, the pod awaited."""
    decided = controller_status(budget, status, stamp)
    allowed = status.disruptions_allowed - 1
    conditions = decided["conditions"]
    if allowed == 0:
        conditions = _with_condition(conditions, _allowed_condition(
            "False", INSUFFICIENT_PODS, decided["observedGeneration"]), stamp)
    return _status_object(decided["observedGeneration"], {**status.disrupted_pods, pod_name: stamp}, allowed,
                          status, conditions)


def with_disruption_target(pod: Obj, stamp: str) -> Obj | None:
    """The pod's status with the condition the eviction handler sets before deleting it (DisruptionTarget
    True, EvictionByEvictionAPI), as podutil.UpdatePodCondition sets it; None if it has it already.
    A DisruptionTarget someone else set (a scheduler's PreemptionByScheduler) is rewritten, as the real
    handler rewrites it, keeping only its transition time."""
    status = _dict(pod.get("status"))
    wanted: Obj = {"type": DISRUPTION_TARGET, "status": "True", "lastProbeTime": None, "lastTransitionTime": "",
                   "reason": EVICTED_BY_EVICTION_API, "message": EVICTION_MESSAGE}
    conditions = _with_condition(status.get("conditions"), wanted, stamp)
    if conditions == status.get("conditions"):
        return None
    return {**status, "conditions": conditions}


def _refusal(name: str, status: BudgetStatus) -> str:
    if status.sync_failure:
        return f"The disruption budget {name} does not allow evicting pods currently because it failed sync: " \
               f"{status.sync_failure}"
    if status.current_healthy <= status.desired_healthy:
        return f"The disruption budget {name} needs {status.desired_healthy} healthy pods and has " \
               f"{status.current_healthy} currently"
    return f"The disruption budget {name} does not allow evicting pods currently"


class SpentDisruption(msgspec.Struct, frozen=True):
    """An eviction that spends one of a budget's disruptions: the budget and the status it was allowed by."""

    budget: Obj
    status: BudgetStatus


def check_eviction(pod: Obj, budgets: list[Obj], pods: Callable[[], list[Obj]], now: float) -> SpentDisruption | None:
    """Raise what the eviction handler answers when `pod` may not be evicted at clock time `now`; return
    the disruption the eviction spends if it may (None: no budget, or an unready pod that spends none).

    `budgets` are the PodDisruptionBudgets of the pod's namespace, `pods()` its pods (listed only when a
    budget selects the pod). The caller has already let a pod that `ignores_budgets` go.
    """
    matching = [budget for budget in budgets if selects(budget, pod)]
    if len(matching) > 1:
        raise errors.multiple_disruption_budgets()
    if not matching:
        return None
    budget = matching[0]
    status = budget_status(budget, pods(), now)
    if not is_ready(pod):
        if (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return None
        if status.current_healthy >= status.desired_healthy > 0:
            return None
    if status.disruptions_allowed < 1:
        raise errors.disruption_budget_refused(_refusal(str(budget["metadata"]["name"]), status))
    return SpentDisruption(budget, status)
