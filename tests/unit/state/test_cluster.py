"""Behaviour of the fold: what the scheduler believes after the cluster tells it things."""

from __future__ import annotations

import msgspec
import pytest

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.ingest import KIND_BY_NAME, upsert_event
from events.model import (
    BindFailed,
    Event,
    GangPending,
    GangPlanned,
    NodeDeleted,
    NominationCleared,
    ObjectUndecodable,
    PodAssumed,
    PodBound,
    PodDeleted,
    PodForgotten,
    PodNominated,
    PriorityClassUpserted,
)
from events.objects import Condition, Container, ObjectMeta, Pod, PriorityClass, ResourceRequirements
from placement import Unschedulable, plan_pod
from state.cluster import ClusterState, GangRecord, PodInfo
from state.compact import Shape
from state.resources import MAX_MILLI

GPU = "nvidia.com/gpu"


def _state(*events: Event) -> ClusterState:
    state = ClusterState()
    for event in events:
        state.apply(event)
    return state


def test_bound_pod_uses_node_capacity_and_is_not_pending() -> None:
    state = _state(node_event(node("n1")), pod_event(bound(pod("p", gpus=4), "n1")))
    assert state.nodes["n1"].used[GPU] == 4000
    assert state.free_on(state.nodes["n1"])[GPU] == 4000
    assert not state.pending


def test_unbound_pod_of_ours_is_pending_and_other_schedulers_pods_are_ignored() -> None:
    state = _state(node_event(node("n1")), pod_event(pod("ours")), pod_event(pod("theirs", scheduler="")))
    assert state.pending == {"default/ours"}


def test_terminal_pod_frees_its_resources() -> None:
    running = bound(pod("p"), "n1")
    state = _state(node_event(node("n1")), pod_event(running), pod_event(bound(pod("p"), "n1", phase="Succeeded")))
    assert state.nodes["n1"].used.get(GPU, 0) == 0


def test_assumed_pod_holds_capacity_until_forgotten() -> None:
    state = _state(node_event(node("n1")), pod_event(pod("p")))
    state.apply(PodAssumed(pod="default/p", uid="uid-default-p", node="n1"))
    assert state.nodes["n1"].used[GPU] == 8000 and not state.pending
    state.apply(PodForgotten(pod="default/p", uid="uid-default-p"))
    assert state.nodes["n1"].used.get(GPU, 0) == 0 and state.pending == {"default/p"}


def test_bind_failure_releases_the_assumption() -> None:
    state = _state(node_event(node("n1")), pod_event(pod("p")),
                   PodAssumed(pod="default/p", uid="uid-default-p", node="n1"),
                   BindFailed(pod="default/p", uid="uid-default-p", node="n1", reason="500"))
    assert state.nodes["n1"].used.get(GPU, 0) == 0


def test_bound_event_counts_once_even_when_the_watch_confirms_it_later() -> None:
    state = _state(node_event(node("n1")), pod_event(pod("p")),
                   PodAssumed(pod="default/p", uid="uid-default-p", node="n1"),
                   PodBound(pod="default/p", uid="uid-default-p", node="n1"))
    state.apply(pod_event(bound(pod("p"), "n1")))
    assert state.nodes["n1"].used[GPU] == 8000
    assert state.nodes["n1"].pods == {"default/p"}


def test_decision_for_a_recreated_pod_with_another_uid_is_ignored() -> None:
    state = _state(node_event(node("n1")), pod_event(pod("p", uid="new")))
    state.apply(PodAssumed(pod="default/p", uid="old", node="n1"))
    assert state.nodes["n1"].used.get(GPU, 0) == 0


def test_init_container_max_rule_and_pod_slot() -> None:
    p = pod("p", gpus=0, cpu="1")
    init = Container(name="init", resources=ResourceRequirements(requests={"cpu": "4", "memory": "1Gi"}))
    p = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, init_containers=[init]))
    state = _state(pod_event(p))
    assert state.pods["default/p"].requests["cpu"] == 4000
    assert state.pods["default/p"].requests["memory"] == 64 * 2**30 * 1000
    assert state.pods["default/p"].requests["pods"] == 1000


