"""KAI Scheduler Queues as a quota dialect (state/quota.py): KAI's units and its -1 / absent values read
as KAI reads them, which queue a pod counts against, and bad queues reported naming object and field."""

from __future__ import annotations

import msgspec

from events.builders import bound, gpu_nodes, kai_pod_group, kai_queue, node, node_event, pod, pod_event
from events.model import (
    Event,
    KaiPodGroupUpserted,
    KaiQueueDeleted,
    KaiQueueUpserted,
    KubePodGroupUpserted,
    PodGroupUpserted,
    PriorityClassUpserted,
    SchedulerPluginsPodGroupUpserted,
)
from events.objects import KAI_NODE_POOL_LABEL, KAI_POD_GROUP_ANNOTATION, KAI_QUEUE_LABEL, ObjectMeta, PriorityClass
from state.cluster import GANG_SOURCES, KAI_SOURCE, KUBE_SOURCE, SIGS_SOURCE, VOLCANO_SOURCE, X_K8S_SOURCE, ClusterState
from state.gangs import KAI_POD_GROUP_PROBLEM
from state.quota import (
    KAI_DIALECT,
    KAI_QUEUE_KIND,
    OUTRANK_VOLCANO_UPSERTS,
    UNLIMITED_MIN,
    Quota,
    preempt_min_runtime,
    reclaim_min_runtime,
)

GPU = "nvidia.com/gpu"
UNLIMITED = -1.0
# A queue that limits only GPUs (cpu and memory stated unlimited, as KAI's own default queues are).
OPEN = (0.0, UNLIMITED, 1.0)


def fold(*events: Event) -> ClusterState:
    state = ClusterState()
    state.apply_all([*gpu_nodes(4, per_block=2), *events])
    return state


def queue_event(name: str, **fields: object) -> KaiQueueUpserted:
    return KaiQueueUpserted(queue=kai_queue(name, **fields))  # type: ignore[arg-type]


def member(name: str, group: str, **fields: object) -> Event:
    return pod_event(pod(name, annotations={KAI_POD_GROUP_ANNOTATION: group}, **fields))  # type: ignore[arg-type]


def kai(state: ClusterState, name: str) -> Quota:
    return state.quotas.by_name[KAI_DIALECT][name]


def fields(state: ClusterState, kind: str, key: str) -> list[tuple[str, str]]:
    return sorted((p.field, p.reason) for p in state.problems_of(kind, key))


# --------------------------------------------------------------------------- KAI's units and special values


def test_kai_units_are_millicores_megabytes_and_whole_gpus() -> None:
    state = fold(queue_event("team-a", cpu=(2000, 4000, 2), memory=(4096, 8192, 1), gpu=(2, 4, 3)))
    quota = kai(state, "team-a")
    assert quota.min == {"cpu": 2000, "memory": 4096 * 10**6 * 1000, GPU: 2000}  # milli-units: 2 cpu, 4096 MB, 2 GPUs
    assert quota.max == {"cpu": 4000, "memory": 8192 * 10**6 * 1000, GPU: 4000}
    assert quota.weight == {"cpu": 2000, "memory": 1000, GPU: 3000}
    assert (quota.guarded_word, quota.max_word, quota.label) == ("quota", "limit", "KAI queue team-a")
    assert state.problems_of(KAI_QUEUE_KIND, "team-a") == []


def test_minus_one_is_unlimited_and_an_absent_value_is_zero_as_kai_reads_them() -> None:
    state = fold(
        queue_event("burst", cpu=(UNLIMITED, UNLIMITED, None), gpu=(UNLIMITED, 8, None), memory=(None, UNLIMITED, 1)),
        queue_event("gpu-only", gpu=(1, 2, 1)),
    )
    burst = kai(state, "burst")
    # limit -1: no max; quota -1: deserves all it asks for (up to its limit, else without bound)
    assert GPU in burst.max and "cpu" not in burst.max and "memory" not in burst.max
    assert burst.min == {"cpu": UNLIMITED_MIN, GPU: 8000}
    assert burst.weight == {"cpu": 0, "memory": 1000, GPU: 0}  # an absent overQuotaWeight lends nothing
    # a resource the queue does not state has limit 0: its pods may not ask for it at all
    gpu_only = kai(state, "gpu-only")
    assert gpu_only.max == {"cpu": 0, "memory": 0, GPU: 2000}
    assert gpu_only.constrained == {"cpu", "memory", GPU}


