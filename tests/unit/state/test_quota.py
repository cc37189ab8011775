"""The quota fold (state/quota.py): which quota a pod belongs to, what each quota holds, the runtime
share, and bad quota input reported as problems while scheduling goes on."""

from __future__ import annotations

import msgspec

from events.builders import (
    bound,
    capacity_quota,
    elastic_quota,
    gpu_nodes,
    gpus,
    pod,
    pod_event,
    pod_group,
    queue,
    volcano_pod_group,
)
from events.model import (
    CapacityElasticQuotaUpserted,
    ElasticQuotaDeleted,
    ElasticQuotaUpserted,
    Event,
    KubePodGroupUpserted,
    PodAssumed,
    PodDeleted,
    PodGroupDeleted,
    PodGroupUpserted,
    PodNominated,
    QueueUpserted,
    SchedulerPluginsPodGroupUpserted,
    VolcanoPodGroupUpserted,
)
from events.objects import QUOTA_NAME_LABEL, QUOTA_PREEMPTIBLE_LABEL, QUOTA_SHARED_WEIGHT_ANNOTATION
from state.cluster import GANG_SOURCES, SIGS_SOURCE, VOLCANO_SOURCE, X_K8S_SOURCE, ClusterState
from state.quota import KOORDINATOR, OUTRANK_VOLCANO_UPSERTS, Quota, _water_fill

GPU = "nvidia.com/gpu"
G = 1000  # one GPU in milli-units


def fold(*events: Event, nodes: int = 4) -> ClusterState:
    state = ClusterState()
    state.apply_all([*gpu_nodes(nodes, per_block=2), *events])
    return state


def eq(quota: object) -> ElasticQuotaUpserted:
    assert isinstance(quota, msgspec.Struct)
    return ElasticQuotaUpserted(quota=quota)  # type: ignore[arg-type]


def used(state: ClusterState, quota_id: str) -> int:
    return state.quotas.quotas[quota_id].used.get(GPU, 0)


# --------------------------------------------------------------------------- membership


def test_a_pod_joins_the_quota_its_label_names_else_the_quota_of_its_namespace() -> None:
    state = fold(
        eq(elastic_quota("team-a", namespace="team-a", minimum=gpus(8), maximum=gpus(32))),
        eq(elastic_quota("shared", namespace="quotas", minimum=gpus(8), maximum=gpus(32))),
        pod_event(pod("by-namespace", namespace="team-a")),
        pod_event(pod("by-label", namespace="team-a", labels={QUOTA_NAME_LABEL: "shared"})),
        pod_event(pod("nowhere", namespace="other")),
    )
    book = state.quotas
    assert book.quota_of("team-a/by-namespace") is book.by_name[KOORDINATOR]["team-a"]
    assert book.quota_of("team-a/by-label") is book.by_name[KOORDINATOR]["shared"]
    assert book.quota_of("other/nowhere") is None


def test_a_volcano_podgroup_puts_its_pods_in_its_queue_and_a_missing_default_queue_means_none() -> None:
    state = fold(
        QueueUpserted(queue=queue("research", capability=gpus(16))),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("train", queue="research")),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("loose")),
        pod_event(pod("train-0", annotations={"scheduling.k8s.io/group-name": "train"})),
        pod_event(pod("loose-0", annotations={"scheduling.k8s.io/group-name": "loose"})),
    )
    assert state.quotas.quota_of("default/train-0") is state.quotas.by_name["volcano"]["research"]
    assert state.quotas.quota_of("default/loose-0") is None
    assert state.quotas.refusal_of("default/loose-0") == ""


def test_a_pod_naming_a_missing_quota_waits_with_a_reason_and_a_problem_on_the_pod() -> None:
    state = fold(
        eq(elastic_quota("team-a", minimum=gpus(8), maximum=gpus(32))),
        pod_event(pod("typo", labels={QUOTA_NAME_LABEL: "team-aa"})),
    )
    assert state.quotas.refusal_of("default/typo") == (
        "quota team-aa not found (pod label quota.scheduling.koordinator.sh/name)")
    [problem] = state.problems_of("Pod", "default/typo")
    assert problem.field == f"metadata.labels[{QUOTA_NAME_LABEL}]" and "not found" in problem.message
    # the quota appears: the pod joins it and the problem is gone
    state.apply(eq(elastic_quota("team-aa", minimum=gpus(8), maximum=gpus(32))))
    assert state.quotas.refusal_of("default/typo") == ""
    assert state.problems_of("Pod", "default/typo") == []


