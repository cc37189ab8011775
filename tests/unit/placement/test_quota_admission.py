"""Quota admission (placement/quota.py), as placement applies it: all or nothing against the quota,
with reasons naming the quota and the resource."""

from __future__ import annotations

import msgspec

from events.builders import (
    bound,
    capacity_quota,
    elastic_quota,
    gpu_nodes,
    gpus,
    kai_pod_group,
    kai_queue,
    node,
    pod,
    pod_event,
    pod_group,
    queue,
    volcano_pod_group,
)
from events.model import (
    CapacityElasticQuotaUpserted,
    ElasticQuotaUpserted,
    Event,
    KaiPodGroupUpserted,
    KaiQueueUpserted,
    NodeUpserted,
    PodGroupUpserted,
    PriorityClassUpserted,
    QueueUpserted,
    VolcanoPodGroupUpserted,
)
from events.objects import (
    KAI_POD_GROUP_ANNOTATION,
    KAI_QUEUE_LABEL,
    QUOTA_NAME_LABEL,
    QUOTA_PREEMPTIBLE_LABEL,
    ObjectMeta,
    PriorityClass,
)
from placement import GangPlan, Unschedulable, plan_gang, plan_pod
from placement.plan import QUOTA, QUOTA_MEMBERSHIP, QUOTA_NON_PREEMPTIBLE, QUOTA_OVER_MAX
from state.cluster import ClusterState


def cluster(*events: Event, nodes: int = 8) -> ClusterState:
    state = ClusterState()
    state.apply_all([*gpu_nodes(nodes, per_block=4), *events])
    return state


def gang(name: str, size: int, *, gpus_each: int = 8, min_member: int | None = None, namespace: str = "default",
         labels: dict[str, str] | None = None) -> list[Event]:
    events: list[Event] = [PodGroupUpserted(pod_group=pod_group(name, namespace=namespace,
                                                                min_member=min_member or size))]
    events += [pod_event(pod(f"{name}-{i}", namespace=namespace, gang=name, gpus=gpus_each, labels=labels))
               for i in range(size)]
    return events


def running(name: str, node: str, *, gpus_each: int = 8, namespace: str = "default",
            labels: dict[str, str] | None = None) -> Event:
    return pod_event(bound(pod(name, namespace=namespace, gpus=gpus_each, labels=labels), node))


def test_the_reason_names_quota_resource_usage_ask_and_max() -> None:
    state = cluster(
        ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="default", minimum=gpus(16), maximum=gpus(48))),
        *(running(f"r{i}", f"n{i}") for i in range(5)),
        *gang("big", 2),
    )
    result = plan_gang(state, "default/big")
    assert isinstance(result, Unschedulable) and result.constraint == QUOTA
    assert result.reason == "gang default/big: quota team-a: nvidia.com/gpu 40 used + 16 asked > max 48"


def test_a_gang_within_max_borrows_up_to_its_runtime_share() -> None:
    state = cluster(
        ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="default", minimum=gpus(8), maximum=gpus(64))),
        ElasticQuotaUpserted(quota=elastic_quota("team-b", namespace="other", minimum=gpus(32), maximum=gpus(64))),
        *gang("wide", 4),
    )
    assert isinstance(plan_gang(state, "default/wide"), GangPlan)  # team-b idle: its min is lent
    for i in range(4):  # team-b asks for its min back: team-a's share shrinks to 64 - 32 = 32
        state.apply(pod_event(pod(f"b{i}", namespace="other")))
    state.apply(running("r0", "n0"))
    state.apply(running("r1", "n1"))
    state.apply(running("r2", "n2"))
    result = plan_gang(state, "default/wide")
    assert isinstance(result, Unschedulable)
    assert "quota team-a: nvidia.com/gpu 24 used + 32 asked > runtime 32" in result.reason