def _with_containers(containers: list[tuple[str, str]], init: list[tuple[str, str, str]]) -> Pod:
    """A pod of containers (name, cpu) and init containers (name, cpu, restartPolicy), decoded from JSON."""
    def spec_of(name: str, cpu: str, policy: str = "") -> dict[str, object]:
        return {"name": name, "resources": {"requests": {"cpu": cpu}}, **({"restartPolicy": policy} if policy else {})}

    manifest = {"metadata": {"name": "p", "namespace": "default", "uid": "u-p"},
                "spec": {"schedulerName": "toposched", "containers": [spec_of(*c) for c in containers],
                         "initContainers": [spec_of(*c) for c in init]}}
    return msgspec.json.decode(msgspec.json.encode(manifest), type=Pod)


@pytest.mark.parametrize(("containers", "init", "cpu"), [
    # Sidecars (restartPolicy Always) run beside the containers: 1 + 2.
    ([("main", "1")], [("proxy", "2", "Always")], 3),
    # An init container after a sidecar runs beside it: 2 + 5 > 1 + 2.
    ([("main", "1")], [("proxy", "2", "Always"), ("fetch", "5", "")], 7),
    # Before it, alone: 5 > 1 + 2, and 3 + 2 = 5 after.
    ([("main", "1")], [("fetch", "5", ""), ("proxy", "2", "Always"), ("warm", "3", "")], 5),
    # Plain init containers: the largest, against the containers' sum (Volcano's documented example).
    ([("c1", "2"), ("c2", "1")], [("ic1", "2", ""), ("ic2", "2", "")], 3),
    # A training container with a log shipper as a sidecar: 40 + 20, where the max rule said 40.
    ([("trainer", "40")], [("shipper", "20", "Always")], 60),
])
def test_a_pods_requests_count_sidecars_as_kube_scheduler_and_the_kubelet_do(
        containers: list[tuple[str, str]], init: list[tuple[str, str, str]], cpu: int) -> None:
    state = _state(pod_event(_with_containers(containers, init)))
    assert state.pods["default/p"].requests["cpu"] == cpu * 1000


def test_pod_level_requests_set_the_pods_cpu_memory_and_hugepages_and_nothing_else() -> None:
    manifest = {"metadata": {"name": "p", "namespace": "default", "uid": "u-p"},
                "spec": {"schedulerName": "toposched",
                         "resources": {"requests": {"cpu": "10", "memory": "20Gi", "nvidia.com/gpu": "4"}},
                         "containers": [{"name": "a", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}},
                                        {"name": "b", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]}}
    state = _state(pod_event(msgspec.json.decode(msgspec.json.encode(manifest), type=Pod)))
    requests = state.pods["default/p"].requests
    # cpu and memory are the pod's; a GPU cannot be asked for at pod level: the containers' count
    assert (requests["cpu"], requests["memory"], requests["nvidia.com/gpu"]) == (10_000, 20 * 2**30 * 1000, 1000)
    manifest["spec"]["resources"] = {"requests": {"cpu": "lots"}}  # type: ignore[index]
    state = _state(pod_event(msgspec.json.decode(msgspec.json.encode(manifest), type=Pod)))
    [problem] = state.problems_of("Pod", "default/p")
    assert problem.field == "spec.resources.requests[cpu]" and state.pods["default/p"].unusable


def test_malformed_quantity_is_a_problem_naming_pod_and_field_not_a_crash() -> None:
    p = pod("p")
    bad = Container(name="c", resources=ResourceRequirements(requests={"cpu": "lots"}))
    p = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, containers=[bad]))
    state = _state(pod_event(p))
    [problem] = state.problems_of("Pod", "default/p")
    assert problem.field == "spec.containers[0].resources.requests[cpu]"
    assert "'lots'" in problem.message


