"""The storage kinds over HTTP as kube-apiserver serves them: defaulting, the DefaultStorageClass admission
plugin and the validation of PersistentVolumeClaim, PersistentVolume and StorageClass writes."""

from __future__ import annotations

from devcluster import DevCluster

from .storage_api import PATHS, causes, claim, create, merge_patch, request, storage_class, volume

# --------------------------------------------------------------------------- admission and validation


async def test_a_claim_without_a_class_gets_the_newest_default_class_and_an_empty_class_stays_empty(
        cluster: DevCluster) -> None:
    await create(cluster, storage_class("standard", default=True))
    await create(cluster, storage_class("other", default=True))  # same second: ties go by name, ascending
    await create(cluster, storage_class("plain"))
    defaulted = await create(cluster, claim("data"))
    explicit = await create(cluster, claim("none", storageClassName=""))
    assert defaulted["spec"]["storageClassName"] == "other"
    assert explicit["spec"]["storageClassName"] == ""
    assert defaulted["status"] == {"phase": "Pending"} and defaulted["spec"]["volumeMode"] == "Filesystem"


async def test_a_claim_stays_without_a_class_when_no_class_is_the_default(cluster: DevCluster) -> None:
    await create(cluster, storage_class("plain"))
    created = await create(cluster, claim("data"))
    assert "storageClassName" not in created["spec"]


async def test_a_newer_default_class_wins(cluster: DevCluster) -> None:
    await create(cluster, storage_class("older", default=True))
    cluster.store.clock = lambda: 4_000_000_000.0  # a later creationTimestamp for the next class
    await create(cluster, storage_class("newer", default=True))
    assert (await create(cluster, claim("data")))["spec"]["storageClassName"] == "newer"


async def test_storage_classes_are_defaulted_and_refuse_unsupported_binding_modes(cluster: DevCluster) -> None:
    created = await create(cluster, storage_class("fast"))
    assert (created["reclaimPolicy"], created["volumeBindingMode"]) == ("Delete", "Immediate")
    status, body = await request(cluster, "POST", PATHS["StorageClass"],
                                 storage_class("bad", volumeBindingMode="Later"))
    assert status == 422
    assert causes(body) == [("volumeBindingMode", 'Unsupported value: "Later": supported values: "Immediate", '
                                                  '"WaitForFirstConsumer"')]


async def test_a_storage_class_keeps_its_provisioner_parameters_policy_and_binding_mode(cluster: DevCluster) -> None:
    await create(cluster, storage_class("fast", parameters={"type": "ssd"}))
    status, body = await merge_patch(cluster, "StorageClass", "fast", {
        "provisioner": "other.example.com", "parameters": {"type": "hdd"}, "reclaimPolicy": "Retain",
        "volumeBindingMode": "WaitForFirstConsumer"})
    assert status == 422
    assert causes(body) == [
        ("parameters", "Forbidden: updates to parameters are forbidden."),
        ("provisioner", "Forbidden: updates to provisioner are forbidden."),
        ("reclaimPolicy", "Forbidden: updates to reclaimPolicy are forbidden."),
        ("volumeBindingMode", 'Invalid value: "WaitForFirstConsumer": field is immutable'),
    ]
    status, _ = await merge_patch(cluster, "StorageClass", "fast", {"allowVolumeExpansion": True})
    assert status == 200


async def test_a_claim_needs_access_modes_and_a_storage_request(cluster: DevCluster) -> None:
    status, body = await request(cluster, "POST", PATHS["PersistentVolumeClaim"], {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "empty"}, "spec": {}})
    assert status == 422
    assert causes(body) == [("spec.accessModes", "Required value: at least 1 access mode is required"),
                            ("spec.resources[storage]", "Required value")]