def test_non_preemptible_pods_count_against_min_only() -> None:
    core = {QUOTA_PREEMPTIBLE_LABEL: "false"}
    state = cluster(
        ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="default", minimum=gpus(16), maximum=gpus(64))),
        running("core-0", "n0", labels=core),
        *gang("more-core", 2, labels=core),
        *gang("elastic", 2),
    )
    refused = plan_gang(state, "default/more-core")
    assert isinstance(refused, Unschedulable)
    assert "8 used by non-preemptible pods + 16 asked > min 16" in refused.reason
    assert isinstance(plan_gang(state, "default/elastic"), GangPlan)  # preemptible pods may borrow


def test_pods_beyond_min_member_are_placed_as_far_as_the_quota_goes() -> None:
    state = cluster(
        ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="default", minimum=gpus(8), maximum=gpus(24))),
        *gang("elastic", 4, min_member=2),
    )
    plan = plan_gang(state, "default/elastic")
    assert isinstance(plan, GangPlan)
    assert len(plan.assignments) == 3
    assert "1 pending pod(s) wait for quota (quota team-a: nvidia.com/gpu 0 used + 32 asked > max 24)" in (
        plan.explanation)


def test_pods_treated_as_gone_give_their_quota_back() -> None:
    state = cluster(
        ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="default", minimum=gpus(8), maximum=gpus(16))),
        running("old-0", "n0"), running("old-1", "n1"),
        *gang("new", 2),
    )
    assert isinstance(plan_gang(state, "default/new"), Unschedulable)
    assert isinstance(plan_gang(state, "default/new", ignore_pods={"default/old-0", "default/old-1"}), GangPlan)


def test_a_lone_pod_is_admitted_by_its_quota_too() -> None:
    state = cluster(
        ElasticQuotaUpserted(quota=elastic_quota("team-a", namespace="default", minimum=gpus(0), maximum=gpus(4))),
        pod_event(pod("solo", gpus=8)),
    )
    result = plan_pod(state, "default/solo")
    assert isinstance(result, Unschedulable) and result.constraint == QUOTA
    assert result.reason == "pod default/solo: quota team-a: nvidia.com/gpu 0 used + 8 asked > max 4"


def test_a_missing_quota_refuses_the_pod_with_its_name() -> None:
    state = cluster(
        ElasticQuotaUpserted(quota=elastic_quota("team-a", minimum=gpus(8), maximum=gpus(8))),
        pod_event(pod("solo", labels={QUOTA_NAME_LABEL: "team-z"})),
    )
    result = plan_pod(state, "default/solo")
    assert isinstance(result, Unschedulable)
    assert "quota team-z not found" in result.reason


def test_a_closed_volcano_queue_admits_no_new_job_and_capability_is_a_ceiling() -> None:
    state = cluster(
        QueueUpserted(queue=queue("closed", state="Closed")),
        QueueUpserted(queue=queue("small", capability=gpus(8))),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("a", queue="closed", min_member=1)),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("b", queue="small", min_member=2)),
        pod_event(pod("a-0", annotations={"scheduling.k8s.io/group-name": "a"})),
        *(pod_event(pod(f"b-{i}", annotations={"scheduling.k8s.io/group-name": "b"})) for i in range(2)),
    )
    closed = plan_gang(state, "default/a")
    assert isinstance(closed, Unschedulable) and "queue closed is Closed: it admits no new job" in closed.reason
    ceiling = plan_gang(state, "default/b")
    assert isinstance(ceiling, Unschedulable)
    assert "queue small: nvidia.com/gpu 0 used + 16 asked > capability 8" in ceiling.reason