def test_priority_comes_from_priority_class_even_when_the_class_arrives_later() -> None:
    state = _state(pod_event(pod("p", priority_class="high")))
    assert state.pods["default/p"].priority == 0
    assert "PriorityClass 'high' not found" in state.problems_of("Pod", "default/p")[0].message
    state.apply(PriorityClassUpserted(priority_class=PriorityClass(
        metadata=ObjectMeta(name="high"), value=1000, preemption_policy="Never")))
    assert state.pods["default/p"].priority == 1000
    assert state.pods["default/p"].preemption_policy == "Never"
    assert state.problems_of("Pod", "default/p") == []


def test_gang_membership_from_label_and_spec_from_pod_group() -> None:
    state = _state(group_event(pod_group("job", min_member=2, gather=[{"layer": "BlockLayer",
                                                                       "strategy": "MustGather"}])),
                   pod_event(pod("a", gang="job")), pod_event(pod("b", gang="job")))
    gang = state.gangs["default/job"]
    assert gang.members == {"default/a", "default/b"}
    assert gang.spec is not None and gang.spec.min_member == 2
    assert gang.spec.gather[0].strategy == "MustGather"


def test_malformed_network_topology_annotation_is_recorded_and_gang_still_usable() -> None:
    group = pod_group("job", min_member=2)
    group = msgspec.structs.replace(group, metadata=msgspec.structs.replace(
        group.metadata, annotations={"gang.scheduling.koordinator.sh/network-topology-spec": "{not json"}))
    state = _state(group_event(group))
    [problem] = state.problems_of("PodGroup", "default/job")
    assert "network-topology-spec" in problem.field
    assert state.gangs["default/job"].spec is not None


def test_a_nomination_to_a_node_not_known_yet_holds_its_room_once_the_node_comes_and_again_after_it_returns() -> None:
    # A relist may bring a pod whose nominatedNodeName (another scheduler's) names a node listed after it.
    obj = pod("vip", priority=100)
    nominated = msgspec.structs.replace(obj, status=msgspec.structs.replace(obj.status, nominated_node_name="n1"))
    early = _state(pod_event(nominated), node_event(node("n1")))
    late = _state(node_event(node("n1")), pod_event(nominated))
    for state in (early, late):
        assert state.nominated_load(state.nodes["n1"], priority=50)[GPU] == 8000
        assert state.nominating == {"default/vip"}
    assert early.canonical() == late.canonical()
    early.apply(NodeDeleted(name="n1"))
    assert early.nominating == set()
    early.apply(node_event(node("n1")))
    assert early.nominated_load(early.nodes["n1"], priority=50)[GPU] == 8000


def test_negative_min_member_is_a_problem() -> None:
    state = _state(group_event(pod_group("job", min_member=-3)))
    assert state.problems_of("PodGroup", "default/job")[0].field == "spec.minMember"


def test_nomination_is_held_until_cleared_and_only_blocks_lower_priority() -> None:
    state = _state(node_event(node("n1")), pod_event(pod("vip", priority=100, gang="big")))
    state.apply(PodNominated(pod="default/vip", uid="uid-default-vip", node="n1", gang="default/big", priority=100))
    n1 = state.nodes["n1"]
    assert state.nominated_load(n1, priority=50)[GPU] == 8000
    assert state.nominated_load(n1, priority=200) == {}
    assert state.nominated_load(n1, priority=50, exclude_gangs=["default/big"]) == {}
    state.apply(NominationCleared(pod="default/vip"))
    assert state.nominated_load(n1, priority=50) == {}


def test_deleted_node_takes_its_usage_and_returns_it_when_it_comes_back() -> None:
    state = _state(node_event(node("n1")), pod_event(bound(pod("p"), "n1")), NodeDeleted(name="n1"))
    assert "n1" not in state.nodes
    state.apply(node_event(node("n1")))
    assert state.nodes["n1"].used[GPU] == 8000


def test_deleted_pod_frees_capacity_and_leaves_its_gang() -> None:
    state = _state(node_event(node("n1")), pod_event(bound(pod("p", gang="job"), "n1")),
                   PodDeleted(key="default/p", uid="uid-default-p"))
    assert state.nodes["n1"].used.get(GPU, 0) == 0
    assert "default/job" not in state.gangs


