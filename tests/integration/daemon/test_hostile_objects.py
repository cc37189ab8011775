"""Hostile objects against the real daemon on devcluster: they are reported, they wait, and nothing else stops.

Each case loads the objects, then a canary gang that must still bind; the daemon must still be
running, also after a restart (and a takeover by the standby) with the hostile objects still there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import DevCluster
from devcluster.resources import ResourceDef
from devcluster.store import Store
from tests.integration.daemon.harness import (
    NAMESPACE,
    RunningDaemon,
    bound_count,
    daemons,
    gang,
    nodes,
    pod,
    pod_names,
    wait_until,
)

# The hostile requests: each overflowed the shape encoding and killed the daemon.
HOSTILE = {"gpu-1e18": ("nvidia.com/gpu", "1e18"), "memory-20pi": ("memory", "20Pi"),
           "cpu-40-digits": ("cpu", "9" * 40)}


def with_request(manifest: dict[str, Any], resource: str, quantity: str) -> dict[str, Any]:
    """`manifest` asking for `quantity` of `resource`, limited to its requests (as extended resources must be)."""
    resources = manifest["spec"]["containers"][0]["resources"]
    resources["requests"][resource] = quantity
    resources["limits"] = dict(resources["requests"])
    return manifest


def hostile_objects() -> list[dict[str, Any]]:
    """A lone pod per hostile request, and a gang of two asking for the same."""
    objects: list[dict[str, Any]] = []
    for name, (resource, quantity) in HOSTILE.items():
        members = gang(f"gang-{name}", 2)
        for manifest in members[1:]:
            with_request(manifest, resource, quantity)
        objects += [with_request(pod(name), resource, quantity), *members]
    return objects


def load_as_a_real_server_would(cluster: DevCluster, objects: list[dict[str, Any]]) -> None:
    refused: list[str] = []
    cluster.load_objects(objects, warnings=refused)
    assert refused == [], "these objects must be ones a real API server accepts"


def events_about(cluster: DevCluster, name: str) -> list[dict[str, Any]]:
    return [e for e in cluster.store.list("events", NAMESPACE) if e["involvedObject"]["name"] == name]


def warned(cluster: DevCluster, name: str, words: str) -> bool:
    return any(e["type"] == "Warning" and words in e["message"] for e in events_about(cluster, name))


def pod_condition(cluster: DevCluster, name: str) -> str:
    found = cluster.store.find("pods", name, NAMESPACE) or {}
    conditions = found.get("status", {}).get("conditions", [])
    return next((c["message"] for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), "")


async def canary_binds(cluster: DevCluster, name: str, running: list[RunningDaemon]) -> None:
    canary = gang(name, 4)
    cluster.load_objects(canary)
    await wait_until(lambda: bound_count(cluster, pod_names(canary)) == 4, within=15, what=f"canary {name} bound")
    assert not any(d.finished.is_set() for d in running), "a daemon stopped"


async def test_hostile_quantities_wait_with_the_resource_named_and_a_canary_binds_also_after_restarts(
        tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8))
        async with daemons(cluster, tmp_path) as running:
            load_as_a_real_server_would(cluster, hostile_objects())
            await canary_binds(cluster, "canary", running)
            for name, (resource, _) in HOSTILE.items():
                await wait_until(lambda n=name, r=resource: warned(cluster, n, f"Insufficient {r}")  # type: ignore[misc]
                                 and warned(cluster, f"gang-{n}", f"Insufficient {r}"),
                                 within=15, what=f"Warning Events for {name}")
                assert f"Insufficient {resource}" in pod_condition(cluster, name)
            hostile = [m["metadata"]["name"] for m in hostile_objects() if m["kind"] == "Pod"]
            assert bound_count(cluster, hostile) == 0
            assert not running[0].daemon.journal.internal_errors  # type: ignore[union-attr]

        # A restart folds the log holding the hostile pods and relists them: it must come up and schedule.
        async with daemons(cluster, tmp_path) as running:
            await canary_binds(cluster, "canary-after-restart", running)
            assert bound_count(cluster, hostile) == 0


async def test_the_standby_takes_over_with_hostile_pods_present_and_goes_on_scheduling(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8))
        load_as_a_real_server_would(cluster, hostile_objects())
        async with daemons(cluster, tmp_path, count=2, election=True) as pair:
            await wait_until(lambda: any(d.is_leader for d in pair), what="a leader")
            leader = next(d for d in pair if d.is_leader)
            standby = next(d for d in pair if d is not leader)
            await canary_binds(cluster, "canary", pair)
            leader.kill()
            await wait_until(lambda: standby.is_leader, within=5, what="the standby to take over")
            await canary_binds(cluster, "canary-after-takeover", [standby])


def admitted_unchecked(monkeypatch: pytest.MonkeyPatch, names: set[str]) -> None:
    """Make devcluster store these objects as written: a server that does not validate (an old or
    aggregated API server, a CRD without a schema) may hand the daemon anything."""
    admit = Store._admit

    def admit_unless_named(store: Store, resource: ResourceDef, obj: dict[str, Any], **options: Any) -> Any:
        if obj.get("metadata", {}).get("name") in names:
            return obj
        return admit(store, resource, obj, **options)

    monkeypatch.setattr(Store, "_admit", admit_unless_named)


async def test_objects_the_daemon_cannot_use_get_a_warning_naming_the_field_a_count_and_are_not_placed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lone = with_request(pod("bad-quantity"), "nvidia.com/gpu", "eight")
    job = gang("job", 2)
    with_request(job[2], "memory", "64 GiB")
    undecodable = pod("bad-priority")
    undecodable["spec"]["priority"] = "high"
    admitted_unchecked(monkeypatch, {"bad-quantity", "job-1", "bad-priority"})
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(4))
        async with daemons(cluster, tmp_path) as running:
            cluster.load_objects([lone, *job, undecodable])
            await canary_binds(cluster, "canary", running)
            field = "spec.containers[0].resources.requests"
            await wait_until(lambda: warned(cluster, "bad-quantity", f"{field}[nvidia.com/gpu]: 'eight' is not")
                             and warned(cluster, "job-1", f"{field}[memory]: '64 GiB' is not")
                             and warned(cluster, "job", f"pod default/job-1: {field}[memory]")
                             and warned(cluster, "bad-priority", "spec.priority: Expected `int"),
                             within=15, what="Warning Events naming the fields")
            reasons = {(e["involvedObject"]["name"], e["reason"]) for e in cluster.store.list("events", NAMESPACE)}
            assert {("bad-quantity", "InvalidQuantity"), ("job-1", "InvalidQuantity"),
                    ("bad-priority", "UndecodableObject")} <= reasons
            assert bound_count(cluster, ["bad-quantity", "job-0", "job-1", "bad-priority"]) == 0
            counted = running[0].daemon.metrics.invalid_objects
            assert counted.labels("Pod", "InvalidQuantity")._value.get() == 2
            assert counted.labels("Pod", "UndecodableObject")._value.get() == 1


def kube_pod_group(name: str, **spec: Any) -> list[dict[str, Any]]:
    """A Kubernetes 1.37 PodGroup (scheduling.k8s.io/v1beta1) of minCount 2 and its two members."""
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": NAMESPACE},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}}
    members = [pod(f"{name}-{i}") for i in range(2)]
    for member in members:
        member["spec"]["schedulingGroup"] = {"podGroupName": name}
    return [group, *members]


async def test_kubernetes_pod_groups_a_server_would_refuse_are_named_in_warnings_and_never_stop_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1.37 PodGroups as a server that does not validate may hand them over: a disruptionMode of the wrong
    type (the PodGroup cannot be read: its pods wait), an int64 priority and a disruptionMode naming both
    members (read leniently: placed, the Warning says how)."""
    unreadable = kube_pod_group("pg-unreadable", disruptionMode=5)
    lenient = kube_pod_group("pg-lenient", disruptionMode={"single": {}, "all": {}}, priority=2**40,
                             priorityClassName="huge")
    admitted_unchecked(monkeypatch, {"pg-unreadable", "pg-lenient"})
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8))
        async with daemons(cluster, tmp_path) as running:
            cluster.load_objects([*unreadable, *lenient])
            await canary_binds(cluster, "canary", running)
            await wait_until(lambda: warned(cluster, "pg-unreadable", "spec.disruptionMode: Expected `str | object`")
                             and warned(cluster, "pg-lenient", "spec.priority: 1099511627776 is not an int32")
                             and warned(cluster, "pg-lenient", "spec.disruptionMode: sets both single and all"),
                             within=15, what="Warning Events naming the PodGroups' fields")
            await wait_until(lambda: bound_count(cluster, pod_names(lenient)) == 2, what="the lenient gang bound")
            assert bound_count(cluster, pod_names(unreadable)) == 0
            state = running[0].daemon.state
            assert state is not None
            # Not "PodGroup not found": it exists. Held untried, its pods are marked once the hold lasts.
            await wait_until(lambda: "its KubernetesPodGroup cannot be read (spec.disruptionMode: Expected"
                             in pod_condition(cluster, "pg-unreadable-0"), what="the unreadable gang's reason")
            assert not running[0].daemon.journal.internal_errors  # type: ignore[union-attr]


