"""Quota reclaim through the real daemon against devcluster over HTTP.

team-a and team-b each have a min of half the cluster's GPUs. team-b fills the cluster: one gang
within its min, labelled preemptible "false", and one gang borrowing team-a's idle min. When
team-a's gang arrives, within its min, the daemon takes the borrowing gang back whole: DisruptionTarget
and a Preempted Event on every one of its pods, eviction, team-a's pods nominated onto the freed
nodes and bound there; team-b's gang within its min is never touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devcluster.cluster import DevCluster
from events.objects import QUOTA_PREEMPTIBLE_LABEL
from tests.integration.daemon.harness import (
    NAMESPACE,
    bound_count,
    daemons,
    gang,
    node_of,
    nodes,
    pod_names,
    wait_until,
)
from tests.integration.daemon.test_quota_status import elastic_quota, in_quota

VICTIM_GRACE_SECONDS = 3  # the window in which the victims (and what is written on them) are seen


def pod_object(cluster: DevCluster, name: str) -> dict[str, Any]:
    return cluster.store.find("pods", name, NAMESPACE) or {}


def disruption(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((dict(c) for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == "DisruptionTarget"), None)


def events_for(cluster: DevCluster, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in cluster.store.list("events", NAMESPACE) if e["reason"] == reason
            and e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name]


async def test_team_a_takes_its_min_back_from_team_bs_borrowing_gang_whole(tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(4), elastic_quota("team-a", minimum=16, maximum=32),
                              elastic_quota("team-b", minimum=16, maximum=32)])
        async with daemons(cluster, tmp_path):
            core = in_quota(gang("b-core", 2), "team-b")
            for manifest in core:
                if manifest["kind"] == "Pod":
                    manifest["metadata"]["labels"][QUOTA_PREEMPTIBLE_LABEL] = "false"
            cluster.load_objects(core)
            await wait_until(lambda: bound_count(cluster, pod_names(core)) == 2, what="team-b's gang within its min")
            borrowing = in_quota(gang("b-borrow", 2), "team-b")
            for manifest in borrowing:
                if manifest["kind"] == "Pod":
                    manifest["spec"]["terminationGracePeriodSeconds"] = VICTIM_GRACE_SECONDS
            cluster.load_objects(borrowing)
            victims = pod_names(borrowing)
            await wait_until(lambda: bound_count(cluster, victims) == 2, what="team-b borrowing team-a's idle min")
            core_nodes = {name: node_of(cluster, name) for name in pod_names(core)}
            freed = {node_of(cluster, name) for name in victims}

            owed = in_quota(gang("a-train", 2), "team-a")
            cluster.load_objects(owed)
            preemptors = pod_names(owed)
            marked: dict[str, dict[str, Any]] = {}
            nominated: dict[str, str] = {}

            def observe() -> bool:
                for name in victims:
                    found = disruption(pod_object(cluster, name))
                    if found is not None:
                        marked[name] = found
                for name in preemptors:
                    node = (pod_object(cluster, name).get("status") or {}).get("nominatedNodeName")
                    if node:
                        nominated[name] = node
                # (the eviction's EvictionByEvictionAPI is written over by the daemon's own again: wait for it)
                rewritten = all(c["reason"] == "PreemptionByScheduler" for c in marked.values())
                return len(marked) == 2 and rewritten and len(nominated) == 2

            await wait_until(observe, within=15, what="the borrowing gang marked, team-a's pods nominated")
            for condition in marked.values():
                assert condition["reason"] == "PreemptionByScheduler"
                assert "quota team-b" in condition["message"]  # which quota borrowed the capacity
            assert set(nominated.values()) == freed

            await wait_until(lambda: bound_count(cluster, preemptors) == 2, within=20,
                             what="team-a's gang bound once the borrowers left")
            assert {node_of(cluster, name) for name in preemptors} == freed
            assert all(not pod_object(cluster, name) for name in victims)  # the whole gang went
            assert {name: node_of(cluster, name) for name in pod_names(core)} == core_nodes  # never touched
            for name in pod_names(core):
                assert disruption(pod_object(cluster, name)) is None
            await wait_until(lambda: all(events_for(cluster, "Pod", name, "Preempted") for name in victims),
                             what="a Preempted Event on every victim")
            for name in victims:
                (event,) = events_for(cluster, "Pod", name, "Preempted")
                assert event["type"] == "Normal"
                assert "reclaimed by gang default/a-train" in event["message"]
                assert "quota team-b borrowed this capacity" in event["message"]
            assert events_for(cluster, "PodGroup", "b-borrow", "Preempted")
