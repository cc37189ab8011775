"""Preemption across gang protocols: Volcano's preemptable and task minimums, Kubernetes'
disruptionMode, priority and preemptionPolicy (a PodGroup's, as 1.37's workload-aware preemption reads
them), and a Kubernetes gang whose topology key is not a layer of the tree (upstream does not preempt for
these; toposched does, by the same rules)."""

from __future__ import annotations

from typing import Any

import pytest

from events.builders import node, node_event
from events.ingest import kind_of, upsert_event
from placement.gang import plan_gang
from placement.plan import Unschedulable
from preemption import NoPreemption, PreemptionPlan, plan_preemption
from preemption.plan import NEVER_POLICY, SURPLUS
from state.cluster import ClusterState


def apply(state: ClusterState, manifest: dict[str, Any]) -> None:
    info = kind_of(manifest["apiVersion"], manifest["kind"])
    assert info is not None
    state.apply(upsert_event(info, manifest))


def cluster(count: int, racks: dict[int, str] | None = None) -> ClusterState:
    state = ClusterState()
    for i in range(count):
        labels = {"topology.example.com/rack": racks[i]} if racks else {}
        state.apply(node_event(node(f"n{i}", spine="s0", block="b0", labels=labels)))
    return state


def a_pod(name: str, *, priority: int, node_name: str = "", annotations: dict[str, str] | None = None,
          labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}", "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"schedulerName": "toposched", "priority": priority, "nodeName": node_name, **spec,
                     "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running" if node_name else "Pending"}}


def volcano_job(state: ClusterState, name: str, nodes: list[int], *, min_member: int, priority: int = 1,
                group_annotations: dict[str, str] | None = None, tasks: dict[str, int] | None = None,
                task_of: list[str] | None = None) -> None:
    apply(state, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": name, "namespace": "default", "annotations": group_annotations or {}},
                  "spec": {"minMember": min_member, "minTaskMember": tasks or {}}})
    for i, n in enumerate(nodes):
        annotations = {"scheduling.k8s.io/group-name": name}
        if task_of:
            annotations["volcano.sh/task-spec"] = task_of[i]
        apply(state, a_pod(f"{name}-{i}", priority=priority, node_name=f"n{n}", annotations=annotations))


def high_gang(state: ClusterState, size: int) -> None:
    apply(state, {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "high", "namespace": "default"}, "spec": {"minMember": size}})
    for i in range(size):
        apply(state, a_pod(f"high-{i}", priority=1000, labels={"pod-group.scheduling.sigs.k8s.io": "high"}))


def preempt(state: ClusterState, gang: str) -> PreemptionPlan | NoPreemption:
    failure = plan_gang(state, gang)
    assert isinstance(failure, Unschedulable), failure
    return plan_preemption(state, gang, failure)


def test_a_job_marked_not_preemptable_is_never_a_victim() -> None:
    state = cluster(4)
    volcano_job(state, "keep", [0, 1], min_member=2, group_annotations={"volcano.sh/preemptable": "false"})
    volcano_job(state, "spare", [2, 3], min_member=2)
    high_gang(state, 2)
    plan = preempt(state, "default/high")
    assert isinstance(plan, PreemptionPlan) and plan.victim_jobs == ("default/spare",)
    apply(state, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": "spare", "namespace": "default",
                               "annotations": {"volcano.sh/preemptable": "false"}},
                  "spec": {"minMember": 2}})
    refused = preempt(state, "default/high")
    assert isinstance(refused, NoPreemption)
    assert ("4 running pod(s) of priority below 1000 may not be evicted (marked volcano.sh/preemptable: false"
            in refused.reason)


def test_a_pod_marked_not_preemptable_keeps_its_gang_whole_and_only_others_surplus_can_go() -> None:
    state = cluster(4)
    volcano_job(state, "job", [0, 1, 2, 3], min_member=2)
    apply(state, a_pod("job-3", priority=1, node_name="n3", annotations={
        "scheduling.k8s.io/group-name": "job", "volcano.sh/preemptable": "false"}))
    high_gang(state, 2)
    plan = preempt(state, "default/high")
    assert isinstance(plan, PreemptionPlan)
    assert "default/job-3" not in plan.victims and len(plan.victims) == 2
    assert all(job.kind == SURPLUS for job in plan.jobs)


def test_surplus_never_takes_a_task_below_its_minimum() -> None:
    state = cluster(4)
    volcano_job(state, "job", [0, 1, 2, 3], min_member=1, tasks={"ps": 1, "worker": 1},
                task_of=["ps", "worker", "worker", "worker"])
    high_gang(state, 3)
    plan = preempt(state, "default/high")
    assert isinstance(plan, PreemptionPlan)
    # minMember 1 alone would let three pods go as surplus; but the ps pod is its task's minimum and one
    # worker must stay, so only two are surplus: the room for three takes the whole job.
    assert set(plan.victims) == {"default/job-0", "default/job-1", "default/job-2", "default/job-3"}


