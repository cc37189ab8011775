"""The disruption controller: PodDisruptionBudget status as a client reads it over HTTP and with kubectl."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from devcluster import BackgroundDevCluster, DevCluster
from devcluster.disruption import DELETION_TIMEOUT
from devcluster.store import now_rfc3339

from .kubectl import Kubectl, needs_kubectl
from .storage_api import eventually
from .test_disruption_budgets import budget, evict, running

BUDGETS = "poddisruptionbudgets.policy"
_BUDGET_URL = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


async def _http(cluster: DevCluster, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> dict[str, Any]:
    async with aiohttp.ClientSession(base_url=cluster.url) as http, http.request(
            method, path, data=None if body is None else json.dumps(body),
            headers={"Content-Type": content_type}) as response:
        assert response.status < 300, await response.text()
        answer: dict[str, Any] = await response.json()
        return answer


async def _status(cluster: DevCluster, name: str = "web") -> dict[str, Any]:
    status: dict[str, Any] = (await _http(cluster, "GET", f"{_BUDGET_URL}/{name}/status")).get("status") or {}
    return status


def _counts(status: dict[str, Any]) -> tuple[Any, ...]:
    """(currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed) of a budget's status."""
    return tuple(status.get(field) for field in ("currentHealthy", "desiredHealthy", "expectedPods",
                                                 "disruptionsAllowed"))


async def _settled(cluster: DevCluster, counts: tuple[int, int, int, int], name: str = "web") -> dict[str, Any]:
    """The budget's status once the controller has written `counts`, read over HTTP."""
    await eventually(lambda: _counts(cluster.store.get(BUDGETS, name, "default").get("status") or {}) == counts)
    return await _status(cluster, name)


# Three Ready pods and one that is not, all selected.
@pytest.mark.parametrize(("spec", "counts"), [
    ({"minAvailable": 2}, (3, 2, 4, 1)),
    ({"minAvailable": "50%"}, (3, 2, 4, 1)),
    ({"minAvailable": "100%"}, (3, 4, 4, 0)),
    ({"maxUnavailable": 1}, (3, 3, 4, 0)),
    ({"maxUnavailable": "50%"}, (3, 2, 4, 1)),
    ({"maxUnavailable": "30%"}, (3, 2, 4, 1)),  # 30% of 4 rounds up to 2 unavailable
])
async def test_a_created_budget_gets_the_status_the_disruption_controller_computes(
        cluster: DevCluster, spec: dict[str, Any], counts: tuple[int, int, int, int]) -> None:
    cluster.load_objects([running("a"), running("b"), running("c"), running("sick", ready=False),
                          running("other", app="other")])
    await _http(cluster, "POST", _BUDGET_URL, budget("web", **spec))
    status = await _settled(cluster, counts)
    allowed = counts[3] > 0
    stamp = status["conditions"][0]["lastTransitionTime"]
    assert status == {
        "observedGeneration": 1, "disruptionsAllowed": counts[3], "currentHealthy": counts[0],
        "desiredHealthy": counts[1], "expectedPods": counts[2],
        "conditions": [{"type": "DisruptionAllowed", "status": "True" if allowed else "False", "observedGeneration": 1,
                        "lastTransitionTime": stamp, "reason": "SufficientPods" if allowed else "InsufficientPods",
                        "message": ""}]}


async def test_a_budget_created_before_its_pods_follows_them_as_they_come_and_get_ready(cluster: DevCluster) -> None:
    cluster.load_objects([budget("web", minAvailable=1)])
    await _settled(cluster, (0, 1, 0, 0))
    cluster.load_objects([running("a", ready=False), running("b", ready=False)])
    await _settled(cluster, (0, 1, 2, 0))
    for name in ("a", "b"):  # their kubelet reports them Ready
        current = cluster.store.get("pods", name, "default")
        ready = [{**c, "status": "True"} if c["type"] == "Ready" else c for c in current["status"]["conditions"]]
        await _http(cluster, "PATCH", f"/api/v1/namespaces/default/pods/{name}/status",
                    {"status": {"conditions": ready}}, "application/merge-patch+json")
    status = await _settled(cluster, (2, 1, 2, 1))
    assert [(c["status"], c["reason"]) for c in status["conditions"]] == [("True", "SufficientPods")]


