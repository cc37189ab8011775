"""Quota-aware preemption (preemption/reclaim.py through JobPreemptor): priority preemption stays in
its quota; a quota under its min takes back whole borrowing gangs, preemptible ones only, no more
than the borrowers borrow; KAI jobs of priority 100 or more that do not say otherwise are neither."""

from __future__ import annotations

from events.builders import (
    bound,
    elastic_quota,
    gpu_nodes,
    gpus,
    kai_pod_group,
    kai_queue,
    pod,
    pod_event,
    pod_group,
    queue,
    volcano_pod_group,
)
from events.model import (
    ElasticQuotaUpserted,
    Event,
    KaiPodGroupUpserted,
    KaiQueueUpserted,
    PodGroupUpserted,
    PriorityClassUpserted,
    QueueUpserted,
    VolcanoPodGroupUpserted,
)
from events.objects import (
    KAI_POD_GROUP_ANNOTATION,
    KAI_QUEUE_LABEL,
    QUOTA_PREEMPTIBLE_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    VOLCANO_PREEMPTABLE_ANNOTATION,
    ObjectMeta,
    PriorityClass,
)
from placement import Unschedulable, plan_gang
from preemption import JobPreemptor
from preemption.plan import PreemptionPlan
from state.cluster import ClusterState


def cluster(*events: Event, nodes: int = 4) -> ClusterState:
    state = ClusterState()
    state.apply_all([*gpu_nodes(nodes, per_block=2), *events])
    return state


def running_gang(name: str, nodes: list[str], *, namespace: str, priority: int = 0, started: float = 0.0,
                 labels: dict[str, str] | None = None) -> list[Event]:
    events: list[Event] = [PodGroupUpserted(pod_group=pod_group(name, namespace=namespace, min_member=len(nodes)))]
    events += [pod_event(bound(pod(f"{name}-{i}", namespace=namespace, gang=name, priority=priority, labels=labels),
                               node), time=started) for i, node in enumerate(nodes)]
    return events


def pending_gang(name: str, size: int, *, namespace: str, priority: int = 0) -> list[Event]:
    events: list[Event] = [PodGroupUpserted(pod_group=pod_group(name, namespace=namespace, min_member=size))]
    events += [pod_event(pod(f"{name}-{i}", namespace=namespace, gang=name, priority=priority), time=100.0)
               for i in range(size)]
    return events


def quotas(a_min: int, b_min: int, *, total_max: int = 32) -> list[Event]:
    return [ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="team-a", minimum=gpus(a_min),
                                                     maximum=gpus(total_max))),
            ElasticQuotaUpserted(quota=elastic_quota("team-b", namespace="team-b", minimum=gpus(b_min),
                                                     maximum=gpus(total_max)))]


def ask(state: ClusterState, gang: str) -> PreemptionPlan | None:
    failure = plan_gang(state, gang)
    assert isinstance(failure, Unschedulable), failure
    from daemon.scheduling.ports import Preemptee
    info = state.gangs[gang]
    pods = tuple(sorted(info.members))
    plan = JobPreemptor().plan(state, Preemptee(key=gang, gangs=(gang,), pods=pods, priority=0, now=state.last_time),
                               failure)
    assert plan is None or isinstance(plan, PreemptionPlan)
    return plan


def test_a_quota_under_its_min_reclaims_whole_borrowing_gangs_of_any_priority() -> None:
    state = cluster(*quotas(8, 16),
                    *running_gang("a1", ["n0"], namespace="team-a", priority=1000, started=0.0),
                    *running_gang("a2", ["n1"], namespace="team-a", priority=1000, started=10.0),
                    *running_gang("a3", ["n2"], namespace="team-a", priority=1000, started=20.0),
                    *running_gang("a4", ["n3"], namespace="team-a", priority=1000, started=30.0),
                    *pending_gang("b1", 2, namespace="team-b"))
    plan = ask(state, "team-b/b1")
    assert plan is not None and plan.victims == ("team-a/a3-0", "team-a/a4-0")
    assert plan.reclaim_from == ("quota team-a",)
    assert "reclaim: quota team-b nvidia.com/gpu 0 used + 16 asked <= min 16" in plan.explanation
    assert "taken back from: quota team-a" in plan.explanation


def test_reclaim_takes_no_more_than_the_victim_borrows() -> None:
    # team-a borrows 8 beyond its min 24: one whole gang may go, never a second one; the other two
    # nodes run pods in no quota, which nobody reclaims. So team-b's 16 GPUs cannot be found.
    state = cluster(*quotas(24, 16),
                    *running_gang("a1", ["n0"], namespace="team-a", started=0.0),
                    *running_gang("a2", ["n1"], namespace="team-a", started=10.0),
                    *running_gang("a3", ["n2"], namespace="team-a", started=20.0),
                    *running_gang("a4", ["n3"], namespace="team-a", started=30.0),
                    *running_gang("sys", ["n4", "n5"], namespace="kube-system"),
                    *pending_gang("b1", 2, namespace="team-b"), nodes=6)
    plan = ask(state, "team-b/b1")
    assert plan is not None and not plan.victims
    assert plan.explanation.startswith("no reclaim: ")


