"""KAI's node pools (scheduling shards): KAI runs one scheduler per pool, each seeing only the nodes labelled
`kai.scheduler/node-pool` with its pool (the default shard: the nodes without the label) and the PodGroups
labelled so. A KAI job's pods go only on its pool's nodes, its preemption looks for victims there only, and
a gang of another dialect takes any node."""

from __future__ import annotations

from events.builders import node, pod
from events.model import KaiPodGroupUpserted, NodeUpserted, PodGroupUpserted, PodNominated, PodUpserted
from events.objects import (
    KAI_NODE_POOL_LABEL,
    KAI_POD_GROUP_ANNOTATION,
    KAI_QUEUE_LABEL,
    KaiObjectMeta,
    KaiPodGroup,
    KaiPodGroupSpec,
    KaiPodGroupStatus,
    KaiSchedulingCondition,
    ObjectMeta,
    PodGroup,
    PodGroupSpec,
)
from placement.fit import admits, shape_in
from placement.gang import plan_gang
from placement.lone import plan_pod
from placement.plan import BACKOFF, GangPlan, Unschedulable
from preemption import PreemptionPlan, plan_preemption
from state.cluster import ClusterState
from state.gangs import KAI_POD_GROUP_PROBLEM
from state.kai_gangs import kai_gang_spec

BLOCK = "network.example/block"
# Two blocks of 4 nodes: block-0 holds nodes 0-3, block-1 nodes 4-7. Nodes 2-5 (across both blocks) are in
# pool `gpu-nodes`; the others are unlabelled (KAI's default pool).
POOLED = {"n2", "n3", "n4", "n5"}


def cluster(*, pooled: set[str] = POOLED, label: str = KAI_NODE_POOL_LABEL) -> ClusterState:
    """Nodes `pooled` labelled `label`=gpu-nodes, on a state reading pools from `label` (KAI's default key)."""
    state = ClusterState(kai_node_pool_label=label)
    for number in range(8):
        name = f"n{number}"
        labels = {BLOCK: f"block-{number // 4}", "kubernetes.io/hostname": name}
        if name in pooled:
            labels[label or KAI_NODE_POOL_LABEL] = "gpu-nodes"
        state.apply(NodeUpserted(node=node(name, labels=labels)))
    return state


def kai_group(name: str, size: int, pool: str | None, label: str = KAI_NODE_POOL_LABEL, *,
              backoff: int | None = None, conditions: tuple[tuple[str, str], ...] = ()) -> KaiPodGroupUpserted:
    """`conditions`: (nodePool, transitionID) of UnschedulableOnNodePool conditions in its status."""
    labels = {label: pool} if pool is not None else {}
    return KaiPodGroupUpserted(pod_group=KaiPodGroup(
        metadata=KaiObjectMeta(name=name, namespace="default", uid=f"uid-{name}", labels=labels),
        spec=KaiPodGroupSpec(min_member=size, queue="default-queue", scheduling_backoff=backoff),
        status=KaiPodGroupStatus(scheduling_conditions=[
            KaiSchedulingCondition(type="UnschedulableOnNodePool", node_pool=where, transition_id=number,
                                   reason="Unschedulable", status="True") for where, number in conditions])))


def kai_job(state: ClusterState, name: str, size: int, pool: str | None, *, priority: int | None = None,
            on: list[str] | None = None) -> list[str]:
    """A KAI PodGroup of `size` whole-node pods (bound to the nodes `on` when given), labelled with the state's
    pool label."""
    state.apply(kai_group(name, size, pool, state.kai_node_pool_label or KAI_NODE_POOL_LABEL))
    keys = []
    for index in range(size):
        obj = pod(f"{name}-{index}", annotations={KAI_POD_GROUP_ANNOTATION: name}, priority=priority,
                  node_name=on[index] if on else "", phase="Running" if on else "Pending")
        state.apply(PodUpserted(pod=obj))
        keys.append(f"default/{name}-{index}")
    return keys


def placed(result: GangPlan | Unschedulable) -> set[str]:
    assert isinstance(result, GangPlan), result
    return {assignment.node for assignment in result.assignments}


def refused(result: GangPlan | Unschedulable) -> Unschedulable:
    assert isinstance(result, Unschedulable), result
    return result


def test_a_kai_job_in_a_pool_goes_on_that_pool_s_nodes_only() -> None:
    state = cluster()
    kai_job(state, "train", 4, "gpu-nodes")
    assert placed(plan_gang(state, "default/train")) == POOLED


def test_a_kai_job_without_the_label_goes_on_the_nodes_without_it_and_not_beyond() -> None:
    state = cluster()
    kai_job(state, "fits", 4, None)
    assert placed(plan_gang(state, "default/fits")) == {"n0", "n1", "n6", "n7"}
    kai_job(state, "too-big", 5, None)
    reason = refused(plan_gang(state, "default/too-big")).reason
    assert "outside KAI node pool default" in reason, reason


