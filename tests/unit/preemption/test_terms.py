"""Preemption lifts required pod anti-affinity: the lower-priority pods whose presence keeps a job out
(its anti-affinity selects them, or theirs selects it) are evicted whole-job-wise, in the cost order,
and placement, with the victims gone for its inter-pod rules too, accepts the plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import PodDeleted
from events.objects import Affinity, Pod, TopologySpreadConstraint
from placement.gang import plan_gang
from placement.lone import plan_pod
from placement.plan import CAPACITY, POD_FIT, GangPlan, Unschedulable
from placement.pod_affinity import ANTI_AFFINITY, EXISTING_ANTI_AFFINITY
from preemption import NoPreemption, PreemptionPlan, plan_preemption
from preemption.plan import NO_CANDIDATES, WHOLE_GANG
from state.cluster import ClusterState

HOST = "kubernetes.io/hostname"
BLOCK = "network.topology.nvidia.com/block"
JOB_KEY = "jobset.sigs.k8s.io/job-key"


def cluster(blocks: Sequence[tuple[str, int]]) -> ClusterState:
    """Nodes n0, n1, ... laid out as (block, node count) in order, all in spine s0."""
    state = ClusterState()
    index = 0
    for block, count in blocks:
        for _ in range(count):
            state.apply(node_event(node(f"n{index}", spine="s0", block=block)))
            index += 1
    return state


def term(key: str, **selector: Any) -> dict[str, Any]:
    return {"labelSelector": selector, "topologyKey": key, "namespaceSelector": {}}


def with_terms(obj: Pod, *, together: Sequence[dict[str, Any]] = (), apart: Sequence[dict[str, Any]] = ()) -> Pod:
    raw: dict[str, Any] = {}
    if together:
        raw["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(together)}
    if apart:
        raw["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(apart)}
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, affinity=msgspec.convert(raw, Affinity)))


def exclusive(obj: Pod, job_key: str) -> Pod:
    """A pod of a JobSet job with exclusive placement per block, as JobSet's webhook writes it."""
    labels = {**obj.metadata.labels, JOB_KEY: job_key}
    obj = msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, labels=labels))
    return with_terms(obj, together=[term(BLOCK, matchExpressions=[{"key": JOB_KEY, "operator": "In",
                                                                      "values": [job_key]}])],
                      apart=[term(BLOCK, matchExpressions=[{"key": JOB_KEY, "operator": "Exists"},
                                                           {"key": JOB_KEY, "operator": "NotIn",
                                                            "values": [job_key]}])])


def run_job(state: ClusterState, name: str, nodes: Sequence[int], *, priority: int, gpus: int = 8,
            exclusive_placement: bool = False, labels: dict[str, str] | None = None) -> list[str]:
    state.apply(group_event(pod_group(name, min_member=len(nodes))))
    keys = []
    for i, n in enumerate(nodes):
        obj = pod(f"{name}-{i}", gang=name, priority=priority, gpus=gpus, labels=labels)
        if exclusive_placement:
            obj = exclusive(obj, f"{name}-key")
        state.apply(pod_event(bound(obj, f"n{n}")))
        keys.append(f"default/{name}-{i}")
    return keys


def submit(state: ClusterState, name: str, size: int, *, priority: int = 1000, gpus: int = 8,
           make: Any = None) -> None:
    state.apply(group_event(pod_group(name, min_member=size)))
    for i in range(size):
        obj = pod(f"{name}-{i}", gang=name, priority=priority, gpus=gpus)
        state.apply(pod_event(make(obj) if make is not None else obj, time=100.0))


def preempt(state: ClusterState, key: str, *, lone: bool = False) -> PreemptionPlan | NoPreemption:
    failure = plan_pod(state, key) if lone else plan_gang(state, key)
    assert isinstance(failure, Unschedulable), failure
    return plan_preemption(state, key, failure)


def gone(state: ClusterState, plan: PreemptionPlan) -> None:
    for victim in plan.victims:
        state.apply(PodDeleted(key=victim))


def placed_after(state: ClusterState, key: str, plan: PreemptionPlan, *, lone: bool = False) -> GangPlan:
    """Where placement puts the job once the victims are gone: where the plan nominated it."""
    gone(state, plan)
    result = plan_pod(state, key) if lone else plan_gang(state, key)
    assert isinstance(result, GangPlan), result
    assert {a.node for a in result.assignments} <= set(plan.nodes) or not plan.nodes
    return result


def test_a_pod_whose_anti_affinity_selects_a_lower_priority_pod_evicts_it_though_gpus_are_free() -> None:
    state = cluster([("b0", 1)])
    low = run_job(state, "web-old", [0], priority=10, gpus=2, labels={"app": "web"})
    state.apply(pod_event(with_terms(pod("web-new", priority=1000, gpus=2, labels={"app": "web"}),
                                     apart=[term(HOST, matchLabels={"app": "web"})])))
    failure = plan_pod(state, "default/web-new")
    assert isinstance(failure, Unschedulable)
    assert failure.constraint == CAPACITY  # evicting can lift it: not a pod no node can ever take
    assert ANTI_AFFINITY in failure.reason
    plan = preempt(state, "default/web-new", lone=True)
    assert isinstance(plan, PreemptionPlan), plan
    assert plan.victims == tuple(low)
    assert placed_after(state, "default/web-new", plan, lone=True).assignments[0].node == "n0"


