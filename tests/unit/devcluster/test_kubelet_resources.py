"""The fake kubelet's resource admission (kube-scheduler's noderesources Fits, as the kubelet's predicate admit
handler runs it over the pods it admitted on the node): a pod that does not fit what is left of its node's
allocatable is rejected, Failed with reason OutOf<resource> and the kubelet's message; first come first served,
until the pods holding the node's resources are terminal or gone."""

from __future__ import annotations

from typing import Any

from devcluster.kubelet import FakeKubelet
from devcluster.store import Store
from tests.unit.devcluster import test_kubelet_host_ports as host_port_tests
from tests.unit.devcluster.test_kubelet_host_ports import host, phases, settle

# The host-port tests' fixtures: a Store, and a FakeKubelet started on it (delay 1 ms).
store = host_port_tests.store
kubelet = host_port_tests.kubelet

GPU = "nvidia.com/gpu"
MESSAGE = "Pod was rejected: Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}"


def node(name: str = "node-a", allocatable: dict[str, str] | None = None, *,
         capacity: dict[str, str] | None = None) -> dict[str, Any]:
    """A node offering `allocatable` (110 pods unless it says otherwise), and `capacity` if given."""
    status: dict[str, Any] = {}
    if allocatable is not None:
        status["allocatable"] = {"pods": "110", **allocatable}
    if capacity is not None:
        status["capacity"] = capacity
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


