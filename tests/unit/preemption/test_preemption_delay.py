"""KAI's preemption delay (`spec.preemptionDelay`, KAI 0.17): a gang pending for less than its delay evicts no
one, by priority preemption or by reclaim; the refusal says until when and asks to be tried again then. The
delay counts from the PodGroup's creation, or from its last eviction (`kai.scheduler/last-eviction-timestamp`)
when later, or, with neither known, from when toposched first saw the gang."""

from __future__ import annotations

from collections.abc import Sequence

from events.builders import bound, gpu_nodes, kai_pod_group, kai_queue, pod, pod_event
from events.model import Event, KaiPodGroupUpserted, KaiQueueUpserted, PriorityClassUpserted
from events.objects import KAI_LAST_EVICTION_ANNOTATION, KAI_POD_GROUP_ANNOTATION, ObjectMeta, PriorityClass
from preemption.hook import go_duration_text, rfc3339_text
from state.cluster import ClusterState
from state.kai_gangs import rfc3339_seconds

from .test_min_runtime import OPEN, ask

CREATED = "2026-07-12T10:28:43Z"
T0 = 1783852123.0  # CREATED in epoch seconds


def job(name: str, queue: str, *, nodes: Sequence[str] = (), pending: int = 0, priority_class: str = "train",
        at: float = T0, delay: str | None = None, created: str = "",
        annotations: dict[str, str] | None = None) -> list[Event]:
    events: list[Event] = [KaiPodGroupUpserted(pod_group=kai_pod_group(
        name, min_member=len(nodes) + pending, queue=queue, priority_class_name=priority_class,
        preemptibility="preemptible", preemption_delay=delay, created=created, annotations=annotations), time=at)]
    member = {KAI_POD_GROUP_ANNOTATION: name}
    events += [pod_event(bound(pod(f"{name}-{index}", annotations=member), node), time=at)
               for index, node in enumerate(nodes)]
    events += [pod_event(pod(f"{name}-{len(nodes) + index}", annotations=member), time=at) for index in range(pending)]
    return events


def cluster(*events: Event) -> ClusterState:
    state = ClusterState()
    classes = [PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name=name), value=value))
               for name, value in (("train", 50), ("urgent", 1000))]
    queues = [KaiQueueUpserted(queue=kai_queue("burst", cpu=OPEN, memory=OPEN, gpu=(0.0, -1.0, 1.0))),
              KaiQueueUpserted(queue=kai_queue("team", cpu=OPEN, memory=OPEN, gpu=(16.0, -1.0, 1.0)))]
    state.apply_all([*gpu_nodes(2), *classes, *queues, *events])
    return state


def test_a_gang_within_its_delay_preempts_no_one_until_the_delay_has_passed_since_its_creation() -> None:
    state = cluster(*job("old", "team", nodes=["n0", "n1"], at=T0 - 600),
                    *job("urgent", "team", pending=2, priority_class="urgent", delay="5m", created=CREATED))
    held = ask(state, "default/urgent", now=T0 + 10)
    assert held is not None and not held.victims and not held.nominations
    assert held.retry_at == T0 + 300
    assert held.explanation == ("no preemption: within its preemption delay window (5m0s), it may not evict others "
                                "before 2026-07-12T10:33:43Z"), held.explanation
    taken = ask(state, "default/urgent", now=T0 + 300)
    assert taken is not None and taken.victim_jobs == ("default/old",)


def test_the_delay_counts_again_from_the_gangs_last_eviction() -> None:
    evicted = "2026-07-12T11:00:00Z"
    state = cluster(*job("old", "team", nodes=["n0", "n1"], at=T0 - 600),
                    *job("urgent", "team", pending=2, priority_class="urgent", delay="90s", created=CREATED,
                         annotations={KAI_LAST_EVICTION_ANNOTATION: evicted}))
    since = rfc3339_seconds(evicted)
    assert since is not None
    held = ask(state, "default/urgent", now=since + 60)  # long past its creation's window
    assert held is not None and not held.victims and held.retry_at == since + 90
    assert ask(state, "default/urgent", now=since + 90) is not None


def test_without_a_creation_time_the_delay_counts_from_when_the_gang_was_first_seen() -> None:
    state = cluster(*job("old", "team", nodes=["n0", "n1"], at=100.0),
                    *job("urgent", "team", pending=2, priority_class="urgent", delay="1m", at=200.0))
    held = ask(state, "default/urgent", now=230.0)
    assert held is not None and not held.victims and held.retry_at == 260.0


def test_a_reclaim_waits_for_the_delay_too() -> None:
    state = cluster(*job("scratch", "burst", nodes=["n0", "n1"], at=T0 - 600),
                    *job("mine", "team", pending=2, delay="1h", created=CREATED))
    held = ask(state, "default/mine", now=T0 + 1)
    assert held is not None and not held.victims and held.retry_at == T0 + 3600
    assert "(1h0m0s)" in held.explanation
    taken = ask(state, "default/mine", now=T0 + 3600)
    assert taken is not None and taken.reclaim_from == ("KAI queue burst",)


def test_a_gang_without_a_delay_or_with_an_unusable_one_preempts_at_once() -> None:
    for delay in (None, "0s", "300", "-5m"):
        state = cluster(*job("old", "team", nodes=["n0", "n1"], at=T0 - 600),
                        *job("urgent", "team", pending=2, priority_class="urgent", delay=delay, created=CREATED))
        plan = ask(state, "default/urgent", now=T0 + 1)
        assert plan is not None and plan.victim_jobs == ("default/old",), delay


def test_durations_and_times_read_as_kai_writes_them() -> None:
    assert [go_duration_text(s) for s in (300.0, 90.0, 3600.0, 5400.5, 0.25)] == [
        "5m0s", "1m30s", "1h0m0s", "1h30m0.5s", "0.25s"]
    assert rfc3339_seconds(CREATED) == T0 and rfc3339_text(T0) == CREATED
    assert rfc3339_seconds("2026-07-12T10:28:43+02:00") == T0 - 7200
    assert rfc3339_seconds("yesterday") is None and rfc3339_seconds("") is None
    assert rfc3339_text(1e18) == "9999-12-31T23:59:59Z" and rfc3339_text(-5.0) == "1970-01-01T00:00:00Z"


def test_a_delay_past_what_go_holds_is_ignored_and_a_stamp_in_the_year_9999_never_breaks_the_message() -> None:
    state = cluster(*job("old", "team", nodes=["n0", "n1"], at=T0 - 600),
                    *job("urgent", "team", pending=2, priority_class="urgent", delay="2562048h", created=CREATED))
    plan = ask(state, "default/urgent", now=T0 + 1)  # Go's ParseDuration refuses it: no delay, as in KAI
    assert plan is not None and plan.victim_jobs == ("default/old",)
    state = cluster(*job("old", "team", nodes=["n0", "n1"], at=T0 - 600),
                    *job("urgent", "team", pending=2, priority_class="urgent", delay="2562047h", created=CREATED,
                         annotations={KAI_LAST_EVICTION_ANNOTATION: "9999-12-31T23:59:59Z"}))
    held = ask(state, "default/urgent", now=T0 + 1)
    assert held is not None and not held.victims and held.explanation.endswith("before 9999-12-31T23:59:59Z")
