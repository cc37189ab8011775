"""The scheduler loop against an in-memory API and the real placement: FirstPod/NextPod, Permit, binds."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import anyio
import anyio.lowlevel
import msgspec

from daemon.offline.simulator import VirtualClock
from daemon.scheduling.journal import Journal
from daemon.scheduling.loop import TURN_SECONDS, UNITS_PER_TURN, Scheduler, SchedulerConfig
from daemon.scheduling.ports import OK, ApiOutcome, BindOutcome, GangPhase, Instruments, Preemptee
from daemon.scheduling.queue import SchedulingQueue, Unit
from events.builders import (
    bound,
    group_event,
    kubeflow_job,
    node,
    node_event,
    pod,
    pod_event,
    pod_group,
    volcano_job,
    volcano_pod_group,
)
from events.ingest import kind_of, upsert_event
from events.model import (
    BindFailed,
    BindRequested,
    ClaimUpserted,
    Event,
    EvictionRequested,
    GangPending,
    GangTimedOut,
    KubeflowJobUpserted,
    NodeUpserted,
    NominationCleared,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    PodUpserted,
    PreemptionPlanned,
    PriorityClassUpserted,
    SchedulerPluginsPodGroupUpserted,
    VolcanoJobUpserted,
    VolcanoPodGroupUpserted,
    VolumeUpserted,
)
from events.objects import (
    SCHEDULER_PLUGINS_POD_GROUP_API,
    SCHEDULER_PLUGINS_POD_GROUP_LABEL,
    SELECTED_NODE_ANNOTATION,
    VOLCANO_GROUP_ANNOTATION,
    ClaimReference,
    ObjectMeta,
    PriorityClass,
)
from placement import Assignment, Unschedulable
from placement.plan import QuotaShortfall
from preemption import JobPreemptor
from preemption.plan import PreemptionPlan
from state.cluster import ClusterState

PodEvent = (PodAssumed | PodBound | PodForgotten | BindRequested | BindFailed | PodNominated | EvictionRequested
            | NominationCleared)


class FakeAPI:
    """Records every call; binds succeed unless `fail` says otherwise; `gate` can hold binds open."""

    def __init__(self, state: ClusterState, journal: Journal) -> None:
        self.state = state
        self.journal = journal
        self.calls: list[tuple[str, str]] = []
        self.reports: list[tuple[str, str, str]] = []
        self.report_reasons: list[tuple[str, str]] = []  # (gang or pod, the condition's reason)
        self.enqueued: list[str] = []  # Volcano PodGroups moved to Inqueue
        self.held_marks: list[ClaimUpserted] | None = None  # a list: marked claims echoed by the test, not at once
        self.fail: dict[str, BindOutcome] = {}
        self.gate: anyio.Event | None = None
        self.slow_reports: dict[str, anyio.Event] = {}  # phase -> its report_gang calls wait for this first
        self.in_flight = 0
        self.max_in_flight = 0
        self.holds = 0  # Scheduled Events held (hold_scheduled_events minus release_scheduled_events)

    def hold_scheduled_events(self) -> None:
        self.calls.append(("hold", ""))
        self.holds += 1

    def release_scheduled_events(self) -> None:
        self.calls.append(("release", ""))
        assert self.holds > 0, "released more than held"
        self.holds -= 1

    async def bind(self, pod: str, uid: str, node: str) -> BindOutcome:
        self.calls.append(("bind", pod))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            failure = self.fail.pop(pod, None)
            if failure is not None:
                return failure
            info = self.state.pods[pod]
            self.journal.record(PodUpserted(pod=bound(info.obj, node)))
            return BindOutcome(status="bound", node=node)
        finally:
            self.in_flight -= 1

    async def select_node(self, claim: str, node: str) -> ApiOutcome:
        """As the API server answers the patch: the claim now names the node (nothing provisions it)."""
        self.calls.append(("select_node", f"{claim}@{node}"))
        held = self.state.volumes.claims.get(claim)
        if held is None:
            return ApiOutcome(ok=False, reason="not found", retriable=False)
        meta = held.metadata
        marked = msgspec.structs.replace(meta, annotations={**meta.annotations, SELECTED_NODE_ANNOTATION: node})
        echo = ClaimUpserted(claim=msgspec.structs.replace(held, metadata=marked))
        if self.held_marks is not None:
            self.held_marks.append(echo)  # the watch brings it back later (the test records it)
        else:
            self.journal.record(echo)
        return OK

    async def bind_volume(self, volume: str, claim: str) -> ApiOutcome:
        """As the API server answers the patch: the volume now names the claim (no PV controller binds it)."""
        self.calls.append(("bind_volume", f"{claim}@{volume}"))
        held = self.state.volumes.volumes.get(volume)
        wanted = self.state.volumes.claims.get(claim)
        if held is None or wanted is None:
            return ApiOutcome(ok=False, reason="not found", retriable=False)
        namespace, _, name = claim.partition("/")
        ref = ClaimReference(namespace=namespace, name=name, uid=wanted.metadata.uid)
        self.journal.record(VolumeUpserted(volume=msgspec.structs.replace(
            held, spec=msgspec.structs.replace(held.spec, claim_ref=ref))))
        return OK

    async def evict(self, pod: str, uid: str, *, preemptor: str, message: str, grace_seconds: int | None) -> ApiOutcome:
        self.calls.append(("evict", pod))
        return OK

    async def set_nominated_node(self, pod: str, uid: str, node: str | None) -> ApiOutcome:
        self.calls.append(("nominate" if node else "unnominate", pod))
        return OK

    async def set_disruption_condition(self, pod: str, uid: str, *, preemptor: str, message: str) -> ApiOutcome:
        self.calls.append(("disrupt", pod))
        return OK

    async def report_gang(self, gang: str, phase: GangPhase, reason: str, message: str,
                          quota: QuotaShortfall | None = None) -> ApiOutcome:
        slow = self.slow_reports.get(phase)
        if slow is not None:
            await slow.wait()
        self.reports.append((gang, phase, message))  # when it reached the API server
        self.report_reasons.append((gang, reason))
        return OK

    async def report_pod(self, pod: str, uid: str, reason: str, message: str) -> ApiOutcome:
        self.reports.append((pod, "Pending", message))
        return OK

    async def enqueue_pod_group(self, gang: str) -> ApiOutcome:
        self.enqueued.append(gang)
        return OK


class StillClock(VirtualClock):
    """Time moves only when the test moves it: a sleeper waits until cancelled (the daemon's view)."""

    async def sleep_until(self, deadline: float) -> None:
        if deadline > self.time:
            await anyio.sleep_forever()


class Harness:
    def __init__(self, *, config: SchedulerConfig | None = None, preemptor: object | None = None,
                 instruments: Instruments | None = None) -> None:
        self.clock = StillClock()
        self.state = ClusterState()
        self.journal = Journal(self.state, self.clock)
        self.events: list[Event] = []
        self.journal.subscribe(self.events.append)
        self.api = FakeAPI(self.state, self.journal)
        self.scheduler = Scheduler(self.journal, self.api, config=config or SchedulerConfig(retry_parked_seconds=None),
                                   preemptor=preemptor, instruments=instruments)  # type: ignore[arg-type]

    def add(self, *events: Event) -> None:
        for event in events:
            self.journal.record(event)

    async def settle(self, at: float | None = None) -> None:
        if at is not None:
            self.clock.advance_to(at)
        await self.scheduler.run_until_idle()

    def pods(self, kind: type[PodEvent]) -> list[str]:
        """The pods named by recorded events of `kind`, in order."""
        return [e.pod for e in self.events if isinstance(e, kind)]

    def times(self, kind: type[PodEvent]) -> set[float]:
        return {e.time for e in self.events if isinstance(e, kind)}

    def bound_pods(self) -> dict[str, str]:
        return {e.pod: e.node for e in self.events if isinstance(e, PodBound)}


async def wait_for(condition: Callable[[], bool]) -> None:
    """Let other tasks run until `condition()` holds (at most 5 s)."""
    with anyio.fail_after(5):
        while not condition():
            await anyio.lowlevel.checkpoint()


def nodes(count: int, *, block: Callable[[int], str] = lambda i: f"b{i // 4}") -> list[NodeUpserted]:
    return [node_event(node(f"n{i}", block=block(i), spine="s0")) for i in range(count)]


def gang(name: str, size: int, *, min_member: int | None = None, timeout: int | None = None,
         gang_group: list[str] | None = None, priority: int | None = None, at: float = 0.0) -> list[Event]:
    group = pod_group(name, min_member=size if min_member is None else min_member, timeout=timeout,
                      gang_group=gang_group)
    events: list[Event] = [group_event(group)]
    events += [pod_event(pod(f"{name}-{i}", gang=name, priority=priority), at) for i in range(size)]
    return events


async def test_gang_binds_all_members_together_when_it_fits() -> None:
    h = Harness()
    h.add(*nodes(4), *gang("train", 4))
    await h.settle()
    assert sorted(h.bound_pods()) == [f"default/train-{i}" for i in range(4)]
    assert h.times(PodBound) == {0.0}
    assert h.pods(BindRequested) == h.pods(PodAssumed)
    assert ("default/train", "Scheduled") in {(g, p) for g, p, _ in h.api.reports}


async def test_a_gang_short_of_members_is_held_untried_and_reported_not_ready_one_too_big_unschedulable() -> None:
    # kube-scheduler's GangScheduling holds the first at PreEnqueue (NotReadyForScheduling); the second
    # was tried against the nodes and failed (Unschedulable, what cluster-autoscaler provisions for).
    h = Harness()
    h.add(*nodes(3), *gang("short", 2, min_member=3), *gang("big", 4))
    await h.settle()
    held = {e.gang: e.held for e in h.events if isinstance(e, GangPending)}
    assert held == {"default/short": True, "default/big": False}
    assert h.state.gangs["default/short"].held and not h.state.gangs["default/big"].held
    assert sorted(h.api.report_reasons) == [("default/big", "Unschedulable"),
                                            ("default/short", "NotReadyForScheduling")]
    h.add(pod_event(pod("short-2", gang="short")))
    await h.settle()
    assert sorted(h.bound_pods()) == [f"default/short-{i}" for i in range(3)]
    assert not h.state.gangs["default/short"].held


async def test_gang_that_does_not_fit_binds_nothing_and_says_why_once() -> None:
    h = Harness()
    h.add(*nodes(3), *gang("train", 4))
    await h.settle()
    await h.settle(5.0)
    assert h.bound_pods() == {}
    assert h.pods(PodAssumed) == []
    pending = [e for e in h.events if isinstance(e, GangPending)]
    assert len(pending) == 1 and "default/train" in pending[0].reason
    assert [r for r in h.api.reports if r[1] == "Pending"] == [("default/train", "Pending", pending[0].reason)]
    assert h.state.gangs["default/train"].last_reason == pending[0].reason


async def test_parked_gang_is_not_replanned_until_the_cluster_changes() -> None:
    h = Harness()
    h.add(*nodes(3), *gang("train", 4))
    await h.settle()
    attempts = h.scheduler.stats.attempts
    await h.settle(10.0)
    await h.settle(20.0)
    assert h.scheduler.stats.attempts == attempts


async def test_gang_binds_when_capacity_is_freed() -> None:
    h = Harness()
    h.add(*nodes(4), pod_event(bound(pod("busy"), "n0")), *gang("train", 4))
    await h.settle()
    assert h.bound_pods() == {}
    h.clock.advance_to(40.0)
    h.add(PodDeleted(key="default/busy", uid="uid-default-busy"))
    await h.settle()
    assert sorted(h.bound_pods()) == [f"default/train-{i}" for i in range(4)]
    assert h.times(PodBound) == {40.0}


async def test_a_parked_ganggroup_wakes_when_the_member_its_second_gang_lacked_arrives() -> None:
    # The unit is keyed by the GangGroup's first gang; a new member of another gang of the group must
    # still bring it back from the park (its wake-up used to be dropped with the bookkeeping of gone units).
    h = Harness()
    members = ["default/a", "default/b"]
    h.add(*nodes(8))
    h.add(*gang("a", 2, min_member=2, gang_group=members))
    h.add(group_event(pod_group("b", min_member=2, gang_group=members)), pod_event(pod("b-0", gang="b")))
    await h.settle()
    assert h.bound_pods() == {} and not h.pods(PodAssumed)  # 3 of the summed minMember 4 exist: parked
    h.clock.advance_to(40.0)
    h.add(pod_event(pod("b-1", gang="b"), 40.0))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/a-0", "default/a-1", "default/b-0", "default/b-1"]
    assert h.times(PodBound) == {40.0}


async def test_permit_holds_a_ganggroup_until_every_gang_reaches_min_member() -> None:
    h = Harness()
    members = ["default/a", "default/b"]
    h.add(*nodes(8))
    h.add(*gang("a", 3, min_member=2, gang_group=members))
    h.add(group_event(pod_group("b", min_member=2, gang_group=members)), pod_event(pod("b-0", gang="b")))
    await h.settle()
    assert h.bound_pods() == {}
    assert len(h.pods(PodAssumed)) == 4  # planned and assumed, waiting at Permit
    assert h.scheduler.has_waiting()
    h.clock.advance_to(5.0)
    h.add(pod_event(pod("b-1", gang="b"), 5.0))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/a-0", "default/a-1", "default/a-2", "default/b-0", "default/b-1"]
    assert h.times(PodBound) == {5.0}
    assert not h.scheduler.has_waiting()


async def test_timeout_at_permit_releases_every_assumed_member() -> None:
    h = Harness()
    members = ["default/a", "default/b"]
    h.add(*nodes(8))
    h.add(group_event(pod_group("a", min_member=2, timeout=30, gang_group=members)),
          *[pod_event(pod(f"a-{i}", gang="a")) for i in range(3)])
    h.add(group_event(pod_group("b", min_member=2, timeout=30, gang_group=members)), pod_event(pod("b-0", gang="b")))
    await h.settle()
    assert len(h.pods(PodAssumed)) == 4  # 4 pods exist for a summed minMember of 4, but b alone has 1 of 2
    assert h.scheduler.next_deadline() == 30.0
    await h.settle(30.0)
    assert h.bound_pods() == {}
    assert sorted(h.pods(PodForgotten)) == ["default/a-0", "default/a-1", "default/a-2", "default/b-0"]
    timed_out = [e for e in h.events if isinstance(e, GangTimedOut)]
    assert [e.gang for e in timed_out] == members
    assert "scheduleTimeoutSeconds" in timed_out[0].reason
    assert sorted(g for g, phase, _ in h.api.reports if phase == "TimedOut") == members
    assert all(key in h.state.pending for key in ("default/a-0", "default/a-1", "default/b-0"))
    assert "scheduleTimeoutSeconds" in h.scheduler.explain_pending("default/a-0")


async def test_bind_failure_of_one_member_releases_the_rest_and_binds_no_pod_twice() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None, bind_concurrency=1))
    h.add(*nodes(4), *gang("train", 4))
    h.api.fail["default/train-1"] = BindOutcome(status="failed", reason="etcd timeout", retriable=True)
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/train-0"]  # sent before the failure; Kubernetes cannot unbind
    assert h.pods(BindFailed) == ["default/train-1"]
    assert sorted(h.pods(PodForgotten)) == ["default/train-2", "default/train-3"]
    assert ("bind", "default/train-2") not in h.api.calls  # never sent once a member failed
    deadline = h.scheduler.next_deadline()
    assert deadline is not None and deadline > 0.0  # backoff
    await h.settle(deadline)
    assert sorted(h.bound_pods()) == [f"default/train-{i}" for i in range(4)]
    binds = [pod for call, pod in h.api.calls if call == "bind"]
    assert binds.count("default/train-0") == 1
    assert len(h.pods(PodBound)) == 4