def test_a_stated_resource_without_a_limit_is_reported_since_kai_reads_it_as_zero() -> None:
    state = fold(queue_event("ml-team", cpu=(500, None, 2), memory=OPEN, gpu=OPEN))
    [problem] = state.problems_of(KAI_QUEUE_KIND, "ml-team")
    assert problem.field == "spec.resources.cpu.limit"
    assert "reads as 0" in problem.message and "-1 is no limit" in problem.message
    assert kai(state, "ml-team").max["cpu"] == 0


def test_a_resource_a_queue_leaves_out_is_reported_since_kai_reads_it_as_a_limit_of_zero() -> None:
    # KAI's docs/queues "burst-queue" states cpu and gpu only: in KAI, as here, a pod asking for memory
    # is then over the queue's memory limit of 0, which the Warning says on the Queue itself
    state = fold(queue_event("burst-queue", cpu=(UNLIMITED, UNLIMITED, None), gpu=(0, UNLIMITED, None)),
                 KaiQueueUpserted(queue=kai_queue("bare")))
    [problem] = state.problems_of(KAI_QUEUE_KIND, "burst-queue")
    assert problem.field == "spec.resources.memory" and "limit of 0" in problem.message
    assert "`limit: -1`" in problem.message and kai(state, "burst-queue").max["memory"] == 0
    assert fields(state, KAI_QUEUE_KIND, "bare") == [(f"spec.resources.{field}", "InvalidQuota")
                                                     for field in ("cpu", "gpu", "memory")]


# --------------------------------------------------------------------------- bad values


def test_a_negative_quota_other_than_minus_one_counts_as_zero_and_names_object_and_field() -> None:
    state = fold(queue_event("bad", cpu=(-5, UNLIMITED, 1), memory=OPEN, gpu=(2, -3, -1)))
    quota = kai(state, "bad")
    assert quota.min.get("cpu", 0) == 0 and quota.max[GPU] == 0 and quota.weight[GPU] == 0
    problems = {p.field: p for p in state.problems_of(KAI_QUEUE_KIND, "bad")}
    assert set(problems) == {"spec.resources.cpu.quota", "spec.resources.gpu.limit",
                             "spec.resources.gpu.overQuotaWeight", "spec.resources.gpu.quota"}
    assert all(p.kind == KAI_QUEUE_KIND and p.key == "bad" for p in problems.values())
    assert "only -1 (unlimited) may be" in problems["spec.resources.cpu.quota"].message
    assert "above spec.resources.gpu.limit" in problems["spec.resources.gpu.quota"].message
    assert all(p.reason == "InvalidQuota" for p in problems.values())


def test_a_value_too_large_to_be_an_amount_counts_as_zero() -> None:
    state = fold(queue_event("huge", cpu=(1e300, UNLIMITED, 1), memory=OPEN, gpu=OPEN))
    assert kai(state, "huge").min.get("cpu", 0) == 0
    assert [p.field for p in state.problems_of(KAI_QUEUE_KIND, "huge")] == ["spec.resources.cpu.quota"]


def test_a_missing_parent_or_a_parent_cycle_makes_top_queues_and_is_reported() -> None:
    state = fold(
        queue_event("orphan", parent="no-such", memory=OPEN, cpu=OPEN, gpu=OPEN),
        queue_event("a", parent="b", memory=OPEN, cpu=OPEN, gpu=OPEN),
        queue_event("b", parent="a", memory=OPEN, cpu=OPEN, gpu=OPEN),
        queue_event("self", parent="self", memory=OPEN, cpu=OPEN, gpu=OPEN),
    )
    root = state.quotas.roots[KAI_DIALECT]
    assert {q.name for q in root.children} == {"orphan", "a", "b", "self"}
    for name, words in (("orphan", "does not exist"), ("a", "loops"), ("b", "loops"), ("self", "itself")):
        [problem] = state.problems_of(KAI_QUEUE_KIND, name)
        assert (problem.field, problem.reason) == ("spec.parentQueue", "InvalidQuota")
        assert words in problem.message