def test_a_quota_at_or_under_its_min_never_loses_pods_to_reclaim() -> None:
    state = cluster(*quotas(16, 16),
                    *running_gang("a1", ["n0", "n1"], namespace="team-a"),
                    *pending_gang("b1", 4, namespace="team-b"),
                    nodes=3)
    plan = ask(state, "team-b/b1")
    assert plan is None or not plan.victims


def test_reclaim_never_takes_non_preemptible_pods() -> None:
    core = {QUOTA_PREEMPTIBLE_LABEL: "false"}
    state = cluster(*quotas(8, 16),
                    *running_gang("core", ["n0", "n1"], namespace="team-a", labels=core, started=30.0),
                    *running_gang("e1", ["n2"], namespace="team-a", started=0.0),
                    *running_gang("e2", ["n3"], namespace="team-a", started=0.0),
                    *pending_gang("b1", 2, namespace="team-b"))
    plan = ask(state, "team-b/b1")
    assert plan is not None and plan.victims == ("team-a/e1-0", "team-a/e2-0")


def test_priority_preemption_stays_inside_the_preemptors_quota() -> None:
    # team-b has no min to claim back: its high priority does not let it evict team-a's low-priority
    # pods (priorities of two quotas are not compared). Without quotas the same pods are preempted.
    jobs = [*running_gang("a1", ["n0", "n1", "n2", "n3"], namespace="team-a", priority=1),
            *pending_gang("b1", 2, namespace="team-b", priority=1000)]
    with_quotas = cluster(*quotas(32, 0), *jobs)
    assert ask(with_quotas, "team-b/b1") is None
    without = cluster(*jobs)
    plan = ask(without, "team-b/b1")
    assert plan is not None and plan.victims == tuple(f"team-a/a1-{i}" for i in range(4))


def test_priority_preemption_inside_one_quota_works_as_before() -> None:
    state = cluster(*quotas(0, 64, total_max=64),
                    *running_gang("low", ["n0", "n1"], namespace="team-b", priority=1),
                    *running_gang("other", ["n2", "n3"], namespace="team-a", priority=1),
                    *pending_gang("high", 2, namespace="team-b", priority=1000))
    plan = ask(state, "team-b/high")
    assert plan is not None
    assert set(plan.victims) <= {"team-a/other-0", "team-a/other-1", "team-b/low-0", "team-b/low-1"}
    # team-b is within its min: it reclaims team-a's borrowing gang first
    assert plan.victims == ("team-a/other-0", "team-a/other-1") and plan.reclaim_from == ("quota team-a",)


def test_a_non_reclaimable_volcano_queue_keeps_what_it_borrows() -> None:
    def vgang(name: str, queue_name: str, nodes: list[str]) -> list[Event]:
        events: list[Event] = [VolcanoPodGroupUpserted(pod_group=volcano_pod_group(name, queue=queue_name,
                                                                                   min_member=len(nodes)))]
        annotations = {VOLCANO_GROUP_ANNOTATION: name, VOLCANO_PREEMPTABLE_ANNOTATION: "true"}
        events += [pod_event(bound(pod(f"{name}-{i}", annotations=annotations), node)) for i, node in enumerate(nodes)]
        return events

    state = cluster(QueueUpserted(queue=queue("train", deserved=gpus(16))),
                    QueueUpserted(queue=queue("frozen", reclaimable=False)),
                    *vgang("fz", "frozen", ["n0", "n1", "n2", "n3"]),
                    VolcanoPodGroupUpserted(pod_group=volcano_pod_group("t1", queue="train", min_member=2)),
                    *(pod_event(pod(f"t1-{i}", annotations={VOLCANO_GROUP_ANNOTATION: "t1"})) for i in range(2)))
    plan = ask(state, "default/t1")
    assert plan is None or not plan.victims


# --------------------------------------------------------------------------- KAI: non-preemptible by priority

KAI_OPEN = (0.0, -1.0, 1.0)
DESERVES_ALL = (-1.0, -1.0, 1.0)


def kai_classes() -> list[Event]:
    """KAI's own priority classes (docs/priority): train 50, build 100, inference 125."""
    return [PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name=name), value=value))
            for name, value in (("train", 50), ("build", 100), ("inference", 125), ("urgent", 1000))]


def kai_running(name: str, queue_name: str, nodes: list[str], *, priority_class: str, priority: int,
                preemptibility: str = "") -> list[Event]:
    events: list[Event] = [KaiPodGroupUpserted(pod_group=kai_pod_group(
        name, queue=queue_name, min_member=len(nodes), priority_class_name=priority_class,
        preemptibility=preemptibility))]
    events += [pod_event(bound(pod(f"{name}-{i}", priority=priority, annotations={KAI_POD_GROUP_ANNOTATION: name}),
                               node)) for i, node in enumerate(nodes)]
    return events


