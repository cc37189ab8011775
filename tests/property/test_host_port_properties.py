"""Host ports in placement, on any cluster: a plan never puts two holders of one port (and protocol) on a
node, nor one where another pod holds it, and keeps capacity; with no gather rule, a gang is placed
whenever enough nodes have both the port free and room for a pod."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from placement import GangPlan, plan_gang
from state.cluster import ClusterState
from state.invariants import capacity_violations
from tests.unit.placement.builders import apply_plan
from tests.unit.placement.test_host_ports import with_ports

PORT = 29500


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterState, int, int, int]:
    """A fabric with random work (some of it holding the port, TCP or UDP) and a pending host-network gang:
    (state, its size, GPUs per pod, how many nodes could take one of its pods)."""
    state = ClusterState()
    blocks, per = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    could_take = 0
    for b in range(blocks):
        for i in range(per):
            name = f"n-b{b}-{i}"
            state.apply(node_event(node(name, gpus=8, spine="s0", block=f"b{b}", accelerator=f"b{b}a0")))
            used = draw(st.sampled_from([0, 0, 2, 4, 8]))
            if used:
                state.apply(pod_event(bound(pod(f"w-{name}", namespace="other", gpus=used, scheduler="x"), name)))
            holder = draw(st.sampled_from(["", "", "TCP", "UDP"]))
            if holder:
                state.apply(pod_event(bound(with_ports(pod(f"agent-{name}", namespace="other", gpus=0, cpu="100m",
                                                           memory="1Mi", scheduler="x"), (PORT, holder)), name)))
            could_take += holder != "TCP" and used + gpus <= 8
    size = draw(st.integers(1, 6))
    state.apply(group_event(pod_group("job", min_member=size)))
    for index in range(size):
        state.apply(pod_event(with_ports(pod(f"job-{index}", gang="job", gpus=gpus, cpu="1", memory="1Gi"),
                                         (PORT, "TCP"))))
    return state, size, gpus, could_take


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_a_plan_keeps_one_holder_per_port_per_node_and_places_whenever_enough_nodes_could(
        case: tuple[ClusterState, int, int, int]) -> None:
    state, size, _, could_take = case
    plan = plan_gang(state, "default/job")
    if isinstance(plan, GangPlan):
        nodes = [assignment.node for assignment in plan.assignments]
        assert len(nodes) == size and len(set(nodes)) == size
        assert all(state.nodes[node].used.get(f"hostport:TCP/{PORT}", 0) == 0 for node in nodes)
        apply_plan(state, plan)
        assert not capacity_violations(state)
    else:
        assert could_take < size, plan.reason
