"""`python -m bench.daemon` says where the gang's time went, read from the daemon's event log."""

from __future__ import annotations

import pytest

from bench.daemon import gang_stages
from events.builders import pod
from events.model import BindRequested, Event, GangPlanned, PodAssumed, PodBound, PodUpserted


def upserted(name: str, at: float, gang: str = "big", namespace: str = "bench") -> PodUpserted:
    obj = pod(name, namespace=namespace, gang=gang)
    return PodUpserted(pod=obj, time=at)


def test_the_gang_s_stages_are_its_arrival_its_placing_and_its_bindings() -> None:
    events: list[Event] = [
        upserted("other", 0.5, gang="small"),  # another gang's pod, before and after: not counted
        upserted("big-0", 1.0), upserted("big-1", 1.1), upserted("big-2", 1.25),
        upserted("big-0", 1.3),  # a later update of a member: it was seen at 1.0
        GangPlanned(gang="bench/big", domain="spine-0", layer="SpineLayer", pods=3, time=1.28),
        *(PodAssumed(pod=f"bench/big-{i}", uid="u", node=f"n{i}", time=1.29) for i in range(3)),
        *(BindRequested(pod=f"bench/big-{i}", uid="u", node=f"n{i}", time=1.3) for i in range(3)),
        BindRequested(pod="bench/other", uid="u", node="n9", time=2.0),
        PodBound(pod="bench/big-1", uid="u", node="n1", time=1.4),
        PodBound(pod="bench/big-0", uid="u", node="n0", time=1.6),
        PodBound(pod="bench/big-2", uid="u", node="n2", time=1.5),
        PodBound(pod="bench/other", uid="u", node="n9", time=3.0),
    ]
    stages = gang_stages(events, "bench", "big")
    assert stages is not None and stages.pods == 3
    assert (stages.arriving, stages.placing, stages.binding) == pytest.approx((0.25, 0.05, 0.3))
    assert "its 3 pods seen over 250 ms" in stages.words() and "300 ms of Bindings" in stages.words()


def test_a_gang_never_bound_has_no_stages() -> None:
    assert gang_stages([upserted("big-0", 1.0)], "bench", "big") is None
    assert gang_stages([], "bench", "big") is None
