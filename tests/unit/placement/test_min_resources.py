"""A scheduler-plugins PodGroup's spec.minResources: its Coscheduling checks, before it tries the gang, that
the whole cluster's free room (every node's allocatable less what its pods ask, the gang's own pods not
counted) covers minResources and minMember pods; toposched does the same. Koordinator's PodGroup carries the
field too, and its scheduler does not read it."""

from __future__ import annotations

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import SchedulerPluginsPodGroupUpserted
from events.objects import SCHEDULER_PLUGINS_POD_GROUP_API, SCHEDULER_PLUGINS_POD_GROUP_LABEL
from placement import GangPlan, Unschedulable, plan_gang
from placement.gang import resource_gap
from placement.plan import MIN_RESOURCES
from state.cluster import ClusterState


def cluster(count: int = 2, *, gpus: int = 8, pods: int = 110) -> ClusterState:
    state = ClusterState()
    for index in range(count):
        state.apply(node_event(node(f"n{index}", gpus=gpus, block="b0", spine="s0", pods=pods)))
    return state


def x_k8s_gang(state: ClusterState, name: str, size: int, gpus: int, min_resources: dict[str, str],
               running_on: str = "") -> None:
    """A scheduler-plugins PodGroup (as training-operator makes one) and its pods, each asking `gpus`; with
    `running_on`, the first one runs there already."""
    state.apply(SchedulerPluginsPodGroupUpserted(pod_group=pod_group(
        name, min_member=size, api_version=SCHEDULER_PLUGINS_POD_GROUP_API, min_resources=min_resources)))
    for index in range(size):
        member = pod(f"{name}-{index}", gpus=gpus, cpu="1", memory="1Gi",
                     labels={SCHEDULER_PLUGINS_POD_GROUP_LABEL: name})
        state.apply(pod_event(bound(member, running_on) if running_on and index == 0 else member))


def busy(state: ClusterState, node_name: str, gpus: int) -> None:
    state.apply(pod_event(bound(pod(f"busy-{node_name}", namespace="other", gpus=gpus, cpu="1", memory="1Gi",
                                    scheduler="someone-else"), node_name)))


def test_a_gang_whose_min_resources_exceed_the_clusters_free_room_is_not_tried_even_if_its_pods_fit() -> None:
    state = cluster()
    busy(state, "n0", 4)
    x_k8s_gang(state, "train", 2, gpus=4, min_resources={"nvidia.com/gpu": "16", "cpu": "2"})
    result = plan_gang(state, "default/train")
    assert isinstance(result, Unschedulable) and result.constraint == MIN_RESOURCES
    assert "resource gap: the cluster's free room lacks nvidia.com/gpu 4 of the PodGroup's spec.minResources" \
        in result.reason
    busy_pod = state.pods["other/busy-n0"]
    state.apply(pod_event(bound(pod("busy-n0", namespace="other", gpus=4, cpu="1", memory="1Gi",
                                    scheduler="someone-else", uid=busy_pod.uid), "n0", phase="Succeeded")))
    assert isinstance(plan_gang(state, "default/train"), GangPlan)  # 16 GPUs free now


def test_its_own_running_pods_do_not_count_against_it_and_pods_count_as_min_member() -> None:
    state = cluster()
    x_k8s_gang(state, "grow", 2, gpus=8, min_resources={"nvidia.com/gpu": "16"}, running_on="n0")
    spec = state.gangs["default/grow"].spec
    assert spec is not None and spec.min_resources == (("nvidia.com/gpu", 16_000),)
    assert resource_gap(state, spec, [state.pods["default/grow-0"]]) == []
    assert isinstance(plan_gang(state, "default/grow"), GangPlan)
    small = cluster(2, pods=1)  # two pod slots in all, a gang of three
    x_k8s_gang(small, "three", 3, gpus=0, min_resources={"cpu": "1"})
    result = plan_gang(small, "default/three")
    assert isinstance(result, Unschedulable) and result.constraint == MIN_RESOURCES and "lacks pods 1 " in result.reason


def test_a_resource_no_node_offers_is_never_covered_and_koordinators_min_resources_are_not_read() -> None:
    state = cluster()
    x_k8s_gang(state, "odd", 1, gpus=1, min_resources={"example.com/fpga": "1"})
    result = plan_gang(state, "default/odd")
    assert isinstance(result, Unschedulable) and "lacks example.com/fpga 1 " in result.reason
    state.apply(group_event(pod_group("koord", min_member=1, min_resources={"nvidia.com/gpu": "1000"})))
    state.apply(pod_event(pod("koord-0", gpus=1, gang="koord")))
    assert isinstance(plan_gang(state, "default/koord"), GangPlan)
    assert any(problem.field == "spec.minResources" for problem in state.problems[("PodGroup", "default/koord")])
    assert ("SchedulerPluginsPodGroup", "default/odd") not in state.problems
