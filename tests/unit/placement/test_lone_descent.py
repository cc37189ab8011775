"""The lone-pod descent: busiest domains first at every level, backtracking past groups where the pod
does not fit, bin-pack inside; and on random clusters it picks exactly what the documented rule says."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, node, node_event, pod, pod_event
from events.objects import Pod, Taint
from placement import GangPlan, plan_pod
from placement.fit import Capacity, admits, prefer_no_schedule_count, shape_of
from placement.gather import primary_resource
from state.cluster import ClusterState
from tests.unit.placement.builders import block_of, fabric, nominate, occupy, planned

GPU = "nvidia.com/gpu"


def with_selector(spec_pod: Pod, selector: dict[str, str]) -> Pod:
    return msgspec.structs.replace(spec_pod, spec=msgspec.structs.replace(spec_pod.spec, node_selector=selector))


def chosen(state: ClusterState, key: str = "default/web", **kwargs: frozenset[str]) -> str:
    return planned(plan_pod(state, key, **kwargs)).assignments[0].node


def test_busiest_spine_wins_over_a_busier_node_in_a_quieter_spine() -> None:
    state = fabric(spines=2, blocks=1, nvlinks=1, nodes=4)
    occupy(state, "n-s0b0a0-0", 6)  # the busiest node, in spine s0 (6 of 32 GPUs)
    for index in range(4):
        occupy(state, f"n-s1b0a0-{index}", 2)  # spine s1: 8 of 32 GPUs, each node a quarter busy
    state.apply(pod_event(pod("web", gpus=1)))
    assert chosen(state) == "n-s1b0a0-0"  # busiest spine, then equal nodes by name


def test_inside_the_lowest_domain_the_busiest_fitting_node_wins() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=3)
    occupy(state, "n-s0b0a0-0", 8)  # full: does not fit
    occupy(state, "n-s0b0a0-1", 2)
    occupy(state, "n-s0b0a0-2", 5)
    state.apply(pod_event(pod("web", gpus=2)))
    assert chosen(state) == "n-s0b0a0-2"


def test_descent_backtracks_past_a_busy_domain_whose_nodes_turn_the_pod_away() -> None:
    state = ClusterState()
    taint = [Taint(key="maintenance", effect="NoSchedule")]
    for index in range(2):
        state.apply(node_event(node(f"n-b0-{index}", spine="s0", block="b0", accelerator="b0a0", taints=taint)))
        state.apply(node_event(node(f"n-b1-{index}", spine="s0", block="b1", accelerator="b1a0")))
    occupy(state, "n-b0-0", 4)  # block b0 is the busy one, but its nodes are tainted
    occupy(state, "n-b1-1", 1)
    state.apply(pod_event(pod("web", gpus=1)))
    assert chosen(state) == "n-b1-1"


def test_node_selector_finds_its_node_in_a_quiet_domain() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    occupy(state, "n-s0b0a0-0", 4)
    state.apply(pod_event(with_selector(pod("web", gpus=1), {"kubernetes.io/hostname": "n-s0b1a1-1"})))
    assert chosen(state) == "n-s0b1a1-1"


def test_untolerated_prefer_no_schedule_loses_to_any_clean_node_and_fewest_taints_win_otherwise() -> None:
    state = ClusterState()
    soft = Taint(key="spot", effect="PreferNoSchedule")
    softer = Taint(key="old", effect="PreferNoSchedule")
    state.apply(node_event(node("n-busy", spine="s0", block="b0", accelerator="a0", taints=[soft])))
    state.apply(node_event(node("n-quiet", spine="s0", block="b1", accelerator="a1")))
    occupy(state, "n-busy", 4)
    state.apply(pod_event(pod("web", gpus=1)))
    assert chosen(state) == "n-quiet"
    state.apply(node_event(node("n-quiet", spine="s0", block="b1", accelerator="a1", taints=[soft, softer])))
    assert chosen(state) == "n-busy"  # one untolerated taint beats two, whatever the busyness


def test_higher_priority_nomination_keeps_its_room_and_a_lower_one_does_not() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    occupy(state, "n-s0b0a0-0", 4)
    state.apply(pod_event(pod("vip", gpus=4, priority=100)))
    nominate(state, "default/vip", "n-s0b0a0-0")
    state.apply(pod_event(pod("web", gpus=1, priority=50)))
    assert chosen(state) == "n-s0b1a0-0"  # the busy node's free half is held for the vip
    state.apply(pod_event(pod("boss", gpus=1, priority=200)))
    assert chosen(state, "default/boss") == "n-s0b0a0-0"


def test_ignored_pods_give_back_room_a_full_domain_would_otherwise_lack() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    victim = occupy(state, "n-s0b0a0-0", 8)
    state.apply(pod_event(pod("web", gpus=2)))
    assert chosen(state) == "n-s0b1a0-0"
    assert chosen(state, ignore_pods=frozenset({victim})) == "n-s0b0a0-0"


def test_domain_that_looks_full_because_of_an_overcommitted_node_is_still_searched() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=2)
    occupy(state, "n-s0b0a0-0", 16)  # over-committed: block s0b0's aggregate shows no free GPU
    occupy(state, "n-s0b1a0-0", 8)
    occupy(state, "n-s0b1a0-1", 8)
    state.apply(pod_event(pod("web", gpus=1)))
    assert chosen(state) == "n-s0b0a0-1"


def test_nodes_outside_the_fabric_compete_as_one_group_of_the_root() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    state.apply(node_event(node("loose-0")))
    state.apply(node_event(node("loose-1")))
    occupy(state, "n-s0b0a0-0", 2)
    state.apply(pod_event(pod("web", gpus=1)))
    assert block_of(chosen(state)) == "s0b0"
    occupy(state, "loose-1", 6)  # now the loose nodes are the busier group (6 of 16 GPUs vs 2 of 16)
    assert chosen(state) == "loose-1"


# --------------------------------------------------------------------------- the rule, by brute force


def reference(state: ClusterState, key: str) -> str:
    """Every fitting node ranked by the module docstring's rule, computed from node vectors only."""
    shape = shape_of(state.pods[key])
    capacity = Capacity(state, frozenset(), frozenset(), frozenset({key}))
    primary = primary_resource(dict(shape.requests))
    tree = state.topology

    def group(names: list[str]) -> tuple[bool, float]:
        allocatable: dict[str, int] = {}
        used: dict[str, int] = {}
        for name in names:
            for resource, amount in state.nodes[name].allocatable.items():
                allocatable[resource] = allocatable.get(resource, 0) + amount
            for resource, amount in state.nodes[name].used.items():
                used[resource] = used.get(resource, 0) + amount
        short = any(allocatable.get(r, 0) - used.get(r, 0) < amount for r, amount in shape.requests)
        total = allocatable.get(primary, 0)
        return short, -(min(max(used.get(primary, 0) / total, 0.0), 1.0) if total > 0 else 0.0)

    ranked: list[tuple[int, list[tuple[bool, float, int, str]]]] = []
    for name, info in state.nodes.items():
        if admits(shape, info) or capacity.slots(shape, info) <= 0:
            continue
        path = tree.path(name)
        rank: list[tuple[bool, float, int, str]] = []
        for depth, domain in enumerate(path):
            if depth + 1 < len(path):
                child = path[depth + 1]
                rank.append((*group(child.nodes), 0, child.name))
            elif domain.children:
                rank.append((*group(domain.direct_nodes), 1, ""))
        total = info.allocatable.get(primary, 0)
        busy = min(max(info.used.get(primary, 0) / total, 0.0), 1.0) if total > 0 else 0.0
        rank.append((False, -busy, 2, name))
        ranked.append((prefer_no_schedule_count(shape, info.taints), rank))
    return min(ranked)[1][-1][3] if ranked else ""


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    state = ClusterState()
    count = draw(st.integers(1, 14))
    for index in range(count):
        name = f"n{index:02d}"
        where = draw(st.sampled_from(["full", "full", "full", "spine", "none"]))
        spine = draw(st.sampled_from(["s0", "s1"]))
        block = spine + draw(st.sampled_from(["b0", "b1"]))
        taints = draw(st.lists(st.sampled_from([Taint(key="spot", effect="PreferNoSchedule"),
                                                Taint(key="old", effect="PreferNoSchedule"),
                                                Taint(key="down", effect="NoSchedule")]), max_size=2, unique=True))
        state.apply(node_event(node(
            name, gpus=draw(st.sampled_from([4, 8])), taints=taints,
            spine=spine if where != "none" else None, block=block if where == "full" else None,
            accelerator=block + draw(st.sampled_from(["a0", "a1"])) if where == "full" else None)))
        used = draw(st.sampled_from([0, 0, 1, 2, 4, 8, 10]))
        if used:
            state.apply(pod_event(bound(pod(f"w{index}", namespace="other", gpus=used, scheduler="x"), name)))
    state.apply(pod_event(pod("web", gpus=draw(st.sampled_from([0, 1, 2, 4])))))
    return state


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_descent_picks_the_node_the_rule_ranks_first(state: ClusterState) -> None:
    expected = reference(state, "default/web")
    result = plan_pod(state, "default/web")
    got = result.assignments[0].node if isinstance(result, GangPlan) else ""
    assert got == expected