def test_a_volcano_podgroups_queue_counts_only_while_the_podgroup_defines_its_gang() -> None:
    # The fold does not show an idle book the upserts of PodGroups that outrank a Volcano one: they
    # must outrank it, or such an upsert could hand the gang (and its queue) to the Volcano PodGroup.
    order = [name for name, _ in GANG_SOURCES]
    assert order.index(SIGS_SOURCE) < order.index(VOLCANO_SOURCE)
    assert order.index(X_K8S_SOURCE) < order.index(VOLCANO_SOURCE)
    assert {PodGroupUpserted, SchedulerPluginsPodGroupUpserted, KubePodGroupUpserted} == OUTRANK_VOLCANO_UPSERTS
    state = fold(
        PodGroupUpserted(pod_group=pod_group("train", min_member=1)),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("train", queue="research")),
        pod_event(pod("train-0", annotations={"scheduling.k8s.io/group-name": "train"})),
        PodGroupUpserted(pod_group=pod_group("train", min_member=2)),
    )
    assert not state.quotas.active and state.quotas.refusal_of("default/train-0") == ""
    state.apply(PodGroupDeleted(key="default/train"))  # the Volcano PodGroup defines the gang now
    assert state.quotas.active
    assert "queue research not found" in state.quotas.refusal_of("default/train-0")
    state.apply(PodGroupUpserted(pod_group=pod_group("train", min_member=1)))
    assert not state.quotas.active and state.quotas.refusal_of("default/train-0") == ""
    assert ClusterState.restore(state.snapshot()).canonical() == state.canonical()


def test_a_podgroup_naming_a_missing_queue_is_a_problem_on_its_spec_queue() -> None:
    state = fold(
        QueueUpserted(queue=queue("research")),
        VolcanoPodGroupUpserted(pod_group=volcano_pod_group("train", queue="reserch")),
        pod_event(pod("train-0", annotations={"scheduling.k8s.io/group-name": "train"})),
    )
    assert "queue reserch not found" in state.quotas.refusal_of("default/train-0")
    [problem] = state.problems_of("VolcanoPodGroup", "default/train")
    assert problem.field == "spec.queue"


def test_a_pod_naming_a_parent_quota_is_refused() -> None:
    state = fold(
        eq(elastic_quota("org", is_parent=True, minimum=gpus(16), maximum=gpus(32))),
        eq(elastic_quota("team", parent="org", minimum=gpus(8), maximum=gpus(32))),
        pod_event(pod("p", labels={QUOTA_NAME_LABEL: "org"})),
    )
    assert state.quotas.refusal_of("default/p") == "quota org is a parent quota; pods must name a leaf quota"


# --------------------------------------------------------------------------- accounting


def test_usage_follows_the_pod_assumed_bound_finished_and_deleted_and_sums_up_the_tree() -> None:
    state = fold(
        eq(elastic_quota("org", is_parent=True, minimum=gpus(16), maximum=gpus(32))),
        eq(elastic_quota("team", parent="org", minimum=gpus(8), maximum=gpus(32))),
    )
    p = pod("p", labels={QUOTA_NAME_LABEL: "team"})
    state.apply(pod_event(p))
    assert used(state, "koordinator/team") == 0
    assert state.quotas.quotas["koordinator/team"].requested[GPU] == 8 * G  # pending pods count in the request
    state.apply(PodAssumed(pod="default/p", uid=p.metadata.uid, node="n0"))
    assert used(state, "koordinator/team") == 8 * G and used(state, "koordinator/org") == 8 * G
    state.apply(pod_event(bound(p, "n0")))
    assert state.quotas.quotas["koordinator/team"].running[GPU] == 8 * G
    state.apply(pod_event(bound(p, "n0", phase="Succeeded")))
    assert used(state, "koordinator/team") == 0 and used(state, "koordinator/org") == 0
    assert state.quotas.quotas["koordinator/team"].requested.get(GPU, 0) == 0
    state.apply(PodDeleted(key="default/p", uid=p.metadata.uid))
    assert "default/p" not in state.quotas.shares


