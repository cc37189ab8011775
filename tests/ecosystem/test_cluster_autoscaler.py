"""A pending gang looks to cluster-autoscaler and Karpenter like pods that need nodes.

Both select the pods they provision for by the pod's status alone, so these tests run their rules,
as their sources write them, over the pods exactly as `kubectl get pods -A -o json` returns them:

- cluster-autoscaler (`cluster-autoscaler/utils/kubernetes/listers.go` in kubernetes/autoscaler):
  its pod lister keeps pods whose phase is neither Succeeded nor Failed; `UnschedulablePods` keeps
  those not scheduled (`spec.nodeName` empty), not being deleted (no `deletionTimestamp`), whose
  `PodScheduled` condition has status `False` and reason `Unschedulable` (`isUnschedulable`).
- Karpenter (`pkg/utils/pod`, `IsProvisionable`): not scheduled, not preempting (no
  `status.nominatedNodeName`), not terminal, not terminating, and `FailedToSchedule`: a
  `PodScheduled` condition with reason `Unschedulable`.

The gang is a scheduler-plugins coscheduling PodGroup (`scheduling.x-k8s.io/v1alpha1`, its docs'
shape: `minMember`, `scheduleTimeoutSeconds`, pods labelled `scheduling.x-k8s.io/pod-group`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.ecosystem.harness import Ecosystem, ecosystem, gpu_nodes, pod_scheduled, running

pytestmark = ecosystem

NODES = [f"gpu-{index}" for index in range(4)]


def coscheduling_job(name: str, namespace: str, replicas: int, gpus: int = 8) -> str:
    documents = [f"""apiVersion: v1
kind: Namespace
metadata:
  name: {namespace}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: {name}
  namespace: {namespace}
spec:
  scheduleTimeoutSeconds: 60
  minMember: {replicas}
"""]
    for index in range(replicas):
        documents.append(f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}-{index}
  namespace: {namespace}
  labels:
    scheduling.x-k8s.io/pod-group: {name}
spec:
  schedulerName: toposched
  containers:
  - name: trainer
    image: registry.k8s.io/pause:3.9
    resources:
      limits:
        nvidia.com/gpu: {gpus}
""")
    return "---\n".join(documents)


def cluster_autoscaler_unschedulable(pods: list[dict[str, Any]]) -> list[str]:
    """cluster-autoscaler's AllPodLister, then UnschedulablePods (isUnschedulable)."""
    selected = []
    for pod in pods:
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        condition = pod_scheduled(pod)
        if condition.get("status") != "False" or condition.get("reason") != "Unschedulable":
            continue
        selected.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
    return sorted(selected)


def karpenter_provisionable(pods: list[dict[str, Any]]) -> list[str]:
    """Karpenter's IsProvisionable (the daemonset and node-owner checks do not apply to these pods)."""
    selected = []
    for pod in pods:
        status = pod.get("status", {})
        if pod["spec"].get("nodeName") or status.get("nominatedNodeName"):
            continue
        if status.get("phase") in ("Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
            continue
        if not any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                   for c in status.get("conditions", [])):
            continue
        selected.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
    return sorted(selected)


