"""Pending gang members carry PodScheduled=False with the gang's reason, written only on change:
Unschedulable once tried, NotReadyForScheduling (after 5 s) while the gang waits for its members."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec

from daemon.kube.pod_conditions import PendingPodConditions
from daemon.offline.simulator import VirtualClock
from daemon.scheduling.journal import Journal
from daemon.scheduling.ports import OK, ApiOutcome
from events.builders import bound, group_event, kai_pod_group, pod, pod_event, pod_group
from events.model import GangPending, GangPlanned, KaiPodGroupUpserted, PodAssumed, SchedulerPluginsPodGroupUpserted
from events.objects import KAI_POD_GROUP_ANNOTATION, SCHEDULER_PLUGINS_POD_GROUP_LABEL, Condition, Pod, slim
from state.cluster import ClusterState


class Writer:
    """Records each patch and, like the API server plus the watch, folds the written condition back in."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.removals: list[tuple[str, str]] = []  # (pod, the resourceVersion it was conditional on)
        self.in_flight = 0
        self.most_in_flight = 0
        self.echo = True

    async def set_pod_condition(self, pod: str, uid: str, condition: dict[str, Any]) -> ApiOutcome:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await anyio.lowlevel.checkpoint()
        self.in_flight -= 1
        self.patches.append((pod, condition))
        if self.echo:
            obj = self.journal.state.pods[pod].obj
            written = Condition(type="PodScheduled", status="False", reason=condition["reason"],
                                message=condition["message"], last_transition_time=condition["lastTransitionTime"],
                                observed_generation=condition.get("observedGeneration", 0))
            self.journal.record(pod_event(with_conditions(obj, [written])))
        return OK


    async def remove_pod_condition(self, pod: str, uid: str, resource_version: str, condition_type: str
                                   ) -> ApiOutcome:
        self.removals.append((pod, resource_version))
        obj = self.journal.state.pods[pod].obj
        if obj.metadata.resource_version != resource_version:
            return ApiOutcome(ok=False, reason="the pod changed", retriable=False)
        if self.echo:
            kept = [c for c in obj.status.conditions if c.type != condition_type]
            self.journal.record(pod_event(with_conditions(obj, kept)))
        return OK


def with_conditions(obj: Pod, conditions: list[Condition]) -> Pod:
    """The pod as the watch brings it back: slimmed as every decoded object is (what the fold keeps)."""
    return slim(msgspec.structs.replace(obj, status=msgspec.structs.replace(obj.status, conditions=conditions)))


class Harness:
    def __init__(self, *, refresh_seconds: float = 5.0, concurrency: int = 8, sweep_rate: float = 1000.0,
                 not_ready_delay: float = 5.0) -> None:
        self.state = ClusterState()
        self.journal = Journal(self.state, VirtualClock())
        self.writer = Writer(self.journal)
        self.now = [100.0]
        self.conditions = PendingPodConditions(self.state, self.writer, refresh_seconds=refresh_seconds,
                                               sweep_pods_per_second=sweep_rate, concurrency=concurrency,
                                               not_ready_delay_seconds=not_ready_delay, clock=lambda: self.now[0],
                                               wall=lambda: 1_700_000_000.0)
        self.journal.subscribe_batches(self.conditions.notice_all)

    def gang(self, name: str, size: int, start: int = 0) -> None:
        if start == 0:
            self.journal.record(group_event(pod_group(name, min_member=size)))
        for index in range(start, size):
            self.journal.record(pod_event(pod(f"{name}-{index}", gang=name)))

    def pending(self, gang: str, reason: str, *, held: bool = False) -> None:
        self.journal.record(GangPending(gang=f"default/{gang}", reason=reason, held=held))

    async def sync(self) -> None:
        await self.conditions.sync_once()

    async def marked_not_ready(self, gang: str, members: int, min_member: int) -> None:
        """`members` pods of a gang of `min_member` (its PodGroup too), held for the rest, and the delay over."""
        self.gang(gang, members)
        self.pending(gang, f"gang default/{gang}: {members} of minMember {min_member} pods exist", held=True)
        await self.sync()
        self.now[0] += self.conditions.not_ready_delay_seconds
        await self.sync()

    def condition_of(self, name: str) -> Condition | None:
        return next((c for c in self.state.pods[f"default/{name}"].obj.status.conditions if c.type == "PodScheduled"),
                    None)


