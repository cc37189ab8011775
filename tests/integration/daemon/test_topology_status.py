"""The leader keeps ClusterNetworkTopology detailStatus and HyperNode nodeCount current, reports a bad
topology object with a Warning Event on it while scheduling goes on, and a standby writes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from daemon.config import decode_config
from daemon.kube.client import connect
from daemon.kube.cluster_api import KubeClusterAPI
from daemon.kube.leader import AlwaysOpen, WriteGate
from daemon.telemetry.metrics import Metrics
from devcluster.cluster import DevCluster
from events.objects import TopologyDetail, TopologyInfo
from tests.integration.daemon.harness import bound_count, config_for, daemons, gang, nodes, pod_names, wait_until

CNT = "clusternetworktopologies.scheduling.koordinator.sh"
HN = "hypernodes.topology.volcano.sh"
SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"


def cnt_default() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": [
            {"topologyLayer": "SpineLayer", "labelKey": [SPINE]},
            {"topologyLayer": "BlockLayer", "labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer"},
            {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
        ]},
    }


def hyper_node(name: str, tier: int, members: list[dict[str, Any]], tier_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec}


def exact(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def regex(pattern: str) -> dict[str, Any]:
    return {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}


def status_of(cluster: DevCluster, resource: str, name: str) -> dict[str, Any]:
    return dict(cluster.store.get(resource, name).get("status") or {})


def warning_events(cluster: DevCluster, kind: str, name: str) -> list[dict[str, Any]]:
    return [e for e in cluster.store.list("events", "default")
            if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name and e["type"] == "Warning"]


def api_writes(metrics: Metrics, resource: str) -> float:
    total = 0.0
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "toposched_api_requests_total" and sample.labels.get("resource") == resource:
                total += sample.value
    return total


async def test_leader_writes_cnt_detail_status_in_koordinators_shape_and_follows_a_relabel(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(8, per_block=4), cnt_default()])
        async with daemons(cluster, tmp_path) as (running,):
            expected = [
                {"topologyInfo": {"topologyLayer": "ClusterTopologyLayer"},
                 "childTopologyLayer": "SpineLayer", "childTopologyNames": ["spine-0"], "nodeNum": 8},
                {"topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "spine-0"},
                 "parentTopologyInfo": {"topologyLayer": "ClusterTopologyLayer"},
                 "childTopologyLayer": "BlockLayer", "childTopologyNames": ["block-0", "block-1"], "nodeNum": 8},
                {"topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "block-0"},
                 "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "spine-0"},
                 "childTopologyLayer": "NodeTopologyLayer", "nodeNum": 4},
                {"topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "block-1"},
                 "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "spine-0"},
                 "childTopologyLayer": "NodeTopologyLayer", "nodeNum": 4},
            ]
            await wait_until(lambda: status_of(cluster, CNT, "default").get("detailStatus") == expected,
                             what="detailStatus written")

            # A gang's pods come and go: no status write for that.
            status = running.daemon.topology_status
            assert status is not None
            # The server stores the write before the daemon counts it: count from after the first write.
            await wait_until(lambda: status.writes >= 1, what="the first write counted")
            writes = status.writes
            job = gang("job", 4)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 4, what="gang bound")

            cluster.store.patch("nodes", "node-007", {"metadata": {"labels": {BLOCK: "block-2"}}})
            await wait_until(lambda: [d["nodeNum"] for d in status_of(cluster, CNT, "default")["detailStatus"]]
                             == [8, 8, 4, 3, 1], what="detailStatus after the relabel")
            # Likewise for the relabel's write: wait for the count, then check it is one.
            await wait_until(lambda: status.writes > writes, what="the relabel's write counted")
            assert status.writes == writes + 1
            # Our own write, once it comes back by watch, is not written again.
            state = running.daemon.state
            assert state is not None
            await wait_until(lambda: [d.node_num for d in state.network_topologies["default"].status.detail_status]
                             == [8, 8, 4, 3, 1], what="the write folded back")
            assert await status.sync_once()
            assert status.writes == writes + 1


async def test_leader_writes_hypernode_node_counts(tmp_path: Path) -> None:
    hypernodes = [
        hyper_node("block-a", 1, [exact(f"node-00{i}") for i in range(4)], "block"),
        hyper_node("block-b", 1, [regex("^node-00[4-7]$")], "block"),
        hyper_node("spine", 2, [exact("block-a", "HyperNode"), exact("block-b", "HyperNode")], "spine"),
    ]
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(8), *hypernodes])
        async with daemons(cluster, tmp_path):
            def counts() -> dict[str, Any]:
                return {name: status_of(cluster, HN, name).get("nodeCount") for name in ("block-a", "block-b", "spine")}

            await wait_until(lambda: counts() == {"block-a": 4, "block-b": 4, "spine": 8}, what="nodeCount written")
            cluster.store.delete("nodes", "node-007")
            await wait_until(lambda: counts() == {"block-a": 4, "block-b": 3, "spine": 7},
                             what="nodeCount after a delete")


async def test_bad_hypernode_gets_one_warning_event_naming_the_field_while_a_gang_is_scheduled(tmp_path: Path) -> None:
    hypernodes = [
        hyper_node("block-a", 1, [regex("^node-00[0-7]$")], "block"),
        hyper_node("broken", 1, [regex("node-(")], "block"),
    ]
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(8), *hypernodes])
        async with daemons(cluster, tmp_path) as (running,):
            await wait_until(lambda: bool(warning_events(cluster, "HyperNode", "broken")), what="a Warning Event")
            (event,) = warning_events(cluster, "HyperNode", "broken")
            assert event["reason"] == "InvalidTopology"
            assert "spec.members[0].selector.regexMatch.pattern" in event["message"]
            assert event["involvedObject"]["apiVersion"] == "topology.volcano.sh/v1alpha1"
            assert "namespace" not in event["involvedObject"]  # a cluster-scoped object
            assert event["involvedObject"]["uid"] == cluster.store.get(HN, "broken")["metadata"]["uid"]

            job = gang("job", 4)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 4,
                             what="gang bound despite the bad HyperNode")
            status = running.daemon.topology_status
            assert status is not None
            passes = status.passes
            cluster.store.patch("nodes", "node-001", {"metadata": {"labels": {"extra": "x"}}})
            await wait_until(lambda: status.passes > passes, what="another pass")
            (again,) = warning_events(cluster, "HyperNode", "broken")  # reported once, not on every pass
            assert again.get("count", 1) == 1


async def test_a_standby_writes_no_topology_status(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(8, per_block=4), cnt_default(),
                              hyper_node("broken", 1, [regex("node-(")])])
        async with daemons(cluster, tmp_path, count=2, election=True) as pair:
            await wait_until(lambda: any(d.is_leader for d in pair), what="a leader")
            leader = next(d for d in pair if d.is_leader)
            standby = next(d for d in pair if d is not leader)
            await wait_until(lambda: bool(status_of(cluster, CNT, "default").get("detailStatus")),
                             what="the leader's detailStatus")
            # The store shows the write before the leader's client has counted its response.
            await wait_until(lambda: api_writes(leader.daemon.metrics, "clusternetworktopologies/status") >= 1,
                             what="the leader's write counted")
            assert standby.daemon.topology_status is None
            for resource in ("clusternetworktopologies/status", "hypernodes/status", "events"):
                assert api_writes(standby.daemon.metrics, resource) == 0


@asynccontextmanager
async def adapter(cluster: DevCluster, tmp_path: Path, gate: WriteGate | None = None) -> AsyncIterator[KubeClusterAPI]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    config = decode_config(config_for(kubeconfig, tmp_path / "log", election=False))
    async with connect(config) as client:
        yield KubeClusterAPI(client, gate or AlwaysOpen())


async def test_adapter_status_writes_land_in_the_status_and_a_missing_object_is_not_retried(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([cnt_default(), hyper_node("hn", 1, [exact("node-000")])])
        async with adapter(cluster, tmp_path) as api:
            root = TopologyDetail(topology_info=TopologyInfo(topology_layer="ClusterTopologyLayer"),
                                  child_topology_layer="NodeTopologyLayer", node_num=3)
            assert (await api.set_network_topology_status("default", [root])).ok
            assert status_of(cluster, CNT, "default") == {"detailStatus": [
                {"topologyInfo": {"topologyLayer": "ClusterTopologyLayer"}, "childTopologyLayer": "NodeTopologyLayer",
                 "nodeNum": 3}]}
            assert (await api.set_network_topology_status("default", [])).ok  # replaced whole, not merged
            assert status_of(cluster, CNT, "default").get("detailStatus", []) == []
            assert (await api.set_hypernode_status("hn", 5)).ok
            assert status_of(cluster, HN, "hn") == {"nodeCount": 5}
            assert cluster.store.get(HN, "hn")["spec"]["tier"] == 1  # the spec is untouched
            missing = await api.set_hypernode_status("ghost", 1)
            assert not missing.ok and not missing.retriable


async def test_adapter_refuses_topology_writes_without_the_lease(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([hyper_node("hn", 1, [exact("node-000")])])
        async with adapter(cluster, tmp_path, WriteGate(renew_deadline=1.0)) as api:  # never renewed: closed
            assert not (await api.set_hypernode_status("hn", 5)).ok
            refused = await api.report_object("hn", "topology.volcano.sh/v1alpha1", "HyperNode", "", "InvalidTopology",
                                              "spec.members: bad")
            assert not refused.ok
            assert status_of(cluster, HN, "hn") == {}
            assert cluster.store.list("events", "default") == []
