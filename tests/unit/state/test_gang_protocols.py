"""Every gang protocol folds into one GangSpec: Koordinator's annotation-only gangs and match
policies, scheduler-plugins' scheduling.x-k8s.io PodGroup, Kubernetes' Workload API (both shapes),
Volcano's minTaskMember and preemptable. Objects are written as the projects' docs write them."""

from __future__ import annotations

from typing import Any

import pytest

from events.ingest import kind_of, upsert_event
from events.model import Event, PodDeleted, WorkloadDeleted
from state.cluster import ClusterState
from state.gangs import ONCE_SATISFIED, ONLY_WAITING, WAITING_AND_RUNNING, Problem
from state.pod_gangs import parse_go_duration, workload_gang_key

GPU_NODE: dict[str, Any] = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}


def event(manifest: dict[str, Any]) -> Event:
    info = kind_of(manifest["apiVersion"], manifest["kind"])
    assert info is not None, manifest
    return upsert_event(info, manifest, manifest["apiVersion"])


def pod(name: str, *, namespace: str = "default", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"u-{namespace}-{name}",
                         "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"schedulerName": "toposched", **spec,
                     "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}


def fold(*manifests: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    for manifest in manifests:
        state.apply(event(manifest))
    return state


def problems(state: ClusterState, kind: str, key: str) -> list[Problem]:
    return state.problems_of(kind, key)


# --------------------------------------------------------------------------- Koordinator: pod annotations


def koord_pod(name: str, gang: str = "gang-a", **extra: str) -> dict[str, Any]:
    annotations = {"gang.scheduling.koordinator.sh/name": gang, "gang.scheduling.koordinator.sh/min-available": "5",
                   **extra}
    return pod(name, annotations=annotations)


def test_annotation_only_gang_is_a_gang_of_its_min_available() -> None:
    state = fold(*(koord_pod(f"a-{i}", **{"gang.scheduling.koordinator.sh/waiting-time": "3600s",
                                           "gang.scheduling.koordinator.sh/total-number": "5",
                                           "gang.scheduling.koordinator.sh/mode": "Strict"}) for i in range(5)))
    gang = state.gangs["default/gang-a"]
    assert gang.spec is not None
    assert gang.spec.min_member == 5 and gang.spec.schedule_timeout_seconds == 3600.0
    assert gang.spec.match_policy == ONCE_SATISFIED  # Koordinator's default
    assert gang.members == {f"default/a-{i}" for i in range(5)}
    assert gang.definer == "default/a-0"
    assert not problems(state, "Gang", "default/gang-a")


def test_the_member_defining_an_annotation_gang_does_not_depend_on_arrival_order() -> None:
    first = koord_pod("a-1", **{"gang.scheduling.koordinator.sh/min-available": "3"})
    second = koord_pod("a-0", **{"gang.scheduling.koordinator.sh/min-available": "4"})
    one, other = fold(first, second), fold(second, first)
    for state in (one, other):
        spec = state.gangs["default/gang-a"].spec
        assert spec is not None and spec.min_member == 4  # a-0's: the smallest key defines the gang
    assert one.canonical() == other.canonical()
    one.apply(PodDeleted(key="default/a-0", uid="u-default-a-0"))
    spec = one.gangs["default/gang-a"].spec
    assert spec is not None and spec.min_member == 3 and one.gangs["default/gang-a"].definer == "default/a-1"
    one.apply(PodDeleted(key="default/a-1", uid="u-default-a-1"))
    assert "default/gang-a" not in one.gangs


def test_annotation_gang_with_a_pod_group_label_and_no_pod_group_uses_the_annotations() -> None:
    state = fold(pod("w-0", labels={"pod-group.scheduling.sigs.k8s.io": "job"},
                     annotations={"gang.scheduling.koordinator.sh/min-available": "2"}))
    spec = state.gangs["default/job"].spec
    assert spec is not None and spec.min_member == 2


def test_a_pod_group_object_wins_over_the_annotations_and_says_they_are_ignored() -> None:
    state = fold(koord_pod("a-0"), {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                                    "metadata": {"name": "gang-a", "namespace": "default"},
                                    "spec": {"minMember": 2}})
    spec = state.gangs["default/gang-a"].spec
    assert spec is not None and spec.min_member == 2 and spec.dialect == "koordinator"
    [ignored] = problems(state, "Gang", "default/gang-a")
    assert "pod annotations are ignored" in ignored.message


def test_nonstrict_mode_is_read_and_said_to_be_unimplemented_once_on_the_gang() -> None:
    state = fold(*(koord_pod(f"a-{i}", **{"gang.scheduling.koordinator.sh/mode": "NonStrict"}) for i in range(3)))
    [problem] = problems(state, "Gang", "default/gang-a")
    assert problem.reason == "UnsupportedField" and "NonStrict" in problem.message
    assert problem.field == "metadata.annotations[gang.scheduling.koordinator.sh/mode]"


@pytest.mark.parametrize(("annotation", "value", "words"), [
    ("gang.scheduling.koordinator.sh/min-available", "five", "not a positive integer"),
    ("gang.scheduling.koordinator.sh/waiting-time", "an hour", "not a positive duration"),
    ("gang.scheduling.koordinator.sh/total-number", "3", "below the minimum 5"),
    ("gang.scheduling.koordinator.sh/match-policy", "sometimes", "not once-satisfied"),
    ("gang.scheduling.koordinator.sh/mode", "Lenient", "not Strict or NonStrict"),
])
def test_bad_gang_annotations_are_reported_naming_the_annotation(annotation: str, value: str, words: str) -> None:
    state = fold(koord_pod("a-0", **{annotation: value}))
    found = [p for p in problems(state, "Gang", "default/gang-a") if annotation in p.field]
    assert found and words in found[0].message and found[0].reason != "UnsupportedField"


def test_annotation_gangs_form_a_gang_group_across_namespaces() -> None:
    groups = '["namespaceA/gang-a", "namespaceB/gang-b"]'
    state = fold(pod("a-0", namespace="namespaceA", annotations={
        "gang.scheduling.koordinator.sh/name": "gang-a", "gang.scheduling.koordinator.sh/min-available": "5",
        "gang.scheduling.koordinator.sh/groups": groups}),
        pod("b-0", namespace="namespaceB", annotations={
            "gang.scheduling.koordinator.sh/name": "gang-b", "gang.scheduling.koordinator.sh/min-available": "5",
            "gang.scheduling.koordinator.sh/groups": groups}))
    spec = state.gangs["namespaceA/gang-a"].spec
    assert spec is not None and spec.gang_group == ("namespaceA/gang-a", "namespaceB/gang-b")


def test_an_empty_groups_annotation_means_no_gang_group_as_in_koordinators_docs() -> None:
    state = fold(koord_pod("a-0", **{"gang.scheduling.koordinator.sh/groups": ""}))
    spec = state.gangs["default/gang-a"].spec
    assert spec is not None and spec.gang_group == ("default/gang-a",)
    assert not problems(state, "Gang", "default/gang-a")


@pytest.mark.parametrize(("annotation", "policy"), [
    ("gang.scheduling.koordinator.sh/match-policy", ONLY_WAITING),
    ("pod-group.scheduling.sigs.k8s.io/match-policy", WAITING_AND_RUNNING),
])
def test_match_policy_is_read_from_a_pod_group_and_its_alias(annotation: str, policy: str) -> None:
    state = fold({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "pg", "namespace": "default", "annotations": {annotation: policy}},
                  "spec": {"minMember": 2}})
    spec = state.gangs["default/pg"].spec
    assert spec is not None and spec.match_policy == policy


def test_go_durations_are_read_as_go_reads_them() -> None:
    assert parse_go_duration("3600s") == 3600.0
    assert parse_go_duration("1h30m") == 5400.0
    assert parse_go_duration("1.5h") == 5400.0
    assert parse_go_duration("300ms") == pytest.approx(0.3)
    assert parse_go_duration("0") == 0.0
    for bad in ("", "10", "1 h", "h", "1d"):
        assert parse_go_duration(bad) is None


# --------------------------------------------------------------------------- scheduler-plugins


def test_scheduler_plugins_pod_group_and_its_label_make_a_gang_counting_running_members() -> None:
    state = fold({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "nginx", "namespace": "default"},
                  "spec": {"scheduleTimeoutSeconds": 10, "minMember": 3, "minResources": {"cpu": "3"}}},
                 *(pod(f"nginx-{i}", labels={"scheduling.x-k8s.io/pod-group": "nginx"}) for i in range(3)))
    gang = state.gangs["default/nginx"]
    assert gang.spec is not None and gang.spec.dialect == "scheduler-plugins"
    assert gang.spec.min_member == 3 and gang.spec.schedule_timeout_seconds == 10.0
    assert gang.spec.match_policy == WAITING_AND_RUNNING
    assert len(gang.members) == 3
    # its Coscheduling reads minResources, and so does toposched (placement/gang.py): nothing to report
    assert not problems(state, "SchedulerPluginsPodGroup", "default/nginx")
    assert gang.spec.min_resources == (("cpu", 3000),)
    # the MPI operator writes scheduleTimeoutSeconds 0, which Coscheduling's Permit takes as unset (its default)
    unset = fold({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "mpi", "namespace": "default"}, "spec": {"scheduleTimeoutSeconds": 0,
                                                                                "minMember": 1}})
    spec = unset.gangs["default/mpi"].spec
    assert spec is not None and spec.schedule_timeout_seconds is None
    assert not problems(unset, "SchedulerPluginsPodGroup", "default/mpi")
    assert "default/nginx" in state.scheduler_plugins_pod_groups and not state.pod_groups


