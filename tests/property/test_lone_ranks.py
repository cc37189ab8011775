"""The lone-pod descent's ranks kept between calls (`placement/lone.py`, `RankTable`) never change its answer.

Random folds on a small fabric (the events of the offerslot table's property test: nodes re-upserted
with other GPUs, taints, spec.unschedulable, deleted and re-added; pods bound, assumed, nominated,
forgotten, deleted) with lone pods of a few sizes pending; after every event each lone pod is planned
with the ranks carried over from the previous step and again from scratch (no kept ranks), with and
without random pods treated as gone: both plans, reasons included, are the same.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import pod, pod_event
from events.model import Event, with_seq
from placement import plan_pod
from placement.lone import CACHE_KEY
from state.cluster import ClusterState
from tests.property.test_slot_table import PODS, events_strategy

LONE = [f"default/lone-{gpus}" for gpus in (1, 2, 8)]


@settings(max_examples=150, deadline=None)
@given(events_strategy, st.lists(st.sampled_from([f"default/{p}" for p in PODS]), max_size=2), st.data())
def test_kept_ranks_plan_what_a_fresh_descent_plans(events: list[Event], ignored: list[str],
                                                   data: st.DataObject) -> None:
    state = ClusterState()
    lone = [with_seq(pod_event(pod(key.split("/")[1], gpus=int(key.rsplit("-", 1)[1]))), 10_000 + index)
            for index, key in enumerate(LONE)]
    for event in [*events[:1], *lone, *events[1:]]:
        state.apply(event)
        ignore = frozenset(ignored) if data.draw(st.booleans()) else frozenset()
        for key in LONE:
            kept = plan_pod(state, key, ignore_pods=ignore)
            table = state.reader_caches.pop(CACHE_KEY, None)
            fresh = plan_pod(state, key, ignore_pods=ignore)
            if table is not None:
                state.reader_caches[CACHE_KEY] = table
            assert kept == fresh, key
