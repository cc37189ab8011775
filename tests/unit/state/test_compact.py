"""The state holds each value its objects share once, and sharing never changes a value."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import node, node_event, pod, pod_event
from events.model import NodeUpserted, PodUpserted, decode_event, encode_event
from events.objects import Pod, Toleration
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
pods = st.builds(
    lambda name, labels, requests, tolerations, node_name, annotations: msgspec.structs.replace(
        pod(name or "p", labels=labels, annotations=annotations, node_name=node_name),
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
