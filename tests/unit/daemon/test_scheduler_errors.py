"""One object never stops the loop: hostile quantities, and a unit whose handling raises, cost that unit alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

import daemon.scheduling.decisions as decisions_module
from daemon.scheduling.decisions import Step
from daemon.scheduling.ports import Preemptee
from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.log import EventLogError
from events.model import Event, GangPending, PodAssumed, PodForgotten, PodGroupUpserted
from events.objects import Pod, ResourceRequirements
from placement import GangPlan, Unschedulable, plan_gang
from preemption import JobPreemptor
from state.cluster import ClusterState
from tests.unit.daemon.test_scheduler import Harness, gang, nodes
from tests.unit.state.test_cluster import break_the_fold_for


def requesting(base: Pod, **requests: str) -> Pod:
    """`base` with these requests (resource name -> quantity text) added to its container."""
    container = base.spec.containers[0]
    merged = {**container.resources.requests, **requests}
    container = msgspec.structs.replace(container, resources=ResourceRequirements(requests=merged))
    return msgspec.structs.replace(base, spec=msgspec.structs.replace(base.spec, containers=[container]))


def pending_reasons(h: Harness) -> dict[str, str]:
    return {e.gang: e.reason for e in h.events if isinstance(e, GangPending)}


@pytest.mark.parametrize(("resource", "quantity"), [
    ("nvidia.com/gpu", "1e18"), ("memory", "20Pi"), ("cpu", "1" * 40), ("nvidia.com/gpu", "9223372036854775807"),
    ("memory", "1e999999999"), ("cpu", "8Ei"),
])
async def test_a_request_no_node_can_hold_leaves_its_gang_and_lone_pod_pending_naming_the_resource(
        resource: str, quantity: str) -> None:
    h = Harness(preemptor=JobPreemptor())
    h.add(*nodes(8))
    h.add(pod_event(bound(pod("low", priority=0), "n0")))  # something preemption could consider
    h.add(group_event(pod_group("hostile", min_member=2)))
    for index in range(2):
        h.add(pod_event(requesting(pod(f"hostile-{index}", gang="hostile", priority=100), **{resource: quantity})))
    h.add(pod_event(requesting(pod("lone", priority=100), **{resource: quantity})))
    h.add(*gang("canary", 4))
    await h.settle()
    assert sorted(h.bound_pods()) == [f"default/canary-{i}" for i in range(4)]
    reasons = pending_reasons(h)
    assert f"Insufficient {resource}" in reasons["default/hostile"]
    assert f"Insufficient {resource}" in reasons["default/lone"]
    assert not h.scheduler.stats.internal_errors and not h.journal.internal_errors
    assert h.state.pending == {"default/hostile-0", "default/hostile-1", "default/lone"}
    h.state.canonical()  # a node's usage past 2^64 milli-units still has a canonical form


async def test_a_pod_bound_elsewhere_with_a_huge_request_takes_its_node_and_nothing_else() -> None:
    h = Harness()
    h.add(*nodes(4))
    h.add(pod_event(bound(requesting(pod("giant", scheduler="default-scheduler"), memory="20Pi"), "n0")))
    h.add(*gang("canary", 3))
    await h.settle()
    assert sorted(h.bound_pods()) == [f"default/canary-{i}" for i in range(3)]
    assert "n0" not in h.bound_pods().values()


def raising_for(target: str, error: Exception) -> Any:
    def plan(state: ClusterState, gang_key: str, **kwargs: Any) -> GangPlan | Unschedulable:
        if gang_key == target:
            raise error
        return plan_gang(state, gang_key, **kwargs)
    return plan


async def test_a_gang_whose_planning_raises_is_parked_with_the_error_and_every_other_gang_binds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decisions_module, "plan_gang", raising_for("default/bad", RuntimeError("boom")))
    h = Harness()
    h.add(*nodes(8), *gang("first", 2), *gang("bad", 2), *gang("last", 2))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/first-0", "default/first-1", "default/last-0", "default/last-1"]
    reason = pending_reasons(h)["default/bad"]
    assert reason.startswith("gang default/bad: internal error while planning (RuntimeError: boom)")
    assert ("default/bad", "Pending", reason) in h.api.reports  # reported as any reason is: a Warning Event
    assert h.journal.internal_errors == {"plan": 1}
    assert h.scheduler.stats.internal_errors == 1
    assert {"default/bad-0", "default/bad-1"} <= h.state.pending

    await h.settle(30.0)  # parked: not retried (and not logged again) while nothing changes
    assert h.journal.internal_errors == {"plan": 1}

    monkeypatch.setattr(decisions_module, "plan_gang", plan_gang)  # the bug is fixed; the gang changes
    h.add(PodGroupUpserted(pod_group=pod_group("bad", min_member=2, timeout=60)))
    await h.settle()
    assert {"default/bad-0", "default/bad-1"} <= set(h.bound_pods())


async def test_a_lone_pod_whose_planning_raises_is_parked_and_the_gangs_around_it_bind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def plan_pod(state: ClusterState, key: str, **kwargs: Any) -> GangPlan | Unschedulable:
        raise KeyError(key)

    monkeypatch.setattr(decisions_module, "plan_pod", plan_pod)
    h = Harness()
    h.add(*nodes(4), pod_event(pod("lone")), *gang("job", 2))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/job-0", "default/job-1"]
    assert pending_reasons(h)["default/lone"].startswith("pod default/lone: internal error while planning (KeyError:")
    assert h.journal.internal_errors == {"plan": 1}


async def test_an_error_after_some_pods_were_assumed_releases_them(monkeypatch: pytest.MonkeyPatch) -> None:
    original = decisions_module.timeout_of

    def timeout_of(step: Step, gangs: Any) -> float:
        if "default/bad" in gangs:
            raise ZeroDivisionError("while computing the Permit deadline")
        return original(step, gangs)

    monkeypatch.setattr(decisions_module, "timeout_of", timeout_of)
    h = Harness()
    h.add(*nodes(8), *gang("bad", 2), *gang("good", 2))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/good-0", "default/good-1"]
    assert {"default/bad-0", "default/bad-1"} <= set(h.pods(PodAssumed))
    assert {"default/bad-0", "default/bad-1"} <= set(h.pods(PodForgotten))  # released, not left holding room
    assert not any(h.state.pods[f"default/bad-{i}"].assumed_node for i in range(2))
    assert pending_reasons(h)["default/bad"].startswith("gang default/bad: internal error while assuming its plan")
    assert h.journal.internal_errors == {"assume": 1}


class RaisingPreemptor:
    def plan(self, state: ClusterState, preemptee: Preemptee, failure: Unschedulable) -> None:
        raise ValueError(f"cannot plan for {preemptee.key}")


async def test_a_preemption_planner_that_raises_parks_the_preemptor_and_the_rest_still_binds() -> None:
    h = Harness(preemptor=RaisingPreemptor())
    h.add(*nodes(6))
    h.add(*(pod_event(bound(pod(f"low-{i}", priority=0), f"n{i}")) for i in range(2)))
    h.add(*gang("high", 6, priority=100))  # fits only if the low pods go: preemption is asked
    h.add(*gang("small", 2, priority=50))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/small-0", "default/small-1"]
    assert "internal error while planning preemption (ValueError: cannot plan for default/high)" in (
        pending_reasons(h)["default/high"])
    assert h.journal.internal_errors == {"preempt": 1}


async def test_failing_to_append_to_the_log_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    h.add(*nodes(4), *gang("job", 2))
    record, record_many = h.journal.record, h.journal.record_many

    def failing_record(event: Event) -> Event:
        if isinstance(event, PodAssumed):
            raise EventLogError("No space left on device")
        return record(event)

    def failing_record_many(events: Sequence[Event]) -> list[Event]:
        if any(isinstance(event, PodAssumed) for event in events):
            raise EventLogError("No space left on device")
        return record_many(events)

    monkeypatch.setattr(h.journal, "record", failing_record)
    monkeypatch.setattr(h.journal, "record_many", failing_record_many)
    with pytest.raises(BaseExceptionGroup) as caught:
        await h.settle()
    assert caught.group_contains(EventLogError)
    assert not h.journal.internal_errors


async def test_a_pod_whose_fold_raises_holds_its_gang_back_with_the_reason_and_the_others_bind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    break_the_fold_for(monkeypatch, "bad-1")
    h = Harness()
    h.add(*nodes(8), group_event(pod_group("bad", min_member=2)), pod_event(pod("bad-0", gang="bad")),
          pod_event(pod("bad-1", gang="bad", labels={"bug": "yes"})), *gang("good", 2))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/good-0", "default/good-1"]
    reason = pending_reasons(h)["default/bad"]
    assert "pod default/bad-1: could not be folded (RuntimeError: a bug in the fold)" in reason
    assert h.journal.internal_errors == {"fold": 1}

    h.add(pod_event(pod("bad-1", gang="bad")))  # its next update folds cleanly
    await h.settle()
    assert {"default/bad-0", "default/bad-1"} <= set(h.bound_pods())


async def test_a_listener_that_raises_costs_neither_the_other_listeners_nor_the_caller() -> None:
    h = Harness()
    seen: list[int] = []

    def broken(event: Event) -> None:
        raise AttributeError("listener bug")

    h.journal.subscribe(broken)
    h.journal.subscribe(lambda event: seen.append(event.seq))
    h.add(*nodes(2), *gang("job", 2))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/job-0", "default/job-1"]
    assert len(seen) == len(h.events) and h.journal.internal_errors["listener"] == len(h.events)


async def test_a_pod_whose_request_is_not_a_quantity_holds_its_gang_back_naming_the_field() -> None:
    h = Harness()
    h.add(*nodes(4), group_event(pod_group("job", min_member=2)), pod_event(pod("job-0", gang="job")),
          pod_event(requesting(pod("job-1", gang="job"), **{"nvidia.com/gpu": "eight"})),
          pod_event(requesting(pod("lone"), memory="64 GiB")), *gang("canary", 2))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/canary-0", "default/canary-1"]  # not the lone pod with "0" memory
    reasons = pending_reasons(h)
    assert reasons["default/job"].startswith(
        "gang default/job: pod default/job-1: spec.containers[0].resources.requests[nvidia.com/gpu]: 'eight' is not")
    assert reasons["default/lone"].startswith("pod default/lone: spec.containers[0].resources.requests[memory]:")


async def test_a_gang_whose_planning_raised_once_gets_its_true_reason_at_the_next_wake_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The queueing hint skips a parked gang a release cannot make fit; it must not skip one whose last
    # attempt raised, or "internal error while planning" would stay its reason after the cause is gone.
    calls = {"default/wide": 0}

    def raising_once(state: ClusterState, gang_key: str, **kwargs: Any) -> GangPlan | Unschedulable:
        if gang_key in calls:
            calls[gang_key] += 1
            if calls[gang_key] == 1:
                raise RuntimeError("once")
        return plan_gang(state, gang_key, **kwargs)

    monkeypatch.setattr(decisions_module, "plan_gang", raising_once)
    h = Harness()
    h.add(*nodes(4), pod_event(bound(pod("busy-0"), "n0")), pod_event(bound(pod("busy-1"), "n1")), *gang("wide", 4))
    await h.settle()
    assert pending_reasons(h)["default/wide"].startswith("gang default/wide: internal error while planning")

    h.add(node_event(node("n4", block="b1", spine="s0")))  # a wake-up: 3 free nodes, still short of 4
    await h.settle()
    assert calls["default/wide"] == 2
    assert "internal error" not in pending_reasons(h)["default/wide"]
    assert h.journal.internal_errors == {"plan": 1}
