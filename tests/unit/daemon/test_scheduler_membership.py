"""A gang's reason follows its members as they arrive: the queueing hints never keep a stale reason.

The lost wake-up of issue 13 ("a Volcano hard-tier gang of 6 created by one `kubectl apply` stayed
at '4 of minMember 6 pods exist' with all 6 pods present"): the first 4 pods were attempted and
parked; the last 2 woke the gang, but the queueing hint (the gang needs 6 pods in one block of 4
nodes: surely unschedulable) skipped the attempt, so the reason said 4 for ever. These tests replay
that order deterministically on the virtual clock, with no API in between.
"""

from __future__ import annotations

import msgspec

from events.builders import group_event, node, node_event, pod, pod_event, pod_group
from events.model import Event, GangPending, NodeUpserted, PodDeleted
from events.objects import Condition
from tests.unit.daemon.test_scheduler import Harness

MUST_GATHER_BLOCK: list[dict[str, object]] = [{"layer": "BlockLayer", "strategy": "MustGather"}]


def blocks_of_four(count: int) -> list[NodeUpserted]:
    return [node_event(node(f"n{i}", block=f"b{i // 4}", spine="s0")) for i in range(count)]


def members(name: str, indexes: range, at: float) -> list[Event]:
    return [pod_event(pod(f"{name}-{i}", gang=name), at) for i in indexes]


def reasons(h: Harness, gang: str) -> list[str]:
    return [e.reason for e in h.events if isinstance(e, GangPending) and e.gang == gang]


async def test_a_gang_parked_for_missing_members_is_attempted_when_they_arrive_and_says_it_can_never_fit() -> None:
    h = Harness()
    h.add(*blocks_of_four(8), group_event(pod_group("wide", min_member=6, gather=MUST_GATHER_BLOCK)))
    h.add(*members("wide", range(4), 0.0))
    await h.settle()
    assert "4 of minMember 6 pods exist" in h.state.gangs["default/wide"].last_reason

    h.clock.advance_to(1.0)
    h.add(*members("wide", range(4, 6), 1.0))  # the rest of the one `kubectl apply`
    await h.settle()

    last = h.state.gangs["default/wide"].last_reason
    assert "pods exist" not in last
    assert "it can never fit" in last and "MustGather at BlockLayer" in last
    assert reasons(h, "default/wide")[-1] == last
    assert [r[2] for r in h.api.reports if r[0] == "default/wide"][-1] == last  # and it was reported
    assert h.scheduler.stats.skipped == 0


async def test_a_gangs_reason_tracks_its_members_while_they_arrive_and_then_says_why_it_cannot_fit() -> None:
    h = Harness()
    h.add(*blocks_of_four(8), group_event(pod_group("big", min_member=20)))
    for at, upto in ((0.0, 4), (1.0, 10), (2.0, 20)):
        h.clock.advance_to(at)
        start = len(h.state.gangs["default/big"].members) if "default/big" in h.state.gangs else 0
        h.add(*members("big", range(start, upto), at))
        await h.settle()
    said = reasons(h, "default/big")
    assert "4 of minMember 20 pods exist" in said[0] and "16 missing" in said[0]
    assert "10 of minMember 20 pods exist" in said[1] and "10 missing" in said[1]
    assert "pods exist" not in said[-1] and "it can never fit" in said[-1]
    assert h.state.gangs["default/big"].last_reason == said[-1]


async def test_a_status_write_on_a_pending_member_is_not_a_change_that_brings_its_gang_back() -> None:
    h = Harness()
    h.add(*blocks_of_four(4), group_event(pod_group("wide", min_member=6, gather=MUST_GATHER_BLOCK)))
    h.add(*members("wide", range(6), 0.0))
    await h.settle()
    attempts = h.scheduler.stats.attempts
    condition = Condition(type="PodScheduled", status="False", reason="Unschedulable", message="why")
    for i in range(6):
        written = pod(f"wide-{i}", gang="wide")
        written = msgspec.structs.replace(written, status=msgspec.structs.replace(written.status,
                                                                                  conditions=[condition]))
        h.add(pod_event(written, 1.0))
    await h.settle(1.0)
    assert h.scheduler.stats.attempts == attempts

    h.add(pod_event(pod("wide-6", gang="wide"), 2.0))  # a new member is a change
    await h.settle(2.0)
    assert h.scheduler.stats.attempts == attempts + 1


async def test_a_gang_that_loses_a_member_says_so_instead_of_its_old_reason() -> None:
    h = Harness()
    h.add(*blocks_of_four(4), group_event(pod_group("wide", min_member=6, gather=MUST_GATHER_BLOCK)))
    h.add(*members("wide", range(6), 0.0))
    await h.settle()
    assert "it can never fit" in h.state.gangs["default/wide"].last_reason
    h.add(PodDeleted(key="default/wide-5", uid="uid-default-wide-5"))
    await h.settle(1.0)
    assert "5 of minMember 6 pods exist" in h.state.gangs["default/wide"].last_reason
