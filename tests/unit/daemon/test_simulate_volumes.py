"""Pods with persistent volumes in `toposched simulate`: they go only where their volumes can be reached,
wait (with kube-scheduler's words) while a claim is not usable, and a WaitForFirstConsumer claim is
provisioned where its pod was placed (docs/scenarios.md, "Rules of the virtual world")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .test_simulator import node, pod, pod_group, simulate

ZONE = "topology.kubernetes.io/zone"


def zonal_node(name: str, zone: str) -> str:
    return node(name, block=f"b-{zone}", zone=zone)


def storage_class(name: str, *, mode: str = "WaitForFirstConsumer", provisioner: str = "ebs.csi.aws.com",
                  zones: tuple[str, ...] = ()) -> str:
    allowed = (f"\nallowedTopologies:\n- matchLabelExpressions:\n  - key: {ZONE}\n    values: [{', '.join(zones)}]"
               if zones else "")
    return f"""---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {name}
provisioner: {provisioner}
volumeBindingMode: {mode}{allowed}
"""


def claim(name: str, *, storage_class_name: str = "zonal", volume: str = "") -> str:
    bound = ("\n  annotations:\n    pv.kubernetes.io/bind-completed: \"yes\"" if volume else "")
    volume_name = f"\n  volumeName: {volume}" if volume else ""
    return f"""---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
  namespace: default{bound}
spec:
  storageClassName: {storage_class_name}{volume_name}
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 100Gi}}}}
"""


def zonal_volume(name: str, zone: str, claim_name: str) -> str:
    return f"""---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: {name}
  labels:
    {ZONE}: {zone}