async def test_every_pending_member_gets_the_gangs_reason_once_and_is_not_patched_again() -> None:
    h = Harness()
    h.gang("train", 4)
    h.pending("train", "gang default/train: no block holds 4 pods")
    await h.sync()
    assert sorted(p for p, _ in h.writer.patches) == [f"default/train-{i}" for i in range(4)]
    condition = h.condition_of("train-2")
    assert condition is not None and (condition.status, condition.reason) == ("False", "Unschedulable")
    assert condition.message == "gang default/train: no block holds 4 pods"
    h.pending("train", "gang default/train: no block holds 4 pods")  # the same reason again
    await h.sync()
    await h.sync()
    assert len(h.writer.patches) == 4


def with_generation(obj: Pod, generation: int) -> Pod:
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, generation=generation))


async def test_the_condition_names_the_pods_generation_and_is_written_again_for_a_new_one() -> None:
    """As kube-scheduler since Kubernetes 1.34 (observedGeneration); a pod of a server that keeps no generation
    gets none."""
    h = Harness(refresh_seconds=5.0)
    h.journal.record(group_event(pod_group("train", min_member=2)))
    h.journal.record(pod_event(with_generation(pod("train-0", gang="train"), 1)))
    h.journal.record(pod_event(pod("train-1", gang="train")))
    h.pending("train", "no room")
    await h.sync()
    written = dict(h.writer.patches)
    assert written["default/train-0"]["observedGeneration"] == 1
    assert "observedGeneration" not in written["default/train-1"]
    first = h.condition_of("train-0")
    assert first is not None and first.observed_generation == 1
    h.journal.record(pod_event(with_generation(h.state.pods["default/train-0"].obj, 2)))  # its spec changed
    await h.sync()
    h.now[0] += 5.0
    await h.sync()  # at its gang's next sweep
    assert [p for p, _ in h.writer.patches[2:]] == ["default/train-0"]
    again = h.condition_of("train-0")
    assert again is not None and again.observed_generation == 2 and again.message == "no room"
    assert again.last_transition_time == first.last_transition_time
    await h.sync()
    assert len(h.writer.patches) == 3


async def test_a_member_arriving_later_gets_the_condition_at_once() -> None:
    h = Harness()
    h.gang("train", 3)
    h.pending("train", "waiting")
    await h.sync()
    h.journal.record(pod_event(pod("train-3", gang="train")))
    await h.sync()
    assert [p for p, _ in h.writer.patches][-1] == "default/train-3" and len(h.writer.patches) == 4


async def test_a_changed_reason_rewrites_a_large_gangs_members_at_most_once_per_interval_keeping_the_transition_time(
) -> None:
    h = Harness(refresh_seconds=5.0, sweep_rate=1.0)  # 10 members at 1 pod/s: a sweep every 5 s at most
    h.gang("big", 10)
    h.pending("big", "reason 1")
    await h.sync()
    first_transition = h.condition_of("big-0")
    assert first_transition is not None
    for n in range(2, 8):
        h.now[0] += 1.0
        h.pending("big", f"reason {n}")
        await h.sync()
    assert len(h.writer.patches) == 10 + 10  # one sweep at t=105 (reason 6), none for the others
    h.now[0] += 5.0
    await h.sync()  # the trailing sweep: the last reason is always written
    assert len(h.writer.patches) == 30
    latest = h.condition_of("big-9")
    assert latest is not None and latest.message == "reason 7"
    assert latest.last_transition_time == first_transition.last_transition_time


async def test_placed_members_and_pods_without_a_gang_are_left_alone() -> None:
    h = Harness()
    h.gang("train", 3)
    h.journal.record(pod_event(bound(pod("train-9", gang="train"), "n1")))
    h.journal.record(pod_event(pod("lonely")))
    h.journal.record(PodAssumed(pod="default/train-1", uid="uid-default-train-1", node="n2", gang="default/train"))
    h.pending("train", "why")
    await h.sync()
    assert sorted(p for p, _ in h.writer.patches) == ["default/train-0", "default/train-2"]


async def test_patches_run_with_bounded_concurrency_and_a_new_leader_checks_every_gang_with_a_reason() -> None:
    h = Harness(concurrency=3)
    h.writer.echo = False
    h.gang("wide", 40)
    h.pending("wide", "why")
    fresh = PendingPodConditions(h.state, h.writer, concurrency=3)  # a leader starting on this state
    await fresh.sync_once()
    assert len(h.writer.patches) == 40 and h.writer.most_in_flight == 3
    await fresh.sync_once()  # written, the watch not back yet: not written twice
    assert len(h.writer.patches) == 40


