"""devcluster driven by the real kubernetes-asyncio client: list, watch, bind, evict, status, leases."""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import DevCluster

from .manifests import node, pod


async def eventually(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.01)


async def bind(core: Any, name: str, node_name: str, uid: str | None = None) -> Any:
    body = client.V1Binding(metadata=client.V1ObjectMeta(name=name, uid=uid),
                            target=client.V1ObjectReference(kind="Node", name=node_name))
    return await core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)


async def test_list_returns_objects_with_resource_versions_and_filters_by_selectors(
        cluster: DevCluster, api: Any) -> None:
    cluster.load_objects([node("n1", rack="a"), node("n2", rack="b"), pod("p1"), pod("p2", nodeName="n1")])
    core: Any = client.CoreV1Api(api)
    nodes = await core.list_node(label_selector="rack in (a)")
    assert [n.metadata.name for n in nodes.items] == ["n1"]
    assert int(nodes.metadata.resource_version) == cluster.store.resource_version
    pending = await core.list_pod_for_all_namespaces(field_selector="spec.nodeName=,spec.schedulerName=toposched")
    assert [p.metadata.name for p in pending.items] == ["p1"]
    bound = await core.list_namespaced_pod("default", field_selector="spec.nodeName!=")
    assert [(p.metadata.name, p.status.phase) for p in bound.items] == [("p2", "Running")]
    assert all(p.metadata.resource_version for p in bound.items)
    none = await core.list_namespaced_pod("default", label_selector="app notin (p1,p2)")
    assert none.items == []


async def test_list_pages_with_limit_and_continue(cluster: DevCluster, api: Any) -> None:
    cluster.load_objects([node(f"n{i:02d}") for i in range(7)])
    core: Any = client.CoreV1Api(api)
    first = await core.list_node(limit=5)
    assert len(first.items) == 5 and first.metadata.remaining_item_count == 2
    rest = await core.list_node(limit=5, _continue=first.metadata._continue)
    assert [n.metadata.name for n in rest.items] == ["n05", "n06"]
    assert rest.metadata._continue is None


async def test_watch_resumes_from_a_resource_version_and_sends_bookmarks(cluster: DevCluster, api: Any) -> None:
    core: Any = client.CoreV1Api(api)
    cluster.store.create(pod("before"))
    listed = await core.list_namespaced_pod("default")
    cluster.store.create(pod("after"))
    cluster.store.delete("pods", "before", "default")
    seen: list[tuple[str, str]] = []
    watcher = watch.Watch()
    since = listed.metadata.resource_version
    async for event in watcher.stream(core.list_namespaced_pod, "default", resource_version=since,
                                      allow_watch_bookmarks=True, timeout_seconds=5):
        seen.append((event["type"], event["raw_object"]["metadata"].get("name", "")))
        if event["type"] == "BOOKMARK":
            assert int(event["raw_object"]["metadata"]["resourceVersion"]) == cluster.store.resource_version
            break
    await watcher.close()
    assert seen == [("ADDED", "after"), ("DELETED", "before"), ("BOOKMARK", "")]


async def test_watch_from_a_version_older_than_the_history_window_is_gone(api: Any) -> None:
    async with DevCluster(history=3, kubelet=False) as small:
        for index in range(6):
            small.store.create(pod(f"p{index}"))
        core: Any = client.CoreV1Api(api)
        core.api_client.configuration.host = small.url
        watcher = watch.Watch()
        with pytest.raises(ApiException) as raised:
            async for _ in watcher.stream(core.list_namespaced_pod, "default", resource_version="2",
                                          timeout_seconds=2):
                pass
        await watcher.close()
        assert raised.value.status == 410
        assert "too old resource version" in str(raised.value.reason) + str(raised.value.body)


async def test_watch_ends_when_timeout_seconds_pass(api: Any) -> None:
    core: Any = client.CoreV1Api(api)
    listed = await core.list_namespaced_pod("default")
    started = asyncio.get_running_loop().time()
    events = [e async for e in watch.Watch().stream(core.list_namespaced_pod, "default",
                                                   resource_version=listed.metadata.resource_version,
                                                   timeout_seconds=1)]
    assert events == []
    assert asyncio.get_running_loop().time() - started < 4


