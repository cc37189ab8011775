"""Placement of every gang protocol: all-or-nothing for annotation gangs, match policies, task
minimums, and Kubernetes' topology key and KAI's required level whether or not it is a layer of the
cluster's tree."""

from __future__ import annotations

from typing import Any

from events.builders import node, node_event
from events.ingest import kind_of, upsert_event
from events.model import PodAssumed, PodDeleted
from placement import plan_gang
from placement.members import quorum_met
from placement.plan import INVALID, MEMBERS, MUST_GATHER
from state.cluster import ClusterState
from tests.unit.placement.builders import (
    block_of,
    fabric,
    gang,
    nodes_of,
    occupy,
    planned,
    refused,
    run_pod,
)

MATCH_POLICY = "gang.scheduling.koordinator.sh/match-policy"


def apply(state: ClusterState, manifest: dict[str, Any]) -> None:
    info = kind_of(manifest["apiVersion"], manifest["kind"])
    assert info is not None
    state.apply(upsert_event(info, manifest))


def gpu_pod(name: str, *, gpus: int = 8, labels: dict[str, str] | None = None,
            annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}", "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"schedulerName": "toposched", **spec, "containers": [
                {"name": "main", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}


# --------------------------------------------------------------------------- Koordinator annotations


def annotation_pod(i: int) -> dict[str, Any]:
    return gpu_pod(f"a-{i}", annotations={"gang.scheduling.koordinator.sh/name": "gang-a",
                                          "gang.scheduling.koordinator.sh/min-available": "4"})


def test_annotation_gang_waits_for_min_available_and_then_places_all_at_once() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    for i in range(3):
        apply(state, annotation_pod(i))
    waiting = refused(plan_gang(state, "default/gang-a"))
    assert waiting.constraint == MEMBERS and "3 of minMember 4" in waiting.reason
    apply(state, annotation_pod(3))
    plan = planned(plan_gang(state, "default/gang-a"))
    assert len(plan.assignments) == 4


# --------------------------------------------------------------------------- match policies


def test_quorum_follows_the_match_policy() -> None:
    for policy, expected in (("waiting-and-running", True), ("once-satisfied", True), ("only-waiting", False)):
        state = fabric(blocks=1, nvlinks=2, nodes=2)
        keys = gang(state, "g", 3, min_member=2, annotations={MATCH_POLICY: policy})
        run_pod(state, keys[0], "n-s0b0a0-0")  # bound
        info = state.pods[keys[1]]
        state.apply(PodAssumed(pod=keys[1], uid=info.uid, node="n-s0b0a0-1", gang="default/g"))
        assert quorum_met(state, "default/g") is expected, policy


def test_only_waiting_needs_min_member_new_pods_however_many_run() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    keys = gang(state, "g", 3, min_member=2, annotations={MATCH_POLICY: "only-waiting"})
    run_pod(state, keys[0], "n-s0b0a0-0")
    run_pod(state, keys[1], "n-s0b0a0-1")
    result = refused(plan_gang(state, "default/g"))
    assert result.constraint == MEMBERS and "only-waiting" in result.reason


def test_waiting_and_running_counts_running_members_towards_min_member() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    keys = gang(state, "g", 3, min_member=2, annotations={MATCH_POLICY: "waiting-and-running"})
    run_pod(state, keys[0], "n-s0b0a0-0")
    plan = planned(plan_gang(state, "default/g"))
    assert sorted(nodes_of(plan)) == keys[1:]


# --------------------------------------------------------------------------- Volcano minTaskMember


def volcano_job(state: ClusterState, tasks: dict[str, int], pods: dict[str, int], min_member: int) -> None:
    apply(state, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": "job", "namespace": "default"},
                  "spec": {"minMember": min_member, "minTaskMember": tasks}})
    for task, count in pods.items():
        for i in range(count):
            apply(state, gpu_pod(f"job-{task}-{i}", annotations={"scheduling.k8s.io/group-name": "job",
                                                                 "volcano.sh/task-spec": task}))


def test_volcano_job_waits_until_every_task_minimum_exists() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    volcano_job(state, {"ps": 1, "worker": 2}, {"worker": 3}, min_member=3)
    result = refused(plan_gang(state, "default/job"))
    assert result.constraint == MEMBERS and "task 'ps'" in result.reason and "minTaskMember 1" in result.reason


def test_volcano_task_minimums_are_in_the_pods_placed_when_not_all_fit() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)  # 4 nodes of 8 GPUs
    occupy(state, "n-s0b0a1-1", 8)
    volcano_job(state, {"ps": 1, "worker": 2}, {"ps": 1, "worker": 4}, min_member=3)
    plan = planned(plan_gang(state, "default/job"))
    placed = set(nodes_of(plan))
    assert "default/job-ps-0" in placed and len(placed) == 3