def test_a_kai_job_in_a_pool_no_node_is_in_waits_saying_so() -> None:
    state = cluster()
    kai_job(state, "cpu", 1, "cpu-nodes")
    reason = refused(plan_gang(state, "default/cpu")).reason
    assert "8 node(s) were outside KAI node pool cpu-nodes" in reason, reason
    state = cluster(pooled=set())
    kai_job(state, "cpu", 1, "cpu-nodes")
    assert "outside KAI node pool cpu-nodes" in refused(plan_gang(state, "default/cpu")).reason


def test_without_pooled_nodes_the_default_pool_is_every_node() -> None:
    state = cluster(pooled=set())
    [key, *_] = kai_job(state, "all", 8, None)
    assert placed(plan_gang(state, "default/all")) == {f"n{number}" for number in range(8)}
    assert shape_in(state, state.pods[key]).unconstrained


def test_relabelling_the_pod_group_moves_the_job_to_the_other_pool() -> None:
    state = cluster()
    kai_job(state, "moving", 2, "gpu-nodes")
    assert placed(plan_gang(state, "default/moving")) <= POOLED
    state.apply(kai_group("moving", 2, None))  # KAI's docs: relabel the PodGroup to direct it to another shard
    assert not placed(plan_gang(state, "default/moving")) & POOLED


def test_a_node_joining_a_pool_leaves_the_default_pool() -> None:
    state = cluster(pooled=set())
    kai_job(state, "plain", 8, None)
    assert len(placed(plan_gang(state, "default/plain"))) == 8
    state.apply(NodeUpserted(node=node("n0", labels={BLOCK: "block-0", "kubernetes.io/hostname": "n0",
                                                     KAI_NODE_POOL_LABEL: "gpu-nodes"})))
    assert "1 node(s) were outside KAI node pool default" in refused(plan_gang(state, "default/plain")).reason


def test_a_gang_of_another_dialect_takes_any_node() -> None:
    state = cluster()
    state.apply(PodGroupUpserted(pod_group=PodGroup(metadata=ObjectMeta(name="koord", namespace="default"),
                                                    spec=PodGroupSpec(min_member=8))))
    for index in range(8):
        state.apply(PodUpserted(pod=pod(f"koord-{index}", gang="koord")))
    assert len(placed(plan_gang(state, "default/koord"))) == 8


def test_a_lone_pod_in_a_kai_queue_goes_to_the_pool_its_own_label_names() -> None:
    state = cluster()
    state.apply(PodUpserted(pod=pod("lone", labels={KAI_QUEUE_LABEL: "team", KAI_NODE_POOL_LABEL: "gpu-nodes"})))
    assert placed(plan_pod(state, "default/lone")) <= POOLED
    state.apply(PodUpserted(pod=pod("plain-lone", labels={KAI_QUEUE_LABEL: "team"})))
    assert not placed(plan_pod(state, "default/plain-lone")) & POOLED
    state.apply(PodUpserted(pod=pod("not-kai", labels={KAI_NODE_POOL_LABEL: "elsewhere"})))
    assert placed(plan_pod(state, "default/not-kai"))  # not in a KAI queue: the label means nothing to it


def test_preemption_for_a_pooled_job_evicts_inside_its_pool_only() -> None:
    # Every node runs a low-priority job; the cheapest victims (priority 1) run outside the pool, the
    # pool's own (priority 5) must go instead.
    state = cluster()
    kai_job(state, "outside", 4, None, priority=1, on=["n0", "n1", "n6", "n7"])
    inside = kai_job(state, "inside", 4, "gpu-nodes", priority=5, on=sorted(POOLED))
    kai_job(state, "urgent", 1, "gpu-nodes", priority=1000)
    failure = refused(plan_gang(state, "default/urgent"))
    result = plan_preemption(state, "default/urgent", failure)
    assert isinstance(result, PreemptionPlan), result
    assert set(result.victims) <= set(inside), result.victims


def test_an_empty_pool_label_is_reported_and_read_as_the_default_pool() -> None:
    spec, problems = kai_gang_spec(kai_group("blank", 1, "").pod_group, "default/blank")
    assert spec.kai_node_pool == ""
    [problem] = problems
    assert (problem.kind, problem.field) == (KAI_POD_GROUP_PROBLEM, f"metadata.labels[{KAI_NODE_POOL_LABEL}]")
    assert "read as the default pool" in problem.message


