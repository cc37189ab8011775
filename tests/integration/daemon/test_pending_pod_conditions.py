"""A pending gang's members as the rest of the cluster reads them, over the real API: PodScheduled=False
written once per reason, its lastTransitionTime kept while it stays False (cluster-autoscaler and
Karpenter read these pods; kube-scheduler's UpdatePodCondition keeps the time), and a daemon started
again (a new leader) that finds them already saying so writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import daemons, gang, nodes, pod_names, wait_until

LONG_AGO = "2026-01-01T00:00:00Z"


def pod_scheduled(cluster: DevCluster, name: str) -> dict[str, Any]:
    found = cluster.store.get("pods", name, "default")
    return next((c for c in found["status"].get("conditions", []) if c["type"] == "PodScheduled"), {})


def status_patches(cluster: DevCluster, names: list[str], since: int) -> list[str]:
    paths = {f"/api/v1/namespaces/default/pods/{name}/status" for name in names}
    return [r.path for r in cluster.audit.since(since) if r.method == "PATCH" and r.path in paths]


async def test_a_pending_members_condition_keeps_its_time_and_a_new_leader_rewrites_none(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(2))
        job = gang("wide", 4)  # 4 pods of 8 GPUs on 2 nodes of 8
        members = pod_names(job)
        async with daemons(cluster, tmp_path / "first") as (running,):
            cluster.load_objects(job)
            await wait_until(lambda: all(pod_scheduled(cluster, name).get("reason") == "Unschedulable"
                                         for name in members), what="every member Unschedulable")
            seen = running.daemon.state
            assert seen is not None
            for name in members:  # False since long before (the writes above all came within a second)
                condition = {**pod_scheduled(cluster, name), "lastTransitionTime": LONG_AGO}
                cluster.store.patch("pods", name, {"status": {"conditions": [condition]}}, "default",
                                    subresource="status")
            await wait_until(lambda: all(seen.pods[f"default/{name}"].obj.metadata.resource_version
                                         == cluster.store.get("pods", name, "default")["metadata"]["resourceVersion"]
                                         for name in members), what="the daemon seeing the patched pods")
            first = {name: pod_scheduled(cluster, name) for name in members}
            cluster.load_objects(nodes(3)[2:])  # a third node: room for 3 of 4, another reason
            await wait_until(lambda: all(pod_scheduled(cluster, name)["message"] != first[name]["message"]
                                         for name in members), what="every member given the gang's new reason")
            for name in members:
                now = pod_scheduled(cluster, name)
                assert (now["status"], now["reason"]) == ("False", "Unschedulable")
                assert now["lastTransitionTime"] == LONG_AGO, name  # still False since
            said = {name: pod_scheduled(cluster, name) for name in members}

        restarted = cluster.audit.since()[-1].seq
        async with daemons(cluster, tmp_path / "second") as (running,):
            state = running.daemon.state
            assert state is not None
            await wait_until(lambda: "default/wide" in state.gangs and state.gangs["default/wide"].last_reason != "",
                             what="the gang tried by the new leader")
            later = gang("later", 4)  # written after the relisted members were looked at
            cluster.load_objects(later)
            await wait_until(lambda: all(pod_scheduled(cluster, name).get("reason") == "Unschedulable"
                                         for name in pod_names(later)), what="the later gang's members marked")
            assert state.gangs["default/wide"].last_reason[:1024] == said[members[0]]["message"]
            assert status_patches(cluster, members, restarted) == []
            assert {name: pod_scheduled(cluster, name) for name in members} == said
