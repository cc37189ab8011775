"""The eviction subresource under policy/v1 PodDisruptionBudgets, over HTTP, as kube-apiserver answers it."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from devcluster import DevCluster

from .manifests import pod

_ANY_SELECTOR: Any = object()


def running(name: str, *, ready: bool = True, app: str = "web", namespace: str = "default") -> dict[str, Any]:
    """A bound pod labelled app=`app`: loaded Running and Ready, or Running with Ready=False."""
    manifest = pod(name, namespace, nodeName="n1")
    manifest["metadata"]["labels"] = {"app": app}
    if not ready:
        manifest["status"] = {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}
    return manifest


def budget(name: str, selector: Any = _ANY_SELECTOR, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget selecting app=web unless told (None: no selector at all)."""
    if selector is _ANY_SELECTOR:
        selector = {"matchLabels": {"app": "web"}}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def evict(cluster: DevCluster, name: str, namespace: str = "default",
                delete_options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any], Any]:
    """POST a policy/v1 Eviction of the pod; (HTTP status, JSON body, headers)."""
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": name, "namespace": namespace}}
    if delete_options is not None:
        body["deleteOptions"] = delete_options
    async with aiohttp.ClientSession(base_url=cluster.url) as http, \
            http.post(f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", json=body) as response:
        return response.status, await response.json(), response.headers


def refusal(cause: str) -> dict[str, Any]:
    """The whole 429 body the eviction handler answers for a budget that allows no disruption now."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests", "details": {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
            "code": 429}


def terminating(cluster: DevCluster, name: str) -> bool:
    found = cluster.store.find("pods", name, "default")
    return found is not None and bool(found["metadata"].get("deletionTimestamp"))


def untouched(cluster: DevCluster, name: str) -> bool:
    found = cluster.store.find("pods", name, "default")
    return found is not None and not found["metadata"].get("deletionTimestamp")


async def test_min_available_refuses_the_eviction_of_the_last_healthy_pods_with_the_handlers_429(
        cluster: DevCluster) -> None:
    cluster.load_objects([running("a"), running("b"), running("c"), budget("web", minAvailable=2)])
    status, body, _ = await evict(cluster, "a")
    assert (status, body["status"]) == (201, "Success")
    assert terminating(cluster, "a")  # its grace period runs; it no longer counts as healthy
    status, body, headers = await evict(cluster, "b")
    assert status == 429
    assert body == refusal("The disruption budget web needs 2 healthy pods and has 2 currently")
    assert "Retry-After" not in headers  # NewTooManyRequests(..., 0): no delay suggested
    assert untouched(cluster, "b") and untouched(cluster, "c")


async def test_two_evictions_at_once_of_the_last_spare_pods_one_goes_one_is_refused(cluster: DevCluster) -> None:
    cluster.load_objects([running("a"), running("b"), running("c"), budget("web", minAvailable=2)])
    answers = await asyncio.gather(evict(cluster, "a"), evict(cluster, "b"))
    assert sorted(status for status, _, _ in answers) == [201, 429]
    assert sum(terminating(cluster, name) for name in ("a", "b")) == 1


async def test_max_unavailable_counts_the_pod_being_evicted_until_it_is_gone(cluster: DevCluster) -> None:
    cluster.load_objects([running(name) for name in "abcd"] + [budget("web", maxUnavailable=1)])
    assert (await evict(cluster, "a"))[0] == 201
    status, body, _ = await evict(cluster, "b")
    assert status == 429
    assert body == refusal("The disruption budget web needs 3 healthy pods and has 3 currently")


@pytest.mark.parametrize(("spec", "allowed", "cause"), [
    ({"minAvailable": "50%"}, 1, "The disruption budget web needs 2 healthy pods and has 2 currently"),
    ({"maxUnavailable": "34%"}, 2, "The disruption budget web needs 1 healthy pods and has 1 currently"),
    ({"maxUnavailable": 0}, 0, "The disruption budget web needs 3 healthy pods and has 3 currently"),
    ({"minAvailable": "100%"}, 0, "The disruption budget web needs 3 healthy pods and has 3 currently"),
    # policy/v1 defaults neither: the controller expects no pods and allows no disruption.
    ({}, 0, "The disruption budget web does not allow evicting pods currently"),
    # Not a percentage (kube-apiserver's validation refuses it at create; devcluster's stores it): the
    # controller's sync fails and allows nothing.
    ({"minAvailable": "2"}, 0, "The disruption budget web does not allow evicting pods currently because it "
                               "failed sync: invalid value for IntOrString: invalid type: string is not a percentage"),
])
async def test_percentages_are_of_the_selected_pods_rounded_up(cluster: DevCluster, spec: dict[str, Any],
                                                                allowed: int, cause: str) -> None:
    cluster.load_objects([running("a"), running("b"), running("c"), budget("web", **spec)])
    names = ["a", "b", "c"]
    for name in names[:allowed]:
        assert (await evict(cluster, name))[0] == 201, name
    status, body, _ = await evict(cluster, names[allowed])
    assert (status, body) == (429, refusal(cause))


async def test_an_empty_selector_selects_every_pod_of_its_namespace_a_missing_one_none(cluster: DevCluster) -> None:
    cluster.load_objects([running("x", app="x"), running("y", app="y"), running("z", app="z", namespace="other"),
                          budget("everything", selector={}, minAvailable=1),
                          budget("nothing", selector=None, namespace="other", minAvailable=1)])
    assert (await evict(cluster, "x"))[0] == 201
    status, body, _ = await evict(cluster, "y")
    assert (status, body) == (429, refusal("The disruption budget everything needs 1 healthy pods and has 1 "
                                           "currently"))
    assert (await evict(cluster, "z", "other"))[0] == 201  # another namespace's budget with no selector


async def test_match_expressions_select_as_label_selectors_do(cluster: DevCluster) -> None:
    selector = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]},
                                     {"key": "canary", "operator": "DoesNotExist"}]}
    canary = running("canary")
    canary["metadata"]["labels"]["canary"] = "true"
    cluster.load_objects([running("a"), running("b", app="api"), canary, budget("web", selector=selector,
                                                                                 minAvailable=2)])
    assert (await evict(cluster, "canary"))[0] == 201  # not selected: no budget
    status, body, _ = await evict(cluster, "b")
    assert (status, body) == (429, refusal("The disruption budget web needs 2 healthy pods and has 2 currently"))


@pytest.mark.parametrize(("min_available", "policy", "expected"), [
    (2, None, 201),  # IfHealthyBudget (the default): the healthy pods meet the budget, the unready one may go
    (2, "IfHealthyBudget", 201),
    (3, None, 429),  # the application is already short of healthy pods: not even an unready one goes
    (3, "AlwaysAllow", 201),
])
async def test_an_unready_pod_goes_if_the_budget_is_met_or_its_policy_always_allows(
        cluster: DevCluster, min_available: int, policy: str | None, expected: int) -> None:
    spec: dict[str, Any] = {"minAvailable": min_available}
    if policy is not None:
        spec["unhealthyPodEvictionPolicy"] = policy
    cluster.load_objects([running("a"), running("b"), running("sick", ready=False), budget("web", **spec)])
    status, body, _ = await evict(cluster, "sick")
    assert status == expected
    if expected == 429:
        assert body == refusal("The disruption budget web needs 3 healthy pods and has 2 currently")
        assert untouched(cluster, "sick")
    else:
        assert terminating(cluster, "sick")


async def test_an_unready_pod_under_a_budget_wanting_no_healthy_pod_needs_a_disruption_allowed(
        cluster: DevCluster) -> None:
    # desiredHealthy 0 takes the unready pod past the IfHealthyBudget shortcut (it wants desiredHealthy > 0),
    # and with no healthy pod there is no disruption to spend.
    cluster.load_objects([running("sick", ready=False), budget("web", maxUnavailable=1)])
    status, body, _ = await evict(cluster, "sick")
    assert (status, body) == (429, refusal("The disruption budget web needs 0 healthy pods and has 0 currently"))


async def test_pending_terminal_and_terminating_pods_are_evicted_whatever_the_budget(cluster: DevCluster) -> None:
    done = running("done")
    done["status"] = {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]}
    unbound = pod("unbound")
    unbound["metadata"]["labels"] = {"app": "web"}
    cluster.load_objects([running("a"), running("leaving"), done, unbound, budget("web", maxUnavailable=0)])
    assert (await evict(cluster, "a"))[0] == 429
    assert cluster.store.get("pods", "unbound", "default")["status"]["phase"] == "Pending"
    assert (await evict(cluster, "unbound"))[0] == 201
    assert cluster.store.find("pods", "unbound", "default") is None  # never scheduled: gone at once
    assert (await evict(cluster, "done"))[0] == 201
    assert cluster.store.find("pods", "done", "default") is None
    cluster.store.delete("pods", "leaving", "default")  # graceful: deletionTimestamp set, still there
    assert terminating(cluster, "leaving")
    assert (await evict(cluster, "leaving", delete_options={"gracePeriodSeconds": 0}))[0] == 201
    assert cluster.store.find("pods", "leaving", "default") is None


async def test_a_pod_under_two_budgets_gets_the_handlers_failure_status_with_the_creates_201(
        cluster: DevCluster) -> None:
    cluster.load_objects([running("a"), running("b"), budget("web", maxUnavailable=1),
                          budget("all", selector={}, maxUnavailable=1)])
    status, body, _ = await evict(cluster, "a")
    # The handler returns this Status as its result, not as an error: written with the create's status.
    assert status == 201
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
                    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                               "does not support."}
    assert untouched(cluster, "a")


async def test_without_a_budget_selecting_it_a_pod_is_evicted(cluster: DevCluster) -> None:
    cluster.load_objects([running("a"), running("other", app="other"), budget("other", {"matchLabels": {
        "app": "other"}}, maxUnavailable=0), budget("elsewhere", selector={}, namespace="other", maxUnavailable=0)])
    status, body, _ = await evict(cluster, "a")
    assert (status, body) == (201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                    "code": 201})
    assert terminating(cluster, "a")


async def test_uid_precondition_is_checked_after_the_budget(cluster: DevCluster) -> None:
    cluster.load_objects([running("a"), running("b"), budget("web", minAvailable=1)])
    wrong = {"preconditions": {"uid": "not-the-uid"}}
    status, body, _ = await evict(cluster, "a", delete_options=wrong)
    uid = cluster.store.get("pods", "a", "default")["metadata"]["uid"]
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (f'Operation cannot be fulfilled on Pod "a": the UID in the precondition (not-the-uid) '
                               f"does not match the UID in record ({uid}). The object might have been deleted and "
                               "then recreated")
    assert untouched(cluster, "a")
    assert (await evict(cluster, "a", delete_options={"preconditions": {"uid": uid}}))[0] == 201
    assert (await evict(cluster, "b", delete_options=wrong))[0] == 429  # the budget answers first


async def test_budgets_are_served_as_policy_v1_only(cluster: DevCluster) -> None:
    async with aiohttp.ClientSession(base_url=cluster.url) as http:
        async with http.get("/apis/policy") as response:
            assert [v["version"] for v in (await response.json())["versions"]] == ["v1"]
        async with http.get("/apis/policy/v1beta1/namespaces/default/poddisruptionbudgets") as response:
            assert response.status == 404
