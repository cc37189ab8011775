"""Who a job's members are, in which order they sit, and how they group into pod shapes.

Shared vocabulary of `plan_gang`, sub-group partitions and lone pods: a member is *running* when
it is bound or assumed and not finished or terminating (it holds its place and anchors the job);
members are ordered by `gang.scheduling.koordinator.sh/network-topology-index` (then name), so
neighbours in that order are handed neighbouring nodes.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placement.fit import Shape, shape_of, topology_index
from placement.gather import Demand
from state.cluster import ClusterState, PodInfo
from state.topology import Domain

ROOT_DOMAIN = ""


def pod_order(pod: PodInfo) -> tuple[int, int, str]:
    """Members sit in network-topology-index order; pods without an index come after, by name."""
    index = topology_index(pod.obj)
    return (0, index, pod.key) if index is not None else (1, 0, pod.key)


def is_running(pod: PodInfo) -> bool:
    """Bound or assumed, not finished, not on its way out: a member that already holds its place."""
    return bool(pod.placed_node) and not pod.removed and not pod.terminal and not pod.terminating


def domain_label(domain: Domain) -> str:
    return ROOT_DOMAIN if domain.parent is None else domain.name


def where(domain: Domain) -> str:
    return "the whole cluster" if domain.parent is None else f"{domain.layer} {domain.name}"


def demands_for(state: ClusterState, pods: Sequence[str],
                multiples: Mapping[str, dict[int, int]]) -> list[Demand]:
    """Group pods by (gang, shape): pods of one group share offerslots; order pods for adjacency."""
    groups: dict[tuple[str, bytes], tuple[Shape, list[PodInfo]]] = {}
    for key in pods:
        pod = state.pods[key]
        shape = shape_of(pod)
        group = groups.get((pod.gang, shape.key))
        if group is None:
            groups[(pod.gang, shape.key)] = (shape, [pod])
        else:
            group[1].append(pod)
    demands: list[Demand] = []
    for (gang, _), (shape, members) in groups.items():
        members.sort(key=pod_order)
        demands.append(Demand(shape, [p.key for p in members], gang, multiples.get(gang)))
    demands.sort(key=lambda d: (d.gang, pod_order(state.pods[d.pods[0]])))
    return demands


