"""CSI attach limits per node (state/volumes.py, placement/fit.py), counted as kube-scheduler's NodeVolumeLimits
(CSILimits) counts them: a node's CSINode gives each driver's limit (spec.drivers[].allocatable.count), a pod's
volumes are counted once per node by `<driver>/<volumeHandle>` (an unbound claim by its class's provisioner and
the claim), every pod bound or assumed there counts, and a node at its limit turns a pod with a new volume of
that driver away with "node(s) exceed max volume count"."""

from __future__ import annotations

from typing import Any

from events.ingest import KIND_BY_NAME, delete_event, upsert_event
from events.model import PodAssumed, PodNominated
from events.objects import ObjectMeta, Pod
from placement.fit import Capacity, shape_in
from placement.gang import plan_gang
from placement.lone import plan_pod
from placement.plan import GangPlan, Unschedulable
from placement.recheck import Adopted, broken_plans
from state.cluster import ClusterState
from state.volumes import MAX_VOLUME_COUNT, csi_volumes

EBS = "ebs.csi.aws.com"
BIND_COMPLETED = {"pv.kubernetes.io/bind-completed": "yes"}


def obj(state: ClusterState, kind: str, document: dict[str, Any]) -> None:
    state.apply(upsert_event(KIND_BY_NAME[kind], document))


def node(state: ClusterState, name: str) -> None:
    obj(state, "Node", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}"},
                        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}})


def csi_node(state: ClusterState, name: str, *drivers: dict[str, Any]) -> None:
    obj(state, "CSINode", {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
                           "spec": {"drivers": list(drivers)}})


def driver(name: str = EBS, count: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "nodeID": "i-0123"}
    if count is not None:
        entry["allocatable"] = {"count": count}
    return entry


def storage_class(state: ClusterState, name: str = "gp3", provisioner: str = EBS) -> None:
    obj(state, "StorageClass", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                                "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"})


def bound_claim(state: ClusterState, name: str, handle: str, *, csi_driver: str = EBS) -> None:
    """A claim bound to a CSI PersistentVolume of `csi_driver` whose volumeHandle is `handle`."""
    obj(state, "PersistentVolume", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{name}"},
        "spec": {"storageClassName": "gp3", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                 "claimRef": {"namespace": "default", "name": name},
                 "csi": {"driver": csi_driver, "volumeHandle": handle}},
        "status": {"phase": "Bound"}})
    obj(state, "PersistentVolumeClaim", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": BIND_COMPLETED},
        "spec": {"storageClassName": "gp3", "volumeName": f"pv-{name}", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": "Bound"}})


def unbound_claim(state: ClusterState, name: str, storage_class_name: str = "gp3") -> None:
    obj(state, "PersistentVolumeClaim", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"storageClassName": storage_class_name, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "10Gi"}}},
        "status": {"phase": "Pending"}})


def pod(state: ClusterState, name: str, *claims: str, node_name: str = "", scheduler: str = "toposched",
        gang: str = "", phase: str = "", priority: int | None = None) -> None:
    labels = {"pod-group.scheduling.sigs.k8s.io": gang} if gang else {}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "volumes": [{"name": f"v{index}", "persistentVolumeClaim": {"claimName": claim}}
                    for index, claim in enumerate(claims)],
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    obj(state, "Pod", {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
                       "spec": spec, "status": {"phase": phase} if phase else {}})


def pod_group(state: ClusterState, name: str, min_member: int) -> None:
    obj(state, "PodGroup", {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}})


def one_node(limit: int | None) -> ClusterState:
    state = ClusterState("toposched")
    storage_class(state)
    node(state, "n1")
    csi_node(state, "n1", driver(EBS, limit))
    return state


def held(state: ClusterState, key: str) -> Pod:
    return state.pods[key].obj


# --------------------------------------------------------------------------- counting


def test_a_bound_claim_counts_by_driver_and_volume_handle() -> None:
    state = one_node(2)
    bound_claim(state, "data", "vol-1")
    pod(state, "trainer", "data")
    assert csi_volumes(state.volumes, held(state, "default/trainer")) == {
        f"{EBS}/vol-1": (EBS, "default/data")}


def test_an_unbound_claim_counts_by_its_class_provisioner_and_the_claim() -> None:
    state = one_node(2)
    unbound_claim(state, "scratch")
    pod(state, "trainer", "scratch")
    [(unique, (driver_name, claim))] = csi_volumes(state.volumes, held(state, "default/trainer")).items()
    assert driver_name == EBS and claim == "default/scratch" and "default/scratch" in unique


