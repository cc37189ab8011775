"""Over HTTP, devcluster defaults, admits and validates pods and priority classes as a real API server does."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from devcluster import DevCluster

from .manifests import pod

PODS = "/api/v1/namespaces/default/pods"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
GPU = "nvidia.com/gpu"


async def post(http: aiohttp.ClientSession, path: str, body: Any) -> tuple[int, Any]:
    async with http.post(path, data=json.dumps(body), headers={"Content-Type": "application/json"}) as response:
        return response.status, await response.json(content_type=None)


def gpu_pod(name: str, resources: dict[str, Any], **spec: Any) -> dict[str, Any]:
    manifest = pod(name, **spec)
    manifest["spec"]["containers"][0]["resources"] = resources
    return manifest


async def test_gpu_limits_written_as_a_json_number_become_canonical_requests_and_limits(
        http: aiohttp.ClientSession) -> None:
    status, created = await post(http, PODS, gpu_pod("nvidia", {"limits": {GPU: 8, "memory": 68719476736,
                                                                            "cpu": 0.5}}))
    assert status == 201
    resources = created["spec"]["containers"][0]["resources"]
    limits = {GPU: "8", "memory": "68719476736", "cpu": "500m"}  # a bare number is DecimalSI, never "64Gi"
    assert resources == {"limits": limits, "requests": limits}
    assert (created["spec"]["priority"], created["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    assert created["spec"]["terminationGracePeriodSeconds"] == 30


async def test_refusals_are_statuses_that_name_the_field(http: aiohttp.ClientSession) -> None:
    status, body = await post(http, PODS, gpu_pod("requests-only", {"requests": {GPU: "8"}}))
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"] == [{"reason": "FieldValueRequired",
                                          "field": "spec.containers[0].resources.limits",
                                          "message": "Required value: Limit must be set for non overcommitable "
                                                     "resources"}]
    status, body = await post(http, PODS, gpu_pod("words", {"limits": {GPU: "eight"}}))
    assert (status, body["reason"]) == (400, "BadRequest")
    assert "spec.containers[0].resources.limits[nvidia.com/gpu]: quantities must match" in body["message"]
    labelled = pod("labelled")
    labelled["metadata"]["labels"] = {"job": "j" * 64}
    status, body = await post(http, PODS, labelled)
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.labels"
    assert "must be no more than 63 characters" in body["message"]
    annotated = pod("annotated")
    annotated["metadata"]["annotations"] = {"blob": "x" * (256 * 1024 + 1)}
    status, body = await post(http, PODS, annotated)
    assert status == 422 and body["details"]["causes"][0] == {
        "reason": "FieldValueTooLong", "field": "metadata.annotations",
        "message": "Too long: may not be more than 262144 bytes"}
    async with http.get(f"{PODS}/requests-only") as missing:
        assert missing.status == 404  # nothing refused was stored


async def test_priority_is_resolved_at_admission_and_unknown_classes_are_forbidden(
        http: aiohttp.ClientSession, cluster: DevCluster) -> None:
    status, body = await post(http, PODS, pod("orphan", priorityClassName="gold"))
    assert (status, body["reason"], body["message"]) == (
        403, "Forbidden", 'pods "orphan" is forbidden: no PriorityClass with name gold was found')
    base = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "base"},
            "value": 100, "globalDefault": True}
    assert (await post(http, CLASSES, base))[0] == 201
    status, body = await post(http, CLASSES, {**base, "metadata": {"name": "other"}})
    assert status == 403 and "PriorityClass base is already marked as default" in body["message"]
    status, created = await post(http, PODS, pod("defaulted"))
    assert (created["spec"]["priorityClassName"], created["spec"]["priority"]) == ("base", 100)
    _, critical = await post(http, "/api/v1/namespaces/kube-system/pods",
                             pod("critical", namespace="kube-system", priorityClassName="system-cluster-critical"))
    assert critical["spec"]["priority"] == 2_000_000_000
    assert {"system-node-critical", "system-cluster-critical"} <= set(cluster.store.priority_classes)