async def test_non_retriable_bind_failure_waits_for_a_change_instead_of_a_backoff() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None, bind_concurrency=1))
    h.add(*nodes(2), *gang("train", 2))
    h.api.fail["default/train-0"] = BindOutcome(status="failed", reason="node gone", retriable=False)
    await h.settle()
    assert h.bound_pods() == {}
    assert h.scheduler.next_deadline() is None
    assert "node gone" in h.state.gangs["default/train"].last_reason


async def test_binds_run_concurrently_but_within_the_bound() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None, bind_concurrency=3))
    h.add(*nodes(8), *gang("train", 8))
    h.api.gate = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: h.api.in_flight >= 3)
        h.api.gate.set()
    assert h.api.max_in_flight == 3
    assert len(h.bound_pods()) == 8


async def test_lone_pods_are_all_planned_while_their_binds_are_in_flight_within_the_bound() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None, bind_concurrency=4))
    h.add(*nodes(2), *(pod_event(pod(f"solo-{i}", gpus=1)) for i in range(10)))
    h.api.gate = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: h.api.in_flight >= 4 and len(h.pods(BindRequested)) == 10)
        assert len(h.pods(PodAssumed)) == 10 and h.bound_pods() == {}  # planning never waited for a bind
        h.api.gate.set()
    assert h.api.max_in_flight == 4
    assert len(h.bound_pods()) == 10


