"""The demo's world: a synthetic spine-block-NVLink GPU cluster and a sample training workload.

Plain Kubernetes objects (dicts in API shape, as `kubectl apply` would send them), so the demo
exercises exactly what a real cluster would: nodes with NVIDIA topograph labels
(`network.topology.nvidia.com/{spine,block,accelerator}`), PriorityClasses, Koordinator PodGroups
with their gather strategy annotation, and pods labelled into their gangs.

Shape: 2 spines x 3 blocks x 2 NVLink domains x 4 nodes = 48 nodes of 8 GPUs (384 GPUs).
An NVLink domain holds 4 nodes (32 GPUs), a block 8 nodes (64 GPUs), a spine 24 nodes (192 GPUs).

Pure data: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from events.objects import NETWORK_TOPOLOGY_SPEC_ANNOTATION, POD_GROUP_LABEL

Manifest = dict[str, Any]

SPINES = 2
BLOCKS_PER_SPINE = 3
NVL_PER_BLOCK = 2
NODES_PER_NVL = 4
GPUS_PER_NODE = 8
NAMESPACE = "training"
LOW_PRIORITY = "batch-low"
HIGH_PRIORITY = "urgent-high"

TOPOGRAPH = "network.topology.nvidia.com/"


class DemoJob(msgspec.Struct, frozen=True):
    """One gang of the workload, and what the demo expects of it."""

    name: str
    pods: int
    gpus_per_pod: int
    strategy: str  # "" | MustGather | PreferGather
    layer: str  # gather layer ("" = none)
    priority_class: str = LOW_PRIORITY
    expect: str = "bound"  # bound | pending | preempted | bound-after-preemption
    phase: int = 1  # 1: the first wave; 2: arrives once the first wave has settled
    note: str = ""


JOBS: tuple[DemoJob, ...] = (
    DemoJob("llm-pretrain", 16, 8, "PreferGather", "BlockLayer", note="16 nodes: more than a block, stays in a spine"),
    DemoJob("vision-ft", 8, 8, "MustGather", "BlockLayer", note="one whole block"),
    DemoJob("rl-actor", 4, 8, "MustGather", "AcceleratorLayer", note="one NVLink domain"),
    DemoJob("speech", 4, 8, "PreferGather", "AcceleratorLayer", note="prefers one NVLink domain"),
    DemoJob("eval-sweep", 2, 4, "", "", note="no topology wish"),
    DemoJob("too-wide", 6, 8, "MustGather", "AcceleratorLayer", expect="pending",
            note="6 nodes cannot fit an NVLink domain of 4"),
    DemoJob("batch-fill", 8, 8, "PreferGather", "BlockLayer", note="low-priority filler"),
    DemoJob("hot-fix", 8, 8, "MustGather", "BlockLayer", priority_class=HIGH_PRIORITY,
            expect="bound-after-preemption", phase=2, note="high priority; the cluster is full: preempts"),
)


def node_name(spine: int, block: int, nvl: int, index: int) -> str:
    return f"gpu-s{spine}-b{block}-n{nvl}-{index}"


def nodes() -> list[Manifest]:
    result: list[Manifest] = []
    for spine in range(SPINES):
        for block in range(BLOCKS_PER_SPINE):
            for nvl in range(NVL_PER_BLOCK):
                for index in range(NODES_PER_NVL):
                    labels = {
                        TOPOGRAPH + "spine": f"spine-{spine}",
                        TOPOGRAPH + "block": f"block-{spine}-{block}",
                        TOPOGRAPH + "accelerator": f"nvl-{spine}-{block}-{nvl}",
                        "nvidia.com/gpu.product": "H100-SXM",
                    }
                    name = node_name(spine, block, nvl, index)
                    labels["kubernetes.io/hostname"] = name
                    result.append({
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": name, "labels": labels},
                        "spec": {},
                        "status": {
                            "capacity": _node_resources(),
                            "allocatable": _node_resources(),
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    })
    return result


def _node_resources() -> dict[str, str]:
    return {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(GPUS_PER_NODE)}


def priority_classes() -> list[Manifest]:
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": LOW_PRIORITY},
         "value": 100, "description": "batch work that may be preempted"},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": HIGH_PRIORITY},
         "value": 10000, "description": "urgent training that preempts batch work"},
    ]


def namespace() -> Manifest:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def pod_group(job: DemoJob, scheduler_name: str = "toposched") -> Manifest:
    annotations: dict[str, str] = {}
    if job.strategy:
        annotations[NETWORK_TOPOLOGY_SPEC_ANNOTATION] = json.dumps(
            {"gatherStrategy": [{"layer": job.layer, "strategy": job.strategy}]}
        )
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": job.name, "namespace": NAMESPACE, "annotations": annotations,
                     "labels": {"app.kubernetes.io/part-of": "toposched-demo"}},
        "spec": {"minMember": job.pods, "scheduleTimeoutSeconds": 600},
    }


def pods(job: DemoJob, scheduler_name: str = "toposched") -> list[Manifest]:
    result: list[Manifest] = []
    for index in range(job.pods):
        result.append({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job.name}-{index}",
                "namespace": NAMESPACE,
                "labels": {POD_GROUP_LABEL: job.name, "app.kubernetes.io/part-of": "toposched-demo"},
            },
            "spec": {
                "schedulerName": scheduler_name,
                "priorityClassName": job.priority_class,
                "terminationGracePeriodSeconds": 0,
                "containers": [{
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {
                        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(job.gpus_per_pod)},
                        "limits": {"nvidia.com/gpu": str(job.gpus_per_pod)},
                    },
                }],
            },
        })
    return result


def lowest_shared_layer(node_labels: list[dict[str, str]]) -> tuple[str, str]:
    """(layer, domain) of the smallest topograph domain holding all these nodes: ("ClusterLayer", "") if none."""
    for label, layer in (("accelerator", "AcceleratorLayer"), ("block", "BlockLayer"), ("spine", "SpineLayer")):
        values = {labels.get(TOPOGRAPH + label, "") for labels in node_labels}
        if len(values) == 1 and "" not in values:
            return layer, values.pop()
    return "ClusterLayer", ""
