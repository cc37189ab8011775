"""In-place pod resize (KEP-1287) as devcluster serves it: the pods/resize subresource's rules, and the fake
kubelet reporting each running container's allocated and actual resources, allocating a resize at once when it
fits (PodResizeInProgress until it is actuated), or holding it PodResizePending (Infeasible beyond the node's
allocatable, Deferred beside the other pods, retried when room frees up), and counting its pods at what it
allocated them, not at their spec."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devcluster import openapi
from devcluster.errors import ApiError
from devcluster.kubelet import FakeKubelet, running_status
from devcluster.store import Store
from tests.unit.devcluster.test_kubelet_host_ports import phases, settle, until

POD_UPDATE_FORBIDDEN = "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
SLOW = 0.4  # seconds a resize takes to actuate where a test looks at it in progress


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
async def kubelet(store: Store) -> AsyncIterator[FakeKubelet]:
    """A kubelet that starts pods after 1 ms and actuates resizes after 5 ms."""
    started = FakeKubelet(store, delay=0.001, resize_delay=0.005)
    started.start()
    yield started
    started.stop()


@pytest.fixture
async def slow(store: Store) -> AsyncIterator[FakeKubelet]:
    """A kubelet whose resizes stay in progress for SLOW seconds."""
    started = FakeKubelet(store, delay=0.001, resize_delay=SLOW)
    started.start()
    yield started
    started.stop()


def node(cpu: str = "4", memory: str = "8Gi", name: str = "node-a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"pods": "110", "cpu": cpu, "memory": memory}}}


def pod(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, *,
        node_name: str = "node-a", **spec: Any) -> dict[str, Any]:
    """A pod bound to `node_name` whose container `main` has these requests and limits."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node_name, "containers": [{"name": "main", "image": "busybox",
                                                             "resources": resources}], **spec}}