async def test_a_gangs_binds_answered_in_one_turn_are_recorded_together_and_all_before_it_is_scheduled() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None, bind_concurrency=4))
    h.add(*nodes(8), *gang("train", 8))
    batches: list[list[str]] = []
    record_many = h.journal.record_many

    def spy(events: Sequence[Event]) -> list[Event]:
        batches.append([e.pod for e in events if isinstance(e, PodBound)])
        return record_many(events)

    h.journal.record_many = spy  # type: ignore[method-assign]
    h.api.gate = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: h.api.in_flight >= 4)
        scheduled_before = [r for r in h.api.reports if r[1] == "Scheduled"]
        h.api.gate.set()  # the four answers come in one turn
    assert scheduled_before == []
    bound_batches = [batch for batch in batches if batch]
    assert len(bound_batches[0]) == 4
    assert sorted(pod for batch in bound_batches for pod in batch) == [f"default/train-{i}" for i in range(8)]
    assert len(h.bound_pods()) == 8
    assert ("default/train", "Scheduled") in {(g, p) for g, p, _ in h.api.reports}


async def test_a_lone_pods_assumption_and_bind_request_are_recorded_together_then_bound() -> None:
    h = Harness()
    h.add(*nodes(1), pod_event(pod("solo", gpus=1)))
    batches: list[list[str]] = []
    record_many = h.journal.record_many

    def spy(events: Sequence[Event]) -> list[Event]:
        batches.append([type(e).__name__ for e in events])
        return record_many(events)

    h.journal.record_many = spy  # type: ignore[method-assign]
    await h.settle()
    assert ["PodAssumed", "BindRequested"] in batches
    assert h.bound_pods() == {"default/solo": "n0"}
    kinds = [type(e).__name__ for e in h.events if isinstance(e, PodAssumed | BindRequested | PodBound)]
    assert kinds == ["PodAssumed", "BindRequested", "PodBound"]