def test_min_runtimes_are_read_as_go_durations_and_a_bad_one_is_reported() -> None:
    state = fold(queue_event("ok", cpu=OPEN, memory=OPEN, gpu=OPEN, preempt_min_runtime="10m",
                             reclaim_min_runtime="1h30m"),
                 queue_event("bad", cpu=OPEN, memory=OPEN, gpu=OPEN, preempt_min_runtime="10 minutes",
                             reclaim_min_runtime="-5s"))
    ok, bad = kai(state, "ok"), kai(state, "bad")
    assert (ok.preempt_min_runtime, ok.reclaim_min_runtime) == (600.0, 5400.0)
    assert fields(state, KAI_QUEUE_KIND, "ok") == []
    assert (bad.preempt_min_runtime, bad.reclaim_min_runtime) == (None, 0.0)
    messages = [str(p) for p in state.quotas.problems[(KAI_QUEUE_KIND, "bad")]]
    assert messages == [
        "KaiQueue bad: spec.preemptMinRuntime: '10 minutes' is not a duration as KAI reads one (Go's form, such as "
        "10m, 1h30m or 90s): not used, as if unset",
        "KaiQueue bad: spec.reclaimMinRuntime: '-5s' is negative: no job is kept by it, as with 0"]


def test_min_runtimes_resolve_up_the_tree_as_kais_minruntime_plugin_does() -> None:
    # KAI's min-runtime design: A > B (600s) > {C > {leaf1 (0s), leaf2 (180s)}, D (60s) > leaf3}
    state = fold(*(queue_event(name, parent=parent, cpu=OPEN, memory=OPEN, gpu=OPEN, preempt_min_runtime=runtime,
                               reclaim_min_runtime=runtime)
                   for name, parent, runtime in (("a", "", None), ("b", "a", "600s"), ("c", "b", None),
                                                 ("d", "b", "60s"), ("leaf1", "c", "0s"), ("leaf2", "c", "180s"),
                                                 ("leaf3", "d", None))))
    leaf1, leaf2, leaf3 = kai(state, "leaf1"), kai(state, "leaf2"), kai(state, "leaf3")
    assert reclaim_min_runtime(leaf1, leaf3) == 60.0  # below a, b: d's
    assert reclaim_min_runtime(leaf1, leaf2) == 180.0  # siblings: the victim's own queue's
    assert reclaim_min_runtime(leaf3, leaf1) == 600.0  # c says nothing: from b above it
    assert reclaim_min_runtime(None, leaf1) == 0.0  # no queue in common: the victim's top queue's (a says none)
    assert [preempt_min_runtime(kai(state, n)) for n in ("leaf1", "leaf2", "leaf3", "c")] == [0.0, 180.0, 60.0, 600.0]
    assert preempt_min_runtime(kai(state, "a")) == 0.0  # nothing said from a up: KAI's default


def test_idle_gpus_are_shared_by_queue_priority_first_then_by_weight_as_kai_shares_them() -> None:
    # docs/scheduling-deep-dive of KAI: a queue of priority 2 and weight 1 gets surplus before one of
    # priority 1 and weight 100; weight splits within one priority. 4 nodes: 32 GPUs, no quotas.
    def runtime_of(**priorities: int) -> dict[str, int]:
        state = fold(
            queue_event("hi", cpu=OPEN, memory=OPEN, gpu=(0, UNLIMITED, 1), priority=priorities.get("hi")),
            queue_event("lo", cpu=OPEN, memory=OPEN, gpu=(0, UNLIMITED, 100), priority=priorities.get("lo")),
            queue_event("peer", cpu=OPEN, memory=OPEN, gpu=(0, UNLIMITED, 1), priority=priorities.get("peer")),
            *(member(f"{name}-{i}", name) for name in ("hi", "lo", "peer") for i in range(4)),
            *(KaiPodGroupUpserted(pod_group=kai_pod_group(name, queue=name)) for name in ("hi", "lo", "peer")),
        )
        return {name: state.quotas.runtime(state, kai(state, name)).get(GPU, 0) // 1000
                for name in ("hi", "lo", "peer")}

    # each asks for 32 GPUs (4 pods of 8); unset priorities are all 100: one level, by weight 1:100:1
    assert runtime_of() == {"hi": 0, "lo": 31, "peer": 0}
    assert runtime_of(hi=2, lo=1, peer=1) == {"hi": 32, "lo": 0, "peer": 0}
    assert runtime_of(hi=2, lo=1, peer=2) == {"hi": 16, "lo": 0, "peer": 16}


