"""`toposched validate` on storage manifests: PersistentVolumes, claims and StorageClasses are put through
the API server's storage rules (manifests/storage.py, the ones devcluster admits writes by), so a local
volume made in advance without node affinity is caught before `kubectl apply` refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.cli.validate import main

LOCAL_VOLUME = """apiVersion: v1
kind: PersistentVolume
metadata: {name: local-pv-node-1}
spec:
  capacity: {storage: 370Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local-storage
  local: {path: /mnt/disks/ssd1}
"""
PINNED = """  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [node-1]}
"""
CLASS = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-storage}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"""


def test_a_local_volume_without_node_affinity_and_a_claim_without_a_request_are_refused_as_the_api_server_would(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "storage.yaml"
    path.write_text("---\n".join([CLASS, LOCAL_VOLUME, """apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec: {storageClassName: local-storage, accessModes: [ReadWriteOnce]}
"""]))
    assert main([str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        f"{path}#2: PersistentVolume local-pv-node-1: spec.nodeAffinity: Required value: Local volume requires "
        "node affinity (the API server refuses it)",
        f"{path}#3: PersistentVolumeClaim default/data: spec.resources[storage]: Required value "
        "(the API server refuses it)",
    ]


def test_storage_manifests_the_api_server_admits_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "storage.yaml"
    path.write_text("---\n".join([CLASS, LOCAL_VOLUME + PINNED]))
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.strip() == "OK: 2 objects valid (2 storage object)"


CSI_NODE = """apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node-1}
spec:
  drivers:
  - name: ebs.csi.aws.com
    nodeID: i-0123456789abcdef0
    allocatable: {count: 25}
"""


def test_a_csinode_is_put_through_the_api_servers_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "csinodes.yaml"
    duplicate = CSI_NODE.replace("node-1", "node-2") + """  - name: ebs.csi.aws.com
    nodeID: i-0123456789abcdef0
    allocatable: {count: -1}
"""
    path.write_text("---\n".join([CSI_NODE, duplicate]))
    assert main([str(path)]) == 1
    assert capsys.readouterr().out.splitlines()[:2] == [
        f"{path}#2: CSINode node-2: spec.drivers[1].allocatable.count: Invalid value: -1: must be greater than "
        "or equal to 0 (the API server refuses it)",
        f'{path}#2: CSINode node-2: spec.drivers[1].name: Duplicate value: "ebs.csi.aws.com" '
        "(the API server refuses it)",
    ]
