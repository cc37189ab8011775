"""devcluster driven by the real kubectl with its defaults: get, apply (server-side validation), watch, delete."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

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



def test_patch_subresource_resize_resizes_a_running_pod_in_place_as_the_kubelet_allows(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    cluster, kubectl = background
    cluster.call(lambda c: c.load_objects([node("resize-n1")]))  # 8 cpu
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: resized, namespace: resizing}
spec:
  nodeName: resize-n1
  containers:
  - {name: main, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}, limits: {memory: 2Gi}}}
"""
    kubectl.run("create", "-f", "-", stdin=manifest)  # the namespace made as devcluster makes it

    def main_status() -> dict[str, Any]:
        status = cluster.call(lambda c: c.store.get("pods", "resized", "resizing")).get("status") or {}
        found: dict[str, Any] = (status.get("containerStatuses") or [{}])[0]
        return found

    def wait_for(check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 15
        while not check():
            assert time.monotonic() < deadline, "condition not met before the deadline"
            time.sleep(0.01)

    wait_for(lambda: main_status().get("allocatedResources") == {"cpu": "1", "memory": "1Gi"})
    patched = kubectl.run("patch", "pod", "resized", "-n", "resizing", "--subresource", "resize", "--patch",
                          '{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"2"}}}]}}')
    assert "pod/resized patched" in patched.stdout
    wait_for(lambda: (main_status().get("resources") or {}).get("requests") == {"cpu": "2", "memory": "1Gi"})
    applied = kubectl.run("get", "pod", "resized", "-n", "resizing", "-o",
                          "jsonpath={.status.containerStatuses[0].allocatedResources.cpu}"
                          " {.spec.containers[0].resources.requests.cpu} {.metadata.generation}")
    assert applied.stdout == "2 2 2"
    kubectl.run("patch", "pod", "resized", "-n", "resizing", "--subresource", "resize", "--patch",
                '{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"100"}}}]}}')
    pending = 'jsonpath={.status.conditions[?(@.type=="PodResizePending")].reason}: ' \
              '{.status.conditions[?(@.type=="PodResizePending")].message}'
    wait_for(lambda: "Infeasible" in kubectl.run("get", "pod", "resized", "-n", "resizing", "-o", pending).stdout)
    assert kubectl.run("get", "pod", "resized", "-n", "resizing", "-o", pending).stdout == (
        "Infeasible: Node didn't have enough capacity: cpu, requested: 100000, capacity: 8000")
    # The QoS class may not change through the subresource; the resources not at all through a plain patch.
    refused = kubectl.run("patch", "pod", "resized", "-n", "resizing", "--subresource", "resize", "--patch",
                          '{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"1","memory":'
                          '"2Gi"},"limits":{"cpu":"1"}}}]}}', check=False)
    assert refused.returncode != 0
    assert 'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing' \
        in refused.stderr
    plain = kubectl.run("patch", "pod", "resized", "-n", "resizing", "--patch",
                        '{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"1"}}}]}}', check=False)
    assert plain.returncode != 0 and "pod updates may not change fields" in plain.stderr