async def test_pods_asking_for_gpu_shares_another_scheduler_allocates_are_warned_about_and_wait(
        tmp_path: Path) -> None:
    # Koordinator's GPU share and KAI's fractional GPU, written as their docs write them: their schedulers
    # pick the GPU and write it on the pod for the node. Bound by toposched, each would start without one.
    shared, fraction = pod("half-gpu"), pod("fraction")
    for manifest in (shared, fraction):  # no whole GPU: a share of one
        del manifest["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]
    with_request(with_request(shared, "koordinator.sh/gpu-core", "50"), "koordinator.sh/gpu-memory-ratio", "50")
    fraction["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    hosts = nodes(4)
    for host in hosts:  # as Koordinator's node agent advertises the shares: room is not what stops them
        host["status"]["allocatable"] = {**host["status"]["allocatable"], "koordinator.sh/gpu-core": "800",
                                         "koordinator.sh/gpu-memory-ratio": "800"}
    async with DevCluster() as cluster:
        load_as_a_real_server_would(cluster, hosts)
        async with daemons(cluster, tmp_path) as running:
            load_as_a_real_server_would(cluster, [shared, fraction])
            await canary_binds(cluster, "canary", running)
            koordinator = ("spec.containers[0].resources.requests[koordinator.sh/gpu-core]: koordinator.sh/gpu-core "
                           "is a device Koordinator's DeviceShare allocates")
            await wait_until(lambda: warned(cluster, "half-gpu", koordinator)
                             and warned(cluster, "fraction", "metadata.annotations[gpu-fraction]: a fractional GPU")
                             and "leave the pod to koord-scheduler" in pod_condition(cluster, "half-gpu")
                             and "leave the pod to kai-scheduler" in pod_condition(cluster, "fraction"),
                             within=15, what="Warnings and pod conditions naming the fields")
            for name in ("half-gpu", "fraction"):  # the object's warning, and kube-scheduler's FailedScheduling
                assert {e["reason"] for e in events_about(cluster, name) if e["type"] == "Warning"} == {
                    "UnsupportedField", "FailedScheduling"}
            assert bound_count(cluster, ["half-gpu", "fraction"]) == 0
            counted = running[0].daemon.metrics.invalid_objects
            assert counted.labels("Pod", "UnsupportedField")._value.get() == 2
