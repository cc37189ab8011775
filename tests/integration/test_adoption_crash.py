"""Kill -9 `toposched run` mid-bind, change the planned nodes while it is down, start it again on its log.

The daemon (a real process against devcluster over HTTP) plans a gang of 12 and starts binding it;
the bindings of 8 of its pods hang in the API server (devcluster latency), so the kill leaves 4 pods
bound and 8 assumed in the log. While it is down, two of the planned nodes are cordoned and tainted
and two are filled by pods another scheduler bound there, all through the API. Started again with
the same log directory, the daemon must not carry out the old plan where it no longer fits: every
node stays within its allocatable, no pod of the gang lands on a cordoned or tainted node, and the
gang is completed on nodes that take it (there is room for it).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from kubernetes_asyncio import client, config

from daemon.offline.verify import verify_decisions
from devcluster import DevCluster
from events.log import EventLog
from events.model import Event, PodAssumed, PodForgotten
from tests.integration.daemon.harness import gang, node_of, nodes, pod, pod_names, wait_until

NAMESPACE = "default"
GPUS = 8
SIZE = 12
FIRST = 4  # members whose binding is answered before the kill; the others' hang in the API server
HANG_SECONDS = 3600.0  # longer than the test: a hanging binding never lands


@asynccontextmanager
async def daemon_process(kubeconfig: Path, log_dir: Path) -> AsyncIterator[anyio.abc.Process]:
    command = [sys.executable, "-m", "daemon", "run", "--kubeconfig", str(kubeconfig), "--log-dir", str(log_dir),
               "--no-leader-elect", "--fsync", "always", "--address", "127.0.0.1:0", "--log-level", "warning"]
    async with await anyio.open_process(command) as process:
        try:
            yield process
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


def read_log(log_dir: Path) -> list[Event]:
    log = EventLog.open_readonly(log_dir)
    try:
        return list(log.read())
    finally:
        log.close()


def gpus_by_node(cluster: DevCluster) -> dict[str, int]:
    used: dict[str, int] = {}
    for item in cluster.store.list("pods"):
        node = item.get("spec", {}).get("nodeName")
        if not node or item.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for container in item["spec"]["containers"]:
            gpus = int(container.get("resources", {}).get("requests", {}).get("nvidia.com/gpu", "0"))
            used[node] = used.get(node, 0) + gpus
    return used


async def test_a_plan_killed_mid_bind_is_not_carried_out_on_nodes_cordoned_tainted_or_filled_while_down(
        tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(16))  # 2 blocks of 8 nodes, 8 GPUs each
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        job = gang("big", SIZE, GPUS)
        names = pod_names(job)
        hanging = [cluster.faults.add_latency(HANG_SECONDS, verb="create", path=f"/pods/{name}/binding")
                   for name in names[FIRST:]]
        async with daemon_process(kubeconfig, log_dir) as first:
            cluster.load_objects(job)
            await wait_until(lambda: all(node_of(cluster, name) for name in names[:FIRST]), within=30,
                             what="the first members bound")
            first.send_signal(signal.SIGKILL)
            with anyio.fail_after(10):
                assert await first.wait() == -signal.SIGKILL
        for rule in hanging:
            cluster.faults.remove(rule)
        before = {name: node_of(cluster, name) for name in names}
        assert sum(1 for node in before.values() if node) == FIRST

        planned = {e.pod.split("/")[1]: e.node for e in read_log(log_dir) if isinstance(e, PodAssumed)}
        assert sorted(planned) == sorted(names)  # the whole plan was assumed before the kill
        targets = sorted({planned[name] for name in names if not before[name]})
        assert len(targets) == SIZE - FIRST
        closed, filled = targets[:2], targets[2:4]

        api_client = await config.new_client_from_config(config_file=str(kubeconfig))
        try:
            core: Any = client.CoreV1Api(api_client)
            for name in closed:  # kubectl cordon + kubectl taint
                await core.patch_node(name, {"spec": {"unschedulable": True, "taints": [
                    {"key": "maintenance", "value": "drain", "effect": "NoSchedule"}]}}, _preload_content=False)
            for name in filled:  # another scheduler's pod takes the whole node
                other = pod(f"other-{name}", GPUS, scheduler="default-scheduler")
                other["spec"]["nodeName"] = name
                await core.create_namespaced_pod(NAMESPACE, other, _preload_content=False)
        finally:
            await api_client.close()

        async with daemon_process(kubeconfig, log_dir) as second:
            await wait_until(lambda: all(node_of(cluster, name) for name in names), within=30,
                             what="the gang completed after the restart")
            after = {name: node_of(cluster, name) for name in names}
            second.send_signal(signal.SIGTERM)
            with anyio.fail_after(20):
                assert await second.wait() == 0

        assert {name: after[name] for name in names[:FIRST]} == {name: before[name] for name in names[:FIRST]}
        assert not set(after.values()) & set(closed), "a pod of the old plan went to a cordoned, tainted node"
        over = {node: used for node, used in gpus_by_node(cluster).items() if used > GPUS}
        assert over == {}, f"nodes over their {GPUS} GPUs: {over}"

    events = read_log(log_dir)
    released = [e for e in events if isinstance(e, PodForgotten) and "no longer holds" in e.reason]
    assert sorted(e.pod.split("/")[1] for e in released) == sorted(names[FIRST:])
    check = verify_decisions(events)
    assert check.ok, check.mismatches