def listed_pods(eco: Ecosystem, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(eco.kubectl.run("get", "pods", "-n", namespace, "-o", "json").stdout)[
        "items"]
    return items


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    with running(tmp_path_factory.mktemp("autoscaler"), gpu_nodes(NODES)) as started:
        yield started


def test_every_pod_of_a_gang_too_big_for_the_cluster_is_one_cluster_autoscaler_and_karpenter_would_scale_for(
    eco: Ecosystem,
) -> None:
    namespace = "too-big"
    eco.apply(coscheduling_job("train", namespace, 6))
    expected = [f"{namespace}/train-{i}" for i in range(6)]
    eco.wait_for(lambda: cluster_autoscaler_unschedulable(listed_pods(eco, namespace)) == expected,
                 what="every member to carry PodScheduled=False/Unschedulable")
    eco.wait_for(lambda: all("never fit" in pod_scheduled(pod).get("message", "")
                             for pod in listed_pods(eco, namespace)), what="every member to say the final reason")
    pods = listed_pods(eco, namespace)
    assert karpenter_provisionable(pods) == expected
    group = eco.find("podgroups.scheduling.x-k8s.io", "train", namespace)
    assert group is not None and group["status"]["phase"] == "Pending"  # its status has no conditions field
    reasons = {pod_scheduled(pod).get("message", "") for pod in pods}
    assert len(reasons) == 1  # every member says the gang's one reason
    reason = reasons.pop()
    assert "gang too-big/train" in reason and "never fit" in reason
    # One Event per distinct reason as its pods arrived (fewer than client-go's 10 before it combines
    # them), the final one among them once the background writer has posted it.
    def failed() -> list[dict[str, Any]]:
        return [e for e in eco.events(namespace, "train", "PodGroup") if e["reason"] == "FailedScheduling"]

    eco.wait_for(lambda: reason in {e["message"] for e in failed()}, what="the final reason's Event")
    assert 1 <= len(failed()) <= 10 and all(e["type"] == "Warning" for e in failed())
    eco.delete_namespace_objects(namespace)


def test_a_gang_that_fits_leaves_nothing_for_an_autoscaler_and_its_pods_say_scheduled(eco: Ecosystem) -> None:
    namespace = "fits"
    eco.apply(coscheduling_job("train", namespace, 4))
    eco.wait_for(lambda: all(eco.node_of(f"train-{i}", namespace) for i in range(4)), what="the gang bound")
    pods = listed_pods(eco, namespace)
    assert cluster_autoscaler_unschedulable(pods) == [] and karpenter_provisionable(pods) == []
    assert all(pod_scheduled(pod).get("status") == "True" for pod in pods)
    eco.delete_namespace_objects(namespace)


def test_a_coscheduling_gang_short_of_min_member_binds_nothing_until_its_last_pod_arrives(eco: Ecosystem) -> None:
    # scheduler-plugins' all-or-nothing: 2 of minMember 3 wait (and say so, as the coscheduling plugin
    # leaves them Unschedulable: an autoscaler sees them, and its simulation finds they fit as they are).
    namespace = "short"
    manifests = coscheduling_job("train", namespace, 3, gpus=4).split("---\n")
    eco.apply("---\n".join(manifests[:-1]))
    eco.wait_pending(["train-0", "train-1"], namespace, says="2 of minMember 3 pods exist")
    assert cluster_autoscaler_unschedulable(listed_pods(eco, namespace)) == [f"{namespace}/train-0",
                                                                              f"{namespace}/train-1"]
    eco.apply(manifests[-1])
    eco.wait_bound(["train-0", "train-1", "train-2"], namespace)
    assert cluster_autoscaler_unschedulable(listed_pods(eco, namespace)) == []
    eco.delete_namespace_objects(namespace)


def test_a_workload_api_gang_short_of_min_count_is_not_ready_and_no_autoscaler_provisions_for_it(
    eco: Ecosystem,
) -> None:
    # kube-scheduler's GangScheduling holds the pods of a PodGroup short of minCount at PreEnqueue, untried,
    # and marks them NotReadyForScheduling (KEP-5501): neither cluster-autoscaler nor Karpenter adds nodes
    # for a gang that could not start on them. Its last member arriving, the gang is placed at once.
    namespace = "not-ready"
    group = f"""apiVersion: v1
kind: Namespace
metadata:
  name: {namespace}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: train
  namespace: {namespace}
spec:
  schedulingPolicy:
    gang:
      minCount: 3
"""

    def member(index: int) -> str:
        return f"""apiVersion: v1
kind: Pod
metadata:
  name: train-{index}
  namespace: {namespace}
spec:
  schedulerName: toposched
  schedulingGroup:
    podGroupName: train
  containers:
  - name: trainer
    image: registry.k8s.io/pause:3.9
    resources:
      limits:
        nvidia.com/gpu: 4
"""

    eco.apply("---\n".join([group, member(0), member(1)]))
    messages = eco.wait_pending(["train-0", "train-1"], namespace, says="2 of minMember 3 pods exist",
                                reason="NotReadyForScheduling")
    assert len(set(messages.values())) == 1
    pods = listed_pods(eco, namespace)
    assert cluster_autoscaler_unschedulable(pods) == [] and karpenter_provisionable(pods) == []
    # Untried, the PodGroup has no scheduling condition yet; its Event says it is not ready (Normal).
    pod_group = eco.find("podgroups.scheduling.k8s.io", "train", namespace)
    assert pod_group is not None and not pod_group.get("status", {}).get("conditions")
    eco.wait_for(lambda: {(e["reason"], e["type"]) for e in eco.events(namespace, "train", "PodGroup")}
                 == {("NotReadyForScheduling", "Normal")}, what="only NotReadyForScheduling Events on the PodGroup")
    eco.apply(member(2))
    eco.wait_bound(["train-0", "train-1", "train-2"], namespace)
    assert cluster_autoscaler_unschedulable(listed_pods(eco, namespace)) == []
    eco.delete_namespace_objects(namespace)
