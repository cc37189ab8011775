"""The daemon reads Kueue's `Topology` (kueue.x-k8s.io) from the API server, over HTTP with the real
client: nodes labelled with keys no built-in scheme knows, named by a Topology, give the tree a gang is
placed in; a bad Topology gets a Warning Event naming the field; a cluster without Kueue's CRD runs on,
and picks the Topology up once the CRD appears."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from state.topology import SOURCE_KUEUE, SOURCE_LABELS
from tests.integration.daemon.harness import (
    RunningDaemon,
    bound_count,
    daemons,
    gang,
    node_of,
    pod_names,
    wait_until,
)
from tests.integration.daemon.test_topology_status import warning_events

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
# node-000 and node-001 (the first free nodes by name) are in two racks; only rack-c holds two nodes.
RACKS = {"node-000": ("block-a", "rack-a"), "node-001": ("block-a", "rack-b"), "node-002": ("block-b", "rack-c"),
         "node-003": ("block-b", "rack-c")}


def custom_nodes() -> list[dict[str, Any]]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return [{"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, BLOCK: block, RACK: rack}},
             "status": {"capacity": resources, "allocatable": resources}}
            for name, (block, rack) in RACKS.items()]


def kueue_topology(name: str, *labels: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def source_of(running: RunningDaemon) -> tuple[str, str]:
    state = running.daemon.state
    return ("", "") if state is None else (state.topology.source, state.topology.source_name)


async def test_a_gang_lands_in_one_rack_of_the_kueue_topology_and_a_bad_topology_is_warned_about(
        tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kueue_topology("racks", BLOCK, RACK, "kubernetes.io/hostname"),
                              kueue_topology("twice", RACK, RACK)])
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: source_of(running) == (SOURCE_KUEUE, "racks"), what="the tree from 'racks'")
            job = gang("job", 2)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 2, what="gang bound")
            assert sorted(node_of(cluster, name) for name in pod_names(job)) == ["node-002", "node-003"]
            await wait_until(lambda: bool(warning_events(cluster, "Topology", "twice")), what="a Warning Event")
            messages = [event["message"] for event in warning_events(cluster, "Topology", "twice")]
            assert any("spec.levels[1].nodeLabel" in message for message in messages), messages
            event = warning_events(cluster, "Topology", "twice")[0]
            assert event["reason"] == "InvalidTopology"
            assert event["involvedObject"]["apiVersion"] == "kueue.x-k8s.io/v1beta2"
            assert event["involvedObject"]["uid"] == cluster.store.get(
                "topologies.kueue.x-k8s.io", "twice")["metadata"]["uid"]
            assert warning_events(cluster, "Topology", "racks") == []


async def test_a_cluster_without_kueue_runs_and_picks_the_topology_up_when_its_crd_appears(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*custom_nodes(), kueue_topology("racks", BLOCK, RACK)])
        missing = cluster.faults.fail_fraction(1.0, 404, verb="list", path="/apis/kueue.x-k8s.io/")
        async with daemons(cluster, tmp_path) as (running,):
            watchers = running.daemon.watchers
            assert watchers is not None
            kueue = next(w for w in watchers.watchers if w.info.name == "KueueTopology")
            await wait_until(lambda: running.daemon.health.ready, what="ready without the Kueue CRD")
            assert kueue.missing_crd
            assert source_of(running) == (SOURCE_LABELS, "")
            job = gang("despite", 2)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 2, what="gang bound without Kueue")
            cluster.faults.remove(missing)
            await wait_until(lambda: source_of(running) == (SOURCE_KUEUE, "racks"), within=10,
                             what="the Topology picked up once its CRD is served")
            assert not kueue.missing_crd and kueue.api_version == "kueue.x-k8s.io/v1beta2"