# --------------------------------------------------------------------------- membership


def test_a_kai_podgroup_puts_its_pods_in_the_queue_its_spec_names_over_the_pods_label() -> None:
    state = fold(
        queue_event("team-a", cpu=OPEN, memory=OPEN, gpu=(8, 16, 1)),
        queue_event("team-b", cpu=OPEN, memory=OPEN, gpu=(8, 16, 1)),
        KaiPodGroupUpserted(pod_group=kai_pod_group("train", queue="team-a")),
        member("train-0", "train", labels={KAI_QUEUE_LABEL: "team-b"}),
        pod_event(pod("lone", labels={KAI_QUEUE_LABEL: "team-b"})),
        pod_event(pod("nowhere")),
    )
    book = state.quotas
    assert book.quota_of("default/train-0") is kai(state, "team-a")
    assert book.quota_of("default/lone") is kai(state, "team-b")
    assert book.quota_of("default/nowhere") is None
    assert kai(state, "team-a").requested[GPU] == 8000


def test_a_kai_podgroup_without_a_queue_takes_the_pods_label_else_default_queue() -> None:
    state = fold(
        queue_event("team-b", cpu=OPEN, memory=OPEN, gpu=(8, 16, 1)),
        KaiPodGroupUpserted(pod_group=kai_pod_group("labelled")),
        KaiPodGroupUpserted(pod_group=kai_pod_group("plain")),
        member("labelled-0", "labelled", labels={KAI_QUEUE_LABEL: "team-b"}),
        member("plain-0", "plain"),
    )
    book = state.quotas
    assert book.quota_of("default/labelled-0") is kai(state, "team-b")
    # KAI's pod-grouper would have written default-queue: missing, it means no quota, not a refusal
    assert book.quota_of("default/plain-0") is None and book.refusal_of("default/plain-0") == ""
    state.apply(queue_event("default-queue", cpu=OPEN, memory=OPEN, gpu=OPEN))
    assert book.quota_of("default/plain-0") is kai(state, "default-queue")


def test_a_podgroup_naming_a_missing_queue_waits_with_a_reason_and_a_problem_on_spec_queue() -> None:
    state = fold(
        KaiPodGroupUpserted(pod_group=kai_pod_group("train", queue="team-aa")),
        member("train-0", "train"),
    )
    assert state.quotas.active  # the PodGroup naming a queue is enough: no Queue object needed
    assert state.quotas.refusal_of("default/train-0") == (
        "KAI queue 'team-aa' not found (PodGroup default/train spec.queue)")
    [problem] = state.problems_of(KAI_POD_GROUP_PROBLEM, "default/train")
    assert (problem.field, problem.reason) == ("spec.queue", "QuotaNotFound")
    state.apply(queue_event("team-aa", cpu=OPEN, memory=OPEN, gpu=OPEN))
    assert state.quotas.refusal_of("default/train-0") == ""
    assert state.problems_of(KAI_POD_GROUP_PROBLEM, "default/train") == []


def test_a_pod_label_naming_a_missing_queue_waits_with_a_problem_on_the_pod() -> None:
    state = fold(
        queue_event("team-a", cpu=OPEN, memory=OPEN, gpu=OPEN),
        pod_event(pod("typo", labels={KAI_QUEUE_LABEL: "team-aa"})),
    )
    assert state.quotas.refusal_of("default/typo") == "KAI queue 'team-aa' not found (pod label kai.scheduler/queue)"
    [problem] = state.problems_of("Pod", "default/typo")
    assert problem.field == f"metadata.labels[{KAI_QUEUE_LABEL}]" and problem.reason == "QuotaNotFound"


def test_only_leaf_queues_take_jobs() -> None:
    state = fold(
        queue_event("org", cpu=OPEN, memory=OPEN, gpu=(16, 32, 1)),
        queue_event("team", parent="org", cpu=OPEN, memory=OPEN, gpu=(8, 32, 1)),
        KaiPodGroupUpserted(pod_group=kai_pod_group("train", queue="org")),
        member("train-0", "train"),
    )
    assert kai(state, "org").is_parent and kai(state, "team").parent is kai(state, "org")
    assert "is a parent queue" in state.quotas.refusal_of("default/train-0")
    assert [p.field for p in state.problems_of(KAI_POD_GROUP_PROBLEM, "default/train")] == ["spec.queue"]


