"""Pods with persistent volumes, written as the Kubernetes and CSI driver docs write them.

A StorageClass of the AWS EBS CSI driver (`ebs.csi.aws.com`, `volumeBindingMode: WaitForFirstConsumer`,
`allowedTopologies` on `topology.ebs.csi.aws.com/zone`), pods with a generic ephemeral volume
(`spec.volumes[].ephemeral.volumeClaimTemplate`) or a claim of their own, and a claim bound to a zonal
disk made in advance. kube-scheduler writes `volume.kubernetes.io/selected-node` on a WaitForFirstConsumer
claim before it binds the pod, and the provisioner creates the disk in that node's zone; without it the
claim is never provisioned and the pod never starts. devcluster is its own PV controller, provisioner and
ephemeral volume controller (devcluster/volumes.py), as a cluster with a CSI driver would be.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ecosystem.harness import (
    Ecosystem,
    ecosystem,
    gpu_nodes,
    namespace_yaml,
    pod_scheduled,
    pod_yaml,
    running,
    stream,
)

pytestmark = ecosystem

ZONE = "topology.kubernetes.io/zone"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"
NODES = [f"node-{index}" for index in range(6)]
ZONE_OF = {name: ("us-east-1a" if index < 3 else "us-east-1b") for index, name in enumerate(NODES)}
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    nodes = gpu_nodes(NODES, lambda index: {ZONE: ZONE_OF[f"node-{index}"], EBS_ZONE: ZONE_OF[f"node-{index}"]})
    with running(tmp_path_factory.mktemp("volumes"), nodes) as started:
        yield started


def ebs_class(name: str, *zones: str) -> str:
    allowed = "".join(f"\n      - {zone}" for zone in zones)
    topologies = f"""
allowedTopologies:
- matchLabelExpressions:
  - key: {EBS_ZONE}
    values:{allowed}""" if zones else ""
    return f"""apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {name}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
parameters:
  type: gp3{topologies}
"""


def scratch_volume(storage_class: str) -> str:
    return f"""
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        metadata:
          labels:
            type: scratch
        spec:
          accessModes: [ReadWriteOnce]
          storageClassName: {storage_class}
          resources:
            requests:
              storage: 100Gi"""


def claim_volume(claim: str) -> str:
    return f"""
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: {claim}"""


def claim_yaml(name: str, namespace: str, storage_class: str, volume: str = "") -> str:
    bound = f"\n  volumeName: {volume}" if volume else ""
    return f"""apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
  namespace: {namespace}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: {storage_class}{bound}
  resources:
    requests:
      storage: 100Gi
"""


def delete_claims(eco: Ecosystem, namespace: str) -> None:
    eco.delete_namespace_objects(namespace)
    eco.kubectl.run("delete", "pvc", "--all", "-n", namespace, "--wait=false")


def test_a_gangs_wait_for_first_consumer_volumes_are_provisioned_in_the_zone_where_it_was_placed(
        eco: Ecosystem) -> None:
    namespace = "vol-gang"
    group = f"""apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: trainer
  namespace: {namespace}
spec:
  minMember: 3
