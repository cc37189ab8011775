"""Against an API server that takes milliseconds to write each Event, as an etcd-backed one does, the
daemon's Scheduled Events stop sharing one connection.

A real API server (Go's net/http) serves one connection's requests one after another, and so does
devcluster (aiohttp): Events pipelined on one connection then take the sum of their writes, where
Events on connections of their own overlap. devcluster is made to take 20 ms per Event create here;
the daemon's HTTP pool sees its pipelined answers come that slowly, stops pipelining, and every pod's
Scheduled Event is written.
"""

from __future__ import annotations

from pathlib import Path

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import NAMESPACE, bound_count, daemons, nodes, pod, wait_until

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
