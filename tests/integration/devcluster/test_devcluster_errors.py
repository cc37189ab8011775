"""Bad requests get the Status a real API server answers; patches, discovery and OpenAPI over plain HTTP."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from devcluster import DevCluster

from .manifests import pod

PODS = "/api/v1/namespaces/default/pods"


async def call(http: aiohttp.ClientSession, method: str, path: str, body: Any = None, *,
               raw: bytes | None = None, content_type: str = "application/json") -> tuple[int, Any, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    async with http.request(method, path, data=data, headers={"Content-Type": content_type}) as response:
        return response.status, await response.json(content_type=None), response.headers


def assert_status(body: dict[str, Any], code: int, reason: str) -> None:
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert (body["code"], body["reason"]) == (code, reason)
    assert body["message"]


async def test_unknown_object_and_unknown_path_are_404(http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(http, "GET", f"{PODS}/missing")
    assert status == 404
    assert_status(body, 404, "NotFound")
    assert body["message"] == 'pods "missing" not found'
    assert body["details"] == {"name": "missing", "kind": "pods"}
    status, body, _ = await call(http, "GET", "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/default/podgroups/x")
    assert status == 404 and body["message"] == 'podgroups.scheduling.sigs.k8s.io "x" not found'
    for path in ("/api/v1/widgets", "/apis/nope.example.com/v1", "/nothing/here", "/api/v1/nodes/n1/binding"):
        status, body, _ = await call(http, "GET", path)
        assert status == 404, path
        assert_status(body, 404, "NotFound")


async def test_creating_an_existing_object_is_409_already_exists(http: aiohttp.ClientSession) -> None:
    assert (await call(http, "POST", PODS, pod("p1")))[0] == 201
    status, body, _ = await call(http, "POST", PODS, pod("p1"))
    assert status == 409
    assert_status(body, 409, "AlreadyExists")


async def test_stale_update_is_409_conflict(http: aiohttp.ClientSession) -> None:
    _, created, _ = await call(http, "POST", PODS, pod("p1"))
    created["metadata"]["labels"] = {"v": "2"}
    status, updated, _ = await call(http, "PUT", f"{PODS}/p1", created)
    assert status == 200 and updated["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    status, body, _ = await call(http, "PUT", f"{PODS}/p1", created)
    assert status == 409
    assert_status(body, 409, "Conflict")
    status, body, _ = await call(http, "PATCH", f"{PODS}/p1", {"metadata": {"resourceVersion": "1", "labels": {}}},
                                 content_type="application/merge-patch+json")
    assert status == 409


async def test_unknown_field_is_422_with_strict_validation_and_dropped_with_a_warning_otherwise(
        cluster: DevCluster, http: aiohttp.ClientSession) -> None:
    manifest = pod("p1")
    manifest["spec"]["nodeNmae"] = "n1"
    status, body, _ = await call(http, "POST", f"{PODS}?fieldValidation=Strict", manifest)
    assert status == 422
    assert_status(body, 422, "Invalid")
    assert 'unknown field "spec.nodeNmae"' in body["message"]
    assert body["details"]["causes"][0]["field"] == "spec.nodeNmae"
    status, created, headers = await call(http, "POST", PODS, manifest)
    assert status == 201 and "nodeNmae" not in created["spec"]
    assert "spec.nodeNmae" in headers["Warning"]
    status, body, _ = await call(http, "PATCH", f"{PODS}/p1?fieldValidation=Strict", {"spec": {"bogus": 1}},
                                 content_type="application/strategic-merge-patch+json")
    assert status == 422 and "spec.bogus" in body["message"]
    assert "bogus" not in cluster.store.get("pods", "p1", "default")["spec"]


async def test_missing_required_fields_are_422(http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(http, "POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                                     "spec": {"containers": []}})
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.containers"
    status, body, _ = await call(http, "POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {},
                                                     "spec": {"containers": [{"name": "c"}]}})
    assert status == 422 and "metadata.name" in body["message"]
    status, body, _ = await call(http, "POST", PODS, {**pod("Bad_Name")})
    assert status == 422 and "RFC 1123" in body["message"]


async def test_malformed_json_and_wrong_types_are_400(http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(http, "POST", PODS, raw=b'{"apiVersion": "v1", "kind": ')
    assert status == 400
    assert_status(body, 400, "BadRequest")
    manifest = pod("p1")
    manifest["spec"]["priority"] = "high"
    status, body, _ = await call(http, "POST", PODS, manifest)
    assert status == 400 and "spec.priority" in body["message"]
    status, body, _ = await call(http, "GET", "/api/v1/pods?labelSelector=a%20in%20(b")
    assert status == 400
    status, body, _ = await call(http, "GET", "/api/v1/pods?fieldSelector=spec.unknownField%3Dx")
    assert status == 400 and "field label not supported" in body["message"]


async def test_unsupported_methods_are_405_and_unknown_patch_types_415(http: aiohttp.ClientSession) -> None:
    await call(http, "POST", PODS, pod("p1"))
    for method, path in (("PUT", PODS), ("PATCH", PODS), ("POST", f"{PODS}/p1"), ("GET", f"{PODS}/p1/binding"),
                         ("POST", "/api/v1"), ("DELETE", "/version")):
        status, body, _ = await call(http, method, path, {})
        assert status == 405, (method, path)
        assert_status(body, 405, "MethodNotAllowed")
    status, body, _ = await call(http, "PATCH", f"{PODS}/p1", {}, content_type="text/plain")
    assert status == 415
    status, body, _ = await call(http, "PATCH", "/apis/topology.volcano.sh/v1alpha1/hypernodes/h", {},
                                 content_type="application/strategic-merge-patch+json")
    assert status == 415  # custom resources take no strategic merge patch, and the answer says what they take
    assert body["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml "
        '(got "application/strategic-merge-patch+json")')


async def test_a_create_body_may_be_yaml(http: aiohttp.ClientSession) -> None:
    status, created, _ = await call(http, "POST", PODS, raw=(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: yaml-body}\n"
        b"spec: {containers: [{name: main, image: busybox}]}\n"), content_type="application/yaml")
    assert status == 201 and created["metadata"]["name"] == "yaml-body"


async def test_patch_formats_apply_like_the_real_server(cluster: DevCluster, http: aiohttp.ClientSession) -> None:
    await call(http, "POST", PODS, pod("p1"))
    status, patched, _ = await call(http, "PATCH", f"{PODS}/p1", [
        {"op": "add", "path": "/metadata/labels/extra", "value": "yes"},
        {"op": "test", "path": "/metadata/labels/app", "value": "p1"},
        {"op": "remove", "path": "/metadata/labels/app"},
    ], content_type="application/json-patch+json")
    assert status == 200 and patched["metadata"]["labels"] == {"extra": "yes"}
    status, _body, _ = await call(http, "PATCH", f"{PODS}/p1", [{"op": "test", "path": "/spec/nodeName", "value": "x"}],
                                 content_type="application/json-patch+json")
    assert status == 422
    status, patched, _ = await call(http, "PATCH", f"{PODS}/p1/status", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False"}, {"type": "Custom", "status": "True"}]}},
        content_type="application/strategic-merge-patch+json")
    assert [c["type"] for c in patched["status"]["conditions"]] == ["PodScheduled", "Custom"]
    status, patched, _ = await call(http, "PATCH", f"{PODS}/p1/status", {"status": {"conditions": [
        {"type": "Custom", "$patch": "delete"}]}}, content_type="application/strategic-merge-patch+json")
    assert [c["type"] for c in patched["status"]["conditions"]] == ["PodScheduled"]
    status, body, _ = await call(http, "PATCH", f"{PODS}/p1", {"spec": {"nodeName": "n1"}},
                                 content_type="application/merge-patch+json")
    assert status == 422 and "pod updates may not change fields" in body["message"]
    before = cluster.store.resource_version
    status, _same, _ = await call(http, "PATCH", f"{PODS}/p1", {"metadata": {"labels": {"extra": "yes"}}},
                                 content_type="application/merge-patch+json")
    assert status == 200 and cluster.store.resource_version == before


async def test_deleting_a_namespace_deletes_its_objects(cluster: DevCluster, http: aiohttp.ClientSession) -> None:
    cluster.store.create(pod("p1", "team"))
    status, _, _ = await call(http, "DELETE", "/api/v1/namespaces/team")
    assert status == 200
    assert cluster.store.find("namespaces", "team") is None
    assert cluster.store.list("pods", "team") == []


async def test_discovery_and_openapi_advertise_server_side_field_validation(http: aiohttp.ClientSession) -> None:
    status, groups, _ = await call(http, "GET", "/apis")
    assert {g["name"] for g in groups["groups"]} >= {"coordination.k8s.io", "topology.volcano.sh",
                                                     "scheduling.koordinator.sh", "scheduling.volcano.sh"}
    status, core, _ = await call(http, "GET", "/api/v1")
    names = {r["name"] for r in core["resources"]}
    assert {"pods", "pods/binding", "pods/eviction", "pods/status", "nodes", "namespaces", "events"} <= names
    status, root, _ = await call(http, "GET", "/openapi/v3")
    url = root["paths"]["apis/topology.volcano.sh/v1alpha1"]["serverRelativeURL"]
    status, document, _ = await call(http, "GET", url)
    assert status == 200
    patch = document["paths"]["/apis/topology.volcano.sh/v1alpha1/hypernodes/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "HyperNode"
    assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in patch["parameters"])
    accept = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"}
    async with http.get("/apis", headers=accept) as response:
        assert "as=APIGroupDiscoveryList" in response.headers["Content-Type"]
        aggregated = await response.json(content_type=None)
    hypernodes = next(i for i in aggregated["items"] if i["metadata"]["name"] == "topology.volcano.sh")
    resource = hypernodes["versions"][0]["resources"][0]
    assert (resource["resource"], resource["scope"]) == ("hypernodes", "Cluster")
    assert resource["subresources"][0]["subresource"] == "status"
    status, version, _ = await call(http, "GET", "/version")
    assert status == 200
    assert version["major"] == "1"


async def test_dry_run_validates_without_storing(cluster: DevCluster, http: aiohttp.ClientSession) -> None:
    before = cluster.store.resource_version
    status, created, _ = await call(http, "POST", f"{PODS}?dryRun=All", pod("p1"))
    assert status == 201 and created["metadata"]["name"] == "p1"
    assert cluster.store.find("pods", "p1", "default") is None
    cluster.store.create(pod("p1"))
    before = cluster.store.resource_version
    status, patched, _ = await call(http, "PATCH", f"{PODS}/p1?dryRun=All", {"metadata": {"labels": {"x": "1"}}},
                                    content_type="application/merge-patch+json")
    assert status == 200 and patched["metadata"]["labels"]["x"] == "1"
    status, _, _ = await call(http, "DELETE", f"{PODS}/p1?dryRun=All")
    assert status == 200
    assert cluster.store.resource_version == before
    assert "x" not in cluster.store.get("pods", "p1", "default")["metadata"]["labels"]


async def test_the_default_namespace_cannot_be_deleted(http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(http, "DELETE", "/api/v1/namespaces/default")
    assert status == 403
    assert_status(body, 403, "Forbidden")


async def test_an_oversized_body_is_a_413_status_not_a_dropped_connection(http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(http, "POST", PODS, raw=b" " * (4 * 1024 * 1024))
    assert status == 413
    assert_status(body, 413, "RequestEntityTooLarge")


async def test_tables_answer_kubectl_get_with_the_requested_row_objects(cluster: DevCluster,
                                                                         http: aiohttp.ClientSession) -> None:
    cluster.load_objects([pod("p1", nodeName="n1")])
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    async with http.get("/api/v1/pods?includeObject=Object", headers=accept) as response:
        table = await response.json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:3] == ["Name", "Ready", "Status"]
    assert table["rows"][0]["cells"][:3] == ["p1", "1/1", "Running"]
    assert table["rows"][0]["object"]["kind"] == "Pod"
    async with http.get("/api/v1/pods", headers=accept) as response:
        assert (await response.json())["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_malformed_delete_options_are_400_not_500(cluster: DevCluster, http: aiohttp.ClientSession) -> None:
    cluster.store.create(pod("p1"))
    status, body, _ = await call(http, "DELETE", f"{PODS}/p1", {"gracePeriodSeconds": "soon"})
    assert status == 400 and "gracePeriodSeconds" in body["message"]
    status, body, _ = await call(http, "POST", f"{PODS}/p1/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                                      "deleteOptions": {"gracePeriodSeconds": "x"}})
    assert status == 400
    status, body, _ = await call(http, "DELETE", f"{PODS}/p1?gracePeriodSeconds=-1")
    assert status == 422
    assert cluster.store.find("pods", "p1", "default") is not None