async def test_a_failed_bind_is_recorded_after_the_binds_answered_before_it() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None, bind_concurrency=4))
    h.add(*nodes(4), *gang("train", 4))
    h.api.fail["default/train-3"] = BindOutcome(status="failed", reason="node gone", retriable=True)
    await h.settle()
    outcomes = [(type(e).__name__, e.pod) for e in h.events if isinstance(e, PodBound | BindFailed)]
    failed_at = outcomes.index(("BindFailed", "default/train-3"))
    assert all(kind == "PodBound" for kind, _ in outcomes[:failed_at]) and failed_at >= 1
    assert "node gone" in h.state.gangs["default/train"].last_reason


async def test_already_bound_answer_counts_as_bound_where_the_api_says() -> None:
    h = Harness()
    h.add(*nodes(1), pod_event(pod("solo")))
    h.api.fail["default/solo"] = BindOutcome(status="already-bound", node="n0")
    await h.settle()
    assert h.bound_pods() == {"default/solo": "n0"}
    assert h.state.pods["default/solo"].node_name == "n0"


def test_queue_orders_by_priority_then_last_attempt_then_creation_then_key() -> None:
    queue = SchedulingQueue()

    def unit(key: str, priority: int, first_seen: float) -> Unit:
        return Unit(key=key, gangs=(key,), target=key, pods=(f"{key}-0",), priority=priority, first_seen=first_seen)

    units = [unit("ns/c", 0, 1.0), unit("ns/b", 0, 1.0), unit("ns/a", 0, 2.0), unit("ns/hi", 10, 9.0)]
    assert [u.key for u in queue.ordered(units, 0.0)] == ["ns/hi", "ns/b", "ns/c", "ns/a"]
    queue.attempted(units[1], 5.0)  # ns/b was just tried: it goes behind the ones waiting since earlier
    assert [u.key for u in queue.ordered(units, 5.0)] == ["ns/hi", "ns/c", "ns/a", "ns/b"]