def kai_pending(name: str, queue_name: str, size: int, *, priority: int) -> list[Event]:
    # of a class above 100 yet preemptible as its PodGroup says: it may go over its queue's quota
    events: list[Event] = [KaiPodGroupUpserted(pod_group=kai_pod_group(name, queue=queue_name, min_member=size,
                                                                       priority_class_name="urgent",
                                                                       preemptibility="preemptible"))]
    events += [pod_event(pod(f"{name}-{i}", priority=priority, annotations={KAI_POD_GROUP_ANNOTATION: name}),
                         time=100.0) for i in range(size)]
    return events


def test_a_kai_inference_job_is_never_preempted_and_a_train_job_is() -> None:
    # KAI docs/priority: a PriorityClass of 100 or more is non-preemptible; `inference` (125) keeps its
    # nodes against an `urgent` job of the same queue, `train` (50) gives them up
    state = cluster(*kai_classes(),
                    KaiQueueUpserted(queue=kai_queue("team", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(0.0, -1.0, 1.0))),
                    *kai_running("serve", "team", ["n0", "n1"], priority_class="inference", priority=125),
                    *kai_running("train", "team", ["n2", "n3"], priority_class="train", priority=50),
                    *kai_pending("urgent", "team", 2, priority=1000))
    plan = ask(state, "default/urgent")
    assert plan is not None and plan.victims == ("default/train-0", "default/train-1")
    state.apply_all(kai_running("train", "team", ["n2", "n3"], priority_class="train", priority=50,
                                preemptibility="non-preemptible"))
    refused = ask(state, "default/urgent")
    assert refused is None or not refused.victims


def test_a_kai_queue_under_its_quota_reclaims_a_build_job_only_when_its_podgroup_says_preemptible() -> None:
    def world(preemptibility: str) -> ClusterState:
        return cluster(*kai_classes(),
                       KaiQueueUpserted(queue=kai_queue("a", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(0.0, -1.0, 1.0))),
                       KaiQueueUpserted(queue=kai_queue("b", cpu=DESERVES_ALL, memory=DESERVES_ALL,
                                                        gpu=(16.0, -1.0, 1.0))),
                       *kai_running("build", "a", ["n0", "n1", "n2", "n3"], priority_class="build", priority=100,
                                    preemptibility=preemptibility),
                       *kai_pending("b1", "b", 2, priority=0))

    plan = ask(world("preemptible"), "default/b1")
    assert plan is not None and plan.reclaim_from == ("KAI queue a",) and len(plan.victims) == 4
    # unstated: `build` (100) is non-preemptible as KAI reads it, and queue a keeps what it borrows
    kept = ask(world(""), "default/b1")
    assert kept is None or not kept.victims


def test_a_lone_pod_labelled_into_a_kai_queue_of_priority_100_is_never_a_victim() -> None:
    state = cluster(*kai_classes(),
                    KaiQueueUpserted(queue=kai_queue("team", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(0.0, -1.0, 1.0))),
                    *(pod_event(bound(pod(f"serve-{i}", priority=125, labels={KAI_QUEUE_LABEL: "team"}), f"n{i}"))
                      for i in range(3)),
                    pod_event(bound(pod("batch-0", priority=50, labels={KAI_QUEUE_LABEL: "team"}), "n3")),
                    *kai_pending("urgent", "team", 2, priority=1000))
    plan = ask(state, "default/urgent")  # one node can be freed (batch-0's); the gang needs two
    assert plan is None or not plan.victims


def test_a_kai_queue_under_its_fair_share_takes_back_what_a_queue_over_its_own_uses() -> None:
    # KAI's MaintainFairShare reclaim: two queues with no quota and equal overQuotaWeight share the idle
    # cluster half and half once both ask. `a` took all 4 nodes while alone; `b` asks for 2 and gets
    # them back from `a`, never more than brings `a` down to its half.
    def world(b_asks: int, a_weight: float = 1.0) -> ClusterState:
        return cluster(KaiQueueUpserted(queue=kai_queue("a", cpu=DESERVES_ALL, memory=DESERVES_ALL,
                                                        gpu=(0.0, -1.0, a_weight))),
                       KaiQueueUpserted(queue=kai_queue("b", cpu=DESERVES_ALL, memory=DESERVES_ALL,
                                                        gpu=(0.0, -1.0, 1.0))),
                       *(event for i in range(4)
                         for event in kai_running(f"a{i}", "a", [f"n{i}"], priority_class="", priority=0)),
                       *kai_pending("b1", "b", b_asks, priority=0))

    plan = ask(world(2), "default/b1")
    assert plan is not None and plan.reclaim_from == ("KAI queue a",) and len(plan.victims) == 2
    assert "reclaim: KAI queue b nvidia.com/gpu 0 used + 16 asked <= fair share 16" in plan.explanation
    over = ask(world(3), "default/b1")  # 24 is over b's fair share of 16: nothing is taken back
    assert over is None or not over.victims
    # with no overQuotaWeight `a` has no fair share beyond its quota (0): `b` may take all it asks for
    plan = ask(world(3, a_weight=0.0), "default/b1")
    assert plan is not None and len(plan.victims) == 3