def resize(store: Store, name: str, requests: dict[str, str] | None = None,
           limits: dict[str, str] | None = None, container: str = "main") -> dict[str, Any]:
    """`kubectl patch pod NAME --subresource resize` with these requests and limits for `container`."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return store.patch("pods", name, {"spec": {"containers": [{"name": container, "resources": resources}]}},
                       "default", patch_type="strategic", subresource="resize", strict=True)


def status(store: Store, name: str) -> dict[str, Any]:
    found: dict[str, Any] = store.get("pods", name, "default")["status"]
    return found


def main_status(store: Store, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in status(store, name)["containerStatuses"] if s["name"] == "main")
    return found


def condition(store: Store, name: str, kind: str) -> dict[str, Any] | None:
    return next((c for c in status(store, name).get("conditions") or [] if c["type"] == kind), None)


def refusal(call: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value


# ----------------------------------------------------------------------------------------- what a running pod reports


async def test_a_running_pod_reports_allocated_and_actual_resources_for_its_containers_and_sidecars(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node())
    body = pod("web", {"cpu": "1", "memory": "1Gi"}, {"cpu": "2"})
    body["spec"]["initContainers"] = [
        {"name": "setup", "image": "busybox", "resources": {"requests": {"cpu": "3"}}},
        {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
    ]
    store.create(body)
    await settle(kubelet, 1)
    running = status(store, "web")
    assert running["phase"] == "Running" and running["observedGeneration"] == 1
    main = main_status(store, "web")
    assert main["allocatedResources"] == {"cpu": "1", "memory": "1Gi"}
    assert main["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}}
    assert main["ready"] and main["started"] and "running" in main["state"]
    setup, proxy = running["initContainerStatuses"]
    assert setup["name"] == "setup" and setup["state"]["terminated"]["reason"] == "Completed"
    assert "allocatedResources" not in setup and "resources" not in setup
    assert proxy["name"] == "proxy" and "running" in proxy["state"] and proxy["started"]
    assert proxy["allocatedResources"] == {"cpu": "500m"}
    assert proxy["resources"] == {"requests": {"cpu": "500m"}}


async def test_a_best_effort_container_reports_empty_resources_and_no_allocation(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node())
    store.create(pod("idle"))
    await settle(kubelet, 1)
    main = main_status(store, "idle")
    assert main["resources"] == {} and "allocatedResources" not in main


# ----------------------------------------------------------------------------------------- resizes the kubelet takes


async def test_a_resize_down_is_allocated_at_once_in_progress_until_actuated(store: Store, slow: FakeKubelet) -> None:
    store.create(node())
    store.create(pod("web", {"cpu": "2", "memory": "1Gi"}))
    await settle(slow, 1)
    resized = resize(store, "web", {"cpu": "1"})
    assert resized["metadata"]["generation"] == 2
    assert resized["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    await until(lambda: main_status(store, "web")["allocatedResources"] == {"cpu": "1", "memory": "1Gi"})
    in_progress = condition(store, "web", "PodResizeInProgress")
    assert in_progress is not None and in_progress["status"] == "True" and in_progress["observedGeneration"] == 2
    assert "reason" not in in_progress and condition(store, "web", "PodResizePending") is None
    assert main_status(store, "web")["resources"] == {"requests": {"cpu": "2", "memory": "1Gi"}}  # not yet applied
    assert status(store, "web")["observedGeneration"] == 2
    await until(lambda: condition(store, "web", "PodResizeInProgress") is None, SLOW + 2)
    assert main_status(store, "web")["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert slow.resized == 1
    assert status(store, "web")["phase"] == "Running" and main_status(store, "web")["restartCount"] == 0


async def test_a_resize_up_that_fits_is_allocated_and_actuated_with_its_limits(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(cpu="4"))
    store.create(pod("web", {"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "2Gi"}))
    await settle(kubelet, 1)
    resize(store, "web", {"cpu": "3"}, {"cpu": "4", "memory": "3Gi"})
    await until(lambda: kubelet.resized == 1)
    await until(lambda: main_status(store, "web")["resources"]["limits"] == {"cpu": "4", "memory": "3Gi"})
    main = main_status(store, "web")
    assert main["allocatedResources"] == {"cpu": "3", "memory": "1Gi"}
    assert main["resources"]["requests"] == {"cpu": "3", "memory": "1Gi"}
    assert condition(store, "web", "PodResizeInProgress") is None
    assert condition(store, "web", "PodResizePending") is None


async def test_a_sidecar_is_resized_like_a_container(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node())
    body = pod("web", {"cpu": "1"})
    body["spec"]["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                                       "resources": {"requests": {"cpu": "500m"}}}]
    store.create(body)
    await settle(kubelet, 1)
    store.patch("pods", "web", {"spec": {"initContainers": [{"name": "proxy", "resources": {
        "requests": {"cpu": "1500m"}}}]}}, "default", patch_type="strategic", subresource="resize", strict=True)
    await until(lambda: kubelet.resized == 1)
    await until(lambda: status(store, "web")["initContainerStatuses"][0]["resources"] == {
        "requests": {"cpu": "1500m"}})
    assert status(store, "web")["initContainerStatuses"][0]["allocatedResources"] == {"cpu": "1500m"}


async def test_a_resize_beyond_the_nodes_allocatable_is_infeasible_and_never_applied(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(cpu="4", memory="8Gi"))
    store.create(pod("web", {"cpu": "1", "memory": "1Gi"}))
    await settle(kubelet, 1)
    resize(store, "web", {"cpu": "8"})
    await until(lambda: condition(store, "web", "PodResizePending") is not None)
    pending = condition(store, "web", "PodResizePending")
    assert pending is not None
    assert (pending["status"], pending["reason"], pending["message"], pending["observedGeneration"]) == (
        "True", "Infeasible", "Node didn't have enough capacity: cpu, requested: 8000, capacity: 4000", 2)
    assert main_status(store, "web")["allocatedResources"] == {"cpu": "1", "memory": "1Gi"}
    assert condition(store, "web", "PodResizeInProgress") is None
    # Memory is told first when both fall short; a new resize is looked at anew.
    resize(store, "web", {"cpu": "6", "memory": "9Gi"})
    await until(lambda: (condition(store, "web", "PodResizePending") or {}).get("observedGeneration") == 3)
    pending = condition(store, "web", "PodResizePending")
    assert pending is not None and pending["message"] == (
        "Node didn't have enough capacity: memory, requested: 9663676416, capacity: 8589934592")
    assert kubelet.resized == 0
    # Back to what it was allocated: nothing pending any more.
    resize(store, "web", {"cpu": "1", "memory": "1Gi"})
    await until(lambda: condition(store, "web", "PodResizePending") is None)
    assert kubelet.resized == 0


async def test_a_resize_that_does_not_fit_beside_the_other_pods_is_deferred_until_a_neighbour_ends(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(cpu="4"))
    store.create(pod("web", {"cpu": "1"}))
    store.create(pod("batch", {"cpu": "2"}))
    await settle(kubelet, 2)
    resize(store, "web", {"cpu": "3"})
    await until(lambda: condition(store, "web", "PodResizePending") is not None)
    pending = condition(store, "web", "PodResizePending")
    assert pending is not None and (pending["reason"], pending["message"]) == (
        "Deferred", "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000")
    assert main_status(store, "web")["allocatedResources"] == {"cpu": "1"}
    store.delete("pods", "batch", "default", grace_period_seconds=0)
    await until(lambda: main_status(store, "web")["allocatedResources"] == {"cpu": "3"})
    assert condition(store, "web", "PodResizePending") is None
    await until(lambda: kubelet.resized == 1)
    await until(lambda: main_status(store, "web")["resources"] == {"requests": {"cpu": "3"}})


async def test_a_deferred_resize_goes_through_once_a_neighbour_resized_down_is_actuated(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(cpu="4"))
    store.create(pod("web", {"cpu": "1"}))
    store.create(pod("batch", {"cpu": "3"}))
    await settle(kubelet, 2)
    resize(store, "web", {"cpu": "2"})
    await until(lambda: (condition(store, "web", "PodResizePending") or {}).get("reason") == "Deferred")
    resize(store, "batch", {"cpu": "1"})
    await until(lambda: kubelet.resized == 2)  # batch's resize down, then web's deferred one
    await until(lambda: main_status(store, "web")["resources"] == {"requests": {"cpu": "2"}})
    assert condition(store, "web", "PodResizePending") is None


async def test_deferred_resizes_are_retried_higher_priority_first(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(cpu="4"))
    store.create(pod("early", {"cpu": "1"}))
    store.create(pod("important", {"cpu": "1"}, priority=100))
    store.create(pod("batch", {"cpu": "2"}))
    await settle(kubelet, 3)
    resize(store, "early", {"cpu": "3"})  # deferred first: the longest deferred, but of priority 0
    await until(lambda: condition(store, "early", "PodResizePending") is not None)
    resize(store, "important", {"cpu": "3"})
    await until(lambda: condition(store, "important", "PodResizePending") is not None)
    store.delete("pods", "batch", "default", grace_period_seconds=0)  # room for one of them
    await until(lambda: main_status(store, "important")["allocatedResources"] == {"cpu": "3"})
    pending = condition(store, "early", "PodResizePending")
    assert pending is not None and (pending["reason"], pending["message"]) == (
        "Deferred", "Node didn't have enough resource: cpu, requested: 3000, used: 3000, capacity: 4000")


# ----------------------------------------------------------------------------------------- what the kubelet counts


async def test_new_pods_are_admitted_against_the_allocated_requests_not_a_pending_spec(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(cpu="4"))
    store.create(pod("web", {"cpu": "1"}))
    await settle(kubelet, 1)
    resize(store, "web", {"cpu": "6"})  # infeasible: the spec asks 6, the kubelet allocated 1
    await until(lambda: condition(store, "web", "PodResizePending") is not None)
    store.create(pod("next", {"cpu": "3"}))
    await settle(kubelet, 2)
    assert phases(store) == {"next": "Running", "web": "Running"}


async def test_an_allocated_resize_up_counts_at_once_and_a_resize_down_only_once_actuated(
        store: Store, slow: FakeKubelet) -> None:
    message = "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
    store.create(node(cpu="4"))
    store.create(pod("web", {"cpu": "1"}))
    await settle(slow, 1)
    resize(store, "web", {"cpu": "3"})  # allocated at once: the node has 1 cpu left
    await until(lambda: condition(store, "web", "PodResizeInProgress") is not None)
    store.create(pod("up", {"cpu": "2"}))
    await settle(slow, 2)
    assert status(store, "up")["message"] == message
    await until(lambda: slow.resized == 1, SLOW + 2)
    resize(store, "web", {"cpu": "1"})  # allocated 1, still running with 3 until actuated
    await until(lambda: condition(store, "web", "PodResizeInProgress") is not None)
    store.create(pod("down", {"cpu": "2"}))
    await settle(slow, 3)
    assert status(store, "down")["message"] == message
    await until(lambda: slow.resized == 2, SLOW + 2)
    store.create(pod("after", {"cpu": "2"}))
    await settle(slow, 4)
    assert phases(store) == {"after": "Running", "down": "Failed", "up": "Failed", "web": "Running"}


async def test_a_restarted_kubelet_takes_a_running_pods_allocation_from_its_status(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(cpu="4"))
    store.create(pod("web", {"cpu": "1"}))
    await settle(kubelet, 1)
    resize(store, "web", {"cpu": "8"})  # infeasible: still allocated 1
    await until(lambda: condition(store, "web", "PodResizePending") is not None)
    kubelet.stop()
    restarted = FakeKubelet(store, delay=0.001, resize_delay=0.005)
    restarted.start()
    try:
        store.create(pod("next", {"cpu": "3"}))  # fits beside the 1 cpu allocated, not beside the spec's 8
        await settle(restarted, 1)
        assert phases(store)["next"] == "Running"
    finally:
        restarted.stop()


async def test_a_pod_loaded_running_with_its_quantities_written_otherwise_is_not_taken_for_a_resize(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(cpu="4"))
    body = pod("loaded", {"cpu": "0.5"}, {"memory": "1024Mi"})  # stored as 500m, and 1Gi requested from the limit
    body["status"] = running_status(body, "192.168.0.1", "10.0.0.9", "2026-01-01T00:00:00Z")
    version = store.create(body)["metadata"]["resourceVersion"]
    assert main_status(store, "loaded")["allocatedResources"] == {"cpu": "500m", "memory": "1Gi"}
    store.create(pod("next", {"cpu": "3500m"}))  # fits beside the 500m
    await settle(kubelet, 1)
    assert phases(store) == {"loaded": "Running", "next": "Running"}
    assert store.get("pods", "loaded", "default")["metadata"]["resourceVersion"] == version
    assert kubelet.resized == 0


# ----------------------------------------------------------------------------------------- the subresource's rules


def test_a_resize_keeps_only_the_containers_resources_and_drops_other_changes(store: Store) -> None:
    store.create(pod("web", {"cpu": "1"}, node_name=""))
    resized = store.patch("pods", "web", {"metadata": {"labels": {"tier": "gold"}}, "spec": {
        "activeDeadlineSeconds": 30, "containers": [{"name": "main", "image": "nginx",
                                                     "resources": {"requests": {"cpu": "2"}}}]}},
        "default", patch_type="strategic", subresource="resize", strict=True)
    assert resized["spec"]["containers"][0]["image"] == "busybox"
    assert resized["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2"}}
    assert "activeDeadlineSeconds" not in resized["spec"] and "labels" not in resized["metadata"]


@pytest.mark.parametrize(("patch", "cause"), [
    ({"requests": {"ephemeral-storage": "1Gi"}}, ("spec", "Forbidden: only cpu and memory resources are mutable")),
    ({"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}},  # Guaranteed to Burstable
     ("spec", 'Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing')),
])
def test_a_resize_may_change_only_cpu_and_memory_and_never_the_qos_class(
        store: Store, patch: dict[str, Any], cause: tuple[str, str]) -> None:
    store.create(pod("web", {"cpu": "2", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}, node_name=""))
    error = refusal(lambda: store.patch(
        "pods", "web", {"spec": {"containers": [{"name": "main", "resources": patch}]}}, "default",
        patch_type="strategic", subresource="resize", strict=True))
    assert (error.code, error.reason) == (422, "Invalid")
    assert error.message == f'Pod "web" is invalid: {cause[0]}: {cause[1]}'
    assert store.get("pods", "web", "default")["metadata"]["generation"] == 1


def test_a_resize_may_not_remove_requests_nor_touch_an_init_container(store: Store) -> None:
    body = pod("web", {"cpu": "1"}, {"memory": "1Gi"}, node_name="")  # requests memory defaulted from the limit
    body["spec"]["initContainers"] = [{"name": "setup", "image": "busybox",
                                       "resources": {"requests": {"cpu": "1"}}}]
    store.create(body)
    error = refusal(lambda: store.patch(
        "pods", "web", [{"op": "remove", "path": "/spec/containers/0/resources/requests"}], "default",
        patch_type="json", subresource="resize", strict=True))
    assert error.message == ('Pod "web" is invalid: spec.containers[0].resources.requests: Forbidden: resource '
                             'requests cannot be removed')
    error = refusal(lambda: store.patch(
        "pods", "web", {"spec": {"initContainers": [{"name": "setup", "resources": {"requests": {"cpu": "2"}}}]}},
        "default", patch_type="strategic", subresource="resize", strict=True))
    assert error.message == 'Pod "web" is invalid: spec: Forbidden: resources for non-sidecar init containers ' \
                            "are immutable"


def test_a_resize_refuses_pods_with_pod_level_resources_and_pods_on_nodes_without_resize(store: Store) -> None:
    store.create(pod("pod-level", {"cpu": "1"}, node_name="", resources={"requests": {"cpu": "2"}}))
    error = refusal(lambda: resize(store, "pod-level", {"cpu": "2"}))
    assert [c["message"] for c in (error.details or {})["causes"]] == [
        "Forbidden: pods with pod-level resources cannot be resized"]
    old = pod("old-node", {"cpu": "1"})
    old["status"] = {"phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {}}}]}
    store.create(old)
    error = refusal(lambda: resize(store, "old-node", {"cpu": "2"}))
    assert error.message == 'Pod "old-node" is invalid: spec: Forbidden: Pod running on node without support ' \
                            "for resize"


def test_a_memory_limit_may_decrease_as_1_34_allows(store: Store) -> None:
    store.create(pod("web", {"memory": "1Gi"}, {"memory": "4Gi"}, node_name=""))
    resized = resize(store, "web", limits={"memory": "2Gi"})
    assert resized["spec"]["containers"][0]["resources"]["limits"] == {"memory": "2Gi"}


def test_a_plain_pod_update_still_may_not_change_resources(store: Store) -> None:
    store.create(pod("web", {"cpu": "1"}, node_name=""))
    error = refusal(lambda: store.patch(
        "pods", "web", {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]}},
        "default", patch_type="strategic", strict=True))
    assert error.code == 422 and POD_UPDATE_FORBIDDEN in error.message
    assert store.get("pods", "web", "default")["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_discovery_lists_pods_resize_with_the_verbs_of_a_subresource_of_the_pod_itself() -> None:
    listed = json.loads(openapi.resource_list("", "v1") or b"{}")["resources"]
    assert {"name": "pods/resize", "singularName": "", "namespaced": True, "kind": "Pod",
            "verbs": ["get", "patch", "update"]} in listed
    aggregated = json.loads(openapi.aggregated(True))
    pods = next(r for v in aggregated["items"][0]["versions"] for r in v["resources"] if r["resource"] == "pods")
    assert {"subresource": "resize", "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
            "verbs": ["get", "patch", "update"]} in pods["subresources"]
