"""Host ports, as kube-scheduler's NodePorts reads them: a node has room for one pod holding a host port
(of a protocol), so pods of a job on the host network spread one per node, and no pod of ours goes
where another pod (any scheduler's, or a nomination) holds one of its ports; the reason is
kube-scheduler's words."""

from __future__ import annotations

import msgspec

from events.builders import bound, group_event, pod, pod_event, pod_group
from events.objects import Container, ContainerPort, Pod
from placement import plan_pod
from placement.gang import plan_gang
from preemption import PreemptionPlan, plan_preemption
from state.cluster import ClusterState
from state.invariants import capacity_violations
from tests.unit.placement.builders import apply_plan, fabric, nodes_of, planned, refused

NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"


def with_ports(manifest: Pod, *ports: tuple[int, str]) -> Pod:
    """`manifest` whose container holds the host ports `(port, protocol)`, as the API server stores a pod
    on the host network (hostPort = containerPort)."""
    container = manifest.spec.containers[0]
    held = [ContainerPort(host_port=port, protocol=protocol) for port, protocol in ports]
    containers: list[Container] = [msgspec.structs.replace(container, ports=held)]
    return msgspec.structs.replace(manifest, spec=msgspec.structs.replace(manifest.spec, containers=containers))


def host_network_gang(state: ClusterState, name: str, size: int, gpus: int = 2, port: int = 29500,
                      priority: int | None = None) -> list[str]:
    state.apply(group_event(pod_group(name, min_member=size)))
    for index in range(size):
        state.apply(pod_event(with_ports(pod(f"{name}-{index}", gang=name, gpus=gpus, cpu="1", memory="1Gi",
                                             priority=priority), (port, "TCP"))))
    return [f"default/{name}-{index}" for index in range(size)]


def hold(state: ClusterState, node: str, port: int, protocol: str = "TCP", name: str = "") -> str:
    """A pod of another scheduler (a node agent's, say) running on `node` and holding a host port."""
    key = name or f"agent-{node}-{port}-{protocol}"
    state.apply(pod_event(bound(with_ports(pod(key, namespace="kube-system", gpus=0, cpu="100m", memory="64Mi",
                                               scheduler="default-scheduler"), (port, protocol)), node)))
    return f"kube-system/{key}"


def test_pods_of_a_host_network_gang_go_one_per_node_where_resources_alone_would_pack_them() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)  # 4 nodes of 8 GPUs
    host_network_gang(state, "ranks", 4, gpus=2)
    placed = nodes_of(planned(plan_gang(state, "default/ranks")))
    assert len(set(placed.values())) == 4
    plain = fabric(blocks=1, nvlinks=2, nodes=2)
    plain.apply(group_event(pod_group("packed", min_member=4)))
    for index in range(4):
        plain.apply(pod_event(pod(f"packed-{index}", gang="packed", gpus=2, cpu="1", memory="1Gi")))
    assert len(set(nodes_of(planned(plan_gang(plain, "default/packed"))).values())) == 1


def test_a_node_where_another_pod_holds_the_port_is_left_out_and_another_protocol_does_not_count() -> None:
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    held_tcp = hold(state, "n-s0b0a0-0", 29500)
    hold(state, "n-s0b0a0-1", 29500, "UDP")
    host_network_gang(state, "ranks", 3)
    placed = nodes_of(planned(plan_gang(state, "default/ranks")))
    assert "n-s0b0a0-0" not in placed.values() and len(set(placed.values())) == 3
    assert state.pods[held_tcp].requests["hostport:TCP/29500"] == 1000


def test_a_gang_wider_than_the_nodes_with_its_port_free_waits_with_kube_schedulers_reason() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)  # 2 nodes
    hold(state, "n-s0b0a0-0", 29500)
    host_network_gang(state, "ranks", 2)
    failure = refused(plan_gang(state, "default/ranks"))
    assert f"1 {NODE_PORTS}" in failure.reason, failure.reason


def test_a_lone_pod_skips_the_busier_node_whose_port_is_held() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    hold(state, "n-s0b0a0-0", 8080)
    state.apply(pod_event(bound(pod("busy", gpus=6), "n-s0b0a0-0")))  # bin-packing would pick this node
    state.apply(pod_event(with_ports(pod("web", gpus=1), (8080, "TCP"))))
    plan = planned(plan_pod(state, "default/web"))
    assert [a.node for a in plan.assignments] == ["n-s0b0a0-1"]
    state.apply(pod_event(bound(with_ports(pod("web-2", gpus=1), (8080, "TCP")), "n-s0b0a0-1")))
    state.apply(pod_event(with_ports(pod("web-3", gpus=1), (8080, "TCP"))))
    failure = refused(plan_pod(state, "default/web-3"))
    assert failure.reason.endswith(f"0/2 nodes are available: 2 {NODE_PORTS}"), failure.reason