def test_a_cluster_whose_kai_names_pools_by_another_label_is_read_by_that_label() -> None:
    # KAI's nodePoolLabelKey set to another key: toposched's kai_node_pool_label says the same
    state = cluster(label="run.ai/node-pool")
    kai_job(state, "train", 4, "gpu-nodes")
    assert placed(plan_gang(state, "default/train")) == POOLED
    kai_job(state, "plain", 4, None)
    assert placed(plan_gang(state, "default/plain")) == {"n0", "n1", "n6", "n7"}
    # the default key means nothing there
    state.apply(NodeUpserted(node=node("n9", labels={KAI_NODE_POOL_LABEL: "gpu-nodes"})))
    [key] = kai_job(state, "on-default-key", 1, None)
    assert admits(shape_in(state, state.pods[key]), state.nodes["n9"]) == ""
    restored = ClusterState.restore(state.snapshot())
    assert restored.kai_node_pool_label == "run.ai/node-pool"
    assert placed(plan_gang(restored, "default/train")) == POOLED


def test_no_pool_label_turns_pools_off() -> None:
    state = cluster(label="")
    kai_job(state, "train", 8, "gpu-nodes")
    assert len(placed(plan_gang(state, "default/train"))) == 8


# --------------------------------------------------------------------------- spec.schedulingBackoff


def test_a_gang_tried_once_per_pool_is_not_tried_again_in_the_pool_its_latest_condition_names() -> None:
    # Run:ai's node-pool assigner writes schedulingBackoff 1 and moves the PodGroup to its next pool on the
    # UnschedulableOnNodePool condition; KAI's scheduler leaves it alone in the pool that wrote it meanwhile.
    state = cluster()
    kai_job(state, "once", 2, "gpu-nodes")
    state.apply(kai_group("once", 2, "gpu-nodes", backoff=1, conditions=(("gpu-nodes", "1"),)))
    failure = refused(plan_gang(state, "default/once"))
    assert failure.constraint == BACKOFF
    assert "not tried in node pool 'gpu-nodes' again: spec.schedulingBackoff 1" in failure.reason, failure.reason
    assert "transitionID 1" in failure.reason and KAI_NODE_POOL_LABEL in failure.reason
    # moved to the default pool: tried there, though the old pool's condition stays
    state.apply(kai_group("once", 2, None, backoff=1, conditions=(("gpu-nodes", "1"),)))
    assert not placed(plan_gang(state, "default/once")) & POOLED


def test_the_latest_condition_by_transition_id_decides_and_without_one_or_a_backoff_the_gang_is_tried() -> None:
    state = cluster()
    kai_job(state, "once", 2, None)
    # the default pool's condition is older than the other pool's: the default pool has not refused it since
    state.apply(kai_group("once", 2, None, backoff=1, conditions=(("default", "2"), ("gpu-nodes", "10"))))
    assert placed(plan_gang(state, "default/once"))
    state.apply(kai_group("once", 2, None, backoff=1, conditions=(("gpu-nodes", "2"), ("default", "10"))))
    assert refused(plan_gang(state, "default/once")).constraint == BACKOFF
    for backoff in (None, -1):  # KAI's default: tried in its pool until placed
        state.apply(kai_group("once", 2, None, backoff=backoff, conditions=(("default", "10"),)))
        assert placed(plan_gang(state, "default/once"))
    state.apply(kai_group("once", 2, None, backoff=1))
    assert placed(plan_gang(state, "default/once"))


def test_a_gang_holding_nominations_is_tried_though_its_pool_refused_it_once() -> None:
    # Its preemption freed room and nominated nodes for it; the condition written meanwhile must not strand it.
    state = cluster()
    keys = kai_job(state, "once", 1, None)
    state.apply(kai_group("once", 1, None, backoff=1, conditions=(("default", "1"),)))
    assert refused(plan_gang(state, "default/once")).constraint == BACKOFF
    state.apply(PodNominated(pod=keys[0], uid=state.pods[keys[0]].uid, node="n0", gang="default/once"))
    assert placed(plan_gang(state, "default/once")) == {"n0"}


def test_a_scheduling_backoff_kai_does_not_support_is_reported_and_read_as_one() -> None:
    group = kai_group("odd", 1, None, backoff=3).pod_group
    spec, problems = kai_gang_spec(group, "default/odd", KAI_NODE_POOL_LABEL)
    assert spec.kai_tries_once
    [problem] = [p for p in problems if p.field == "spec.schedulingBackoff"]
    assert "3 is not one KAI supports (-1 or 1); read as 1" in problem.message
    for backoff, once in ((None, False), (-1, False), (1, True), (0, True)):
        spec, problems = kai_gang_spec(kai_group("g", 1, None, backoff=backoff).pod_group, "default/g",
                                       KAI_NODE_POOL_LABEL)
        assert spec.kai_tries_once is once
        assert not [p for p in problems if p.field == "spec.schedulingBackoff"] or backoff == 0
