"""The gang kinds users write: scheduler-plugins' scheduling.x-k8s.io PodGroup and Kubernetes' own Workload API
(scheduling.k8s.io/v1alpha1 Workload of 1.35, v1alpha2 PodGroup of 1.36, v1beta1 PodGroup of 1.37), served and
validated as a cluster with them installed or enabled serves them, with kubectl."""

from __future__ import annotations

import json

import pytest

from devcluster import BackgroundDevCluster

from .kubectl import Kubectl, needs_kubectl

pytestmark = needs_kubectl

X_K8S_GANG = """
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: nginx, namespace: gangs}
spec: {scheduleTimeoutSeconds: 10, minMember: 3}
---
apiVersion: v1
kind: Pod
metadata: {name: nginx-0, namespace: gangs, labels: {scheduling.x-k8s.io/pod-group: nginx}}
spec:
  containers: [{name: nginx, image: nginx, resources: {limits: {cpu: "1"}}}]
"""
WORKLOAD_1_35 = """
apiVersion: scheduling.k8s.io/v1alpha1
kind: Workload
metadata: {name: jobset, namespace: gangs}
spec:
  podGroups:
  - name: job-1
    policy:
      gang: {minCount: 4}
---
apiVersion: v1
kind: Pod
metadata: {name: jobset-job-1-0, namespace: gangs}
spec:
  workloadRef: {name: jobset, podGroup: job-1, podGroupReplicaKey: key-2}
  containers: [{name: main, image: trainer:1}]
"""
POD_GROUP_1_36 = """
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: train-0, namespace: gangs}
spec:
  schedulingPolicy:
    gang: {minCount: 8}
  schedulingConstraints:
    topology: [{key: topology.kubernetes.io/rack}]
---
apiVersion: v1
kind: Pod
metadata: {name: train-0-0, namespace: gangs}
spec:
  schedulingGroup: {podGroupName: train-0}
  containers: [{name: main, image: trainer:1}]
"""
POD_GROUP_1_37 = """
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train-1, namespace: gangs}
spec:
  schedulingPolicy:
    gang: {minCount: 8}
  disruptionMode:
    all: {}
  workloadRef: {workloadName: trainer, templateName: workers}
---
apiVersion: v1
kind: Pod
metadata: {name: train-1-0, namespace: gangs}
spec:
  schedulingGroup: {podGroupName: train-1}
  containers: [{name: main, image: trainer:1}]
"""


@pytest.mark.parametrize(("manifest", "kind"), [
    (X_K8S_GANG, "podgroup.scheduling.x-k8s.io/nginx"),
    (WORKLOAD_1_35, "workload.scheduling.k8s.io/jobset"),
    (POD_GROUP_1_36, "podgroup.scheduling.k8s.io/train-0"),
    (POD_GROUP_1_37, "podgroup.scheduling.k8s.io/train-1"),
])
def test_each_gang_dialect_applies_and_reads_back_with_its_pods(background: tuple[BackgroundDevCluster, Kubectl],
                                                                manifest: str, kind: str) -> None:
    _, kubectl = background
    out = kubectl.run("apply", "-f", "-", stdin=manifest).stdout
    assert f"{kind} created" in out and "pod/" in out
    assert "unchanged" in kubectl.run("apply", "-f", "-", stdin=manifest).stdout
    read = json.loads(kubectl.run("get", kind, "-n", "gangs", "-o", "json").stdout)
    assert read["spec"] and read["metadata"]["namespace"] == "gangs"