async def test_a_small_gangs_members_follow_every_change_of_its_reason_at_once() -> None:
    h = Harness()
    h.gang("small", 3)
    for n in range(4):
        h.now[0] += 0.1
        h.pending("small", f"reason {n}")
        await h.sync()
    assert len(h.writer.patches) == 12
    latest = h.condition_of("small-0")
    assert latest is not None and latest.message == "reason 3"


# --------------------------------------------------------------------------- held for members (KEP-5501)

SHORT = "gang default/train: 2 of minMember 3 pods exist (0 running, 2 pending): 1 missing"


async def test_a_gang_short_of_members_is_marked_not_ready_for_scheduling_only_once_that_lasts_five_seconds() -> None:
    h = Harness()
    h.journal.record(group_event(pod_group("train", min_member=3)))
    for index in range(2):
        h.journal.record(pod_event(pod(f"train-{index}", gang="train")))
    h.pending("train", SHORT, held=True)
    await h.sync()
    h.now[0] += 4.9
    await h.sync()
    assert h.writer.patches == []  # kube-scheduler too waits 5 s before it reports a PreEnqueue hold
    h.now[0] += 0.1
    await h.sync()
    assert sorted(p for p, _ in h.writer.patches) == ["default/train-0", "default/train-1"]
    condition = h.condition_of("train-1")
    assert condition is not None and (condition.status, condition.reason) == ("False", "NotReadyForScheduling")
    assert condition.message == SHORT
    await h.sync()
    assert len(h.writer.patches) == 2


async def test_a_kai_gang_short_of_members_leaves_its_pods_unmarked_as_kai_does_and_is_marked_once_tried() -> None:
    """KAI's status updater records only a NotReady Event on a job not ready for scheduling: no pod condition."""
    h = Harness()
    h.journal.record(KaiPodGroupUpserted(pod_group=kai_pod_group("train", min_member=3)))
    for index in range(2):
        h.journal.record(pod_event(pod(f"train-{index}", annotations={KAI_POD_GROUP_ANNOTATION: "train"})))
    h.pending("train", SHORT, held=True)
    await h.sync()
    h.now[0] += 10.0
    await h.sync()
    assert h.writer.patches == []
    h.journal.record(pod_event(pod("train-2", annotations={KAI_POD_GROUP_ANNOTATION: "train"})))
    h.pending("train", "gang default/train: no room")  # tried, and it does not fit
    await h.sync()
    assert sorted(p for p, _ in h.writer.patches) == [f"default/train-{index}" for index in range(3)]
    condition = h.condition_of("train-0")
    assert condition is not None and condition.reason == "Unschedulable"


async def test_a_gang_whose_last_members_arrive_within_the_delay_costs_no_patch() -> None:
    h = Harness()
    h.journal.record(group_event(pod_group("train", min_member=3)))
    h.journal.record(pod_event(pod("train-0", gang="train")))
    h.pending("train", "gang default/train: 1 of minMember 3 pods exist", held=True)
    await h.sync()
    h.now[0] += 2.0
    for index in (1, 2):
        h.journal.record(pod_event(pod(f"train-{index}", gang="train")))
    h.journal.record(GangPlanned(gang="default/train", pods=3))
    for index in range(3):
        key = f"default/train-{index}"
        h.journal.record(PodAssumed(pod=key, uid=f"uid-default-train-{index}", node=f"n{index}",
                                    gang="default/train"))
    h.now[0] += 10.0
    await h.sync()
    assert h.writer.patches == []


async def test_a_held_gang_tried_at_last_and_failing_is_unschedulable_at_once_keeping_the_transition_time() -> None:
    h = Harness(not_ready_delay=1.0)
    await h.marked_not_ready("train", 3, 4)
    held = h.condition_of("train-0")
    assert held is not None and held.reason == "NotReadyForScheduling"
    h.now[0] += 0.5
    h.pending("train", "gang default/train: no block holds 3 pods")  # tried against nodes now
    await h.sync()
    tried = h.condition_of("train-0")
    assert tried is not None and tried.reason == "Unschedulable"
    assert tried.message == "gang default/train: no block holds 3 pods"
    assert tried.last_transition_time == held.last_transition_time  # PodScheduled stayed False
    assert len(h.writer.patches) == 6


