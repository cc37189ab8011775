"""Kueue's Topology (Topology Aware Scheduling), applied with kubectl as Kueue's docs write it, over nodes
labelled with the admin's own keys (`cloud.provider.com/topology-block`, `-rack`) that no built-in scheme
knows: toposched builds its tree from it, and a gang of whole nodes lands in one rack, VolcanoPodGroup
`highestTierName` naming the rack level by its label's last segment."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from daemon.cli.topology import main as show
from tests.ecosystem.harness import Ecosystem, ecosystem, gpu_nodes, namespace_yaml, pod_yaml, running, stream

pytestmark = ecosystem

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
NODES = [f"gpu-{index:02d}" for index in range(8)]
# gpu-00 and gpu-01 are in two racks (the first free nodes by name); racks c and d hold three nodes each.
RACK_OF = dict(zip(NODES, ["rack-a", "rack-b", "rack-c", "rack-c", "rack-c", "rack-d", "rack-d", "rack-d"],
                   strict=True))

TOPOLOGY = """apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: default
spec:
  levels:
  - nodeLabel: "cloud.provider.com/topology-block"
  - nodeLabel: "cloud.provider.com/topology-rack"
  - nodeLabel: "kubernetes.io/hostname"
"""


def labels(index: int) -> dict[str, str]:
    return {BLOCK: "block-0" if index < 5 else "block-1", RACK: RACK_OF[NODES[index]]}


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    with running(tmp_path_factory.mktemp("kueue"), gpu_nodes(NODES, labels), TOPOLOGY) as started:
        yield started


def test_kubectl_lists_the_topology_and_topology_show_reads_the_cluster_s_tree_from_it(
        eco: Ecosystem, capsys: pytest.CaptureFixture[str]) -> None:
    listed = eco.kubectl.run("get", "topologies.kueue.x-k8s.io", "-o", "name").stdout.split()
    assert listed == ["topology.kueue.x-k8s.io/default"]
    kubeconfig = eco.kubectl.base[eco.kubectl.base.index("--kubeconfig") + 1]
    assert show(["show", "--kubeconfig", kubeconfig, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"] == ["ClusterTopologyLayer", "SpineLayer", "BlockLayer"]


def test_a_gang_of_whole_nodes_lands_in_one_rack_named_by_its_label(eco: Ecosystem) -> None:
    namespace = "racked"
    group = f"""apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: train
  namespace: {namespace}
spec:
  minMember: 3
  networkTopology:
    mode: hard
    highestTierName: topology-rack
"""
    pods = [pod_yaml(f"train-{index}", namespace, annotations={"scheduling.k8s.io/group-name": "train"})
            for index in range(3)]
    eco.apply(stream(namespace_yaml(namespace), group, *pods))
    where = eco.wait_bound([f"train-{index}" for index in range(3)], namespace)
    assert len({RACK_OF[node] for node in where.values()}) == 1, where
    eco.delete_namespace_objects(namespace)
