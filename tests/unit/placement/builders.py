"""Clusters and jobs for placement tests, built the way the fold builds them: from events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import PodAssumed, PodNominated, VolcanoPodGroupUpserted
from events.objects import (
    NETWORK_TOPOLOGY_INDEX_ANNOTATION,
    VOLCANO_GROUP_ANNOTATION,
    LabelSelector,
    NetworkTopologySpec,
    OwnedMeta,
    Pod,
    SubGroupPolicy,
    VolcanoPodGroup,
    VolcanoPodGroupSpec,
)
from placement import GangPlan, Unschedulable
from state.cluster import ClusterState

GPU = "nvidia.com/gpu"


def fabric(spines: int = 1, blocks: int = 2, nvlinks: int = 2, nodes: int = 2, gpus: int = 8) -> ClusterState:
    """spine s<i> > block s<i>b<j> > NVLink domain s<i>b<j>a<k> > node n-s<i>b<j>a<k>-<l>."""
    state = ClusterState()
    for s in range(spines):
        for b in range(blocks):
            for a in range(nvlinks):
                for i in range(nodes):
                    state.apply(node_event(node(f"n-s{s}b{b}a{a}-{i}", gpus=gpus, spine=f"s{s}", block=f"s{s}b{b}",
                                                accelerator=f"s{s}b{b}a{a}")))
    return state


def occupy(state: ClusterState, node_name: str, gpus: int, name: str | None = None, priority: int = 0) -> str:
    """A pod of another scheduler already running on the node."""
    key = name or f"busy-{node_name}-{len(state.pods)}"
    state.apply(pod_event(bound(pod(key, namespace="other", gpus=gpus, scheduler="someone-else",
                                    priority=priority), node_name)))
    return f"other/{key}"


def gang(state: ClusterState, name: str, size: int, *, min_member: int | None = None, gpus: int = 8,
         gather: list[dict[str, object]] | None = None, gang_group: list[str] | None = None,
         indexed: bool = False, priority: int | None = None, first: int = 0,
         labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None) -> list[str]:
    state.apply(group_event(pod_group(name, min_member=size if min_member is None else min_member, gather=gather,
                                      gang_group=gang_group, annotations=annotations)))
    return members(state, name, size, gpus=gpus, indexed=indexed, priority=priority, first=first, labels=labels)


def members(state: ClusterState, name: str, size: int, *, gpus: int = 8, indexed: bool = False,
            priority: int | None = None, first: int = 0, labels: Mapping[str, str] | None = None,
            volcano: bool = False) -> list[str]:
    keys: list[str] = []
    for i in range(first, first + size):
        annotations = {NETWORK_TOPOLOGY_INDEX_ANNOTATION: str(i)} if indexed else {}
        if volcano:
            annotations[VOLCANO_GROUP_ANNOTATION] = name
        state.apply(pod_event(pod(f"{name}-{i}", gpus=gpus, gang=None if volcano else name, priority=priority,
                                  annotations=annotations, labels=labels)))
        keys.append(f"default/{name}-{i}")
    return keys


def volcano_gang(state: ClusterState, name: str, *, min_member: int, mode: str = "hard", tier: int | None = None,
                 tier_name: str = "", sub_groups: Sequence[SubGroupPolicy] = ()) -> None:
    topology = NetworkTopologySpec(mode=mode, highest_tier_allowed=tier, highest_tier_name=tier_name) if (
        tier is not None or tier_name or mode == "soft") else None
    group = VolcanoPodGroup(metadata=OwnedMeta(name=name, namespace="default", uid=f"uid-vpg-{name}"),
                            spec=VolcanoPodGroupSpec(min_member=min_member, network_topology=topology,
                                                     sub_group_policy=list(sub_groups)))
    state.apply(VolcanoPodGroupUpserted(pod_group=group))


def sub_group(name: str, size: int | None, *, keys: Sequence[str] = (), match: Mapping[str, str] | None = None,
              tier: int | None = None, mode: str = "hard", minimum: int | None = None) -> SubGroupPolicy:
    return SubGroupPolicy(
        name=name, sub_group_size=size, min_sub_groups=minimum, match_label_keys=list(keys),
        label_selector=LabelSelector(match_labels=dict(match)) if match else None,
        network_topology=NetworkTopologySpec(mode=mode, highest_tier_allowed=tier) if tier is not None else None)


def run_pod(state: ClusterState, key: str, node_name: str) -> None:
    """A member that is already running on `node_name` (bound by an earlier cycle)."""
    current: Pod = state.pods[key].obj
    state.apply(pod_event(bound(current, node_name)))


def assume(state: ClusterState, key: str, node_name: str) -> None:
    info = state.pods[key]
    state.apply(PodAssumed(pod=key, uid=info.uid, node=node_name, gang=info.gang))


def nominate(state: ClusterState, key: str, node_name: str) -> None:
    info = state.pods[key]
    state.apply(PodNominated(pod=key, uid=info.uid, node=node_name, gang=info.gang, priority=info.priority))


def planned(result: GangPlan | Unschedulable) -> GangPlan:
    assert isinstance(result, GangPlan), result
    return result


def refused(result: GangPlan | Unschedulable) -> Unschedulable:
    assert isinstance(result, Unschedulable), result
    return result


def nodes_of(plan: GangPlan) -> dict[str, str]:
    return {a.pod: a.node for a in plan.assignments}


def block_of(node_name: str) -> str:
    """n-s0b1a0-1 -> s0b1"""
    return node_name.split("-")[1][:4]


def nvlink_of(node_name: str) -> str:
    return node_name.split("-")[1]


def apply_plan(state: ClusterState, plan: GangPlan) -> None:
    for assignment in plan.assignments:
        assume(state, assignment.pod, assignment.node)