async def test_binding_a_bound_pod_is_a_conflict_and_the_kubelet_starts_it(cluster: DevCluster, api: Any) -> None:
    cluster.store.create(pod("p1"))
    core: Any = client.CoreV1Api(api)
    response = await bind(core, "p1", "n1")
    assert response.status == 201
    assert json.loads(await response.read())["status"] == "Success"
    again = await bind(core, "p1", "n2")
    assert again.status == 409
    status = json.loads(await again.read())
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Conflict", 409)
    assert 'already assigned to node "n1"' in status["message"]
    await eventually(lambda: cluster.store.get("pods", "p1", "default")["status"]["phase"] == "Running")
    running = await core.read_namespaced_pod("p1", "default")
    assert running.spec.node_name == "n1"
    assert {c.type for c in running.status.conditions} >= {"PodScheduled", "Ready"}


async def test_binding_with_a_stale_uid_is_a_conflict(cluster: DevCluster, api: Any) -> None:
    cluster.store.create(pod("p1"))
    core: Any = client.CoreV1Api(api)
    stale = await bind(core, "p1", "n1", uid="not-the-uid")
    assert stale.status == 409
    assert cluster.store.get("pods", "p1", "default")["spec"].get("nodeName") is None
    uid = cluster.store.get("pods", "p1", "default")["metadata"]["uid"]
    assert (await bind(core, "p1", "n1", uid=uid)).status == 201


async def test_eviction_terminates_a_running_pod_for_its_grace_period(cluster: DevCluster, api: Any) -> None:
    cluster.load_objects([pod("victim", nodeName="n1", terminationGracePeriodSeconds=1)])
    core: Any = client.CoreV1Api(api)
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="victim", namespace="default"))
    response = await core.create_namespaced_pod_eviction("victim", "default", eviction, _preload_content=False)
    assert response.status == 201
    terminating = await core.read_namespaced_pod("victim", "default")
    assert terminating.metadata.deletion_timestamp is not None
    await eventually(lambda: cluster.store.find("pods", "victim", "default") is None, seconds=5)
    with pytest.raises(ApiException) as raised:
        await core.read_namespaced_pod("victim", "default")
    assert raised.value.status == 404


async def test_deleting_a_pod_with_zero_grace_removes_it_at_once(cluster: DevCluster, api: Any) -> None:
    cluster.load_objects([pod("p1", nodeName="n1")])
    core: Any = client.CoreV1Api(api)
    await core.delete_namespaced_pod("p1", "default", grace_period_seconds=0)
    assert cluster.store.find("pods", "p1", "default") is None


async def test_status_patch_merges_conditions_by_type(cluster: DevCluster, api: Any) -> None:
    cluster.store.create(pod("p1"))
    core: Any = client.CoreV1Api(api)
    await core.patch_namespaced_pod_status("p1", "default", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no room"}]}})
    await core.patch_namespaced_pod_status("p1", "default", {"status": {"conditions": [
        {"type": "Custom", "status": "True"}], "nominatedNodeName": "n3"}})
    patched = await core.read_namespaced_pod_status("p1", "default")
    conditions = {c.type: c for c in patched.status.conditions}
    assert conditions["PodScheduled"].reason == "Unschedulable"
    assert conditions["Custom"].status == "True"
    assert patched.status.nominated_node_name == "n3"
    assert patched.spec.node_name is None


async def test_lease_updates_use_optimistic_concurrency(api: Any) -> None:
    coordination: Any = client.CoordinationV1Api(api)
    lease = client.V1Lease(metadata=client.V1ObjectMeta(name="toposched", namespace="kube-system"),
                           spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15))
    created = await coordination.create_namespaced_lease("kube-system", lease)
    created.spec.holder_identity = "b"
    updated = await coordination.replace_namespaced_lease("toposched", "kube-system", created)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    created.spec.holder_identity = "c"
    with pytest.raises(ApiException) as raised:
        await coordination.replace_namespaced_lease("toposched", "kube-system", created)
    assert raised.value.status == 409
    assert "the object has been modified" in json.loads(raised.value.body or b"{}")["message"]
    current = await coordination.read_namespaced_lease("toposched", "kube-system")
    assert current.spec.holder_identity == "b"