def test_capacity_quotas_borrow_only_the_unused_sum_of_mins_but_always_get_their_own_min() -> None:
    state = cluster(
        CapacityElasticQuotaUpserted(quota=capacity_quota("team-x", minimum=gpus(8), maximum=gpus(32))),
        CapacityElasticQuotaUpserted(quota=capacity_quota("team-y", minimum=gpus(8), maximum=gpus(32))),
        running("x0", "n0", namespace="team-x"), running("x1", "n1", namespace="team-x"),
        *gang("x-more", 1, namespace="team-x"),
        *gang("y-own", 1, namespace="team-y"),
    )
    refused = plan_gang(state, "team-x/x-more")
    assert isinstance(refused, Unschedulable)
    assert "16 used by all ElasticQuotas + 8 asked > 16, the sum of their mins" in refused.reason
    assert isinstance(plan_gang(state, "team-y/y-own"), GangPlan)


def test_a_parent_max_limits_its_children() -> None:
    state = cluster(
        ElasticQuotaUpserted(quota=elastic_quota("org", is_parent=True, minimum=gpus(8), maximum=gpus(16))),
        ElasticQuotaUpserted(quota=elastic_quota("team", parent="org", minimum=gpus(8), maximum=gpus(64))),
        running("r0", "n0", labels={QUOTA_NAME_LABEL: "team"}),
        *gang("g", 2, labels={QUOTA_NAME_LABEL: "team"}),
    )
    result = plan_gang(state, "default/g")
    assert isinstance(result, Unschedulable)
    assert "quota org: nvidia.com/gpu 8 used + 16 asked > max 16" in result.reason


def test_without_quota_objects_nothing_changes() -> None:
    state = cluster(*gang("g", 2))
    assert isinstance(plan_gang(state, "default/g"), GangPlan)
    assert not state.quotas.active


# --------------------------------------------------------------------------- KAI Scheduler Queues

KAI_OPEN = (0.0, -1.0, 1.0)  # cpu and memory: no guarantee, no limit


def kai_gang(name: str, size: int, queue_name: str, *, preemptibility: str = "",
             priority_class_name: str = "") -> list[Event]:
    events: list[Event] = [KaiPodGroupUpserted(pod_group=kai_pod_group(name, min_member=size, queue=queue_name,
                                                                       preemptibility=preemptibility,
                                                                       priority_class_name=priority_class_name))]
    events += [pod_event(pod(f"{name}-{i}", annotations={KAI_POD_GROUP_ANNOTATION: name})) for i in range(size)]
    return events


def test_a_kai_gang_naming_a_missing_queue_is_refused_for_its_membership() -> None:
    state = cluster(KaiQueueUpserted(queue=kai_queue("team-a", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(8, 16, 1))),
                    *kai_gang("lost", 1, "team-z"))
    result = plan_gang(state, "default/lost")
    assert isinstance(result, Unschedulable) and result.constraint == QUOTA
    assert result.quota is not None and (result.quota.kind, result.quota.quota) == (QUOTA_MEMBERSHIP, "")
    assert "team-z" in result.quota.message


def test_a_kai_gang_over_its_queues_gpu_limit_waits_and_one_within_is_placed() -> None:
    state = cluster(
        KaiQueueUpserted(queue=kai_queue("team-a", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(8, 16, 1))),
        *kai_gang("big", 3, "team-a"),
        *kai_gang("fits", 2, "team-a"),
    )
    result = plan_gang(state, "default/big")
    assert isinstance(result, Unschedulable) and result.constraint == QUOTA
    assert result.reason == "gang default/big: KAI queue team-a: nvidia.com/gpu 0 used + 24 asked > limit 16"
    assert isinstance(plan_gang(state, "default/fits"), GangPlan)


def test_a_kai_queue_that_states_no_memory_lets_no_pod_asking_for_memory_in() -> None:
    state = cluster(
        KaiQueueUpserted(queue=kai_queue("gpu-only", cpu=KAI_OPEN, gpu=(8, 16, 1))),
        *kai_gang("job", 1, "gpu-only"),
    )
    result = plan_gang(state, "default/job")
    assert isinstance(result, Unschedulable) and result.constraint == QUOTA
    assert "KAI queue gpu-only: memory 0 used + 64Gi asked > limit 0" in result.reason