async def test_the_status_follows_deletions_and_evictions(cluster: DevCluster) -> None:
    cluster.load_objects([running(name) for name in "abcd"] + [budget("web", minAvailable=2)])
    first = await _settled(cluster, (4, 2, 4, 2))
    assert (await evict(cluster, "a"))[0] == 201
    # Terminating: no longer healthy, still expected (its replacement would be); the eviction is seen.
    after_eviction = await _settled(cluster, (3, 2, 4, 1))
    assert "disruptedPods" not in after_eviction
    assert after_eviction["conditions"] == first["conditions"]  # still allowed: the transition time stays
    await _http(cluster, "DELETE", "/api/v1/namespaces/default/pods/b")  # graceful
    status = await _settled(cluster, (2, 2, 4, 0))
    assert [(c["status"], c["reason"]) for c in status["conditions"]] == [("False", "InsufficientPods")]
    await _http(cluster, "DELETE", "/api/v1/namespaces/default/pods/c", {"gracePeriodSeconds": 0})
    await _settled(cluster, (1, 2, 3, 0))  # gone for good: no longer expected
    cluster.load_objects([running("e")])
    await _settled(cluster, (2, 2, 4, 0))


async def test_a_changed_spec_is_observed_and_an_invalid_one_fails_the_sync(cluster: DevCluster) -> None:
    cluster.load_objects([running("a"), running("b"), budget("web", minAvailable=1)])
    await _settled(cluster, (2, 1, 2, 1))
    await _http(cluster, "PATCH", f"{_BUDGET_URL}/web", {"spec": {"minAvailable": 2}}, "application/merge-patch+json")
    status = await _settled(cluster, (2, 2, 2, 0))
    assert status["observedGeneration"] == status["conditions"][0]["observedGeneration"] == 2
    # A string that is not a percentage (kube-apiserver's validation refuses it; devcluster's stores it): the
    # controller's failSafe keeps the rest of the status and allows nothing.
    cluster.load_objects([budget("broken", minAvailable="2")])
    await eventually(lambda: bool(cluster.store.get(BUDGETS, "broken", "default").get("status") or {}))
    broken = await _status(cluster, "broken")
    assert broken == {"disruptionsAllowed": 0, "conditions": [{
        "type": "DisruptionAllowed", "status": "False", "lastTransitionTime": broken["conditions"][0][
            "lastTransitionTime"], "reason": "SyncFailed",
        "message": "invalid value for IntOrString: invalid type: string is not a percentage"}]}


async def test_nothing_is_rewritten_when_nothing_changed(cluster: DevCluster) -> None:
    controller = cluster.disruption
    assert controller is not None
    cluster.load_objects([running("a"), running("b"), budget("web", minAvailable=1),
                          running("x", namespace="elsewhere")])
    await _settled(cluster, (2, 1, 2, 1))
    await eventually(lambda: controller.syncs >= 2)  # its own write seen, and found nothing to do
    writes, syncs = controller.writes, controller.syncs
    # Changes no status depends on: a pod's annotation, a pod of a namespace without budgets.
    await _http(cluster, "PATCH", "/api/v1/namespaces/default/pods/a", {"metadata": {"annotations": {"k": "v"}}},
                "application/merge-patch+json")
    await _http(cluster, "PATCH", "/api/v1/namespaces/elsewhere/pods/x", {"metadata": {"labels": {"app": "web"}}},
                "application/merge-patch+json")
    # A change of the budget that its status does not follow: synced once, not written.
    touched = await _http(cluster, "PATCH", f"{_BUDGET_URL}/web", {"metadata": {"annotations": {"k": "v"}}},
                          "application/merge-patch+json")
    await eventually(lambda: controller.syncs > syncs)
    assert (controller.syncs, controller.writes) == (syncs + 1, writes)
    assert cluster.store.get(BUDGETS, "web", "default")["metadata"]["resourceVersion"] == \
        touched["metadata"]["resourceVersion"]


