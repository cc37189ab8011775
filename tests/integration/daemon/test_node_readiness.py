"""A node whose kubelet reports it NotReady is tainted by the node lifecycle controller (devcluster runs
it, as kube-controller-manager does) and toposched places nothing there until it is Ready again:
kube-scheduler reads node health the same way, from the taints, never from the conditions."""

from __future__ import annotations

from pathlib import Path

from devcluster.cluster import DevCluster
from devcluster.store import resolve
from tests.integration.daemon.harness import daemons, node_of, nodes, pod, wait_until

NOT_READY = "node.kubernetes.io/not-ready"


def set_ready(cluster: DevCluster, node: str, status: str) -> None:
    """The node's Ready condition as its kubelet posts it."""
    current = cluster.store.get("nodes", node)
    conditions = [c for c in current.get("status", {}).get("conditions") or [] if c["type"] != "Ready"]
    conditions.append({"type": "Ready", "status": status, "reason": "KubeletNotReady" if status != "True" else
                       "KubeletReady"})
    cluster.store.update_in(resolve("nodes"), node, "", {**current, "status": {**current["status"],
                                                                                 "conditions": conditions}},
                            subresource="status")


def taints(cluster: DevCluster, node: str) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in cluster.store.get("nodes", node).get("spec", {}).get("taints") or []}


async def test_nothing_goes_to_a_not_ready_node_until_it_is_ready_again(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(2))
        await wait_until(lambda: all(
            any(c["type"] == "Ready" for c in cluster.store.get("nodes", n).get("status", {}).get("conditions") or [])
            for n in ("node-000", "node-001")), what="the nodes registered Ready")
        set_ready(cluster, "node-000", "False")
        await wait_until(lambda: (NOT_READY, "NoSchedule") in taints(cluster, "node-000"), what="the not-ready taint")
        async with daemons(cluster, tmp_path):
            cluster.load_objects([pod("first", gpus=1)])
            await wait_until(lambda: bool(node_of(cluster, "first")), what="first bound")
            assert node_of(cluster, "first") == "node-001"  # the first node by name, had it been Ready
            set_ready(cluster, "node-000", "True")
            await wait_until(lambda: not taints(cluster, "node-000"), what="the taints gone")
            cluster.load_objects([pod("second", gpus=8)])  # node-001 has 7 GPUs left: only node-000 takes it
            await wait_until(lambda: bool(node_of(cluster, "second")), what="second bound")
            assert node_of(cluster, "second") == "node-000"