@pytest.mark.parametrize(("api_version", "mode"), [("scheduling.k8s.io/v1alpha2", "PodGroup"),
                                                   ("scheduling.k8s.io/v1beta1", {"all": {}})])
def test_disruption_mode_pod_group_leaves_no_member_to_be_preempted_alone(api_version: str, mode: Any) -> None:
    """1.36's disruptionMode PodGroup, and 1.37's all: {}."""
    state = cluster(4)
    apply(state, {"apiVersion": api_version, "kind": "PodGroup",
                  "metadata": {"name": "job", "namespace": "default"},
                  "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}, "disruptionMode": mode}})
    for i in range(4):
        apply(state, a_pod(f"job-{i}", priority=1, node_name=f"n{i}", schedulingGroup={"podGroupName": "job"}))
    high_gang(state, 1)
    plan = preempt(state, "default/high")
    assert isinstance(plan, PreemptionPlan) and len(plan.victims) == 4


def test_kubernetes_gang_with_a_topology_key_outside_the_tree_preempts_inside_one_value() -> None:
    state = cluster(6, racks={0: "r0", 1: "r0", 2: "r1", 3: "r1", 4: "r1", 5: "r0"})
    volcano_job(state, "low-r0", [0, 1], min_member=2)
    volcano_job(state, "low-r1", [2], min_member=1)
    volcano_job(state, "low-spread", [3, 5], min_member=2)
    apply(state, {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                  "metadata": {"name": "example-podgroup", "namespace": "default"},
                  "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                           "schedulingConstraints": {"topology": [{"key": "topology.example.com/rack"}]}}})
    for i in range(3):
        apply(state, a_pod(f"worker-{i}", priority=1000, schedulingGroup={"podGroupName": "example-podgroup"}))
    plan = preempt(state, "default/example-podgroup")
    assert isinstance(plan, PreemptionPlan)
    racks = {state.nodes[a.node].labels["topology.example.com/rack"] for a in plan.nominations}
    assert len(racks) == 1
    assert plan.domain in ("r0", "r1")


def kube_137_group(state: ClusterState, name: str, **spec: Any) -> None:
    """A Kubernetes 1.37 PodGroup (scheduling.k8s.io/v1beta1), as its Priority admission leaves it."""
    apply(state, {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": name, "namespace": "default"},
                  "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}, **spec}})


def test_a_pod_groups_priority_is_its_pods_priority_as_victims() -> None:
    """Workload-aware preemption takes the PodGroup's priority for all its pods, whatever their own: pods at
    2000 of a PodGroup at 5 are evicted for a job at 1000."""
    state = cluster(2)
    kube_137_group(state, "low", priority=5, priorityClassName="batch-low")
    for i in range(2):
        apply(state, a_pod(f"low-{i}", priority=2000, node_name=f"n{i}", schedulingGroup={"podGroupName": "low"}))
    assert {state.pods[f"default/low-{i}"].priority for i in range(2)} == {5}
    high_gang(state, 2)
    plan = preempt(state, "default/high")
    assert isinstance(plan, PreemptionPlan)
    assert set(plan.victims) == {"default/low-0", "default/low-1"}


def test_a_pod_groups_priority_is_its_pods_priority_as_preemptor() -> None:
    state = cluster(1)
    apply(state, a_pod("running", priority=500, node_name="n0"))
    kube_137_group(state, "wants-room", priority=10, priorityClassName="batch")
    apply(state, a_pod("worker", priority=1000, schedulingGroup={"podGroupName": "wants-room"}))
    outcome = preempt(state, "default/wants-room")
    assert isinstance(outcome, NoPreemption), outcome


def test_a_pod_group_with_preemption_policy_never_waits_for_room() -> None:
    state = cluster(1)
    apply(state, a_pod("running", priority=1, node_name="n0"))
    kube_137_group(state, "polite", priority=1000, priorityClassName="urgent", preemptionPolicy="Never")
    apply(state, a_pod("worker", priority=1000, schedulingGroup={"podGroupName": "polite"}))
    outcome = preempt(state, "default/polite")
    assert isinstance(outcome, NoPreemption) and outcome.kind == NEVER_POLICY
    assert "PodGroup default/polite has preemptionPolicy Never" in outcome.reason
    kube_137_group(state, "polite", priority=1000, priorityClassName="urgent")  # may preempt
    assert isinstance(preempt(state, "default/polite"), PreemptionPlan)
