"""Objects are slimmed as they are decoded: only the annotations toposched reads reach the log and memory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec

from events.builders import node, pod
from events.ingest import KIND_BY_NAME, decode_object, upsert_event
from events.model import NodeUpserted, ObjectUndecodable, PodUpserted, decode_event, encode_event
from events.objects import (
    CONDITION_MESSAGE_LIMIT,
    GANG_GROUPS_ANNOTATION,
    KEPT_ANNOTATIONS,
    NETWORK_TOPOLOGY_INDEX_ANNOTATION,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    OVERSIZED_ANNOTATION,
    POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    ContainerPort,
    Pod,
    keeps_annotation,
    node_core,
    pod_core,
    slim,
)
from events.scenario import AT_ANNOTATION, DELETE_AT_ANNOTATION, RUNTIME_ANNOTATION

REPO = Path(__file__).resolve().parents[3]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def api_pod_json(*, annotation_bytes: int) -> bytes:
    """A pod as the API serves it after `kubectl apply`: managedFields, last-applied, a big tool annotation."""
    spec = {
        "schedulerName": "toposched",
        "containers": [{"name": "main", "image": "trainer:1", "resources": {"requests": {"nvidia.com/gpu": "8"}}}],
    }
    metadata = {
        "name": "big", "namespace": "ml", "uid": "u-big", "resourceVersion": "7",
        "labels": {POD_GROUP_LABEL: "train", "app": "trainer"},
        "annotations": {
            "example.com/tool-state": "x" * annotation_bytes,
            VOLCANO_GROUP_ANNOTATION: "train",
            NETWORK_TOPOLOGY_INDEX_ANNOTATION: "3",
        },
        "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {"x": "y" * 1000}}}],
    }
    applied = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    metadata["annotations"][LAST_APPLIED] = applied  # type: ignore[index]
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
                       "status": {"phase": "Pending"}}).encode()


def test_a_pod_with_a_megabyte_annotation_is_logged_in_a_few_hundred_bytes() -> None:
    raw = api_pod_json(annotation_bytes=1_000_000)
    assert len(raw) > 2_000_000  # the tool's annotation, and its copy inside last-applied-configuration
    event = upsert_event(KIND_BY_NAME["Pod"], raw)
    assert isinstance(event, PodUpserted)
    assert event.pod.metadata.annotations == {VOLCANO_GROUP_ANNOTATION: "train", NETWORK_TOPOLOGY_INDEX_ANNOTATION: "3"}
    assert event.pod.metadata.labels == {POD_GROUP_LABEL: "train", "app": "trainer"}
    assert len(encode_event(event)) < 600


def test_slim_keeps_every_annotation_toposched_reads_and_the_simulation_ones() -> None:
    kept = {key: "v" for key in [*KEPT_ANNOTATIONS, AT_ANNOTATION, RUNTIME_ANNOTATION, DELETE_AT_ANNOTATION]}
    obj = pod("p", annotations={**kept, LAST_APPLIED: "{}", "example.com/other": "x"})
    assert slim(obj).metadata.annotations == kept


def test_slim_returns_the_same_object_when_nothing_is_dropped() -> None:
    plain = pod("p", annotations={GANG_GROUPS_ANNOTATION: "[]"})
    assert slim(plain) is plain
    bare = pod("q")
    assert slim(bare) is bare


def test_a_pending_pod_keeps_what_a_scheduler_last_said_of_it_and_a_bound_pod_no_condition() -> None:
    """Its PodScheduled=False is what the pending-pod condition writer compares with and keeps the transition time
    of; every other condition (the kubelet's) is dropped, and all of them once the pod is bound."""
    said = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "gang ml/big: no room",
            "lastTransitionTime": "2026-11-27T10:00:00Z", "lastProbeTime": None}
    ready = {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-27T10:00:00Z"}
    document = json.loads(api_pod_json(annotation_bytes=10))
    document["status"]["conditions"] = [ready, said]
    pending = decode_object(KIND_BY_NAME["Pod"], document)
    assert isinstance(pending, Pod)
    assert [(c.type, c.status, c.reason, c.message, c.last_transition_time) for c in pending.status.conditions] == [
        ("PodScheduled", "False", "Unschedulable", "gang ml/big: no room", "2026-11-27T10:00:00Z")]
    document["status"]["conditions"] = [{**said, "message": "x" * 100_000}]
    long = decode_object(KIND_BY_NAME["Pod"], document)
    assert isinstance(long, Pod)
    assert long.status.conditions[0].message == "x" * (CONDITION_MESSAGE_LIMIT + 1)  # still unlike any we write
    document["status"]["conditions"] = [{**said, "status": "True", "reason": ""}]
    assert decode_object(KIND_BY_NAME["Pod"], document).status.conditions == []  # type: ignore[union-attr]
    document["spec"]["nodeName"] = "node-1"
    document["status"]["conditions"] = [said, ready]
    assert decode_object(KIND_BY_NAME["Pod"], document).status.conditions == []  # type: ignore[union-attr]


def test_an_api_object_cannot_claim_the_oversized_marker() -> None:
    decoded = decode_object(KIND_BY_NAME["Pod"], msgspec.to_builtins(pod("p", annotations={OVERSIZED_ANNOTATION: "x"})))
    assert isinstance(decoded, Pod)
    assert OVERSIZED_ANNOTATION not in decoded.metadata.annotations


def _annotation_constants() -> dict[str, str]:
    """Every NAME_ANNOTATION = "..." constant in the code (the annotations some part of toposched reads)."""
    found: dict[str, str] = {}
    pattern = re.compile(r'^([A-Z_]*ANNOTATION[A-Z_]*)\s*(?::\s*\w+\s*)?=\s*"([^"]+)"', re.MULTILINE)
    for package in ("events", "state", "placement", "preemption", "daemon"):
        for path in (REPO / package).rglob("*.py"):
            for name, value in pattern.findall(path.read_text(encoding="utf-8")):
                found[f"{path.relative_to(REPO)}:{name}"] = value
    return found


def test_every_annotation_the_code_reads_survives_slimming() -> None:
    constants = _annotation_constants()
    assert NETWORK_TOPOLOGY_SPEC_ANNOTATION in constants.values()  # the scan sees the constants
    dropped = {where: value for where, value in constants.items()
               if not keeps_annotation(value) and value != OVERSIZED_ANNOTATION}
    assert not dropped, f"annotations read by the code but dropped by events.objects.slim: {dropped}"


def test_every_annotation_literal_the_code_looks_up_survives_slimming() -> None:
    lookup = re.compile(r'annotations(?:\.get\(|\[)\s*"([^"]+)"')
    for package in ("events", "state", "placement", "preemption", "daemon"):
        for path in (REPO / package).rglob("*.py"):
            for value in lookup.findall(path.read_text(encoding="utf-8")):
                assert keeps_annotation(value), f"{path}: reads annotation {value!r}, which slim() drops"


def test_a_pod_core_keeps_what_accounting_needs_and_nothing_that_places_it() -> None:
    original = pod("p", gpus=4, node_name="n1", priority=7, labels={"big": "x" * 100}, gang="g")
    core = pod_core(original, "too big")
    assert core.metadata.annotations == {OVERSIZED_ANNOTATION: "too big"}
    assert (core.metadata.name, core.metadata.namespace, core.metadata.uid) == ("p", "default", "uid-default-p")
    assert core.spec.node_name == "n1" and core.spec.priority == 7
    assert core.spec.containers[0].resources.requests == original.spec.containers[0].resources.requests
    assert core.metadata.labels == {}


def test_a_pod_core_keeps_the_host_ports_its_pod_holds() -> None:
    original = pod("p", gpus=1, node_name="n1")
    held = [ContainerPort(host_port=9100, protocol="UDP", host_ip="10.0.0.1"), ContainerPort()]  # a plain port too
    original = msgspec.structs.replace(original, spec=msgspec.structs.replace(original.spec, containers=[
        msgspec.structs.replace(original.spec.containers[0], ports=held)]))
    assert pod_core(original, "too big").spec.containers[0].ports == held[:1]


def test_a_node_core_keeps_allocatable_and_is_unschedulable() -> None:
    original = node("n1", gpus=8, block="b1")
    core = node_core(original, "too big")
    assert core.status.allocatable == original.status.allocatable
    assert core.spec.unschedulable and core.metadata.labels == {}
    assert core.metadata.annotations == {OVERSIZED_ANNOTATION: "too big"}


def test_records_written_before_the_fields_were_dropped_still_read() -> None:
    """Logs and snapshots written when images, limits, owner references and node capacity were still
    decoded hold those fields: they decode as before, the fields ignored."""
    old_pod = {
        "t": "pod", "seq": 7, "time": 1.5,
        "pod": {"metadata": {"name": "p", "namespace": "ml", "uid": "u", "generation": 3,
                             "creationTimestamp": "2026-01-01T00:00:00Z",
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "x"}]},
                "spec": {"schedulerName": "toposched", "containers": [
                    {"name": "c", "image": "trainer:1",
                     "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}},
    }
    old_node = {"t": "node", "node": {"metadata": {"name": "n"},
                                      "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}}}}
    pod_event = decode_event(msgspec.msgpack.encode(old_pod))
    node_event = decode_event(msgspec.msgpack.encode(old_node))
    assert isinstance(pod_event, PodUpserted) and pod_event.seq == 7
    assert pod_event.pod.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1"}
    assert isinstance(node_event, NodeUpserted) and node_event.node.status.allocatable == {"cpu": "8"}


def test_an_object_says_the_api_version_and_kind_of_the_endpoint_it_came_from() -> None:
    # kube-apiserver writes neither on a list's items of a built-in kind (kubernetes/kubernetes#3030); a
    # scheduler-plugins PodGroup shares its Struct with the Koordinator one, whose group its default names.
    listed_pod = json.dumps({"metadata": {"name": "p", "namespace": "default", "uid": "u"}}).encode()
    listed_group = json.dumps({"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}).encode()
    cases = (("Pod", listed_pod, ("v1", "Pod")),
             ("SchedulerPluginsPodGroup", listed_group, ("scheduling.x-k8s.io/v1alpha1", "PodGroup")),
             ("PodGroup", listed_group, ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup")))
    for name, raw, expected in cases:
        decoded = decode_object(KIND_BY_NAME[name], raw)
        assert not isinstance(decoded, ObjectUndecodable)
        assert (decoded.api_version, decoded.kind) == expected, name
        assert decode_object(KIND_BY_NAME[name], msgspec.json.decode(raw)) == decoded  # a parsed dict alike