def test_usage_counts_up_the_tree_and_a_deleted_queue_releases_its_pods() -> None:
    state = fold(
        queue_event("org", cpu=OPEN, memory=OPEN, gpu=(16, 32, 1)),
        queue_event("team", parent="org", cpu=OPEN, memory=OPEN, gpu=(8, 32, 1)),
        KaiPodGroupUpserted(pod_group=kai_pod_group("train", queue="team")),
        pod_event(bound(pod("train-0", annotations={KAI_POD_GROUP_ANNOTATION: "train"}), "n0")),
    )
    assert kai(state, "team").used[GPU] == 8000 and kai(state, "org").used[GPU] == 8000
    state.apply(KaiQueueDeleted(name="team"))
    assert "not found" in state.quotas.refusal_of("default/train-0")
    assert kai(state, "org").used.get(GPU, 0) == 0


def test_non_preemptible_kai_jobs_are_not_reclaimable() -> None:
    state = fold(
        queue_event("team", cpu=OPEN, memory=OPEN, gpu=(8, 32, 1)),
        KaiPodGroupUpserted(pod_group=kai_pod_group("keep", queue="team", preemptibility="non-preemptible")),
        KaiPodGroupUpserted(pod_group=kai_pod_group("spot", queue="team")),
        pod_event(bound(pod("keep-0", annotations={KAI_POD_GROUP_ANNOTATION: "keep"}), "n0")),
        pod_event(bound(pod("spot-0", annotations={KAI_POD_GROUP_ANNOTATION: "spot"}), "n1")),
    )
    book = state.quotas
    assert not book.preemptible(state.pods["default/keep-0"]) and book.preemptible(state.pods["default/spot-0"])
    assert kai(state, "team").used_np[GPU] == 8000


def test_the_kai_book_survives_a_snapshot() -> None:
    state = fold(
        queue_event("team", cpu=OPEN, memory=OPEN, gpu=(8, 32, 1)),
        KaiPodGroupUpserted(pod_group=kai_pod_group("train", queue="team")),
        member("train-0", "train"),
    )
    assert ClusterState.restore(state.snapshot()).canonical() == state.canonical()


def test_podgroups_that_outrank_a_kai_one_are_the_upserts_an_idle_book_skips() -> None:
    # An idle book does not see these upserts: each must outrank both a Volcano and a KAI PodGroup, or it
    # could hand a gang (and its queue) to one of them.
    order = [name for name, _ in GANG_SOURCES]
    for source in (SIGS_SOURCE, X_K8S_SOURCE, KUBE_SOURCE):
        assert order.index(source) < order.index(VOLCANO_SOURCE) < order.index(KAI_SOURCE)
    assert {PodGroupUpserted, SchedulerPluginsPodGroupUpserted, KubePodGroupUpserted} == OUTRANK_VOLCANO_UPSERTS


def _priority_class(name: str, value: int, *, default: bool = False) -> PriorityClassUpserted:
    return PriorityClassUpserted(priority_class=PriorityClass(metadata=ObjectMeta(name=name), value=value,
                                                              global_default=default))


def test_a_kai_podgroup_that_says_nothing_is_non_preemptible_from_priority_100_as_kai_reads_it() -> None:
    state = fold(
        _priority_class("train", 50), _priority_class("build", 100),
        KaiPodGroupUpserted(pod_group=kai_pod_group("t", priority_class_name="train")),
        KaiPodGroupUpserted(pod_group=kai_pod_group("b", priority_class_name="build")),
        KaiPodGroupUpserted(pod_group=kai_pod_group("b-spot", priority_class_name="build",
                                                    preemptibility="preemptible")),
        KaiPodGroupUpserted(pod_group=kai_pod_group("t-kept", priority_class_name="train",
                                                    preemptibility="non-preemptible")),
        KaiPodGroupUpserted(pod_group=kai_pod_group("unknown", priority_class_name="no-such-class")),
        *(member(f"{group}-0", group) for group in ("t", "b", "b-spot", "t-kept", "unknown")),
    )
    preemptable = {name: state.gang_preemptable(state.gangs[f"default/{name}"].spec)  # type: ignore[arg-type]
                   for name in ("t", "b", "b-spot", "t-kept", "unknown")}
    assert preemptable == {"t": True, "b": False, "b-spot": True, "t-kept": False, "unknown": True}
    # a class not found: the cluster's globalDefault class, as KAI's scheduler falls back to it
    state.apply(_priority_class("everyone", 200, default=True))
    assert not state.gang_preemptable(state.gangs["default/unknown"].spec)  # type: ignore[arg-type]