def test_a_lower_priority_pod_whose_anti_affinity_selects_the_preemptor_is_evicted() -> None:
    state = cluster([("b0", 2)])
    db = pod("db", priority=10, gpus=1, labels={"app": "db"})
    state.apply(pod_event(bound(with_terms(db, apart=[term(BLOCK, matchLabels={"app": "web"})]), "n0")))
    run_job(state, "plain", [1], priority=10, gpus=1)  # no terms: it blocks nothing, and is not evicted
    submit(state, "web", 2, gpus=4, make=lambda obj: msgspec.structs.replace(
        obj, metadata=msgspec.structs.replace(obj.metadata, labels={**obj.metadata.labels, "app": "web"})))
    failure = plan_gang(state, "default/web")
    assert isinstance(failure, Unschedulable) and failure.constraint == CAPACITY
    assert EXISTING_ANTI_AFFINITY in failure.reason
    plan = preempt(state, "default/web")
    assert isinstance(plan, PreemptionPlan), plan
    assert plan.victims == ("default/db",)
    placed_after(state, "default/web", plan)


def test_a_blocker_of_equal_or_higher_priority_is_never_evicted_so_no_plan_is_made() -> None:
    state = cluster([("b0", 2)])
    above = pod("db", priority=2000, gpus=1, labels={"app": "db"})
    state.apply(pod_event(bound(with_terms(above, apart=[term(BLOCK, matchLabels={"app": "web"})]), "n0")))
    run_job(state, "filler", [1], priority=10, gpus=1)  # a lower-priority pod exists, but blocks nothing
    state.apply(pod_event(pod("web", priority=1000, gpus=1, labels={"app": "web"})))
    result = preempt(state, "default/web", lone=True)
    assert isinstance(result, NoPreemption), result
    assert result.kind == NO_CANDIDATES


def test_a_blocker_of_equal_priority_is_never_evicted() -> None:
    state = cluster([("b0", 1)])
    run_job(state, "web-old", [0], priority=1000, gpus=2, labels={"app": "web"})
    state.apply(pod_event(with_terms(pod("web-new", priority=1000, gpus=2, labels={"app": "web"}),
                                     apart=[term(HOST, matchLabels={"app": "web"})])))
    result = preempt(state, "default/web-new", lone=True)
    assert isinstance(result, NoPreemption), result


def test_an_exclusive_jobset_job_evicts_the_lower_priority_job_of_one_block_rather_than_of_several() -> None:
    # Every block holds some low-priority JobSet job; GPUs are free everywhere. b0 runs two small jobs,
    # b1 one job of two pods, b2 one job of one pod: the cheapest is b2's one job (fewest jobs, then pods).
    state = cluster([("b0", 2), ("b1", 2), ("b2", 2)])
    run_job(state, "a", [0], priority=10, gpus=2, exclusive_placement=True)
    run_job(state, "b", [1], priority=10, gpus=2, exclusive_placement=True)
    run_job(state, "c", [2, 3], priority=10, gpus=2, exclusive_placement=True)
    low = run_job(state, "d", [4], priority=10, gpus=2, exclusive_placement=True)
    submit(state, "big", 2, gpus=4, make=lambda obj: exclusive(obj, "big-key"))
    failure = plan_gang(state, "default/big")
    assert isinstance(failure, Unschedulable)
    assert failure.constraint != POD_FIT
    plan = preempt(state, "default/big")
    assert isinstance(plan, PreemptionPlan), plan
    assert plan.victims == tuple(low)
    assert [job.kind for job in plan.jobs] == [WHOLE_GANG]
    assert set(plan.nodes) <= {"n4", "n5"}
    placed = placed_after(state, "default/big", plan)
    assert {a.node for a in placed.assignments} <= {"n4", "n5"}


def test_an_exclusive_job_takes_no_block_held_by_a_higher_priority_job() -> None:
    state = cluster([("b0", 2), ("b1", 2)])
    run_job(state, "top", [0], priority=5000, gpus=2, exclusive_placement=True)
    low = run_job(state, "low", [2, 3], priority=10, gpus=2, exclusive_placement=True)
    submit(state, "big", 2, gpus=4, make=lambda obj: exclusive(obj, "big-key"))
    plan = preempt(state, "default/big")
    assert isinstance(plan, PreemptionPlan), plan
    assert plan.victims == tuple(low)  # b1's job, never the higher-priority one in b0
    placed = placed_after(state, "default/big", plan)
    assert {a.node for a in placed.assignments} <= {"n2", "n3"}


