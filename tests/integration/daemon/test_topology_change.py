"""A gang waiting for a layer the cluster lost is planned again, by itself, once the layer is back.

README "Troubleshooting", "A gang stuck after a topology change": the topology loses the layer a
MustGather gang (or the tier a Volcano hard limit) names, so the gang waits saying the layer "is not a
layer"; then the layer comes back. A gang that fits binds and one that can never fit says so, without
anyone touching their PodGroups. The daemon's periodic retry of parked gangs (60 s) is far beyond these
tests' waits: what brings them back is the topology change itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daemon.scheduling.queue import UNSCHEDULABLE
from devcluster.cluster import DevCluster
from events.objects import NETWORK_TOPOLOGY_SPEC_ANNOTATION, VOLCANO_GROUP_ANNOTATION
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
from tests.integration.daemon.test_topology_status import exact, hyper_node

BLOCK = "network.topology.nvidia.com/block"
MUST_GATHER_BLOCK = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]})


def message(cluster: DevCluster, resource: str, name: str) -> str:
    conditions = (cluster.store.get(resource, name, NAMESPACE).get("status") or {}).get("conditions") or []
    return str(conditions[-1]["message"]) if conditions else ""


def says(cluster: DevCluster, resource: str, name: str, words: str) -> bool:
    return words in message(cluster, resource, name)


def parked(running: RunningDaemon, name: str, words: str) -> bool:
    """The daemon has folded back its own status write saying `words` on the gang's PodGroup (whose
    echo is a change of the gang that brings it back once), and the gang is parked again after it."""
    state, scheduler = running.daemon.state, running.daemon.scheduler
    key = f"{NAMESPACE}/{name}"
    if state is None or scheduler is None:
        return False
    group = state.pod_groups.get(key) or state.volcano_pod_groups.get(key)
    conditions = group.status.conditions if group is not None else []
    return bool(conditions) and words in conditions[-1].message and scheduler.queue_of(key) == UNSCHEDULABLE


async def test_mustgather_gangs_move_on_their_own_once_their_block_labels_are_back(tmp_path: Path) -> None:
    podgroups = "podgroups.scheduling.sigs.k8s.io"
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8, per_block=4))
        async with daemons(cluster, tmp_path) as (running,):
            for index in range(8):  # someone removes the block labels
                cluster.store.patch("nodes", f"node-{index:03d}", {"metadata": {"labels": {BLOCK: None}}})
            state = running.daemon.state
            assert state is not None
            await wait_until(lambda: "BlockLayer" not in [level.layer for level in state.topology.levels],
                             what="the BlockLayer gone from the daemon's tree")
            job = gang("job", 4, annotations={NETWORK_TOPOLOGY_SPEC_ANNOTATION: MUST_GATHER_BLOCK})
            wide = gang("wide", 6, annotations={NETWORK_TOPOLOGY_SPEC_ANNOTATION: MUST_GATHER_BLOCK})
            cluster.load_objects([*job, *wide])
            gone = "'BlockLayer': is not a layer"
            await wait_until(lambda: parked(running, "job", gone) and parked(running, "wide", gone),
                             what="both gangs' reason: the layer is gone")
            assert says(cluster, podgroups, "job", gone) and says(cluster, podgroups, "wide", gone)
            versions = {name: cluster.store.get(podgroups, name, NAMESPACE)["metadata"]["generation"]
                        for name in ("job", "wide")}

            for index in range(8):  # ... and puts them back, node by node (blocks of 4)
                cluster.store.patch("nodes", f"node-{index:03d}",
                                    {"metadata": {"labels": {BLOCK: f"block-{index // 4}"}}})

            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 4, what="job bound")
            await wait_until(lambda: says(cluster, podgroups, "wide", "it can never fit: MustGather at BlockLayer"),
                             what="wide's reason: it can never fit in a block")
            assert "4 of the 6 pods" in message(cluster, podgroups, "wide")
            assert bound_count(cluster, pod_names(wide)) == 0
            assert {name: cluster.store.get(podgroups, name, NAMESPACE)["metadata"]["generation"]
                    for name in ("job", "wide")} == versions  # nobody touched the PodGroups


def volcano_gang(name: str, size: int, limit: dict[str, Any]) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": NAMESPACE},
             "spec": {"minMember": size, "networkTopology": {"mode": "hard", **limit}}}
    pods = [pod(f"{name}-{index}") for index in range(size)]
    for manifest in pods:
        manifest["metadata"]["annotations"] = {VOLCANO_GROUP_ANNOTATION: name}
    return [group, *pods]


async def test_volcano_hard_tier_gangs_move_on_their_own_once_a_hypernode_of_their_tier_appears(
        tmp_path: Path) -> None:
    podgroups = "podgroups.scheduling.volcano.sh"
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(8), hyper_node("spine", 2, [exact(f"node-{i:03d}") for i in range(8)], "spine")])
        async with daemons(cluster, tmp_path) as (running,):
            job = volcano_gang("job", 4, {"highestTierAllowed": 1})
            wide = volcano_gang("wide", 6, {"highestTierName": "block"})
            cluster.load_objects([*job, *wide])
            await wait_until(lambda: parked(running, "job", "below the cluster's lowest domain tier 2"),
                             what="job's reason: no tier 1")
            await wait_until(lambda: parked(running, "wide", "networkTopology highestTierName 'block': is not a layer"),
                             what="wide's reason: no tier named block")
            assert says(cluster, podgroups, "wide", "networkTopology highestTierName 'block': is not a layer")

            # The blocks appear (tier 1, 4 nodes each), then the spine holds them instead of the nodes.
            cluster.load_objects([hyper_node("block-a", 1, [exact(f"node-{i:03d}") for i in range(4)], "block"),
                                  hyper_node("block-b", 1, [exact(f"node-{i:03d}") for i in range(4, 8)], "block")])
            cluster.store.patch("hypernodes.topology.volcano.sh", "spine",
                                {"spec": {"members": [exact("block-a", "HyperNode"), exact("block-b", "HyperNode")]}})

            await wait_until(lambda: bound_count(cluster, pod_names(job)) == 4, what="job bound")
            await wait_until(lambda: says(cluster, podgroups, "wide", "it can never fit"),
                             what="wide's reason: it can never fit in a block")
            assert bound_count(cluster, pod_names(wide)) == 0
