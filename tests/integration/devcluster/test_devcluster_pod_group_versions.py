"""Kubernetes' PodGroup at the versions of 1.36 (scheduling.k8s.io/v1alpha2) and 1.37 (v1beta1, v1alpha3): one set
of objects, read, listed, watched, patched and applied through every version, converted, with one
resourceVersion; validated and priority-admitted as each version is. Over plain HTTP (the client has no
PodGroup API)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from devcluster import DevCluster
from tests.integration.devcluster.http_calls import assert_refused, call, ok, refused_fields

GROUP = "/apis/scheduling.k8s.io"
NAMESPACE = "gangs"


def pod_groups(version: str, name: str = "") -> str:
    path = f"{GROUP}/{version}/namespaces/{NAMESPACE}/podgroups"
    return f"{path}/{name}" if name else path


def pod_group(version: str, name: str = "train", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}, **spec}}


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, **fields}


# --------------------------------------------------------------------------- one object, three versions


async def test_a_v1beta1_pod_group_reads_at_v1alpha3_and_converted_at_v1alpha2(
        cluster: DevCluster, http: aiohttp.ClientSession) -> None:
    created = await ok(http, "POST", pod_groups("v1beta1"), pod_group(
        "v1beta1", disruptionMode={"all": {}}, workloadRef={"workloadName": "jobset", "templateName": "workers"},
        parentCompositePodGroupName="job", schedulingConstraints={"topology": [{"key": "topology.k8s.io/rack"}]}))
    alpha3 = await ok(http, "GET", pod_groups("v1alpha3", "train"))
    alpha2 = await ok(http, "GET", pod_groups("v1alpha2", "train"))
    assert alpha3["apiVersion"] == "scheduling.k8s.io/v1alpha3" and alpha3["spec"] == created["spec"]
    assert alpha2["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert alpha2["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 4}}, "disruptionMode": "PodGroup",
        "podGroupTemplateRef": {"workload": {"workloadName": "jobset", "podGroupTemplateName": "workers"}},
        "schedulingConstraints": {"topology": [{"key": "topology.k8s.io/rack"}]},
        "priority": 0}  # no preemptionPolicy nor parentCompositePodGroupName at v1alpha2
    assert created["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    for seen in (alpha3, alpha2):
        assert seen["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        assert seen["metadata"]["uid"] == created["metadata"]["uid"]
    assert cluster.store.count("podgroups.scheduling.k8s.io") == 1


async def test_a_v1alpha2_pod_group_reads_converted_at_v1beta1_and_lists_at_every_version(
        http: aiohttp.ClientSession) -> None:
    await ok(http, "POST", pod_groups("v1alpha2"), pod_group(
        "v1alpha2", disruptionMode="Pod",
        podGroupTemplateRef={"workload": {"workloadName": "jobset", "podGroupTemplateName": "workers"}}))
    beta = await ok(http, "GET", pod_groups("v1beta1", "train"))
    assert beta["spec"]["disruptionMode"] == {"single": {}}
    assert beta["spec"]["workloadRef"] == {"workloadName": "jobset", "templateName": "workers"}
    assert "podGroupTemplateRef" not in beta["spec"]
    for version in ("v1beta1", "v1alpha3", "v1alpha2"):
        listed = await ok(http, "GET", pod_groups(version))
        assert listed["apiVersion"] == f"scheduling.k8s.io/{version}" and listed["kind"] == "PodGroupList"
        assert [item["metadata"]["name"] for item in listed["items"]] == ["train"]
    await ok(http, "DELETE", pod_groups("v1alpha3", "train"))
    for version in ("v1beta1", "v1alpha2"):
        assert (await call(http, "GET", pod_groups(version, "train")))[0] == 404


async def test_a_watch_at_v1beta1_sees_a_pod_group_created_at_v1alpha2(http: aiohttp.ClientSession) -> None:
    listed = await ok(http, "GET", pod_groups("v1beta1"))
    since = listed["metadata"]["resourceVersion"]
    created = await ok(http, "POST", pod_groups("v1alpha2"), pod_group("v1alpha2", disruptionMode="PodGroup"))
    async with http.get(pod_groups("v1beta1"), params={"watch": "1", "resourceVersion": since,
                                                      "timeoutSeconds": "5"}) as response:
        line = await response.content.readline()
    event = json.loads(line)
    assert event["type"] == "ADDED"
    seen = event["object"]
    assert seen["apiVersion"] == "scheduling.k8s.io/v1beta1" and seen["spec"]["disruptionMode"] == {"all": {}}
    assert seen["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_status_patch_through_v1beta1_is_the_status_every_version_reads(
        http: aiohttp.ClientSession) -> None:
    await ok(http, "POST", pod_groups("v1alpha2"), pod_group("v1alpha2"))
    condition = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": "all 4",
                 "lastTransitionTime": "2026-09-01T00:00:00Z"}
    patched = await ok(http, "PATCH", pod_groups("v1beta1", "train") + "/status",
                       {"status": {"conditions": [condition]}, "spec": {"schedulingPolicy": {"basic": {}}}},
                       content_type="application/merge-patch+json")
    assert patched["status"]["conditions"] == [condition]
    assert patched["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}  # the status subresource carries status
    alpha2 = await ok(http, "GET", pod_groups("v1alpha2", "train"))
    assert alpha2["status"] == patched["status"]
    assert alpha2["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


async def test_a_patch_through_v1alpha2_keeps_what_only_v1beta1_shows(http: aiohttp.ClientSession) -> None:
    await ok(http, "POST", pod_groups("v1beta1"), pod_group(
        "v1beta1", parentCompositePodGroupName="job", workloadRef={"workloadName": "job", "templateName": "train"}))
    patched = await ok(http, "PATCH", pod_groups("v1alpha2", "train"), {"metadata": {"labels": {"team": "a"}}},
                       content_type="application/strategic-merge-patch+json")
    assert patched["metadata"]["labels"] == {"team": "a"} and "parentCompositePodGroupName" not in patched["spec"]
    beta = await ok(http, "GET", pod_groups("v1beta1", "train"))
    assert beta["spec"]["parentCompositePodGroupName"] == "job"
    assert beta["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    replaced = await ok(http, "PUT", pod_groups("v1alpha2", "train"), patched)  # a no-op update: nothing new
    assert replaced["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


async def test_server_side_apply_through_v1alpha2_and_v1beta1(http: aiohttp.ClientSession) -> None:
    applied = pod_group("v1alpha2", disruptionMode="Pod")
    status, created = await call(http, "PATCH", pod_groups("v1alpha2", "train") + "?fieldManager=tester", applied,
                                 content_type="application/apply-patch+yaml")
    assert status == 201, created
    assert created["apiVersion"] == "scheduling.k8s.io/v1alpha2" and created["spec"]["disruptionMode"] == "Pod"
    again = await ok(http, "PATCH", pod_groups("v1alpha2", "train") + "?fieldManager=tester", applied,
                     content_type="application/apply-patch+yaml")
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    scaled = pod_group("v1beta1", disruptionMode={"single": {}})
    scaled["spec"]["schedulingPolicy"]["gang"]["minCount"] = 6
    beta = await ok(http, "PATCH", pod_groups("v1beta1", "train") + "?fieldManager=tester&force=true", scaled,
                    content_type="application/apply-patch+yaml")
    assert beta["spec"]["schedulingPolicy"] == {"gang": {"minCount": 6}}


# --------------------------------------------------------------------------- validation


async def test_min_count_may_change_at_v1beta1_but_not_at_v1alpha2(http: aiohttp.ClientSession) -> None:
    created = await ok(http, "POST", pod_groups("v1beta1"), pod_group("v1beta1"))
    scaled = await ok(http, "PATCH", pod_groups("v1beta1", "train"),
                      {"spec": {"schedulingPolicy": {"gang": {"minCount": 8}}}},
                      content_type="application/merge-patch+json")
    assert scaled["spec"]["schedulingPolicy"]["gang"]["minCount"] == 8
    assert scaled["metadata"]["generation"] == created["metadata"]["generation"] + 1
    scaled = await ok(http, "PATCH", pod_groups("v1alpha3", "train"),
                      {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}},
                      content_type="application/merge-patch+json")
    assert scaled["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    status, answer = await call(http, "PATCH", pod_groups("v1alpha2", "train"),
                                {"spec": {"schedulingPolicy": {"gang": {"minCount": 6}}}},
                                content_type="application/merge-patch+json")
    assert status == 422 and refused_fields(answer) == ["spec.schedulingPolicy"]
    assert "field is immutable" in answer["message"]


@pytest.mark.parametrize(("change", "field"), [
    ({"schedulingPolicy": {"gang": None, "basic": {}}}, "spec.schedulingPolicy"),
    ({"disruptionMode": {"all": {}}}, "spec.disruptionMode"),
    ({"workloadRef": {"workloadName": "other", "templateName": "workers"}}, "spec.workloadRef"),
    ({"schedulingConstraints": {"topology": [{"key": "zone"}]}}, "spec.schedulingConstraints"),
    ({"parentCompositePodGroupName": "other"}, "spec.parentCompositePodGroupName"),
    ({"priorityClassName": "system-node-critical"}, "spec.priorityClassName"),
    ({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-1"}]}, "spec.resourceClaims"),
])
async def test_a_v1beta1_update_of_anything_but_min_count_is_refused(http: aiohttp.ClientSession,
                                                                    change: dict[str, Any], field: str) -> None:
    await ok(http, "POST", pod_groups("v1beta1"), pod_group(
        "v1beta1", disruptionMode={"single": {}}, workloadRef={"workloadName": "jobset", "templateName": "workers"},
        parentCompositePodGroupName="job"))
    status, answer = await call(http, "PATCH", pod_groups("v1beta1", "train"), {"spec": change},
                                content_type="application/merge-patch+json")
    assert status == 422 and field in refused_fields(answer)
    assert "field is immutable" in answer["message"]


async def test_a_changed_preemption_policy_is_refused_and_must_be_one_of_the_two(
        http: aiohttp.ClientSession) -> None:
    await ok(http, "POST", pod_groups("v1beta1"), pod_group("v1beta1"))
    status, answer = await call(http, "PATCH", pod_groups("v1beta1", "train"),
                                {"spec": {"preemptionPolicy": "Sometimes"}},
                                content_type="application/merge-patch+json")
    assert status == 422 and refused_fields(answer) == ["spec.preemptionPolicy", "spec.preemptionPolicy"]
    assert 'Unsupported value: "Sometimes"' in answer["message"] and "field is immutable" in answer["message"]


@pytest.mark.parametrize(("spec", "field", "message"), [
    ({"disruptionMode": {}}, "spec.disruptionMode", "must specify one of: `single`, `all`"),
    ({"disruptionMode": {"single": {}, "all": {}}}, "spec.disruptionMode",
     "exactly one of `single`, `all` is required, but multiple fields are set"),
    ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount", "Required value"),
    ({"schedulingPolicy": {"gang": {"minCount": -2}}}, "spec.schedulingPolicy.gang.minCount",
     "must be greater than zero"),
    ({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}, "spec.schedulingPolicy",
     "exactly one of `basic`, `gang` is required"),
    ({"workloadRef": {"workloadName": "Job_Set", "templateName": "workers"}}, "spec.workloadRef.workloadName",
     "RFC 1123 subdomain"),
    ({"workloadRef": {"workloadName": "jobset", "templateName": "workers.a"}}, "spec.workloadRef.templateName",
     "RFC 1123 label"),
    ({"workloadRef": {"workloadName": "jobset"}}, "spec.workloadRef.templateName", "Required value"),
    ({"schedulingConstraints": {"topology": [{"key": "rack"}, {"key": "zone"}]}},
     "spec.schedulingConstraints.topology", "must have at most 1 item"),
    ({"schedulingConstraints": {"topology": [{"key": "not a/label/key"}]}},
     "spec.schedulingConstraints.topology[0].key", "qualified name"),
])
@pytest.mark.parametrize("version", ["v1beta1", "v1alpha3"])
async def test_invalid_1_37_pod_groups_are_refused_naming_the_field(http: aiohttp.ClientSession, version: str,
                                                                     spec: dict[str, Any], field: str,
                                                                     message: str) -> None:
    status, answer = await call(http, "POST", pod_groups(version), pod_group(version, **spec))
    assert_refused(status, answer, field, message, "PodGroup")


async def test_a_v1alpha2_disruption_mode_is_one_of_its_two_strings(http: aiohttp.ClientSession) -> None:
    status, answer = await call(http, "POST", pod_groups("v1alpha2"), pod_group("v1alpha2", disruptionMode="Node"))
    assert status == 422 and refused_fields(answer) == ["spec.disruptionMode"]
    assert 'supported values: "Pod", "PodGroup"' in answer["message"]


# --------------------------------------------------------------------------- priority admission


async def test_the_priority_class_is_resolved_at_every_version(cluster: DevCluster,
                                                               http: aiohttp.ClientSession) -> None:
    cluster.load_objects([priority_class("training", 1000, preemptionPolicy="Never")])
    beta = await ok(http, "POST", pod_groups("v1beta1"), pod_group("v1beta1", "a", priorityClassName="training"))
    assert (beta["spec"]["priority"], beta["spec"]["preemptionPolicy"]) == (1000, "Never")
    alpha2 = await ok(http, "POST", pod_groups("v1alpha2"), pod_group("v1alpha2", "b", priorityClassName="training"))
    assert alpha2["spec"]["priority"] == 1000 and "preemptionPolicy" not in alpha2["spec"]
    assert (await ok(http, "GET", pod_groups("v1beta1", "b")))["spec"]["preemptionPolicy"] == "Never"
    alpha3 = await ok(http, "POST", pod_groups("v1alpha3"), pod_group("v1alpha3", "c", priorityClassName="training",
                                                                       priority=1000))
    assert alpha3["spec"]["priority"] == 1000


async def test_the_global_default_class_is_used_when_none_is_named(cluster: DevCluster,
                                                                   http: aiohttp.ClientSession) -> None:
    plain = await ok(http, "POST", pod_groups("v1beta1"), pod_group("v1beta1", "before"))
    assert (plain["spec"]["priority"], plain["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    assert "priorityClassName" not in plain["spec"]
    cluster.load_objects([priority_class("batch", 50, globalDefault=True)])
    defaulted = await ok(http, "POST", pod_groups("v1beta1"), pod_group("v1beta1", "after"))
    assert (defaulted["spec"]["priorityClassName"], defaulted["spec"]["priority"]) == ("batch", 50)


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha3", "v1alpha2"])
async def test_an_unknown_priority_class_is_forbidden(http: aiohttp.ClientSession, version: str) -> None:
    status, answer = await call(http, "POST", pod_groups(version), pod_group(version, priorityClassName="missing"))
    assert status == 403 and answer["reason"] == "Forbidden"
    assert answer["message"] == ('podgroups.scheduling.k8s.io "train" is forbidden: no PriorityClass with name '
                                 "missing was found")
    assert (await call(http, "GET", pod_groups("v1beta1", "train")))[0] == 404


async def test_a_priority_that_disagrees_with_the_class_is_forbidden(http: aiohttp.ClientSession) -> None:
    status, answer = await call(http, "POST", pod_groups("v1beta1"), pod_group("v1beta1", priority=7))
    assert status == 403 and "must not be provided in PodGroup spec" in answer["message"]


# --------------------------------------------------------------------------- discovery


async def test_discovery_lists_the_versions_in_priority_order_with_their_documents(
        http: aiohttp.ClientSession) -> None:
    group = await ok(http, "GET", GROUP)
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1", "v1alpha3", "v1alpha2", "v1alpha1"]
    assert group["preferredVersion"]["version"] == "v1"
    for version in ("v1beta1", "v1alpha3"):
        listing = await ok(http, "GET", f"{GROUP}/{version}")
        (entry,) = [r for r in listing["resources"] if r["name"] == "podgroups"]
        assert entry["namespaced"] and entry["kind"] == "PodGroup"
        assert any(r["name"] == "podgroups/status" for r in listing["resources"])
        document = await ok(http, "GET", f"/openapi/v3/apis/scheduling.k8s.io/{version}")
        schema = document["components"]["schemas"][f"io.k8s.api.scheduling.{version}.PodGroup"]
        assert {"workloadRef", "disruptionMode", "preemptionPolicy"} <= set(schema["properties"]["spec"]["properties"])