def test_a_unit_parked_until_a_time_comes_back_then_and_says_when() -> None:
    queue = SchedulingQueue()  # no periodic retry, as in the simulator
    unit = Unit(key="ns/a", gangs=("ns/a",), target="ns/a", pods=("ns/a-0",), priority=0, first_seen=0.0)
    queue.park(unit.key, 10.0, retry_at=70.0)  # jobs a KAI queue's min runtime keeps may be taken at 70
    assert queue.ordered([unit], 69.0) == [] and queue.next_deadline(after=10.0) == 70.0
    assert queue.ordered([unit], 70.0) == [unit]
    queue.park(unit.key, 71.0)  # parked again, for a change only
    assert queue.ordered([unit], 500.0) == [] and queue.next_deadline(after=71.0) is None


async def test_higher_priority_gang_takes_the_room_first() -> None:
    h = Harness()
    h.add(*nodes(4), *gang("low", 4, priority=1), *gang("high", 4, priority=100))
    await h.settle()
    assert sorted(h.bound_pods()) == [f"default/high-{i}" for i in range(4)]


async def test_lone_pods_are_planned_alone_and_bound() -> None:
    h = Harness()
    h.add(*nodes(2), pod_event(pod("solo", gpus=1)))
    await h.settle()
    assert list(h.bound_pods()) == ["default/solo"]


async def test_same_events_and_clock_give_the_same_decisions() -> None:
    async def run() -> list[bytes]:
        h = Harness()
        h.add(*nodes(8), *gang("a", 4), *gang("b", 4), *gang("c", 4), pod_event(pod("solo", gpus=1)))
        await h.settle()
        h.clock.advance_to(10.0)
        h.add(PodDeleted(key="default/a-0", uid="uid-default-a-0"))
        await h.settle()
        return [msgspec.msgpack.encode(e) for e in h.events]

    assert await run() == await run()


class FixedPreemptor:
    def __init__(self, plan: PreemptionPlan) -> None:
        self.plan_to_give = plan
        self.asked: list[tuple[Preemptee, Unschedulable]] = []

    def plan(self, state: ClusterState, preemptee: Preemptee, failure: Unschedulable) -> PreemptionPlan | None:
        self.asked.append((preemptee, failure))
        return self.plan_to_give if len(self.asked) == 1 else None


def evict_low_0_for_high_0(clear: tuple[str, ...] = ()) -> PreemptionPlan:
    """A plan evicting default/low-0 and nominating default/high-0 on n0, clearing `clear`."""
    return PreemptionPlan(preemptor="default/high", gangs=("default/high",), priority=100,
                          victims=("default/low-0",), victim_jobs=("default/low",), jobs=(),
                          nominations=(Assignment(pod="default/high-0", node="n0"),), clear_nominations=clear,
                          domain="", level="", explanation="cheapest")


async def test_preemption_plan_is_recorded_then_carried_out() -> None:
    plan = evict_low_0_for_high_0(clear=("default/mid",))
    preemptor = FixedPreemptor(plan)
    h = Harness(preemptor=preemptor)
    h.add(*nodes(1), pod_event(bound(pod("low-0", gang="low", priority=1), "n0")),
          group_event(pod_group("low", min_member=1)), pod_event(pod("mid", priority=5)))
    h.add(PodNominated(pod="default/mid", uid="uid-default-mid", node="n0", priority=5))
    h.add(*gang("high", 1, priority=100))
    await h.settle()
    assert preemptor.asked[0][0].key == "default/high"
    assert [e.gang for e in h.events if isinstance(e, PreemptionPlanned)] == ["default/high"]
    assert [e.pod for e in h.events if isinstance(e, EvictionRequested)] == ["default/low-0"]
    assert [(e.pod, e.node) for e in h.events if isinstance(e, PodNominated)][-1] == ("default/high-0", "n0")
    assert [e.pod for e in h.events if isinstance(e, NominationCleared)] == ["default/mid"]
    calls = h.api.calls
    assert calls.index(("disrupt", "default/low-0")) < calls.index(("evict", "default/low-0"))
    assert ("nominate", "default/high-0") in calls and ("unnominate", "default/mid") in calls
    assert "preempting 1 pod(s) of default/low" in h.state.gangs["default/high"].last_reason
    preempted = [(gang, message) for gang, phase, message in h.api.reports if phase == "Preempted"]
    assert preempted == [("default/low", "1 pod(s) preempted by gang default/high (priority 100) to make room "
                                         "for pod default/high-0")]


async def test_a_gang_short_of_its_min_resources_preempts_nobody_and_is_placed_once_room_frees() -> None:
    # scheduler-plugins' Coscheduling rejects such a pod at PreFilter as unresolvable, so its preemption finds
    # no node where evicting would help: a lower-priority job that a preemption would evict keeps running.
    h = Harness(preemptor=JobPreemptor())
    h.add(*nodes(2), pod_event(bound(pod("low-0", gang="low", priority=1), "n0")),
          group_event(pod_group("low", min_member=1)))
    h.add(SchedulerPluginsPodGroupUpserted(pod_group=pod_group(
        "big", min_member=2, api_version=SCHEDULER_PLUGINS_POD_GROUP_API, min_resources={"nvidia.com/gpu": "16"})))
    h.add(*(pod_event(pod(f"big-{i}", gpus=4, priority=100, labels={SCHEDULER_PLUGINS_POD_GROUP_LABEL: "big"}))
            for i in range(2)))
    await h.settle()
    assert not [e for e in h.events if isinstance(e, EvictionRequested | PreemptionPlanned)]
    assert not h.bound_pods()
    assert "resource gap: the cluster's free room lacks nvidia.com/gpu 8" in h.state.gangs["default/big"].last_reason
    h.add(pod_event(bound(pod("low-0", gang="low", priority=1), "n0", phase="Succeeded")))
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/big-0", "default/big-1"]