# --------------------------------------------------------------------------- Kubernetes topology key


def rack_cluster() -> ClusterState:
    """Racks cut across the topograph blocks: r0 holds 2 nodes of s0b0 and 1 of s0b1, r1 the other 5."""
    state = ClusterState()
    racks = {"n0": "r0", "n1": "r0", "n2": "r1", "n3": "r1", "n4": "r0", "n5": "r1", "n6": "r1", "n7": "r1"}
    for index, (name, rack) in enumerate(racks.items()):
        state.apply(node_event(node(name, gpus=8, spine="s0", block=f"s0b{index // 4}",
                                    labels={"topology.example.com/rack": rack})))
    return state


def kube_group(state: ClusterState, key: str, min_count: int, pods: int) -> None:
    apply(state, {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                  "metadata": {"name": "example-podgroup", "namespace": "default"},
                  "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                           "schedulingConstraints": {"topology": [{"key": key}]}}})
    for i in range(pods):
        apply(state, gpu_pod(f"worker-{i}", schedulingGroup={"podGroupName": "example-podgroup"}))


def test_topology_key_outside_the_tree_keeps_every_pod_within_one_value_of_the_label() -> None:
    state = rack_cluster()
    kube_group(state, "topology.example.com/rack", 4, 4)
    plan = planned(plan_gang(state, "default/example-podgroup"))
    racks = {state.nodes[n].labels["topology.example.com/rack"] for n in nodes_of(plan).values()}
    assert racks == {"r1"} and len(plan.assignments) == 4
    assert plan.domain == "r1"


def test_a_pod_group_whose_pods_name_two_schedulers_is_not_scheduled_at_all() -> None:
    """Kubernetes' gang scheduling needs one scheduler for a PodGroup's pods (kube-scheduler rejects the
    group otherwise): 4 of ours meet minCount 4, yet a fifth pod left to default-scheduler holds them all."""
    state = rack_cluster()
    kube_group(state, "topology.example.com/rack", 4, 4)
    apply(state, gpu_pod("stray", schedulerName="default-scheduler",
                         schedulingGroup={"podGroupName": "example-podgroup"}))
    result = refused(plan_gang(state, "default/example-podgroup"))
    assert result.constraint == INVALID
    assert "pod default/stray names scheduler 'default-scheduler', not 'toposched'" in result.reason
    state.apply(PodDeleted(key="default/stray", uid="u-stray"))
    assert len(planned(plan_gang(state, "default/example-podgroup")).assignments) == 4


def test_topology_key_outside_the_tree_leaves_the_gang_pending_when_no_value_holds_it() -> None:
    state = rack_cluster()
    kube_group(state, "topology.example.com/rack", 6, 6)
    result = refused(plan_gang(state, "default/example-podgroup"))
    assert result.constraint == MUST_GATHER and "topology key topology.example.com/rack" in result.reason
    assert result.best_domain == "r1" and result.fit == 5


def test_topology_key_outside_the_tree_follows_relabelled_nodes() -> None:
    state = rack_cluster()
    kube_group(state, "topology.example.com/rack", 6, 6)
    state.apply(node_event(node("n0", gpus=8, spine="s0", block="s0b0", labels={"topology.example.com/rack": "r1"})))
    plan = planned(plan_gang(state, "default/example-podgroup"))
    assert {state.nodes[n].labels["topology.example.com/rack"] for n in nodes_of(plan).values()} == {"r1"}


def test_topology_key_that_is_a_layer_of_the_tree_is_a_must_gather_there() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b0a0-0", 8)
    kube_group(state, "network.topology.nvidia.com/block", 4, 4)
    plan = planned(plan_gang(state, "default/example-podgroup"))
    assert {block_of(n) for n in nodes_of(plan).values()} == {"s0b1"} and plan.level == "BlockLayer"


def test_recreated_member_of_a_topology_keyed_gang_joins_the_value_its_members_run_in() -> None:
    state = rack_cluster()
    kube_group(state, "topology.example.com/rack", 1, 3)
    run_pod(state, "default/worker-0", "n0")
    plan = planned(plan_gang(state, "default/example-podgroup"))
    assert {state.nodes[n].labels["topology.example.com/rack"] for n in nodes_of(plan).values()} == {"r0"}


# --------------------------------------------------------------------------- KAI Scheduler


def kai_topology(name: str, *labels: str) -> dict[str, Any]:
    return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def kai_group(state: ClusterState, size: int, topology: str, required: str, gpus: int = 8) -> None:
    apply(state, {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                  "metadata": {"name": "kai-job", "namespace": "default"},
                  "spec": {"minMember": size, "topologyConstraint": {"topology": topology,
                                                                     "requiredTopologyLevel": required}}})
    for i in range(size):
        apply(state, gpu_pod(f"kai-{i}", gpus=gpus, annotations={"pod-group-name": "kai-job"}))


def test_a_kai_required_level_of_another_kai_topology_keeps_the_gang_within_one_value_of_its_label() -> None:
    state = rack_cluster()
    apply(state, kai_topology("blocks", "network.topology.nvidia.com/block"))
    apply(state, kai_topology("racks", "topology.example.com/rack"))
    assert state.topology.source_name == "blocks"  # as many nodes carry both: the first by name
    kai_group(state, 4, "racks", "topology.example.com/rack")
    plan = planned(plan_gang(state, "default/kai-job"))
    assert {state.nodes[n].labels["topology.example.com/rack"] for n in nodes_of(plan).values()} == {"r1"}


def test_a_kai_required_level_of_the_topology_in_use_is_a_must_gather_at_its_layer() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b0a0-0", 8)
    kai_group(state, 4, "", "network.topology.nvidia.com/block")
    plan = planned(plan_gang(state, "default/kai-job"))
    assert {block_of(n) for n in nodes_of(plan).values()} == {"s0b1"} and plan.level == "BlockLayer"


def test_a_kai_required_hostname_holds_the_gang_to_one_node() -> None:
    state = rack_cluster()
    kai_group(state, 4, "", "kubernetes.io/hostname", gpus=2)
    plan = planned(plan_gang(state, "default/kai-job"))
    assert len(set(nodes_of(plan).values())) == 1 and len(plan.assignments) == 4


def test_a_kai_required_level_that_is_no_label_key_keeps_the_gang_pending() -> None:
    state = rack_cluster()
    kai_group(state, 2, "", "not a label")
    result = refused(plan_gang(state, "default/kai-job"))
    assert "KAI requiredTopologyLevel 'not a label'" in result.reason


def test_workload_replicas_are_planned_as_separate_gangs() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    apply(state, {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                  "metadata": {"name": "training", "namespace": "default"},
                  "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]}})
    for replica in ("0", "1"):
        for i in range(2 if replica == "0" else 1):
            apply(state, gpu_pod(f"w-{replica}-{i}", workloadRef={"name": "training", "podGroup": "workers",
                                                                  "podGroupReplicaKey": replica}))
    assert len(planned(plan_gang(state, "default/training:workers:0")).assignments) == 2
    missing = refused(plan_gang(state, "default/training:workers:1"))
    assert "1 of minMember 2" in missing.reason


# --------------------------------------------------------------------------- scheduling gates


GATE = {"name": "example.com/quota"}


def gated_annotation_pod(i: int, min_available: int, gates: list[dict[str, str]]) -> dict[str, Any]:
    return gpu_pod(f"a-{i}", annotations={"gang.scheduling.koordinator.sh/name": "gang-a",
                                          "gang.scheduling.koordinator.sh/min-available": str(min_available)},
                   schedulingGates=gates)


def test_a_pod_held_by_scheduling_gates_is_not_pending_until_the_last_one_is_removed() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    apply(state, gpu_pod("lone", schedulingGates=[GATE, {"name": "example.com/image"}]))
    assert state.pods["default/lone"].gated and "default/lone" not in state.pending
    apply(state, gpu_pod("lone", schedulingGates=[GATE]))
    assert "default/lone" not in state.pending
    apply(state, gpu_pod("lone"))
    assert not state.pods["default/lone"].gated and "default/lone" in state.pending


def test_a_gang_waits_for_its_gated_members_and_says_they_are_held_by_their_gates() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    for i in range(4):
        apply(state, gated_annotation_pod(i, 4, [GATE] if i == 3 else []))
    waiting = refused(plan_gang(state, "default/gang-a"))
    assert waiting.constraint == MEMBERS
    assert waiting.reason.endswith("3 of minMember 4 pods exist (0 running, 3 pending): 1 missing; 1 more held by "
                                   "their scheduling gates (spec.schedulingGates)")
    apply(state, gated_annotation_pod(3, 4, []))  # its controller removes the gate
    plan = planned(plan_gang(state, "default/gang-a"))
    assert len(plan.assignments) == 4


def test_a_gang_whose_minimum_is_met_without_its_gated_members_places_only_the_others() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    for i in range(4):
        apply(state, gated_annotation_pod(i, 3, [GATE] if i == 0 else []))
    plan = planned(plan_gang(state, "default/gang-a"))
    assert sorted(nodes_of(plan)) == ["default/a-1", "default/a-2", "default/a-3"]
