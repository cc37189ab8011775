"""Against an API server that takes milliseconds per write, as an etcd-backed one does, the daemon's
writes overlap at the server instead of queueing behind each other.

A real API server (Go's net/http) serves one connection's requests one after another, and so does
devcluster (aiohttp). devcluster answers in microseconds, so a client that pipelined its writes on one
connection would look just as fast against it as one that spreads them over connections. Here
devcluster is made to take 20 ms per write, and counts how many writes it holds at once
(`FaultInjector.most_delaying`): requests pipelined on one connection are never held together.
- Bindings: each goes on a connection of its own, so many are served at once.
- Scheduled Events: the daemon's HTTP pool sees its pipelined answers come that slowly and stops
  pipelining; every pod's Event is written.
"""

from __future__ import annotations

from pathlib import Path

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import NAMESPACE, bound_count, daemons, gang, nodes, pod, pod_names, wait_until

PODS = 48


def scheduled_events(cluster: DevCluster) -> set[str]:
    return {event["involvedObject"]["name"] for event in cluster.store.list("events", NAMESPACE)
            if event["reason"] == "Scheduled"}


async def test_scheduled_events_go_on_connections_of_their_own_when_the_api_server_writes_them_slowly(
        tmp_path: Path) -> None:
    names = [f"single-{index}" for index in range(PODS)]
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects(nodes(8))
        cluster.faults.add_latency(0.02, verb="create", path="/events")
        async with daemons(cluster, tmp_path) as (running,):
            cluster.load_objects([pod(name, gpus=1) for name in names])
            await wait_until(lambda: bound_count(cluster, names) == PODS, within=60, what="every pod bound")
            await wait_until(lambda: scheduled_events(cluster) == set(names), within=60,
                             what="a Scheduled Event for every pod")
            api = running.daemon.api
            assert api is not None
            pool = api.client.http
            assert pool is not None and not pool.pipelining
            assert pool.answer_seconds is not None and pool.answer_seconds >= 0.002


async def test_a_gangs_bindings_are_served_together_when_the_api_server_writes_them_slowly(tmp_path: Path) -> None:
    manifests = gang("slow-binds", PODS, gpus=1)
    names = pod_names(manifests)
    async with DevCluster(kubelet=False) as cluster:
        cluster.load_objects(nodes(8))
        cluster.faults.add_latency(0.02, verb="create", path="/binding")
        async with daemons(cluster, tmp_path):
            cluster.load_objects(manifests)
            await wait_until(lambda: bound_count(cluster, names) == PODS, within=60, what="the gang bound")
    # The gang's Bindings are queued at once: pipelined on one connection, they would be held one at a time
    assert cluster.faults.most_delaying >= 8, cluster.faults.most_delaying
