"""Kubernetes 1.37's CompositePodGroups, written as the Kubernetes docs write them: the leaf PodGroups of a
hierarchy are placed together, each group inside one domain of its topology key inside its parent's; a
CompositePodGroup is satisfied by minGroupCount of its children, a PodGroup by its minCount; a hierarchy
whose parent is missing, or that has fewer children than its minimum, waits."""

from __future__ import annotations

from typing import Any

from events.builders import TOPOGRAPH, node, node_event
from events.ingest import kind_of, upsert_event
from events.model import CompositePodGroupDeleted
from placement import plan_gang
from placement.lone import plan_pod
from placement.plan import MEMBERS, Unschedulable
from preemption import PreemptionPlan, plan_preemption
from state.cluster import ClusterState
from state.composites import COMPOSITE_PROBLEM
from tests.unit.placement.builders import block_of, fabric, nodes_of, planned, refused

SPINE = TOPOGRAPH + "spine"
BLOCK = TOPOGRAPH + "block"
NVLINK = TOPOGRAPH + "accelerator"


def apply(state: ClusterState, manifest: dict[str, Any]) -> None:
    info = kind_of(manifest["apiVersion"], manifest["kind"])
    assert info is not None
    state.apply(upsert_event(info, manifest))


def composite(name: str, *, min_groups: int | None = 2, key: str = "", parent: str = "",
              **spec: Any) -> dict[str, Any]:
    policy = {"gang": {"minGroupCount": min_groups}} if min_groups is not None else {"basic": {}}
    body: dict[str, Any] = {"workloadRef": {"workloadName": "training", "templateName": "root"},
                            "schedulingPolicy": policy, **spec}
    if key:
        body["schedulingConstraints"] = {"topology": [{"key": key}]}
    if parent:
        body["parentCompositePodGroupName"] = parent
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"}, "spec": body}


def leaf(name: str, parent: str, *, min_count: int | None = 4, key: str = "") -> dict[str, Any]:
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    body: dict[str, Any] = {"parentCompositePodGroupName": parent, "schedulingPolicy": policy,
                            "workloadRef": {"workloadName": "training", "templateName": name}}
    if key:
        body["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"}, "spec": body}