async def test_a_pod_group_lowering_its_jobs_priority_brings_back_a_job_that_may_now_preempt_it() -> None:
    # Volcano jobs go by their PodGroup's class: `new` (high) cannot preempt `old` (high) until old's PodGroup
    # names a lower class; the parked `new` is then tried again at once, with nothing else changing.
    h = Harness(preemptor=JobPreemptor())
    classes = [PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name=name), value=value))
               for name, value in (("low", 10), ("high", 1000))]

    def job(name: str, class_name: str) -> VolcanoPodGroupUpserted:
        return VolcanoPodGroupUpserted(pod_group=volcano_pod_group(name, min_member=1, priority_class_name=class_name))

    member = {VOLCANO_GROUP_ANNOTATION: "old"}
    h.add(*nodes(1), *classes, job("old", "high"), pod_event(bound(pod("old-0", annotations=member), "n0")),
          job("new", "high"), pod_event(pod("new-0", annotations={VOLCANO_GROUP_ANNOTATION: "new"})))
    await h.settle()
    assert h.pods(EvictionRequested) == [] and "new-0" not in h.bound_pods()
    h.add(job("old", "low"))
    await h.settle()
    assert h.pods(EvictionRequested) == ["default/old-0"]


async def test_a_gangs_reports_reach_the_api_in_the_order_they_were_decided_even_when_one_is_slow() -> None:
    # low is bound, and its Scheduled report is slow to go out; high then preempts it. Written at
    # once, Preempted would land first and Scheduled would overwrite it: low would read Scheduled.
    h = Harness(config=SchedulerConfig(), preemptor=FixedPreemptor(evict_low_0_for_high_0()))
    released = h.api.slow_reports["Scheduled"] = anyio.Event()
    h.add(*nodes(1), *gang("low", 1, priority=1))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run)
        await wait_for(lambda: "default/low-0" in h.bound_pods())
        h.add(*gang("high", 1, priority=100))
        await wait_for(lambda: any(isinstance(e, PreemptionPlanned) for e in h.events))
        for _ in range(100):  # what the loop would write meanwhile, it writes now
            await anyio.lowlevel.checkpoint()
        assert [phase for gang, phase, _ in h.api.reports if gang == "default/low"] == []
        released.set()
        await wait_for(lambda: len([r for r in h.api.reports if r[0] == "default/low"]) == 2)
        h.scheduler.request_stop()
    assert [phase for gang, phase, _ in h.api.reports if gang == "default/low"] == ["Scheduled", "Preempted"]


async def test_graceful_stop_rolls_back_groups_waiting_at_permit() -> None:
    h = Harness()
    members = ["default/a", "default/b"]
    h.add(*nodes(4), *gang("a", 3, min_member=2, gang_group=members),
          group_event(pod_group("b", min_member=2, gang_group=members)), pod_event(pod("b-0", gang="b")))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run)
        await wait_for(h.scheduler.has_waiting)
        h.scheduler.request_stop()
    assert sorted(h.pods(PodForgotten)) == ["default/a-0", "default/a-1", "default/a-2", "default/b-0"]
    assert all(not p.assumed_node for p in h.state.pods.values())


async def test_cancelling_the_loop_mid_bind_releases_what_was_not_bound() -> None:
    h = Harness()
    h.add(*nodes(2), *gang("train", 2))
    h.api.gate = anyio.Event()  # binds hang
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run)
        await wait_for(lambda: h.api.in_flight >= 2)
        group.cancel_scope.cancel()
    assert h.bound_pods() == {}
    assert sorted(h.pods(PodForgotten)) == ["default/train-0", "default/train-1"]
    assert h.api.holds == 0  # the gang's hold on its Scheduled Events went with it


async def test_a_gang_holds_its_scheduled_events_while_it_binds_and_a_lone_pod_does_not() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None))
    h.add(*nodes(4), *gang("train", 3), pod_event(pod("solo", gpus=1)))
    await h.settle()
    assert len(h.bound_pods()) == 4
    calls = [call for call in h.api.calls if call[0] in ("hold", "release", "bind")]
    gang_binds = [i for i, (call, pod_key) in enumerate(calls) if call == "bind" and "train" in pod_key]
    hold, release = calls.index(("hold", "")), calls.index(("release", ""))
    assert calls.count(("hold", "")) == calls.count(("release", "")) == 1  # one Bind of three: one hold
    assert hold < min(gang_binds) and max(gang_binds) < release
    assert h.api.holds == 0


async def test_a_gang_whose_bind_fails_releases_its_hold_as_it_settles() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None, bind_concurrency=1))
    h.add(*nodes(2), *gang("train", 2))
    h.api.fail["default/train-1"] = BindOutcome(status="failed", reason="node gone", retriable=False)
    await h.settle()
    assert h.pods(BindFailed) == ["default/train-1"]
    assert h.api.holds == 0 and h.api.calls.count(("release", "")) == 1