def pod(name: str, node: str = "node-a", requests: dict[str, str] | None = None, *,
        init: list[tuple[dict[str, str], bool]] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod bound to `node` whose one container requests `requests`, with `init` containers (requests, whether
    it is a native sidecar: restartPolicy Always) in that order."""
    body = host_port_tests.pod(name, node, **spec)
    body["spec"]["containers"][0]["resources"] = {"requests": requests or {}}
    body["spec"]["initContainers"] = [
        {"name": f"init-{index}", "image": "busybox", "resources": {"requests": asks},
         **({"restartPolicy": "Always"} if sidecar else {})}
        for index, (asks, sidecar) in enumerate(init or [])]
    return body


def rejection(store: Store, name: str) -> tuple[str, str]:
    status = store.get("pods", name, "default")["status"]
    assert status["phase"] == "Failed"
    return status["reason"], status["message"]


async def test_a_second_pod_that_does_not_fit_the_gpus_left_is_rejected_out_of_nvidia_gpu(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(allocatable={"cpu": "8", "memory": "32Gi", GPU: "8"}))
    store.create(pod("first", requests={GPU: "6"}))
    store.create(pod("second", requests={GPU: "4"}))
    store.create(pod("third", requests={GPU: "2"}))  # what is left fits exactly
    await settle(kubelet, 3)
    assert phases(store) == {"first": "Running", "second": "Failed", "third": "Running"}
    assert (kubelet.started, kubelet.rejected) == (2, 1)
    assert rejection(store, "second") == (
        "OutOfnvidia.com/gpu",
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 4, used: 6, capacity: 8")
    status = store.get("pods", "second", "default")["status"]
    assert status["startTime"] and not {"podIP", "hostIP", "containerStatuses"} & set(status)


async def test_cpu_is_told_in_millicores_and_memory_in_bytes(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(allocatable={"cpu": "4", "memory": "1Gi"}))
    store.create(pod("first", requests={"cpu": "2500m", "memory": "512Mi"}))
    store.create(pod("cpu", requests={"cpu": "1.6"}))
    store.create(pod("memory", requests={"memory": "600Mi"}))
    await settle(kubelet, 3)
    assert phases(store) == {"cpu": "Failed", "first": "Running", "memory": "Failed"}
    assert rejection(store, "cpu") == ("OutOfcpu", MESSAGE.format("cpu", 1600, 2500, 4000))
    assert rejection(store, "memory") == ("OutOfmemory", MESSAGE.format("memory", 629145600, 536870912, 1073741824))


async def test_a_node_whose_pods_are_all_taken_rejects_the_next_out_of_pods(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(allocatable={"pods": "2", "cpu": "8"}))
    for name in ("one", "two", "three"):  # no requests at all: each still takes one of the node's pods
        store.create(pod(name))
    await settle(kubelet, 3)
    assert phases(store) == {"one": "Running", "three": "Failed", "two": "Running"}
    assert rejection(store, "three") == ("OutOfpods", MESSAGE.format("pods", 1, 2, 2))


async def test_native_sidecars_requests_add_up_with_the_containers_and_the_init_containers_after_them(
        store: Store, kubelet: FakeKubelet) -> None:
    for name in ("node-a", "node-b", "node-c"):
        store.create(node(name, {"cpu": "2"}))
    # Each would fit if its sidecar were counted as an init container (the largest of 1.5, 1 and 1).
    store.create(pod("beside-containers", "node-a", {"cpu": "1500m"}, init=[({"cpu": "1"}, True)]))
    store.create(pod("under-init", "node-b", {"cpu": "1"},
                     init=[({"cpu": "1"}, True), ({"cpu": "1500m"}, False)]))
    # An init container declared before the sidecar runs without it: max(1500m, 500m + 1) fits in 2.
    store.create(pod("before-sidecar", "node-c", {"cpu": "500m"},
                     init=[({"cpu": "1500m"}, False), ({"cpu": "1"}, True)]))
    await settle(kubelet, 3)
    assert phases(store) == {"before-sidecar": "Running", "beside-containers": "Failed", "under-init": "Failed"}
    assert rejection(store, "beside-containers") == ("OutOfcpu", MESSAGE.format("cpu", 2500, 0, 2000))
    assert rejection(store, "under-init") == ("OutOfcpu", MESSAGE.format("cpu", 2500, 0, 2000))


async def test_pod_level_requests_replace_the_containers_and_the_overhead_adds_to_them(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(allocatable={"cpu": "3"}))
    for name in ("first", "second"):  # containers 1 cpu, the pod 1.5, overhead 250m: 1750m each
        body = pod(name, requests={"cpu": "1"}, overhead={"cpu": "250m"})
        body["spec"]["resources"] = {"requests": {"cpu": "1500m"}}
        store.create(body)
    await settle(kubelet, 2)
    assert phases(store) == {"first": "Running", "second": "Failed"}
    assert rejection(store, "second") == ("OutOfcpu", MESSAGE.format("cpu", 1750, 1750, 3000))


async def test_a_finished_or_deleted_pod_frees_its_requests_and_a_terminating_one_holds_them_until_gone(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(allocatable={GPU: "8"}))
    store.create(pod("job", requests={GPU: "8"}))
    await settle(kubelet, 1)
    store.create(pod("too-early", requests={GPU: "8"}))
    await settle(kubelet, 2)
    job = store.get("pods", "job", "default")
    store.update({**job, "status": {**job["status"], "phase": "Succeeded"}}, subresource="status")
    held = pod("held", requests={GPU: "8"})
    held["metadata"]["finalizers"] = ["example.com/hold"]
    store.create(held)
    await settle(kubelet, 3)
    store.delete("pods", "held", "default", grace_period_seconds=0)  # terminating, kept by its finalizer
    store.create(pod("while-terminating", requests={GPU: "8"}))
    await settle(kubelet, 4)
    store.patch("pods", "held", {"metadata": {"finalizers": None}}, "default")
    assert store.find("pods", "held", "default") is None
    store.create(pod("after-held", requests={GPU: "8"}))
    await settle(kubelet, 5)
    store.delete("pods", "after-held", "default", grace_period_seconds=0)
    store.create(pod("after-deleted", requests={GPU: "8"}))
    await settle(kubelet, 6)
    assert phases(store) == {"after-deleted": "Running", "job": "Succeeded", "too-early": "Failed",
                             "while-terminating": "Failed"}
    assert rejection(store, "while-terminating") == ("OutOfnvidia.com/gpu", MESSAGE.format(GPU, 8, 8, 8))


async def test_pods_found_running_count_against_the_node_and_are_never_rejected(store: Store) -> None:
    store.create(node(allocatable={GPU: "8"}))
    for name, gpus in (("b-running", "6"), ("c-running", "4")):  # together over the node: both keep running
        running = pod(name, requests={GPU: gpus})
        running["status"] = {"phase": "Running"}
        store.create(running)
    store.create(pod("a-pending", requests={GPU: "1"}))  # listed first, but admitted after what already runs
    kubelet = FakeKubelet(store, delay=0.001)
    kubelet.start()
    try:
        await settle(kubelet, 1)
        store.create(pod("later", requests={GPU: "1"}))
        await settle(kubelet, 2)
        assert phases(store) == {"a-pending": "Failed", "b-running": "Running", "c-running": "Running",
                                 "later": "Failed"}
        assert (kubelet.started, kubelet.rejected) == (0, 2)
        assert rejection(store, "a-pending") == ("OutOfnvidia.com/gpu", MESSAGE.format(GPU, 1, 10, 8))
    finally:
        kubelet.stop()


async def test_a_node_without_a_resource_rejects_a_pod_asking_for_it_unless_it_is_an_extended_resource(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(allocatable={"cpu": "8"}))  # no memory, ephemeral-storage, hugepages or GPUs listed
    store.create(pod("hugepages", requests={"hugepages-2Mi": "4Mi"}))
    store.create(pod("storage", requests={"ephemeral-storage": "1Gi"}))
    store.create(pod("none-of-it", requests={"memory": "0", "cpu": "1"}))  # asking 0 of it is fine
    # An extended resource the node does not list is not checked (the kubelet's removeMissingExtendedResources).
    store.create(pod("gpu", requests={GPU: "1"}))
    await settle(kubelet, 4)
    assert phases(store) == {"gpu": "Running", "hugepages": "Failed", "none-of-it": "Running", "storage": "Failed"}
    assert rejection(store, "hugepages") == ("OutOfhugepages-2Mi", MESSAGE.format("hugepages-2Mi", 4194304, 0, 0))
    assert rejection(store, "storage") == ("OutOfephemeral-storage",
                                           MESSAGE.format("ephemeral-storage", 1073741824, 0, 0))


async def test_a_node_without_allocatable_offers_its_capacity(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node("by-capacity", capacity={"pods": "110", GPU: "2"}))
    store.create(node("by-allocatable", {GPU: "1"}, capacity={"pods": "110", GPU: "8"}))
    for name, where in (("c-1", "by-capacity"), ("c-2", "by-capacity"), ("a-1", "by-allocatable"),
                        ("a-2", "by-allocatable")):
        store.create(pod(name, where, {GPU: "1"}))
    await settle(kubelet, 4)
    assert phases(store) == {"a-1": "Running", "a-2": "Failed", "c-1": "Running", "c-2": "Running"}
    assert rejection(store, "a-2") == ("OutOfnvidia.com/gpu", MESSAGE.format(GPU, 1, 1, 1))


async def test_a_pod_bound_to_a_node_that_does_not_exist_still_runs(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(allocatable={"cpu": "1", GPU: "1"}))
    for name, where in (("on-ghost", "ghost"), ("on-node", "node-a")):
        store.create(pod(name, where, {"cpu": "64", GPU: "8"}))
    await settle(kubelet, 2)
    assert phases(store) == {"on-ghost": "Running", "on-node": "Failed"}


async def test_the_first_failure_in_the_kubelets_order_is_told_resources_before_host_ports(
        store: Store, kubelet: FakeKubelet) -> None:
    full = {"cpu": "1", "memory": "1Gi", GPU: "1"}
    store.create(node("one-pod", {**full, "pods": "1"}))
    store.create(node("node-b", full))
    store.create(pod("holder", "one-pod", full, ports=host()))
    store.create(pod("everything", "one-pod", full, ports=host()))  # pods, cpu, memory, GPU and port: pods
    store.create(pod("b-holder", "node-b", full, ports=host()))
    store.create(pod("b-cpu", "node-b", full, ports=host()))
    store.create(pod("b-memory", "node-b", {"memory": "1", GPU: "1"}, ports=host()))
    store.create(pod("b-gpu", "node-b", {GPU: "1"}, ports=host()))
    store.create(pod("b-port", "node-b", ports=host()))
    await settle(kubelet, 7)
    assert {name: rejection(store, name)[0] for name in ("everything", "b-cpu", "b-memory", "b-gpu", "b-port")} == {
        "everything": "OutOfpods", "b-cpu": "OutOfcpu", "b-memory": "OutOfmemory", "b-gpu": "OutOfnvidia.com/gpu",
        "b-port": "NodePorts"}
    assert phases(store)["holder"] == phases(store)["b-holder"] == "Running"


async def test_the_node_is_read_when_the_pod_is_admitted(store: Store, kubelet: FakeKubelet) -> None:
    store.create(node(allocatable={GPU: "1"}))
    store.create(pod("first", requests={GPU: "1"}))
    store.create(pod("before-growth", requests={GPU: "1"}))
    await settle(kubelet, 2)
    grown = store.get("nodes", "node-a")
    store.update({**grown, "status": {**grown["status"], "allocatable": {"pods": "110", GPU: "2"}}},
                 subresource="status")
    store.create(pod("after-growth", requests={GPU: "1"}))
    await settle(kubelet, 3)
    assert phases(store) == {"after-growth": "Running", "before-growth": "Failed", "first": "Running"}