async def test_a_scheduler_plugins_gang_short_of_members_is_unschedulable_at_once_as_its_prefilter_leaves_it() -> None:
    h = Harness()
    group = pod_group("train", min_member=3, api_version="scheduling.x-k8s.io/v1alpha1")
    h.journal.record(SchedulerPluginsPodGroupUpserted(pod_group=group))
    for index in range(2):
        h.journal.record(pod_event(pod(f"train-{index}", labels={SCHEDULER_PLUGINS_POD_GROUP_LABEL: "train"})))
    h.pending("train", SHORT, held=True)
    await h.sync()
    condition = h.condition_of("train-0")
    assert condition is not None and condition.reason == "Unschedulable" and len(h.writer.patches) == 2


async def test_scheduler_plugins_pods_whose_pod_group_is_missing_are_unschedulable_others_not_ready() -> None:
    h = Harness(not_ready_delay=0.0)
    h.journal.record(pod_event(pod("x-0", labels={SCHEDULER_PLUGINS_POD_GROUP_LABEL: "x"})))
    h.journal.record(pod_event(pod("k-0", gang="k")))
    h.pending("x", "gang default/x: PodGroup not found", held=True)
    h.pending("k", "gang default/k: PodGroup not found", held=True)
    await h.sync()
    reasons = {name: getattr(h.condition_of(name), "reason", None) for name in ("x-0", "k-0")}
    assert reasons == {"x-0": "Unschedulable", "k-0": "NotReadyForScheduling"}


async def test_the_running_writer_wakes_for_a_delay_that_falls_due_with_nothing_else_happening() -> None:
    state = ClusterState()
    journal = Journal(state, VirtualClock())
    writer = Writer(journal)
    conditions = PendingPodConditions(state, writer, not_ready_delay_seconds=0.05)
    journal.subscribe_batches(conditions.notice_all)
    journal.record(group_event(pod_group("train", min_member=2)))
    journal.record(pod_event(pod("train-0", gang="train")))
    journal.record(GangPending(gang="default/train", reason="1 of minMember 2 pods exist", held=True))
    written = anyio.Event()
    patch = writer.set_pod_condition

    async def set_pod_condition(pod: str, uid: str, condition: dict[str, Any]) -> ApiOutcome:
        outcome = await patch(pod, uid, condition)
        written.set()
        return outcome

    writer.set_pod_condition = set_pod_condition  # type: ignore[method-assign]
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(conditions.run)
            await written.wait()
            group.cancel_scope.cancel()
    assert writer.patches[0][1]["reason"] == "NotReadyForScheduling"


async def test_a_not_ready_pod_placed_but_not_yet_bound_loses_the_condition_after_the_delay() -> None:
    # Placed (its volumes being provisioned, say), it has passed the hold: kube-scheduler removes
    # NotReadyForScheduling once a pod passes PreEnqueue, after the same delay.
    h = Harness(not_ready_delay=1.0)
    await h.marked_not_ready("train", 2, 3)
    assert all(getattr(h.condition_of(f"train-{i}"), "reason", "") == "NotReadyForScheduling" for i in range(2))
    for index in range(2):
        h.journal.record(PodAssumed(pod=f"default/train-{index}", uid=f"uid-default-train-{index}", node="n1",
                                    gang="default/train"))
    await h.sync()
    assert h.writer.removals == []  # a Binding within the delay would make the write needless
    h.now[0] += 1.0
    await h.sync()
    assert sorted(p for p, _ in h.writer.removals) == ["default/train-0", "default/train-1"]
    assert h.condition_of("train-0") is None and h.conditions.cleared == 2
    await h.sync()
    assert len(h.writer.removals) == 2


async def test_a_pod_bound_before_the_clear_falls_due_is_left_alone() -> None:
    h = Harness(not_ready_delay=1.0)
    await h.marked_not_ready("train", 1, 2)
    h.journal.record(PodAssumed(pod="default/train-0", uid="uid-default-train-0", node="n1", gang="default/train"))
    obj = h.state.pods["default/train-0"].obj
    h.journal.record(pod_event(bound(obj, "n1")))
    h.now[0] += 1.0
    await h.sync()
    assert h.writer.removals == []