def test_a_non_preemptible_kai_job_stays_within_its_queues_quota() -> None:
    deserves_all = (-1.0, -1.0, 1.0)  # as KAI, non-preemptible jobs need quota for cpu and memory too
    state = cluster(
        KaiQueueUpserted(queue=kai_queue("team-a", cpu=deserves_all, memory=deserves_all, gpu=(8, -1.0, 1))),
        *kai_gang("keep", 2, "team-a", preemptibility="non-preemptible"),
        *kai_gang("spot", 2, "team-a"),
    )
    result = plan_gang(state, "default/keep")
    assert isinstance(result, Unschedulable) and result.constraint == QUOTA
    assert result.reason == ("gang default/keep: KAI queue team-a: nvidia.com/gpu 0 used by non-preemptible pods + "
                             "16 asked > quota 8 (non-preemptible jobs stay within quota: PodGroup default/keep says "
                             "non-preemptible)")
    assert isinstance(plan_gang(state, "default/spot"), GangPlan)  # a preemptible job may borrow
    # The refusal in structure (what a KAI PodGroup's condition lists): the queue, and what the job asks of it.
    shortfall = result.quota
    assert shortfall is not None and (shortfall.kind, shortfall.quota) == (QUOTA_NON_PREEMPTIBLE, "kai/team-a")
    assert result.reason == f"gang default/keep: {shortfall.message}"
    assert shortfall.asked["nvidia.com/gpu"] == shortfall.asked_np["nvidia.com/gpu"] == 16_000  # milli-GPUs


def test_a_kai_parent_queues_limit_holds_its_children() -> None:
    state = cluster(
        KaiQueueUpserted(queue=kai_queue("org", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(8, 8, 1))),
        KaiQueueUpserted(queue=kai_queue("team", parent="org", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(0, -1.0, 1))),
        running("r0", "n0", labels={KAI_QUEUE_LABEL: "team"}),
        *kai_gang("more", 1, "team"),
    )
    result = plan_gang(state, "default/more")
    assert isinstance(result, Unschedulable)
    assert result.reason == "gang default/more: KAI queue org: nvidia.com/gpu 8 used + 8 asked > limit 8"
    assert result.quota is not None and (result.quota.kind, result.quota.quota) == (QUOTA_OVER_MAX, "kai/org")


def test_kais_documented_burst_queue_runs_a_job_on_idle_gpus_without_quota_or_weight() -> None:
    # docs/queues of KAI: "burst-queue", gpu quota 0 and limit -1, no overQuotaWeight (memory stated here,
    # since a queue that leaves it out admits no pod asking for it, in KAI as here)
    state = cluster(
        KaiQueueUpserted(queue=kai_queue("burst-queue", cpu=(-1.0, -1.0, None), memory=(0.0, -1.0, None),
                                         gpu=(0.0, -1.0, None))),
        *kai_gang("burst", 4, "burst-queue"),
    )
    assert isinstance(plan_gang(state, "default/burst"), GangPlan)


def test_a_kai_queue_is_not_held_to_its_fair_share_while_another_queue_asks() -> None:
    # KAI admits a preemptible job up to its queues' limits: the fair share (Koordinator's runtime here)
    # orders queues and decides reclaim, it is no cap
    state = cluster(
        KaiQueueUpserted(queue=kai_queue("team-a", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(8, -1.0, 1))),
        KaiQueueUpserted(queue=kai_queue("team-b", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(32, -1.0, 1))),
        *kai_gang("wide", 6, "team-a"),
        *kai_gang("asks", 4, "team-b"),
    )
    assert state.quotas.runtime(state, state.quotas.by_name["kai"]["team-a"])["nvidia.com/gpu"] < 48_000
    assert isinstance(plan_gang(state, "default/wide"), GangPlan)


