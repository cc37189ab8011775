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
from tests.integration.daemon.harness import daemons, gang, node_of, nodes, pod_names, wait_until

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
