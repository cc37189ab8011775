"""Kubernetes' Workload at the versions of 1.37 (scheduling.k8s.io/v1beta1, v1alpha3), 1.36 (v1alpha2) and 1.35
(v1alpha1): one set of objects stored at v1beta1, read, listed, watched, patched and applied through every
version, converted, with one resourceVersion; validated as each version is. Over plain HTTP (the client has no
Workload API)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from devcluster import DevCluster
from tests.integration.devcluster.http_calls import assert_refused, call, ok, refused_fields

GROUP = "/apis/scheduling.k8s.io"
NAMESPACE = "gangs"
VIEWS = ("v1alpha3", "v1alpha2", "v1alpha1")


def workloads(version: str, name: str = "") -> str:
    path = f"{GROUP}/{version}/namespaces/{NAMESPACE}/workloads"
    return f"{path}/{name}" if name else path


def template(name: str = "workers", **fields: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": 4}}, **fields}


def workload(version: str = "v1beta1", name: str = "train", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "Workload",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec or {"podGroupTemplates": [template()]}}


# --------------------------------------------------------------------------- one object, four versions


async def test_a_v1beta1_workload_reads_at_every_version_converted(cluster: DevCluster,
                                                                   http: aiohttp.ClientSession) -> None:
    created = await ok(http, "POST", workloads("v1beta1"), workload(
        controllerRef={"apiGroup": "batch", "kind": "Job", "name": "train"},
        podGroupTemplates=[template(disruptionMode={"all": {}}, preemptionPolicy="Never",
                                    schedulingConstraints={"topology": [{"key": "topology.k8s.io/rack"}]}),
                           template("driver", schedulingPolicy={"basic": {}})]))
    seen = {version: await ok(http, "GET", workloads(version, "train")) for version in VIEWS}
    assert seen["v1alpha3"]["spec"] == created["spec"]
    assert seen["v1alpha2"]["spec"]["podGroupTemplates"] == [
        template(disruptionMode="PodGroup", schedulingConstraints={"topology": [{"key": "topology.k8s.io/rack"}]}),
        template("driver", schedulingPolicy={"basic": {}})]  # no preemptionPolicy at v1alpha2
    assert seen["v1alpha1"]["spec"] == {
        "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
        "podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}},
                      {"name": "driver", "policy": {"basic": {}}}]}
    for version, view in seen.items():
        assert view["apiVersion"] == f"scheduling.k8s.io/{version}" and view["kind"] == "Workload"
        assert view["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        assert view["metadata"]["uid"] == created["metadata"]["uid"]
        listed = await ok(http, "GET", workloads(version))
        assert listed["kind"] == "WorkloadList" and [i["metadata"]["name"] for i in listed["items"]] == ["train"]
    assert cluster.store.count("workloads.scheduling.k8s.io") == 1


async def test_a_v1alpha1_workload_reads_at_v1beta1_and_back(http: aiohttp.ClientSession) -> None:
    await ok(http, "POST", workloads("v1alpha1"), workload("v1alpha1", podGroups=[
        {"name": "workers", "policy": {"gang": {"minCount": 3}}}]))
    beta = await ok(http, "GET", workloads("v1beta1", "train"))
    assert beta["spec"] == {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}]}
    await ok(http, "POST", workloads("v1alpha2"), workload("v1alpha2", "other", podGroupTemplates=[
        template(disruptionMode="Pod")]))
    beta = await ok(http, "GET", workloads("v1beta1", "other"))
    assert beta["spec"]["podGroupTemplates"][0]["disruptionMode"] == {"single": {}}
    alpha1 = await ok(http, "GET", workloads("v1alpha1", "other"))
    assert alpha1["spec"] == {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}}]}
    await ok(http, "DELETE", workloads("v1alpha1", "other"))
    assert (await call(http, "GET", workloads("v1beta1", "other")))[0] == 404


async def test_a_watch_at_v1alpha1_sees_a_workload_written_at_v1beta1(http: aiohttp.ClientSession) -> None:
    since = (await ok(http, "GET", workloads("v1alpha1")))["metadata"]["resourceVersion"]
    created = await ok(http, "POST", workloads("v1beta1"), workload())
    async with http.get(workloads("v1alpha1"), params={"watch": "1", "resourceVersion": since,
                                                       "timeoutSeconds": "5"}) as response:
        line = await response.content.readline()
    event = json.loads(line)
    assert event["type"] == "ADDED"
    assert event["object"]["apiVersion"] == "scheduling.k8s.io/v1alpha1"
    assert event["object"]["spec"]["podGroups"] == [{"name": "workers", "policy": {"gang": {"minCount": 4}}}]
    assert event["object"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_write_through_an_older_version_keeps_what_only_v1beta1_shows(http: aiohttp.ClientSession) -> None:
    await ok(http, "POST", workloads("v1beta1"), workload(podGroupTemplates=[
        template(preemptionPolicy="Never", disruptionMode={"all": {}}, priorityClassName="high")]))
    for version in ("v1alpha1", "v1alpha2"):
        patched = await ok(http, "PATCH", workloads(version, "train"), {"metadata": {"labels": {"seen": version}}},
                           content_type="application/strategic-merge-patch+json")
        assert patched["metadata"]["labels"] == {"seen": version}
        beta = await ok(http, "GET", workloads("v1beta1", "train"))
        assert beta["spec"]["podGroupTemplates"] == [
            template(preemptionPolicy="Never", disruptionMode={"all": {}}, priorityClassName="high")]
        replaced = await ok(http, "PUT", workloads(version, "train"), patched)  # a no-op update: nothing new
        assert replaced["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


async def test_server_side_apply_through_v1alpha2_then_v1beta1(http: aiohttp.ClientSession) -> None:
    applied = workload("v1alpha2", podGroupTemplates=[template(disruptionMode="Pod")])
    status, created = await call(http, "PATCH", workloads("v1alpha2", "train") + "?fieldManager=tester", applied,
                                 content_type="application/apply-patch+yaml")
    assert status == 201, created
    assert created["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    again = await ok(http, "PATCH", workloads("v1alpha2", "train") + "?fieldManager=tester", applied,
                     content_type="application/apply-patch+yaml")
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    scaled = workload(podGroupTemplates=[template(disruptionMode={"single": {}},
                                                  schedulingPolicy={"gang": {"minCount": 6}})])
    beta = await ok(http, "PATCH", workloads("v1beta1", "train") + "?fieldManager=tester&force=true", scaled,
                    content_type="application/apply-patch+yaml")
    assert beta["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 6}}
    assert (await ok(http, "GET", workloads("v1alpha1", "train")))["spec"]["podGroups"][0]["policy"] == {
        "gang": {"minCount": 6}}


async def test_an_unknown_field_is_refused_at_v1beta1(http: aiohttp.ClientSession) -> None:
    body = workload(podGroupTemplates=[template(minMember=3)])
    status, answer = await call(http, "POST", workloads("v1beta1") + "?fieldValidation=Strict", body)
    assert status in (400, 422), answer
    assert "minMember" in answer["message"]


# --------------------------------------------------------------------------- validation


async def test_min_count_may_change_at_v1beta1_but_not_at_the_older_versions(http: aiohttp.ClientSession) -> None:
    await ok(http, "POST", workloads("v1beta1"), workload())
    scaled = await ok(http, "PATCH", workloads("v1beta1", "train"),
                      {"spec": {"podGroupTemplates": [template(schedulingPolicy={"gang": {"minCount": 8}})]}},
                      content_type="application/merge-patch+json")
    assert scaled["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 8}}
    status, answer = await call(http, "PATCH", workloads("v1alpha2", "train"),
                                {"spec": {"podGroupTemplates": [template()]}},
                                content_type="application/merge-patch+json")
    assert status == 422 and refused_fields(answer) == ["spec.podGroupTemplates"]
    status, answer = await call(http, "PATCH", workloads("v1alpha1", "train"),
                                {"spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]}},
                                content_type="application/merge-patch+json")
    assert status == 422 and refused_fields(answer) == ["spec.podGroups"]


@pytest.mark.parametrize(("templates", "field"), [
    ([template(), template("driver")], "spec.podGroupTemplates[1]"),
    ([], "spec.podGroupTemplates"),
    ([template(schedulingPolicy={"basic": {}})], "spec.podGroupTemplates[0].schedulingPolicy"),
    ([template(disruptionMode={"single": {}})], "spec.podGroupTemplates[0].disruptionMode"),
    ([template(priorityClassName="high")], "spec.podGroupTemplates[0].priorityClassName"),
])
async def test_a_v1beta1_update_that_adds_removes_or_changes_a_template_is_refused(
        http: aiohttp.ClientSession, templates: list[dict[str, Any]], field: str) -> None:
    await ok(http, "POST", workloads("v1beta1"), workload())
    status, answer = await call(http, "PATCH", workloads("v1beta1", "train"),
                                {"spec": {"podGroupTemplates": templates}},
                                content_type="application/merge-patch+json")
    assert status == 422 and field in refused_fields(answer), answer


@pytest.mark.parametrize(("spec", "field", "message"), [
    ({"podGroupTemplates": [template("")]}, "spec.podGroupTemplates[0].name", "Required value"),
    ({"podGroupTemplates": [template("Workers")]}, "spec.podGroupTemplates[0].name", "RFC 1123 label"),
    ({"podGroupTemplates": [template(), template()]}, "spec.podGroupTemplates[1]", "Duplicate value"),
    ({"podGroupTemplates": [template(schedulingPolicy={"basic": {}, "gang": {"minCount": 2}})]},
     "spec.podGroupTemplates[0].schedulingPolicy", "exactly one of `basic`, `gang` is required"),
    ({"podGroupTemplates": [template(schedulingPolicy={})]}, "spec.podGroupTemplates[0].schedulingPolicy",
     "must specify one of: `basic`, `gang`"),
    ({"podGroupTemplates": [template(schedulingPolicy={"gang": {"minCount": -1}})]},
     "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount", "must be greater than zero"),
    ({"podGroupTemplates": [template(schedulingConstraints={"topology": [{"key": "rack"}, {"key": "zone"}]})]},
     "spec.podGroupTemplates[0].schedulingConstraints.topology", "must have at most 1 item"),
    ({"podGroupTemplates": [template(disruptionMode={})]}, "spec.podGroupTemplates[0].disruptionMode",
     "must specify one of: `single`, `all`"),
    ({"podGroupTemplates": [template(f"group-{i}") for i in range(9)]}, "spec.podGroupTemplates",
     "must have at most 8 items"),
    ({"controllerRef": {"kind": "Job"}}, "spec", "must specify one of: `podGroupTemplates`, "
                                                 "`compositePodGroupTemplates`"),
    ({"podGroupTemplates": [template()], "compositePodGroupTemplates": [{
        "name": "set", "schedulingPolicy": {"basic": {}}, "podGroupTemplates": [template()]}]},
     "spec", "must specify exactly one of"),
    ({"compositePodGroupTemplates": [{"name": "set", "schedulingPolicy": {"basic": {}}}]},
     "spec.compositePodGroupTemplates[0]", "must have at least one child"),
])
@pytest.mark.parametrize("version", ["v1beta1", "v1alpha3"])
async def test_invalid_1_37_workloads_are_refused_naming_the_field(http: aiohttp.ClientSession, version: str,
                                                                   spec: dict[str, Any], field: str,
                                                                   message: str) -> None:
    status, answer = await call(http, "POST", workloads(version), workload(version, **spec))
    assert_refused(status, answer, field, message, "Workload")


async def test_a_v1alpha2_disruption_mode_is_one_of_its_two_strings(http: aiohttp.ClientSession) -> None:
    status, answer = await call(http, "POST", workloads("v1alpha2"), workload(
        "v1alpha2", podGroupTemplates=[template(disruptionMode="Node")]))
    assert status == 422 and refused_fields(answer) == ["spec.podGroupTemplates[0].disruptionMode"]
    assert 'supported values: "Pod", "PodGroup"' in answer["message"]


# --------------------------------------------------------------------------- discovery


async def test_discovery_and_openapi_serve_the_workload_at_every_version(http: aiohttp.ClientSession) -> None:
    for version in ("v1beta1", *VIEWS):
        listing = await ok(http, "GET", f"{GROUP}/{version}")
        (entry,) = [r for r in listing["resources"] if r["name"] == "workloads"]
        assert entry["namespaced"] and entry["kind"] == "Workload"
        document = await ok(http, "GET", f"/openapi/v3/apis/scheduling.k8s.io/{version}")
        schema = document["components"]["schemas"][f"io.k8s.api.scheduling.{version}.Workload"]
        spec = set(schema["properties"]["spec"]["properties"])
        assert spec == ({"controllerRef", "podGroups"} if version == "v1alpha1" else
                        {"controllerRef", "podGroupTemplates"} if version == "v1alpha2" else
                        {"controllerRef", "podGroupTemplates", "compositePodGroupTemplates"})