"""
    names = [f"trainer-{index}" for index in range(3)]
    eco.apply(stream(namespace_yaml(namespace), ebs_class("gp3-east-1b", "us-east-1b"), group,
                     *(pod_yaml(name, namespace, labels={"pod-group.scheduling.sigs.k8s.io": "trainer"},
                                spec=scratch_volume("gp3-east-1b")) for name in names)))
    placed = eco.wait_bound(names, namespace)
    assert {ZONE_OF[node] for node in placed.values()} == {"us-east-1b"}
    for name, node in placed.items():
        claim = eco.find("persistentvolumeclaims", f"{name}-scratch", namespace)
        assert claim is not None and claim["metadata"]["annotations"][SELECTED_NODE] == node
    eco.wait_for(lambda: all(((eco.find("persistentvolumeclaims", f"{name}-scratch", namespace) or {})
                              .get("status") or {}).get("phase") == "Bound" for name in names),
                 what="the scratch claims provisioned")
    delete_claims(eco, namespace)


def test_a_pod_whose_claim_is_missing_waits_saying_so_and_binds_once_the_claim_comes(eco: Ecosystem) -> None:
    namespace = "vol-missing"
    eco.apply(stream(namespace_yaml(namespace), ebs_class("gp3"), pod_yaml("db-0", namespace, gpus="1",
                                                                         spec=claim_volume("data-db-0"))))
    message = eco.wait_pending(["db-0"], namespace, says='persistentvolumeclaim "data-db-0" not found')["db-0"]
    assert message.startswith("pod vol-missing/db-0: ")
    eco.apply(claim_yaml("data-db-0", namespace, "gp3"))
    node = eco.wait_bound(["db-0"], namespace)["db-0"]
    claim = eco.find("persistentvolumeclaims", "data-db-0", namespace)
    assert claim is not None and claim["metadata"]["annotations"][SELECTED_NODE] == node
    assert pod_scheduled(eco.find("pods", "db-0", namespace))["status"] == "True"
    delete_claims(eco, namespace)


def test_a_pod_goes_to_the_zone_of_the_disk_its_claim_is_bound_to(eco: Ecosystem) -> None:
    namespace = "vol-zonal"
    disk = f"""apiVersion: v1
kind: PersistentVolume
metadata:
  name: dataset-disk
  labels:
    {ZONE}: us-east-1a
spec:
  capacity:
    storage: 100Gi
  accessModes: [ReadWriteOnce]
  storageClassName: static
  persistentVolumeReclaimPolicy: Retain
  csi:
    driver: ebs.csi.aws.com
    volumeHandle: vol-0123456789abcdef0
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - key: {EBS_ZONE}
          operator: In
          values: [us-east-1a]
"""
    eco.apply(stream(namespace_yaml(namespace), disk, claim_yaml("dataset", namespace, "static", "dataset-disk")))
    eco.wait_for(lambda: ((eco.find("persistentvolumeclaims", "dataset", namespace) or {}).get("status") or {})
                 .get("phase") == "Bound", what="the claim bound to its disk")
    # Zone b is emptier: without the volume's zone the pod would be as likely to land there.
    eco.apply(pod_yaml("reader", namespace, gpus="1", spec=claim_volume("dataset")))
    assert ZONE_OF[eco.wait_bound(["reader"], namespace)["reader"]] == "us-east-1a"
    delete_claims(eco, namespace)
    eco.kubectl.run("delete", "pv", "dataset-disk", "--wait=false")


def test_a_read_write_once_pod_claim_serves_one_pod_and_the_next_waits_until_it_is_gone(eco: Ecosystem) -> None:
    namespace = "vol-rwop"
    single = claim_yaml("checkpoints", namespace, "gp3-rwop").replace("[ReadWriteOnce]", "[ReadWriteOncePod]")
    eco.apply(stream(namespace_yaml(namespace), ebs_class("gp3-rwop"), single,
                     pod_yaml("writer", namespace, gpus="1", spec=claim_volume("checkpoints"))))
    first = eco.wait_bound(["writer"], namespace)["writer"]
    eco.apply(pod_yaml("second-writer", namespace, gpus="1", spec=claim_volume("checkpoints")))
    message = eco.wait_pending(["second-writer"], namespace, says="ReadWriteOncePod access mode")["second-writer"]
    assert 'persistentvolumeclaim "checkpoints" is used by pod vol-rwop/writer' in message
    # Terminating, it still holds the claim (kube-scheduler keeps it in its cache until it is gone).
    eco.kubectl.run("delete", "pod", "writer", "-n", namespace, "--grace-period=2", "--wait=false")
    assert eco.find("pods", "writer", namespace) is not None and not eco.node_of("second-writer", namespace)
    second = eco.wait_bound(["second-writer"], namespace)["second-writer"]
    assert second == first  # the disk was provisioned in the first node's zone; the only node of it left free
    delete_claims(eco, namespace)


def test_a_claim_deleted_while_a_pod_runs_on_it_holds_new_pods_as_being_deleted_until_it_is_gone(
        eco: Ecosystem) -> None:
    # pvc-protection: the claim stays, marked, while the running pod names it; a new pod of it waits, as
    # kube-scheduler's VolumeBinding has it wait, and is told why.
    namespace = "vol-protected"
    eco.apply(stream(namespace_yaml(namespace), ebs_class("gp3-kept"), claim_yaml("results", namespace, "gp3-kept"),
                     pod_yaml("trainer", namespace, gpus="1", spec=claim_volume("results"))))
    eco.wait_bound(["trainer"], namespace)
    eco.kubectl.run("delete", "pvc", "results", "-n", namespace, "--wait=false")
    held = eco.find("persistentvolumeclaims", "results", namespace)
    assert held is not None and held["metadata"].get("deletionTimestamp")
    assert held["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    eco.apply(pod_yaml("evaluator", namespace, gpus="1", spec=claim_volume("results")))
    eco.wait_pending(["evaluator"], namespace, says='persistentvolumeclaim "results" is being deleted')
    eco.kubectl.run("delete", "pod", "trainer", "-n", namespace, "--grace-period=0", "--force", "--wait=false")
    eco.wait_for(lambda: eco.find("persistentvolumeclaims", "results", namespace) is None,
                 what="the claim gone with its last user")
    eco.wait_pending(["evaluator"], namespace, says='persistentvolumeclaim "results" not found')
    delete_claims(eco, namespace)


def local_volume_yaml(name: str, node: str, path: str) -> str:
    """A local volume as the Kubernetes docs' "local" volume example (and the local static provisioner)
    writes it: pinned by node affinity to the node whose disk it is."""
    return f"""apiVersion: v1
