"""KAI's min runtimes (a Queue's `preemptMinRuntime` / `reclaimMinRuntime`, KAI's minruntime plugin): a job
that started less than that long before the decision is not taken whole by priority preemption inside its
queue, nor by a reclaim; its pods above minMember may still go; the refusal says so and when to try again."""

from __future__ import annotations

from collections.abc import Sequence

from daemon.scheduling.ports import Preemptee
from events.builders import bound, gpu_nodes, kai_pod_group, kai_queue, pod, pod_event
from events.model import Event, KaiPodGroupUpserted, KaiQueueUpserted, PriorityClassUpserted
from events.objects import KAI_POD_GROUP_ANNOTATION, ObjectMeta, PriorityClass
from placement import Unschedulable, plan_gang
from preemption import JobPreemptor
from preemption.plan import PreemptionPlan
from state.cluster import ClusterState

OPEN = (-1.0, -1.0, 1.0)


def job(name: str, queue: str, *, nodes: Sequence[str] = (), pending: int = 0, min_member: int | None = None,
        priority_class: str = "train", started: float = 0.0) -> list[Event]:
    size = len(nodes) + pending
    events: list[Event] = [KaiPodGroupUpserted(pod_group=kai_pod_group(
        name, min_member=min_member or size, queue=queue, priority_class_name=priority_class,
        preemptibility="preemptible"))]
    annotations = {KAI_POD_GROUP_ANNOTATION: name}
    for index, node in enumerate(nodes):  # bound one second apart: the last one starts the job
        events.append(pod_event(bound(pod(f"{name}-{index}", annotations=annotations), node),
                                time=started + index))
    events += [pod_event(pod(f"{name}-{len(nodes) + index}", annotations=annotations), time=started + len(nodes))
               for index in range(pending)]
    return events


def cluster(*events: Event, **runtimes: str) -> ClusterState:
    state = ClusterState()
    classes = [PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name=name), value=value))
               for name, value in (("train", 50), ("urgent", 1000))]
    queues = [KaiQueueUpserted(queue=kai_queue("burst", cpu=OPEN, memory=OPEN, gpu=(0.0, -1.0, 1.0),
                                               reclaim_min_runtime=runtimes.get("reclaim"))),
              KaiQueueUpserted(queue=kai_queue("team", cpu=OPEN, memory=OPEN, gpu=(16.0, -1.0, 1.0),
                                               preempt_min_runtime=runtimes.get("preempt")))]
    state.apply_all([*gpu_nodes(2), *classes, *queues, *events])
    return state


def ask(state: ClusterState, gang: str, now: float) -> PreemptionPlan | None:
    failure = plan_gang(state, gang)
    assert isinstance(failure, Unschedulable), failure
    pods = tuple(sorted(state.gangs[gang].members))
    plan = JobPreemptor().plan(state, Preemptee(key=gang, gangs=(gang,), pods=pods, priority=state.pods[pods[0]]
                                                .priority, now=now), failure)
    assert plan is None or isinstance(plan, PreemptionPlan)
    return plan


def test_a_job_younger_than_its_queues_preempt_min_runtime_is_kept_and_taken_once_it_has_run_that_long() -> None:
    state = cluster(*job("old", "team", nodes=["n0", "n1"], started=10.0),
                    *job("urgent", "team", pending=2, priority_class="urgent", started=20.0), preempt="1m")
    kept = ask(state, "default/urgent", now=40.0)  # old started at 11 (its last pod): kept until 71
    assert kept is not None and not kept.victims
    assert kept.retry_at == 71.0
    assert kept.explanation.endswith("1 job(s) kept as their KAI queue's preemptMinRuntime has not passed since "
                                     "they started (the first may go in 31s)"), kept.explanation
    taken = ask(state, "default/urgent", now=71.0)
    assert taken is not None and taken.victim_jobs == ("default/old",)


def test_a_kept_jobs_pods_above_min_member_may_still_go() -> None:
    # old runs 2 pods, needs 1: the pod above its minimum is no job of its own to keep (KAI's elastic jobs)
    state = cluster(*job("old", "team", nodes=["n0", "n1"], min_member=1),
                    *job("urgent", "team", pending=1, priority_class="urgent", started=5.0), preempt="1h")
    plan = ask(state, "default/urgent", now=6.0)
    assert plan is not None and plan.victims == ("default/old-1",)  # the most recently started one


def test_a_job_younger_than_its_queues_reclaim_min_runtime_is_not_reclaimed_until_then() -> None:
    state = cluster(*job("scratch", "burst", nodes=["n0", "n1"]),
                    *job("mine", "team", pending=2, started=3.0), reclaim="30s")
    kept = ask(state, "default/mine", now=5.0)  # scratch started at 1: kept until 31
    assert kept is not None and not kept.victims and kept.retry_at == 31.0
    assert "reclaimMinRuntime has not passed" in kept.explanation, kept.explanation
    taken = ask(state, "default/mine", now=31.0)
    assert taken is not None and taken.victim_jobs == ("default/scratch",)
    assert taken.reclaim_from == ("KAI queue burst",)


def test_without_min_runtimes_nothing_is_kept() -> None:
    state = cluster(*job("old", "team", nodes=["n0", "n1"], started=10.0),
                    *job("urgent", "team", pending=2, priority_class="urgent", started=20.0))
    plan = ask(state, "default/urgent", now=12.0)
    assert plan is not None and plan.victim_jobs == ("default/old",) and plan.retry_at is None
