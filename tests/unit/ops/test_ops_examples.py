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
    return load_documents(EXAMPLES / name)


def members(pod: Manifest, count: int, labels_by_index: list[dict[str, str]] | None = None) -> list[Manifest]:
    """`count` copies of an example member pod, named -0 .. -N with their index annotation."""
    base = pod["metadata"]["name"].rpartition("-")[0]
    out = []
    for index in range(count):
        clone = copy.deepcopy(pod)
        clone["metadata"]["name"] = f"{base}-{index}"
        annotations = clone["metadata"].setdefault("annotations", {})
        if "gang.scheduling.koordinator.sh/network-topology-index" in annotations:
            annotations["gang.scheduling.koordinator.sh/network-topology-index"] = str(index)
        if labels_by_index:
            clone["metadata"]["labels"].update(labels_by_index[index])
        out.append(clone)
    return out


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
    group, pod = example("koordinator-gang.yaml")
    report = simulate(tmp_path, [*example("nodes.yaml"), *example("priority-classes.yaml"),
                                 *example("cluster-network-topology.yaml"), group, *members(pod, 4)])
    assert report["pending"] == []
    nodes = [node_index(b["node"]) for b in report["bindings"]]
    assert len(nodes) == 4
    assert len({n // 4 for n in nodes}) == 1, f"gang spans spines: {nodes}"
    assert sorted(Counter(n // 2 for n in nodes).values()) == [2, 2], f"not two pods per block: {nodes}"
    assert len({b["at"] for b in report["bindings"]}) == 1, "all-or-nothing: bound together"


def test_volcano_gang_keeps_each_stage_in_one_block_and_the_job_in_one_spine(tmp_path: Path) -> None:
    group, pod = example("volcano-gang.yaml")
    stages = [{"stage": "0"}, {"stage": "0"}, {"stage": "1"}, {"stage": "1"}]
    report = simulate(tmp_path, [*example("nodes.yaml"), *example("priority-classes.yaml"),
                                 *example("hypernodes.yaml"), group, *members(pod, 4, stages)])
    assert report["pending"] == []
    where = {b["pod"]: node_index(b["node"]) for b in report["bindings"]}
    assert len(where) == 4
    assert len({n // 4 for n in where.values()}) == 1, f"job spans spines: {where}"
    for stage, names in (("0", ["ml-team/llm-finetune-0", "ml-team/llm-finetune-1"]),
                         ("1", ["ml-team/llm-finetune-2", "ml-team/llm-finetune-3"])):
        assert len({where[name] // 2 for name in names}) == 1, f"stage {stage} spans blocks: {where}"


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
