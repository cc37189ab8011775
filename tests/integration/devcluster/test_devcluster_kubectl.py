"""devcluster driven by the real kubectl with its defaults: get, apply (server-side validation), watch, delete."""

from __future__ import annotations

import json
import queue
import threading
import time

from devcluster import BackgroundDevCluster

from .kubectl import Kubectl, needs_kubectl
from .manifests import node, pod

pytestmark = needs_kubectl


def test_get_wide_lists_nodes_and_pods_across_namespaces(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    cluster.call(lambda c: c.load_objects([node("wide-n1"), pod("wide-p1", "team-a", nodeName="wide-n1")]))
    out = kubectl.run("get", "nodes,pods", "-A", "-o", "wide").stdout
    assert "node/wide-n1" in out and "Ready" in out
    pod_line = next(line for line in out.splitlines() if "pod/wide-p1" in line)
    assert pod_line.split()[0] == "team-a"
    assert "Running" in pod_line and "wide-n1" in pod_line and "1/1" in pod_line
    assert "NOMINATED NODE" in out


def test_apply_creates_then_configures_and_get_reads_json_and_jsonpath(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: applied, namespace: default, labels: {tier: one}}
spec:
  schedulerName: toposched
  containers:
  - name: main
    image: busybox
    resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: 8}}
    securityContext: {runAsUser: 1000}
"""
    assert "pod/applied created" in kubectl.run("apply", "-f", "-", stdin=manifest).stdout
    changed = manifest.replace("tier: one", "tier: two")
    assert "pod/applied configured" in kubectl.run("apply", "-f", "-", stdin=changed).stdout
    as_json = json.loads(kubectl.run("get", "pod", "applied", "-o", "json").stdout)
    assert as_json["metadata"]["labels"] == {"tier": "two"}
    resources = as_json["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "1", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}
    jsonpath = kubectl.run("get", "pods", "-o", "jsonpath={.items[?(@.metadata.name=='applied')].spec.schedulerName}")
    assert jsonpath.stdout == "toposched"
    stored = cluster.call(lambda c: c.store.get("pods", "applied", "default"))
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]


def test_apply_rejects_an_unknown_field_naming_it(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: typo, namespace: default}
spec:
  containers: [{name: main, image: busybox, resourcez: {}}]
"""
    result = kubectl.run("apply", "-f", "-", stdin=manifest, check=False)
    assert result.returncode != 0
    assert 'unknown field "spec.containers[0].resourcez"' in result.stderr
    assert cluster.call(lambda c: c.store.find("pods", "typo", "default")) is None
    crd = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: typo}
spec: {tier: 1, tierNmae: spine}
"""
    result = kubectl.run("apply", "-f", "-", stdin=crd, check=False)
    assert result.returncode != 0 and "spec.tierNmae" in result.stderr


def test_apply_custom_resources_podgroup_cluster_network_topology_and_hypernode(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    manifests = """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: train, namespace: default}
spec: {minMember: 8, scheduleTimeoutSeconds: 60, minResources: {cpu: "64"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: vtrain, namespace: default}
spec:
  minMember: 4
  queue: default
  networkTopology: {mode: hard, highestTierAllowed: 2}
  subGroupPolicy:
  - name: workers
    subGroupSize: 2
    networkTopology: {mode: hard, highestTierAllowed: 1}
    labelSelector: {matchLabels: {role: worker}}
    matchLabelKeys: [replica]
---
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: ClusterNetworkTopology
metadata: {name: default}
spec:
  networkTopologySpec:
  - {topologyLayer: SpineLayer, labelKey: [network.topology/spine]}
  - {topologyLayer: BlockLayer, labelKey: [network.topology/block], parentTopologyLayer: SpineLayer}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spine-0}
spec:
  tier: 2
  tierName: spine
  members:
  - type: HyperNode
    selector: {regexMatch: {pattern: "block-.*"}}
  - type: Node
    selector: {labelMatch: {matchLabels: {rack: r1}}}
"""
    out = kubectl.run("apply", "-f", "-", stdin=manifests).stdout
    assert "podgroup.scheduling.sigs.k8s.io/train created" in out
    assert "podgroup.scheduling.volcano.sh/vtrain created" in out
    assert "clusternetworktopology.scheduling.koordinator.sh/default created" in out
    assert "hypernode.topology.volcano.sh/spine-0 created" in out
    assert "unchanged" in kubectl.run("apply", "-f", "-", stdin=manifests).stdout
    names = kubectl.run("get", "hypernodes", "-o", "jsonpath={.items[*].spec.tierName}").stdout
    assert names == "spine"
    stored = cluster.call(lambda c: c.store.get("podgroups.scheduling.volcano.sh", "vtrain", "default"))
    assert stored["spec"]["subGroupPolicy"][0]["matchLabelKeys"] == ["replica"]


def test_get_watch_prints_pods_created_after_it_started(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    cluster.call(lambda c: c.store.create(pod("watched-0", "watching")))
    process = kubectl.popen("get", "pods", "-n", "watching", "--watch", "--request-timeout=20s")
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    stdout = process.stdout

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 15
        created = False
        while time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=0.2))
            except queue.Empty:
                continue
            if not created and any("watched-0" in line for line in seen):
                cluster.call(lambda c: c.store.create(pod("watched-1", "watching")))
                created = True
            if any("watched-1" in line for line in seen):
                break
        assert any(line.startswith("watched-1") and "Pending" in line for line in seen), seen
    finally:
        process.terminate()
        process.wait(10)


def test_delete_removes_objects(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    cluster.call(lambda c: c.load_objects([pod("doomed", "deleting"), pod("bound", "deleting", nodeName="n1",
                                                                          terminationGracePeriodSeconds=1)]))
    assert 'pod "doomed" deleted' in kubectl.run("delete", "pod", "doomed", "-n", "deleting").stdout
    assert 'pod "bound" deleted' in kubectl.run("delete", "pod", "bound", "-n", "deleting").stdout
    assert cluster.call(lambda c: c.store.list("pods", "deleting")) == []
    missing = kubectl.run("delete", "pod", "doomed", "-n", "deleting", check=False)
    assert missing.returncode != 0 and 'pods "doomed" not found' in missing.stderr

