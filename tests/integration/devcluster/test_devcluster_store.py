"""The store's semantics without HTTP: versions, history window, graceful deletion, finalizers, patches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from devcluster import ApiError, Store
from devcluster.patches import strategic_merge
from devcluster.schemas import KIND_SCHEMAS

from .manifests import node, pod


async def eventually(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.01)


def test_every_write_takes_the_next_global_resource_version() -> None:
    store = Store()
    start = store.resource_version
    a = store.create(node("n1"))
    b = store.create(pod("p1"))
    assert (int(a["metadata"]["resourceVersion"]), int(b["metadata"]["resourceVersion"])) == (start + 1, start + 2)
    assert store.update({**a, "metadata": {**a["metadata"], "labels": {"x": "1"}}})["metadata"]["resourceVersion"] \
        == str(start + 3)
    assert store.update(store.get("nodes", "n1")) is store.get("nodes", "n1")  # a no-op keeps its version
    assert store.resource_version == start + 3


def test_watch_history_window_replays_recent_events_and_refuses_older_versions() -> None:
    store = Store(history=4)
    base = store.resource_version
    for index in range(3):
        store.create(pod(f"p{index}"))
    _, backlog = store.watch("pods", "default", resource_version=str(base + 1))
    assert [event.obj["metadata"]["name"] for _, event in backlog] == ["p1", "p2"]
    for index in range(3, 8):
        store.create(pod(f"p{index}"))
    with pytest.raises(ApiError) as raised:
        store.watch("pods", "default", resource_version=str(base + 1))
    assert raised.value.code == 410 and raised.value.reason == "Expired"
    _, backlog = store.watch("pods", "default", resource_version=str(store.oldest_resumable))
    assert len(backlog) == 4


def test_update_status_changes_only_the_status_and_main_update_keeps_it() -> None:
    store = Store()
    created = store.create(pod("p1"))
    with_status = {**created, "status": {"phase": "Running"}, "spec": {**created["spec"], "nodeName": "elsewhere"}}
    updated = store.update(with_status, subresource="status")
    assert updated["status"]["phase"] == "Running" and "nodeName" not in updated["spec"]
    relabelled = store.update({**updated, "status": {"phase": "Failed"}, "metadata": {**updated["metadata"],
                                                                                     "labels": {"v": "2"}}})
    assert relabelled["status"]["phase"] == "Running" and relabelled["metadata"]["labels"] == {"v": "2"}


async def test_bound_pods_terminate_for_their_grace_period_and_unbound_pods_go_at_once() -> None:
    store = Store()
    store.load_objects([pod("bound", nodeName="n1", terminationGracePeriodSeconds=1), pod("pending")])
    assert store.delete("pods", "pending", "default")["metadata"].get("deletionTimestamp") is None
    assert store.find("pods", "pending", "default") is None
    terminating = store.delete("pods", "bound", "default")
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 1
    assert store.find("pods", "bound", "default") is not None
    with pytest.raises(ApiError) as raised:
        store.bind("default", "bound", "n2")
    assert raised.value.code == 409
    await eventually(lambda: store.find("pods", "bound", "default") is None)


def test_finalizers_hold_a_deleted_object_until_they_are_removed() -> None:
    store = Store()
    held = pod("held")
    held["metadata"]["finalizers"] = ["toposched.io/reservation"]
    store.create(held)
    deleting = store.delete("pods", "held", "default")
    assert deleting["metadata"]["deletionTimestamp"]
    store.patch("pods", "held", {"metadata": {"finalizers": None}}, "default")
    assert store.find("pods", "held", "default") is None


def test_delete_preconditions_and_stale_patches_conflict() -> None:
    store = Store()
    store.create(pod("p1"))
    with pytest.raises(ApiError) as raised:
        store.delete("pods", "p1", "default", preconditions={"uid": "other"})
    assert raised.value.code == 409
    with pytest.raises(ApiError) as raised:
        store.patch("pods", "p1", {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}}, "default")
    assert raised.value.code == 409


def test_strategic_merge_patch_honours_merge_keys_and_directives() -> None:
    spec = pod("p1", tolerations=[{"key": "a", "operator": "Exists"}])["spec"]
    spec["containers"].append({"name": "side", "image": "envoy", "env": [{"name": "A", "value": "1"}]})
    merged = strategic_merge({"metadata": {"finalizers": ["x"]}, "spec": spec}, {
        "metadata": {"finalizers": ["y"], "$deleteFromPrimitiveList/finalizers": ["x"]},
        "spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
            "containers": [{"name": "side", "env": [{"name": "B", "value": "2"}]}],
            "tolerations": [{"key": "b", "operator": "Exists"}],
        },
    }, KIND_SCHEMAS[("v1", "Pod")][1])
    assert merged["metadata"]["finalizers"] == ["y"]
    assert [c["name"] for c in merged["spec"]["containers"]] == ["side", "main"]
    assert [e["name"] for e in merged["spec"]["containers"][0]["env"]] == ["A", "B"]
    assert merged["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]  # no merge key: replaced
    replacement = {"spec": {"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}}
    replaced = strategic_merge(merged, replacement, KIND_SCHEMAS[("v1", "Pod")][1])
    assert [c["name"] for c in replaced["spec"]["containers"]] == ["only"]
    assert spec["containers"][1]["env"] == [{"name": "A", "value": "1"}]  # inputs are never mutated


def test_strategic_status_patch_merges_and_deletes_conditions_by_type() -> None:
    store = Store()
    store.create(pod("p1"))
    store.patch("pods", "p1", {"status": {"conditions": [{"type": "A", "status": "True"},
                                                         {"type": "B", "status": "False"}]}},
                "default", patch_type="strategic", subresource="status")
    patched = store.patch("pods", "p1", {"status": {"conditions": [{"type": "A", "$patch": "delete"},
                                                                   {"type": "B", "status": "True"}]}},
                          "default", patch_type="strategic", subresource="status")
    assert patched["status"]["conditions"] == [{"type": "B", "status": "True"}]


def test_json_patch_moves_copies_and_fails_its_tests() -> None:
    store = Store()
    store.create(pod("p1"))
    moved = store.patch("pods", "p1", [
        {"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/copy"},
        {"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/moved"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "alpine"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["a"]},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
        {"op": "add", "path": "/metadata/finalizers/0", "value": "c"},
    ], "default", patch_type="json")
    assert moved["metadata"]["labels"] == {"copy": "p1", "moved": "p1"}
    assert moved["metadata"]["finalizers"] == ["c", "a", "b"]
    assert [c["image"] for c in moved["spec"]["containers"]] == ["alpine"]
    with pytest.raises(ApiError) as raised:
        store.patch("pods", "p1", [{"op": "remove", "path": "/spec/nothing"}], "default", patch_type="json")
    assert raised.value.code == 422


def test_pods_take_their_priority_from_the_priority_class() -> None:
    store = Store()
    store.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                  "value": 1000, "preemptionPolicy": "Never"})
    created = store.create(pod("p1", priorityClassName="high"))
    assert (created["spec"]["priority"], created["spec"]["preemptionPolicy"]) == (1000, "Never")
    defaulted = store.create(pod("p2"))["spec"]  # no class and no globalDefault: priority 0, as the plugin sets it
    assert (defaulted["priority"], defaulted["preemptionPolicy"]) == (0, "PreemptLowerPriority")


def test_namespaces_are_created_on_demand_unless_strict() -> None:
    assert Store().create(pod("p1", "fresh"))["metadata"]["namespace"] == "fresh"
    with pytest.raises(ApiError) as raised:
        Store(autocreate_namespaces=False).create(pod("p1", "fresh"))
    assert raised.value.code == 404 and raised.value.message == 'namespaces "fresh" not found'


def test_pod_updates_may_not_change_immutable_spec_fields() -> None:
    store = Store()
    created = store.create(pod("p1"))
    with pytest.raises(ApiError) as raised:
        store.patch("pods", "p1", {"spec": {"nodeName": "n1"}}, "default")
    assert raised.value.code == 422 and "pod updates may not change fields" in raised.value.message
    added = [*created["spec"]["tolerations"], {"key": "k", "operator": "Exists"}]  # only additions are allowed
    image = store.patch("pods", "p1", {"spec": {"containers": [{"name": "main", "image": "alpine"}],
                                                "tolerations": added}},
                        "default", patch_type="strategic")
    assert image["spec"]["containers"][0]["image"] == "alpine"
    assert int(image["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_binding_sets_pod_scheduled_and_clears_the_nomination_as_kube_apiserver_does() -> None:
    # Kubernetes 1.35 (ClearingNominatedNodeNameAfterBinding, beta, on by default): whoever nominated
    # the pod, the Binding clears status.nominatedNodeName.
    store = Store()
    store.load_objects([pod("nominated")])
    store.patch("pods", "nominated", {"status": {"nominatedNodeName": "n1", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "preempting"}]}},
        "default", subresource="status")
    bound = store.bind("default", "nominated", "n1")
    assert bound["spec"]["nodeName"] == "n1" and "nominatedNodeName" not in bound["status"]
    (scheduled,) = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled["status"] == "True" and "reason" not in scheduled