async def test_a_client_written_disrupted_pod_is_awaited_until_its_timeout_then_dropped(cluster: DevCluster) -> None:
    cluster.load_objects([running("a"), running("b"), running("c"), budget("web", minAvailable=2)])
    await _settled(cluster, (3, 2, 3, 1))
    current = cluster.store.get(BUDGETS, "web", "default")
    # "a": evicted long ago and never deleted; "b": evicted just under the timeout ago (3 s under it: a
    # loaded machine may take a second before the controller looks, and "b" must still be awaited then).
    disrupted = {"a": now_rfc3339(lambda: time.time() - DELETION_TIMEOUT - 60),
                 "b": now_rfc3339(lambda: time.time() - DELETION_TIMEOUT + 3)}
    await _http(cluster, "PUT", f"{_BUDGET_URL}/web/status",
                {**current, "status": {**current["status"], "disruptedPods": disrupted}})
    status = await _settled(cluster, (2, 2, 3, 0))
    assert status["disruptedPods"] == {"b": disrupted["b"]}
    status = await _settled(cluster, (3, 2, 3, 1))  # the controller looks again once "b" times out
    assert "disruptedPods" not in status


async def test_a_namespace_without_budgets_costs_no_sync(cluster: DevCluster) -> None:
    controller = cluster.disruption
    assert controller is not None
    cluster.load_objects([running(f"p{index}", namespace="busy") for index in range(20)])
    await _http(cluster, "DELETE", "/api/v1/namespaces/busy/pods/p0", {"gracePeriodSeconds": 0})
    cluster.load_objects([budget("web", minAvailable=1)])
    await _settled(cluster, (0, 1, 0, 0))
    assert controller.syncs <= 2  # the budget's own (and the one its status write causes)


async def test_without_the_controller_no_status_is_written() -> None:
    async with DevCluster(port=0, kubelet_delay=0.01, disruption=False) as cluster:
        assert cluster.disruption is None
        cluster.load_objects([running("a"), budget("web", minAvailable=1)])
        await _http(cluster, "PATCH", f"{_BUDGET_URL}/web", {"metadata": {"labels": {"k": "v"}}},
                    "application/merge-patch+json")
        assert await _status(cluster) == {}


# --------------------------------------------------------------------------- kubectl


def _evict_over_http(url: str, namespace: str, name: str) -> int:
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": name, "namespace": namespace}}).encode()
    request = urllib.request.Request(f"{url}/api/v1/namespaces/{namespace}/pods/{name}/eviction", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(response.status)


def _until(check: Any, seconds: float = 10.0) -> str:
    deadline = time.monotonic() + seconds
    while True:
        value, done = check()
        if done:
            return str(value)
        assert time.monotonic() < deadline, f"not reached before the deadline: {value!r}"
        time.sleep(0.05)


@needs_kubectl
def test_kubectl_shows_the_allowed_disruptions_and_the_evicted_pods_condition(
        background: tuple[BackgroundDevCluster, Kubectl], tmp_path: Path) -> None:
    cluster, kubectl = background
    namespace = "pdb-kubectl"
    objects = [running(name, namespace=namespace) for name in ("a", "b", "c")]
    for obj in objects:
        obj.pop("status", None)  # created as a client would: the fake kubelet starts them Ready
    objects.append(budget("web", namespace=namespace, maxUnavailable="34%"))
    manifest = tmp_path / "web.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), encoding="utf-8")
    kubectl.run("apply", "-f", str(manifest))

    def allowed() -> tuple[str, bool]:
        listed = kubectl.run("get", "pdb", "web", "-n", namespace).stdout
        return listed, listed.split("\n")[1].split()[1:4] == ["N/A", "34%", "2"]

    listed = _until(allowed)
    assert listed.split("\n")[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED",
                                             "DISRUPTIONS", "AGE"]
    assert _evict_over_http(cluster.url, namespace, "a") == 201
    reason = kubectl.run("get", "pod", "a", "-n", namespace, "-o",
                         'jsonpath={.status.conditions[?(@.type=="DisruptionTarget")].reason}').stdout
    assert reason == "EvictionByEvictionAPI"
    _until(lambda: (out := kubectl.run("get", "pdb", "web", "-n", namespace, "-o",
                                       "jsonpath={.status.disruptionsAllowed} {.status.currentHealthy}").stdout,
                    out == "1 2"))


async def test_a_create_or_update_cannot_write_a_budgets_status_the_controller_writes_it(cluster: DevCluster) -> None:
    created = await _http(cluster, "POST", _BUDGET_URL, {**budget("web", minAvailable=1),
                                                         "status": {"disruptionsAllowed": 7}})
    assert "status" not in created
    status = await _settled(cluster, (0, 1, 0, 0))
    replaced = await _http(cluster, "PUT", f"{_BUDGET_URL}/web", {
        **cluster.store.get(BUDGETS, "web", "default"), "status": {"disruptionsAllowed": 9}})
    assert replaced["status"] == status
