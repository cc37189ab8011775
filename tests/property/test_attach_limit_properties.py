"""No placement ever takes a node past a CSI driver's attach limit (NodeVolumeLimits), on any cluster.

Random nodes, each with a CSINode limiting ebs.csi.aws.com to a random count (or not at all), running pods
of another scheduler using random EBS volumes (some of them shared, some nodes over their limit already),
and a gang (all or nothing) or a batch of lone pods with volumes of their own, shared with running pods or
with each other, bound or still to be provisioned. Whatever is placed, each node's unique volumes of the
driver, counted here from what the test made (not by state/volumes.py), stay within its limit, or do not
grow where other pods had taken it past its limit already.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import group_event, pod_group
from events.ingest import KIND_BY_NAME, upsert_event
from events.model import Event, PodAssumed
from placement import GangPlan, plan_gang, plan_pod
from state.cluster import ClusterState

EBS = "ebs.csi.aws.com"


@dataclass
class Case:
    events: list[Event]
    limits: dict[str, int]  # node -> its limit for EBS (absent: none)
    running: dict[str, str] = field(default_factory=dict)  # running pod -> its node
    volumes_of: dict[str, set[str]] = field(default_factory=dict)  # pod key -> the unique volumes it uses
    pending: list[str] = field(default_factory=list)
    gang: str = ""


def _obj(kind: str, document: dict[str, Any]) -> Event:
    return upsert_event(KIND_BY_NAME[kind], document)


def _claim(name: str, *, bound: bool, in_tree: bool = False) -> list[Event]:
    """A claim of class gp3: bound to an EBS volume `vol-<name>` (through a CSI PersistentVolume, or an in-tree
    awsElasticBlockStore one, counted against the CSI driver alike), or unbound (counted by the class's driver)."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    spec: dict[str, Any] = {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}
    events = []
    if bound:
        events.append(_obj("PersistentVolume", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{name}"},
            "spec": {"storageClassName": "gp3", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "claimRef": {"namespace": "default", "name": name},
                     **({"awsElasticBlockStore": {"volumeID": f"aws://us-east-1a/vol-{name}"}} if in_tree else
                        {"csi": {"driver": EBS, "volumeHandle": f"vol-{name}"}})}, "status": {"phase": "Bound"}}))
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        spec["volumeName"] = f"pv-{name}"
    events.append(_obj("PersistentVolumeClaim", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                 "metadata": meta, "spec": spec}))
    return events


def _pod(name: str, claims: list[str], *, node: str = "", gang: str = "") -> Event:
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler" if node else "toposched",
        "volumes": [{"name": f"v{index}", "persistentVolumeClaim": {"claimName": claim}}
                    for index, claim in enumerate(claims)],
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    labels = {"pod-group.scheduling.sigs.k8s.io": gang} if gang else {}
    return _obj("Pod", {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
                        "spec": spec})


@st.composite
def cases(draw: st.DrawFn) -> Case:
    events: list[Event] = [_obj("StorageClass", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
        "provisioner": EBS, "volumeBindingMode": "WaitForFirstConsumer"})]
    limits: dict[str, int] = {}
    nodes = [f"n{index}" for index in range(draw(st.integers(1, 4)))]
    for name in nodes:
        events.append(_obj("Node", {"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": name, "uid": f"uid-{name}",
                                                 "labels": {"network.topology.nvidia.com/block": "b0"}},
                                    "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}))
        limit = draw(st.sampled_from([None, 0, 1, 2, 3, 4]))
        drivers: list[dict[str, Any]] = [{"name": "efs.csi.aws.com", "nodeID": name}]
        if limit is not None:
            limits[name] = limit
            drivers.append({"name": EBS, "nodeID": name, "allocatable": {"count": limit}})
        events.append(_obj("CSINode", {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                       "metadata": {"name": name}, "spec": {"drivers": drivers}}))
    case = Case(events, limits)
    pool = [f"shared-{index}" for index in range(draw(st.integers(0, 4)))]
    for claim in pool:
        events.extend(_claim(claim, bound=True, in_tree=draw(st.booleans())))
    for index in range(draw(st.integers(0, 4))):
        name = f"run-{index}"
        claims = draw(st.lists(st.sampled_from(pool), max_size=3, unique=True)) if pool else []
        node = draw(st.sampled_from(nodes))
        case.running[f"default/{name}"] = node
        case.volumes_of[f"default/{name}"] = {f"vol-{claim}" for claim in claims}
        events.append(_pod(name, claims, node=node))
    if draw(st.booleans()):
        case.gang = "default/job"
    size = draw(st.integers(1, 4))
    if case.gang:
        events.append(group_event(pod_group("job", min_member=size)))
    for index in range(size):
        name = f"p{index}"
        claims = draw(st.lists(st.sampled_from(pool), max_size=2, unique=True)) if pool else []
        unique = {f"vol-{claim}" for claim in claims}
        for number in range(draw(st.integers(0, 2))):
            own = f"{name}-own{number}"
            bound = draw(st.booleans())
            events.extend(_claim(own, bound=bound, in_tree=draw(st.booleans())))
            claims.append(own)
            unique.add(f"vol-{own}" if bound else f"claim-{own}")
        case.volumes_of[f"default/{name}"] = unique
        case.pending.append(f"default/{name}")
        events.append(_pod(name, claims, gang="job" if case.gang else ""))
    return case


def _used(case: Case, placed: dict[str, str]) -> dict[str, set[str]]:
    """Per node, the unique EBS volumes its pods use (running and `placed`)."""
    used: dict[str, set[str]] = {}
    for key, node in [*case.running.items(), *placed.items()]:
        used.setdefault(node, set()).update(case.volumes_of[key])
    return used


@settings(max_examples=150, deadline=None)
@given(cases())
def test_no_plan_takes_a_node_past_its_attach_limit(case: Case) -> None:
    state = ClusterState("toposched")
    for event in case.events:
        state.apply(event)
    placed: dict[str, str] = {}
    if case.gang:
        result = plan_gang(state, case.gang)
        if isinstance(result, GangPlan):
            placed = {assignment.pod: assignment.node for assignment in result.assignments}
            assert set(placed) == set(case.pending)  # all or nothing
    else:
        for key in case.pending:
            result = plan_pod(state, key)
            if isinstance(result, GangPlan):
                [assignment] = result.assignments
                placed[key] = assignment.node
                state.apply(PodAssumed(pod=key, uid=state.pods[key].uid, node=assignment.node))
    before = _used(case, {})
    for node, volumes in _used(case, placed).items():
        limit = case.limits.get(node)
        if limit is not None:
            assert len(volumes) <= max(limit, len(before.get(node, ()))), (node, limit, volumes, placed)
            if len(before.get(node, ())) >= limit:
                assert volumes == before.get(node, set()), (node, limit, volumes, placed)


@settings(max_examples=150, deadline=None)
@given(cases())
def test_a_pod_whose_volumes_are_all_attached_on_a_node_is_never_refused_there_for_the_limit(case: Case) -> None:
    """The other side: a lone pod whose every volume a pod running on a node uses goes somewhere (that
    node at least takes it: nothing else limits it here), whatever that node's limit."""
    state = ClusterState("toposched")
    for event in case.events:
        state.apply(event)
    for key in case.pending if not case.gang else []:
        wanted = case.volumes_of[key]
        hosts = [node for node, volumes in _used(case, {}).items() if wanted and wanted <= volumes]
        if hosts:
            assert isinstance(plan_pod(state, key), GangPlan), (key, hosts)
