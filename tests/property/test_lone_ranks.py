"""The lone-pod descent's ranks kept between calls (`placement/lone.py`, `RankTable`) never change its answer.

Random folds on a small fabric (the events of the offerslot table's property test: nodes re-upserted
with other GPUs, taints, spec.unschedulable, deleted and re-added; pods bound, assumed, nominated,
forgotten, deleted), plus nodes hanging loose in the spine and under the root and pods bound to and
taken off them, with lone pods of a few sizes pending; after every event each lone pod is planned
with the ranks carried over from the previous step and again from scratch (no kept ranks), with and
without random pods treated as gone: both plans, reasons included, are the same.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, node, node_event, pod, pod_event
from events.model import Event, PodDeleted, with_seq
from placement import plan_pod
from placement.lone import CACHE_KEY
from state.cluster import ClusterState
from tests.property.test_slot_table import PODS, events_strategy

LONE = [f"default/lone-{gpus}" for gpus in (1, 2, 8)]
LOOSE_NODES = {"loose-s0": "s0", "loose-root": None}  # in spine s0 beside its blocks; under the root


def _loose_node(name: str, gpus: int) -> Event:
    return node_event(node(name, gpus=gpus, spine=LOOSE_NODES[name]))


def _loose_pod(index: int, gpus: int, where: str) -> Event:
    name = f"q{index}"
    if not where:
        return PodDeleted(key=f"default/{name}", uid=f"uid-default-{name}")
    return pod_event(bound(pod(name, gpus=gpus), where))


loose_events = st.lists(st.one_of(
    st.builds(_loose_node, st.sampled_from(sorted(LOOSE_NODES)), st.sampled_from([4, 8])),
    st.builds(_loose_pod, st.integers(0, 2), st.sampled_from([1, 4, 8]), st.sampled_from(["", *sorted(LOOSE_NODES)])),
), max_size=12)


@settings(max_examples=150, deadline=None)
@given(events_strategy, loose_events, st.lists(st.sampled_from([f"default/{p}" for p in PODS]), max_size=2),
       st.data())
def test_kept_ranks_plan_what_a_fresh_descent_plans(events: list[Event], loose: list[Event], ignored: list[str],
                                                   data: st.DataObject) -> None:
    state = ClusterState()
    lone = [with_seq(pod_event(pod(key.split("/")[1], gpus=int(key.rsplit("-", 1)[1]))), 10_000 + index)
            for index, key in enumerate(LONE)]
    events = [*events[:1], *lone, *events[1:]]
    for event in loose:  # each at a random place after the first
        events.insert(data.draw(st.integers(1, len(events))), with_seq(event, 20_000 + len(events)))
    for event in events:
        state.apply(event)
        ignore = frozenset(ignored) if data.draw(st.booleans()) else frozenset()
        for key in LONE:
            kept = plan_pod(state, key, ignore_pods=ignore)
            table = state.reader_caches.pop(CACHE_KEY, None)
            fresh = plan_pod(state, key, ignore_pods=ignore)
            if table is not None:
                state.reader_caches[CACHE_KEY] = table
            assert kept == fresh, key