async def test_daemon_loop_wakes_on_new_work_and_stops_on_request() -> None:
    h = Harness(config=SchedulerConfig())
    h.add(*nodes(2))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run)
        await anyio.lowlevel.checkpoint()
        h.add(pod_event(pod("late", gpus=1)))
        await wait_for(lambda: "default/late" in h.bound_pods())
        h.scheduler.request_stop()


class TickingClock(StillClock):
    """Each reading of the clock finds it `tick` seconds later: every unit is slow to decide."""

    def __init__(self, tick: float) -> None:
        super().__init__()
        self.tick = tick

    def now(self) -> float:
        self.time += self.tick
        return self.time


async def decided_between_turns(h: Harness, pods: int) -> list[int]:
    """Under the daemon's loop, how many pods were decided between two turns of another task."""
    h.add(*nodes(8), *(pod_event(pod(f"solo-{i}", gpus=1)) for i in range(pods)))
    seen: list[int] = []

    async def other_task() -> None:  # a watch or the lease renewal: it only needs a turn now and then
        while True:
            seen.append(len(h.pods(PodAssumed)))
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(other_task)
        group.start_soon(h.scheduler.run)
        await wait_for(lambda: len(h.bound_pods()) == pods)
        h.scheduler.request_stop()
        group.cancel_scope.cancel()
    return [later - earlier for earlier, later in itertools.pairwise(seen)]


async def test_the_daemon_loop_decides_pods_in_batches_and_still_lets_other_tasks_run_between_them() -> None:
    gaps = await decided_between_turns(Harness(config=SchedulerConfig()), 40)
    assert max(gaps) == UNITS_PER_TURN  # a batch's binds go out together
    assert sum(gaps) == 40


async def test_slow_decisions_give_other_tasks_a_turn_after_each_one() -> None:
    h = Harness(config=SchedulerConfig())
    h.clock = h.scheduler.clock = h.journal.clock = TickingClock(tick=TURN_SECONDS)
    gaps = await decided_between_turns(h, 40)
    assert max(gaps) == 1 and sum(gaps) == 40


async def test_gang_missing_its_podgroup_waits_with_a_reason_until_it_appears() -> None:
    h = Harness()
    h.add(*nodes(2), pod_event(pod("orphan-0", gang="orphan")))
    await h.settle()
    assert h.bound_pods() == {}
    assert "not found" in h.scheduler.explain_pending("default/orphan-0")
    h.clock.advance_to(3.0)
    h.add(group_event(pod_group("orphan", min_member=1)))
    await h.settle()
    assert list(h.bound_pods()) == ["default/orphan-0"]


async def test_daemon_loop_plans_other_gangs_while_binds_are_in_flight() -> None:
    h = Harness(config=SchedulerConfig())
    h.add(*nodes(4), *gang("first", 2))
    h.api.gate = anyio.Event()  # the API hangs on binds
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run)
        await wait_for(lambda: h.api.in_flight == 2)
        h.add(*gang("second", 2))
        await wait_for(lambda: len(h.pods(BindRequested)) == 4)
        assert h.bound_pods() == {}
        h.api.gate.set()
        await wait_for(lambda: len(h.bound_pods()) == 4)
        h.scheduler.request_stop()


async def test_a_nomination_is_given_up_after_the_gangs_timeout_in_the_state_and_the_api() -> None:
    plan = evict_low_0_for_high_0()
    h = Harness(preemptor=FixedPreemptor(plan))
    h.add(*nodes(1), pod_event(bound(pod("low-0", priority=1), "n0")), *gang("high", 1, priority=100, timeout=30))
    await h.settle()
    assert h.state.pods["default/high-0"].nominated_node == "n0"
    assert h.scheduler.next_deadline() == 30.0
    await h.settle(30.0)  # the victim never left (this API does not evict)
    assert h.pods(NominationCleared) == ["default/high-0"]
    assert h.state.pods["default/high-0"].nominated_node == ""
    assert ("unnominate", "default/high-0") in h.api.calls


async def test_a_gang_larger_than_any_domain_of_its_layer_waits_for_nodes_not_for_releases() -> None:
    h = Harness()
    h.add(*nodes(8), pod_event(bound(pod("busy", gpus=1), "n0")))
    must_gather_block: list[dict[str, object]] = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    h.add(group_event(pod_group("wide", min_member=6, gather=must_gather_block)),
          *[pod_event(pod(f"wide-{i}", gang="wide")) for i in range(6)])
    await h.settle()
    reason = h.state.gangs["default/wide"].last_reason
    assert "never fit" in reason and "MustGather at BlockLayer" in reason
    attempts = h.scheduler.stats.attempts
    h.add(PodDeleted(key="default/busy", uid="uid-default-busy"))
    await h.settle(1.0)
    assert h.scheduler.stats.attempts == attempts  # a release cannot help: not re-planned
    h.add(node_event(node("n8", block="b0", spine="s0")), node_event(node("n9", block="b0", spine="s0")))
    await h.settle(2.0)
    assert sorted(h.bound_pods()) == [f"default/wide-{i}" for i in range(6)]


