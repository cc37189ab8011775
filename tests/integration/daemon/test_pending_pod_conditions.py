"""A pending gang's members as the rest of the cluster reads them, over the real API: PodScheduled=False
written once per reason, its lastTransitionTime kept while it stays False (cluster-autoscaler and
Karpenter read these pods; kube-scheduler's UpdatePodCondition keeps the time), and a daemon started
again (a new leader) that finds them already saying so writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import daemons, gang, nodes, pod, pod_names, wait_until

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
            assert {c.get("observedGeneration") for c in first.values()} == {1}  # kube-scheduler's, since 1.34
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


async def test_a_pending_pods_condition_names_the_generation_it_was_decided_for(tmp_path: Path) -> None:
    """observedGeneration, as kube-scheduler writes it since Kubernetes 1.34: the pod's generation, which the API
    server moves with each change of its spec; a gang member whose spec changes is told again for the new one,
    still False since it first was. A pod without a gang carries it too."""
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(1))
        job = gang("wide", 2)
        lone = pod("lone", 16)
        async with daemons(cluster, tmp_path):
            cluster.load_objects([*job, lone])
            await wait_until(lambda: pod_scheduled(cluster, "wide-0").get("reason") == "Unschedulable"
                             and pod_scheduled(cluster, "lone").get("reason") == "Unschedulable",
                             what="both marked Unschedulable")
            assert pod_scheduled(cluster, "lone")["observedGeneration"] == 1
            before = pod_scheduled(cluster, "wide-0")
            assert before["observedGeneration"] == 1
            # A change of its spec that placement does not read: the same reason, for another generation.
            cluster.store.patch("pods", "wide-0", {"spec": {"activeDeadlineSeconds": 86400}}, "default")
            assert cluster.store.get("pods", "wide-0", "default")["metadata"]["generation"] == 2
            await wait_until(lambda: pod_scheduled(cluster, "wide-0").get("observedGeneration") == 2,
                             what="the member told again for its new generation")
            after = pod_scheduled(cluster, "wide-0")
            assert (after["status"], after["reason"], after["message"]) == \
                (before["status"], before["reason"], before["message"])
            assert after["lastTransitionTime"] == before["lastTransitionTime"]
            assert pod_scheduled(cluster, "wide-1")["observedGeneration"] == 1
