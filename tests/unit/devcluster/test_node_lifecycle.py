"""The node lifecycle controller's taints and the taint eviction controller, as kube-controller-manager runs them:
NoSchedule taints from the node's conditions and spec.unschedulable, not-ready / unreachable NoExecute taints under
the zone disruption rules, users' taints kept; pods not tolerating a NoExecute taint marked DisruptionTarget
(DeletionByTaintManager) and deleted with their grace period, at once or after their tolerationSeconds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from devcluster.cluster import DevCluster
from devcluster.kubelet import FakeKubelet
from devcluster.node_lifecycle import (
    DELETION_BY_TAINT_MANAGER,
    TAINT_MANAGER_MESSAGE,
    NodeLifecycleController,
    TaintEvictionController,
)
from devcluster.store import Store
from devcluster.watch import WatchEvent

NOT_READY, UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
READY = [{"type": "Ready", "status": "True"}]


class Controllers:
    def __init__(self, store: Store) -> None:
        self.lifecycle = NodeLifecycleController(store)
        self.eviction = TaintEvictionController(store)


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
async def controllers(store: Store) -> AsyncIterator[Controllers]:
    started = Controllers(store)
    started.lifecycle.start()
    started.eviction.start()
    yield started
    started.eviction.stop()
    started.lifecycle.stop()


def node(store: Store, name: str, conditions: list[dict[str, Any]] | None = READY, *, zone: str = "",
         **spec: Any) -> dict[str, Any]:
    labels = {"topology.kubernetes.io/zone": zone} if zone else {}
    status = {"conditions": conditions} if conditions is not None else {}
    return store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                         "spec": spec, "status": status})


def pod(store: Store, name: str, on: str = "n1", tolerations: list[dict[str, Any]] | None = None,
        grace: int = 0) -> dict[str, Any]:
    """A pod running on `on` (unbound if empty); created as the API server admits it, so DefaultTolerationSeconds
    adds not-ready / unreachable NoExecute tolerations of 300 s to those it does not tolerate already."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}],
                            "terminationGracePeriodSeconds": grace, "tolerations": tolerations or []}
    status: dict[str, Any] = {"phase": "Pending"}
    if on:
        spec["nodeName"] = on
        status = {"phase": "Running"}
    return store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                         "spec": spec, "status": status})


def tolerating(key: str, seconds: int | None = None) -> dict[str, Any]:
    toleration: dict[str, Any] = {"key": key, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return toleration


def set_conditions(store: Store, name: str, **statuses: str) -> None:
    """Replace the node's conditions: `Ready="False", MemoryPressure="True"`, as its kubelet would post them."""
    conditions = [{"type": kind, "status": status} for kind, status in statuses.items()]
    store.patch("nodes", name, {"status": {"conditions": conditions}}, subresource="status")


def taints(store: Store, name: str) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in store.get("nodes", name).get("spec", {}).get("taints") or []]


def gone(store: Store, name: str) -> bool:
    """Deleted, or being deleted."""
    found = store.find("pods", name, "default")
    return found is None or bool(found["metadata"].get("deletionTimestamp"))