def worker(name: str, group: str, gpus: int = 8, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
            "spec": {"schedulerName": "toposched", "schedulingGroup": {"podGroupName": group}, **spec,
                     "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}


def workers(state: ClusterState, group: str, count: int) -> list[str]:
    for i in range(count):
        apply(state, worker(f"{group}-{i}", group))
    return [f"default/{group}-{i}" for i in range(count)]


def spine_of(node_name: str) -> str:
    return node_name.split("-")[1][:2]


def test_each_replica_goes_in_one_block_and_the_whole_job_in_one_spine() -> None:
    # 2 spines x 2 blocks x 2 NVLink domains x 2 nodes of 8 GPUs: a block holds 4 pods of 8 GPUs
    state = fabric(spines=2, blocks=2, nvlinks=2, nodes=2)
    apply(state, composite("root-group-0", key=SPINE))
    apply(state, leaf("replica-a", "root-group-0", key=BLOCK))
    apply(state, leaf("replica-b", "root-group-0", key=BLOCK))
    a, b = workers(state, "replica-a", 4), workers(state, "replica-b", 4)
    spec = state.gangs["default/replica-a"].spec
    assert spec is not None and spec.gang_group == ("default/replica-a", "default/replica-b")
    plan = planned(plan_gang(state, "default/replica-a"))
    placed = nodes_of(plan)
    assert set(placed) == {*a, *b}
    assert len({spine_of(placed[key]) for key in placed}) == 1
    assert len({block_of(placed[key]) for key in a}) == 1 and len({block_of(placed[key]) for key in b}) == 1
    assert {block_of(placed[key]) for key in a} != {block_of(placed[key]) for key in b}


def test_no_spine_holds_both_replicas_so_nothing_is_placed() -> None:
    state = fabric(spines=2, blocks=1, nvlinks=2, nodes=2)  # a spine is one block of 4 nodes
    apply(state, composite("root-group-0", key=SPINE))
    apply(state, leaf("replica-a", "root-group-0", key=BLOCK))
    apply(state, leaf("replica-b", "root-group-0", key=BLOCK))
    workers(state, "replica-a", 4)
    workers(state, "replica-b", 4)
    why = refused(plan_gang(state, "default/replica-b"))
    assert why.gangs == ("default/replica-a", "default/replica-b")


def test_min_group_count_one_of_two_places_the_replica_that_fits() -> None:
    state = fabric(spines=1, blocks=1, nvlinks=2, nodes=2)  # room for one replica of 4 pods only
    apply(state, composite("root-group-0", min_groups=1))
    apply(state, leaf("replica-a", "root-group-0", key=BLOCK))
    apply(state, leaf("replica-b", "root-group-0", key=BLOCK))
    a, b = workers(state, "replica-a", 4), workers(state, "replica-b", 4)
    plan = planned(plan_gang(state, "default/replica-a"))
    placed = set(nodes_of(plan))
    assert placed in ({*a}, {*b}) and "only the minimum" in plan.explanation


def test_a_hierarchy_waits_for_its_root_and_is_placed_once_it_comes() -> None:
    state = fabric(spines=1, blocks=2, nvlinks=2, nodes=2)
    apply(state, leaf("replica-a", "root-group-0", key=BLOCK))
    apply(state, leaf("replica-b", "root-group-0", key=BLOCK))
    workers(state, "replica-a", 4)
    workers(state, "replica-b", 4)
    waiting = refused(plan_gang(state, "default/replica-a"))
    assert waiting.constraint == MEMBERS and "CompositePodGroup default/root-group-0 not found" in waiting.reason
    assert waiting.gangs == ("default/replica-a", "default/replica-b")
    apply(state, composite("root-group-0"))
    assert len(planned(plan_gang(state, "default/replica-a")).assignments) == 8
    state.apply(CompositePodGroupDeleted(key="default/root-group-0"))
    assert refused(plan_gang(state, "default/replica-b")).constraint == MEMBERS


def test_fewer_children_than_min_group_count_waits_for_the_others() -> None:
    state = fabric(spines=1, blocks=2, nvlinks=2, nodes=2)
    apply(state, composite("root-group-0", min_groups=2))
    apply(state, leaf("replica-a", "root-group-0"))
    workers(state, "replica-a", 4)
    waiting = refused(plan_gang(state, "default/replica-a"))
    assert waiting.constraint == MEMBERS
    assert "CompositePodGroup default/root-group-0 has 1 child group(s) of its minimum 2" in waiting.reason


def test_a_middle_composite_keeps_its_leaves_in_one_block_inside_the_roots_spine() -> None:
    # root (spine) > slice (block, both its leaves) > leaves (NVLink domain each)
    state = fabric(spines=2, blocks=2, nvlinks=2, nodes=2)
    apply(state, composite("root-group-0", min_groups=1, key=SPINE))
    apply(state, composite("slice-0", min_groups=2, key=BLOCK, parent="root-group-0"))
    apply(state, leaf("half-a", "slice-0", min_count=2, key=NVLINK))
    apply(state, leaf("half-b", "slice-0", min_count=2, key=NVLINK))
    a, b = workers(state, "half-a", 2), workers(state, "half-b", 2)
    plan = planned(plan_gang(state, "default/half-b"))
    placed = nodes_of(plan)
    assert set(placed) == {*a, *b}
    assert len({block_of(node) for node in placed.values()}) == 1
    assert len({placed[key].split("-")[1] for key in a}) == 1  # one NVLink domain per leaf


def test_the_roots_priority_class_is_every_leafs_and_its_problems_are_its_own() -> None:
    state = fabric(spines=1, blocks=1, nvlinks=1, nodes=1)
    apply(state, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": {"name": "training", "uid": "u-pc"}, "value": 1000})
    apply(state, composite("root-group-0", min_groups=0, priorityClassName="training",
                           disruptionMode={"all": {}}, preemptionPolicy="Never"))
    apply(state, leaf("replica-a", "root-group-0"))
    spec = state.gangs["default/replica-a"].spec
    assert spec is not None and spec.priority_class_name == "training"
    assert spec.disrupt_whole and spec.preempt_never
    found = [p for p in state.all_problems() if p.kind == COMPOSITE_PROBLEM]
    assert [(p.key, p.field) for p in found] == [("default/root-group-0", "spec.schedulingPolicy.gang.minGroupCount")]
    assert found[0].message == "0 is not positive; treated as 1"


def _specs_in_orders(manifests: list[dict[str, Any]], shuffled: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gangs' specs of `manifests` folded as given, reversed and as `shuffled`, checked equal."""
    specs = []
    for order in (manifests, list(reversed(manifests)), shuffled):
        state = ClusterState()
        for manifest in order:
            apply(state, manifest)
        specs.append({key: gang.spec for key, gang in sorted(state.gangs.items())})
    assert specs[0] == specs[1] == specs[2]
    return specs


def test_the_hierarchy_read_does_not_depend_on_the_order_its_objects_come_in() -> None:
    manifests = [composite("root-group-0", key=SPINE), composite("slice-0", key=BLOCK, parent="root-group-0"),
                 leaf("half-a", "slice-0", min_count=2), leaf("half-b", "slice-0", min_count=2),
                 leaf("spare", "root-group-0", min_count=None)]
    specs = _specs_in_orders(manifests, [*manifests[2:], *manifests[:2]])
    tree = specs[0]["default/spare"]
    assert tree is not None and tree.composite is not None and not tree.composite.invalid
    assert tree.gang_group == ("default/half-a", "default/half-b", "default/spare")


def test_a_cycle_of_parents_has_no_root_and_waits() -> None:
    state = fabric(spines=1, blocks=1, nvlinks=1, nodes=2)
    apply(state, composite("one", min_groups=1, parent="two"))
    apply(state, composite("two", min_groups=1, parent="one"))
    apply(state, leaf("replica-a", "one", min_count=1))
    workers(state, "replica-a", 1)
    waiting = refused(plan_gang(state, "default/replica-a"))
    assert waiting.constraint == MEMBERS and "is its own ancestor" in waiting.reason


def test_keys_that_are_not_layers_of_the_topology_are_planned_on_their_own_labels() -> None:
    # As the Kubernetes 1.37 docs' example: zone at the root, rack per PodGroup; the cluster's topology has
    # neither (its nodes carry no topograph labels).
    zone, rack = "topology.kubernetes.io/zone", "topology.example.com/rack"
    state = ClusterState()
    for z in range(2):
        for r in range(2):
            for i in range(2):
                name = f"z{z}-r{r}-{i}"
                state.apply(node_event(node(name, labels={zone: f"zone-{z}", rack: f"rack-{z}{r}"})))
    apply(state, composite("tas-workload-root", key=zone))
    apply(state, leaf("workers", "tas-workload-root", min_count=2, key=rack))
    apply(state, leaf("driver", "tas-workload-root", min_count=1, key=rack))
    w, d = workers(state, "workers", 2), workers(state, "driver", 1)
    placed = nodes_of(planned(plan_gang(state, "default/driver")))
    assert set(placed) == {*w, *d}
    assert len({node_name[:2] for node_name in placed.values()}) == 1  # one zone
    assert len({placed[key][:5] for key in w}) == 1  # the workers in one rack
    assert state.label_trees  # a tree of the hierarchy's keys, zone over rack
    apply(state, leaf("workers", "tas-workload-root", min_count=3, key=rack))  # now too many for a rack
    workers(state, "workers", 3)
    assert refused(plan_gang(state, "default/driver")).gangs == ("default/driver", "default/workers")


def test_a_composite_below_a_cycle_is_read_with_it_whichever_object_comes_last() -> None:
    # "a-below" hangs below the cycle and sorts before its members: it must not stand for the cycle
    manifests = [composite("one", min_groups=1, parent="two"), composite("two", min_groups=1, parent="one"),
                 composite("a-below", min_groups=1, parent="one"), leaf("replica-b", "two", min_count=1),
                 leaf("replica-a", "a-below", min_count=1)]
    specs = _specs_in_orders(manifests, [manifests[2], manifests[0], *manifests[3:], manifests[1]])
    spec = specs[0]["default/replica-a"]
    assert spec is not None and spec.gang_group == ("default/replica-a", "default/replica-b")
    assert spec.composite is not None and "is its own ancestor" in spec.composite.invalid


# --------------------------------------------------------------------------- as preemptors and as victims


def _running_hierarchy(state: ClusterState, *, disruption: str) -> None:
    """A low-priority hierarchy of two one-pod replicas, running on the fabric's first two nodes."""
    apply(state, composite("low-root", min_groups=2, disruptionMode={disruption: {}}))
    for index, name in enumerate(("low-a", "low-b")):
        apply(state, leaf(name, "low-root", min_count=1))
        apply(state, {**worker(f"{name}-0", name), "spec": {
            **worker(f"{name}-0", name)["spec"], "nodeName": f"n-s0b0a0-{index}"}})


def _urgent(state: ClusterState) -> None:
    apply(state, {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "urgent", "namespace": "default", "uid": "u-urgent"},
                  "spec": {"schedulerName": "toposched", "priority": 1000,
                           "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}})


def test_a_hierarchy_disrupted_only_whole_is_preempted_whole_and_one_disrupted_singly_loses_one_replica() -> None:
    for disruption, victims in (("all", {"default/low-a-0", "default/low-b-0"}), ("single", None)):
        state = fabric(spines=1, blocks=1, nvlinks=1, nodes=2)  # two nodes, both held by the hierarchy
        _running_hierarchy(state, disruption=disruption)
        _urgent(state)
        failure = plan_pod(state, "default/urgent")
        assert isinstance(failure, Unschedulable)
        plan = plan_preemption(state, "default/urgent", failure)
        assert isinstance(plan, PreemptionPlan), plan
        if victims is not None:
            assert set(plan.victims) == victims and plan.victim_jobs == ("default/low-root",)
        else:
            assert len(plan.victims) == 1


def test_a_hierarchy_preempts_for_the_fewest_pods_that_satisfy_its_root() -> None:
    # minGroupCount 1 of two replicas of 2 pods, each in one NVLink domain; one domain's nodes run pods of a
    # higher priority: evicting the two low ones of the other domain is enough for the root (not for all pods)
    state = fabric(spines=1, blocks=1, nvlinks=2, nodes=2)
    for name, priority in (("n-s0b0a0-0", 0), ("n-s0b0a0-1", 0), ("n-s0b0a1-0", 2000), ("n-s0b0a1-1", 2000)):
        apply(state, {"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"busy-{name}", "namespace": "other", "uid": f"u-busy-{name}"},
                      "spec": {"schedulerName": "toposched", "nodeName": name, "priority": priority,
                               "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}})
    apply(state, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": {"name": "high", "uid": "u-high"}, "value": 1000})
    apply(state, composite("root", min_groups=1, priorityClassName="high"))
    apply(state, leaf("replica-a", "root", min_count=2, key=NVLINK))
    apply(state, leaf("replica-b", "root", min_count=2, key=NVLINK))
    workers(state, "replica-a", 2)
    workers(state, "replica-b", 2)
    failure = refused(plan_gang(state, "default/replica-a"))
    plan = plan_preemption(state, "default/replica-a", failure)
    assert isinstance(plan, PreemptionPlan), plan
    assert set(plan.victims) == {"other/busy-n-s0b0a0-0", "other/busy-n-s0b0a0-1"}