def test_a_priority_class_created_later_makes_a_running_kai_job_count_as_non_preemptible() -> None:
    state = fold(
        queue_event("team", cpu=OPEN, memory=OPEN, gpu=(8, 32, 1)),
        KaiPodGroupUpserted(pod_group=kai_pod_group("serve", queue="team", priority_class_name="inference")),
        pod_event(bound(pod("serve-0", annotations={KAI_POD_GROUP_ANNOTATION: "serve"}), "n0")),
    )
    assert kai(state, "team").used_np.get(GPU, 0) == 0  # `inference` unknown yet: priority 0, preemptible
    state.apply(_priority_class("inference", 125))
    assert kai(state, "team").used_np[GPU] == 8000 and not state.quotas.preemptible(state.pods["default/serve-0"])


def test_a_lone_pod_in_a_kai_queue_by_its_label_is_non_preemptible_from_priority_100() -> None:
    state = fold(
        queue_event("team", cpu=OPEN, memory=OPEN, gpu=(8, 32, 1)),
        pod_event(bound(pod("serve-0", priority=125, labels={KAI_QUEUE_LABEL: "team"}), "n0")),
        pod_event(bound(pod("batch-0", priority=50, labels={KAI_QUEUE_LABEL: "team"}), "n1")),
    )
    book = state.quotas
    assert not book.preemptible(state.pods["default/serve-0"]) and book.preemptible(state.pods["default/batch-0"])
    assert state.kai_lone_kept(state.pods["default/serve-0"]) and not state.kai_lone_kept(state.pods["default/batch-0"])


def test_a_kai_queue_counts_a_running_mig_device_as_its_slices_of_gpu() -> None:
    obj = pod("mig-0", gpus=0, labels={KAI_QUEUE_LABEL: "team"})
    container = obj.spec.containers[0]
    container = msgspec.structs.replace(container, resources=msgspec.structs.replace(
        container.resources, requests={**container.resources.requests, "nvidia.com/mig-2g.20gb": "3"}))
    obj = msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, containers=[container]))
    state = fold(queue_event("team", cpu=OPEN, memory=OPEN, gpu=(0, UNLIMITED, 1)), pod_event(bound(obj, "n0")))
    assert kai(state, "team").used[GPU] == 6000  # three 2-slice devices: 6 GPU units, as KAI counts them


# --------------------------------------------------------------------------- node pools (KAI's scheduling shards)


def pooled(*events: Event) -> ClusterState:
    """4 nodes of 8 GPUs: n0 and n1 in node pool gpu-a, n2 and n3 in the default pool."""
    state = ClusterState()
    state.apply_all([*(node_event(node(f"n{index}", block="b0", spine="s0",
                                       labels={KAI_NODE_POOL_LABEL: "gpu-a"} if index < 2 else None))
                       for index in range(4)), *events])
    return state


def in_pool(pool: str) -> dict[str, str]:
    return {KAI_NODE_POOL_LABEL: pool}


def test_a_job_naming_a_queue_of_another_node_pool_waits_until_both_are_in_one_pool() -> None:
    # KAI's scheduler for a pool sees only the queues labelled with it (the default one: those without the label)
    state = pooled(
        queue_event("team-a", cpu=OPEN, memory=OPEN, gpu=OPEN, labels=in_pool("gpu-a")),
        KaiPodGroupUpserted(pod_group=kai_pod_group("train", queue="team-a")),
        member("train-0", "train"),
        pod_event(pod("lone", labels={KAI_QUEUE_LABEL: "team-a", **in_pool("gpu-b")})),
    )
    book = state.quotas
    assert book.refusal_of("default/train-0") == (
        "KAI queue 'team-a' is in node pool gpu-a (its label kai.scheduler/node-pool), the job in default, whose KAI "
        "scheduler does not see that queue")
    assert "the job in gpu-b" in book.refusal_of("default/lone")
    [problem] = state.problems_of(KAI_POD_GROUP_PROBLEM, "default/train")
    assert problem.field == "spec.queue" and "not placed until the two are in one pool" in problem.message
    state.apply(KaiPodGroupUpserted(pod_group=kai_pod_group("train", queue="team-a", labels=in_pool("gpu-a"))))
    assert book.refusal_of("default/train-0") == "" and book.quota_of("default/train-0") is kai(state, "team-a")
    assert state.problems_of(KAI_POD_GROUP_PROBLEM, "default/train") == []
    # relabelling the queue into the lone pod's pool settles the lone pod, and the job waits again
    state.apply(queue_event("team-a", cpu=OPEN, memory=OPEN, gpu=OPEN, labels=in_pool("gpu-b")))
    assert book.refusal_of("default/lone") == "" and "the job in gpu-a" in book.refusal_of("default/train-0")