def test_undecodable_object_is_listed_as_a_problem() -> None:
    state = _state(ObjectUndecodable(kind="PodGroup", key="default/x", problem="spec.minMember: Expected `int`"))
    assert [str(p) for p in state.all_problems()] == ["PodGroup default/x: : spec.minMember: Expected `int`"]


def test_snapshot_restores_the_same_state() -> None:
    state = _state(node_event(node("n1")), node_event(node("n2")), group_event(pod_group("job", min_member=2)),
                   pod_event(bound(pod("a", gang="job"), "n1"), time=3.0), pod_event(pod("b", gang="job")),
                   PodAssumed(pod="default/b", uid="uid-default-b", node="n2"))
    restored = ClusterState.restore(state.snapshot())
    assert restored.canonical() == state.canonical()
    assert restored.pods["default/a"].bound_at == 3.0


def test_pods_keep_their_generation_and_a_pending_ones_condition_through_a_snapshot() -> None:
    """What the pending-pod condition writer compares with after a restart; a snapshot written before the
    generation was kept reads its pods as generation 0 (not said)."""
    said = Condition(type="PodScheduled", status="False", reason="Unschedulable", message="no room",
                     last_transition_time="2026-11-27T10:00:00Z", observed_generation=7)

    def generation(obj: Pod, value: int) -> Pod:
        return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, generation=value))

    pending = generation(pod("b", gang="job"), 7)
    pending = msgspec.structs.replace(pending, status=msgspec.structs.replace(pending.status, conditions=[said]))
    state = _state(node_event(node("n1")), pod_event(generation(bound(pod("a", gang="job"), "n1"), 1)),
                   pod_event(pending))
    restored = ClusterState.restore(state.snapshot())
    assert restored.canonical() == state.canonical()
    assert restored.pods["default/a"].obj.metadata.generation == 1
    assert restored.pods["default/b"].obj.metadata.generation == 7
    assert restored.pods["default/b"].obj.status.conditions == [said]
    snapshot = state.to_snapshot()
    older = msgspec.structs.replace(snapshot, pod_table=msgspec.structs.replace(snapshot.pod_table, generation=b""))
    assert {p.obj.metadata.generation for p in ClusterState.from_snapshot(older).pods.values()} == {0}


def test_a_gang_held_for_its_members_stays_held_through_a_snapshot_and_a_plan_clears_it() -> None:
    state = _state(group_event(pod_group("job", min_member=3)), pod_event(pod("a", gang="job")),
                   GangPending(gang="default/job", reason="1 of minMember 3 pods exist", held=True))
    assert state.gangs["default/job"].held
    restored = ClusterState.restore(state.snapshot())
    assert restored.gangs["default/job"].held
    assert restored.gangs["default/job"].last_reason == "1 of minMember 3 pods exist"
    restored.apply(GangPlanned(gang="default/job"))
    assert not restored.gangs["default/job"].held
    # A snapshot written before `held` existed (its gang records one field shorter) reads as not held.
    old = msgspec.msgpack.encode(["default/job", 0.0, 2, "why", 0])
    assert msgspec.msgpack.decode(old, type=GangRecord) == GangRecord("default/job", 0.0, 2, "why", 0, False)


