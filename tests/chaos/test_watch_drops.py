"""Chaos: watch streams cut mid-stream, again and again, while the cluster changes; the state converges.

Each iteration, on a fresh devcluster, one `toposched run` process (fsync always, so its log can be
read while it runs) schedules while the test churns the cluster through the API (gangs created,
pods deleted, nodes added, relabelled, cordoned, uncordoned and deleted) and, all the while, cuts
every open watch over devcluster's admin endpoint every few tens of milliseconds, sometimes failing
the next watch or list requests with a 500 too. When the churn stops, the daemon's state (its log,
folded) must come to hold exactly what the API server holds: the same nodes with the same labels and
cordons, the same pods on the same nodes, the same PodGroups. Then a canary binds (on 4 nodes added for
it: the churn may have left no room) and the log verifies.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from daemon.offline.replay import fold_log
from devcluster.cluster import DevCluster
from events.log import EventLog
from state.cluster import ClusterState
from tests.chaos.harness import CANARY_SIZE, Tally, canary_binds, iterate, verified
from tests.integration.daemon.harness import NAMESPACE, gang, nodes, wait_until
from tests.integration.daemon.processes import admin, config_file, daemon_process

pytestmark = pytest.mark.chaos

CHURN_STEPS = 30
CONVERGE_SECONDS = 20.0


def folded(log_dir: Path) -> ClusterState:
    with EventLog.open_readonly(log_dir) as log:
        return fold_log(log).state


def differences(cluster: DevCluster, state: ClusterState) -> list[str]:
    """What the daemon's state says differently from the API server (empty once converged)."""
    found: list[str] = []
    stored_nodes = {n["metadata"]["name"]: n for n in cluster.store.list("nodes")}
    if set(stored_nodes) != set(state.nodes):
        found.append(f"nodes only in the API: {sorted(set(stored_nodes) - set(state.nodes))}, "
                     f"only in the state: {sorted(set(state.nodes) - set(stored_nodes))}")
    for name in sorted(set(stored_nodes) & set(state.nodes)):
        node, info = stored_nodes[name], state.nodes[name]
        if dict(node["metadata"].get("labels") or {}) != dict(info.labels):
            found.append(f"node {name}: labels differ")
        if bool(node.get("spec", {}).get("unschedulable")) != info.unschedulable:
            found.append(f"node {name}: unschedulable differs")
    stored_pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in cluster.store.list("pods")}
    if set(stored_pods) != set(state.pods):
        found.append(f"pods only in the API: {sorted(set(stored_pods) - set(state.pods))}, "
                     f"only in the state: {sorted(set(state.pods) - set(stored_pods))}")
    for key in sorted(set(stored_pods) & set(state.pods)):
        on = str(stored_pods[key].get("spec", {}).get("nodeName") or "")
        if on != state.pods[key].node_name:
            found.append(f"pod {key}: on {on!r} in the API, {state.pods[key].node_name!r} in the state")
    groups = {f"{g['metadata']['namespace']}/{g['metadata']['name']}"
              for g in cluster.store.list("podgroups.scheduling.sigs.k8s.io")}
    if groups != set(state.pod_groups):
        found.append(f"PodGroups differ: API {sorted(groups)}, state {sorted(state.pod_groups)}")
    return found


async def keep_cutting(session: aiohttp.ClientSession, cluster: DevCluster, stop: anyio.Event,
                       choose: random.Random, cut: list[int]) -> None:
    """Cut every watch stream every 20-150 ms (adding to `cut` how many were open); now and then fail the
    next watch or list with a 500."""
    while not stop.is_set():
        cut.append((await admin(session, cluster, "POST", path="faults/drop-watches"))["closed"])
        if choose.random() < 0.2:
            await admin(session, cluster, "POST", {"status": 500, "count": choose.randint(1, 2),
                                                   "verb": choose.choice(["watch", "list"])})
        with anyio.move_on_after(choose.uniform(0.02, 0.15)):
            await stop.wait()


def churn_step(cluster: DevCluster, choose: random.Random, step: int, extra: list[str]) -> None:
    """One change through the API: a gang, a deleted pod, a node added, relabelled, cordoned or deleted."""
    what = choose.choice(["gang", "gang", "delete-pod", "add-node", "relabel", "cordon", "delete-node"])
    if what == "gang":
        cluster.load_objects(gang(f"churn-{step}", choose.randint(2, 3), gpus=2))
    elif what == "delete-pod":
        ours = [p["metadata"]["name"] for p in cluster.store.list("pods", NAMESPACE)]
        if ours:
            cluster.store.delete("pods", choose.choice(sorted(ours)), NAMESPACE, grace_period_seconds=0)
    elif what == "add-node":
        added: dict[str, Any] = nodes(1)[0]
        added["metadata"]["name"] = f"extra-{step}"
        cluster.load_objects([added])
        extra.append(f"extra-{step}")
    elif what == "relabel":
        name = choose.choice(sorted(n["metadata"]["name"] for n in cluster.store.list("nodes")))
        cluster.store.patch("nodes", name, {"metadata": {"labels": {"chaos.toposched.io/step": str(step)}}})
    elif what == "cordon":
        name = choose.choice(sorted(n["metadata"]["name"] for n in cluster.store.list("nodes")))
        cordoned = bool(cluster.store.get("nodes", name).get("spec", {}).get("unschedulable"))
        cluster.store.patch("nodes", name, {"spec": {"unschedulable": not cordoned}})
    elif extra:
        busy = {p.get("spec", {}).get("nodeName") for p in cluster.store.list("pods")}
        idle = [name for name in extra if name not in busy]
        if idle:
            extra.remove(idle[0])
            cluster.store.delete("nodes", idle[0])


async def drop_watches(directory: Path, index: int) -> None:
    choose = random.Random(index)
    async with DevCluster() as cluster, aiohttp.ClientSession() as session:
        cluster.load_objects(nodes(12))
        config = config_file(directory / "config.yaml", fsync="always")
        async with daemon_process(cluster, directory, "toposched", election=False, config=config) as daemon:
            await daemon.wait_ready(session, "leader")
            stop = anyio.Event()
            extra: list[str] = []
            cut: list[int] = []
            async with anyio.create_task_group() as group:
                group.start_soon(keep_cutting, session, cluster, stop, random.Random(index + 1), cut)
                for step in range(CHURN_STEPS):
                    churn_step(cluster, choose, step, extra)
                    with anyio.move_on_after(choose.uniform(0.01, 0.1)):
                        await stop.wait()  # the pace of the churn (nothing sets it meanwhile)
                stop.set()
            await admin(session, cluster, "DELETE")
            assert sum(cut) > len(cut), f"watch streams open at each cut: {cut}"  # the daemon's were cut, often
            await wait_until(lambda: not differences(cluster, folded(daemon.log_dir)), within=CONVERGE_SECONDS,
                             what="the daemon's state to converge on the API server's")
            # The churn may have left no 4 empty nodes: the canary gets 4 new ones (seen through the
            # watches just cut, too).
            room = nodes(CANARY_SIZE)
            for made in room:
                made["metadata"]["name"] = f"canary-{made['metadata']['name']}"
            cluster.load_objects(room)
            await canary_binds(cluster, f"canary-{index}", [daemon])
            assert await daemon.stop() == 0
    await verified(daemon.log_dir)


async def test_watches_cut_mid_stream_while_the_cluster_changes_converge_to_the_api_servers_state(
        tmp_path: Path, iterations: int, tally: Tally) -> None:
    await iterate(tally, iterations, tmp_path, drop_watches)
