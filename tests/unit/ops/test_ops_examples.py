"""The copy-paste examples under ops/examples (the README shows them) are valid for `toposched
validate` and do what the README says they do when simulated on the small cluster of nodes.yaml
(8 nodes of 8 GPUs: 2 spines x 2 blocks x 2 nodes)."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemon.cli import simulate as simulate_cli
from daemon.cli import topology as topology_cli
from daemon.cli import validate as validate_cli

from .opsfiles import OPS, Manifest, load_documents

EXAMPLES = OPS / "examples"


def example(name: str) -> list[Manifest]:
    """The example's objects, but its Namespace (a simulation has no namespaces to create)."""
    return [doc for doc in load_documents(EXAMPLES / name) if doc["kind"] != "Namespace"]


def simulate(tmp_path: Path, documents: list[Manifest]) -> dict[str, Any]:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    report = tmp_path / "report.json"
    assert simulate_cli.main([str(scenario), "--out", str(report)]) == 0
    result: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return result


def node_index(node: str) -> int:
    return int(node.removeprefix("gpu-"))


def test_every_example_passes_toposched_validate(capsys: pytest.CaptureFixture[str]) -> None:
    assert validate_cli.main([str(path) for path in sorted(EXAMPLES.glob("*.yaml"))]) == 0
    assert "OK" in capsys.readouterr().out