spec:
  storageClassName: zonal
  capacity: {{storage: 100Gi}}
  accessModes: [ReadWriteOnce]
  claimRef: {{namespace: default, name: {claim_name}}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {{key: {ZONE}, operator: In, values: [{zone}]}}
"""


def with_claim(pod_text: str, claim_name: str) -> str:
    return pod_text + f"  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: {claim_name}}}\n"


def with_ephemeral(pod_text: str, storage_class_name: str = "zonal") -> str:
    return pod_text + ("  volumes:\n  - name: scratch\n    ephemeral:\n      volumeClaimTemplate:\n"
                       f"        spec: {{storageClassName: {storage_class_name}, accessModes: [ReadWriteOnce],"
                       " resources: {requests: {storage: 10Gi}}}\n")


def nodes_of(report: dict[str, Any]) -> dict[str, str]:
    return {binding["pod"]: binding["node"] for binding in report["bindings"]}


def reasons_of(report: dict[str, Any]) -> dict[str, str]:
    return {entry["pod"]: entry["reason"] for entry in report["pending"]}


CLUSTER = zonal_node("a0", "us-east-1a") + zonal_node("b0", "us-east-1b") + storage_class("zonal")


def test_a_pod_goes_where_its_bound_zonal_volume_is(tmp_path: Path) -> None:
    text = (CLUSTER + zonal_volume("pv-data", "us-east-1b", "data") + claim("data", volume="pv-data")
            + with_claim(pod("trainer"), "data"))
    report = simulate(tmp_path, text)
    assert nodes_of(report) == {"default/trainer": "b0"}


def test_a_bound_volume_whose_zone_has_no_room_keeps_the_pod_pending_with_kube_schedulers_words(
        tmp_path: Path) -> None:
    text = (CLUSTER + pod("squatter", node_name="b0") + zonal_volume("pv-data", "us-east-1b", "data")
            + claim("data", volume="pv-data") + with_claim(pod("trainer"), "data"))
    report = simulate(tmp_path, text)
    assert "default/trainer" not in nodes_of(report)
    reason = reasons_of(report)["default/trainer"]
    assert "node(s) had volume node affinity conflict" in reason


def test_wait_for_first_consumer_claims_are_provisioned_where_the_gang_went(tmp_path: Path) -> None:
    # Ephemeral claims of a zone-limited class: the gang may only go to us-east-1b.
    text = (zonal_node("a0", "us-east-1a") + zonal_node("a1", "us-east-1a") + zonal_node("b0", "us-east-1b")
            + zonal_node("b1", "us-east-1b") + storage_class("zonal", zones=("us-east-1b",))
            + pod_group("job", 2) + with_ephemeral(pod("w0", gang="job")) + with_ephemeral(pod("w1", gang="job")))
    report = simulate(tmp_path, text)
    assert sorted(nodes_of(report).values()) == ["b0", "b1"]
    assert report["pending"] == []


def test_a_missing_claim_holds_the_whole_gang_and_says_which_pod_and_claim(tmp_path: Path) -> None:
    text = (CLUSTER + pod_group("job", 2) + claim("present") + with_claim(pod("w0", gang="job"), "present")
            + with_claim(pod("w1", gang="job"), "absent"))
    report = simulate(tmp_path, text)
    assert report["bindings"] == []
    reasons = reasons_of(report)
    assert set(reasons) == {"default/w0", "default/w1"}
    assert 'pod default/w1: persistentvolumeclaim "absent" not found' in reasons["default/w0"]


def test_a_claim_arriving_later_lets_its_pod_go(tmp_path: Path) -> None:
    late = claim("data").replace("  namespace: default", '  namespace: default\n  annotations:\n'
                                                         '    sim.toposched.io/at: "30"')
    report = simulate(tmp_path, CLUSTER + with_claim(pod("trainer"), "data") + late)
    assert "default/trainer" in nodes_of(report)
    assert report["bindings"][0]["at"] == 30.0


def test_an_immediate_class_binds_the_claim_at_once_and_a_claim_without_provisioner_waits_with_a_reason(
        tmp_path: Path) -> None:
    text = (CLUSTER + storage_class("standard", mode="Immediate")
            + storage_class("local", provisioner="kubernetes.io/no-provisioner")
            + claim("shared", storage_class_name="standard") + claim("nvme", storage_class_name="local")
            + with_claim(pod("reader", gpus=1), "shared") + with_claim(pod("local-user", gpus=1), "nvme"))
    report = simulate(tmp_path, text)
    assert "default/reader" in nodes_of(report)
    reason = reasons_of(report)["default/local-user"]
    assert ("node(s) didn't find available persistent volumes to bind: no PersistentVolume of StorageClass "
            '"local" (WaitForFirstConsumer, no provisioner) may be bound to persistentvolumeclaim "nvme"') in reason


def local_volume(name: str, node_name: str) -> str:
    return f"""---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: {name}
spec:
  storageClassName: local
  capacity: {{storage: 200Gi}}
  accessModes: [ReadWriteOnce]
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchFields:
        - {{key: metadata.name, operator: In, values: [{node_name}]}}
status:
  phase: Available
"""


def test_a_claim_without_provisioner_is_bound_to_a_local_volume_made_in_advance_and_its_pod_goes_there(
        tmp_path: Path) -> None:
    """One local volume, on b0: the first pod (by name) gets it and goes there; the second finds none left."""
    text = (CLUSTER + storage_class("local", provisioner="kubernetes.io/no-provisioner") + local_volume("pv-b0", "b0")
            + claim("nvme-1", storage_class_name="local") + claim("nvme-2", storage_class_name="local")
            + with_claim(pod("local-1", gpus=1), "nvme-1") + with_claim(pod("local-2", gpus=1), "nvme-2"))
    report = simulate(tmp_path, text)
    assert nodes_of(report) == {"default/local-1": "b0"}
    assert "node(s) didn't find available persistent volumes to bind" in reasons_of(report)["default/local-2"]


def test_an_immediate_claim_never_bound_keeps_its_pod_pending(tmp_path: Path) -> None:
    text = CLUSTER + claim("static", storage_class_name='""') + with_claim(pod("trainer"), "static")
    reason = reasons_of(simulate(tmp_path, text))["default/trainer"]
    assert "pod has unbound immediate PersistentVolumeClaims" in reason
    assert 'persistentvolumeclaim "static" has no StorageClass' in reason


def test_a_claim_written_before_its_class_is_bound_once_the_class_comes(tmp_path: Path) -> None:
    text = (zonal_node("a0", "us-east-1a") + claim("shared", storage_class_name="standard")
            + with_claim(pod("reader", gpus=1), "shared") + storage_class("standard", mode="Immediate"))
    assert "default/reader" in nodes_of(simulate(tmp_path, text))
