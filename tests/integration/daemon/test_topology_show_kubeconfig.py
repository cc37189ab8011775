"""`toposched topology show|generate --kubeconfig`: the live cluster's tree, and the HyperNodes or
ClusterNetworkTopology written from it, the same as `--scenario` gives on the same objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemon.cli.topology import main
from devcluster.cluster import BackgroundDevCluster

SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"


def node(name: str, block: str, spine: str = "s0", gpus: int = 8) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {SPINE: spine, BLOCK: block}},
            "status": {"capacity": resources, "allocatable": resources}}


def running_pod(name: str, node_name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node_name, "schedulerName": "default-scheduler",
                     "containers": [{"name": "main", "image": "x",
                                     "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}}}]}}


CNT = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
    "metadata": {"name": "default"},
    "spec": {"networkTopologySpec": [
        {"topologyLayer": "SpineLayer", "labelKey": [SPINE]},
        {"topologyLayer": "BlockLayer", "labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer"},
        {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"},
    ]},
}


def hyper_node(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def both_ways(tmp_path: Path, objects: list[dict[str, Any]], capsys: pytest.CaptureFixture[str],
              *extra: str, command: str = "show") -> tuple[str, str]:
    """`command` on the objects as a scenario file and as a live cluster: (scenario output, cluster output)."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump_all(objects))
    assert main([command, "--scenario", str(scenario), *extra]) == 0
    from_file = capsys.readouterr().out
    with BackgroundDevCluster() as background:
        background.call(lambda cluster: cluster.load_objects(objects))
        kubeconfig = background.write_kubeconfig(tmp_path / "kubeconfig")
        assert main([command, "--kubeconfig", str(kubeconfig), *extra]) == 0
    return from_file, capsys.readouterr().out


def test_kubeconfig_json_equals_scenario_json_with_free_gpus_counting_running_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    objects = [node("n0", "b0"), node("n1", "b0"), node("n2", "b1"), node("n3", "b1", spine="s0"), CNT,
               running_pod("busy", "n2", 6)]
    from_file, from_cluster = both_ways(tmp_path, objects, capsys, "--json")
    document = json.loads(from_cluster)
    assert document == json.loads(from_file)
    assert document["layers"] == ["ClusterTopologyLayer", "SpineLayer", "BlockLayer"]
    (spine,) = document["root"]["children"]
    b0, b1 = spine["children"]
    assert (b0["name"], b0["nodeCount"], b0["nodes"], b0["free"]["nvidia.com/gpu"]) == ("b0", 2, ["n0", "n1"], "16")
    assert (b1["name"], b1["free"]["nvidia.com/gpu"]) == ("b1", "10")  # 16 - the running pod's 6


def test_kubeconfig_shows_a_hypernode_tree_as_the_readable_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    objects = [node("n0", "b0"), node("n1", "b0"),
               hyper_node("hn-low", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[01]$"}}}]),
               hyper_node("hn-top", 2, [{"type": "HyperNode", "selector": {"exactMatch": {"name": "hn-low"}}}])]
    from_file, from_cluster = both_ways(tmp_path, objects, capsys)
    assert from_cluster == from_file
    assert "source: HyperNode" in from_cluster and "hn-low" in from_cluster and "hn-top" in from_cluster


def test_generate_from_a_labelled_cluster_writes_the_hypernodes_of_its_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    objects = [node("n0", "b0"), node("n1", "b0"), node("n2", "b1", spine="s1"), running_pod("busy", "n2", 6)]
    from_file, from_cluster = both_ways(tmp_path, objects, capsys, "--to", "hypernodes", command="generate")
    assert from_cluster == from_file
    documents = {d["metadata"]["name"]: d["spec"] for d in yaml.safe_load_all(from_cluster)}
    assert set(documents) == {"s0", "s1", "b0", "b1"}
    assert documents["b0"]["members"] == [{"type": "Node", "selector": {"exactMatch": {"name": name}}}
                                          for name in ("n0", "n1")]
    assert documents["s1"]["members"] == [{"type": "HyperNode", "selector": {"exactMatch": {"name": "b1"}}}]


def test_generate_from_a_hypernode_cluster_writes_a_cluster_network_topology_and_the_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    objects = [node("n0", "b0"), node("n1", "b0"),
               hyper_node("hn-low", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[01]$"}}}]),
               hyper_node("hn-top", 2, [{"type": "HyperNode", "selector": {"exactMatch": {"name": "hn-low"}}}])]
    from_file, from_cluster = both_ways(tmp_path, objects, capsys, "--to", "cnt", command="generate")
    assert from_cluster == from_file
    assert yaml.safe_load(from_cluster)["kind"] == "ClusterNetworkTopology"
    assert "# kubectl label node n0 topology.toposched.io/tier-2=hn-top topology.toposched.io/tier-1=hn-low" \
        in from_cluster


def test_exactly_one_of_scenario_and_kubeconfig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["show"], ["show", "--scenario", "x.yaml", "--kubeconfig", "k"], ["generate", "--to", "cnt"],
                 ["generate", "--to", "cnt", "--scenario", "x.yaml", "--kubeconfig", "k"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
    capsys.readouterr()


def test_an_unreadable_kubeconfig_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--kubeconfig", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err
