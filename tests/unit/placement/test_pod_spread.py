"""Topology spread constraints with whenUnsatisfiable DoNotSchedule: pods go where kube-scheduler's
PodTopologySpread filter lets them, lone or as a gang, and a gang plan that would break one is not made."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.objects import Pod, Taint, TopologySpreadConstraint
from placement import plan_gang, plan_pod
from placement.plan import POD_SPREAD
from placement.pod_spread import MISSING_LABEL, SPREAD
from state.cluster import ClusterState
from state.gangs import UNSUPPORTED_FIELD
from tests.unit.placement.builders import apply_plan, block_of, fabric, nominate, planned, refused

HOST = "kubernetes.io/hostname"
BLOCK = "network.topology.nvidia.com/block"
ZONE = "topology.kubernetes.io/zone"


def spread(key: str = BLOCK, max_skew: int = 1, **extra: Any) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


def with_spreads(obj: Pod, *constraints: dict[str, Any]) -> Pod:
    parsed = msgspec.convert(list(constraints), list[TopologySpreadConstraint])
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, topology_spread_constraints=parsed))


def add(state: ClusterState, obj: Pod, node_name: str = "") -> str:
    state.apply(pod_event(bound(obj, node_name) if node_name else obj))
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


def web(name: str, *constraints: dict[str, Any], gpus: int = 1, labels: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None) -> Pod:
    obj = with_spreads(pod(name, gpus=gpus, labels={"app": "web", **(labels or {})}), *(constraints or (spread(),)))
    if node_selector:
        obj = msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, node_selector=node_selector))
    return obj


def place(state: ClusterState, key: str) -> str:
    plan = planned(plan_pod(state, key))
    apply_plan(state, plan)
    return plan.assignments[0].node


# --------------------------------------------------------------------------- lone pods


def test_replicas_spread_over_blocks_though_lone_pods_otherwise_pack_the_busiest_node() -> None:
    state = fabric(blocks=3, nvlinks=1, nodes=2)
    keys = [add(state, web(f"web-{index}")) for index in range(6)]
    blocks = Counter(block_of(place(state, key)) for key in keys)
    assert sorted(blocks.values()) == [2, 2, 2]


def test_a_pod_that_would_skew_its_blocks_past_max_skew_waits_with_kube_schedulers_reason() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    add(state, pod("web-1", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    add(state, pod("filler", gpus=8), "n-s0b1a0-0")  # the emptier block has no room
    failure = refused(plan_pod(state, add(state, web("web-2"))))
    assert SPREAD in failure.reason
    # maxSkew 2 lets it go next to the others: 2 + 1 - 0 is past 2, so it still waits; 3 lets it.
    assert SPREAD in refused(plan_pod(state, add(state, web("web-3", spread(max_skew=2))))).reason
    assert block_of(place(state, add(state, web("web-4", spread(max_skew=3))))) == "s0b0"


def test_nodes_without_the_key_are_refused_as_missing_the_label() -> None:
    state = ClusterState()
    state.apply(node_event(node("zoned", gpus=8, labels={ZONE: "a"})))
    state.apply(node_event(node("bare", gpus=8)))
    key = add(state, web("web-0", spread(ZONE)))
    assert place(state, key) == "zoned"
    state.apply(pod_event(bound(pod("filler", gpus=7), "zoned")))
    failure = refused(plan_pod(state, add(state, web("web-1", spread(ZONE)))))
    assert MISSING_LABEL in failure.reason


def test_only_pods_of_its_namespace_not_terminating_and_selected_count() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    add(state, pod("other-ns", namespace="elsewhere", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    add(state, pod("other-app", gpus=1, labels={"app": "db"}), "n-s0b0a0-0")
    leaving = pod("leaving", gpus=1, labels={"app": "web"})
    leaving = msgspec.structs.replace(leaving, metadata=msgspec.structs.replace(
        leaving.metadata, deletion_timestamp="2026-11-26T00:00:00Z"))
    add(state, leaving, "n-s0b0a0-0")
    add(state, pod("filler", gpus=8), "n-s0b1a0-0")
    # Nothing counts in s0b0, so the only block with room takes it (1 + 1 - 1 with a web pod in s0b1).
    add(state, pod("web-b1", gpus=0, labels={"app": "web"}), "n-s0b1a0-0")
    assert block_of(place(state, add(state, web("web-new")))) == "s0b0"


def test_min_domains_counts_the_global_minimum_as_zero_while_too_few_domains_exist() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    add(state, pod("web-1", gpus=1, labels={"app": "web"}), "n-s0b1a0-0")
    # Two blocks, each with one web pod: the minimum is 1, so a third may go either way ...
    assert planned(plan_pod(state, add(state, web("web-2")))).assignments
    # ... but with minDomains 3 the minimum is 0, and 1 + 1 - 0 is past maxSkew 1 everywhere.
    failure = refused(plan_pod(state, add(state, web("web-3", spread(minDomains=3)))))
    assert SPREAD in failure.reason


def test_node_affinity_policy_honor_counts_only_the_nodes_the_pod_may_go_to() -> None:
    state = ClusterState()
    for name, zone, pool in (("a-gpu", "a", "gpu"), ("b-gpu", "b", "gpu"), ("c-cpu", "c", "cpu")):
        state.apply(node_event(node(name, gpus=8, labels={ZONE: zone, "pool": pool})))
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "a-gpu")
    selected = {"pool": "gpu"}
    # Honor (the default): zone c is no domain, so the minimum is 0 (zone b) and zone a is refused.
    assert place(state, add(state, web("web-1", spread(ZONE), node_selector=selected))) == "b-gpu"
    # Ignore: zone c counts, with 0 pods, so neither a nor b (1 each) may take another.
    failure = refused(plan_pod(state, add(state, web("web-2", spread(ZONE, nodeAffinityPolicy="Ignore"),
                                                     node_selector=selected))))
    assert SPREAD in failure.reason


def test_node_taints_policy_honor_leaves_out_nodes_whose_taints_the_pod_does_not_tolerate() -> None:
    state = ClusterState()
    state.apply(node_event(node("a", gpus=8, labels={ZONE: "a"})))
    state.apply(node_event(node("b", gpus=8, labels={ZONE: "b"})))
    tainted = [Taint(key="maintenance", effect="NoSchedule")]
    state.apply(node_event(node("c", gpus=8, labels={ZONE: "c"}, taints=tainted)))
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "a")
    add(state, pod("web-1", gpus=1, labels={"app": "web"}), "b")
    # Ignore (the default): tainted zone c counts with 0 pods; a and b hold 1 each: refused.
    assert SPREAD in refused(plan_pod(state, add(state, web("web-2", spread(ZONE))))).reason
    # Honor: zone c is no domain; the minimum is 1.
    assert place(state, add(state, web("web-3", spread(ZONE, nodeTaintsPolicy="Honor")))) in ("a", "b")


def test_match_label_keys_spread_each_revision_on_its_own() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    for index in range(2):
        add(state, pod(f"old-{index}", gpus=1, labels={"app": "web", "pod-template-hash": "old"}), "n-s0b0a0-0")
    constraint = spread(matchLabelKeys=["pod-template-hash"])
    new = add(state, web("new-0", constraint, labels={"pod-template-hash": "new"}))
    assert planned(plan_pod(state, new)).assignments  # the old revision's pods do not count
    without = add(state, web("new-1", spread(), labels={"pod-template-hash": "new"}))
    assert block_of(place(state, without)) == "s0b1"  # they do without matchLabelKeys


def test_an_empty_selector_counts_no_pod_and_a_nil_one_selects_none() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    for index in range(3):
        add(state, pod(f"web-{index}", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    add(state, pod("filler", gpus=8), "n-s0b1a0-0")
    for name, selector in (("empty", {}), ("nil", None)):
        constraint = {**spread(), "labelSelector": selector}
        assert planned(plan_pod(state, add(state, web(name, constraint)))).assignments


def test_an_unusable_constraint_is_reported_by_field_and_not_placed_by() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    add(state, pod("filler", gpus=8), "n-s0b1a0-0")
    key = add(state, web("web-1", spread(max_skew=0)))
    problems = state.problems_of("Pod", key)
    assert [(p.field, p.reason) for p in problems] == [("spec.topologySpreadConstraints[0].maxSkew", UNSUPPORTED_FIELD)]
    assert "must be greater than zero" in problems[0].message
    assert planned(plan_pod(state, key)).assignments


def test_a_constraint_recorded_without_max_skew_is_reported_as_missing_it() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    constraint = spread()
    del constraint["maxSkew"]  # as an event log written before toposched kept the field holds it
    key = add(state, web("web-0", constraint))
    problems = state.problems_of("Pod", key)
    assert [p.field for p in problems] == ["spec.topologySpreadConstraints[0].maxSkew"]
    assert problems[0].message.startswith("maxSkew is missing")
    assert planned(plan_pod(state, key)).assignments


def test_constraints_past_the_first_64_are_reported_and_the_pod_is_still_planned_promptly() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    many = [spread(HOST), *(spread(f"example.com/key-{index}") for index in range(500))]
    key = add(state, web("web-0", *many))
    problems = state.problems_of("Pod", key)
    assert [(p.field, p.reason) for p in problems] == [("spec.topologySpreadConstraints[64]", UNSUPPORTED_FIELD)]
    assert "the first 64 DoNotSchedule constraints only" in problems[0].message
    assert MISSING_LABEL in refused(plan_pod(state, key)).reason  # no node carries example.com/key-0


def test_schedule_anyway_and_valid_constraints_are_not_reported() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    key = add(state, web("web-0", spread(), {**spread(HOST), "whenUnsatisfiable": "ScheduleAnyway"}))
    assert not state.problems_of("Pod", key)


def test_a_nominated_pod_of_higher_priority_counts_in_the_skew_of_lower_priority_pods() -> None:
    # kube-scheduler filters a pod with the nominated pods of priority >= its own added, and without them,
    # and keeps the nodes that pass both: a replica must not take the spread room a preemptor waits for.
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    add(state, pod("busy", gpus=2), "n-s0b0a0-0")  # the busier node, where lone pods go first
    one_per_host = spread(HOST)
    preemptor = add(state, with_spreads(pod("web-vip", gpus=1, labels={"app": "web"}, priority=100), one_per_host))
    nominate(state, preemptor, "n-s0b0a0-0")
    low = add(state, with_spreads(pod("web-low", gpus=1, labels={"app": "web"}, priority=10), one_per_host))
    assert planned(plan_pod(state, low)).assignments[0].node == "n-s0b0a0-1"
    high = add(state, with_spreads(pod("web-high", gpus=1, labels={"app": "web"}, priority=1000), one_per_host))
    assert planned(plan_pod(state, high)).assignments[0].node == "n-s0b0a0-0"


def test_a_node_past_the_skew_without_the_nominated_pods_stays_refused_though_they_would_even_it_out() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    one_per_host = spread(HOST)
    add(state, web("web-0", one_per_host), "n-s0b0a0-0")
    preemptor = add(state, with_spreads(pod("web-vip", gpus=1, labels={"app": "web"}, priority=100), one_per_host))
    nominate(state, preemptor, "n-s0b0a0-1")
    low = add(state, with_spreads(pod("web-low", gpus=1, labels={"app": "web"}, priority=10), one_per_host))
    # with the nomination counted, both hosts hold one and either would do; without it only n1 keeps the skew
    assert planned(plan_pod(state, low)).assignments[0].node == "n-s0b0a0-1"
    add(state, pod("filler", gpus=7), "n-s0b0a0-1")  # n1 has no room left for web-low, n0 is past the skew
    assert SPREAD in refused(plan_pod(state, low)).reason


# --------------------------------------------------------------------------- gangs


def spread_gang(state: ClusterState, name: str, size: int, constraint: dict[str, Any], gpus: int = 8,
                **group: Any) -> list[str]:
    state.apply(group_event(pod_group(name, min_member=size, **group)))
    keys = []
    for index in range(size):
        obj = with_spreads(pod(f"{name}-{index}", gpus=gpus, gang=name, labels={"job": name}), constraint)
        keys.append(add(state, obj))
    return keys


def test_a_gang_whose_pods_spread_one_per_host_is_placed_when_the_plan_puts_each_on_its_own_node() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    constraint = {**spread(HOST), "labelSelector": {"matchLabels": {"job": "train"}}}
    spread_gang(state, "train", 4, constraint, gpus=8)
    plan = planned(plan_gang(state, "default/train"))
    assert len({assignment.node for assignment in plan.assignments}) == 4


def test_a_gang_whose_small_pods_spread_one_per_host_gets_a_node_each_though_one_node_would_hold_all() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=4)
    constraint = {**spread(HOST), "labelSelector": {"matchLabels": {"job": "train"}}}
    spread_gang(state, "train", 4, constraint, gpus=2)  # 4 x 2 GPUs: one node would hold them all
    plan = planned(plan_gang(state, "default/train"))
    assert len({assignment.node for assignment in plan.assignments}) == 4
    assert len({block_of(assignment.node) for assignment in plan.assignments}) == 1  # still gathered


def test_a_one_per_host_gang_larger_than_the_empty_hosts_is_held_to_the_skew_by_the_plan_check() -> None:
    # 3 pods, 2 hosts: kube-scheduler places one on each, then the third anywhere (1 + 1 - 1 <= 1); the
    # planner packs them on one node, which the check refuses, naming the constraint.
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    constraint = {**spread(HOST), "labelSelector": {"matchLabels": {"job": "train"}}}
    spread_gang(state, "train", 3, constraint, gpus=2)
    failure = refused(plan_gang(state, "default/train"))
    assert failure.constraint == POD_SPREAD and "maxSkew 1" in failure.reason


def test_a_gang_packed_against_its_own_spread_is_refused_with_the_reason() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=2)
    constraint = {**spread(HOST, max_skew=2), "labelSelector": {"matchLabels": {"job": "train"}}}
    spread_gang(state, "train", 4, constraint, gpus=2)  # the planner packs 4 x 2 GPUs on one node
    failure = refused(plan_gang(state, "default/train"))
    assert failure.constraint == POD_SPREAD
    assert "placed one at a time, as kube-scheduler places them" in failure.reason
    assert "maxSkew 2" in failure.reason


def test_a_gang_whose_plan_keeps_within_its_spread_over_blocks_is_placed_gathered() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=4)
    constraint = {**spread(BLOCK, max_skew=4), "labelSelector": {"matchLabels": {"job": "train"}}}
    spread_gang(state, "train", 4, constraint, gpus=8)  # all 4 in one block: 3 + 1 - 0 <= 4 at every step
    plan = planned(plan_gang(state, "default/train"))
    assert len({block_of(assignment.node) for assignment in plan.assignments}) == 1
    state = fabric(blocks=2, nvlinks=1, nodes=4)
    constraint = {**spread(BLOCK, max_skew=3), "labelSelector": {"matchLabels": {"job": "tight"}}}
    spread_gang(state, "tight", 4, constraint, gpus=8)  # the fourth pod in one block would make 3 + 1 - 0
    assert refused(plan_gang(state, "default/tight")).constraint == POD_SPREAD


def test_a_node_that_gains_the_key_becomes_a_domain_at_once_though_pods_moved_meanwhile() -> None:
    state = ClusterState()
    for name, labels in (("a", {ZONE: "a"}), ("b", {ZONE: "b"}), ("c", {})):
        state.apply(node_event(node(name, gpus=8, labels=labels)))
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "a")
    add(state, pod("web-1", gpus=1, labels={"app": "web"}), "b")
    key = add(state, web("web-2", spread(ZONE)))
    assert planned(plan_pod(state, key)).assignments[0].node in ("a", "b")  # zones a and b hold 1 each
    add(state, pod("other", gpus=1), "a")  # pods moving on the nodes leave what is eligible as it was
    state.apply(node_event(node("c", gpus=8, labels={ZONE: "c"})))
    assert planned(plan_pod(state, key)).assignments[0].node == "c"  # zone c, empty, is the minimum now
