"""The PV controller and its provisioners as a cluster runs them: binding, provisioning (Immediate and
WaitForFirstConsumer, with the node affinity of the provisioned volume), static binding, reclaiming; and
the ephemeral volume controller with the garbage collection of its claims."""

from __future__ import annotations

import asyncio

import pytest

from devcluster import DevCluster

from .manifests import node, pod
from .storage_api import (
    PATHS,
    SELECTED_NODE,
    Obj,
    causes,
    claim,
    create,
    eventually,
    found,
    merge_patch,
    phase,
    request,
    storage_class,
    volume,
)

# --------------------------------------------------------------------------- the PV controller and provisioners


async def test_an_immediate_claim_is_provisioned_and_bound_at_once(cluster: DevCluster) -> None:
    await create(cluster, storage_class("fast", reclaimPolicy="Retain"))
    created = await create(cluster, claim("data", "10Gi", ("ReadWriteOnce", "ReadOnlyMany"),
                                          storageClassName="fast"))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    uid = created["metadata"]["uid"]
    bound = found(cluster, "persistentvolumeclaims", "data", "default")
    provisioned = found(cluster, "persistentvolumes", f"pvc-{uid}")
    assert bound["spec"]["volumeName"] == f"pvc-{uid}"
    assert bound["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                               "capacity": {"storage": "10Gi"}}
    assert bound["metadata"]["annotations"] == {
        "pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
        "volume.kubernetes.io/storage-provisioner": "csi.example.com",
        "volume.beta.kubernetes.io/storage-provisioner": "csi.example.com"}
    spec = provisioned["spec"]
    assert (spec["capacity"], spec["accessModes"], spec["storageClassName"], spec["persistentVolumeReclaimPolicy"]) \
        == ({"storage": "10Gi"}, ["ReadWriteOnce", "ReadOnlyMany"], "fast", "Retain")
    ref = spec["claimRef"]
    assert (ref["kind"], ref["name"], ref["namespace"], ref["uid"]) == ("PersistentVolumeClaim", "data", "default", uid)
    assert "nodeAffinity" not in spec
    assert provisioned["status"]["phase"] == "Bound"
    assert provisioned["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "csi.example.com"


async def test_an_immediate_claim_of_a_class_with_allowed_topologies_gets_that_node_affinity(
        cluster: DevCluster) -> None:
    zones = [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["z1", "z2"]}]}]
    await create(cluster, storage_class("zonal", allowedTopologies=zones))
    created = await create(cluster, claim("data", storageClassName="zonal"))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    provisioned = found(cluster, "persistentvolumes", f"pvc-{created['metadata']['uid']}")
    assert provisioned["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]}]}]}}


async def test_a_wait_for_first_consumer_claim_waits_for_its_selected_node(cluster: DevCluster) -> None:
    cluster.store.create(node("n1", **{"kubernetes.io/hostname": "host-1"}))
    await create(cluster, storage_class("local", "local.csi.example.com", volumeBindingMode="WaitForFirstConsumer"))
    created = await create(cluster, claim("data", storageClassName="local"))
    await asyncio.sleep(0.1)  # the controller had every chance to act: the claim waits all the same
    assert phase(cluster, "persistentvolumeclaims", "data", "default") == "Pending"
    assert cluster.store.list("persistentvolumes") == []
    status, _ = await merge_patch(cluster, "PersistentVolumeClaim", "data",
                                  {"metadata": {"annotations": {SELECTED_NODE: "n1"}}})
    assert status == 200
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    provisioned = found(cluster, "persistentvolumes", f"pvc-{created['metadata']['uid']}")
    assert provisioned["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["host-1"]}]}]}}


@pytest.mark.parametrize(("labels", "class_fields", "expected"), [
    ({"topology.kubernetes.io/zone": "z2", "kubernetes.io/hostname": "n1"}, {},
     [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z2"]}]),
    ({"topology.kubernetes.io/zone": "z2", "rack": "r7"},
     {"allowedTopologies": [{"matchLabelExpressions": [{"key": "rack", "values": ["r7", "r8"]}]}]},
     [{"key": "rack", "operator": "In", "values": ["r7"]}]),
    ({}, {}, [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]),
])
async def test_a_volume_provisioned_for_a_selected_node_is_pinned_to_its_topology(
        cluster: DevCluster, labels: dict[str, str], class_fields: Obj, expected: list[Obj]) -> None:
    cluster.store.create(node("n1", **labels))
    await create(cluster, storage_class("local", volumeBindingMode="WaitForFirstConsumer", **class_fields))
    manifest = claim("data", storageClassName="local")
    manifest["metadata"]["annotations"] = {SELECTED_NODE: "n1"}
    created = await create(cluster, manifest)
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    provisioned = found(cluster, "persistentvolumes", f"pvc-{created['metadata']['uid']}")
    assert provisioned["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [{"matchExpressions": expected}]


async def test_a_selected_node_that_does_not_exist_is_handed_back_to_the_scheduler(cluster: DevCluster) -> None:
    await create(cluster, storage_class("local", volumeBindingMode="WaitForFirstConsumer"))
    manifest = claim("data", storageClassName="local")
    manifest["metadata"]["annotations"] = {SELECTED_NODE: "gone"}
    await create(cluster, manifest)
    await eventually(lambda: SELECTED_NODE not in (
        found(cluster, "persistentvolumeclaims", "data", "default")["metadata"].get("annotations") or {}))
    assert phase(cluster, "persistentvolumeclaims", "data", "default") == "Pending"
    assert cluster.store.list("persistentvolumes") == []
    events = [(e["type"], e["reason"], e["message"], e["involvedObject"]["name"]) for e in cluster.store.list("events")]
    assert events == [("Warning", "ProvisioningFailed", 'node "gone" not found', "data")]


async def test_a_claim_without_a_provisioner_binds_the_smallest_matching_volume(cluster: DevCluster) -> None:
    await create(cluster, storage_class("manual", "kubernetes.io/no-provisioner"))
    await create(cluster, volume("huge", "100Gi", "manual"))
    await create(cluster, volume("small", "5Gi", "manual"))
    await create(cluster, volume("tiny", "1Gi", "manual"))  # too small
    await create(cluster, volume("other-class", "5Gi", "fast"))
    await create(cluster, volume("read-only", "5Gi", "manual", ("ReadOnlyMany",)))
    await create(cluster, volume("block", "5Gi", "manual", volumeMode="Block"))
    await create(cluster, claim("data", "2Gi", storageClassName="manual"))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    bound = found(cluster, "persistentvolumeclaims", "data", "default")
    assert bound["spec"]["volumeName"] == "small"
    assert bound["status"]["capacity"] == {"storage": "5Gi"}
    chosen = found(cluster, "persistentvolumes", "small")
    assert chosen["status"]["phase"] == "Bound" and chosen["spec"]["claimRef"]["uid"] == bound["metadata"]["uid"]
    assert chosen["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    await eventually(lambda: all(phase(cluster, "persistentvolumes", name) == "Available"
                                 for name in ("huge", "tiny", "other-class", "read-only", "block")))


async def test_a_claim_of_class_empty_binds_by_its_selector(cluster: DevCluster) -> None:
    await create(cluster, volume("fast", "1Gi", labels={"disk": "ssd"}))
    await create(cluster, volume("slow", "1Gi", labels={"disk": "hdd"}))
    await create(cluster, claim("data", storageClassName="", selector={"matchLabels": {"disk": "ssd"}}))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    assert found(cluster, "persistentvolumeclaims", "data", "default")["spec"]["volumeName"] == "fast"


async def test_a_volume_pre_bound_to_a_claim_binds_to_it_even_when_another_fits_better(cluster: DevCluster) -> None:
    await create(cluster, volume("smaller", "1Gi"))
    await create(cluster, volume("reserved", "8Gi", claimRef={"namespace": "default", "name": "data"}))
    await eventually(lambda: phase(cluster, "persistentvolumes", "reserved") == "Available")
    await create(cluster, claim("data", storageClassName=""))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    assert found(cluster, "persistentvolumeclaims", "data", "default")["spec"]["volumeName"] == "reserved"
    assert phase(cluster, "persistentvolumes", "smaller") == "Available"


async def test_a_wait_for_first_consumer_claim_binds_a_volume_the_scheduler_pre_bound(cluster: DevCluster) -> None:
    await create(cluster, storage_class("local", "kubernetes.io/no-provisioner",
                                        volumeBindingMode="WaitForFirstConsumer"))
    await create(cluster, volume("local-1", "1Gi", "local"))
    created = await create(cluster, claim("data", storageClassName="local"))
    await asyncio.sleep(0.1)
    assert phase(cluster, "persistentvolumeclaims", "data", "default") == "Pending", "no binding before a consumer"
    ref = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data", "uid": created["metadata"]["uid"]}
    status, _ = await merge_patch(cluster, "PersistentVolume", "local-1", {"spec": {"claimRef": ref}})
    assert status == 200
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    assert found(cluster, "persistentvolumeclaims", "data", "default")["spec"]["volumeName"] == "local-1"


async def test_a_bound_claim_may_grow_but_not_shrink_below_its_capacity(cluster: DevCluster) -> None:
    await create(cluster, storage_class("fast"))
    await create(cluster, claim("data", storageClassName="fast"))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "data", "default") == "Bound")
    status, body = await merge_patch(cluster, "PersistentVolumeClaim", "data",
                                     {"spec": {"resources": {"requests": {"storage": "2048Mi"}}}})
    assert status == 200 and body["spec"]["resources"]["requests"]["storage"] == "2Gi"
    status, body = await merge_patch(cluster, "PersistentVolumeClaim", "data",
                                     {"spec": {"resources": {"requests": {"storage": "512Mi"}}}})
    assert status == 422
    assert causes(body) == [("spec.resources.requests.storage", "Forbidden: field can not be less than "
                                                                 "status.capacity")]


async def test_deleting_a_claim_releases_a_retained_volume_and_deletes_a_deleted_one(cluster: DevCluster) -> None:
    await create(cluster, storage_class("keep", reclaimPolicy="Retain"))
    await create(cluster, storage_class("drop"))
    kept = await create(cluster, claim("kept", storageClassName="keep"))
    dropped = await create(cluster, claim("dropped", storageClassName="drop"))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "kept", "default") == "Bound"
                     and phase(cluster, "persistentvolumeclaims", "dropped", "default") == "Bound")
    for name in ("kept", "dropped"):
        status, _ = await request(cluster, "DELETE", f"{PATHS['PersistentVolumeClaim']}/{name}")
        assert status == 200
    await eventually(lambda: phase(cluster, "persistentvolumes", f"pvc-{kept['metadata']['uid']}") == "Released")
    await eventually(lambda: cluster.store.find("persistentvolumes", f"pvc-{dropped['metadata']['uid']}") is None)


