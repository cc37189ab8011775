"""Pod scheduling gates (`spec.schedulingGates`, Pod Scheduling Readiness, GA in Kubernetes 1.30) as
kube-apiserver treats them, over devcluster's HTTP API: the SchedulingGated condition at create, the
422s of its validation, the 409 of a gated pod's Binding, and gates that may only be removed."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from devcluster import ApiError, DevCluster, Store
from tests.integration.devcluster.http_calls import call

PODS = "/api/v1/namespaces/default/pods"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def pod(name: str, *gates: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "schedulerName": "toposched", **spec},
    }
    if gates:
        body["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return body


async def bind(core: Any, name: str, node_name: str, uid: str | None = None) -> Any:
    body = client.V1Binding(metadata=client.V1ObjectMeta(name=name, uid=uid),
                            target=client.V1ObjectReference(kind="Node", name=node_name))
    return await core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)


def pod_scheduled(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"]


def assert_invalid(body: dict[str, Any], name: str, causes: list[tuple[str, str, str]]) -> None:
    """A 422 Status whose causes are exactly `causes` (reason, field, message), in order."""
    assert (body["kind"], body["status"], body["code"], body["reason"]) == ("Status", "Failure", 422, "Invalid")
    assert body["details"]["name"] == name and body["details"]["kind"] == "Pod"
    assert [(c["reason"], c["field"], c["message"]) for c in body["details"]["causes"]] == causes
    assert body["message"].startswith(f'Pod "{name}" is invalid: ')


# --------------------------------------------------------------------------- create


async def test_a_pod_created_with_gates_is_marked_scheduling_gated(cluster: DevCluster,
                                                                   http: aiohttp.ClientSession) -> None:
    written = pod("gated", "example.com/quota")
    written["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}  # status is not the client's
    status, created = await call(http, "POST", PODS, written)
    assert status == 201
    (condition,) = pod_scheduled(created)
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": GATED_MESSAGE,
        "lastProbeTime": None}
    assert RFC3339.match(condition["lastTransitionTime"])
    assert created["status"]["phase"] == "Pending"
    assert cluster.store.get("pods", "gated", "default")["status"] == created["status"]
    status, free = await call(http, "POST", PODS, pod("free"))
    assert status == 201 and pod_scheduled(free) == []
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    async with http.get(PODS, headers=accept) as response:
        table = await response.json()
    assert {row["cells"][0]: row["cells"][2] for row in table["rows"]} == {"free": "Pending",
                                                                            "gated": "SchedulingGated"}


def test_the_gated_condition_is_stamped_by_the_store_clock_and_an_existing_one_is_kept() -> None:
    store = Store(clock=lambda: 1_800_000_000.0)
    created = store.create(pod("gated", "example.com/quota"), keep_status=False)
    assert pod_scheduled(created) == [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                       "message": GATED_MESSAGE, "lastProbeTime": None,
                                       "lastTransitionTime": "2027-01-15T08:00:00Z"}]
    loaded = pod("loaded", "example.com/quota")
    loaded["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    assert pod_scheduled(store.create(loaded)) == [{"type": "PodScheduled", "status": "False",
                                                    "reason": "Unschedulable"}]


async def test_creating_a_pod_with_a_node_name_and_gates_is_422_forbidden(cluster: DevCluster,
                                                                          http: aiohttp.ClientSession) -> None:
    status, body = await call(http, "POST", PODS, pod("p1", "example.com/quota", nodeName="n1"))
    assert status == 422
    assert_invalid(body, "p1", [("FieldValueForbidden", "spec.nodeName",
                                 "Forbidden: cannot be set until all schedulingGates have been cleared")])
    assert body["message"] == ('Pod "p1" is invalid: spec.nodeName: Forbidden: cannot be set until all '
                               "schedulingGates have been cleared")
    assert cluster.store.find("pods", "p1", "default") is None
    assert (await call(http, "POST", PODS, pod("p1", nodeName="n1")))[0] == 201  # without gates it may


async def test_duplicate_gate_names_are_422_on_create_and_update(cluster: DevCluster,
                                                                 http: aiohttp.ClientSession) -> None:
    status, body = await call(http, "POST", PODS, pod("p1", "example.com/foo", "example.com/bar", "example.com/foo"))
    assert status == 422
    assert_invalid(body, "p1", [("FieldValueDuplicate", "spec.schedulingGates[2]",
                                 'Duplicate value: "example.com/foo"')])
    assert body["message"] == 'Pod "p1" is invalid: spec.schedulingGates[2]: Duplicate value: "example.com/foo"'
    assert cluster.store.find("pods", "p1", "default") is None
    _, created = await call(http, "POST", PODS, pod("p1", "example.com/foo", "example.com/bar"))
    duplicated = {**created, "spec": {**created["spec"], "schedulingGates": [{"name": "example.com/foo"},
                                                                             {"name": "example.com/foo"}]}}
    status, body = await call(http, "PUT", f"{PODS}/p1", duplicated)
    assert status == 422
    assert_invalid(body, "p1", [("FieldValueDuplicate", "spec.schedulingGates[1]",
                                 'Duplicate value: "example.com/foo"')])
    assert cluster.store.get("pods", "p1", "default")["spec"]["schedulingGates"] == created["spec"]["schedulingGates"]


async def test_every_cause_of_a_refused_create_comes_in_one_answer(http: aiohttp.ClientSession) -> None:
    written = pod("p1", "not a qualified name", "example.com/foo", "example.com/foo", nodeName="n1")
    written["spec"]["containers"] = [{"name": "main"}]  # no image: manifests' validation refuses it too
    status, body = await call(http, "POST", PODS, written)
    assert status == 422
    causes = [(c["reason"], c["field"]) for c in body["details"]["causes"]]
    assert causes == [("FieldValueRequired", "spec.containers[0].image"),
                      ("FieldValueInvalid", "spec.schedulingGates[0]"),
                      ("FieldValueDuplicate", "spec.schedulingGates[2]"),
                      ("FieldValueForbidden", "spec.nodeName")]
    assert body["details"]["causes"][1]["message"].startswith('Invalid value: "not a qualified name": name part ')


def test_a_loaded_pod_the_real_server_would_refuse_for_its_gates_is_kept_with_warnings() -> None:
    store = Store()
    warnings: list[str] = []
    stored = store.create(pod("p1", "a", "a", nodeName="n1"), warnings=warnings)
    assert stored["spec"]["nodeName"] == "n1"
    assert warnings == ['a real API server refuses it: spec.schedulingGates[1]: Duplicate value: "a"',
                        "a real API server refuses it: spec.nodeName: Forbidden: cannot be set until all "
                        "schedulingGates have been cleared"]


# --------------------------------------------------------------------------- binding


async def test_binding_a_gated_pod_is_a_conflict_until_its_gates_are_removed(cluster: DevCluster, api: Any,
                                                                             http: aiohttp.ClientSession) -> None:
    await call(http, "POST", PODS, pod("p1", "example.com/quota"))
    core: Any = client.CoreV1Api(api)
    refused = await bind(core, "p1", "n1")
    assert refused.status == 409
    status = json.loads(await refused.read())
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Conflict", 409)
    assert status["message"] == ('Operation cannot be fulfilled on pods/binding "p1": '
                                 "pod p1 has non-empty .spec.schedulingGates")
    assert status["details"] == {"name": "p1", "kind": "pods/binding"}
    held = cluster.store.get("pods", "p1", "default")
    assert "nodeName" not in held["spec"] and pod_scheduled(held)[0]["reason"] == "SchedulingGated"
    status_code, _ = await call(http, "PATCH", f"{PODS}/p1", [{"op": "remove", "path": "/spec/schedulingGates"}],
                                content_type="application/json-patch+json")
    assert status_code == 200
    assert (await bind(core, "p1", "n1")).status == 201
    bound = await core.read_namespaced_pod("p1", "default")
    assert bound.spec.node_name == "n1"
    assert [(c.status, c.reason) for c in bound.status.conditions if c.type == "PodScheduled"] == [("True", None)]


async def test_binding_conflicts_are_checked_in_the_real_servers_order(cluster: DevCluster, api: Any) -> None:
    core: Any = client.CoreV1Api(api)
    # Loaded as a cluster could not hold it (bound and gated): the Binding says it is assigned, not gated.
    cluster.store.create(pod("bound-gated", "example.com/quota", nodeName="n1"))
    answer = await bind(core, "bound-gated", "n2")
    assert answer.status == 409
    assert json.loads(await answer.read())["message"].endswith('pod bound-gated is already assigned to node "n1"')
    # A bound pod held by a finalizer while it is deleted: "being deleted" comes before "already assigned".
    cluster.store.create({**pod("leaving", nodeName="n1"), "metadata": {
        "name": "leaving", "namespace": "default", "finalizers": ["example.com/hold"]}})
    cluster.store.delete("pods", "leaving", "default")
    answer = await bind(core, "leaving", "n2")
    assert answer.status == 409
    assert json.loads(await answer.read())["message"].endswith(
        "pod leaving is being deleted, cannot be assigned to a host")
    answer = await bind(core, "leaving", "n2", uid="not-the-uid")  # the uid precondition before all
    assert answer.status == 409
    assert "Precondition failed: UID in precondition: not-the-uid" in json.loads(await answer.read())["message"]


# --------------------------------------------------------------------------- updates


async def test_gates_can_only_be_removed_and_a_watch_sees_each_removal(cluster: DevCluster,
                                                                       http: aiohttp.ClientSession) -> None:
    _, created = await call(http, "POST", PODS, pod("p1", "example.com/arch", "example.com/quota"))
    since = created["metadata"]["resourceVersion"]
    watch = f"{PODS}?watch=1&resourceVersion={since}&fieldSelector=metadata.name%3Dp1&timeoutSeconds=5"
    async with http.get(watch) as stream:
        assert stream.status == 200
        status, body = await call(http, "PATCH", f"{PODS}/p1", [
            {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "example.com/late"}}],
            content_type="application/json-patch+json")
        assert status == 422
        assert_invalid(body, "p1", [("FieldValueForbidden", "spec.schedulingGates[2].name",
                                     "Forbidden: only deletion is allowed, but found new scheduling gate "
                                     "'example.com/late'")])
        status, one_left = await call(http, "PATCH", f"{PODS}/p1",
                                      {"spec": {"schedulingGates": [{"name": "example.com/quota"}]}},
                                      content_type="application/merge-patch+json")
        assert status == 200 and one_left["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
        status, body = await call(http, "PUT", f"{PODS}/p1", {**one_left, "spec": {
            **one_left["spec"], "schedulingGates": [{"name": "example.com/arch"}]}})  # removed gates stay removed
        assert status == 422
        assert_invalid(body, "p1", [("FieldValueForbidden", "spec.schedulingGates[0].name",
                                     "Forbidden: only deletion is allowed, but found new scheduling gate "
                                     "'example.com/arch'")])
        ungated = {**one_left, "spec": {k: v for k, v in one_left["spec"].items() if k != "schedulingGates"}}
        status, released = await call(http, "PUT", f"{PODS}/p1", ungated)
        assert status == 200 and "schedulingGates" not in released["spec"]
        seen: list[tuple[str, list[str]]] = []
        while len(seen) < 2:
            line = await stream.content.readline()
            assert line, f"the watch ended after {seen}"
            event = json.loads(line)
            if event["type"] != "BOOKMARK":
                gates = event["object"]["spec"].get("schedulingGates") or []
                seen.append((event["type"], [g["name"] for g in gates]))
    assert seen == [("MODIFIED", ["example.com/quota"]), ("MODIFIED", [])]
    # The API server leaves the condition as it is; whoever schedules the pod changes it.
    assert pod_scheduled(released)[0]["reason"] == "SchedulingGated"


def test_an_update_that_adds_a_gate_and_changes_a_toleration_gets_both_causes() -> None:
    store = Store()
    store.create(pod("p1", "a", tolerations=[{"key": "k", "operator": "Equal", "value": "v"}]))
    with pytest.raises(ApiError) as raised:
        store.patch("pods", "p1", {"spec": {"schedulingGates": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
                                            "tolerations": [{"key": "k", "operator": "Equal", "value": "w"}]}},
                    "default", strict=True)
    assert raised.value.code == 422 and raised.value.details is not None
    assert [(c["field"], c["message"]) for c in raised.value.details["causes"]] == [
        ("spec.tolerations", "Forbidden: existing toleration can not be modified except its tolerationSeconds"),
        ("spec.schedulingGates[1].name", "Forbidden: only deletion is allowed, but found new scheduling gate 'b'"),
        ("spec.schedulingGates[2].name", "Forbidden: only deletion is allowed, but found new scheduling gate 'c'"),
    ]
