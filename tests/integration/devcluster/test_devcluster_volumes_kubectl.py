"""Persistent volumes through the real kubectl: apply, get (short names and printer columns), annotate,
wait, and the API server's refusals as kubectl shows them."""

from __future__ import annotations

from devcluster import BackgroundDevCluster

from .kubectl import Kubectl, needs_kubectl

pytestmark = needs_kubectl

CLASSES = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: kubectl-fast
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: fast.csi.example.com
reclaimPolicy: Retain
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: kubectl-local
provisioner: local.csi.example.com
volumeBindingMode: WaitForFirstConsumer
"""

CLAIMS = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 2Gi
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: scratch
spec:
  storageClassName: kubectl-local
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
"""

NODE = """
apiVersion: v1
kind: Node
metadata:
  name: kubectl-node
  labels:
    topology.kubernetes.io/zone: zone-b
"""


def _rows(output: str) -> list[list[str]]:
    """`kubectl get` output split into cells (columns are separated by at least two spaces)."""
    return [[cell for cell in line.split("  ") if cell.strip()] for line in output.strip().splitlines()]


def test_claims_volumes_and_classes_print_as_kubectl_shows_them(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    kubectl.run("apply", "-f", "-", stdin=CLASSES)
    kubectl.run("apply", "-n", "vol-print", "-f", "-", stdin=CLAIMS)
    kubectl.run("wait", "-n", "vol-print", "--for=jsonpath={.status.phase}=Bound", "pvc/data", "--timeout=10s")
    claims = _rows(kubectl.run("get", "pvc", "-n", "vol-print").stdout)
    assert [c.strip() for c in claims[0]] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS",
                                              "VOLUMEATTRIBUTESCLASS", "AGE"]
    volume = kubectl.run("get", "pvc", "data", "-n", "vol-print", "-o", "jsonpath={.spec.volumeName}").stdout
    by_name = {row[0].strip(): [c.strip() for c in row] for row in claims[1:]}
    assert by_name["data"][1:7] == ["Bound", volume, "2Gi", "RWO", "kubectl-fast", "<unset>"]
    assert by_name["scratch"][1:3] == ["Pending", "kubectl-local"], "no volume: the empty cells print as nothing"
    volumes = _rows(kubectl.run("get", "pv", volume).stdout)
    assert [c.strip() for c in volumes[0]] == ["NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM",
                                               "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"]
    assert [c.strip() for c in volumes[1]][:8] == [volume, "2Gi", "RWO", "Retain", "Bound", "vol-print/data",
                                                   "kubectl-fast", "<unset>"]
    classes = {row[0].strip(): [c.strip() for c in row] for row in _rows(kubectl.run("get", "sc").stdout)}
    assert classes["NAME"][:5] == ["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE",
                                   "ALLOWVOLUMEEXPANSION"]
    assert classes["kubectl-fast (default)"][1:5] == ["fast.csi.example.com", "Retain", "Immediate", "false"]
    assert classes["kubectl-local"][1:5] == ["local.csi.example.com", "Delete", "WaitForFirstConsumer", "false"]


def test_annotating_the_selected_node_provisions_a_volume_pinned_to_its_zone(
        background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    kubectl.run("apply", "-f", "-", stdin=CLASSES + "---" + NODE)
    kubectl.run("apply", "-n", "vol-wait", "-f", "-", stdin=CLAIMS)
    assert kubectl.run("get", "pvc", "scratch", "-n", "vol-wait", "-o", "jsonpath={.status.phase}").stdout == "Pending"
    kubectl.run("annotate", "pvc", "scratch", "-n", "vol-wait", "volume.kubernetes.io/selected-node=kubectl-node")
    kubectl.run("wait", "-n", "vol-wait", "--for=jsonpath={.status.phase}=Bound", "pvc/scratch", "--timeout=10s")
    volume = kubectl.run("get", "pvc", "scratch", "-n", "vol-wait", "-o", "jsonpath={.spec.volumeName}").stdout
    zone = kubectl.run("get", "pv", volume, "-o", "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0]"
                                                  ".matchExpressions[0]}").stdout
    assert '"key":"topology.kubernetes.io/zone"' in zone and '"values":["zone-b"]' in zone


def test_kubectl_shows_the_storage_validation_refusals(background: tuple[BackgroundDevCluster, Kubectl]) -> None:
    _, kubectl = background
    kubectl.run("apply", "-f", "-", stdin=CLASSES)
    moved = kubectl.run("apply", "-f", "-", stdin=CLASSES.replace("fast.csi.example.com", "slow.csi.example.com"),
                        check=False)
    assert moved.returncode != 0
    assert "provisioner: Forbidden: updates to provisioner are forbidden." in moved.stderr
    kubectl.run("apply", "-n", "vol-refuse", "-f", "-", stdin=CLAIMS)
    widened = kubectl.run("patch", "pvc", "scratch", "-n", "vol-refuse", "--type=merge",
                          "-p", '{"spec":{"accessModes":["ReadWriteMany"]}}', check=False)
    assert widened.returncode != 0
    assert "spec: Forbidden: spec is immutable after creation except resources.requests" in widened.stderr
    bad = kubectl.run("apply", "-f", "-", check=False, stdin=CLASSES.replace("WaitForFirstConsumer", "Sometime"))
    assert bad.returncode != 0 and 'volumeBindingMode: Unsupported value: "Sometime"' in bad.stderr
