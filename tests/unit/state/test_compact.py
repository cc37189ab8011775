"""The state holds each value its objects share once, and sharing never changes a value."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import node, node_event, pod, pod_event
from events.model import NodeUpserted, PodUpserted, decode_event, encode_event
from events.objects import Condition, Pod, PodStatus, Toleration
from events.parts import PodUpsertedParts, decode_parts
from state.cluster import ClusterState
from state.compact import Compactor


def decoded(p: Pod) -> Pod:
    """The pod as the fold gets it: decoded from a record, every part its own object."""
    event = decode_event(encode_event(pod_event(p)))
    assert isinstance(event, PodUpserted)
    return event.pod


def test_pods_asking_the_same_share_one_container_one_requests_vector_and_their_strings() -> None:
    state = ClusterState()
    state.apply(node_event(node("n1")))
    for index in range(3):
        state.apply(decode_event(encode_event(pod_event(pod(f"p{index}", namespace="ml", gpus=2, gang="g")))))
    first, second = state.pods["ml/p0"], state.pods["ml/p1"]
    assert first.obj.spec.containers is second.obj.spec.containers
    assert first.requests is second.requests and first.requests["nvidia.com/gpu"] == 2000
    assert first.obj.metadata.namespace is second.obj.metadata.namespace
    assert first.obj.metadata.labels is second.obj.metadata.labels  # the same gang label
    assert first.obj.spec.scheduler_name is second.obj.spec.scheduler_name
    # the list fields a pod nearly never fills: one shared empty list, not one per pod
    for field in ("tolerations", "init_containers", "scheduling_gates", "topology_spread_constraints",
                  "resource_claims"):
        assert getattr(first.obj.spec, field) is getattr(second.obj.spec, field) == [], field


def test_a_pod_with_a_bad_request_does_not_share_its_vector() -> None:
    state = ClusterState()
    bad = msgspec.structs.replace(pod("bad"), spec=msgspec.structs.replace(
        pod("bad").spec, containers=[msgspec.structs.replace(
            pod("bad").spec.containers[0], resources=msgspec.structs.replace(
                pod("bad").spec.containers[0].resources, requests={"cpu": "lots"}))]))
    state.apply(pod_event(bad))
    state.apply(pod_event(pod("good")))
    assert state.pods["default/bad"].requests is not state.pods["default/good"].requests


names = st.text(alphabet="abcdefghij-./", min_size=0, max_size=12)
conditions = st.lists(st.builds(
    Condition, type=st.sampled_from(["PodScheduled", "Ready"]), status=st.sampled_from(["False", "True"]),
    reason=st.sampled_from(["", "Unschedulable"]), message=names,
    last_transition_time=st.sampled_from([None, "2026-11-27T10:00:00Z"]),
    observed_generation=st.integers(0, 2**63 - 1)), max_size=2)
pods = st.builds(
    lambda name, labels, requests, tolerations, node_name, annotations, generation, conditions: msgspec.structs.replace(
        pod(name or "p", labels=labels, annotations=annotations, node_name=node_name),
        metadata=msgspec.structs.replace(
            pod(name or "p", labels=labels, annotations=annotations, node_name=node_name).metadata,
            generation=generation),
        status=PodStatus(phase="Pending", conditions=conditions),
        spec=msgspec.structs.replace(
            pod(name or "p", node_name=node_name).spec,
            tolerations=[Toleration(key=k, operator="Exists", effect=e) for k, e in tolerations],
            containers=[msgspec.structs.replace(pod("x").spec.containers[0], resources=msgspec.structs.replace(
                pod("x").spec.containers[0].resources, requests=requests))])),
    names,
    st.dictionaries(names, names, max_size=4),
    st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.sampled_from(["1", "2", "500m"]),
                    max_size=3),
    st.lists(st.tuples(names, st.sampled_from(["NoSchedule", ""])), max_size=2),
    st.sampled_from(["", "n1", "n2"]),
    st.dictionaries(st.sampled_from(["scheduling.k8s.io/group-name", "x"]), names, max_size=2),
    st.integers(0, 2**63 - 1),
    conditions,
)


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(pods, min_size=1, max_size=8))
def test_compacting_never_changes_a_value(batch: list[Pod]) -> None:
    compactor = Compactor()
    for original in batch:
        copy = decoded(original)
        compactor.pod(copy)
        assert copy == original
        assert msgspec.msgpack.encode(copy) == msgspec.msgpack.encode(original)
    node_copy = decode_event(encode_event(node_event(node("n1", block="b1"))))
    assert isinstance(node_copy, NodeUpserted)
    compactor.node(node_copy.node)
    assert node_copy == node_event(node("n1", block="b1"))


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(pods, min_size=1, max_size=8))
def test_decoding_a_record_in_parts_gives_the_event_decoded_whole(batch: list[Pod]) -> None:
    compactor = Compactor()
    for original in batch * 2:  # the second time round, every part comes from the tables
        payload = encode_event(pod_event(original, time=2.0))
        record = decode_parts(payload)
        assert isinstance(record, PodUpsertedParts)
        built = compactor.pod_of(record.pod)
        event = PodUpserted(pod=built, seq=record.seq, time=record.time) if built is not None else None
        assert event == decode_event(payload)
        assert encode_event(event) == payload
        assert compactor.built is built
    other = encode_event(node_event(node("n1")))
    assert decode_parts(other) == decode_event(other)


def test_pods_decoded_in_parts_share_their_spec_and_derive_once() -> None:
    state = ClusterState()
    state.fold_records(enumerate([encode_event(node_event(node("n1"))), *(encode_event(pod_event(
        pod(f"p{index}", namespace="ml", gpus=2, gang="g"))) for index in range(3))]))
    first, second = state.pods["ml/p0"], state.pods["ml/p1"]
    assert first.obj.spec is second.obj.spec and first.obj.status is second.obj.status
    assert first.obj.metadata.labels is second.obj.metadata.labels
    assert first.requests is second.requests and first.gang == second.gang == "ml/g"
    whole = ClusterState()
    for payload in (encode_event(node_event(node("n1"))), *(encode_event(pod_event(
            pod(f"p{index}", namespace="ml", gpus=2, gang="g"))) for index in range(3))):
        whole.apply(decode_event(payload))
    assert state.canonical() == whole.canonical()


def test_a_record_whose_spec_does_not_validate_is_refused_as_when_decoded_whole() -> None:
    bad = msgspec.msgpack.encode({"t": "pod", "pod": {"metadata": {"name": "p"}, "spec": {"priority": "high"}}})
    with pytest.raises(msgspec.ValidationError):
        decode_event(bad)
    with pytest.raises(msgspec.ValidationError):
        record = decode_parts(bad)
        assert isinstance(record, PodUpsertedParts)
        Compactor().pod_of(record.pod)
