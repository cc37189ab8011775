"""A relist may leave out what the state holds unchanged (`ClusterState.holds_unchanged`): folding such an
upsert again changes nothing, whatever the state's history; every kind of object is recognized; and a
version that differs, or an object marked broken, is never left out."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings

from events.ingest import KINDS, upsert_event
from events.model import Event, NodeUpserted, ObjectUndecodable, PodGroupUpserted, PodUpserted, PriorityClassUpserted
from state.cluster import ClusterState
from tests.property.test_fold_properties import events_strategy
from tests.property.test_snapshot_tables import histories


def _copy(obj: Any) -> Any:
    """An equal object that shares nothing with `obj` (as a relist decodes it afresh)."""
    return msgspec.msgpack.decode(msgspec.msgpack.encode(obj), type=type(obj))


def _relist(state: ClusterState) -> list[Event]:
    """An upsert of a fresh copy of every node, pod, PodGroup and PriorityClass the state holds."""
    return [
        *(NodeUpserted(node=_copy(info.obj)) for info in state.nodes.values()),
        *(PodUpserted(pod=_copy(pod.obj)) for pod in state.pods.values()),
        *(PodGroupUpserted(pod_group=_copy(group)) for group in state.pod_groups.values()),
        *(PriorityClassUpserted(priority_class=_copy(pc)) for pc in state.priority_classes.values()),
    ]


def _renewed(event: Event) -> Event:
    """The same upsert with the object one resourceVersion later (what any write to it gives)."""
    for field in ("node", "pod", "pod_group", "priority_class"):
        obj = getattr(event, field, None)
        if obj is not None:
            meta = msgspec.structs.replace(obj.metadata, resource_version=obj.metadata.resource_version + "1")
            return msgspec.structs.replace(event, **{field: msgspec.structs.replace(obj, metadata=meta)})
    raise AssertionError(event)


@settings(max_examples=150, deadline=None)
@given(histories)
def test_folding_again_what_the_state_holds_unchanged_changes_nothing(events: list[Event]) -> None:
    _relisted_after(events)


@settings(max_examples=150, deadline=None)
@given(events_strategy)
def test_folding_again_what_the_state_holds_unchanged_changes_nothing_after_any_decisions(
        events: list[Event]) -> None:
    _relisted_after(events)  # forgotten, failed and cleared decisions too, pods re-created under new uids


def _relisted_after(events: list[Event]) -> None:
    state = ClusterState()
    state.apply_all(events)
    for event in _relist(state):
        if isinstance(event, PodUpserted):
            pod = state.pods[f"{event.pod.metadata.namespace}/{event.pod.metadata.name}"]
            obj = pod.obj
            # Left out only what folding again leaves as it is: not a removed or broken pod, nor one whose
            # API version would undo a decision of ours (what we assumed or bound of a bound pod; the API's
            # nominatedNodeName over ours); every other pod held as the API shows it is recognized.
            undone = (obj.spec.node_name and (pod.bound_at is None or pod.assumed_node or pod.bound_node)) or (
                obj.status.nominated_node_name not in ("", pod.nominated_node) and not pod.node_name)
            assert state.holds_unchanged(event) == (not pod.removed and not pod.broken and not undone)
        else:
            assert state.holds_unchanged(event)
        assert not state.holds_unchanged(_renewed(event))
        if state.holds_unchanged(event):
            before = state.canonical()
            state.apply(event)
            assert state.canonical() == before


def _minimal(kind: Any, version: str) -> bytes:
    metadata = {"name": "x", "uid": "u1", "resourceVersion": version}
    if kind.namespaced:
        metadata["namespace"] = "default"
    return json.dumps({"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata}).encode()


def test_every_kind_the_watch_lists_is_recognized_held_unchanged_until_its_version_changes() -> None:
    for kind in KINDS:
        state = ClusterState()
        folded = upsert_event(kind, _minimal(kind, "5"))
        assert not isinstance(folded, ObjectUndecodable), (kind.name, folded)
        assert not state.holds_unchanged(folded)  # not held yet
        state.apply(folded)
        assert state.holds_unchanged(upsert_event(kind, _minimal(kind, "5"))), kind.name
        assert not state.holds_unchanged(upsert_event(kind, _minimal(kind, "6"))), kind.name


def test_an_object_whose_later_version_did_not_decode_is_never_left_out() -> None:
    pod_kind = next(kind for kind in KINDS if kind.name == "Pod")
    state = ClusterState()
    state.apply(upsert_event(pod_kind, _minimal(pod_kind, "5")))
    broken = json.loads(_minimal(pod_kind, "6"))
    broken["spec"] = {"containers": "not a list"}
    undecodable = upsert_event(pod_kind, json.dumps(broken).encode())
    assert isinstance(undecodable, ObjectUndecodable)
    state.apply(undecodable)
    # while the pod is marked broken even a version equal to the one held is folded (that is what clears the mark)
    listed = upsert_event(pod_kind, _minimal(pod_kind, "5"))
    assert not state.holds_unchanged(listed)
    state.apply(listed)
    assert state.pods["default/x"].broken == "" and state.holds_unchanged(listed)
