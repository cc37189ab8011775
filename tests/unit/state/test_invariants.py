"""The invariants of a log (state/invariants.py): each hand-crafted log below breaks one, and the check
names the event, the node, pod or gang, and the resource or the numbers."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from daemon.cli.replay import main as replay
from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.log import EventLog, FsyncPolicy
from events.model import (
    BindRequested,
    Event,
    NodeUpserted,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodNominated,
    PodUpserted,
)
from state.cluster import ClusterState
from state.invariants import (
    CAPACITY,
    DOUBLE_BIND,
    GANG_BELOW_MIN_MEMBER,
    MISSING_NODE,
    Violation,
    capacity_violations,
    check_log,
)


def _numbered(events: list[Event]) -> list[Event]:
    return [msgspec.structs.replace(event, seq=index + 1) for index, event in enumerate(events)]


def _other(name: str, node_name: str, gpus: int = 8) -> PodUpserted:
    """A pod another scheduler bound on `node_name`."""
    return pod_event(bound(pod(name, gpus=gpus, scheduler="default-scheduler"), node_name))


def _ours(name: str, gpus: int = 8, gang: str | None = None, priority: int | None = None) -> PodUpserted:
    return pod_event(pod(name, gpus=gpus, gang=gang, priority=priority))


def _only(violations: list[Violation], invariant: str) -> Violation:
    assert [v.invariant for v in violations] == [invariant], [str(v) for v in violations]
    return violations[0]


def test_assuming_a_pod_on_a_full_node_breaks_capacity_naming_seq_node_and_resource() -> None:
    events = _numbered([node_event(node("n1", gpus=8)), _other("theirs", "n1"), _ours("p"),
                        PodAssumed(pod="default/p", uid="uid-default-p", node="n1")])
    found = _only(check_log(events), CAPACITY)
    assert found.seq == 4 and found.subject == "node n1"
    assert "nvidia.com/gpu: 16 asked of 8 allocatable" in found.detail and "default/p" in found.detail
    assert str(found).startswith("seq 4: capacity: node n1: nvidia.com/gpu")


def test_assuming_a_pod_into_capacity_nominated_for_a_higher_priority_gang_breaks_capacity() -> None:
    events = _numbered([node_event(node("n1", gpus=8)), _ours("high", priority=100), _ours("low", priority=1),
                        PodNominated(pod="default/high", uid="uid-default-high", node="n1", priority=100),
                        PodAssumed(pod="default/low", uid="uid-default-low", node="n1")])
    found = _only(check_log(events), CAPACITY)
    assert found.seq == 5 and "8 of it nominated" in found.detail


def test_a_lower_priority_nomination_does_not_hold_capacity_against_the_pod() -> None:
    events = _numbered([node_event(node("n1", gpus=8)), _ours("high", priority=100), _ours("low", priority=1),
                        PodNominated(pod="default/low", uid="uid-default-low", node="n1", priority=1),
                        PodAssumed(pod="default/high", uid="uid-default-high", node="n1")])
    assert check_log(events) == []


def test_binding_a_plan_after_its_node_was_filled_breaks_capacity_at_the_bind() -> None:
    # Assumed while it fitted; another scheduler filled the node (e.g. while we were down); bound anyway.
    events = _numbered([node_event(node("n1", gpus=8)), _ours("p", gpus=4),
                        PodAssumed(pod="default/p", uid="uid-default-p", node="n1"), _other("filler", "n1", gpus=8),
                        BindRequested(pod="default/p", uid="uid-default-p", node="n1")])
    found = _only(check_log(events), CAPACITY)
    assert found.seq == 5 and "12 asked of 8" in found.detail and "bound" in found.detail


def test_a_binding_accepted_onto_a_node_it_was_never_assumed_on_is_caught_at_the_end() -> None:
    events = _numbered([node_event(node("n1", gpus=8)), node_event(node("n2", gpus=8)), _other("filler", "n2"),
                        _ours("p"), PodAssumed(pod="default/p", uid="uid-default-p", node="n1"),
                        BindRequested(pod="default/p", uid="uid-default-p", node="n1"),
                        PodBound(pod="default/p", uid="uid-default-p", node="n2")])
    found = _only(check_log(events), CAPACITY)
    assert found.seq == 7 and found.subject == "node n2"


def test_a_node_pushed_over_by_others_after_our_last_decision_is_not_ours_to_answer_for() -> None:
    shrunk = node("n1", gpus=4)
    events = _numbered([node_event(node("n1", gpus=8)), _ours("p"),
                        PodAssumed(pod="default/p", uid="uid-default-p", node="n1"),
                        BindRequested(pod="default/p", uid="uid-default-p", node="n1"),
                        PodBound(pod="default/p", uid="uid-default-p", node="n1"), NodeUpserted(node=shrunk)])
    assert check_log(events) == []
    state = ClusterState()
    state.apply_all(events)
    assert [str(v) for v in capacity_violations(state)] == [
        "capacity: node n1: nvidia.com/gpu: 8 asked of 4 allocatable"]


def test_assuming_or_binding_on_a_node_the_state_does_not_hold_breaks_missing_node() -> None:
    events = _numbered([node_event(node("n1")), _ours("p"),
                        PodAssumed(pod="default/p", uid="uid-default-p", node="n9")])
    found = _only(check_log(events), MISSING_NODE)
    assert found.seq == 3 and found.subject == "pod default/p" and "node n9" in found.detail


def test_a_second_binding_of_a_bound_pod_breaks_double_bind() -> None:
    events = _numbered([node_event(node("n1")), node_event(node("n2")), _ours("p"),
                        PodAssumed(pod="default/p", uid="uid-default-p", node="n1"),
                        BindRequested(pod="default/p", uid="uid-default-p", node="n1"),
                        PodBound(pod="default/p", uid="uid-default-p", node="n1"),
                        PodBound(pod="default/p", uid="uid-default-p", node="n2")])
    found = _only(check_log(events), DOUBLE_BIND)
    assert found.seq == 7 and "node n2" in found.detail and "node n1" in found.detail


def test_the_api_showing_a_pod_elsewhere_than_our_accepted_binding_breaks_double_bind() -> None:
    events = _numbered([node_event(node("n1")), node_event(node("n2")), _ours("p"),
                        PodAssumed(pod="default/p", uid="uid-default-p", node="n1"),
                        BindRequested(pod="default/p", uid="uid-default-p", node="n1"),
                        PodBound(pod="default/p", uid="uid-default-p", node="n1"),
                        pod_event(bound(pod("p"), "n2"))])
    found = _only(check_log(events), DOUBLE_BIND)
    assert found.seq == 7 and "API shows it on node n2" in found.detail


def _gang(size: int, min_member: int, timeout: int | None) -> list[Event]:
    events: list[Event] = [node_event(node(f"n{i}")) for i in range(size)]
    events.append(group_event(pod_group("job", min_member=min_member, timeout=timeout)))
    events += [_ours(f"job-{i}", gang="job") for i in range(size)]
    return events


def _bind(index: int, at: float) -> list[Event]:
    key, uid, name = f"default/job-{index}", f"uid-default-job-{index}", f"n{index}"
    return [PodAssumed(pod=key, uid=uid, node=name, gang="default/job", time=at),
            BindRequested(pod=key, uid=uid, node=name, time=at), PodBound(pod=key, uid=uid, node=name, time=at)]


def test_a_gang_left_below_min_member_past_its_timeout_breaks_the_gang_invariant() -> None:
    events = _gang(3, 3, timeout=10) + _bind(0, 1.0) + _bind(1, 1.0) + [NodeUpserted(node=node("late"), time=12.0)]
    numbered = _numbered(events)
    found = _only(check_log(numbered), GANG_BELOW_MIN_MEMBER)
    assert found.subject == "gang default/job" and found.seq == len(numbered)
    assert "2 of minMember 3 bound" in found.detail and "timeout is 10s" in found.detail


def test_a_gang_without_a_timeout_of_its_own_is_held_to_the_default_one() -> None:
    events = _numbered(_gang(2, 2, timeout=None) + _bind(0, 0.0) + [PodUpserted(pod=pod("later", gpus=0), time=601.0)])
    assert [v.invariant for v in check_log(events)] == [GANG_BELOW_MIN_MEMBER]  # the default timeout, 600 s
    assert check_log(events, default_schedule_timeout_seconds=900.0) == []


def test_a_gang_that_reached_min_member_is_not_checked_when_members_leave_later() -> None:
    events = _gang(3, 3, timeout=10) + _bind(0, 1.0) + _bind(1, 2.0) + _bind(2, 3.0)
    events += [PodDeleted(key="default/job-1", uid="uid-default-job-1", time=5.0),
               NodeUpserted(node=node("late"), time=100.0)]
    assert check_log(_numbered(events)) == []


def test_a_gang_bound_below_min_member_within_its_timeout_is_fine() -> None:
    events = _gang(3, 3, timeout=10) + _bind(0, 1.0) + _bind(1, 1.0) + [NodeUpserted(node=node("late"), time=9.0)]
    assert check_log(_numbered(events)) == []


def test_replay_verify_exits_1_naming_the_offset_node_and_resource(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    events: list[Event] = [node_event(node("n1", gpus=8)), _other("theirs", "n1"), _ours("p"),
                           PodAssumed(pod="default/p", uid="uid-default-p", node="n1")]
    with EventLog.open(tmp_path / "log", fsync=FsyncPolicy.never()) as log:
        for event in events:
            log.append(event)
    assert replay([str(tmp_path / "log"), "--verify"]) == 1
    err = capsys.readouterr().err
    assert "verify invariants:" in err
    assert "seq 4: capacity: node n1: nvidia.com/gpu: 16 asked of 8 allocatable" in err