def test_every_block_held_by_a_higher_priority_job_means_no_plan() -> None:
    state = cluster([("b0", 2), ("b1", 2)])
    run_job(state, "top0", [0], priority=5000, gpus=2, exclusive_placement=True)
    run_job(state, "top1", [2], priority=5000, gpus=2, exclusive_placement=True)
    run_job(state, "low", [1, 3], priority=10, gpus=2, exclusive_placement=True)
    submit(state, "big", 2, gpus=4, make=lambda obj: exclusive(obj, "big-key"))
    result = preempt(state, "default/big")
    assert isinstance(result, NoPreemption), result
    assert result.kind == NO_CANDIDATES


def test_terms_and_capacity_together_evict_the_blocking_job_and_then_the_room() -> None:
    # The exclusive job needs both nodes of a block. b0 is full of 3 plain low-priority jobs; b1 of a
    # low-priority exclusive job (n2) and 1 plain job (n3). Lifting the blocker in b1 also frees its node:
    # 2 jobs there against 3 in b0.
    state = cluster([("b0", 2), ("b1", 2)])
    run_job(state, "p0", [0], priority=10, gpus=4)
    run_job(state, "p1", [0], priority=10, gpus=4)
    run_job(state, "p2", [1], priority=10)
    blocker = run_job(state, "x", [2], priority=10, exclusive_placement=True)
    room = run_job(state, "p3", [3], priority=10)
    submit(state, "big", 2, make=lambda obj: exclusive(obj, "big-key"))
    plan = preempt(state, "default/big")
    assert isinstance(plan, PreemptionPlan), plan
    assert plan.victims == tuple(sorted(blocker + room))
    assert set(plan.nodes) == {"n2", "n3"}
    placed_after(state, "default/big", plan)


def test_a_capacity_plan_needs_no_lift_where_the_job_keeps_off_the_blocked_nodes() -> None:
    # b0 is blocked by an exclusive job of priority 20 and has a free node; b1 is full of one plain job of
    # priority 10: the set made for room alone in b1 wins on the highest victim priority, and the blocker
    # is left alone.
    state = cluster([("b0", 2), ("b1", 2)])
    run_job(state, "x", [0], priority=20, gpus=8, exclusive_placement=True)
    low = run_job(state, "plain", [2, 3], priority=10)
    submit(state, "big", 2, make=lambda obj: exclusive(obj, "big-key"))
    plan = preempt(state, "default/big")
    assert isinstance(plan, PreemptionPlan), plan
    assert plan.victims == tuple(low)  # priority 10 beats the blocker's 20
    placed_after(state, "default/big", plan)


def test_a_victim_counts_in_no_spread_of_the_preemptor_once_it_is_evicted() -> None:
    # As kube-scheduler's preemption removes its victims from the node and its PodTopologySpread counts: web-new
    # (spread over zones, maxSkew 1) may go to z1 only without web-low there, and n2 (z2) is taken by a pod it
    # may not evict. Counting web-low, no eviction would ever let it fit.
    zone = "topology.kubernetes.io/zone"
    state = ClusterState()
    state.apply(node_event(node("n1", labels={zone: "z1"})))
    state.apply(node_event(node("n2", labels={zone: "z2"})))
    state.apply(pod_event(bound(pod("web-low", priority=10, labels={"app": "web"}), "n1")))
    state.apply(pod_event(bound(pod("db", priority=5000, labels={"app": "db"}), "n2")))
    new = pod("web-new", priority=1000, labels={"app": "web"})
    spread = msgspec.convert([{"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule",
                               "labelSelector": {"matchLabels": {"app": "web"}}}], list[TopologySpreadConstraint])
    state.apply(pod_event(msgspec.structs.replace(new, spec=msgspec.structs.replace(
        new.spec, topology_spread_constraints=spread))))
    plan = preempt(state, "default/web-new", lone=True)
    assert isinstance(plan, PreemptionPlan), plan
    assert plan.victims == ("default/web-low",)
    assert placed_after(state, "default/web-new", plan, lone=True).assignments[0].node == "n1"


def test_a_gang_spread_one_per_host_is_spread_over_the_nodes_its_victims_leave() -> None:
    # Validated with old-0 and old-1 gone (a preemption's victims), the hosts n0, n1 and n2 hold no web pod:
    # the gang's two pods (hostname, maxSkew 1) go one per node, not both to n2, the one with room now.
    state = cluster([("b0", 3)])
    run_job(state, "old", [0, 1], priority=10, labels={"app": "web"})

    def spread_by_host(obj: Pod) -> Pod:
        labels = {**obj.metadata.labels, "app": "web"}
        spread = msgspec.convert([{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
                                   "labelSelector": {"matchLabels": {"app": "web"}}}], list[TopologySpreadConstraint])
        return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, labels=labels),
                                       spec=msgspec.structs.replace(obj.spec, topology_spread_constraints=spread))

    submit(state, "new", 2, gpus=4, make=spread_by_host)
    plan = plan_gang(state, "default/new", ignore_pods=frozenset({"default/old-0", "default/old-1"}))
    assert isinstance(plan, GangPlan), plan
    assert len({a.node for a in plan.assignments}) == 2