async def test_custom_resources_are_served_with_status_subresources(cluster: DevCluster, api: Any) -> None:
    custom: Any = client.CustomObjectsApi(api)
    await custom.create_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "s0"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "n.*"}}}]},
        "status": {"nodeCount": 9}})
    stored = cluster.store.get("hypernodes.topology.volcano.sh", "s0")
    assert "status" not in stored
    await custom.patch_cluster_custom_object_status("topology.volcano.sh", "v1alpha1", "hypernodes", "s0",
                                                   {"status": {"nodeCount": 2}},
                                                   _content_type="application/merge-patch+json")
    assert cluster.store.get("hypernodes.topology.volcano.sh", "s0")["status"] == {"nodeCount": 2}
    group = await custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "default", "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
        "spec": {"minMember": 4, "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}})
    assert group["metadata"]["namespace"] == "default"
    listed = await custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", "default", "podgroups")
    assert [g["spec"]["minMember"] for g in listed["items"]] == [4]


async def test_injected_faults_answer_429_with_retry_after_then_recover(cluster: DevCluster, api: Any) -> None:
    core: Any = client.CoreV1Api(api)
    cluster.faults.fail_next(1, 429, verb="list", retry_after=2)
    with pytest.raises(ApiException) as raised:
        await core.list_node()
    assert raised.value.status == 429
    assert raised.value.headers is not None and raised.value.headers["Retry-After"] == "2"
    assert (await core.list_node()).items == []


async def test_dropped_watch_streams_end_for_the_client(cluster: DevCluster, api: Any) -> None:
    core: Any = client.CoreV1Api(api)
    listed = await core.list_namespaced_pod("default")
    response = await core.list_namespaced_pod("default", watch=True, resource_version=listed.metadata.resource_version,
                                              _preload_content=False)
    await eventually(lambda: cluster.faults.drop_watches() == 1)
    assert await asyncio.wait_for(response.content.read(), 5) == b""


async def test_every_label_and_field_selector_form_filters_lists(cluster: DevCluster, api: Any) -> None:
    labelled = [pod("a"), pod("b"), pod("c")]
    labelled[0]["metadata"]["labels"].update(tier="gpu", zone="z1")
    labelled[1]["metadata"]["labels"].update(tier="cpu")
    cluster.load_objects([*labelled, pod("d", "other")])
    core: Any = client.CoreV1Api(api)

    async def names(**selectors: str) -> list[str]:
        listed = await core.list_pod_for_all_namespaces(**selectors)
        return [p.metadata.name for p in listed.items]

    assert await names(label_selector="tier=gpu") == ["a"]
    assert await names(label_selector="tier==cpu") == ["b"]
    assert await names(label_selector="tier!=gpu") == ["b", "c", "d"]
    assert await names(label_selector="tier in (gpu, cpu),zone") == ["a"]
    assert await names(label_selector="tier notin (gpu)") == ["b", "c", "d"]
    assert await names(label_selector="!tier") == ["c", "d"]
    assert await names(field_selector="metadata.namespace=other") == ["d"]
    assert await names(field_selector="metadata.name!=a,metadata.namespace==default") == ["b", "c"]
    assert await names(field_selector="status.phase=Pending", label_selector="app=c") == ["c"]


async def test_selector_watch_sees_an_object_leaving_the_selection_as_deleted(cluster: DevCluster, api: Any) -> None:
    cluster.store.create(pod("p1"))
    core: Any = client.CoreV1Api(api)
    listed = await core.list_namespaced_pod("default", field_selector="spec.nodeName=")
    cluster.store.bind("default", "p1", "n1")
    watcher = watch.Watch()
    events = []
    async for event in watcher.stream(core.list_namespaced_pod, "default", field_selector="spec.nodeName=",
                                      resource_version=listed.metadata.resource_version, timeout_seconds=5):
        events.append((event["type"], event["object"].metadata.name))
        break
    await watcher.close()
    assert events == [("DELETED", "p1")]


async def test_fault_rules_filter_by_verb_and_path_and_add_latency(cluster: DevCluster, api: Any) -> None:
    cluster.store.create(pod("p1"))
    core: Any = client.CoreV1Api(api)
    rule = cluster.faults.fail_fraction(1.0, 500, verb="create", path="/binding")
    response = await bind(core, "p1", "n1")
    assert response.status == 500
    assert json.loads(await response.read())["reason"] == "InternalError"
    assert (await core.read_namespaced_pod("p1", "default")).spec.node_name is None
    cluster.faults.remove(rule)
    cluster.faults.add_latency(0.3, verb="get")
    started = asyncio.get_running_loop().time()
    await core.read_namespaced_pod("p1", "default")
    assert asyncio.get_running_loop().time() - started >= 0.3
    cluster.faults.clear()
    assert (await bind(core, "p1", "n1")).status == 201
    assert cluster.faults.injected == 1


async def test_events_are_served_in_core_v1_and_events_k8s_io_v1(cluster: DevCluster, api: Any) -> None:
    core: Any = client.CoreV1Api(api)
    events: Any = client.EventsV1Api(api)
    await core.create_namespaced_event("default", client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="p1.1"), reason="Scheduled", message="bound", type="Normal",
        event_time=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        involved_object=client.V1ObjectReference(kind="Pod", name="p1", namespace="default")))
    await events.create_namespaced_event("default", client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="p1.2"), reason="GangTimeout", note="gave up", type="Warning",
        event_time=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), reporting_controller="toposched",
        reporting_instance="x", action="Wait",
        regarding=client.V1ObjectReference(kind="Pod", name="p1", namespace="default")))
    listed = await core.list_namespaced_event("default", field_selector="involvedObject.name=p1")
    assert [(e.reason, e.message) for e in listed.items] == [("Scheduled", "bound"), ("GangTimeout", "gave up")]
    viewed = await events.list_namespaced_event("default", field_selector="regarding.name=p1")
    assert [(e.reason, e.note, e.regarding.name) for e in viewed.items] == [("Scheduled", "bound", "p1"),
                                                                           ("GangTimeout", "gave up", "p1")]
    assert cluster.store.count("events") == 2
    watcher = watch.Watch()
    async for event in watcher.stream(events.list_namespaced_event, "default", resource_version="0",
                                      timeout_seconds=5):
        assert event["raw_object"]["apiVersion"] == "events.k8s.io/v1" and "note" in event["raw_object"]
        break
    await watcher.close()


