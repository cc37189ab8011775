"""A relist leaves out an object the state holds unchanged (`ClusterState.holds_unchanged`) for every kind the
watch lists, not only nodes, pods, PodGroups and PriorityClasses: random histories of every kind, as the API
writes them (Koordinator and scheduler-plugins ElasticQuotas with their trees, Volcano Queues, PodGroups and
Jobs, HyperNodes, the ClusterNetworkTopology, Kueue and KAI Topologies, upstream Workloads and PodGroups,
KAI PodGroups, Kubeflow training jobs of every kind, pods joining each kind of gang), with deletions and
versions that do not decode. Each object the state holds, listed again as JSON as a relist would decode it,
is recognized unless it is marked broken; folding it again changes nothing; the next resourceVersion of it
is never left out. And what a restart rebuilds from such a history (a snapshot, then the log's records) is
what folding it live gave."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.ingest import KIND_BY_NAME, KINDS, KindInfo, delete_event, upsert_event
from events.model import Event, encode_event, with_seq
from events.objects import (
    GANG_MIN_AVAILABLE_ANNOTATION,
    GANG_NAME_ANNOTATION,
    KAI_POD_GROUP_ANNOTATION,
    KAI_QUEUE_LABEL,
    POD_GROUP_LABEL,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
    SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    ObjectMeta,
)
from state.cluster import ClusterState, subject_of

BLOCK = "network.topology.nvidia.com/block"
RACK = "topology.example.com/rack"
NAMESPACES = ["team-a", "team-b"]


def _meta(name: str, namespace: str, version: int, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{namespace}-{name}", "resourceVersion": str(version), **extra}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _gpus(count: int) -> dict[str, str]:
    return {"nvidia.com/gpu": str(count)}


# Per kind: a strategy of (name, namespace, the document but its metadata's name, namespace and version).
_DOCUMENTS: dict[str, Any] = {
    "Node": st.builds(
        lambda index, block, rack, gpus, off: (f"n{index}", "", {
            "metadata": {"labels": {"kubernetes.io/hostname": f"n{index}", BLOCK: block, RACK: rack}},
            "spec": {"unschedulable": off},
            "status": {"allocatable": {**_gpus(gpus), "cpu": "64", "pods": "110"}}}),
        st.integers(0, 2), st.sampled_from(["b0", "b1"]), st.sampled_from(["r0", "r1"]), st.sampled_from([4, 8]),
        st.booleans()),
    "PriorityClass": st.builds(
        lambda name, value, policy: (name, "", {"value": value, "preemptionPolicy": policy}),
        st.sampled_from(["high", "low"]), st.integers(-10, 1000), st.sampled_from(["PreemptLowerPriority", "Never"])),
    "ClusterNetworkTopology": st.builds(
        lambda two: ("default", "", {"spec": {"networkTopologySpec": [
            {"topologyLayer": "BlockLayer", "labelKey": [BLOCK]},
            *([{"topologyLayer": "RackLayer", "labelKey": [RACK], "parentTopologyLayer": "BlockLayer"}] if two else []),
            {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "RackLayer" if two else "BlockLayer"}]}}),
        st.booleans()),
    "HyperNode": st.builds(
        lambda index, tier, member: (f"h{index}", "", {"spec": {"tier": tier, "members": [member]}}),
        st.integers(0, 1), st.integers(1, 2), st.sampled_from([
            {"type": "Node", "selector": {"exactMatch": {"name": "n0"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "n[0-1]"}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {BLOCK: "b1"}}}},
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "h0"}}}])),
    "KueueTopology": st.builds(
        lambda index, levels: (f"t{index}", "", {"spec": {"levels": [{"nodeLabel": key} for key in levels]}}),
        st.integers(0, 1), st.sampled_from([[BLOCK, RACK, "kubernetes.io/hostname"], [RACK], [BLOCK, BLOCK], []])),
    "KaiTopology": st.builds(
        lambda index, levels, alias: (f"kt{index}", "", {"spec": {"levels": [
            {"nodeLabel": key, **({"alias": alias} if alias and position == 0 else {})}
            for position, key in enumerate(levels)]}}),
        st.integers(0, 1), st.sampled_from([[BLOCK, RACK, "kubernetes.io/hostname"], [RACK], [BLOCK, BLOCK], []]),
        st.sampled_from(["", "block"])),
    "ElasticQuota": st.builds(
        lambda name, namespace, low, high, parent: (name, namespace, {
            "metadata": {"labels": {QUOTA_PARENT_LABEL: parent} if parent else {}},
            "spec": {"min": _gpus(low), "max": _gpus(low + high)}}),
        st.sampled_from(["qa", "qb"]), st.sampled_from(NAMESPACES), st.integers(0, 16), st.integers(0, 16),
        st.sampled_from(["", "qa"])),
    "CapacityElasticQuota": st.builds(
        lambda namespace, low, high: ("quota", namespace, {"spec": {"min": _gpus(low), "max": _gpus(low + high)}}),
        st.sampled_from(NAMESPACES), st.integers(0, 16), st.integers(0, 16)),
    "Queue": st.builds(
        lambda name, weight, cap, reclaimable, parent: (name, "", {"spec": {
            "weight": weight, "capability": _gpus(cap), "reclaimable": reclaimable,
            **({"parent": parent} if parent and parent != name else {})}}),
        st.sampled_from(["q0", "q1"]), st.integers(1, 4), st.integers(0, 24), st.booleans(),
        st.sampled_from(["", "q0"])),
    "KaiQueue": st.builds(
        lambda name, gpu, limit, parent: (name, "", {"spec": {
            "resources": {"cpu": {"quota": 0, "limit": -1, "overQuotaWeight": 1},
                          "memory": {"quota": 0, "limit": -1, "overQuotaWeight": 1},
                          "gpu": {"quota": gpu, "limit": limit, "overQuotaWeight": 1}},
            **({"parentQueue": parent} if parent and parent != name else {})}}),
        st.sampled_from(["kq0", "kq1"]), st.sampled_from([0, 8, -1, -3]), st.sampled_from([-1, 8, 24]),
        st.sampled_from(["", "kq0", "nowhere"])),
    "PodGroup": st.builds(
        lambda name, namespace, minimum, together: (name, namespace, {
            "metadata": {"annotations": {"gang.scheduling.koordinator.sh/groups": json.dumps(
                [f"{namespace}/g0", f"{namespace}/g1"])} if together else {}},
            "spec": {"minMember": minimum}}),
        st.sampled_from(["g0", "g1"]), st.sampled_from(NAMESPACES), st.integers(0, 3), st.booleans()),
    "VolcanoPodGroup": st.builds(
        lambda name, namespace, minimum, queue: (name, namespace, {"spec": {"minMember": minimum, "queue": queue}}),
        st.sampled_from(["v0", "v1"]), st.sampled_from(NAMESPACES), st.integers(1, 3), st.sampled_from(["q0", "q1"])),
    "SchedulerPluginsPodGroup": st.builds(
        lambda namespace, minimum: ("s0", namespace, {"spec": {"minMember": minimum}}),
        st.sampled_from(NAMESPACES), st.integers(1, 3)),
    "KubernetesPodGroup": st.builds(  # 1.36's and 1.37's shapes, read by the one type
        lambda namespace, minimum, keyed, extra: ("k0", namespace, {"spec": {
            "schedulingPolicy": {"gang": {"minCount": minimum}},
            **({"schedulingConstraints": {"topology": [{"key": RACK}]}} if keyed else {}), **extra}}),
        st.sampled_from(NAMESPACES), st.integers(1, 3), st.booleans(),
        st.fixed_dictionaries({}, optional={
            "disruptionMode": st.sampled_from(["Pod", "PodGroup", {"single": {}}, {"all": {}}]),
            "priorityClassName": st.sampled_from(["low", "high"]),
            "priority": st.sampled_from([0, 10, 1000]),
            "preemptionPolicy": st.sampled_from(["Never", "PreemptLowerPriority"]),
            "parentCompositePodGroupName": st.sampled_from(["composite", "c1"]),
        })),
    # 1.37's hierarchies above those PodGroups: a root, a middle one (or a cycle), every policy and key
    "CompositePodGroup": st.builds(
        lambda name, namespace, policy, keyed, extra: (name, namespace, {"spec": {
            "workloadRef": {"workloadName": "w0", "templateName": "root"}, "schedulingPolicy": policy,
            **({"schedulingConstraints": {"topology": [{"key": RACK}]}} if keyed else {}), **extra}}),
        st.sampled_from(["composite", "c1"]), st.sampled_from(NAMESPACES),
        st.sampled_from([{"gang": {"minGroupCount": 1}}, {"gang": {"minGroupCount": 2}}, {"basic": {}}]),
        st.booleans(),
        st.fixed_dictionaries({}, optional={
            "parentCompositePodGroupName": st.sampled_from(["composite", "c1"]),
            "priorityClassName": st.sampled_from(["low", "high"]),
            "disruptionMode": st.sampled_from([{"single": {}}, {"all": {}}]),
            "preemptionPolicy": st.sampled_from(["Never", "PreemptLowerPriority"]),
        })),
    "KaiPodGroup": st.builds(
        lambda namespace, minimum, level, topology, queue: ("kai0", namespace, {"spec": {
            "minMember": minimum, "topologyConstraint": {"topology": topology, "requiredTopologyLevel": level},
            **({"queue": queue} if queue else {})}}),
        st.sampled_from(NAMESPACES), st.integers(0, 3), st.sampled_from(["", RACK, "example.com/nowhere"]),
        st.sampled_from(["", "kt0", "kt1"]), st.sampled_from(["", "kq0", "kq1", "missing"])),
    "Workload": st.builds(
        lambda namespace, minimum: ("w0", namespace, {"spec": {"podGroups": [
            {"name": "workers", "policy": {"gang": {"minCount": minimum}}}]}}),
        st.sampled_from(NAMESPACES), st.integers(1, 3)),
    "StorageClass": st.builds(
        lambda name, mode, provisioner, zoned: (name, "", {
            "provisioner": provisioner, "volumeBindingMode": mode,
            **({"allowedTopologies": [{"matchLabelExpressions": [{"key": RACK, "values": ["r0"]}]}]} if zoned
               else {})}),
        st.sampled_from(["fast", "local"]), st.sampled_from(["Immediate", "WaitForFirstConsumer"]),
        st.sampled_from(["ebs.csi.aws.com", "kubernetes.io/no-provisioner"]), st.booleans()),
    "CSINode": st.builds(
        lambda name, count, other: (name, "", {"spec": {"drivers": [
            {"name": "ebs.csi.aws.com", "nodeID": f"i-{name}", **({"allocatable": {"count": count}}
                                                                 if count is not None else {})},
            *([{"name": other, "nodeID": f"i-{name}"}] if other else [])]}}),
        st.sampled_from(["n0", "n1", "n2"]), st.sampled_from([None, 0, 1, 2, -1]),
        st.sampled_from(["", "efs.csi.aws.com", "ebs.csi.aws.com"])),
    "PersistentVolume": st.builds(
        lambda index, namespace, node: (f"pv{index}", "", {
            "metadata": {"labels": {"topology.kubernetes.io/zone": "z1__z2"}},
            "spec": {"storageClassName": "fast", "claimRef": {"namespace": namespace, "name": f"c{index}"},
                     "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{index}"},
                     **({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchFields": [
                         {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}} if node else {})}}),
        st.integers(0, 1), st.sampled_from(NAMESPACES), st.sampled_from(["", "n0", "n1"])),
    "PersistentVolumeClaim": st.builds(
        lambda index, namespace, bound, storage_class: (f"c{index}", namespace, {
            "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"} if bound else {}},
            "spec": {"storageClassName": storage_class, **({"volumeName": f"pv{index}"} if bound else {})},
            "status": {"phase": "Bound" if bound else "Pending"}}),
        st.integers(0, 1), st.sampled_from(NAMESPACES), st.booleans(), st.sampled_from(["fast", "local", ""])),
    "PodDisruptionBudget": st.builds(
        lambda namespace, allowed, selected: ("serving", namespace, {
            "spec": {"selector": {"matchLabels": {"app": "serving"}} if selected else {}},
            "status": {"disruptionsAllowed": allowed,
                       "disruptedPods": {"p1": "2026-11-26T10:00:00Z"} if allowed else {}}}),
        st.sampled_from(NAMESPACES), st.integers(0, 2), st.booleans()),
    "VolcanoJob": st.builds(
        lambda index, namespace, scheduler: (f"j{index}", namespace, {"spec": {"schedulerName": scheduler}}),
        st.integers(0, 1), st.sampled_from(NAMESPACES), st.sampled_from(["toposched", "volcano", ""])),
}

# training-operator v1's job kinds, each with its own replica specs field; jobs of two kinds share names.
_REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs",
                  "XGBoostJob": "xgbReplicaSpecs", "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs"}
for _kind, _field in _REPLICA_SPECS.items():
    _DOCUMENTS[_kind] = st.builds(
        lambda index, namespace, scheduler, field=_field: (f"j{index}", namespace, {"spec": {field: {
            "Master": {"replicas": 1, "template": {"spec": {"schedulerName": scheduler}}},
            "Worker": {"replicas": 2, "template": {"spec": {}}}}}}),
        st.integers(0, 1), st.sampled_from(NAMESPACES), st.sampled_from(["toposched", "volcano", ""]))

# How a pod joins a gang: (labels, annotations, spec fields).
_MEMBERSHIPS: list[tuple[dict[str, str], dict[str, str], dict[str, Any]]] = [
    ({}, {}, {}),
    ({POD_GROUP_LABEL: "g0"}, {}, {}),
    ({POD_GROUP_LABEL: "g1"}, {}, {}),
    ({}, {VOLCANO_GROUP_ANNOTATION: "v0"}, {}),
    ({SCHEDULER_PLUGINS_POD_GROUP_LABEL: "s0"}, {}, {}),
    ({}, {}, {"schedulingGroup": {"podGroupName": "k0"}}),
    ({}, {}, {"workloadRef": {"name": "w0", "podGroup": "workers", "podGroupReplicaKey": "0"}}),
    ({}, {GANG_NAME_ANNOTATION: "ag", GANG_MIN_AVAILABLE_ANNOTATION: "2"}, {}),
    ({}, {KAI_POD_GROUP_ANNOTATION: "kai0"}, {}),
    ({KAI_QUEUE_LABEL: "kq1"}, {KAI_POD_GROUP_ANNOTATION: "kai0"}, {}),
    ({KAI_QUEUE_LABEL: "kq0"}, {}, {}),
]

_DOCUMENTS["Pod"] = st.builds(
    lambda index, namespace, membership, node, phase, priority_class, gpus, quota: (f"p{index}", namespace, {
        "metadata": {"labels": {**membership[0], **({QUOTA_NAME_LABEL: quota} if quota else {})},
                     "annotations": membership[1]},
        "spec": {"schedulerName": "toposched", "priorityClassName": priority_class, **membership[2],
                 **({"nodeName": node} if node else {}),
                 "containers": [{"name": "main", "resources": {"requests": _gpus(gpus)}}],
                 # kube-api-access volumes are dropped as decoded; claims (and ephemeral ones) are kept.
                 "volumes": [{"name": "kube-api-access-x1", "projected": {"sources": []}},
                             *([{"name": "data", "persistentVolumeClaim": {"claimName": f"c{index % 2}"}},
                                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
                               if index % 3 == 0 else [])]},
        "status": {"phase": phase}}),
    st.integers(0, 5), st.sampled_from(NAMESPACES), st.sampled_from(_MEMBERSHIPS),
    st.sampled_from(["", "", "n0", "n1", "n2"]), st.sampled_from(["Pending", "Running", "Succeeded"]),
    st.sampled_from(["", "high", "missing"]), st.sampled_from([1, 4, 8]), st.sampled_from(["", "qa", "qb"]))

# A version of some kinds that does not decode (its object is then marked broken until a good one comes).
_UNDECODABLE: dict[str, dict[str, Any]] = {
    "Queue": {"spec": {"weight": "heavy"}},
    "KaiQueue": {"spec": {"resources": {"gpu": {"limit": "lots"}}}},
    "KueueTopology": {"spec": {"levels": [{"nodeLabel": 7}]}},
    "KaiTopology": {"spec": {"levels": "racks"}},
    "KaiPodGroup": {"spec": {"minMember": "two"}},
    "CompositePodGroup": {"spec": {"schedulingPolicy": {"gang": {"minGroupCount": "two"}}}},
    "Pod": {"spec": {"containers": "not a list"}},
    "PodGroup": {"spec": {"minMember": "three"}},
    "Node": {"status": {"allocatable": ["not", "a", "map"]}},
    "PersistentVolumeClaim": {"spec": {"volumeName": 7}},
    "CSINode": {"spec": {"drivers": [{"name": "ebs.csi.aws.com", "allocatable": {"count": 2**64}}]}},
    "VolcanoJob": {"spec": {"schedulerName": 7}},
    "TFJob": {"spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"schedulerName": 7}}}}}},
}

_steps = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(sorted(_DOCUMENTS)), st.data()),
    st.tuples(st.just("delete"), st.sampled_from(sorted(_DOCUMENTS)), st.data()),
    st.tuples(st.just("undecodable"), st.sampled_from(sorted(_UNDECODABLE)), st.data()),
)


def _document(info: KindInfo, name: str, namespace: str, body: dict[str, Any], version: int) -> dict[str, Any]:
    extra = body.get("metadata", {})
    return {"apiVersion": info.api_version, "kind": info.kind, **body,
            "metadata": _meta(name, namespace if info.namespaced else "", version, **extra)}


@st.composite
def _histories(draw: st.DrawFn) -> list[Event]:
    events: list[Event] = []
    for version, (op, kind_name, data) in enumerate(draw(st.lists(_steps, min_size=8, max_size=60)), start=1):
        info = KIND_BY_NAME[kind_name]
        name, namespace, body = data.draw(_DOCUMENTS[kind_name])
        if op == "delete":
            events.append(delete_event(info, ObjectMeta(name=name, namespace=namespace if info.namespaced else "",
                                                        uid=f"uid-{namespace if info.namespaced else ''}-{name}")))
        elif op == "undecodable":
            events.append(upsert_event(info, {**_document(info, name, namespace, body, version),
                                              **_UNDECODABLE[kind_name]}))
        else:
            events.append(upsert_event(info, _document(info, name, namespace, body, version)))
    return events


def _held(state: ClusterState) -> list[tuple[KindInfo, Any]]:
    """Every object the state holds, with its kind."""
    quotas = state.quotas
    by_kind: dict[str, Any] = {
        "Node": [info.obj for info in state.nodes.values()],
        "Pod": [pod.obj for pod in state.pods.values() if not pod.removed],
        "PodGroup": state.pod_groups.values(),
        "VolcanoPodGroup": state.volcano_pod_groups.values(),
        "SchedulerPluginsPodGroup": state.scheduler_plugins_pod_groups.values(),
        "KubernetesPodGroup": state.kube_pod_groups.values(),
        "CompositePodGroup": state.composite_pod_groups.values(),
        "Workload": state.workloads.values(),
        "ClusterNetworkTopology": state.network_topologies.values(),
        "HyperNode": state.hyper_nodes.values(),
        "KueueTopology": state.kueue_topologies.values(),
        "KaiTopology": state.kai_topologies.values(),
        "KaiPodGroup": state.kai_pod_groups.values(),
        "PriorityClass": state.priority_classes.values(),
        "ElasticQuota": quotas.elastic_quotas.values(),
        "CapacityElasticQuota": quotas.capacity_quotas.values(),
        "Queue": quotas.queues.values(),
        "KaiQueue": quotas.kai_queues.values(),
        "StorageClass": state.volumes.classes.values(),
        "CSINode": state.volumes.csi_nodes.values(),
        "PersistentVolume": state.volumes.volumes.values(),
        "PersistentVolumeClaim": state.volumes.claims.values(),
        "PodDisruptionBudget": [budget for budgets in state.budgets.values() for budget in budgets.values()],
        "VolcanoJob": state.volcano_jobs.values(),
        **{kind: [job for (held, _), job in state.kubeflow_jobs.items() if held == kind] for kind in _REPLICA_SPECS},
    }
    assert set(by_kind) == {info.name for info in KINDS}
    return [(KIND_BY_NAME[name], obj) for name, objects in by_kind.items() for obj in list(objects)]


def _listed(info: KindInfo, obj: Any, version_suffix: str = "") -> Event:
    """An upsert of `obj` as a list would bring it: its JSON, decoded afresh (optionally a later version)."""
    document = msgspec.to_builtins(obj)
    document["metadata"]["resourceVersion"] += version_suffix
    return upsert_event(info, msgspec.json.encode(document))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_histories())
def test_every_kind_held_unchanged_is_recognized_and_folding_it_again_changes_nothing(events: list[Event]) -> None:
    state = ClusterState()
    state.apply_all(events)
    for info, obj in _held(state):
        listed = _listed(info, obj)
        subject = subject_of(listed)
        broken = subject in state.fold_failures or subject in state.undecodable
        if info.name == "Pod":  # which pods are left out is the other property test's (decisions undone)
            recognized = state.holds_unchanged(listed)
            assert not (recognized and broken)
        else:
            recognized = state.holds_unchanged(listed)
            assert recognized == (not broken), (info.name, subject, broken)
        assert not state.holds_unchanged(_listed(info, obj, "1")), (info.name, subject)
        if recognized:
            before = state.canonical()
            state.apply(listed)
            assert state.canonical() == before, (info.name, subject)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_histories(), st.integers(0, 60))
def test_every_kind_restores_from_a_snapshot_and_folds_from_the_log_as_it_folded_live(events: list[Event],
                                                                                     cut: int) -> None:
    """What a restart rebuilds (a snapshot of the first `cut` events, then the rest of the log decoded from
    its records) is the state folding every event live gave, for histories of every kind."""
    events = [with_seq(event, seq) for seq, event in enumerate(events, start=1)]
    cut = min(cut, len(events))
    live = ClusterState()
    live.apply_all(events)
    head = ClusterState()
    head.apply_all(events[:cut])
    resumed = ClusterState.restore(head.snapshot())
    resumed.fold_records((event.seq, encode_event(event)) for event in events[cut:])
    assert resumed.canonical() == live.canonical()
