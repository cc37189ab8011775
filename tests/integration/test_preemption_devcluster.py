"""Job-level preemption through the real daemon against devcluster over HTTP.

A full block runs a low-priority gang; a high-priority gang of the same size arrives. The daemon
must write DisruptionTarget on every victim, evict them through the Eviction API (they terminate
within their grace period), write status.nominatedNodeName on every preemptor pod, and bind the
gang onto exactly its nominated nodes once the victims are gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import daemons, gang, node_of, nodes, pod, pod_names, wait_until

VICTIM_GRACE_SECONDS = 2


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def pod_object(cluster: DevCluster, name: str) -> dict[str, Any]:
    return cluster.store.find("pods", name, "default") or {}


def disruption_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    for condition in obj.get("status", {}).get("conditions", []) or []:
        if condition.get("type") == "DisruptionTarget":
            return dict(condition)
    return None


async def test_gang_preempts_a_whole_low_priority_gang_and_binds_on_its_nominated_nodes(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([priority_class("low", 100), priority_class("high", 1000), *nodes(4)])
        async with daemons(cluster, tmp_path):
            low = gang("low", 4, priority_class="low")
            for manifest in low:
                if manifest["kind"] == "Pod":
                    manifest["spec"]["terminationGracePeriodSeconds"] = VICTIM_GRACE_SECONDS
            cluster.load_objects(low)
            victims = pod_names(low)
            await wait_until(lambda: all(node_of(cluster, name) for name in victims), what="low gang bound")
            victim_nodes = {name: node_of(cluster, name) for name in victims}

            high = gang("high", 4, priority_class="high")
            cluster.load_objects(high)
            preemptors = pod_names(high)
            nominated: dict[str, str] = {}
            conditions: dict[str, dict[str, Any]] = {}
            terminating: set[str] = set()

            def observe() -> bool:
                for name in victims:
                    obj = pod_object(cluster, name)
                    found = disruption_condition(obj)
                    if found is not None:
                        conditions[name] = found
                    if obj.get("metadata", {}).get("deletionTimestamp"):
                        terminating.add(name)
                for name in preemptors:
                    node = pod_object(cluster, name).get("status", {}).get("nominatedNodeName")
                    if node:
                        nominated[name] = node
                # The eviction rewrites the condition to its EvictionByEvictionAPI, and the daemon writes its
                # own again right after (daemon/kube/cluster_api.py evict): wait for that, not the moment between.
                rewritten = all(c["reason"] == "PreemptionByScheduler" for c in conditions.values())
                return len(conditions) == 4 and rewritten and len(terminating) == 4 and len(nominated) == 4

            await wait_until(observe, within=15, what="victims marked and evicting, preemptors nominated")
            # while the victims terminate, nothing of the preemptor is bound yet
            assert not any(node_of(cluster, name) for name in preemptors)
            for condition in conditions.values():
                assert condition["status"] == "True"
                assert condition["reason"] == "PreemptionByScheduler"
                assert "default/high" in condition["message"]
            assert set(nominated.values()) == set(victim_nodes.values())

            await wait_until(lambda: all(node_of(cluster, name) for name in preemptors), within=20,
                             what="preemptor gang bound after the victims left")
            assert {name: node_of(cluster, name) for name in preemptors} == nominated
            assert all(not pod_object(cluster, name) for name in victims)


BLOCK = "network.topology.nvidia.com/block"
JOB_KEY = "jobset.sigs.k8s.io/job-key"


def exclusive_per_block(manifests: list[dict[str, Any]], job_key: str) -> list[dict[str, Any]]:
    """The manifests' pods as JobSet's webhook writes them for `alpha.jobset.sigs.k8s.io/exclusive-topology`
    over the block label: required podAffinity to their own job, podAntiAffinity to every other job."""
    for manifest in manifests:
        if manifest["kind"] != "Pod":
            continue
        manifest["metadata"].setdefault("labels", {})[JOB_KEY] = job_key
        manifest["spec"]["terminationGracePeriodSeconds"] = VICTIM_GRACE_SECONDS
        manifest["spec"]["affinity"] = {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [job_key]}]},
                 "topologyKey": BLOCK, "namespaceSelector": {}}]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "Exists"},
                                                        {"key": JOB_KEY, "operator": "NotIn", "values": [job_key]}]},
                 "topologyKey": BLOCK, "namespaceSelector": {}}]}}
    return manifests


async def test_exclusive_jobset_job_preempts_the_low_priority_job_holding_a_block_though_gpus_are_free(
        tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        # two blocks of two nodes; each gets one small low-priority exclusive job, so GPUs stay free in both
        cluster.load_objects([priority_class("low", 100), priority_class("high", 1000), *nodes(4, per_block=2)])
        async with daemons(cluster, tmp_path):
            lows = {name: exclusive_per_block(gang(name, 1, gpus=2, priority_class="low"), f"{name}-key")
                    for name in ("low-a", "low-b")}
            for manifests in lows.values():
                cluster.load_objects(manifests)
            low_pods = [name for manifests in lows.values() for name in pod_names(manifests)]
            await wait_until(lambda: all(node_of(cluster, name) for name in low_pods), what="low jobs bound")
            block_of = {f"node-{index:03d}": f"block-{index // 2}" for index in range(4)}
            low_blocks = {name: block_of[node_of(cluster, name)] for name in low_pods}
            assert len(set(low_blocks.values())) == 2  # one block each: exclusive

            high = exclusive_per_block(gang("high", 2, gpus=4, priority_class="high"), "high-key")
            cluster.load_objects(high)
            preemptors = pod_names(high)
            await wait_until(lambda: all(node_of(cluster, name) for name in preemptors), within=25,
                             what="the exclusive high-priority job bound after a low job left its block")
            gone = [name for name in low_pods if not pod_object(cluster, name)]
            kept = [name for name in low_pods if pod_object(cluster, name)]
            assert len(gone) == 1 and len(kept) == 1  # one job evicted, not both
            assert {block_of[node_of(cluster, name)] for name in preemptors} == {low_blocks[gone[0]]}
            assert node_of(cluster, kept[0])  # the other block's job still runs


async def test_a_lower_priority_pod_keeps_off_a_node_nominated_for_a_pod_its_anti_affinity_selects(
        tmp_path: Path) -> None:
    # A preemptor gang waits for its victim to leave, one pod nominated to a node with room to spare. A
    # lower-priority pod whose anti-affinity selects the preemptor's pods arrives meanwhile: kube-scheduler,
    # which filters with the higher-priority nominated pods added, keeps it off that node; landing there
    # would turn the preemptor away from its own nominated node once the victim is gone.
    async with DevCluster() as cluster:
        hosts = nodes(4, gpus=16)
        for host in hosts:  # as every kubelet labels its node
            host["metadata"]["labels"]["kubernetes.io/hostname"] = host["metadata"]["name"]
        small = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "4"}  # too small for a preemptor
        hosts[3]["status"] = {"capacity": small, "allocatable": small}
        cluster.load_objects([priority_class("low", 100), priority_class("mid", 500), priority_class("high", 1000),
                              *hosts])
        async with daemons(cluster, tmp_path):
            keep = pod("keep", 16, priority_class="high")  # not a victim: its priority is the preemptor's
            cluster.load_objects([keep])
            await wait_until(lambda: bool(node_of(cluster, "keep")), what="keep bound")
            low = gang("low", 1, gpus=16, priority_class="low")
            for manifest in low:
                if manifest["kind"] == "Pod":
                    manifest["spec"]["terminationGracePeriodSeconds"] = 4
            cluster.load_objects(low)
            await wait_until(lambda: bool(node_of(cluster, "low-0")), what="low gang bound")
            victim_node = node_of(cluster, "low-0")

            high = gang("high", 2, gpus=12, priority_class="high")
            for manifest in high:
                if manifest["kind"] == "Pod":
                    manifest["metadata"]["labels"]["app"] = "db"
            cluster.load_objects(high)
            nominated: dict[str, str] = {}

            def preemptors_nominated() -> bool:
                for name in ("high-0", "high-1"):
                    node = pod_object(cluster, name).get("status", {}).get("nominatedNodeName")
                    if node:
                        nominated[name] = node
                return len(nominated) == 2 and bool(pod_object(cluster, "low-0").get("metadata", {})
                                                    .get("deletionTimestamp"))

            await wait_until(preemptors_nominated, within=15, what="the victim evicting, the preemptors nominated")
            assert victim_node in nominated.values()  # the other nominated node has 4 GPUs to spare

            web = pod("web", 2, priority_class="mid")
            web["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}}
            cluster.load_objects([web])
            await wait_until(lambda: all(node_of(cluster, name) for name in ("high-0", "high-1", "web")), within=25,
                             what="the preemptor gang and the web pod bound")
            assert {name: node_of(cluster, name) for name in ("high-0", "high-1")} == nominated
            assert node_of(cluster, "web") == "node-003"  # not `spare`, though it had the room