async def test_a_claim_spec_is_immutable_but_its_volume_name_may_be_set_once(cluster: DevCluster) -> None:
    # Class "" and no volume at all: nothing binds the claim meanwhile, it stays Pending.
    await create(cluster, claim("data", storageClassName=""))
    status, body = await merge_patch(cluster, "PersistentVolumeClaim", "data",
                                     {"spec": {"accessModes": ["ReadWriteMany"]}})
    assert status == 422
    assert causes(body) == [("spec", "Forbidden: spec is immutable after creation except resources.requests "
                                     "and volumeAttributesClassName for bound claims")]
    status, body = await merge_patch(cluster, "PersistentVolumeClaim", "data",
                                     {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    assert status == 422, "only a Bound claim may ask for more storage"
    status, body = await merge_patch(cluster, "PersistentVolumeClaim", "data", {"spec": {"volumeName": "pv-1"}})
    assert status == 200 and body["spec"]["volumeName"] == "pv-1"
    status, body = await merge_patch(cluster, "PersistentVolumeClaim", "data", {"spec": {"volumeName": "pv-2"}})
    assert status == 422


async def test_a_volume_node_affinity_may_be_set_once_and_never_changed(cluster: DevCluster) -> None:
    await create(cluster, volume("pv-1", "1Gi"))
    pinned = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}
    status, body = await merge_patch(cluster, "PersistentVolume", "pv-1", {"spec": {"nodeAffinity": pinned}})
    assert status == 200 and body["spec"]["nodeAffinity"] == pinned
    moved = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n2"]}]}]}}
    status, body = await merge_patch(cluster, "PersistentVolume", "pv-1", {"spec": {"nodeAffinity": moved}})
    assert status == 422
    assert [field for field, _ in causes(body)] == ["nodeAffinity"]
    assert causes(body)[0][1].endswith("field is immutable")


async def test_volumes_are_defaulted_and_refuse_an_unsupported_reclaim_policy(cluster: DevCluster) -> None:
    created = await create(cluster, volume("pv-1", "1024Mi"))
    assert created["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert created["spec"]["capacity"] == {"storage": "1Gi"}
    status, body = await request(cluster, "POST", PATHS["PersistentVolume"],
                                 volume("pv-2", "1Gi", persistentVolumeReclaimPolicy="Keep"))
    assert status == 422
    assert causes(body) == [("spec.persistentVolumeReclaimPolicy", 'Unsupported value: "Keep": supported values: '
                                                                    '"Delete", "Recycle", "Retain"')]


async def test_a_volume_needs_exactly_one_source_and_a_local_one_node_affinity(cluster: DevCluster) -> None:
    """As kube-apiserver's ValidatePersistentVolumeSpec refuses them, in its words and field paths."""
    bare = volume("bare", "1Gi")
    del bare["spec"]["hostPath"]
    status, body = await request(cluster, "POST", PATHS["PersistentVolume"], bare)
    assert status == 422 and causes(body) == [("spec", "Required value: must specify a volume type")]
    status, body = await request(cluster, "POST", PATHS["PersistentVolume"],
                                 volume("two", "1Gi", local={"path": "/mnt/disks/ssd1"}))
    assert status == 422 and causes(body) == [("spec.local", "Forbidden: may not specify more than 1 volume type")]
    local = volume("local", "1Gi", local={"path": "/mnt/disks/ssd1"})
    del local["spec"]["hostPath"]
    status, body = await request(cluster, "POST", PATHS["PersistentVolume"], local)
    assert status == 422
    assert causes(body) == [("spec.nodeAffinity", "Required value: Local volume requires node affinity")]
    pinned = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}
    status, body = await request(cluster, "POST", PATHS["PersistentVolume"],
                                 {**local, "spec": {**local["spec"], "local": {"path": "/mnt/../etc"},
                                                    "nodeAffinity": pinned}})
    assert status == 422
    assert causes(body) == [("spec.local.path", "Invalid value: \"/mnt/../etc\": must not contain '..'")]
    status, body = await request(cluster, "POST", PATHS["PersistentVolume"],
                                 {**local, "spec": {**local["spec"], "nodeAffinity": {}}})
    assert status == 422
    assert causes(body) == [("spec.nodeAffinity.required", "Required value: must specify required node constraints")]
    created = await create(cluster, {**local, "spec": {**local["spec"], "nodeAffinity": pinned}})
    assert created["spec"]["local"] == {"path": "/mnt/disks/ssd1"}
