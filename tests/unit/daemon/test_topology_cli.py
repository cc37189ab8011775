"""`toposched topology show|generate` on scenario files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemon.cli.topology import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "topology"


def scenario(tmp_path: Path, *names: str) -> Path:
    directory = tmp_path / "scenario"
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(EXAMPLES / name, directory / name)
    return directory


def show_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["show", "--scenario", str(path), "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_show_json_has_the_documented_shape_with_free_after_running_pods(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = show_json(scenario(tmp_path, "cluster-labels.yaml", "cnt.yaml", "running-pods.yaml"), capsys)
    assert document["layers"] == ["ClusterTopologyLayer", "SpineLayer", "BlockLayer"]
    root = document["root"]
    assert set(root) == {"name", "layer", "tier", "nodeCount", "free", "children", "nodes"}
    assert (root["layer"], root["tier"], root["nodeCount"], root["nodes"]) == ("ClusterTopologyLayer", 3, 16, [])
    assert root["free"]["nvidia.com/gpu"] == "88"  # 128 GPUs, 5 pods of 8 running
    assert root["free"]["cpu"] == "1376"  # 16 x 96 - 5 x 32
    s0 = root["children"][0]
    assert (s0["name"], s0["layer"], s0["tier"], s0["nodeCount"], s0["nodes"]) == ("s0", "SpineLayer", 2, 8, [])
    b0 = s0["children"][0]
    assert (b0["name"], b0["tier"], b0["free"]["nvidia.com/gpu"]) == ("b0", 1, "0")
    assert b0["nodes"] == ["gpu-00", "gpu-01", "gpu-02", "gpu-03"]
    assert b0["children"] == []


def test_show_prints_a_readable_tree_with_layers_counts_and_free_gpus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--scenario", str(scenario(tmp_path, "cluster-labels.yaml", "running-pods.yaml"))]) == 0
    out = capsys.readouterr().out
    assert "source: labels" in out
    assert "SpineLayer s1" in out and "BlockLayer b1" in out
    assert "8 nodes" in out and "88/128 GPUs free" in out
    assert "gpu-04, gpu-05, gpu-06, gpu-07" in out


def test_generated_hypernodes_give_the_same_tree_as_the_labels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labelled = scenario(tmp_path, "cluster-labels.yaml", "cnt.yaml")
    before = show_json(labelled, capsys)
    out = tmp_path / "generated"
    out.mkdir()
    assert main(["generate", "--scenario", str(labelled), "--to", "hypernodes", "-o", str(out / "hn.yaml")]) == 0
    documents = list(yaml.safe_load_all((out / "hn.yaml").read_text()))
    assert {d["kind"] for d in documents} == {"HyperNode"}
    assert {(d["metadata"]["name"], d["spec"]["tier"], d["spec"]["tierName"]) for d in documents} == {
        ("s0", 2, "spine"), ("s1", 2, "spine"), ("b0", 1, "block"), ("b1", 1, "block"), ("b2", 1, "block"),
        ("b3", 1, "block")}
    shutil.copy(EXAMPLES / "cluster-labels.yaml", out / "cluster-labels.yaml")
    after = show_json(out, capsys)
    assert after == before


def test_the_example_hypernodes_give_the_same_tree_as_the_cnt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    by_cnt = show_json(scenario(tmp_path, "cluster-labels.yaml", "cnt.yaml"), capsys)
    by_hypernodes = show_json(scenario(tmp_path / "other", "cluster-labels.yaml", "hypernodes.yaml"), capsys)
    assert by_cnt == by_hypernodes


def test_generated_cnt_from_hypernodes_with_its_labels_gives_the_same_tree(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from_hypernodes = scenario(tmp_path, "cluster-labels.yaml", "hypernodes.yaml")
    before = show_json(from_hypernodes, capsys)
    assert main(["generate", "--scenario", str(from_hypernodes), "--to", "cnt"]) == 0
    text = capsys.readouterr().out
    cnt = yaml.safe_load(text)
    assert cnt["kind"] == "ClusterNetworkTopology" and cnt["metadata"]["name"] == "default"
    assert [layer["topologyLayer"] for layer in cnt["spec"]["networkTopologySpec"]] == [
        "SpineLayer", "BlockLayer", "NodeTopologyLayer"]
    # apply the `kubectl label` comments to label-less copies of the nodes
    labels: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if line.startswith("# kubectl label node "):
            words = line.removeprefix("# kubectl label node ").split()
            labels[words[0]] = dict(word.split("=", 1) for word in words[1:] if "=" in word)
    nodes = list(yaml.safe_load_all((EXAMPLES / "cluster-labels.yaml").read_text()))
    for node in nodes:
        node["metadata"]["labels"] = labels[node["metadata"]["name"]]
    target = tmp_path / "koordinator"
    target.mkdir()
    (target / "nodes.yaml").write_text(yaml.safe_dump_all(nodes))
    (target / "cnt.yaml").write_text(text)
    assert show_json(target, capsys) == before


def test_a_missing_scenario_is_an_error_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--scenario", str(tmp_path / "nope.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_topology_problems_go_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = scenario(tmp_path, "cluster-labels.yaml", "cnt.yaml")
    (directory / "z-stray.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "stray", "labels": {"network.topology.nvidia.com/spine": "s1",
                                                 "network.topology.nvidia.com/block": "b0"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}}}))
    assert main(["show", "--scenario", str(directory)]) == 0
    assert "labels contradict the hierarchy" in capsys.readouterr().err


def test_nvlink_cliques_give_the_accelerator_layer_and_a_generated_cnt_reads_both_keys(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GB200 NVL72 nodes as the GPU Operator's DRA driver labels them, no topograph.
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": f"gb-{index}", "labels": {"nvidia.com/gpu.clique": clique}},
              "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "4"}}}
             for index, clique in enumerate(["a1b2.0", "a1b2.0", "c3d4.0"])]
    labelled = tmp_path / "labels"
    labelled.mkdir()
    (labelled / "nodes.yaml").write_text(yaml.safe_dump_all(nodes))
    tree = show_json(labelled, capsys)
    assert [child["name"] for child in tree["root"]["children"]] == ["a1b2.0", "c3d4.0"]
    assert tree["root"]["children"][0]["nodes"] == ["gb-0", "gb-1"]
    assert main(["generate", "--scenario", str(labelled), "--to", "cnt"]) == 0
    text = capsys.readouterr().out
    layers = yaml.safe_load(text)["spec"]["networkTopologySpec"]
    assert layers[0] == {"topologyLayer": "AcceleratorLayer",
                         "labelKey": ["network.topology.nvidia.com/accelerator", "nvidia.com/gpu.clique"]}
    (labelled / "cnt.yaml").write_text(text)
    assert show_json(labelled, capsys) == tree


KUEUE_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "kueue-topology-custom-labels.yaml"


@pytest.mark.parametrize("api_version", ["kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"])
def test_show_names_the_kueue_topology_and_each_level_s_label_key(
        api_version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(KUEUE_SCENARIO.read_text().replace("kueue.x-k8s.io/v1beta2", api_version))
    assert main(["show", "--scenario", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # as printed, but for the console's line wrapping
    assert "source: KueueTopology default (kueue.x-k8s.io Topology)" in out
    assert ("SpineLayer (tier 2, topology-block, cloud.provider.com/topology-block) > "
            "BlockLayer (tier 1, topology-rack, cloud.provider.com/topology-rack)") in out
    assert "BlockLayer rack-3 (tier 1, topology-rack) · 2 nodes" in out


KAI_SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "kai-topology-podgroups.yaml"


def test_show_names_the_kai_topology_and_each_level_s_label_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--scenario", str(KAI_SCENARIO)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # as printed, but for the console's line wrapping
    assert "source: KaiTopology cluster-topology (kai.scheduler Topology)" in out
    assert ("SpineLayer (tier 2, topology-block, cloud.provider.com/topology-block) > "
            "BlockLayer (tier 1, topology-rack, cloud.provider.com/topology-rack)") in out
