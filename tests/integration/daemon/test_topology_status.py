"""The leader keeps ClusterNetworkTopology detailStatus and HyperNode nodeCount current, reports a bad
topology object with a Warning Event on it while scheduling goes on, and a standby writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.metrics import Metrics
from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import bound_count, daemons, gang, nodes, pod_names, wait_until

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
            writes = status.writes
            job = gang("job", 4)
            cluster.load_objects(job)
            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 4, what="gang bound")

            cluster.store.patch("nodes", "node-007", {"metadata": {"labels": {BLOCK: "block-2"}}})
            await wait_until(lambda: [d["nodeNum"] for d in status_of(cluster, CNT, "default")["detailStatus"]]
                             == [8, 8, 4, 3, 1], what="detailStatus after the relabel")
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
            assert api_writes(leader.daemon.metrics, "clusternetworktopologies/status") >= 1
            assert standby.daemon.topology_status is None
            for resource in ("clusternetworktopologies/status", "hypernodes/status", "events"):
                assert api_writes(standby.daemon.metrics, resource) == 0
