"""The pure budget computation of devcluster/disruption.py: awaited evictions, conditions, the pod's mark."""

from __future__ import annotations

from typing import Any

from devcluster import disruption
from devcluster.disruption import DELETION_TIMEOUT

NOW = 1_800_000_000.0
STAMP = "2027-01-15T08:00:00Z"  # NOW as RFC 3339
EARLIER = "2027-01-15T07:59:00Z"


def ready_pod(name: str, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = STAMP
    return {"metadata": meta, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def web_budget(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default", "generation": 3},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}, "status": status or {}}


def test_awaited_evictions_leave_the_healthy_count_until_they_time_out_or_their_pod_is_deleted() -> None:
    awaited = {"a": "2027-01-15T07:59:30Z", "b": "2027-01-15T07:50:00Z", "c": STAMP, "gone": STAMP}
    budget = web_budget({"disruptedPods": awaited}, minAvailable=1)
    pods = [ready_pod("a"), ready_pod("b"), ready_pod("c", deleting=True), ready_pod("d")]
    status = disruption.budget_status(budget, pods, NOW)
    # "a" awaited; "b" timed out; "c" being deleted; "gone" no longer selected.
    assert status.disrupted_pods == {"a": awaited["a"]}
    assert (status.current_healthy, status.expected_pods, status.disruptions_allowed) == (2, 4, 1)
    assert status.recheck_at == NOW - 30 + DELETION_TIMEOUT


def test_the_allowed_condition_keeps_its_transition_time_until_its_status_flips() -> None:
    budget = web_budget(minAvailable=1)
    first = disruption.controller_status(budget, disruption.budget_status(budget, [ready_pod("a"), ready_pod("b")],
                                                                          NOW), EARLIER)
    assert first["conditions"] == [{"type": "DisruptionAllowed", "status": "True", "observedGeneration": 3,
                                    "lastTransitionTime": EARLIER, "reason": "SufficientPods", "message": ""}]
    budget["status"] = first
    same = disruption.controller_status(budget, disruption.budget_status(budget, [ready_pod("a"), ready_pod("b")],
                                                                         NOW), STAMP)
    assert same == first  # nothing to write
    flipped = disruption.controller_status(budget, disruption.budget_status(budget, [ready_pod("a")], NOW), STAMP)
    assert [(c["status"], c["reason"], c["lastTransitionTime"]) for c in flipped["conditions"]] == [
        ("False", "InsufficientPods", STAMP)]


def test_a_failed_sync_keeps_the_old_status_but_allows_nothing() -> None:
    old = {"observedGeneration": 2, "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1,
           "expectedPods": 2}
    budget = web_budget(old, minAvailable="two")
    written = disruption.controller_status(budget, disruption.budget_status(budget, [ready_pod("a")], NOW), STAMP)
    assert written == {**old, "disruptionsAllowed": 0, "conditions": [{
        "type": "DisruptionAllowed", "status": "False", "observedGeneration": 2, "lastTransitionTime": STAMP,
        "reason": "SyncFailed", "message": "invalid value for IntOrString: invalid type: string is not a percentage"}]}


def test_the_disruption_target_mark_is_set_once() -> None:
    pod = ready_pod("a")
    marked = disruption.with_disruption_target(pod, EARLIER)
    assert marked is not None and marked["conditions"][-1]["reason"] == "EvictionByEvictionAPI"
    assert disruption.with_disruption_target({**pod, "status": marked}, STAMP) is None


def test_a_pod_already_marked_by_its_preemptor_is_marked_again_by_the_eviction_keeping_the_transition_time(
        ) -> None:
    # The real handler rewrites the condition with its own reason (podutil.UpdatePodCondition): a scheduler
    # that evicts its victims has to write its reason again afterwards (daemon/kube/cluster_api.py does).
    pod = ready_pod("victim")
    pod["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "lastTransitionTime": "T0",
                                        "reason": "PreemptionByScheduler", "message": "preempted"})
    marked = disruption.with_disruption_target(pod, STAMP)
    assert marked is not None
    (target,) = [c for c in marked["conditions"] if c["type"] == "DisruptionTarget"]
    assert (target["reason"], target["message"], target["lastTransitionTime"]) == (
        "EvictionByEvictionAPI", "Eviction API: evicting", "T0")