def test_a_nominated_pending_pod_reserves_quota_but_does_not_run() -> None:
    state = fold(eq(elastic_quota("team", namespace="default", minimum=gpus(8), maximum=gpus(32))))
    p = pod("p")
    state.apply(pod_event(p))
    state.apply(PodNominated(pod="default/p", uid=p.metadata.uid, node="n1"))
    team = state.quotas.quotas["koordinator/team"]
    assert team.used[GPU] == 8 * G and team.running.get(GPU, 0) == 0


def test_non_preemptible_usage_is_kept_apart() -> None:
    state = fold(eq(elastic_quota("team", namespace="default", minimum=gpus(8), maximum=gpus(32))))
    state.apply(pod_event(bound(pod("core", labels={QUOTA_PREEMPTIBLE_LABEL: "false"}), "n0")))
    state.apply(pod_event(bound(pod("extra"), "n1")))
    team = state.quotas.quotas["koordinator/team"]
    assert team.used[GPU] == 16 * G and team.used_np[GPU] == 8 * G


def test_pods_created_before_their_quota_are_counted_when_it_appears_and_dropped_when_it_goes() -> None:
    state = fold(pod_event(bound(pod("early", namespace="team-a"), "n0")))
    state.apply(eq(elastic_quota("team-a", namespace="team-a", minimum=gpus(8), maximum=gpus(32))))
    assert used(state, "koordinator/team-a") == 8 * G
    state.apply(ElasticQuotaDeleted(key="team-a/team-a"))
    assert not state.quotas.active and state.quotas.quota_of("team-a/early") is None


def test_a_restored_snapshot_knows_the_same_quotas_and_usage() -> None:
    state = fold(
        eq(elastic_quota("team-a", namespace="default", minimum=gpus(8), maximum=gpus(32))),
        CapacityElasticQuotaUpserted(quota=capacity_quota("ns-x", minimum=gpus(4), maximum=gpus(8))),
        QueueUpserted(queue=queue("q", capability=gpus(8))),
        pod_event(bound(pod("a"), "n0")),
        pod_event(pod("x", namespace="ns-x")),
    )
    restored = ClusterState.restore(state.snapshot())
    assert restored.canonical() == state.canonical()
    assert used(restored, "koordinator/team-a") == 8 * G


# --------------------------------------------------------------------------- runtime


def _quotas(*specs: tuple[str, int, int, int]) -> list[Quota]:
    out = []
    for name, low, high, weight in specs:
        quota = Quota(KOORDINATOR, name, name, "ElasticQuota")
        quota.min, quota.max, quota.weight = {GPU: low}, {GPU: high}, {GPU: weight}
        out.append(quota)
    return out


def test_runtime_gives_each_its_request_up_to_min_then_shares_the_rest_by_weight() -> None:
    # Koordinator's own example: A asks less than its min and lends 5; with 40 idle that is 45 for
    # B, C, D to share by weight 60:50:80: B would get 14 but needs only 5, so 9 go round again to
    # C and D (3 and 6). C ends at 20 + 12 + 3, D at 10 + 19 + 6.
    children = _quotas(("a", 20, 100, 1), ("b", 15, 100, 60), ("c", 20, 100, 50), ("d", 10, 100, 80))
    given = _water_fill(105, children, [15, 20, 50, 80], GPU)
    assert given == [15, 20, 35, 35]


def test_runtime_scales_mins_down_when_the_cluster_cannot_hold_them() -> None:
    children = _quotas(("a", 60, 100, 1), ("b", 60, 100, 1))
    assert _water_fill(60, children, [80, 80], GPU) == [30, 30]


def test_runtime_of_a_quota_alone_is_the_whole_cluster_up_to_its_max_and_request() -> None:
    state = fold(
        eq(elastic_quota("team-a", namespace="default", minimum=gpus(8), maximum=gpus(24))),
        eq(elastic_quota("team-b", namespace="other", minimum=gpus(24), maximum=gpus(32))),
        *(pod_event(pod(f"p{i}")) for i in range(4)),
    )
    team_a = state.quotas.by_name[KOORDINATOR]["team-a"]
    assert state.quotas.runtime(state, team_a)[GPU] == 24 * G  # asks 32, capped at max 24; team-b idle
    state.apply(pod_event(pod("b0", namespace="other", gpus=8)))
    state.apply(pod_event(pod("b1", namespace="other", gpus=8)))
    state.apply(pod_event(pod("b2", namespace="other", gpus=8)))
    assert state.quotas.runtime(state, team_a)[GPU] == 8 * G  # team-b asks its whole min back