async def until(check: Callable[[], bool], seconds: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met before the deadline"
        await asyncio.sleep(0.005)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


# --------------------------------------------------------------------------- taints from conditions and spec


@pytest.mark.parametrize(("kind", "bad", "good", "key"), [
    ("Ready", "False", "True", NOT_READY),
    ("Ready", "Unknown", "True", UNREACHABLE),
    ("MemoryPressure", "True", "False", "node.kubernetes.io/memory-pressure"),
    ("DiskPressure", "True", "False", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "True", "False", "node.kubernetes.io/pid-pressure"),
    ("NetworkUnavailable", "True", "False", "node.kubernetes.io/network-unavailable"),
])
async def test_each_condition_taint_comes_and_goes_with_its_condition(
        store: Store, controllers: Controllers, kind: str, bad: str, good: str, key: str) -> None:
    node(store, "n1")
    node(store, "n2")  # a Ready node: the zone is not fully disrupted when n1 is not Ready
    await settle()
    assert taints(store, "n1") == []
    statuses = {"Ready": "True", kind: bad}
    set_conditions(store, "n1", **statuses)
    expected = [(key, "NoSchedule")] + ([(key, "NoExecute")] if kind == "Ready" else [])
    await until(lambda: taints(store, "n1") == expected)
    stored = store.get("nodes", "n1")["spec"]["taints"]
    assert all(t["timeAdded"] for t in stored)  # SwapNodeControllerTaint stamps every taint it adds
    set_conditions(store, "n1", **{**statuses, kind: good})
    await until(lambda: taints(store, "n1") == [])
    assert "taints" not in store.get("nodes", "n1")["spec"]
    assert taints(store, "n2") == []


async def test_users_taints_are_kept_in_place_and_only_changes_are_written(
        store: Store, controllers: Controllers) -> None:
    users = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
             {"key": "maintenance", "effect": "PreferNoSchedule"},
             {"key": "example.com/drain", "value": "soon", "effect": "NoExecute"}]
    node(store, "n1", taints=users)
    await settle()
    assert controllers.lifecycle.writes == 0  # nothing of the controller's to change: no write
    set_conditions(store, "n1", Ready="True", MemoryPressure="True")
    await until(lambda: len(taints(store, "n1")) == 4)
    spec_taints = store.get("nodes", "n1")["spec"]["taints"]
    assert spec_taints[:3] == users
    assert (spec_taints[3]["key"], spec_taints[3]["effect"]) == ("node.kubernetes.io/memory-pressure", "NoSchedule")
    await settle()
    assert controllers.lifecycle.writes == 1  # its own write's event finds nothing more to do
    set_conditions(store, "n1", Ready="True", MemoryPressure="False")
    await until(lambda: store.get("nodes", "n1")["spec"]["taints"] == users)
    assert controllers.lifecycle.writes == 2


async def test_spec_unschedulable_gives_the_unschedulable_taint(store: Store, controllers: Controllers) -> None:
    node(store, "n1", taints=[{"key": "maintenance", "value": "drain", "effect": "NoSchedule"}])
    store.patch("nodes", "n1", {"spec": {"unschedulable": True}})  # kubectl cordon
    await until(lambda: taints(store, "n1") == [("maintenance", "NoSchedule"), (UNSCHEDULABLE, "NoSchedule")])
    store.patch("nodes", "n1", {"spec": {"unschedulable": False}})  # kubectl uncordon
    await until(lambda: taints(store, "n1") == [("maintenance", "NoSchedule")])


async def test_a_controller_taint_no_condition_calls_for_is_removed(store: Store, controllers: Controllers) -> None:
    # As a node TaintNodesAtCreation admitted, then found Ready: the controller owns these keys.
    node(store, "n1", taints=[{"key": NOT_READY, "effect": "NoSchedule"}, {"key": "team", "effect": "NoSchedule"},
                              {"key": UNREACHABLE, "effect": "NoExecute"}])
    await until(lambda: taints(store, "n1") == [("team", "NoSchedule")])


async def test_a_node_registered_by_the_fake_kubelet_never_carries_a_not_ready_taint(store: Store) -> None:
    versions: list[dict[str, Any]] = []

    def record(event: WatchEvent) -> None:
        if event.key == "nodes":
            versions.append(event.obj)

    store.subscribe(record)
    kubelet = FakeKubelet(store, delay=0.001)
    kubelet.start()
    controllers = Controllers(store)
    controllers.lifecycle.start()
    controllers.eviction.start()
    try:
        node(store, "fresh", conditions=None)
        node(store, "cordoned", conditions=None, unschedulable=True)
        await until(lambda: all(store.get("nodes", name).get("status", {}).get("conditions")
                                for name in ("fresh", "cordoned")))
        await until(lambda: taints(store, "cordoned") == [(UNSCHEDULABLE, "NoSchedule")])
        await settle()
    finally:
        controllers.eviction.stop()
        controllers.lifecycle.stop()
        kubelet.stop()
    assert taints(store, "fresh") == []
    seen = {(t["key"], t["effect"]) for v in versions for t in v.get("spec", {}).get("taints") or []}
    assert seen == {(UNSCHEDULABLE, "NoSchedule")}


# --------------------------------------------------------------------------- taint-based eviction


