"""The eviction subresource under policy/v1 PodDisruptionBudgets, over HTTP, as kube-apiserver answers it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from devcluster import DevCluster
from devcluster.disruption import DELETION_TIMEOUT
from devcluster.store import now_rfc3339

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


# --------------------------------------------------------------------------- what an eviction writes

async def _watch_pod(cluster: DevCluster, name: str, since: str, until: Callable[[dict[str, Any]], bool]
                     ) -> list[tuple[str, dict[str, Any]]]:
    """The watch events of pod `name` after resourceVersion `since`, read over HTTP until `until(event)`."""
    seen: list[tuple[str, dict[str, Any]]] = []
    async with aiohttp.ClientSession(base_url=cluster.url) as http, http.get(
            "/api/v1/namespaces/default/pods", params={"watch": "1", "resourceVersion": since,
                                                      "fieldSelector": f"metadata.name={name}",
                                                      "timeoutSeconds": "5"}) as response:
        async for line in response.content:
            event = json.loads(line)
            seen.append((event["type"], event["object"]))
            if until(event):
                break
    return seen


def _disruption_target(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"), None)


@pytest.mark.parametrize(("name", "under_budget"), [("a", True), ("a", False), ("unbound", True)])
async def test_an_evicted_pod_is_marked_as_a_disruption_target_before_it_is_deleted(
        cluster: DevCluster, name: str, under_budget: bool) -> None:
    unbound = pod("unbound")
    unbound["metadata"]["labels"] = {"app": "web"}
    cluster.load_objects([running("a"), running("b"), unbound] + ([budget("web", maxUnavailable=2)]
                                                                  if under_budget else []))
    since = str(cluster.store.resource_version)
    assert (await evict(cluster, name))[0] == 201
    events = await _watch_pod(cluster, name, since, lambda e: e["type"] == "DELETED"
                              or bool(e["object"]["metadata"].get("deletionTimestamp")))
    (first_type, marked), (_, deleted) = events[0], events[-1]
    assert first_type == "MODIFIED" and not marked["metadata"].get("deletionTimestamp")
    condition = _disruption_target(marked)
    assert condition is not None
    assert condition == {"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                         "lastTransitionTime": condition["lastTransitionTime"], "reason": "EvictionByEvictionAPI",
                         "message": "Eviction API: evicting"}
    assert _disruption_target(deleted) == condition  # a bound pod terminating, an unbound one gone at once


async def test_a_refused_eviction_leaves_the_pod_unmarked(cluster: DevCluster) -> None:
    cluster.load_objects([running("a"), budget("web", minAvailable=1)])
    assert (await evict(cluster, "a"))[0] == 429
    assert _disruption_target(cluster.store.get("pods", "a", "default")) is None


@pytest.fixture
async def without_controller() -> AsyncIterator[DevCluster]:
    """A cluster whose budgets' status only the eviction handler writes."""
    async with DevCluster(port=0, history=1000, kubelet_delay=0.01, disruption=False) as started:
        yield started


async def _budget_status(cluster: DevCluster, name: str = "web") -> dict[str, Any]:
    async with aiohttp.ClientSession(base_url=cluster.url) as http, http.get(
            f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{name}/status") as response:
        assert response.status == 200
        status: dict[str, Any] = (await response.json()).get("status") or {}
        return status


async def test_an_eviction_that_spends_a_disruption_writes_the_handlers_bookkeeping(
        without_controller: DevCluster) -> None:
    cluster = without_controller
    cluster.load_objects([running("a"), running("b"), running("c"), budget("web", minAvailable=1)])
    assert await _budget_status(cluster) == {}  # no controller
    assert (await evict(cluster, "a"))[0] == 201
    status = await _budget_status(cluster)
    evicted_at = status["disruptedPods"]["a"]
    assert evicted_at == status["conditions"][0]["lastTransitionTime"]
    # The status the handler decided on (3 healthy of 3, 1 wanted), one disruption spent.
    assert status == {"observedGeneration": 1, "disruptedPods": {"a": evicted_at}, "disruptionsAllowed": 1,
                      "currentHealthy": 3, "desiredHealthy": 1, "expectedPods": 3,
                      "conditions": [{"type": "DisruptionAllowed", "status": "True", "observedGeneration": 1,
                                      "lastTransitionTime": evicted_at, "reason": "SufficientPods", "message": ""}]}
    assert (await evict(cluster, "b"))[0] == 201
    status = await _budget_status(cluster)
    # "a" is being deleted: out of the map the handler read; the last disruption spent turns the condition.
    assert set(status["disruptedPods"]) == {"b"}
    assert (status["disruptionsAllowed"], status["currentHealthy"]) == (0, 2)
    assert [(c["status"], c["reason"]) for c in status["conditions"]] == [("False", "InsufficientPods")]


async def test_an_unready_pod_evicted_under_a_healthy_budget_spends_no_disruption(
        without_controller: DevCluster) -> None:
    cluster = without_controller
    cluster.load_objects([running("a"), running("b"), running("sick", ready=False), budget("web", minAvailable=1)])
    assert (await evict(cluster, "sick"))[0] == 201
    assert await _budget_status(cluster) == {}
    assert _disruption_target(cluster.store.get("pods", "sick", "default")) is not None


async def _put_disrupted(cluster: DevCluster, disrupted: dict[str, str]) -> None:
    current = cluster.store.get("poddisruptionbudgets.policy", "web", "default")
    body = {**current, "status": {**(current.get("status") or {}), "disruptedPods": disrupted}}
    async with aiohttp.ClientSession(base_url=cluster.url) as http, http.put(
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web/status", json=body) as response:
        assert response.status == 200, await response.text()


@pytest.mark.parametrize(("age", "expected"), [(60, 429), (DELETION_TIMEOUT + 60, 201)])
async def test_a_pod_awaited_in_disrupted_pods_is_not_healthy_until_its_eviction_times_out(
        without_controller: DevCluster, age: float, expected: int) -> None:
    cluster = without_controller
    cluster.load_objects([running("a"), running("b"), running("c"), budget("web", minAvailable=2)])
    # An eviction of "b" another API server let go and whose deletion has not been seen yet.
    await _put_disrupted(cluster, {"b": now_rfc3339(lambda: time.time() - age)})
    status, body, _ = await evict(cluster, "a")
    assert status == expected
    if expected == 429:
        assert body == refusal("The disruption budget web needs 2 healthy pods and has 2 currently")