# --------------------------------------------------------------------------- bad input


def test_min_above_max_is_cut_to_max_and_reported() -> None:
    state = fold(eq(elastic_quota("team", minimum=gpus(40), maximum=gpus(32))))
    assert state.quotas.by_name[KOORDINATOR]["team"].min[GPU] == 32 * G
    [problem] = state.problems_of("ElasticQuota", "quotas/team")
    assert problem.field == f"spec.min[{GPU}]" and "cut to max" in problem.message


def test_a_negative_or_malformed_quantity_counts_as_zero_and_is_reported() -> None:
    state = fold(eq(elastic_quota("team", minimum={GPU: "-4"}, maximum={GPU: "many"})))
    team = state.quotas.by_name[KOORDINATOR]["team"]
    assert team.min[GPU] == 0 and team.max[GPU] == 0
    fields = sorted(p.field for p in state.problems_of("ElasticQuota", "quotas/team"))
    assert fields == [f"spec.max[{GPU}]", f"spec.min[{GPU}]"]


def test_an_unknown_parent_or_a_parent_loop_makes_top_quotas_and_is_reported() -> None:
    state = fold(
        eq(elastic_quota("orphan", parent="nobody", minimum=gpus(1), maximum=gpus(8))),
        eq(elastic_quota("x", parent="y", is_parent=True, minimum=gpus(1), maximum=gpus(8))),
        eq(elastic_quota("y", parent="x", is_parent=True, minimum=gpus(1), maximum=gpus(8))),
    )
    book = state.quotas
    root = book.roots[KOORDINATOR]
    assert {q.name for q in root.children} >= {"orphan", "x", "y"}
    assert "'nobody' does not exist" in state.problems_of("ElasticQuota", "quotas/orphan")[0].message
    assert any("loops (x -> y -> x)" in p.message for p in state.problems_of("ElasticQuota", "quotas/x"))


def test_two_quotas_of_one_name_the_second_is_ignored_and_reported() -> None:
    state = fold(
        eq(elastic_quota("team", namespace="a", minimum=gpus(1), maximum=gpus(8))),
        eq(elastic_quota("team", namespace="b", minimum=gpus(2), maximum=gpus(8))),
    )
    assert state.quotas.by_name[KOORDINATOR]["team"].key == "a/team"
    assert state.problems_of("ElasticQuota", "b/team")[0].field == "metadata.name"


def test_a_malformed_shared_weight_falls_back_to_max_and_is_reported() -> None:
    state = fold(eq(elastic_quota("team", minimum=gpus(1), maximum=gpus(8),
                                  annotations={QUOTA_SHARED_WEIGHT_ANNOTATION: "{not json"})))
    team = state.quotas.by_name[KOORDINATOR]["team"]
    assert team.weight == {} and team.weight_of(GPU) == 8 * G
    assert state.problems_of("ElasticQuota", "quotas/team")[0].field.endswith("shared-weight]")


def test_volcano_queue_defaults_and_bad_weight() -> None:
    state = fold(
        QueueUpserted(queue=queue("q", weight=0, deserved=gpus(8), guarantee=gpus(4), reclaimable=False,
                                  state="Closed")),
    )
    q = state.quotas.by_name["volcano"]["q"]
    assert q.weight_default == 1 and not q.reclaimable and q.closed
    assert q.guarded[GPU] == 8 * G and q.reserved[GPU] == 4 * G
    assert state.problems_of("Queue", "q")[0].field == "spec.weight"


def test_a_status_write_on_a_quota_does_not_rebuild_the_trees() -> None:
    quota = elastic_quota("team", namespace="default", minimum=gpus(8), maximum=gpus(32))
    state = fold(eq(quota))
    before = state.quotas.trees_version
    with_status = msgspec.structs.replace(quota, status=msgspec.structs.replace(quota.status, used=gpus(8)))
    state.apply(eq(with_status))
    assert state.quotas.trees_version == before