kind: PersistentVolume
metadata:
  name: {name}
spec:
  capacity:
    storage: 370Gi
  volumeMode: Filesystem
  accessModes:
  - ReadWriteOnce
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local-storage
  local:
    path: {path}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - key: kubernetes.io/hostname
          operator: In
          values:
          - {node}
"""


LOCAL_STORAGE_CLASS = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-storage
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
"""


def test_claims_of_a_class_without_provisioner_are_bound_to_the_local_volumes_made_in_advance(
        eco: Ecosystem) -> None:
    """The docs' local-storage class and two local volumes (node-1, node-4): each pod goes to a node whose
    disk its claim is bound to, the volume names the claim as kube-scheduler's binder writes it, and a
    third pod, with no disk left, waits in kube-scheduler's words until a new one is made."""
    namespace = "vol-local"
    disks = {"local-pv-node-1": "node-1", "local-pv-node-4": "node-4"}
    eco.apply(stream(namespace_yaml(namespace), LOCAL_STORAGE_CLASS,
                     *(local_volume_yaml(name, node, "/mnt/disks/ssd1") for name, node in disks.items()),
                     *(claim_yaml(f"data-db-{index}", namespace, "local-storage") for index in range(2)),
                     *(pod_yaml(f"db-{index}", namespace, gpus="1", spec=claim_volume(f"data-db-{index}"))
                       for index in range(2))))
    placed = eco.wait_bound(["db-0", "db-1"], namespace)
    assert sorted(placed.values()) == ["node-1", "node-4"]
    eco.wait_for(lambda: all(((eco.find("persistentvolumeclaims", f"data-db-{index}", namespace) or {})
                              .get("status") or {}).get("phase") == "Bound" for index in range(2)),
                 what="the claims bound to the local volumes")
    for index in range(2):
        claim = eco.find("persistentvolumeclaims", f"data-db-{index}", namespace)
        assert claim is not None and SELECTED_NODE not in claim["metadata"].get("annotations", {})
        volume = eco.find("persistentvolumes", claim["spec"]["volumeName"], "")
        assert volume is not None and disks[volume["metadata"]["name"]] == placed[f"db-{index}"]
        assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
        assert volume["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    eco.apply(stream(claim_yaml("data-db-2", namespace, "local-storage"),
                     pod_yaml("db-2", namespace, gpus="1", spec=claim_volume("data-db-2"))))
    eco.wait_pending(["db-2"], namespace, says="didn't find available persistent volumes to bind")
    eco.apply(local_volume_yaml("local-pv-node-2", "node-2", "/mnt/disks/ssd1"))
    assert eco.wait_bound(["db-2"], namespace)["db-2"] == "node-2"
    delete_claims(eco, namespace)
    eco.kubectl.run("delete", "pv", *disks, "local-pv-node-2", "--wait=false")
