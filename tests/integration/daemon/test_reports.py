"""What users see: PodGroup status and Events for pending and scheduled gangs, preemption's traces, bad config."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import structlog

from daemon.cli.run import main as run_main
from devcluster.cluster import DevCluster
from devcluster.watch import WatchEvent
from tests.integration.daemon.harness import bound_count, daemons, gang, node_of, nodes, pod_names, wait_until


def pod_group(cluster: DevCluster, name: str) -> dict[str, Any]:
    return cluster.store.get("podgroups.scheduling.sigs.k8s.io", name, "default")


def events_about(cluster: DevCluster, name: str) -> list[dict[str, Any]]:
    return [e for e in cluster.store.list("events", "default") if e["involvedObject"]["name"] == name]


class PodVersion(NamedTuple):
    node: str
    nominated: str
    conditions: list[dict[str, Any]]


def pod_history(cluster: DevCluster) -> dict[str, list[PodVersion]]:
    """A live record of every stored version of every pod in `default`, by name, from now on."""
    history: dict[str, list[PodVersion]] = defaultdict(list)

    def seen(event: WatchEvent) -> None:
        if event.key == "pods" and event.namespace == "default" and event.type != "DELETED":
            spec, status = event.obj.get("spec") or {}, event.obj.get("status") or {}
            history[event.obj["metadata"]["name"]].append(PodVersion(
                str(spec.get("nodeName") or ""), str(status.get("nominatedNodeName") or ""),
                copy.deepcopy(status.get("conditions") or [])))

    cluster.store.subscribe(seen)
    return history


def condition(cluster: DevCluster, name: str, kind: str) -> dict[str, Any] | None:
    conditions = pod_group(cluster, name).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == kind), None)


async def test_pending_gang_says_why_on_its_podgroup_and_in_an_event_then_says_scheduled(tmp_path: Path) -> None:
    mustgather = json.dumps({"gatherStrategy": [{"layer": "AcceleratorLayer", "strategy": "MustGather"}]})
    async with DevCluster() as cluster:
        cluster.load_objects(nodes(8))  # NVLink domains of 4 nodes
        async with daemons(cluster, tmp_path):
            job = gang("wide", 6, annotations={"gang.scheduling.koordinator.sh/network-topology-spec": mustgather})
            cluster.load_objects(job)
            await wait_until(lambda: condition(cluster, "wide", "Unschedulable") is not None, what="pending condition")
            pending = condition(cluster, "wide", "Unschedulable")
            assert pending is not None and "default/wide" in pending["message"]
            assert pod_group(cluster, "wide")["status"]["phase"] == "Pending"
            await wait_until(lambda: bool(events_about(cluster, "wide")), what="an Event on the PodGroup")
            event = events_about(cluster, "wide")[0]
            assert event["type"] == "Warning" and event["reason"] == "FailedScheduling"
            assert event["message"] == pending["message"]
            assert bound_count(cluster, pod_names(job)) == 0

            def pod_scheduled(name: str) -> dict[str, Any] | None:
                found = cluster.store.get("pods", name, "default")
                return next((c for c in found["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)

            await wait_until(lambda: all(pod_scheduled(name) is not None for name in pod_names(job)),
                             what="PodScheduled on every member")
            for name in pod_names(job):
                member = pod_scheduled(name)
                assert member is not None and (member["status"], member["reason"]) == ("False", "Unschedulable")
                assert member["message"] == pending["message"]

            fits = gang("fits", 4)
            cluster.load_objects(fits)
            await wait_until(lambda: condition(cluster, "fits", "Scheduled") is not None, what="scheduled condition")
            assert pod_group(cluster, "fits")["status"]["phase"] == "Scheduled"
            await wait_until(lambda: any(e["reason"] == "Scheduled" for e in events_about(cluster, "fits")),
                             what="a Scheduled Event")


async def test_high_priority_gang_preempts_a_whole_low_priority_gang_and_lands_on_its_nominated_nodes(
    tmp_path: Path,
) -> None:
    classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    ]
    async with DevCluster() as cluster:
        cluster.load_objects([*classes, *nodes(4)])
        async with daemons(cluster, tmp_path):
            low = gang("low", 4, priority_class="low")
            for manifest in low[1:]:
                manifest["spec"]["terminationGracePeriodSeconds"] = 1  # victims linger while terminating
            cluster.load_objects(low)
            await wait_until(lambda: bound_count(cluster, pod_names(low)) == 4, what="low gang bound")
            low_nodes = {node_of(cluster, name) for name in pod_names(low)}
            # Every version of every pod, as the API server stored it: what a watcher would have seen,
            # never a sample of it (a victim's DisruptionTarget and a preemptor's nomination are brief).
            history = pod_history(cluster)

            high = gang("high", 4, priority_class="high")
            cluster.load_objects(high)
            await wait_until(lambda: bound_count(cluster, pod_names(high)) == 4, within=30,
                             what="the high-priority gang bound")
            await wait_until(lambda: all(cluster.store.find("pods", name, "default") is None
                                         for name in pod_names(low)), what="every pod of the low gang gone")
            placed = {name: node_of(cluster, name) for name in pod_names(high)}
            assert set(placed.values()) == low_nodes
            # Each victim was marked before its eviction. The eviction handler then rewrites the condition
            # (EvictionByEvictionAPI) and the daemon writes its own again, unless the victim is gone by then
            # (a one-second grace on a loaded machine): so some version says who preempted it, not always the last.
            disruption = {name: [c for version in history[name] for c in version.conditions
                                 if c["type"] == "DisruptionTarget"] for name in pod_names(low)}
            assert all(disruption.values()), disruption
            for conditions in disruption.values():
                # As kube-scheduler since 1.34: decided for the victim's generation (1: its spec never changed).
                assert any(c["reason"] == "PreemptionByScheduler" and "default/high" in c["message"]
                           and c.get("observedGeneration") == 1 for c in conditions), conditions
            for name in pod_names(high):
                before = [v for v in history[name] if not v.node]
                after = [v for v in history[name] if v.node]
                nominated = {v.nominated for v in before if v.nominated}
                assert nominated == {placed[name]}, f"{name} nominated {nominated}, bound on {placed[name]}"
                # The API server cleared nominatedNodeName at binding (Kubernetes 1.35) and set
                # PodScheduled=True; nothing set a nomination or PodScheduled=False again afterwards.
                assert [v for v in after if v.nominated] == []
                assert [c for v in after for c in v.conditions
                        if c["type"] == "PodScheduled" and c["status"] == "False"] == []

            # What kube-scheduler leaves: a Preempted Event on each victim naming the preemptor, a
            # Scheduled Event on each bound pod.
            high_0 = cluster.store.get("pods", "high-0", "default")["metadata"]["uid"]
            def has_event(name: str, reason: str) -> Callable[[], bool]:
                return lambda: any(e["reason"] == reason for e in events_about(cluster, name))

            for name in pod_names(low):
                await wait_until(has_event(name, "Preempted"), what=f"a Preempted Event on {name}")
                (preempted,) = [e for e in events_about(cluster, name) if e["reason"] == "Preempted"]
                assert preempted["type"] == "Normal"
                assert preempted["message"].startswith(f"Preempted by pod {high_0} on node ")
                assert "default/high" in preempted["message"]
            for name in pod_names(high):
                await wait_until(has_event(name, "Scheduled"), what=f"a Scheduled Event on {name}")
                (scheduled,) = [e for e in events_about(cluster, name) if e["reason"] == "Scheduled"]
                assert scheduled["message"] == f"Successfully assigned default/{name} to {placed[name]}"
                assert "nominatedNodeName" not in cluster.store.get("pods", name, "default")["status"]
            victim_group = pod_group(cluster, "low")["status"]
            assert victim_group["phase"] == "Pending"
            assert [(c["type"], c["reason"]) for c in victim_group["conditions"]] == [("Preempted", "Preempted")]
            assert "4 pod(s) preempted by gang default/high" in victim_group["conditions"][0]["message"]
            assert any(e["reason"] == "Preempted" for e in events_about(cluster, "low"))


def test_a_bad_config_stops_run_with_the_key_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("scheduler_name: gpu\nleader_election:\n  lease_durration_seconds: 10\n")
    assert run_main(["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "leader_election.lease_durration_seconds" in err and "unknown key" in err
    assert run_main(["--bind-concurrency", "0", "--kubeconfig", str(tmp_path / "none")]) == 2
    assert "bind_concurrency: expected int >= 1, got 0" in capsys.readouterr().err


def test_an_unusable_kubeconfig_stops_run_with_a_clear_message(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.kubeconfig"
    try:
        code = run_main(["--kubeconfig", str(missing), "--log-dir", str(tmp_path / "log"), "--address",
                         "127.0.0.1:0", "--log-level", "error"])
    finally:
        structlog.reset_defaults()  # main() configured logging for the process: leave other tests theirs
    assert code == 2
    assert "toposched run: no usable API server configuration: " in capsys.readouterr().err
