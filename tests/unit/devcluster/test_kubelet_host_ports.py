"""The fake kubelet's admission of host ports (kube-scheduler's NodePorts, as the kubelet runs it): a pod whose
containers' host ports conflict with a pod already admitted on its node is rejected, Failed with the kubelet's
reason and message; first come first served, until the holder is terminal or gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from devcluster.kubelet import FakeKubelet
from devcluster.store import Store

PORT = 29500
MESSAGE = "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"


def pod(name: str, node: str = "node-a", ports: list[dict[str, Any]] | None = None, *,
        init_ports: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod bound to `node` (unbound if empty) whose one container has `ports` (and, with `init_ports`, an
    init container with those)."""
    body: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox", "ports": ports or []}], **spec}
    if init_ports is not None:
        body["initContainers"] = [{"name": "warmup", "image": "busybox", "ports": init_ports}]
    if node:
        body["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": body}


def host(port: int = PORT, **fields: Any) -> list[dict[str, Any]]:
    return [{"containerPort": port, "hostPort": port, **fields}]


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
async def kubelet(store: Store) -> AsyncIterator[FakeKubelet]:
    started = FakeKubelet(store, delay=0.001)
    started.start()
    yield started
    started.stop()


async def until(check: Callable[[], bool], seconds: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.002)


async def settle(kubelet: FakeKubelet, outcomes: int) -> None:
    """Wait until the kubelet has written `outcomes` starts and rejections in all."""
    await until(lambda: kubelet.started + kubelet.rejected >= outcomes)


def phases(store: Store) -> dict[str, str]:
    return {p["metadata"]["name"]: p["status"].get("phase") for p in store.list("pods", "default")}


async def test_a_second_pod_holding_the_same_host_port_on_the_node_is_rejected_as_the_kubelet_rejects_it(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(pod("first", "", host()))
    store.create(pod("second", "", host()))
    store.create(pod("elsewhere", "node-b", host()))
    store.bind("default", "first", "node-a")
    store.bind("default", "second", "node-a")
    await settle(kubelet, 3)
    assert phases(store) == {"elsewhere": "Running", "first": "Running", "second": "Failed"}
    assert (kubelet.started, kubelet.rejected) == (2, 1)
    status = store.get("pods", "second", "default")["status"]
    assert (status["reason"], status["message"]) == ("NodePorts", MESSAGE)
    # rejectPod's status: a startTime from the status manager, the binding's condition kept, nothing of a
    # started pod (no Ready / ContainersReady, no pod IP, no container statuses).
    assert status["startTime"]
    assert [c["type"] for c in status["conditions"]] == ["PodScheduled"]
    assert not {"podIP", "hostIP", "containerStatuses"} & set(status)


async def test_the_same_port_of_another_protocol_does_not_conflict(store: Store, kubelet: FakeKubelet) -> None:
    store.create(pod("tcp", ports=[{"containerPort": PORT, "hostPort": PORT}]))  # TCP by default
    store.create(pod("udp", ports=host(protocol="UDP")))
    store.create(pod("sctp", ports=host(protocol="SCTP")))
    store.create(pod("tcp-again", ports=host(protocol="TCP")))
    await settle(kubelet, 4)
    assert phases(store) == {"sctp": "Running", "tcp": "Running", "tcp-again": "Failed", "udp": "Running"}


async def test_two_host_ips_share_a_port_but_the_wildcard_address_conflicts_with_either(
        store: Store, kubelet: FakeKubelet) -> None:
    store.create(pod("one", ports=host(hostIP="10.0.0.1")))
    store.create(pod("two", ports=host(hostIP="10.0.0.2")))
    store.create(pod("any", ports=host()))  # no hostIP: 0.0.0.0
    store.create(pod("one-again", ports=host(hostIP="10.0.0.1")))
    # And the other way round: a specific address conflicts with a 0.0.0.0 already held.
    store.create(pod("wildcard", "node-b", host(hostIP="0.0.0.0")))
    store.create(pod("specific", "node-b", host(hostIP="10.0.0.3")))
    await settle(kubelet, 6)
    assert phases(store) == {"any": "Failed", "one": "Running", "one-again": "Failed", "specific": "Failed",
                             "two": "Running", "wildcard": "Running"}
    assert kubelet.rejected == 3


async def test_a_pod_on_the_host_network_holds_its_container_ports(store: Store, kubelet: FakeKubelet) -> None:
    store.create(pod("holder", ports=host()))
    created = store.create(pod("host-network", ports=[{"containerPort": PORT}], hostNetwork=True))
    assert created["spec"]["containers"][0]["ports"][0]["hostPort"] == PORT  # the API server's defaulting
    store.create(pod("plain", ports=[{"containerPort": PORT}]))  # a container port alone holds nothing
    await settle(kubelet, 3)
    assert phases(store) == {"holder": "Running", "host-network": "Failed", "plain": "Running"}


async def test_a_terminating_pod_holds_its_port_until_it_is_gone(store: Store, kubelet: FakeKubelet) -> None:
    first = pod("first", ports=host())
    first["metadata"]["finalizers"] = ["example.com/hold"]
    store.create(first)
    await settle(kubelet, 1)
    store.delete("pods", "first", "default", grace_period_seconds=0)  # terminating, kept by its finalizer
    assert store.get("pods", "first", "default")["metadata"]["deletionTimestamp"]
    store.create(pod("while-terminating", ports=host()))
    await settle(kubelet, 2)
    store.patch("pods", "first", {"metadata": {"finalizers": None}}, "default")
    assert store.find("pods", "first", "default") is None
    store.create(pod("after", ports=host()))
    await settle(kubelet, 3)
    assert phases(store) == {"after": "Running", "while-terminating": "Failed"}


async def test_a_finished_pod_no_longer_holds_its_port(store: Store, kubelet: FakeKubelet) -> None:
    store.create(pod("job", ports=host()))
    await settle(kubelet, 1)
    store.create(pod("too-early", ports=host()))
    await settle(kubelet, 2)
    job = store.get("pods", "job", "default")
    store.update({**job, "status": {**job["status"], "phase": "Succeeded"}}, subresource="status")
    store.create(pod("next", ports=host()))
    await settle(kubelet, 3)
    assert phases(store) == {"job": "Succeeded", "next": "Running", "too-early": "Failed"}


async def test_an_init_containers_host_port_is_not_held(store: Store, kubelet: FakeKubelet) -> None:
    store.create(pod("init-only", init_ports=host()))
    store.create(pod("main", ports=host()))
    store.create(pod("init-again", init_ports=host()))
    store.create(pod("main-again", ports=host(), init_ports=[]))
    await settle(kubelet, 4)
    assert phases(store) == {"init-again": "Running", "init-only": "Running", "main": "Running",
                             "main-again": "Failed"}


async def test_pods_found_running_hold_their_ports_before_the_kubelet_admits_pending_ones(store: Store) -> None:
    running = pod("b-running", ports=host())
    running["status"] = {"phase": "Running"}
    store.create(running)
    store.create(pod("a-pending", ports=host()))  # listed first, but admitted after what already runs
    kubelet = FakeKubelet(store, delay=0.001)
    kubelet.start()
    try:
        await settle(kubelet, 1)
        assert phases(store) == {"a-pending": "Failed", "b-running": "Running"}
        assert (kubelet.started, kubelet.rejected) == (0, 1)
    finally:
        kubelet.stop()