# --------------------------------------------------------------------------- Kubernetes Workload API


def kube_pod_group(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_kubernetes_pod_group_gang_with_a_topology_key_and_pods_joining_by_scheduling_group() -> None:
    state = fold(kube_pod_group("example-podgroup", {
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": "topology.example.com/rack"}]}}),
        *(pod(f"worker-{i}", schedulingGroup={"podGroupName": "example-podgroup"}) for i in range(4)))
    gang = state.gangs["default/example-podgroup"]
    assert gang.spec is not None and gang.spec.dialect == "kubernetes"
    assert gang.spec.min_member == 4 and gang.spec.topology_key == "topology.example.com/rack"
    assert len(gang.members) == 4
    assert "topology.example.com/rack" in state.label_trees
    state.apply(event(kube_pod_group("example-podgroup", {"schedulingPolicy": {"gang": {"minCount": 4}}})))
    assert "topology.example.com/rack" not in state.label_trees  # no gang asks for it any more


def test_kubernetes_basic_policy_is_a_group_of_minimum_one() -> None:
    state = fold(kube_pod_group("driver", {"schedulingPolicy": {"basic": {}}}))
    spec = state.gangs["default/driver"].spec
    assert spec is not None and spec.min_member == 1


def test_kubernetes_pod_group_fields_read_but_not_implemented_are_said_so() -> None:
    state = fold(kube_pod_group("training-group", {
        "schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup",
        "resourceClaims": [{"name": "pg-claim", "resourceClaimName": "my-pg-claim"}]}),
        {**kube_pod_group("member", {"schedulingPolicy": {"gang": {"minCount": 2}},
                                     "parentCompositePodGroupName": "leader-workers"}),
         "apiVersion": "scheduling.k8s.io/v1beta1"})
    spec = state.gangs["default/training-group"].spec
    assert spec is not None and spec.disrupt_whole
    found = {p.field: p for p in problems(state, "KubernetesPodGroup", "default/training-group")}
    found.update({p.field: p for p in problems(state, "KubernetesPodGroup", "default/member")})
    assert set(found) == {"spec.resourceClaims"}
    assert all(p.reason == "UnsupportedField" for p in found.values())
    # a PodGroup naming a CompositePodGroup not created yet waits for it, as kube-scheduler holds its pods
    member = state.gangs["default/member"].spec
    assert member is not None and member.composite is not None
    assert member.composite.invalid.startswith("CompositePodGroup default/leader-workers not found")


@pytest.mark.parametrize("api_version", ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"])
def test_kubernetes_1_37_pod_group_is_the_gang_its_1_36_form_is(api_version: str) -> None:
    """1.37 wrote disruptionMode as an object and podGroupTemplateRef as workloadRef; the gang is the same."""
    newer = fold({**kube_pod_group("example-podgroup", {
        "schedulingPolicy": {"gang": {"minCount": 4}}, "disruptionMode": {"all": {}},
        "workloadRef": {"workloadName": "training", "templateName": "workers"},
        "schedulingConstraints": {"topology": [{"key": "topology.example.com/rack"}]}}), "apiVersion": api_version},
        *(pod(f"worker-{i}", schedulingGroup={"podGroupName": "example-podgroup"}) for i in range(4)))
    older = fold(kube_pod_group("example-podgroup", {
        "schedulingPolicy": {"gang": {"minCount": 4}}, "disruptionMode": "PodGroup",
        "podGroupTemplateRef": {"workload": {"workloadName": "training", "podGroupTemplateName": "workers"}},
        "schedulingConstraints": {"topology": [{"key": "topology.example.com/rack"}]}}),
        *(pod(f"worker-{i}", schedulingGroup={"podGroupName": "example-podgroup"}) for i in range(4)))
    for state in (newer, older):
        gang = state.gangs["default/example-podgroup"]
        assert gang.spec is not None and gang.spec.min_member == 4 and gang.spec.disrupt_whole
        assert gang.spec.topology_key == "topology.example.com/rack" and len(gang.members) == 4
        assert not problems(state, "KubernetesPodGroup", "default/example-podgroup")
    assert newer.kube_pod_groups["default/example-podgroup"].api_version == api_version


@pytest.mark.parametrize(("mode", "why"), [
    ({}, "sets neither single nor all; single"),
    ({"single": {}, "all": {}}, "sets both single and all; single"),
    ("Everything", "'Everything' is not Pod or PodGroup; Pod"),
])
def test_a_disruption_mode_the_api_server_refuses_is_reported_and_read_as_single(mode: Any, why: str) -> None:
    state = fold({**kube_pod_group("g", {"schedulingPolicy": {"gang": {"minCount": 1}}, "disruptionMode": mode}),
                  "apiVersion": "scheduling.k8s.io/v1beta1"})
    spec = state.gangs["default/g"].spec
    assert spec is not None and not spec.disrupt_whole
    assert [(p.field, p.message) for p in problems(state, "KubernetesPodGroup", "default/g")] == [
        ("spec.disruptionMode", why)]


def workload(**groups: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": "training-job-workload", "namespace": "some-ns"},
            "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "training-job"},
                     "podGroups": [{"name": name, "policy": policy} for name, policy in groups.items()]}}


def worker(name: str, replica: str = "") -> dict[str, Any]:
    ref = {"name": "training-job-workload", "podGroup": "workers"}
    if replica:
        ref["podGroupReplicaKey"] = replica
    return pod(name, namespace="some-ns", workloadRef=ref)


def test_workload_replica_keys_are_separate_gangs_of_the_pod_groups_policy() -> None:
    state = fold(workload(workers={"gang": {"minCount": 2}}),
                 *(worker(f"w-{r}-{i}", str(r)) for r in range(2) for i in range(2)))
    for replica in ("0", "1"):
        key = workload_gang_key("some-ns", "training-job-workload", "workers", replica)
        assert key == f"some-ns/training-job-workload:workers:{replica}"
        gang = state.gangs[key]
        assert gang.spec is not None and gang.spec.min_member == 2 and len(gang.members) == 2
    assert state.gang_object(key) is not None and state.gang_object(key).kind == "Workload"  # type: ignore[union-attr]


def test_workload_pods_wait_for_their_workload_and_lose_the_gang_with_it() -> None:
    state = fold(*(worker(f"w-{i}") for i in range(4)))
    key = "some-ns/training-job-workload:workers"
    assert state.gangs[key].spec is None
    state.apply(event(workload(workers={"gang": {"minCount": 4}})))
    spec = state.gangs[key].spec
    assert spec is not None and spec.min_member == 4
    state.apply(WorkloadDeleted(key="some-ns/training-job-workload"))
    assert state.gangs[key].spec is None


def test_workload_without_the_pods_pod_group_leaves_them_without_a_gang_spec() -> None:
    state = fold(workload(driver={"basic": {}}), worker("w-0"))
    assert state.gangs["some-ns/training-job-workload:workers"].spec is None


# --------------------------------------------------------------------------- Volcano


def volcano_group(**extra: Any) -> dict[str, Any]:
    metadata = {"name": "job", "namespace": "default", **extra.pop("metadata", {})}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": metadata,
            "spec": {"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2}, **extra}}


def test_volcano_min_task_member_and_the_pods_task_spec_annotation() -> None:
    state = fold(volcano_group(), pod("job-ps-0", annotations={"scheduling.k8s.io/group-name": "job",
                                                                 "volcano.sh/task-spec": "ps"}))
    spec = state.gangs["default/job"].spec
    assert spec is not None and spec.task_minimums == (("ps", 1), ("worker", 2))
    assert state.pods["default/job-ps-0"].task == "ps"


@pytest.mark.parametrize(("where", "value", "preemptable"), [
    ("annotations", "false", False), ("labels", "false", False), ("annotations", "true", True),
    ("annotations", "no", False),  # Volcano reads a value ParseBool refuses as false
])
def test_volcano_preemptable_on_pod_groups_and_pods(where: str, value: str, preemptable: bool) -> None:
    member = pod("p")
    member["metadata"][where] = {"volcano.sh/preemptable": value}
    state = fold(volcano_group(metadata={where: {"volcano.sh/preemptable": value}}), member)
    spec = state.gangs["default/job"].spec
    assert spec is not None and spec.preemptable is preemptable
    assert state.pods["default/p"].preemptable is preemptable


def test_volcano_queue_other_than_default_must_exist_and_is_enforced() -> None:
    # queues are enforced (state/quota.py): a queue that does not exist holds the job back, and says so
    state = fold(volcano_group(queue="research"), pod("p", annotations={"scheduling.k8s.io/group-name": "job"}))
    assert not any(p.reason == "UnsupportedField" for p in problems(state, "PodGroup", "default/job"))
    assert [p.reason for p in problems(state, "VolcanoPodGroup", "default/job")] == ["QuotaNotFound"]
    assert "queue research not found" in state.quotas.refusal_of("default/p")


# --------------------------------------------------------------------------- membership


def test_a_pod_naming_two_gangs_joins_the_first_and_is_told_about_the_other() -> None:
    state = fold(pod("x", labels={"pod-group.scheduling.sigs.k8s.io": "a"},
                     annotations={"scheduling.k8s.io/group-name": "b"}))
    assert state.pods["default/x"].gang == "default/a"
    [problem] = problems(state, "Pod", "default/x")
    assert problem.field == "metadata.annotations[scheduling.k8s.io/group-name]" and "default/b" in problem.message


def test_every_new_kind_survives_a_snapshot() -> None:
    state = fold(workload(workers={"gang": {"minCount": 2}}), worker("w-0", "0"),
                 kube_pod_group("example-podgroup", {"schedulingPolicy": {"gang": {"minCount": 4}},
                                                     "schedulingConstraints": {"topology": [{"key": "rack"}]}}),
                 {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "nginx", "namespace": "default"}, "spec": {"minMember": 3}},
                 koord_pod("a-0", **{"gang.scheduling.koordinator.sh/mode": "NonStrict"}),
                 {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0", "labels": {"rack": "r0"}},
                  "status": {"allocatable": GPU_NODE}})
    restored = ClusterState.restore(state.snapshot())
    assert restored.canonical() == state.canonical()
    assert set(restored.label_trees) == {"rack"}


def test_a_kubernetes_pod_groups_priority_is_every_members_priority() -> None:
    """Workload-aware preemption's rule: the PodGroup's priority (admitted from its class) is its pods'."""
    def group(**spec: Any) -> dict[str, Any]:
        return {**kube_pod_group("g", {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}),
                "apiVersion": "scheduling.k8s.io/v1beta1"}

    members = [pod(f"w-{i}", schedulingGroup={"podGroupName": "g"}, priority=2000 + i) for i in range(2)]
    state = fold(group(priority=7, priorityClassName="batch"), *members)
    assert [state.pods[f"default/w-{i}"].priority for i in range(2)] == [7, 7]
    assert [state.pods[f"default/w-{i}"].own_priority for i in range(2)] == [2000, 2001]
    assert not problems(state, "KubernetesPodGroup", "default/g")  # the admitted value stands, class or not
    state.apply(event({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                       "metadata": {"name": "batch"}, "value": 300}))
    state.apply(event(group(priorityClassName="batch")))  # a 1.36 cluster without the priority admitted
    assert [state.pods[f"default/w-{i}"].priority for i in range(2)] == [300, 300]
    state.apply(event(group()))  # neither: each pod its own
    assert [state.pods[f"default/w-{i}"].priority for i in range(2)] == [2000, 2001]
    state.apply(event(group(priority=0)))  # the default admission wrote into a PodGroup naming no class
    assert [state.pods[f"default/w-{i}"].priority for i in range(2)] == [2000, 2001]


@pytest.mark.parametrize(("priority", "kept"), [(2**31 - 1, True), (-(2**31), True), (2**31, False), (-(2**40), False)])
def test_a_pod_group_priority_outside_int32_is_reported_and_not_used(priority: int, kept: bool) -> None:
    state = fold({**kube_pod_group("g", {"schedulingPolicy": {"gang": {"minCount": 1}}, "priority": priority,
                                         "priorityClassName": "odd"}), "apiVersion": "scheduling.k8s.io/v1beta1"})
    spec = state.gangs["default/g"].spec
    assert spec is not None and spec.group_priority == (priority if kept else None)
    fields = [p.field for p in problems(state, "KubernetesPodGroup", "default/g")]
    assert ("spec.priority" in fields) != kept