async def test_a_parked_gang_is_replanned_only_once_enough_room_is_freed() -> None:
    h = Harness()
    h.add(*nodes(4), *[pod_event(bound(pod(f"busy-{i}"), f"n{i}")) for i in range(4)], *gang("train", 2))
    await h.settle()
    attempts = h.scheduler.stats.attempts
    h.add(PodDeleted(key="default/busy-0", uid="uid-default-busy-0"))
    await h.settle(1.0)
    assert h.scheduler.stats.attempts == attempts and h.scheduler.stats.skipped == 1
    h.add(PodDeleted(key="default/busy-1", uid="uid-default-busy-1"))
    await h.settle(2.0)
    assert sorted(h.bound_pods()) == ["default/train-0", "default/train-1"]


async def test_a_member_held_before_the_scheduler_started_wakes_its_gang_when_deleted() -> None:
    """A new leader's scheduler starts on a state that holds pods already (a first list, a restart, a
    standby's watch). A gang parked for one of them (here a member left to another scheduler, which holds
    a Kubernetes PodGroup whole) comes back as soon as that pod is deleted, not at the periodic retry."""
    clock = StillClock()
    state = ClusterState()
    journal = Journal(state, clock)
    info, pods = kind_of("scheduling.k8s.io/v1beta1", "PodGroup"), kind_of("v1", "Pod")
    assert info is not None and pods is not None
    journal.record_many([*nodes(4), upsert_event(info, {"metadata": {"name": "mixed", "namespace": "default"},
                                                        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})])
    for name, scheduler_name in (("mixed-0", "toposched"), ("mixed-1", "toposched"), ("stray", "default-scheduler")):
        journal.record(upsert_event(pods, {
            "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
            "spec": {"schedulerName": scheduler_name, "schedulingGroup": {"podGroupName": "mixed"},
                     "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}))
    recorded: list[Event] = []
    journal.subscribe(recorded.append)
    scheduler = Scheduler(journal, FakeAPI(state, journal), config=SchedulerConfig(retry_parked_seconds=None))
    await scheduler.run_until_idle()
    assert not [e for e in recorded if isinstance(e, PodBound)]
    journal.record(PodDeleted(key="default/stray", uid="u-stray"))
    await scheduler.run_until_idle()
    assert sorted(e.pod for e in recorded if isinstance(e, PodBound)) == ["default/mixed-0", "default/mixed-1"]


async def test_a_volcano_jobs_pod_group_is_enqueued_once_and_another_schedulers_never() -> None:
    # Volcano's job controller creates a Job's pods only once its PodGroup is Inqueue: the loop moves ours
    # there (once: the watch's echo ends the wait), never a Volcano-scheduled job's.
    h = Harness()
    mine, theirs = volcano_job("mine"), volcano_job("theirs", scheduler_name="volcano")
    h.add(*nodes(2), VolcanoJobUpserted(job=mine), VolcanoJobUpserted(job=theirs))
    for job in (mine, theirs):
        h.add(VolcanoPodGroupUpserted(pod_group=volcano_pod_group(
            job.metadata.name, phase="Pending", min_resources={"nvidia.com/gpu": "8"}, job_uid=job.metadata.uid)))
    await h.settle()
    assert h.api.enqueued == ["default/mine"]
    await h.settle()  # the echo has not come: nothing is asked twice
    assert h.api.enqueued == ["default/mine"]
    group = h.state.volcano_pod_groups["default/mine"]
    h.add(VolcanoPodGroupUpserted(pod_group=msgspec.structs.replace(
        group, status=msgspec.structs.replace(group.status, phase="Inqueue"))))
    await h.settle()
    assert h.api.enqueued == ["default/mine"] and not h.scheduler._enqueued


async def test_a_training_operator_jobs_pod_group_is_enqueued_once_the_job_naming_toposched_is_seen() -> None:
    # training-operator (gang scheduler volcano) makes the PodGroup as it makes the job's: whichever the watch
    # brings first, the enqueue follows the job that names toposched
    h = Harness()
    job = kubeflow_job("bert", schedulers={"Master": "toposched", "Worker": "toposched"})
    h.add(*nodes(2), VolcanoPodGroupUpserted(pod_group=volcano_pod_group(
        "bert", phase="Pending", min_resources={"nvidia.com/gpu": "8"}, job_uid=job.metadata.uid)))
    await h.settle()
    assert h.api.enqueued == []  # whose it is is not known yet
    h.add(KubeflowJobUpserted(job=job))
    await h.settle()
    assert h.api.enqueued == ["default/bert"]


async def test_a_volcano_jobs_pod_group_waiting_for_room_is_enqueued_once_a_running_pod_finishes() -> None:
    h = Harness()
    job = volcano_job("big")
    busy = bound(pod("busy", gpus=8), "n0")
    h.add(*nodes(2), pod_event(busy), VolcanoJobUpserted(job=job),
          VolcanoPodGroupUpserted(pod_group=volcano_pod_group(
              "big", phase="Pending", min_resources={"nvidia.com/gpu": "16"}, job_uid=job.metadata.uid)))
    await h.settle()
    assert h.api.enqueued == []  # 16 GPUs x 1.2 = 19.2, 8 in use: 16 do not fit
    h.add(pod_event(bound(pod("busy", gpus=8), "n0", phase="Succeeded")))
    await h.settle()
    assert h.api.enqueued == ["default/big"]
