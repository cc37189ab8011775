"""The daemon reads NVIDIA KAI Scheduler's dialect from the API server, over HTTP with the real client: a
KAI `Topology` (kai.scheduler) over nodes labelled with keys no built-in scheme knows gives the tree, a
KAI PodGroup (scheduling.run.ai) that pods join with `pod-group-name` is a gang whose
requiredTopologyLevel holds it in one rack; a PodGroup naming another topology and a level that is no
layer, and a bad Topology, get Warning Events naming the object and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from events.objects import KAI_POD_GROUP_ANNOTATION
from state.topology import SOURCE_KAI
from tests.integration.daemon.harness import (
    NAMESPACE,
    RunningDaemon,
    bound_count,
    daemons,
    node_of,
    pod,
    wait_until,
)
from tests.integration.daemon.test_kueue_topology import BLOCK, RACK, custom_nodes
from tests.integration.daemon.test_topology_status import warning_events

HOST = "kubernetes.io/hostname"


def kai_topology(name: str, *labels: str) -> dict[str, Any]:
    return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def kai_gang(name: str, size: int, constraint: dict[str, str]) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": NAMESPACE},
             "spec": {"minMember": size, "topologyConstraint": constraint}}
    members = []
    for index in range(size):
        member = pod(f"{name}-{index}")
        member["metadata"]["annotations"] = {KAI_POD_GROUP_ANNOTATION: name}
        members.append(member)
    return [group, *members]


def names(manifests: list[dict[str, Any]]) -> list[str]:
    return [m["metadata"]["name"] for m in manifests if m["kind"] == "Pod"]


def source_of(running: RunningDaemon) -> tuple[str, str]:
    state = running.daemon.state
    return ("", "") if state is None else (state.topology.source, state.topology.source_name)


async def test_a_kai_gang_lands_in_one_rack_of_the_kai_topology(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kai_topology("cluster-topology", BLOCK, RACK, HOST)])
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: source_of(running) == (SOURCE_KAI, "cluster-topology"),
                             what="the tree from the KAI Topology")
            job = kai_gang("job", 2, {"topology": "cluster-topology", "requiredTopologyLevel": RACK})
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, names(job)) == 2, what="KAI gang bound")
            assert sorted(node_of(cluster, name) for name in names(job)) == ["node-002", "node-003"]
            assert warning_events(cluster, "PodGroup", "job") == []


async def test_unusable_kai_fields_and_a_bad_kai_topology_are_warned_about_and_the_gang_waits(
        tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kai_topology("cluster-topology", BLOCK, RACK),
                              kai_topology("twice", RACK, RACK)])
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: source_of(running) == (SOURCE_KAI, "cluster-topology"),
                             what="the tree from the good KAI Topology")
            job = kai_gang("lost", 2, {"topology": "elsewhere", "requiredTopologyLevel": "example.com/zone"})
            cluster.load_objects(job)

            def invalid() -> list[dict[str, Any]]:
                return [e for e in warning_events(cluster, "PodGroup", "lost") if e["reason"] == "InvalidPodGroup"]

            await wait_until(lambda: len(invalid()) >= 2, what="InvalidPodGroup Warning Events on the KAI PodGroup")
            events = invalid()
            messages = " | ".join(event["message"] for event in events)
            assert "spec.topologyConstraint.topology" in messages and "elsewhere" in messages, messages
            assert "spec.topologyConstraint.requiredTopologyLevel" in messages, messages
            assert {event["involvedObject"]["apiVersion"] for event in events} == {"scheduling.run.ai/v2alpha2"}
            assert events[0]["involvedObject"]["uid"] == cluster.store.get(
                "podgroups.scheduling.run.ai", "lost", NAMESPACE)["metadata"]["uid"]
            assert bound_count(cluster, names(job)) == 0
            await wait_until(lambda: bool(warning_events(cluster, "Topology", "twice")), what="a Topology Warning")
            event = warning_events(cluster, "Topology", "twice")[0]
            assert event["reason"] == "InvalidTopology"
            assert event["involvedObject"]["apiVersion"] == "kai.scheduler/v1alpha1"
            assert any("spec.levels[1].nodeLabel" in e["message"] for e in warning_events(cluster, "Topology", "twice"))


async def test_a_cluster_without_kai_runs_and_picks_kai_up_when_its_crds_appear(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kai_topology("cluster-topology", BLOCK, RACK)])
        missing = [cluster.faults.fail_fraction(1.0, 404, verb="list", path=path)
                   for path in ("/apis/kai.scheduler/", "/apis/scheduling.run.ai/")]
        async with daemons(cluster, tmp_path) as (running,):
            watchers = running.daemon.watchers
            assert watchers is not None
            kai = [w for w in watchers.watchers if w.info.name in ("KaiTopology", "KaiPodGroup")]
            await wait_until(lambda: running.daemon.health.ready, what="ready without KAI's CRDs")
            assert len(kai) == 2 and all(w.missing_crd for w in kai)
            for fault in missing:
                cluster.faults.remove(fault)
            await wait_until(lambda: source_of(running) == (SOURCE_KAI, "cluster-topology"), within=10,
                             what="the KAI Topology picked up once its CRD is served")
            job = kai_gang("late", 2, {"topology": "cluster-topology", "requiredTopologyLevel": RACK})
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, names(job)) == 2, within=10, what="KAI gang bound")
            assert sorted(node_of(cluster, name) for name in names(job)) == ["node-002", "node-003"]
