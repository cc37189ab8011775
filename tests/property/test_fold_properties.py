"""Properties of the fold that must hold for any sequence of events."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import (
    BindFailed,
    Event,
    NodeDeleted,
    NominationCleared,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    with_seq,
)
from state.cluster import ClusterState
from state.resources import add_into

NODES = [f"n{i}" for i in range(4)]
PODS = [f"p{i}" for i in range(6)]
GANGS = ["g0", "g1"]


def _pod_events() -> st.SearchStrategy[Event]:
    return st.builds(
        lambda name, gpus, node_name, phase, gang, uid: pod_event(
            bound(pod(name, gpus=gpus, gang=gang, uid=uid), node_name, phase) if node_name
            else pod(name, gpus=gpus, gang=gang, uid=uid, phase=phase)),
        st.sampled_from(PODS), st.integers(0, 8), st.sampled_from(["", *NODES]),
        st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]), st.sampled_from([None, *GANGS]),
        st.sampled_from(["u1", "u2"]),
    )


def _decision_events() -> st.SearchStrategy[Event]:
    key = st.sampled_from([f"default/{p}" for p in PODS])
    uid = st.sampled_from(["u1", "u2", ""])
    where = st.sampled_from(NODES)
    return st.one_of(
        st.builds(lambda k, u, n: PodAssumed(pod=k, uid=u, node=n), key, uid, where),
        st.builds(lambda k, u: PodForgotten(pod=k, uid=u), key, uid),
        st.builds(lambda k, u, n: PodBound(pod=k, uid=u, node=n), key, uid, where),
        st.builds(lambda k, u, n: BindFailed(pod=k, uid=u, node=n, reason="x"), key, uid, where),
        st.builds(lambda k, u, n, p: PodNominated(pod=k, uid=u, node=n, priority=p), key, uid, where,
                  st.integers(0, 3)),
        st.builds(lambda k: NominationCleared(pod=k), key),
        st.builds(lambda k, u: PodDeleted(key=k, uid=u), key, uid),
    )


events_strategy = st.lists(
    st.one_of(
        st.builds(lambda n, g: node_event(node(n, gpus=g)), st.sampled_from(NODES), st.integers(0, 16)),
        st.builds(lambda n: NodeDeleted(name=n), st.sampled_from(NODES)),
        st.builds(lambda g, m: group_event(pod_group(g, min_member=m)), st.sampled_from(GANGS), st.integers(-1, 4)),
        _pod_events(),
        _decision_events(),
    ),
    max_size=60,
).map(lambda evs: [with_seq(e, i + 1) for i, e in enumerate(evs)])


def _fold(events: list[Event]) -> ClusterState:
    state = ClusterState()
    state.apply_all(events)
    return state


@given(events_strategy, st.integers(0, 60))
def test_snapshot_plus_tail_folds_to_the_same_state_as_from_the_start(events: list[Event], cut: int) -> None:
    cut = min(cut, len(events))
    head = _fold(events[:cut])
    resumed = ClusterState.restore(head.snapshot())
    resumed.apply_all(events[cut:])
    assert resumed.canonical() == _fold(events).canonical()


@given(events_strategy)
def test_usage_is_never_negative_and_equals_a_recount(events: list[Event]) -> None:
    state = ClusterState()
    for event in events:
        state.apply(event)
        for info in state.nodes.values():
            recount: dict[str, int] = {}
            for key in info.pods:
                add_into(recount, state.pods[key].requests)
            assert {k: v for k, v in info.used.items() if v} == {k: v for k, v in recount.items() if v}
            assert all(amount >= 0 for amount in info.used.values())
        for key, pod_info in state.pods.items():
            placed = pod_info.placed_node
            if pod_info.counted_on:
                assert placed == pod_info.counted_on and key in state.nodes[placed].pods
            assert (key in state.pending) == pod_info.pending


@given(events_strategy)
def test_fold_is_deterministic(events: list[Event]) -> None:
    assert _fold(events).canonical() == _fold(events).canonical()