def test_a_kai_job_of_the_inference_class_is_non_preemptible_and_stays_within_quota() -> None:
    deserves_all = (-1.0, -1.0, 1.0)
    state = cluster(
        PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name="inference"), value=125)),
        PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name="train"), value=50)),
        KaiQueueUpserted(queue=kai_queue("team-a", cpu=deserves_all, memory=deserves_all, gpu=(8, -1.0, 1))),
        *kai_gang("serve", 2, "team-a", priority_class_name="inference"),
        *kai_gang("train", 2, "team-a", priority_class_name="train"),
        *kai_gang("forced", 2, "team-a", priority_class_name="inference", preemptibility="preemptible"),
    )
    result = plan_gang(state, "default/serve")
    assert isinstance(result, Unschedulable) and result.constraint == QUOTA
    # the reason says why the job counts as non-preemptible: its PodGroup's class alone makes it so
    assert result.reason.endswith("16 asked > quota 8 (non-preemptible jobs stay within quota: PodGroup "
                                  "default/serve is of priority 125 (priorityClassName inference), 100 or more)")
    assert isinstance(plan_gang(state, "default/train"), GangPlan)
    assert isinstance(plan_gang(state, "default/forced"), GangPlan)  # the PodGroup's word over its priority


def test_a_mig_device_counts_as_its_slices_against_a_kai_queues_gpu_limit() -> None:
    # KAI's docs/queues: each MIG device nvidia.com/mig-<X>g.<Y>gb counts as X GPU units of the queue's
    # quota and limit, so pods asking for MIG slices cannot pass a queue's GPU limit
    mig_node = node("mig-0", gpus=0)
    mig_node = msgspec.structs.replace(mig_node, status=msgspec.structs.replace(
        mig_node.status, allocatable={**mig_node.status.allocatable, "nvidia.com/mig-1g.10gb": "7",
                                      "nvidia.com/mig-3g.40gb": "2"}))

    def mig_pod(name: str, profile: str, queue_name: str) -> Event:
        obj = pod(name, gpus=0, labels={KAI_QUEUE_LABEL: queue_name})
        container = obj.spec.containers[0]
        requests = {**container.resources.requests, profile: "1"}
        container = msgspec.structs.replace(container, resources=msgspec.structs.replace(
            container.resources, requests=requests))
        return pod_event(msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, containers=[container])))

    state = ClusterState()
    state.apply_all([
        NodeUpserted(node=mig_node),
        KaiQueueUpserted(queue=kai_queue("team", cpu=KAI_OPEN, memory=KAI_OPEN, gpu=(0.0, 2.0, 1.0))),
        mig_pod("small-0", "nvidia.com/mig-1g.10gb", "team"),
        mig_pod("large-0", "nvidia.com/mig-3g.40gb", "team"),
    ])
    assert isinstance(plan_pod(state, "default/small-0"), GangPlan)
    refused = plan_pod(state, "default/large-0")
    assert isinstance(refused, Unschedulable) and refused.constraint == QUOTA
    assert "KAI queue team: nvidia.com/gpu 0 used + 3 asked > limit 2" in refused.reason


def test_a_lone_kai_pod_of_priority_100_waits_for_quota_and_the_reason_says_why_it_is_non_preemptible() -> None:
    deserves_all = (-1.0, -1.0, 1.0)
    state = cluster(
        KaiQueueUpserted(queue=kai_queue("team-a", cpu=deserves_all, memory=deserves_all, gpu=(8, -1.0, 1))),
        pod_event(pod("serve-0", gpus=16, priority=125, labels={KAI_QUEUE_LABEL: "team-a"})),
        pod_event(pod("batch-0", gpus=8, priority=50, labels={KAI_QUEUE_LABEL: "team-a"})),
        nodes=2,
    )
    refused = plan_pod(state, "default/serve-0")
    assert isinstance(refused, Unschedulable) and refused.constraint == QUOTA
    assert refused.reason.endswith("(non-preemptible jobs stay within quota: pod default/serve-0 is of priority 125, "
                                   "100 or more)")
    assert isinstance(plan_pod(state, "default/batch-0"), GangPlan)  # priority 50: preemptible, may borrow