def test_two_shapes_of_one_gang_sharing_a_port_never_share_a_node() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    state.apply(group_event(pod_group("mixed", min_member=2)))
    state.apply(pod_event(with_ports(pod("mixed-0", gang="mixed", gpus=2), (29500, "TCP"))))
    state.apply(pod_event(with_ports(pod("mixed-1", gang="mixed", gpus=4), (29500, "TCP"))))
    placed = nodes_of(planned(plan_gang(state, "default/mixed")))
    assert len(set(placed.values())) == 2
    state.apply(pod_event(with_ports(pod("mixed-2", gang="mixed", gpus=1), (29500, "TCP"))))
    state.apply(group_event(pod_group("mixed", min_member=3)))
    failure = refused(plan_gang(state, "default/mixed"))
    assert "has room for 2 of 3 pods" in failure.reason, failure.reason  # the shapes share the two nodes' port


def test_a_placed_plan_holds_its_ports_and_two_holders_on_a_node_are_a_capacity_violation() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    keys = host_network_gang(state, "ranks", 2)
    apply_plan(state, planned(plan_gang(state, "default/ranks")))
    assert not capacity_violations(state)
    host_network_gang(state, "late", 1)
    assert NODE_PORTS in refused(plan_gang(state, "default/late")).reason
    node = state.pods[keys[0]].placed_node
    state.apply(pod_event(bound(with_ports(pod("intruder", gpus=0, scheduler="other"), (29500, "TCP")), node)))
    [violation] = capacity_violations(state)
    assert violation.detail == "host port 29500/TCP: held by 2 pods"


def _two_victims_and_a_holder(holder_priority: int) -> ClusterState:
    """Two nodes full of low-priority gangs (the cheaper, priority 1, where a node agent holds port
    29500; priority 5 on the other) and an 8-GPU preemptor of priority 1000 on that port."""
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    for index, node in enumerate(("n-s0b0a0-0", "n-s0b0a0-1")):
        state.apply(group_event(pod_group(f"low-{index}", min_member=1)))
        state.apply(pod_event(bound(pod(f"low-{index}-0", gang=f"low-{index}", priority=1 + 4 * index), node)))
    state.apply(pod_event(bound(with_ports(pod("agent", namespace="kube-system", gpus=0, cpu="100m", memory="64Mi",
                                               scheduler="default-scheduler", priority=holder_priority),
                                           (29500, "TCP")), "n-s0b0a0-0")))
    host_network_gang(state, "urgent", 1, gpus=8, priority=1000)
    return state


def test_preemption_goes_where_the_port_is_free_when_its_holder_outranks_the_preemptor() -> None:
    state = _two_victims_and_a_holder(holder_priority=2000)
    failure = refused(plan_gang(state, "default/urgent"))
    result = plan_preemption(state, "default/urgent", failure)
    assert isinstance(result, PreemptionPlan), result
    assert list(result.victims) == ["default/low-1-0"]


def test_preemption_frees_a_port_as_kube_scheduler_does_when_its_holder_is_of_lower_priority() -> None:
    state = _two_victims_and_a_holder(holder_priority=0)
    failure = refused(plan_gang(state, "default/urgent"))
    result = plan_preemption(state, "default/urgent", failure)
    assert isinstance(result, PreemptionPlan), result
    # the cheaper node (highest victim priority 1, not 5), its port holder evicted with its gang
    assert sorted(result.victims) == ["default/low-0-0", "kube-system/agent"]
    assert [a.node for a in result.nominations] == ["n-s0b0a0-0"]


def test_a_restored_state_keeps_who_holds_which_port() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    hold(state, "n-s0b0a0-0", 29500)
    keys = host_network_gang(state, "ranks", 1)
    apply_plan(state, planned(plan_gang(state, "default/ranks")))
    restored = ClusterState.restore(state.snapshot())
    assert {name: info.used for name, info in restored.nodes.items()} == {
        name: info.used for name, info in state.nodes.items()}
    assert all(info.used.get("hostport:TCP/29500") == 1000 for info in restored.nodes.values())
    host_network_gang(restored, "late", 1)
    assert NODE_PORTS in refused(plan_gang(restored, "default/late")).reason
    assert restored.pods[keys[0]].requests == state.pods[keys[0]].requests


def test_a_pod_of_ours_holding_hundreds_of_host_ports_is_reported_and_not_placed_and_theirs_still_count() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    ports = [(port, "TCP") for port in range(30000, 30200)]
    state.apply(pod_event(with_ports(pod("greedy", gpus=1), *ports)))
    [problem] = state.problems_of("Pod", "default/greedy")
    assert problem.field == "spec.containers[*].ports" and problem.message.startswith("200 host ports: ")
    failure = refused(plan_pod(state, "default/greedy"))
    assert failure.constraint == "invalid" and "toposched places a pod holding at most 128" in failure.reason
    state.apply(pod_event(bound(with_ports(pod("agent", gpus=0, scheduler="x"), *ports), "n-s0b0a0-0")))
    state.apply(pod_event(with_ports(pod("web", gpus=1), (30100, "TCP"))))
    assert [a.node for a in planned(plan_pod(state, "default/web")).assignments] == ["n-s0b0a0-1"]