async def test_volumes_false_turns_the_controllers_off() -> None:
    async with DevCluster(port=0, volumes=False) as quiet:
        assert quiet.volumes is None and quiet.ephemeral_volumes is None
        await create(quiet, storage_class("fast"))
        await create(quiet, claim("data", storageClassName="fast"))
        await asyncio.sleep(0.05)
        assert phase(quiet, "persistentvolumeclaims", "data", "default") == "Pending"
        assert quiet.store.list("persistentvolumes") == []


# --------------------------------------------------------------------------- ephemeral volumes


def ephemeral_pod(name: str, volume_name: str = "scratch") -> Obj:
    manifest = pod(name)
    manifest["spec"]["volumes"] = [{"name": volume_name, "ephemeral": {"volumeClaimTemplate": {
        "metadata": {"labels": {"kind": "scratch"}, "annotations": {"note": "temporary"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }}}]
    return manifest


async def test_a_pod_with_an_ephemeral_volume_gets_its_claim_owned_by_it(cluster: DevCluster) -> None:
    await create(cluster, storage_class("fast", default=True))
    created = await create(cluster, ephemeral_pod("job-0"))
    await eventually(lambda: phase(cluster, "persistentvolumeclaims", "job-0-scratch", "default") == "Bound")
    generated = found(cluster, "persistentvolumeclaims", "job-0-scratch", "default")
    assert generated["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Pod", "name": "job-0", "uid": created["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}]
    assert generated["metadata"]["labels"] == {"kind": "scratch"}
    assert generated["metadata"]["annotations"]["note"] == "temporary"
    assert generated["spec"]["storageClassName"] == "fast", "created through admission: the default class"
    status, _ = await request(cluster, "DELETE", f"{PATHS['Pod']}/job-0")
    assert status == 200
    await eventually(lambda: cluster.store.find("persistentvolumeclaims", "job-0-scratch", "default") is None)


async def test_an_existing_claim_not_owned_by_the_pod_is_left_alone(cluster: DevCluster) -> None:
    await create(cluster, claim("job-0-scratch", "3Gi", storageClassName=""))
    await create(cluster, ephemeral_pod("job-0"))
    await create(cluster, ephemeral_pod("job-1"))  # a pod after it: once its claim exists, job-0 was handled
    await eventually(lambda: cluster.store.find("persistentvolumeclaims", "job-1-scratch", "default") is not None)
    kept = found(cluster, "persistentvolumeclaims", "job-0-scratch", "default")
    assert "ownerReferences" not in kept["metadata"]
    assert kept["spec"]["resources"]["requests"]["storage"] == "3Gi"