def test_each_node_pool_s_queues_share_that_pool_s_nodes_only() -> None:
    # Both queues ask for all 32 GPUs; by weight alone (1:3) the cluster's 32 would go 8 and 24, but each KAI
    # scheduler shares its own pool's 16.
    def runtime_of(pool_of_a: str) -> dict[str, int]:
        state = pooled(
            queue_event("qa", cpu=OPEN, memory=OPEN, gpu=(0, UNLIMITED, 1),
                        labels=in_pool(pool_of_a) if pool_of_a else None),
            queue_event("qd", cpu=OPEN, memory=OPEN, gpu=(0, UNLIMITED, 3)),
            *(member(f"{name}-{i}", name) for name in ("qa", "qd") for i in range(4)),
            KaiPodGroupUpserted(pod_group=kai_pod_group("qa", queue="qa", labels=in_pool(pool_of_a) if pool_of_a
                                                       else None)),
            KaiPodGroupUpserted(pod_group=kai_pod_group("qd", queue="qd")),
        )
        return {name: state.quotas.runtime(state, kai(state, name)).get(GPU, 0) // 1000 for name in ("qa", "qd")}

    assert runtime_of("gpu-a") == {"qa": 16, "qd": 16}
    assert runtime_of("") == {"qa": 8, "qd": 24}
    assert runtime_of("empty-pool") == {"qa": 0, "qd": 16}  # a pool no node is in has nothing to share


def test_a_node_joining_a_pool_moves_its_gpus_to_that_pool_s_queues() -> None:
    state = pooled(
        queue_event("qa", cpu=OPEN, memory=OPEN, gpu=(0, UNLIMITED, 1), labels=in_pool("gpu-a")),
        KaiPodGroupUpserted(pod_group=kai_pod_group("qa", queue="qa", labels=in_pool("gpu-a"))),
        *(member(f"qa-{i}", "qa") for i in range(4)),
    )
    assert state.quotas.runtime(state, kai(state, "qa"))[GPU] == 16000
    state.apply(node_event(node("n2", block="b0", spine="s0", labels=in_pool("gpu-a"))))
    assert state.quotas.runtime(state, kai(state, "qa"))[GPU] == 24000


def test_a_queue_under_a_parent_of_another_pool_is_reported() -> None:
    state = pooled(
        queue_event("org", cpu=OPEN, memory=OPEN, gpu=OPEN, labels=in_pool("gpu-a")),
        queue_event("team", parent="org", cpu=OPEN, memory=OPEN, gpu=OPEN),
    )
    [problem] = state.problems_of(KAI_QUEUE_KIND, "team")
    assert problem.field == "spec.parentQueue" and "is in node pool gpu-a" in problem.message


def test_queues_are_put_in_pools_by_the_configured_pool_label() -> None:
    state = ClusterState(kai_node_pool_label="run.ai/node-pool")
    state.apply_all([*gpu_nodes(2), queue_event("team-a", cpu=OPEN, memory=OPEN, gpu=OPEN,
                                                labels={"run.ai/node-pool": "gpu-a", KAI_NODE_POOL_LABEL: "other"}),
                     KaiPodGroupUpserted(pod_group=kai_pod_group("train", queue="team-a")),
                     member("train-0", "train")])
    assert state.quotas.refusal_of("default/train-0") == (
        "KAI queue 'team-a' is in node pool gpu-a (its label run.ai/node-pool), the job in default, whose KAI "
        "scheduler does not see that queue")