def test_koordinator_gang_lands_under_one_spine_two_pods_per_block(tmp_path: Path) -> None:
    report = simulate(tmp_path, [*example("nodes.yaml"), *example("priority-classes.yaml"),
                                 *example("cluster-network-topology.yaml"), *example("koordinator-gang.yaml")])
    assert report["pending"] == []
    nodes = [node_index(b["node"]) for b in report["bindings"]]
    assert len(nodes) == 4
    assert len({n // 4 for n in nodes}) == 1, f"gang spans spines: {nodes}"
    assert sorted(Counter(n // 2 for n in nodes).values()) == [2, 2], f"not two pods per block: {nodes}"
    assert len({b["at"] for b in report["bindings"]}) == 1, "all-or-nothing: bound together"


def test_volcano_gang_keeps_each_stage_in_one_block_and_the_job_in_one_spine(tmp_path: Path) -> None:
    report = simulate(tmp_path, [*example("nodes.yaml"), *example("priority-classes.yaml"),
                                 *example("hypernodes.yaml"), *example("volcano-gang.yaml")])
    assert report["pending"] == []
    where = {b["pod"]: node_index(b["node"]) for b in report["bindings"]}
    assert len(where) == 4
    assert len({n // 4 for n in where.values()}) == 1, f"job spans spines: {where}"
    for stage, names in (("0", ["ml-team/llm-finetune-0", "ml-team/llm-finetune-1"]),
                         ("1", ["ml-team/llm-finetune-2", "ml-team/llm-finetune-3"])):
        assert len({where[name] // 2 for name in names}) == 1, f"stage {stage} spans blocks: {where}"


def test_gang_group_binds_both_groups_together_each_under_one_spine(tmp_path: Path) -> None:
    report = simulate(tmp_path, [*example("nodes.yaml"), *example("cluster-network-topology.yaml"),
                                 *example("gang-group.yaml")])
    assert report["pending"] == []
    where = {b["pod"]: node_index(b["node"]) for b in report["bindings"]}
    assert len(where) == 6
    for group in ("rl-learners", "rl-actors"):
        spines = {n // 4 for pod, n in where.items() if pod.startswith(f"ml-team/{group}-")}
        assert len(spines) == 1, f"{group} spans spines: {where}"
    assert len({b["at"] for b in report["bindings"]}) == 1, "the GangGroup binds together"


def test_hypernodes_and_the_cluster_network_topology_describe_the_same_network(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trees = []
    for extra in ("cluster-network-topology.yaml", "hypernodes.yaml"):
        scenario = tmp_path / f"{extra}.scenario.yaml"
        scenario.write_text(yaml.safe_dump_all([*example("nodes.yaml"), *example(extra)]), encoding="utf-8")
        capsys.readouterr()
        assert topology_cli.main(["show", "--scenario", str(scenario), "--json"]) == 0
        trees.append(json.loads(capsys.readouterr().out))
    assert trees[0]["layers"] == ["ClusterTopologyLayer", "SpineLayer", "BlockLayer"]
    assert trees[0] == trees[1]


def _at(document: Manifest, seconds: float) -> Manifest:
    clone = copy.deepcopy(document)
    clone["metadata"].setdefault("annotations", {})["sim.toposched.io/at"] = str(seconds)
    return clone


def _lone(pod: Manifest, name: str, *, labels: dict[str, str] | None = None, namespace: str = "",
          annotations: dict[str, str] | None = None, at: float = 0.0) -> Manifest:
    clone = copy.deepcopy(pod)
    clone["metadata"]["name"] = name
    if namespace:
        clone["metadata"]["namespace"] = namespace
    if labels is not None:
        clone["metadata"]["labels"] = labels
    clone["metadata"]["annotations"] = {**(annotations or {}), "sim.toposched.io/at": str(at)}
    return clone


def test_koordinator_quota_team_borrows_the_idle_department_and_the_other_team_reclaims_its_min(
        tmp_path: Path) -> None:
    *quotas, vision_pod = example("quota-koordinator.yaml")
    sweep = [_lone(vision_pod, f"vision-sweep-{i}", labels=vision_pod["metadata"]["labels"]) for i in range(8)]
    llm_labels = {"quota.scheduling.koordinator.sh/name": "llm"}
    llm = [_lone(vision_pod, f"llm-{i}", labels=llm_labels, at=100) for i in range(2)]
    report = simulate(tmp_path, [*example("nodes.yaml"), *quotas, *sweep, *llm])
    assert len([b for b in report["bindings"] if b["pod"].startswith("ml-team/vision-sweep-")]) == 8  # borrows all
    victims = [v for p in report["preemptions"] for v in p["victims"]]
    assert len(victims) == 2 and all(v.startswith("ml-team/vision-sweep-") for v in victims)  # llm takes 16 back
    assert {b["pod"]: b["at"] for b in report["bindings"] if "llm" in b["pod"]} == {
        "ml-team/llm-0": 130.0, "ml-team/llm-1": 130.0}
    assert {q["quota"] for q in report["quotas"]} == {"quota research", "quota llm", "quota vision"}


def test_capacity_quota_namespace_borrows_unused_min_and_gives_it_back(tmp_path: Path) -> None:
    quotas = example("quota-capacity-scheduling.yaml")
    member = example("koordinator-gang.yaml")[1]
    plain = {"app": "sweep"}
    team_a = [_lone(member, f"a-{i}", namespace="team-a", labels=plain) for i in range(6)]
    team_b = [_lone(member, f"b-{i}", namespace="team-b", labels=plain, at=100) for i in range(3)]
    for pod in [*team_a, *team_b]:
        pod["spec"].pop("priorityClassName", None)
    report = simulate(tmp_path, [*example("nodes.yaml"), *quotas, *team_a, *team_b])
    assert len([b for b in report["bindings"] if b["pod"].startswith("team-a/")]) == 6  # 48 GPUs: 16 borrowed
    assert [p["victims"] for p in report["preemptions"]] != []  # team-b claims its min back
    assert len([b for b in report["bindings"] if b["pod"].startswith("team-b/")]) == 3
    assert report["pending"] == []


def test_volcano_queue_capability_holds_and_production_reclaims_from_research(tmp_path: Path) -> None:
    production, research, sweep, *_ = example("quota-volcano.yaml")
    member = example("volcano-gang.yaml")[1]
    docs: list[Manifest] = [*example("nodes.yaml"), production, research]
    for number in range(5):  # five 2-pod research jobs: only four fit its capability of 32
        group = copy.deepcopy(sweep)
        group["metadata"]["name"] = f"sweep-{number}"
        docs.append(group)
        marks = {"scheduling.k8s.io/group-name": f"sweep-{number}", "volcano.sh/preemptable": "true"}
        docs += [_lone(member, f"sweep-{number}-{i}", labels={}, annotations=marks) for i in range(2)]
    for pod in docs:
        if pod["kind"] == "Pod":
            pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "8", "nvidia.com/gpu": "4"},
                                                         "limits": {"nvidia.com/gpu": "4"}}
    job = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
           "metadata": {"name": "serve", "namespace": "ml-team", "annotations": {"sim.toposched.io/at": "100"}},
           "spec": {"minMember": 5, "queue": "production"}}
    docs.append(job)
    docs += [_lone(member, f"serve-{i}", labels={}, annotations={"scheduling.k8s.io/group-name": "serve"}, at=100)
             for i in range(5)]
    for pod in docs[-5:]:
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "8", "nvidia.com/gpu": "8"},
                                                     "limits": {"nvidia.com/gpu": "8"}}
    report = simulate(tmp_path, docs)
    pending = {p["pod"]: p["reason"] for p in report["pending"]}
    assert "gang ml-team/sweep-4: queue research: nvidia.com/gpu" in pending["ml-team/sweep-4-0"]
    # production (40 GPUs, within deserved 48) finds 32 free and reclaims one research job for the rest
    [reclaim] = report["preemptions"]
    assert len(reclaim["victims"]) == 2 and {v.rpartition("-")[0] for v in reclaim["victims"]} < {
        f"ml-team/sweep-{n}" for n in range(4)}
    assert len([b for b in report["bindings"] if b["pod"].startswith("ml-team/serve-")]) == 5
