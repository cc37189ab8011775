"""Where a pod's claims let it go (state/volumes.py), read as kube-scheduler's VolumeBinding and VolumeZone
plugins read them, down to their words: a user reads the same reason from either scheduler."""

from __future__ import annotations

from typing import Any

import pytest

from events.ingest import KIND_BY_NAME, upsert_event
from events.model import PodAssumed, PodDeleted
from placement.fit import admits, shape_in
from placement.lone import plan_pod
from placement.plan import VOLUME, GangPlan, Unschedulable
from state.cluster import ClusterState

ZONE = "topology.kubernetes.io/zone"
POD_UID = "uid-trainer"


def obj(state: ClusterState, kind: str, document: dict[str, Any]) -> None:
    state.apply(upsert_event(KIND_BY_NAME[kind], document))


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def claim(name: str, *, storage_class: str | None = "zonal", volume: str = "", bound: bool = True,
          owner: str = "", deleting: bool = False, phase: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if volume and bound:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": owner,
                                    "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T10:00:00Z"
    spec: dict[str, Any] = {"volumeName": volume} if volume else {}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": phase}}


def volume(name: str, *, labels: dict[str, str] | None = None, affinity: list[dict[str, Any]] | None = None
           ) -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": "zonal", "claimRef": {"namespace": "default", "name": "data"}}
    if affinity is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": affinity}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}


def storage_class(name: str, *, mode: str = "WaitForFirstConsumer", provisioner: str = "ebs.csi.aws.com",
                  zones: list[str] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                                "provisioner": provisioner, "volumeBindingMode": mode}
    if zones is not None:
        document["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return document


def trainer(state: ClusterState, *volumes: dict[str, Any]) -> None:
    obj(state, "Pod", {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "trainer", "namespace": "default", "uid": POD_UID},
                "spec": {"schedulerName": "toposched", "volumes": [
                    {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
                    *volumes],
                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}})


def uses(claim_name: str) -> dict[str, Any]:
    return {"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}


EPHEMERAL = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "zonal"}}}}

@pytest.fixture
def state() -> ClusterState:
    cluster = ClusterState()
    obj(cluster, "Node", node("a0", {ZONE: "us-east-1a", "kubernetes.io/hostname": "a0"}))
    obj(cluster, "Node", node("b0", {ZONE: "us-east-1b", "kubernetes.io/hostname": "b0"}))
    obj(cluster, "Node", node("plain", {"kubernetes.io/hostname": "plain"}))
    obj(cluster, "StorageClass", storage_class("zonal"))
    return cluster


def blocked(state: ClusterState) -> str:
    return state.volume_needs(state.pods["default/trainer"]).blocked


def admitted(state: ClusterState) -> dict[str, str]:
    pod = state.pods["default/trainer"]
    shape = shape_in(state, pod)
    return {name: admits(shape, info) for name, info in sorted(state.nodes.items())}


def test_volumes_no_claim_backs_are_dropped_as_decoded_and_ask_nothing(state: ClusterState) -> None:
    trainer(state)
    pod = state.pods["default/trainer"]
    assert pod.obj.spec.volumes == []
    assert state.volume_needs(pod).reach == () and not blocked(state)


def test_a_bound_zonal_volume_admits_only_its_zone_and_nodes_without_zone_labels(state: ClusterState) -> None:
    obj(state, "PersistentVolume", volume("pv-1", labels={ZONE: "us-east-1b"}))
    obj(state, "PersistentVolumeClaim", claim("data", volume="pv-1"))
    trainer(state, uses("data"))
    assert admitted(state) == {"a0": "node(s) had no available volume zone", "b0": "", "plain": ""}


def test_a_volume_in_two_zones_admits_either(state: ClusterState) -> None:
    obj(state, "PersistentVolume", volume("pv-1", labels={ZONE: "us-east-1a__us-east-1b"}))
    obj(state, "PersistentVolumeClaim", claim("data", volume="pv-1"))
    trainer(state, uses("data"))
    assert admitted(state) == {"a0": "", "b0": "", "plain": ""}