def in_tree_claim(state: ClusterState, name: str, source: dict[str, Any], labels: dict[str, str] | None = None) -> None:
    """A claim bound to a PersistentVolume of an in-tree plugin (`source`: e.g. {"nfs": {...}})."""
    obj(state, "PersistentVolume", {"apiVersion": "v1", "kind": "PersistentVolume",
                                    "metadata": {"name": f"pv-{name}", "labels": labels or {}},
                                    "spec": {"claimRef": {"namespace": "default", "name": name}, **source}})
    obj(state, "PersistentVolumeClaim", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                         "metadata": {"name": name, "namespace": "default",
                                                      "annotations": BIND_COMPLETED},
                                         "spec": {"storageClassName": "gp3", "volumeName": f"pv-{name}"}})


def test_claims_without_class_of_an_unknown_class_or_bound_to_a_volume_of_no_driver_are_not_counted() -> None:
    state = one_node(2)
    obj(state, "PersistentVolumeClaim", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                         "metadata": {"name": "classless", "namespace": "default"},
                                         "spec": {"storageClassName": ""}})
    unbound_claim(state, "unknown", storage_class_name="nowhere")
    in_tree_claim(state, "shared-fs", {"nfs": {"server": "nfs.example.com", "path": "/exports"}})
    in_tree_claim(state, "bad-ebs", {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/not-a-volume"}})
    pod(state, "trainer", "classless", "unknown", "shared-fs", "bad-ebs", "missing")
    assert csi_volumes(state.volumes, held(state, "default/trainer")) == {}


def test_in_tree_volumes_migrated_to_csi_count_against_their_driver_by_the_translated_handle() -> None:
    state = one_node(2)
    in_tree_claim(state, "ebs", {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-0abc"}})
    in_tree_claim(state, "pd", {"gcePersistentDisk": {"pdName": "data-disk"}},
                  {"topology.kubernetes.io/zone": "us-central1-a"})
    in_tree_claim(state, "regional", {"gcePersistentDisk": {"pdName": "shared-disk"}},
                  {"topology.kubernetes.io/zone": "us-central1-a__us-central1-b"})
    in_tree_claim(state, "azure", {"azureDisk": {"diskName": "d1", "diskURI": "/subscriptions/s/disks/d1"}})
    in_tree_claim(state, "cinder", {"cinder": {"volumeID": "6f5e"}})
    storage_class(state, "gp2", provisioner="kubernetes.io/aws-ebs")  # EKS's default class to this day
    unbound_claim(state, "scratch", storage_class_name="gp2")
    pod(state, "trainer", "ebs", "pd", "regional", "azure", "cinder", "scratch")
    found = csi_volumes(state.volumes, held(state, "default/trainer"))
    assert {unique: driver_name for unique, (driver_name, _) in found.items() if "<claim" not in unique} == {
        f"{EBS}/vol-0abc": EBS,
        "pd.csi.storage.gke.io/projects/UNSPECIFIED/zones/us-central1-a/disks/data-disk": "pd.csi.storage.gke.io",
        "pd.csi.storage.gke.io/projects/UNSPECIFIED/regions/us-central1/disks/shared-disk": "pd.csi.storage.gke.io",
        "disk.csi.azure.com//subscriptions/s/disks/d1": "disk.csi.azure.com",
        "cinder.csi.openstack.org/6f5e": "cinder.csi.openstack.org",
    }
    assert found[f"{EBS}/<claim default/scratch>"] == (EBS, "default/scratch")


def test_an_in_tree_ebs_volume_and_its_csi_twin_count_once_on_a_node() -> None:
    state = one_node(1)
    in_tree_claim(state, "old", {"awsElasticBlockStore": {"volumeID": "vol-0abc"}})
    bound_claim(state, "new", "vol-0abc")  # the same EBS volume through a CSI PersistentVolume
    pod(state, "old-user", "old", node_name="n1", scheduler="default-scheduler")
    pod(state, "new-user", "new")
    assert state.attach_room("n1")[0] == {EBS: 0}
    assert isinstance(plan_pod(state, "default/new-user"), GangPlan)


def test_a_volume_used_by_two_pods_on_a_node_counts_once() -> None:
    state = one_node(2)
    bound_claim(state, "shared", "vol-1")
    bound_claim(state, "other", "vol-2")
    pod(state, "a", "shared", node_name="n1", scheduler="default-scheduler")
    pod(state, "b", "shared", "other", node_name="n1", scheduler="default-scheduler")
    room, attached = state.attach_room("n1")
    assert room == {EBS: 0} and attached == {f"{EBS}/vol-1", f"{EBS}/vol-2"}


def test_finished_pods_and_pods_treated_as_gone_free_their_volumes() -> None:
    state = one_node(2)
    bound_claim(state, "done", "vol-1")
    bound_claim(state, "running", "vol-2")
    pod(state, "done", "done", node_name="n1", scheduler="default-scheduler", phase="Succeeded")
    pod(state, "running", "running", node_name="n1", scheduler="default-scheduler")
    assert state.attach_room("n1")[0] == {EBS: 1}
    assert state.attach_room("n1", frozenset({"default/running"}))[0] == {EBS: 2}


def test_a_node_without_csinode_or_a_driver_without_count_has_no_limit() -> None:
    state = one_node(None)
    node(state, "bare")
    assert state.volumes.attach_limits == {} and state.volumes.limited == {}
    assert state.attach_room("n1") == ({}, set())


# --------------------------------------------------------------------------- placement


def test_a_node_at_its_limit_turns_away_a_pod_with_a_new_volume_in_kube_schedulers_words() -> None:
    state = one_node(1)
    bound_claim(state, "running", "vol-1")
    bound_claim(state, "data", "vol-2")
    pod(state, "running", "running", node_name="n1", scheduler="default-scheduler")
    pod(state, "trainer", "data")
    result = plan_pod(state, "default/trainer")
    assert isinstance(result, Unschedulable)
    assert result.reason == f"pod default/trainer: 0/1 nodes are available: 1 {MAX_VOLUME_COUNT}"


def test_a_node_at_its_limit_takes_a_pod_whose_volume_is_used_there_already() -> None:
    state = one_node(1)
    bound_claim(state, "shared", "vol-1")
    pod(state, "running", "shared", node_name="n1", scheduler="default-scheduler")
    pod(state, "reader", "shared")
    result = plan_pod(state, "default/reader")
    assert isinstance(result, GangPlan) and [a.node for a in result.assignments] == ["n1"]


def test_the_limit_follows_the_csinode_and_other_drivers_are_not_limited() -> None:
    state = one_node(0)
    storage_class(state, "files", provisioner="efs.csi.aws.com")
    unbound_claim(state, "scratch", storage_class_name="files")
    pod(state, "efs", "scratch")
    assert isinstance(plan_pod(state, "default/efs"), GangPlan)  # no limit for efs on n1
    bound_claim(state, "data", "vol-2")
    pod(state, "trainer", "data")
    assert isinstance(plan_pod(state, "default/trainer"), Unschedulable)
    csi_node(state, "n1", driver(EBS, 1))
    assert isinstance(plan_pod(state, "default/trainer"), GangPlan)
    state.apply(delete_event(KIND_BY_NAME["CSINode"], ObjectMeta(name="n1")))
    assert state.volumes.attach_limits == {}
    assert isinstance(plan_pod(state, "default/trainer"), GangPlan)


def test_an_assumed_pod_counts_on_its_node() -> None:
    state = one_node(1)
    bound_claim(state, "first", "vol-1")
    bound_claim(state, "second", "vol-2")
    pod(state, "first", "first")
    pod(state, "second", "second")
    state.apply(PodAssumed(pod="default/first", uid="uid-first", node="n1"))
    assert isinstance(plan_pod(state, "default/second"), Unschedulable)


def test_a_nomination_of_higher_priority_holds_its_volumes_on_the_node() -> None:
    # kube-scheduler filters a pod with the nominated pods of priority >= its own added to the node.
    state = one_node(1)
    for name in ("preemptor", "low", "high"):
        bound_claim(state, name, f"vol-{name}")
    pod(state, "preemptor", "preemptor", priority=100)
    pod(state, "low", "low")
    pod(state, "high", "high", priority=200)
    state.apply(PodNominated(pod="default/preemptor", uid="uid-preemptor", node="n1", priority=100))
    refused = plan_pod(state, "default/low")
    assert isinstance(refused, Unschedulable) and MAX_VOLUME_COUNT in refused.reason
    assert isinstance(plan_pod(state, "default/high"), GangPlan)
    assert isinstance(plan_pod(state, "default/preemptor"), GangPlan)  # its own nomination never blocks it


def test_a_gang_on_one_node_counts_its_volumes_together() -> None:
    state = one_node(3)
    node(state, "n2")  # no CSINode: no limit
    pod_group(state, "job", 4)
    for index in range(4):
        bound_claim(state, f"data-{index}", f"vol-{index}")
        pod(state, f"worker-{index}", f"data-{index}", gang="job")
    result = plan_gang(state, "default/job")
    assert isinstance(result, GangPlan)
    on_n1 = [a.pod for a in result.assignments if a.node == "n1"]
    assert len(on_n1) <= 3 and len(result.assignments) == 4


def test_a_gang_that_needs_more_volumes_than_the_limits_allow_waits_with_the_reason() -> None:
    state = one_node(3)
    pod_group(state, "job", 4)
    for index in range(4):
        bound_claim(state, f"data-{index}", f"vol-{index}")
        pod(state, f"worker-{index}", f"data-{index}", gang="job")
    result = plan_gang(state, "default/job")
    assert isinstance(result, Unschedulable)
    assert "room for 3 of 4 pods" in result.reason


def test_pods_of_a_plan_sharing_a_volume_count_it_once() -> None:
    state = one_node(2)
    pod_group(state, "job", 3)
    bound_claim(state, "shared", "vol-s")
    bound_claim(state, "own", "vol-o")
    pod(state, "worker-0", "shared", gang="job")
    pod(state, "worker-1", "shared", gang="job")
    pod(state, "worker-2", "own", gang="job")
    result = plan_gang(state, "default/job")
    assert isinstance(result, GangPlan), result


def test_a_shape_without_volumes_costs_no_attach_check() -> None:
    state = one_node(0)
    pod(state, "plain")
    shape = shape_in(state, state.pods["default/plain"])
    assert shape.attach == ()
    assert Capacity(state).slots(shape, state.nodes["n1"]) > 0


# --------------------------------------------------------------------------- untrusted CSINodes


def test_bad_entries_are_reported_naming_the_field_and_the_fold_goes_on() -> None:
    state = ClusterState("toposched")
    node(state, "n1")
    csi_node(state, "n1", driver("", 3), driver(EBS, -1), driver("a.example.com", 2), driver("a.example.com", 5),
             driver("big.example.com", 2**62))
    problems = {(p.field, p.message) for p in state.problems_of("CSINode", "n1")}
    assert ("spec.drivers[0].name", "empty: the entry is not read") in problems
    assert ("spec.drivers[1].allocatable.count", "-1: must be >= 0; the driver is not limited") in problems
    assert any(field == "spec.drivers[3].name" and "duplicate" in message for field, message in problems)
    assert state.volumes.attach_limits == {"n1": {"a.example.com": 5, "big.example.com": 2**62}}
    csi_node(state, "n1", driver(EBS, 1))
    assert state.problems_of("CSINode", "n1") == []


def test_a_count_past_int64_is_undecodable_not_a_crash() -> None:
    state = ClusterState("toposched")
    csi_node(state, "n1", driver(EBS, 2**64))
    assert ("CSINode", "n1") in state.undecodable
    assert state.volumes.attach_limits == {}


def test_csinodes_survive_a_snapshot() -> None:
    state = one_node(7)
    restored = ClusterState.restore(state.snapshot())
    assert restored.volumes.attach_limits == {"n1": {EBS: 7}}


def test_a_node_past_its_limit_still_takes_a_pod_that_brings_no_new_volume() -> None:
    # A CSINode lowered under what its pods use (or pods of another scheduler past it): kube-scheduler checks
    # only the drivers a pod brings new volumes of.
    state = one_node(0)
    bound_claim(state, "shared", "vol-1")
    pod(state, "running", "shared", node_name="n1", scheduler="default-scheduler")
    pod(state, "reader", "shared")
    assert state.attach_room("n1")[0] == {EBS: -1}
    assert isinstance(plan_pod(state, "default/reader"), GangPlan)


# --------------------------------------------------------------------------- plans adopted after a restart


def test_an_adopted_plan_whose_node_was_filled_to_its_limit_while_down_is_broken() -> None:
    state = one_node(1)
    bound_claim(state, "mine", "vol-1")
    bound_claim(state, "theirs", "vol-2")
    pod(state, "trainer", "mine")
    state.apply(PodAssumed(pod="default/trainer", uid="uid-trainer", node="n1"))
    adopted = [Adopted(key="default/trainer", gangs=(), pods=("default/trainer",))]
    assert broken_plans(state, adopted) == {}
    pod(state, "squatter", "theirs", node_name="n1", scheduler="default-scheduler")  # while we were down
    assert broken_plans(state, adopted) == {"default/trainer": (
        f"pod default/trainer: node n1 has no room for it any more: {MAX_VOLUME_COUNT} ({EBS}: 1 new, 0 left)")}


def test_adopted_plans_sharing_a_volume_attached_on_their_node_hold() -> None:
    state = one_node(1)
    bound_claim(state, "shared", "vol-1")
    pod(state, "running", "shared", node_name="n1", scheduler="default-scheduler")
    for name in ("a", "b"):
        pod(state, name, "shared")
        state.apply(PodAssumed(pod=f"default/{name}", uid=f"uid-{name}", node="n1"))
    adopted = [Adopted(key=f"default/{name}", gangs=(), pods=(f"default/{name}",)) for name in ("a", "b")]
    assert broken_plans(state, adopted) == {}


def test_of_two_adopted_plans_the_first_keeps_the_nodes_last_volume() -> None:
    state = one_node(1)
    for name in ("first", "second"):
        bound_claim(state, name, f"vol-{name}")
        pod(state, name, name)
        state.apply(PodAssumed(pod=f"default/{name}", uid=f"uid-{name}", node="n1"))
    adopted = [Adopted(key=f"default/{name}", gangs=(), pods=(f"default/{name}",)) for name in ("first", "second")]
    assert list(broken_plans(state, adopted)) == ["default/second"]