async def test_deleting_a_node_deletes_the_pods_bound_to_it(cluster: DevCluster, api: Any) -> None:
    cluster.load_objects([node("n1"), node("n2"), pod("on-n1", nodeName="n1"), pod("on-n2", nodeName="n2"),
                          pod("pending")])
    core: Any = client.CoreV1Api(api)
    await core.delete_node("n1")
    await eventually(lambda: cluster.store.find("pods", "on-n1", "default") is None)
    remaining = await core.list_namespaced_pod("default")
    assert sorted(p.metadata.name for p in remaining.items) == ["on-n2", "pending"]


async def test_a_list_s_items_say_their_kind_only_for_custom_resources_as_kube_apiserver_writes_them(
        cluster: DevCluster, api: Any) -> None:
    group = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 1}}
    cluster.load_objects([node("n1"), pod("p1"), group])
    core: Any = client.CoreV1Api(api)
    listed = json.loads(await (await core.list_namespaced_pod("default", _preload_content=False)).read())
    assert listed["kind"] == "PodList" and listed["apiVersion"] == "v1"
    assert [sorted(item) for item in listed["items"]] == [["metadata", "spec", "status"]]  # kubernetes#3030
    got = json.loads(await (await core.read_namespaced_pod("p1", "default", _preload_content=False)).read())
    assert (got["apiVersion"], got["kind"]) == ("v1", "Pod")
    streamed = await core.list_namespaced_pod("default", watch=True, timeout_seconds=1, _preload_content=False)
    first = json.loads(await streamed.content.readline())
    assert first["type"] == "ADDED" and (first["object"]["apiVersion"], first["object"]["kind"]) == ("v1", "Pod")
    streamed.release()
    custom = await client.CustomObjectsApi(api).list_namespaced_custom_object(
        "scheduling.sigs.k8s.io", "v1alpha1", "default", "podgroups")
    assert [(item["apiVersion"], item["kind"]) for item in custom["items"]] == [
        ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup")]
