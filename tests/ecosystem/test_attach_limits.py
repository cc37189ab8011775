"""CSI attach limits per node, the daemon against devcluster over HTTP (kubernetes-asyncio, kubectl).

Each node's kubelet writes a storage.k8s.io/v1 CSINode naming the CSI drivers registered there and how many
volumes of each may be attached at once (`spec.drivers[].allocatable.count`; the AWS EBS driver reports
what the instance type allows). kube-scheduler's NodeVolumeLimits sends no pod with a new volume of a
driver to a node at its limit: the attach would fail and the pod would stay in ContainerCreating. devcluster
registers no CSI driver itself, so the test writes the CSINodes as a kubelet would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ecosystem.harness import Ecosystem, ecosystem, gpu_nodes, namespace_yaml, pod_yaml, running, stream

pytestmark = ecosystem

NODES = ["node-0", "node-1"]
NAMESPACE = "attach"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"


@pytest.fixture(scope="module")
def eco(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ecosystem]:
    with running(tmp_path_factory.mktemp("attach"), gpu_nodes(NODES)) as started:
        yield started


def csi_node(name: str, count: int) -> str:
    return f"""apiVersion: storage.k8s.io/v1
kind: CSINode
metadata:
  name: {name}
spec:
  drivers:
  - name: ebs.csi.aws.com
    nodeID: i-{name}
    allocatable:
      count: {count}
    topologyKeys: [topology.ebs.csi.aws.com/zone]
"""


GP3 = """apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: gp3
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
parameters:
  type: gp3
"""


def claim_yaml(name: str) -> str:
    return f"""apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  resources:
    requests:
      storage: 10Gi
"""


def uses(claim: str) -> str:
    return f"""
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: {claim}"""


def bound_claim(eco: Ecosystem, name: str) -> None:
    eco.wait_for(lambda: ((eco.find("persistentvolumeclaims", name, NAMESPACE) or {}).get("status") or {})
                 .get("phase") == "Bound", what=f"claim {name} provisioned and bound")


def test_a_node_at_its_limit_takes_only_pods_whose_volumes_are_attached_there_until_its_limit_grows(
        eco: Ecosystem) -> None:
    eco.apply(stream(namespace_yaml(NAMESPACE), GP3, csi_node("node-0", 1), csi_node("node-1", 1),
                     claim_yaml("shared"), pod_yaml("holder", NAMESPACE, gpus="1", spec=uses("shared"))))
    home = eco.wait_bound(["holder"], NAMESPACE)["holder"]
    other = next(name for name in NODES if name != home)
    bound_claim(eco, "shared")
    # The holder's node has its one EBS volume: a pod with a new volume goes to the other node.
    eco.apply(stream(claim_yaml("first"), pod_yaml("first", NAMESPACE, gpus="1", spec=uses("first"))))
    assert eco.wait_bound(["first"], NAMESPACE)["first"] == other
    bound_claim(eco, "first")
    # Both nodes at their limit: a third volume waits, in kube-scheduler's words.
    eco.apply(stream(claim_yaml("second"), pod_yaml("second", NAMESPACE, gpus="1", spec=uses("second"))))
    message = eco.wait_pending(["second"], NAMESPACE, says=MAX_VOLUME_COUNT)["second"]
    assert f"0/2 nodes are available: 2 {MAX_VOLUME_COUNT}" in message
    # A pod using the holder's volume adds nothing on the holder's node.
    eco.apply(pod_yaml("reader", NAMESPACE, gpus="1", spec=uses("shared")))
    assert eco.wait_bound(["reader"], NAMESPACE)["reader"] == home
    # The driver reports room for one more on the other node (MutableCSINodeAllocatableCount): the pod goes.
    eco.apply(csi_node(other, 2))
    assert eco.wait_bound(["second"], NAMESPACE)["second"] == other
