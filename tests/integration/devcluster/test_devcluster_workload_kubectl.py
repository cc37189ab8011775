"""A manifest written as Kubernetes 1.37's Workload API docs write it (a scheduling.k8s.io/v1beta1 Workload, a
v1beta1 PodGroup made from its template, pods in the group) applied with the real kubectl against devcluster,
and read back at the older Workload versions."""

from __future__ import annotations

import json

from devcluster import BackgroundDevCluster

from .kubectl import Kubectl, needs_kubectl

pytestmark = needs_kubectl

MANIFEST = """
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata:
  name: training-job-workload
  namespace: some-ns
spec:
  controllerRef:
    apiGroup: batch
    kind: Job
    name: training-job
  podGroupTemplates:
  - name: workers
    schedulingPolicy:
      gang:
        minCount: 2
    disruptionMode:
      all: {}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: training-job-workers-0
  namespace: some-ns
spec:
  workloadRef:
    workloadName: training-job-workload
    templateName: workers
  schedulingPolicy:
    gang:
      minCount: 2
  disruptionMode:
    all: {}
""" + "".join(f"""---
apiVersion: v1
kind: Pod
metadata:
  name: worker-{index}
  namespace: some-ns
spec:
  schedulingGroup:
    podGroupName: training-job-workers-0
  containers:
  - name: main
    image: trainer:1
""" for index in range(2))


def test_a_1_37_docs_manifest_applies_and_reads_at_every_workload_version(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    applied = kubectl.run("apply", "-f", "-", stdin=MANIFEST).stdout
    assert "workload.scheduling.k8s.io/training-job-workload created" in applied, applied
    assert "podgroup.scheduling.k8s.io/training-job-workers-0 created" in applied, applied
    assert applied.count("pod/worker-") == 2, applied
    again = kubectl.run("apply", "-f", "-", stdin=MANIFEST).stdout
    assert "workload.scheduling.k8s.io/training-job-workload unchanged" in again, again
    listed = kubectl.run("get", "workloads.scheduling.k8s.io", "-n", "some-ns").stdout
    assert "training-job-workload" in listed
    beta = json.loads(kubectl.run("get", "workloads.v1beta1.scheduling.k8s.io", "training-job-workload",
                                  "-n", "some-ns", "-o", "json").stdout)
    assert beta["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert beta["spec"]["podGroupTemplates"][0]["disruptionMode"] == {"all": {}}
    alpha2 = json.loads(kubectl.run("get", "workloads.v1alpha2.scheduling.k8s.io", "training-job-workload",
                                    "-n", "some-ns", "-o", "json").stdout)
    assert alpha2["spec"]["podGroupTemplates"][0]["disruptionMode"] == "PodGroup"
    alpha1 = json.loads(kubectl.run("get", "workloads.v1alpha1.scheduling.k8s.io", "training-job-workload",
                                    "-n", "some-ns", "-o", "json").stdout)
    assert alpha1["spec"]["podGroups"] == [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]


def test_kubectl_apply_of_a_workload_with_two_policies_is_refused_naming_the_field(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    broken = MANIFEST.split("---")[0].replace("name: training-job-workload", "name: broken").replace(
        "      gang:\n        minCount: 2", "      basic: {}\n      gang:\n        minCount: 2")
    result = kubectl.run("apply", "-f", "-", stdin=broken, check=False)
    assert result.returncode != 0
    assert "spec.podGroupTemplates[0].schedulingPolicy" in result.stderr, result.stderr
