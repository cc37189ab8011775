"""Do plans made before a restart still hold? The check an adopted assumption must pass before it is bound.

After a restart (or a takeover) the loop finds pods assumed in its log but never bound: the plan they
belong to was made on a cluster that may have changed while nobody watched (nodes cordoned, tainted,
relabelled or deleted, other schedulers' pods bound on the planned nodes, PodGroups deleted). Before
anything of such a plan is bound, it is checked against the state rebuilt from the relist:

- every assumed pod's node still exists and still admits it (`fit.admits`: spec.unschedulable,
  NoSchedule/NoExecute taints, nodeSelector, required node affinity), and it keeps its required pod
  affinity and anti-affinity there next to every pod placed now, the plan's own included
  (`pod_affinity.placed_violation`), and its DoNotSchedule spread constraints, counted without itself
  (`pod_spread.placed_violation`);
- every node has room for the assumed pods kept on it, next to what is bound there and the
  nominations of priority >= theirs held by other gangs (the same rule as planning), and its CSI drivers'
  attach limits hold the new volumes they bring (`AttachLedger`, NodeVolumeLimits as planning counts it);
- a gang's PodGroup (and every PodGroup of its GangGroup) still exists, each gang's members bound
  and assumed still reach its minMember (a plan killed between two of its PodAssumed records does
  not), and they still lie within the highest layer its MustGather / hard tier limit allows.

A group's plan holds as a whole or not at all: one pod that no longer fits breaks the plan of its
GangGroup (the rest of the plan was chosen to sit with it). Groups are checked in the order given,
earlier ones keeping their room first, so callers pass them by priority. What this does not re-check:
podCountMultiple and Volcano sub-group partitions (a plan that breaks neither of the above is bound;
the next attempt of a released plan applies every rule again anyway).

Pure: no I/O, no clock; reads `ClusterState`, never mutates it.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from placement.constraints import InvalidConstraint, resolve
from placement.fit import Capacity, admits, shape_in
from placement.members import is_running, where
from placement.pod_affinity import placed_violation
from placement.pod_spread import placed_violation as placed_spread_violation
from state.cluster import ClusterState, PodInfo
from state.gangs import GangSpec
from state.resources import Resources, add_into, format_quantity, is_host_port, port_room, shown_host_port
from state.topology import TopologyError
from state.volumes import MAX_VOLUME_COUNT, csi_volumes


class Adopted(msgspec.Struct, frozen=True):
    """The pods a unit held assumed when the loop started: a GangGroup's (`gangs` set) or a lone pod's."""

    key: str  # the queue unit: the GangGroup's first gang, or the lone pod
    gangs: tuple[str, ...]
    pods: tuple[str, ...]  # its assumed, unbound pods


def refusal(state: ClusterState, pod: PodInfo, node: str) -> str:
    """Why `node` no longer takes `pod` whatever its load ("" when it still may)."""
    info = state.nodes.get(node)
    if info is None:
        return f"node {node} no longer exists"
    shape = shape_in(state, pod)
    why = admits(shape, info) or placed_violation(state, pod, node) or placed_spread_violation(state, pod, node, shape)
    return f"node {node} no longer admits it: {why}" if why else ""


class AttachLedger:
    """The CSI attach limits of the nodes adopted pods sit on (NodeVolumeLimits): each node's room and attached
    volumes without any adopted pod (`ClusterState.attach_room` leaving them out), then the volumes (unique
    name -> driver) of the plans kept so far, and those of the group being checked (`claimed`, kept with
    `keep` once it holds)."""

    def __init__(self, state: ClusterState, adopted: frozenset[str]) -> None:
        self.state = state
        self.adopted = adopted
        self.base: dict[str, tuple[dict[str, int], set[str]]] = {}
        self.kept: dict[str, dict[str, str]] = {}
        self.claimed: dict[str, dict[str, str]] = {}

    def refusal(self, pod: PodInfo, node: str) -> str:
        """Why `node` cannot take the new volumes `pod` brings ("" when it can); claims them when it can."""
        if node not in self.state.volumes.attach_limits or not pod.obj.spec.volumes:
            return ""
        base = self.base.get(node)
        if base is None:
            base = self.base[node] = self.state.attach_room(node, self.adopted)
        room, attached = base
        kept, claimed = self.kept.get(node, {}), self.claimed.setdefault(node, {})
        new: dict[str, dict[str, str]] = {}
        for unique, (driver, _) in csi_volumes(self.state.volumes, pod.obj).items():
            if driver in room and unique not in attached and unique not in kept and unique not in claimed:
                new.setdefault(driver, {})[unique] = driver
        for driver, volumes in sorted(new.items()):
            left = room[driver] - sum(1 for held in (*kept.values(), *claimed.values()) if held == driver)
            if left < len(volumes):
                return (f"node {node} has no room for it any more: {MAX_VOLUME_COUNT} ({driver}: "
                        f"{len(volumes)} new, {max(left, 0)} left)")
        for volumes in new.values():
            claimed.update(volumes)
        return ""

    def keep(self) -> None:
        """The group checked holds: its volumes stay on their nodes."""
        for node, volumes in self.claimed.items():
            self.kept.setdefault(node, {}).update(volumes)
        self.claimed = {}

    def drop(self) -> None:
        """The group checked is broken: its volumes are not kept."""
        self.claimed = {}


def broken_plans(state: ClusterState, groups: Sequence[Adopted]) -> dict[str, str]:
    """The groups (by key) whose plan no longer holds on `state`, each with the first reason found."""
    adopted_on: dict[str, Resources] = {}  # what every adopted pod counts on its node in `used`
    for group in groups:
        for key in group.pods:
            pod = state.pods.get(key)
            if pod is not None and pod.counted_on:
                add_into(adopted_on.setdefault(pod.counted_on, {}), pod.requests)
    kept_on: dict[str, Resources] = {}  # what the plans found to hold so far take on each node
    attach = AttachLedger(state, frozenset(key for group in groups for key in group.pods))
    broken: dict[str, str] = {}
    for group in groups:
        claims: dict[str, Resources] = {}
        reason = _gangs_gone(state, group) or _pods_refused(state, group, adopted_on, kept_on, claims, attach)
        if not reason and group.gangs:
            reason = _short_of_quorum(state, group) or _topology_broken(state, group)
        if reason:
            broken[group.key] = reason
            attach.drop()
            continue
        attach.keep()
        for node, taken in claims.items():
            add_into(kept_on.setdefault(node, {}), taken)
    return broken


def _gangs_gone(state: ClusterState, group: Adopted) -> str:
    for gang in group.gangs:
        info = state.gangs.get(gang)
        if info is None or info.spec is None:
            return f"its PodGroup {gang} no longer exists"
    return ""


def _short_of_quorum(state: ClusterState, group: Adopted) -> str:
    """A plan that cannot reach minMember by itself was cut short (killed between two of its PodAssumed
    records) or lost members while we were away: holding its pods at Permit would only anchor the rest
    of the job to a plan nobody finished."""
    for gang in group.gangs:
        info = state.gangs[gang]
        assert info.spec is not None  # _gangs_gone ran first
        placed = sum(1 for key in info.members if key in state.pods and is_running(state.pods[key]))
        if placed < info.spec.min_member:
            return f"gang {gang} has {placed} of minMember {info.spec.min_member} pods in it"
    return ""


def _pods_refused(state: ClusterState, group: Adopted, adopted_on: dict[str, Resources],
                  kept_on: dict[str, Resources], claims: dict[str, Resources], attach: AttachLedger) -> str:
    """Check each pod on its node; fills `claims` with what the group takes per node."""
    capacity = Capacity(state, frozenset(group.gangs), own_pods=frozenset(group.pods))
    for key in group.pods:
        pod = state.pods.get(key)
        if pod is None:
            continue  # deleted while we were away: nothing of it to bind
        node = pod.assumed_node
        why = refusal(state, pod, node)
        if why:
            return f"pod {key}: {why}"
        # `used` counts every adopted pod already: take them all out, then put back what is kept.
        free = capacity.free(state.nodes[node], pod.priority)
        add_into(free, adopted_on.get(node, {}))
        add_into(free, kept_on.get(node, {}), -1)
        taken = claims.setdefault(node, {})
        add_into(free, taken, -1)
        for name, amount in pod.requests.items():
            if amount > 0 and port_room(free, name) < amount:
                if is_host_port(name):
                    return (f"pod {key}: node {node} has no room for it any more: another pod holds its "
                            f"{shown_host_port(name)}")
                have = max(free.get(name, 0), 0)
                return (f"pod {key}: node {node} has no room for it any more: {name} "
                        f"(it needs {format_quantity(name, amount)}, {format_quantity(name, have)} left)")
        why = attach.refusal(pod, node)
        if why:
            return f"pod {key}: {why}"
        add_into(taken, pod.requests)
    return ""


def _topology_broken(state: ClusterState, group: Adopted) -> str:
    """Whether the job's members, bound and assumed, still lie within its MustGather / hard tier limit."""
    specs: list[GangSpec] = []
    for gang in group.gangs:
        spec = state.gangs[gang].spec
        assert spec is not None  # _gangs_gone ran first
        specs.append(spec)
    tree = state.topology
    resolved = resolve(tree, specs)
    if isinstance(resolved, InvalidConstraint):
        return f"gang {resolved.gang}: {resolved.message}"
    if resolved.top_level == 0:
        return ""
    nodes: set[str] = set()
    for gang in group.gangs:
        for key in state.gangs[gang].members:
            pod = state.pods.get(key)
            if pod is not None and is_running(pod):
                nodes.add(pod.placed_node)
    if not nodes:
        return ""
    try:
        span = tree.lca(sorted(nodes))
    except TopologyError as error:
        return f"its members' nodes are no longer all in the topology tree: {error}"
    if span.level < resolved.top_level:
        return f"its members would span {where(span)}, above its {resolved.source}"
    return ""