async def test_a_pod_not_tolerating_a_no_execute_taint_is_marked_then_deleted_with_its_grace_period(
        store: Store, controllers: Controllers) -> None:
    node(store, "n1")
    pod(store, "victim", grace=7)
    pod(store, "elsewhere", on="n2")
    versions: list[dict[str, Any]] = []
    store.subscribe(lambda event: versions.append(event.obj) if event.key == "pods" else None)
    store.patch("nodes", "n1", {"spec": {"taints": [{"key": "example.com/drain", "effect": "NoExecute"}]}})
    await until(lambda: gone(store, "victim"))
    ours = [v for v in versions if v["metadata"]["name"] == "victim"]
    marked = next(v for v in ours if any(c["type"] == "DisruptionTarget" for c in v["status"].get("conditions", [])))
    assert not marked["metadata"].get("deletionTimestamp")  # the condition is written first, then the deletion
    (condition,) = [c for c in marked["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (condition["status"], condition["reason"], condition["message"]) == \
        ("True", DELETION_BY_TAINT_MANAGER, TAINT_MANAGER_MESSAGE)
    assert condition["observedGeneration"] == marked["metadata"]["generation"] == 1  # as the taint manager writes it
    deleted = store.get("pods", "victim", "default")
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 7  # the pod's own grace period
    assert not gone(store, "elsewhere")
    assert controllers.eviction.evicted == 1


async def test_a_pod_created_without_tolerations_gets_300_seconds_on_a_node_turning_not_ready(
        store: Store, controllers: Controllers) -> None:
    node(store, "n1")
    node(store, "n2")
    created = pod(store, "defaulted")
    assert {(t["key"], t.get("tolerationSeconds")) for t in created["spec"]["tolerations"]} == \
        {(NOT_READY, 300), (UNREACHABLE, 300)}  # DefaultTolerationSeconds
    set_conditions(store, "n1", Ready="False")
    await until(lambda: ("default", "defaulted") in controllers.eviction.pending)
    due = controllers.eviction.pending[("default", "defaulted")] - asyncio.get_running_loop().time()
    assert 299 < due <= 300
    assert (NOT_READY, "NoExecute") in taints(store, "n1")
    assert not gone(store, "defaulted")


async def test_a_pod_tolerating_not_ready_for_0_seconds_is_deleted_when_its_node_turns_not_ready(
        store: Store, controllers: Controllers) -> None:
    node(store, "n1")
    node(store, "n2")
    pod(store, "at-once", tolerations=[tolerating(NOT_READY, 0)])
    pod(store, "other-node", on="n2", tolerations=[tolerating(NOT_READY, 0)])
    set_conditions(store, "n1", Ready="False")
    await until(lambda: store.find("pods", "at-once", "default") is None)
    assert not gone(store, "other-node")


async def test_a_pod_tolerating_for_1_second_is_deleted_after_it(store: Store, controllers: Controllers) -> None:
    node(store, "n1")
    node(store, "n2")
    pod(store, "short", tolerations=[tolerating(NOT_READY, 1)])
    loop = asyncio.get_running_loop()
    set_conditions(store, "n1", Ready="False")
    started = loop.time()
    await until(lambda: ("default", "short") in controllers.eviction.pending)
    await asyncio.sleep(0.6)
    assert not gone(store, "short")
    await until(lambda: gone(store, "short"), seconds=2.0)
    assert 0.95 <= loop.time() - started < 1.5


async def test_a_pod_tolerating_without_toleration_seconds_stays(store: Store, controllers: Controllers) -> None:
    node(store, "n1")
    node(store, "n2")
    pod(store, "forever", tolerations=[tolerating(NOT_READY)])
    pod(store, "brief", tolerations=[tolerating(NOT_READY, 0)])
    set_conditions(store, "n1", Ready="False")
    await until(lambda: gone(store, "brief"))
    await asyncio.sleep(0.2)
    assert not gone(store, "forever")
    assert ("default", "forever") not in controllers.eviction.pending


async def test_the_taint_going_away_before_the_time_keeps_the_pod(store: Store, controllers: Controllers) -> None:
    node(store, "n1")
    node(store, "n2")
    pod(store, "survivor", tolerations=[tolerating(NOT_READY, 1)])
    set_conditions(store, "n1", Ready="False")
    await until(lambda: ("default", "survivor") in controllers.eviction.pending)
    await asyncio.sleep(0.3)
    set_conditions(store, "n1", Ready="True")
    await until(lambda: taints(store, "n1") == [])
    assert controllers.eviction.pending == {}
    await asyncio.sleep(1.0)
    survivor = store.get("pods", "survivor", "default")
    assert not survivor["metadata"].get("deletionTimestamp")
    assert all(c["type"] != "DisruptionTarget" for c in survivor["status"].get("conditions", []))


async def test_not_ready_turning_unreachable_swaps_the_taint_and_keeps_the_eviction_clock(
        store: Store, controllers: Controllers) -> None:
    node(store, "n1")
    node(store, "n2")
    pod(store, "clocked", tolerations=[tolerating(NOT_READY, 1), tolerating(UNREACHABLE, 1)])
    loop = asyncio.get_running_loop()
    set_conditions(store, "n1", Ready="False")
    started = loop.time()
    await until(lambda: ("default", "clocked") in controllers.eviction.pending)
    await asyncio.sleep(0.5)
    set_conditions(store, "n1", Ready="Unknown")
    await until(lambda: taints(store, "n1") == [(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")])
    await until(lambda: gone(store, "clocked"))
    assert loop.time() - started < 1.4  # from when it was first seen under a taint, not from the swap


async def test_a_pod_bound_to_a_node_already_tainted_is_deleted(store: Store, controllers: Controllers) -> None:
    node(store, "n1", taints=[{"key": "example.com/drain", "effect": "NoExecute"}])
    pod(store, "late", on="")
    await settle()
    store.bind("default", "late", "n1")
    await until(lambda: gone(store, "late"))


# --------------------------------------------------------------------------- zone disruption


async def test_every_node_not_ready_is_a_full_disruption_and_evicts_nothing(
        store: Store, controllers: Controllers) -> None:
    node(store, "n1")
    pod(store, "kept", tolerations=[tolerating(NOT_READY, 0)])
    set_conditions(store, "n1", Ready="False")
    await until(lambda: taints(store, "n1") == [(NOT_READY, "NoSchedule")])
    await asyncio.sleep(0.1)
    assert taints(store, "n1") == [(NOT_READY, "NoSchedule")]  # no NoExecute taint: the master is presumed cut off
    assert not gone(store, "kept")
    node(store, "n2")  # a Ready node: the zone is no longer fully disrupted
    await until(lambda: store.find("pods", "kept", "default") is None)
    assert taints(store, "n1") == [(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")]


async def test_a_fully_disrupted_zone_beside_a_healthy_one_is_tainted(store: Store, controllers: Controllers) -> None:
    node(store, "a1", zone="a")
    node(store, "b1", zone="b")
    set_conditions(store, "a1", Ready="False")
    await until(lambda: taints(store, "a1") == [(NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute")])
    set_conditions(store, "b1", Ready="Unknown")  # now every zone is fully disrupted: all NoExecute taints go
    await until(lambda: taints(store, "a1") == [(NOT_READY, "NoSchedule")]
                and taints(store, "b1") == [(UNREACHABLE, "NoSchedule")])


async def test_a_partially_disrupted_small_zone_gets_no_new_no_execute_taint(
        store: Store, controllers: Controllers) -> None:
    for name in ("n1", "n2", "n3", "n4"):
        node(store, name)
    await settle()
    for name in ("n1", "n2", "n3"):  # 3 of 4 not Ready: more than 2 and at least 55 %
        set_conditions(store, name, Ready="False")
    await until(lambda: all(taints(store, name) == [(NOT_READY, "NoSchedule")] for name in ("n1", "n2", "n3")))
    await asyncio.sleep(0.1)
    assert all((NOT_READY, "NoExecute") not in taints(store, name) for name in ("n1", "n2", "n3"))
    set_conditions(store, "n3", Ready="True")  # 2 of 4: a normal zone again
    await until(lambda: all((NOT_READY, "NoExecute") in taints(store, name) for name in ("n1", "n2")))
    assert taints(store, "n3") == []


# --------------------------------------------------------------------------- DevCluster


async def test_devcluster_runs_both_controllers_unless_told_not_to() -> None:
    async with DevCluster(kubelet_delay=0.001) as cluster:
        assert cluster.node_lifecycle is not None and cluster.node_lifecycle.running
        assert cluster.taint_eviction is not None and cluster.taint_eviction.running
        cluster.load_objects([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}])
        await until(lambda: bool(cluster.store.get("nodes", "n1").get("status", {}).get("conditions")))
        cluster.store.patch("nodes", "n1", {"spec": {"unschedulable": True}})
        await until(lambda: taints(cluster.store, "n1") == [(UNSCHEDULABLE, "NoSchedule")])
    off = DevCluster(node_lifecycle=False)
    assert off.node_lifecycle is None and off.taint_eviction is None