def test_the_workload_api_discovery_keeps_v1_as_the_preferred_version(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    resources = kubectl.run("api-resources", "--api-group=scheduling.k8s.io", "-o", "name").stdout.split()
    assert {"priorityclasses.scheduling.k8s.io", "workloads.scheduling.k8s.io", "podgroups.scheduling.k8s.io"} <= \
        set(resources)
    versions = kubectl.run("api-versions").stdout.split()
    assert {"scheduling.k8s.io/v1", "scheduling.k8s.io/v1alpha1", "scheduling.k8s.io/v1alpha2",
            "scheduling.k8s.io/v1alpha3", "scheduling.k8s.io/v1beta1", "scheduling.x-k8s.io/v1alpha1"} <= set(versions)
    assert kubectl.run("get", "priorityclasses", "-o", "name").stdout.count("system-") == 2


@pytest.mark.parametrize(("manifest", "field", "message"), [
    (WORKLOAD_1_35.replace("gang: {minCount: 4}", "gang: {minCount: 4}\n      basic: {}"), "spec.podGroups[0].policy",
     "exactly one of `basic`, `gang` is required, but multiple fields are set"),
    (WORKLOAD_1_35.replace("name: job-1", "name: Job_1"), "spec.podGroups[0].name", "RFC 1123 label"),
    (POD_GROUP_1_36.replace("minCount: 8", "minCount: 0"), "spec.schedulingPolicy.gang.minCount", "Required value"),
    (POD_GROUP_1_36.replace("topology.kubernetes.io/rack", "not a/label/key"),
     "spec.schedulingConstraints.topology[0].key", "qualified name"),
    (POD_GROUP_1_36.replace("podGroupName: train-0", "podGroupName: Train_0"), "spec.schedulingGroup.podGroupName",
     "RFC 1123 subdomain"),
])
def test_invalid_gang_objects_are_refused_naming_the_field(background: tuple[BackgroundDevCluster, Kubectl],
                                                           manifest: str, field: str, message: str) -> None:
    _, kubectl = background
    result = kubectl.run("apply", "-f", "-", stdin=manifest.replace("gangs", "refused"), check=False)
    assert result.returncode != 0
    assert field in result.stderr and message in result.stderr


def test_gang_membership_and_policies_are_immutable(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    manifest = POD_GROUP_1_36.replace("gangs", "immutable")
    kubectl.run("apply", "-f", "-", stdin=manifest)
    changed = kubectl.run("apply", "-f", "-", stdin=manifest.replace("minCount: 8", "minCount: 6"), check=False)
    assert changed.returncode != 0 and "spec.schedulingPolicy: Invalid value" in changed.stderr
    assert "field is immutable" in changed.stderr
    moved = kubectl.run("patch", "pod", "train-0-0", "-n", "immutable", "--type=merge",
                        "-p", '{"spec":{"schedulingGroup":{"podGroupName":"other"}}}', check=False)
    assert moved.returncode != 0 and "spec" in moved.stderr


def test_kubectl_reads_a_1_36_pod_group_at_1_37_and_scales_it_there(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    kubectl.run("apply", "-f", "-", stdin=POD_GROUP_1_36.replace("gangs", "versions"))
    read = json.loads(kubectl.run("get", "podgroups.scheduling.k8s.io", "train-0", "-n", "versions", "-o",
                                  "json").stdout)
    assert read["apiVersion"] == "scheduling.k8s.io/v1beta1"  # the first version discovery lists
    alpha2 = json.loads(kubectl.run("get", "podgroups.v1alpha2.scheduling.k8s.io", "train-0", "-n", "versions",
                                    "-o", "json").stdout)
    assert alpha2["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert alpha2["metadata"]["resourceVersion"] == read["metadata"]["resourceVersion"]
    kubectl.run("patch", "podgroups.v1beta1.scheduling.k8s.io", "train-0", "-n", "versions", "--type=merge",
                "-p", '{"spec":{"schedulingPolicy":{"gang":{"minCount":16}}}}')
    scaled = json.loads(kubectl.run("get", "podgroups.v1alpha2.scheduling.k8s.io", "train-0", "-n", "versions",
                                    "-o", "json").stdout)
    assert scaled["spec"]["schedulingPolicy"] == {"gang": {"minCount": 16}}