def break_the_fold_for(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make folding pod `name` raise (a stand-in for a bug) while it carries the label bug=yes."""
    derive = ClusterState._derive_pod

    def derive_pod(self: ClusterState, info: PodInfo, obj: Pod, shape: Shape | None = None) -> None:
        derive(self, info, obj, shape)
        if obj.metadata.name == name and obj.metadata.labels.get("bug") == "yes":
            raise RuntimeError("a bug in the fold")

    monkeypatch.setattr(ClusterState, "_derive_pod", derive_pod)


def test_an_event_whose_fold_raises_marks_its_pod_unplaceable_and_leaves_everything_else_folded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    break_the_fold_for(monkeypatch, "broken")
    state = ClusterState()
    assert state.apply(node_event(node("n1"))) is None
    failure = state.apply(pod_event(pod("broken", labels={"bug": "yes"})))
    assert isinstance(failure, RuntimeError)
    assert state.apply(pod_event(pod("fine"))) is None
    assert state.pending == {"default/broken", "default/fine"}
    assert "could not be folded (RuntimeError: a bug in the fold)" in state.pods["default/broken"].unusable
    assert [p.field for p in state.all_problems() if p.key == "default/broken"] == [""]
    unschedulable = plan_pod(state, "default/broken")
    assert isinstance(unschedulable, Unschedulable) and "could not be folded" in unschedulable.reason
    assert not isinstance(plan_pod(state, "default/fine"), Unschedulable)

    restored = ClusterState.restore(state.snapshot())  # the mark survives a snapshot
    assert restored.canonical() == state.canonical()
    assert restored.pods["default/broken"].unusable

    assert state.apply(pod_event(pod("broken"))) is None  # an update that folds cleanly lifts the mark
    assert not state.pods["default/broken"].unusable and not state.fold_failures
    assert not isinstance(plan_pod(state, "default/broken"), Unschedulable)


def test_node_allocatable_beyond_the_cap_is_capped_like_kubernetes() -> None:
    huge = node("n1", memory="1e30", cpu="1" * 40)
    state = _state(node_event(huge), pod_event(bound(pod("p", memory="20Pi"), "n1")))
    allocatable = state.nodes["n1"].allocatable
    assert allocatable["memory"] == allocatable["cpu"] == MAX_MILLI
    assert state.nodes["n1"].used["memory"] == 20 * 2**50 * 1000
    assert not list(state.all_problems())


def test_a_pod_whose_request_is_not_a_quantity_is_never_placed_and_the_field_is_named() -> None:
    state = _state(node_event(node("n1")), pod_event(pod("bad", cpu="lots")), pod_event(pod("minus", memory="-1Gi")))
    field = "spec.containers[0].resources.requests[cpu]"
    (problem,) = state.problems_of("Pod", "default/bad")
    assert (problem.field, problem.reason) == (field, "InvalidQuantity")
    assert "'lots' is not a Kubernetes quantity" in problem.message and "not placed" in problem.message
    for key, words in (("default/bad", field), ("default/minus", "is negative")):
        refused = plan_pod(state, key)
        assert isinstance(refused, Unschedulable) and refused.constraint == "invalid" and words in refused.reason
    assert state.pending == {"default/bad", "default/minus"}  # waiting, with the reason, not dropped


def test_a_node_allocatable_that_is_not_a_quantity_counts_as_none_of_that_resource() -> None:
    broken = node("n1")
    broken = msgspec.structs.replace(broken, status=msgspec.structs.replace(
        broken.status, allocatable={**broken.status.allocatable, GPU: "eight"}))
    state = _state(node_event(broken), pod_event(pod("p", gpus=1)))
    assert GPU not in state.nodes["n1"].allocatable
    (problem,) = state.problems_of("Node", "n1")
    assert (problem.field, problem.reason) == (f"status.allocatable[{GPU}]", "InvalidQuantity")
    assert isinstance(plan_pod(state, "default/p"), Unschedulable)


def test_an_undecodable_version_of_a_pod_holds_it_back_until_a_decodable_one_arrives() -> None:
    pods = KIND_BY_NAME["Pod"]
    state = _state(node_event(node("n1")), pod_event(pod("p", gpus=1)))
    version = state.problems_version
    bad = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"priority": "high"}}
    state.apply(upsert_event(pods, bad))
    (problem,) = state.all_problems()
    assert problem.reason == "UndecodableObject" and problem.message.startswith("spec.priority: Expected `int")
    refused = plan_pod(state, "default/p")
    assert isinstance(refused, Unschedulable) and "cannot be decoded (spec.priority" in refused.reason
    assert state.problems_version > version
    version = state.problems_version
    state.apply(pod_event(pod("p", gpus=1)))  # a version that decodes lifts the hold and the problem
    assert not list(state.all_problems()) and state.problems_version == version + 1
    assert not isinstance(plan_pod(state, "default/p"), Unschedulable)
    state.apply(pod_event(pod("p", gpus=1)))  # the same again changes no problem: the version stays
    assert state.problems_version == version + 1
