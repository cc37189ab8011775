"""Koordinator's gangs and network topology, with manifests shaped as Koordinator's docs write them.

The network is a `ClusterNetworkTopology` named `default` whose layers are node label keys (the
docs' shape: SpineLayer > BlockLayer > NodeTopologyLayer on NVIDIA topograph labels); a gang is a
`scheduling.sigs.k8s.io/v1alpha1` PodGroup with the `gang.scheduling.koordinator.sh/network-topology-spec`
annotation and pods labelled `pod-group.scheduling.sigs.k8s.io`, or, with no PodGroup object at all,
pods carrying the `gang.scheduling.koordinator.sh/*` annotations (name, min-available, waiting-time,
total-number, mode).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.ecosystem.harness import Ecosystem, ecosystem, gpu_nodes, namespace_yaml, pod_yaml, running, stream

pytestmark = ecosystem

NODES = [f"gpu-{index}" for index in range(8)]
SPINE, BLOCK = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"
BLOCK_OF = {name: f"block-{index // 4}" for index, name in enumerate(NODES)}

CLUSTER_NETWORK_TOPOLOGY = f"""
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: ClusterNetworkTopology
metadata:
  name: default
spec:
  networkTopologySpec:
  - labelKey:
    - {SPINE}
    topologyLayer: SpineLayer
  - labelKey:
    - {BLOCK}
    parentTopologyLayer: SpineLayer
    topologyLayer: BlockLayer
  - parentTopologyLayer: BlockLayer
    topologyLayer: NodeTopologyLayer
"""


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    nodes = gpu_nodes(NODES, lambda index: {SPINE: "spine-0", BLOCK: f"block-{index // 4}"})
    with running(tmp_path_factory.mktemp("koordinator"), nodes, CLUSTER_NETWORK_TOPOLOGY) as started:
        yield started


def test_a_podgroup_that_must_gather_in_a_block_binds_whole_inside_one(eco: Ecosystem) -> None:
    namespace = "koord-mustgather"
    spec = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]})
    group = f"""apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: training-job
  namespace: {namespace}
  annotations:
    gang.scheduling.koordinator.sh/network-topology-spec: '{spec}'
spec:
  minMember: 4
  scheduleTimeoutSeconds: 300
"""
    names = [f"training-job-{i}" for i in range(4)]
    eco.apply(stream(namespace_yaml(namespace), group,
                     *(pod_yaml(name, namespace, labels={"pod-group.scheduling.sigs.k8s.io": "training-job"})
                       for name in names)))
    placed = eco.wait_bound(names, namespace)
    assert len({BLOCK_OF[node] for node in placed.values()}) == 1
    def phase() -> str:  # the PodGroup's status is written once the binds are back: wait for it
        found = eco.find("podgroups.scheduling.sigs.k8s.io", "training-job", namespace)
        return str((found or {}).get("status", {}).get("phase", ""))

    eco.wait_for(lambda: phase() == "Scheduled", what="the PodGroup's phase Scheduled")
    def scheduled_events(name: str) -> list[str]:
        return [e["message"] for e in eco.events(namespace, name, "Pod") if e["reason"] == "Scheduled"]

    for name, node in placed.items():  # Events are written in the background: wait for each
        expected = [f"Successfully assigned {namespace}/{name} to {node}"]
        eco.wait_for(lambda n=name, want=expected: scheduled_events(n) == want,  # type: ignore[misc]
                     what=f"the Scheduled Event of {name}")
    eco.delete_namespace_objects(namespace)


def test_an_annotation_only_gang_waits_for_min_available_says_so_on_its_pods_then_binds_together(
    eco: Ecosystem,
) -> None:
    namespace = "koord-annotations"
    annotations = {
        "gang.scheduling.koordinator.sh/name": "gang-a",
        "gang.scheduling.koordinator.sh/min-available": "5",
        "gang.scheduling.koordinator.sh/waiting-time": "3600s",
        "gang.scheduling.koordinator.sh/total-number": "5",
        "gang.scheduling.koordinator.sh/mode": "Strict",
    }
    names = [f"gang-a-{i}" for i in range(5)]
    eco.apply(stream(namespace_yaml(namespace),
                     *(pod_yaml(name, namespace, gpus="4", annotations=annotations) for name in names[:4])))
    # Koordinator's Coscheduling holds a gang short of members at PreEnqueue: not ready, not unschedulable.
    messages = eco.wait_pending(names[:4], namespace, says="4 of minMember 5 pods exist",
                                reason="NotReadyForScheduling")
    assert len(set(messages.values())) == 1  # the gang's one reason on each of its pods
    # No PodGroup object: the gang's Event is on its first pending pod, and says it is not ready (Normal).
    eco.wait_for(lambda: {(e["involvedObject"]["name"], e["type"]) for e in eco.events(namespace, kind="Pod")
                          if e["reason"] == "NotReadyForScheduling"} == {("gang-a-0", "Normal")},
                 what="the gang's NotReadyForScheduling Event")
    assert not [e for e in eco.events(namespace, kind="Pod") if e["reason"] == "FailedScheduling"]

    eco.apply(pod_yaml(names[4], namespace, gpus="4", annotations=annotations))
    placed = eco.wait_bound(names, namespace)
    assert len({BLOCK_OF[node] for node in placed.values()}) == 1
    eco.delete_namespace_objects(namespace)
