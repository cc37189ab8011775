"""ops/examples as a user applies them: `kubectl apply -f` of each file as it ships (Namespace, gang
objects and every pod) to devcluster with the daemon running, on the example cluster of nodes.yaml
(8 nodes of 8 GPUs: 2 spines x 2 blocks x 2 nodes), and the placement the README documents for it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ecosystem.harness import Ecosystem, ecosystem, running

pytestmark = ecosystem

EXAMPLES = Path(__file__).resolve().parents[2] / "ops" / "examples"
NODES: list[dict[str, Any]] = [doc for doc in yaml.safe_load_all((EXAMPLES / "nodes.yaml").read_text()) if doc]


def text(name: str) -> str:
    return (EXAMPLES / name).read_text(encoding="utf-8")


def pods_of(name: str) -> list[str]:
    return [doc["metadata"]["name"] for doc in yaml.safe_load_all(text(name)) if doc and doc["kind"] == "Pod"]


def spine(node: str) -> int:
    return int(node.removeprefix("gpu-")) // 4


def block(node: str) -> int:
    return int(node.removeprefix("gpu-")) // 2


def test_koordinator_gang_binds_its_four_pods_under_one_spine_two_per_block(tmp_path: Path) -> None:
    with running(tmp_path, NODES, text("cluster-network-topology.yaml")) as eco:
        eco.apply(text("priority-classes.yaml"))
        eco.apply(text("koordinator-gang.yaml"))
        names = pods_of("koordinator-gang.yaml")
        placed = eco.wait_bound(names, "ml-team")
        assert len(names) == 4
        assert len({spine(node) for node in placed.values()}) == 1, placed
        assert sorted(Counter(block(node) for node in placed.values()).values()) == [2, 2], placed
        eco.wait_for(lambda: phase(eco, "podgroups.scheduling.sigs.k8s.io", "llm-pretrain") == "Scheduled",
                     what="the PodGroup's phase Scheduled")


def test_volcano_gang_keeps_each_stage_in_one_block_and_the_job_in_one_spine(tmp_path: Path) -> None:
    with running(tmp_path, NODES, text("hypernodes.yaml")) as eco:
        eco.apply(text("priority-classes.yaml"))
        eco.apply(text("volcano-gang.yaml"))
        placed = eco.wait_bound(pods_of("volcano-gang.yaml"), "ml-team")
        assert len(placed) == 4
        assert len({spine(node) for node in placed.values()}) == 1, placed
        stages = {doc["metadata"]["name"]: doc["metadata"]["labels"]["stage"]
                  for doc in yaml.safe_load_all(text("volcano-gang.yaml")) if doc and doc["kind"] == "Pod"}
        for stage in ("0", "1"):
            members = [name for name in placed if stages[name] == stage]
            assert len(members) == 2 and len({block(placed[name]) for name in members}) == 1, placed


def test_gang_group_binds_both_groups_each_under_one_spine(tmp_path: Path) -> None:
    with running(tmp_path, NODES, text("cluster-network-topology.yaml")) as eco:
        eco.apply(text("gang-group.yaml"))
        placed = eco.wait_bound(pods_of("gang-group.yaml"), "ml-team")
        assert len(placed) == 6
        for group in ("rl-learners", "rl-actors"):
            assert len({spine(node) for name, node in placed.items() if name.startswith(group)}) == 1, placed


def test_never_fits_stays_pending_saying_why_on_the_podgroup_and_its_pods(tmp_path: Path) -> None:
    with running(tmp_path, NODES, text("cluster-network-topology.yaml")) as eco:
        eco.apply(text("never-fits.yaml"))
        messages = eco.wait_pending(pods_of("never-fits.yaml"), "ml-team", says="it can never fit")
        assert all("MustGather at BlockLayer" in message for message in messages.values())
        eco.wait_for(lambda: phase(eco, "podgroups.scheduling.sigs.k8s.io", "wide-job") == "Pending",
                     what="the PodGroup's phase Pending")


def test_koordinator_quota_example_places_the_team_pod(tmp_path: Path) -> None:
    with running(tmp_path, NODES, text("cluster-network-topology.yaml")) as eco:
        eco.apply(text("quota-koordinator.yaml"))
        assert eco.wait_bound(pods_of("quota-koordinator.yaml"), "ml-team")
        shown = quota_show(tmp_path)
        (tree,) = shown["trees"]
        (research,) = tree["quotas"]
        vision = next(q for q in research["children"] if q["name"] == "vision")
        assert vision["used"]["nvidia.com/gpu"] == "8"


def test_volcano_queue_example_binds_the_research_job_within_its_capability(tmp_path: Path) -> None:
    with running(tmp_path, NODES, text("hypernodes.yaml")) as eco:
        eco.apply(text("quota-volcano.yaml"))
        placed = eco.wait_bound(pods_of("quota-volcano.yaml"), "ml-team")
        assert len(placed) == 2
        queues = {q["name"]: q for t in quota_show(tmp_path)["trees"] for q in t["quotas"]}
        assert queues["research"]["used"]["nvidia.com/gpu"] == "16"


def test_capacity_scheduling_example_creates_one_quota_per_namespace(tmp_path: Path) -> None:
    with running(tmp_path, NODES, text("cluster-network-topology.yaml")) as eco:
        eco.apply(text("quota-capacity-scheduling.yaml"))
        (tree,) = quota_show(tmp_path)["trees"]
        assert {(q["name"], q["min"]["nvidia.com/gpu"], q["max"]["nvidia.com/gpu"]) for q in tree["quotas"]} == {
            ("team-a/quota", "32", "64"), ("team-b/quota", "32", "48")}


def phase(eco: Ecosystem, resource: str, name: str) -> str:
    found = eco.find(resource, name, "ml-team")
    return str((found or {}).get("status", {}).get("phase", ""))


def quota_show(root: Path) -> dict[str, Any]:
    """`toposched quota show --kubeconfig --json` against the running cluster, as a user checks it."""
    done = subprocess.run([sys.executable, "-m", "daemon", "quota", "show", "--kubeconfig", str(root / "kubeconfig"),
                           "--json"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


@pytest.fixture(autouse=True)
def _every_example_is_covered() -> None:
    covered = {"nodes.yaml", "priority-classes.yaml", "cluster-network-topology.yaml", "hypernodes.yaml",
               "koordinator-gang.yaml", "volcano-gang.yaml", "gang-group.yaml", "quota-koordinator.yaml",
               "quota-volcano.yaml", "quota-capacity-scheduling.yaml", "never-fits.yaml"}
    assert {path.name for path in EXAMPLES.glob("*.yaml")} == covered, "a new example needs its test here"