def test_a_local_volume_admits_only_its_node(state: ClusterState) -> None:
    obj(state, "PersistentVolume", volume("pv-1", affinity=[{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a0"]}]}]))
    obj(state, "PersistentVolumeClaim", claim("data", volume="pv-1"))
    trainer(state, uses("data"))
    conflict = "node(s) had volume node affinity conflict"
    assert admitted(state) == {"a0": "", "b0": conflict, "plain": conflict}
    plan = plan_pod(state, "default/trainer")
    assert isinstance(plan, GangPlan) and plan.assignments[0].node == "a0"


def test_a_wait_for_first_consumer_claim_is_provisioned_where_the_class_allows(state: ClusterState) -> None:
    obj(state, "StorageClass", storage_class("zonal", zones=["us-east-1a"]))
    obj(state, "PersistentVolumeClaim", claim("data"))
    trainer(state, uses("data"))
    needs = state.volume_needs(state.pods["default/trainer"])
    assert needs.provision == ("default/data",)
    refused = "node(s) didn't find available persistent volumes to bind"
    assert admitted(state) == {"a0": "", "b0": refused, "plain": refused}


@pytest.mark.parametrize(("objects", "volumes", "reason"), [
    ([], [uses("absent")], 'persistentvolumeclaim "absent" not found'),
    ([], [EPHEMERAL], 'waiting for ephemeral volume controller to create the persistentvolumeclaim "trainer-scratch"'),
    ([("PersistentVolumeClaim", claim("trainer-scratch", owner="someone-else"))], [EPHEMERAL],
     'persistentvolumeclaim "trainer-scratch" was not created for the pod'),
    ([("PersistentVolumeClaim", claim("data", deleting=True))], [uses("data")],
     'persistentvolumeclaim "data" is being deleted'),
    ([("PersistentVolumeClaim", claim("data", volume="pv-gone", phase="Lost"))], [uses("data")],
     'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-gone"'),
    ([("PersistentVolumeClaim", claim("data", volume="pv-gone"))], [uses("data")],
     'persistentvolumeclaim "data" is bound to persistentvolume "pv-gone", which does not exist'),
    ([("StorageClass", storage_class("standard", mode="Immediate")),
      ("PersistentVolumeClaim", claim("data", storage_class="standard"))], [uses("data")],
     'pod has unbound immediate PersistentVolumeClaims (persistentvolumeclaim "data": StorageClass "standard" '
     "binds it at once (Immediate), not yet done)"),
    ([("PersistentVolumeClaim", claim("data", storage_class="missing"))], [uses("data")],
     'pod has unbound immediate PersistentVolumeClaims (persistentvolumeclaim "data": storageclass "missing" '
     "not found)"),
    ([("PersistentVolumeClaim", claim("data", storage_class=""))], [uses("data")],
     'pod has unbound immediate PersistentVolumeClaims (persistentvolumeclaim "data" has no StorageClass: it '
     "waits for a PersistentVolume to be bound to it)"),
    ([("PersistentVolumeClaim", claim("data", volume="pv-1", bound=False))], [uses("data")],
     'pod has unbound immediate PersistentVolumeClaims (persistentvolumeclaim "data": its binding to '
     'persistentvolume "pv-1" is not complete yet)'),
    ([("StorageClass", storage_class("local", provisioner="kubernetes.io/no-provisioner")),
      ("PersistentVolumeClaim", claim("data", storage_class="local"))], [uses("data")],
     "node(s) didn't find available persistent volumes to bind: no PersistentVolume of StorageClass "
     '"local" (WaitForFirstConsumer, no provisioner) may be bound to persistentvolumeclaim "data" (storage 0)'),
], ids=["missing", "ephemeral-not-yet", "ephemeral-not-owned", "deleting", "lost", "volume-gone",
        "immediate", "class-missing", "no-class", "prebound", "no-provisioner"])
def test_a_claim_that_is_not_usable_keeps_the_pod_off_every_node_and_says_why(
        state: ClusterState, objects: list[tuple[str, dict[str, Any]]], volumes: list[dict[str, Any]],
        reason: str) -> None:
    for kind, document in objects:
        obj(state, kind, document)
    trainer(state, *volumes)
    assert blocked(state).startswith(reason)
    plan = plan_pod(state, "default/trainer")
    assert isinstance(plan, Unschedulable) and plan.constraint == VOLUME
    assert plan.reason.startswith(f"pod default/trainer: {reason}")


def test_an_ephemeral_claim_the_pod_controls_is_usable(state: ClusterState) -> None:
    obj(state, "PersistentVolumeClaim", claim("trainer-scratch", owner=POD_UID))
    trainer(state, EPHEMERAL)
    assert not blocked(state)
    assert state.volume_needs(state.pods["default/trainer"]).provision == ("default/trainer-scratch",)


def test_the_deprecated_class_annotation_names_the_class_first(state: ClusterState) -> None:
    obj(state, "StorageClass", storage_class("standard", mode="Immediate"))
    document = claim("data", storage_class="standard")
    document["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "zonal"}
    obj(state, "PersistentVolumeClaim", document)
    trainer(state, uses("data"))
    assert not blocked(state)


def test_pods_with_their_own_volumes_in_one_zone_share_one_shape(state: ClusterState) -> None:
    # A StatefulSet's pods, each with its own disk: placement asks about the zone once, not per pod.
    for index in range(2):
        obj(state, "PersistentVolume", volume(f"pv-{index}", labels={ZONE: "us-east-1b"}))
        obj(state, "PersistentVolumeClaim", claim(f"data-{index}", volume=f"pv-{index}"))
        obj(state, "Pod", {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": f"db-{index}", "namespace": "default", "uid": f"uid-db-{index}"},
                           "spec": {"schedulerName": "toposched", "volumes": [uses(f"data-{index}")],
                                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}})
    first, second = (shape_in(state, state.pods[f"default/db-{index}"]) for index in range(2))
    assert first.volumes and first.key == second.key


def _rwop_user(state: ClusterState, name: str, *, node_name: str = "", phase: str = "Pending",
               claim_name: str = "solo") -> None:
    spec: dict[str, Any] = {"schedulerName": "toposched", "volumes": [uses(claim_name)],
                            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    obj(state, "Pod", {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                       "spec": spec, "status": {"phase": phase}})


def _rwop_claim(state: ClusterState, *, modes: list[str]) -> None:
    obj(state, "PersistentVolume", volume("pv-solo", labels={ZONE: "us-east-1a"}))
    document = claim("solo", volume="pv-solo")
    document["spec"]["accessModes"] = modes
    obj(state, "PersistentVolumeClaim", document)


def test_a_read_write_once_pod_claim_in_use_by_a_running_pod_holds_the_next_pod_back(state: ClusterState) -> None:
    _rwop_claim(state, modes=["ReadWriteOncePod"])
    _rwop_user(state, "holder", node_name="a0", phase="Running")
    _rwop_user(state, "trainer")
    why = blocked(state)
    assert why.startswith("node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod "
                          "access mode (persistentvolumeclaim \"solo\" is used by pod default/holder")
    plan = plan_pod(state, "default/trainer")
    assert isinstance(plan, Unschedulable) and plan.constraint == VOLUME
    _rwop_user(state, "holder", node_name="a0", phase="Succeeded")  # it ended: the claim is free
    assert not blocked(state)
    assert state.volumes.released == {"default/solo"}


def test_a_read_write_once_claim_may_be_shared_and_a_finished_or_deleted_holder_frees_a_pod_one(
        state: ClusterState) -> None:
    _rwop_claim(state, modes=["ReadWriteOnce"])  # one node, any number of pods: VolumeRestrictions lets it be
    _rwop_user(state, "holder", node_name="a0", phase="Running")
    _rwop_user(state, "trainer")
    assert not blocked(state)
    _rwop_claim(state, modes=["ReadWriteOncePod"])
    assert blocked(state)
    state.volumes.released.clear()
    state.apply(upsert_event(KIND_BY_NAME["Pod"], {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "other", "namespace": "default", "uid": "uid-other"}, "spec": {"containers": []}}))
    assert not state.volumes.released  # a pod without volumes releases nothing

    state.apply(PodDeleted(key="default/holder", uid="uid-holder"))
    assert state.volumes.released == {"default/solo"} and not blocked(state)
    assert state.volumes.users == {"default/solo": {"default/trainer"}}


def test_of_two_pending_pods_of_ours_on_one_read_write_once_pod_claim_the_first_by_key_may_go(
        state: ClusterState) -> None:
    # One plan (a gang, a batch of lone pods) would place both; kube-scheduler places one, then finds the
    # other in conflict.
    _rwop_claim(state, modes=["ReadWriteOncePod"])
    _rwop_user(state, "a-first")
    _rwop_user(state, "trainer")
    assert not state.volume_needs(state.pods["default/a-first"]).blocked
    assert "is used by pod default/a-first" in blocked(state)


# --------------------------------------------------------------------------- volumes made in advance

NO_VOLUME = "node(s) didn't find available persistent volumes to bind"


def local_class(state: ClusterState) -> None:
    obj(state, "StorageClass", storage_class("local", provisioner="kubernetes.io/no-provisioner"))


def local_claim(name: str, request: str = "100Gi", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": request}}, **spec}}


def local_volume(name: str, host: str | None, capacity: str = "100Gi", *, phase: str = "Available",
                 labels: dict[str, str] | None = None, claim_ref: dict[str, str] | None = None,
                 **spec: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"storageClassName": "local", "capacity": {"storage": capacity},
                                "accessModes": ["ReadWriteOnce"], **spec}
    if host is not None:
        document["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}
    if claim_ref is not None:
        document["claimRef"] = claim_ref
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": labels or {}, "resourceVersion": "1"},
            "spec": document, "status": {"phase": phase}}


def test_a_claim_of_a_class_without_provisioner_goes_where_a_matching_volume_made_in_advance_is(
        state: ClusterState) -> None:
    local_class(state)
    obj(state, "PersistentVolume", local_volume("pv-b0", "b0"))
    obj(state, "PersistentVolumeClaim", local_claim("data"))
    trainer(state, uses("data"))
    needs = state.volume_needs(state.pods["default/trainer"])
    assert needs.static == ("default/data",) and not needs.blocked and not needs.provision
    assert admitted(state) == {"a0": NO_VOLUME, "b0": "", "plain": NO_VOLUME}
    plan = plan_pod(state, "default/trainer")
    assert isinstance(plan, GangPlan) and plan.assignments[0].node == "b0"


@pytest.mark.parametrize(("volume_document", "why"), [
    (local_volume("pv", "a0", capacity="50Gi"), "too small"),
    (local_volume("pv", "a0", phase="Released"), "not Available"),
    (local_volume("pv", "a0", claim_ref={"namespace": "default", "name": "other"}), "names another claim"),
    (local_volume("pv", "a0", volumeMode="Block"), "another volumeMode"),
    (local_volume("pv", "a0", accessModes=["ReadOnlyMany"]), "lacks ReadWriteOnce"),
    (local_volume("pv", "a0", storageClassName="other"), "another class"),
    (local_volume("pv", "a0", volumeAttributesClassName="gold"), "another attributes class"),
    ({**local_volume("pv", "a0"), "metadata": {"name": "pv", "deletionTimestamp": "2026-11-27T00:00:00Z"}},
     "being deleted"),
], ids=["too-small", "released", "other-claim", "block", "access-modes", "class", "attributes-class", "deleting"])
def test_a_volume_that_does_not_match_the_claim_is_not_bound_to_it(
        state: ClusterState, volume_document: dict[str, Any], why: str) -> None:
    local_class(state)
    obj(state, "PersistentVolume", volume_document)
    obj(state, "PersistentVolumeClaim", local_claim("data"))
    trainer(state, uses("data"))
    assert blocked(state).startswith(f'{NO_VOLUME}: no PersistentVolume of StorageClass "local"'), why


def test_the_claims_selector_must_select_the_volumes_labels(state: ClusterState) -> None:
    local_class(state)
    obj(state, "PersistentVolume", local_volume("pv-a0", "a0", labels={"disk": "nvme"}))
    obj(state, "PersistentVolume", local_volume("pv-b0", "b0", labels={"disk": "hdd"}))
    obj(state, "PersistentVolumeClaim", local_claim("data", selector={"matchLabels": {"disk": "nvme"}}))
    trainer(state, uses("data"))
    assert admitted(state) == {"a0": "", "b0": NO_VOLUME, "plain": NO_VOLUME}


def test_a_volume_pre_bound_to_the_claim_is_the_only_one_it_may_get(state: ClusterState) -> None:
    local_class(state)
    obj(state, "PersistentVolume", local_volume("pv-a0", "a0"))
    obj(state, "PersistentVolume", local_volume("pv-b0", "b0", phase="Pending",
                                                claim_ref={"namespace": "default", "name": "data"}))
    obj(state, "PersistentVolumeClaim", local_claim("data"))
    trainer(state, uses("data"))
    assert admitted(state) == {"a0": NO_VOLUME, "b0": "", "plain": NO_VOLUME}


def test_a_volume_without_node_affinity_reaches_every_node(state: ClusterState) -> None:
    local_class(state)
    obj(state, "PersistentVolume", local_volume("pv-net", None))
    obj(state, "PersistentVolumeClaim", local_claim("data"))
    trainer(state, uses("data"))
    assert admitted(state) == {"a0": "", "b0": "", "plain": ""}


def second_pod(state: ClusterState, name: str, claim_name: str) -> None:
    obj(state, "Pod", {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                       "spec": {"schedulerName": "toposched", "volumes": [uses(claim_name)],
                                "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}})


def test_a_node_whose_volumes_other_placed_pods_wait_for_takes_no_more(state: ClusterState) -> None:
    """The first pod is placed (assumed) on the node of the only volume: until its claim is bound, that
    volume is spoken for, and the second pod's claim finds none left there."""
    local_class(state)
    obj(state, "PersistentVolume", local_volume("pv-b0", "b0"))
    obj(state, "PersistentVolumeClaim", local_claim("data"))
    obj(state, "PersistentVolumeClaim", local_claim("other"))
    trainer(state, uses("data"))
    second_pod(state, "second", "other")
    first = plan_pod(state, "default/trainer")
    assert isinstance(first, GangPlan) and first.assignments[0].node == "b0"
    state.apply(PodAssumed(pod="default/trainer", uid=POD_UID, node="b0"))
    second = plan_pod(state, "default/second")
    assert isinstance(second, Unschedulable) and NO_VOLUME in second.reason
    # its own claim does not count against the pod itself (a plan adopted after a restart is rechecked)
    assert admitted(state)["b0"] == ""
    # once the volume names the first claim, it is no candidate for the second (and nothing waits on b0)
    named = local_volume("pv-b0", "b0", claim_ref={"namespace": "default", "name": "data", "uid": "uid-data"})
    obj(state, "PersistentVolume", named)
    assert state.static_spoken("local") == set()
    assert state.volume_needs(state.pods["default/second"]).blocked.startswith(NO_VOLUME)
