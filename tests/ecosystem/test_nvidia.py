"""GPU pods as NVIDIA's docs write them, on a network described by NVIDIA topograph labels alone.

NVIDIA's device-plugin docs ask for GPUs under `resources.limits` only (`nvidia.com/gpu: 1`, often
an unquoted number); the API server defaults the request from the limit and stores the quantity in
canonical form, and the scheduler must count it. The network is what topograph labels nodes with
(`network.topology.nvidia.com/spine`, `/block`, `/accelerator` for the NVLink domain), no
ClusterNetworkTopology and no HyperNode.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ecosystem.harness import (
    Ecosystem,
    ecosystem,
    gpu_nodes,
    namespace_yaml,
    pod_yaml,
    running,
    stream,
)

pytestmark = ecosystem

NODES = [f"dgx-{index}" for index in range(8)]
TOPOGRAPH = "network.topology.nvidia.com"


def labels(index: int) -> dict[str, str]:
    return {f"{TOPOGRAPH}/spine": "spine-0", f"{TOPOGRAPH}/block": f"block-{index // 4}",
            f"{TOPOGRAPH}/accelerator": f"nvl-{index // 2}"}


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    with running(tmp_path_factory.mktemp("nvidia"), gpu_nodes(NODES, labels)) as started:
        yield started


def test_eight_pods_asking_for_eight_gpus_in_limits_only_take_eight_nodes(eco: Ecosystem) -> None:
    namespace = "limits-only"
    names = [f"trainer-{i}" for i in range(8)]
    eco.apply(stream(namespace_yaml(namespace), *(pod_yaml(name, namespace, gpus='"8"') for name in names)))
    placed = eco.wait_bound(names, namespace)
    assert sorted(placed.values()) == sorted(NODES)  # one 8-GPU pod per 8-GPU node, never two on one
    stored = eco.find("pods", "trainer-0", namespace)
    assert stored is not None
    assert stored["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    eco.delete_namespace_objects(namespace)


def test_an_unquoted_gpu_count_is_scheduled_and_a_ninth_eight_gpu_pod_says_why_it_waits(eco: Ecosystem) -> None:
    namespace = "unquoted"
    names = [f"job-{i}" for i in range(9)]
    eco.apply(stream(namespace_yaml(namespace), *(pod_yaml(name, namespace, gpus="8") for name in names)))
    eco.wait_for(lambda: sum(1 for name in names if eco.node_of(name, namespace)) == 8, what="8 pods bound")
    (waiting,) = [name for name in names if not eco.node_of(name, namespace)]
    message = eco.wait_pending([waiting], namespace)[waiting]
    assert "nvidia.com/gpu" in message
    eco.wait_for(lambda: [e["message"] for e in eco.events(namespace, waiting, "Pod")
                          if e["reason"] == "FailedScheduling"] == [message], what="its FailedScheduling Event")
    eco.delete_namespace_objects(namespace)


def test_a_gang_of_two_four_gpu_pods_shares_one_free_node_rather_than_two_half_free_ones(eco: Ecosystem) -> None:
    namespace = "packing"
    # Another scheduler's pods: dgx-0 and dgx-1 (NVLink domain nvl-0) half full, dgx-3 full.
    others = [pod_yaml(f"other-{node}-{i}", namespace, gpus="4", spec=f"\n  nodeName: {node}")
              .replace("schedulerName: toposched", "schedulerName: default-scheduler")
              for node, count in (("dgx-0", 1), ("dgx-1", 1), ("dgx-3", 2)) for i in range(count)]
    for node in NODES[4:]:  # the second block full too, so the choice is inside the first
        others += [pod_yaml(f"other-{node}", namespace, gpus="8", spec=f"\n  nodeName: {node}")
                   .replace("schedulerName: toposched", "schedulerName: default-scheduler")]
    group = f"""apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: pair
  namespace: {namespace}
spec:
  minMember: 2
"""
    names = ["pair-0", "pair-1"]
    eco.apply(stream(namespace_yaml(namespace), *others))
    eco.apply(stream(group, *(pod_yaml(name, namespace, gpus="4", labels={"scheduling.x-k8s.io/pod-group": "pair"})
                              for name in names)))
    placed = eco.wait_bound(names, namespace)
    assert set(placed.values()) == {"dgx-2"}
    eco.delete_namespace_objects(namespace)
