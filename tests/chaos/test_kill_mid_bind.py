"""Chaos: kill -9 mid-bind, change the planned nodes while the daemon is down, start it again.

Each iteration, on a fresh devcluster of 20 nodes of 8 GPUs, one `toposched run` process (fsync
always) plans a gang of 8-12 whole-node pods; the bindings of all but its first 1..size-4 pods hang
in the API server (latency rules set over the admin endpoint), so the kill leaves those bound and the
rest assumed in its log. While it is down, 4 of the nodes planned for the unbound pods are changed
through the API, each at random: cordoned and tainted, only tainted (NoSchedule), or filled by a pod
another scheduler bound there. Started again on the same log, the daemon must bind nothing onto a
closed node, over-commit no node, keep the pods bound before the kill where they are, and complete
the gang elsewhere (there is room); then a canary binds and the log verifies.
"""

from __future__ import annotations

import random
from pathlib import Path

import aiohttp
import anyio
import pytest

from devcluster.cluster import DevCluster
from events.log import EventLog
from events.model import PodAssumed
from tests.chaos.harness import Tally, canary_binds, iterate, verified
from tests.integration.daemon.harness import NAMESPACE, gang, node_of, nodes, pod, pod_names, wait_until
from tests.integration.daemon.processes import admin, config_file, daemon_process, over_committed

pytestmark = pytest.mark.chaos

GPUS = 8
CHANGES = ("cordon+taint", "taint", "fill")
MAINTENANCE = {"key": "maintenance", "value": "drain", "effect": "NoSchedule"}


def planned(log_dir: Path) -> dict[str, str]:
    """Pod name -> the node its last PodAssumed put it on."""
    with EventLog.open_readonly(log_dir) as log:
        return {e.pod.split("/")[1]: e.node for e in log.read() if isinstance(e, PodAssumed)}


def change(cluster: DevCluster, node: str, how: str) -> None:
    """What an operator or another scheduler does to `node` while toposched is down."""
    if how == "fill":
        other = pod(f"other-{node}", GPUS, scheduler="default-scheduler")
        other["spec"]["nodeName"] = node
        cluster.load_objects([other])
        return
    spec: dict[str, object] = {"taints": [MAINTENANCE]}
    if how == "cordon+taint":
        spec["unschedulable"] = True
    cluster.store.patch("nodes", node, {"spec": spec})


async def kill_mid_bind(directory: Path, index: int) -> None:
    choose = random.Random(index)
    size = choose.randint(8, 12)
    first = choose.randint(1, size - 4)
    async with DevCluster() as cluster, aiohttp.ClientSession() as session:
        cluster.load_objects(nodes(20))
        job = gang(f"big-{index}", size, GPUS)
        names = pod_names(job)
        hanging = [await admin(session, cluster, "POST", {"latency": 3600, "verb": "create",
                                                          "path": f"/pods/{name}/binding"}) for name in names[first:]]
        config = config_file(directory / "config.yaml", fsync="always")
        async with daemon_process(cluster, directory, "toposched", election=False, config=config) as daemon:
            cluster.load_objects(job)
            await wait_until(lambda: all(node_of(cluster, name) for name in names[:first]), within=30,
                             what="the first members bound")
            await wait_until(lambda: len(planned(daemon.log_dir)) == size, within=30, what="the whole plan assumed")
            daemon.kill()
            with anyio.fail_after(10):
                await daemon.process.wait()
        for rule in hanging:
            await admin(session, cluster, "DELETE", path=f"faults/{rule['id']}")
        before = {name: node_of(cluster, name) for name in names}
        assert sorted(name for name in names if before[name]) == sorted(names[:first])

        plan = planned(daemon.log_dir)
        targets = sorted({plan[name] for name in names if not before[name]})
        changed = {node: choose.choice(CHANGES) for node in choose.sample(targets, 4)}
        for node, how in changed.items():
            change(cluster, node, how)
        closed = {node for node, how in changed.items() if how != "fill"}

        async with daemon_process(cluster, directory, "toposched", election=False, config=config) as daemon:
            await wait_until(lambda: all(node_of(cluster, name) for name in names), within=30,
                             what="the gang completed after the restart")
            after = {name: node_of(cluster, name) for name in names}
            moved = {name: (before[name], after[name]) for name in names[:first] if after[name] != before[name]}
            assert moved == {}, f"pods bound before the kill moved: {moved}"
            onto_closed = {name: node for name, node in after.items() if node in closed}
            assert onto_closed == {}, f"pods bound onto cordoned or tainted nodes ({changed}): {onto_closed}"
            assert over_committed(cluster) == {}, f"over-committed nodes ({changed})"
            await canary_binds(cluster, f"canary-{index}", [daemon])
            assert await daemon.stop() == 0
        assert all(found.get("spec", {}).get("nodeName") not in closed
                   for found in cluster.store.list("pods", NAMESPACE))
    await verified(daemon.log_dir)


async def test_a_plan_killed_mid_bind_is_checked_against_the_cluster_changed_while_down(
        tmp_path: Path, iterations: int, tally: Tally) -> None:
    await iterate(tally, iterations, tmp_path, kill_mid_bind)
