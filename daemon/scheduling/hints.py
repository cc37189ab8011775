"""Queueing hints: cheap upper bounds that say a unit surely cannot fit, so placement is not asked.

kube-scheduler re-queues an unschedulable pod only for events that may help it (QueueingHints);
a gang queue re-planned at every release of capacity spends its time proving the same failure
again. Two bounds, both computed from the topology tree's aggregates, never from node-by-node work:

- `room_when_empty`: how many pods of the unit's smallest request the largest domain of its
  constraint layer could hold with nothing running (sum over the domain's nodes of what each node's
  allocatable takes). Below the pods the unit needs, no release can ever help: the unit is
  *structural* and waits for nodes, topology or its own spec to change.
- `room_now`: the same bound over what is free now (domain allocatable - used, aggregated, so it
  over-counts: still an upper bound). Below the need, re-planning after a release is skipped.

The need is a lower bound of what any plan must place: minMember minus the running members that
count towards it (`placement.members.counted`, by the gang's match policy), summed over the
GangGroup (at least 1, at most the pending pods); each pod counted at the smallest request among
the pending pods. The layer is the tightest MustGather / hard tier of the
group (placement's own `resolve`), else the cluster root. Every bound ignores filters, taints,
nominations and running members' anchoring, each of which can only make placement fail more.

Skipping keeps the unit's last reason, so it is allowed only while that reason still rests on the
tree it was derived from: the loop remembers each unit's `Premise` after every attempt (the layer
its constraint resolved to, or that it resolved to none, and `room_when_empty` there) and attempts a
unit whose premise is not what it was. A MustGather gang parked with "'BlockLayer': is not a layer"
is attempted once the layer is back (its labels, its ClusterNetworkTopology layer, a HyperNode of
its tier), and one that "can never fit" in blocks of 4 is attempted once a block grows; a node event
that leaves the unit's layer and its largest domain as they were still spares it the attempt.

The loop asks only about a unit brought back by a change elsewhere (a release, a node, the
periodic retry), never about one that itself changed since it was parked (a member came or left,
its PodGroup changed): that one is attempted, so its reason says what is true now. A gang of 6 parked at
"4 of minMember 6 pods exist" whose last 2 pods arrive is attempted and then says it can never fit,
instead of keeping the stale count for ever.

Pure: reads `ClusterState`, never mutates it; no clock, no I/O.
"""

from __future__ import annotations

import msgspec

from daemon.scheduling.queue import Unit
from placement.constraints import InvalidConstraint, resolve
from placement.fit import Requests, slots_in, slots_left
from placement.members import counted, is_running
from state.cluster import ClusterState
from state.gangs import GangSpec
from state.resources import Resources, is_host_port


class Need(msgspec.Struct, frozen=True):
    level: int  # topology level the whole job must fit in (0: the cluster root)
    source: str  # the rule that sets `level`, in words ("MustGather at BlockLayer"; "" for the root)
    pods: int  # at least this many pods must be placed by any plan
    requests: Requests  # per pod, at least these (milli-units; the smallest among the pending pods)


def need_of(state: ClusterState, unit: Unit) -> Need | None:
    """The unit's lower-bound need; None when it cannot be bounded (unknown spec, no requests)."""
    pods = state.pods
    # Pods of one shape share their requests (`ClusterState`'s derivations): a gang of 3,000 has a few
    # distinct ones, so the smallest is taken over those, first seen first.
    distinct: dict[int, Resources] = {}
    for key in unit.pods:
        info = pods.get(key)
        if info is not None:
            requests = info.requests
            distinct.setdefault(id(requests), requests)
    smallest: dict[str, int] = {}
    first = True
    for requests in distinct.values():
        if first:
            # (host ports are no resource of a domain: placement keeps one holder per node)
            smallest = {name: amount for name, amount in requests.items() if amount > 0 and not is_host_port(name)}
            first = False
        else:
            smallest = {name: min(amount, requests.get(name, 0)) for name, amount in smallest.items()}
            smallest = {name: amount for name, amount in smallest.items() if amount > 0}
    if not smallest:
        return None
    pending = sum(1 for key in unit.pods if key in state.pending)
    if not unit.gangs:
        return Need(level=0, source="", pods=1, requests=tuple(sorted(smallest.items())))
    specs: list[GangSpec] = []
    missing = 0
    for gang in unit.gangs:
        info_gang = state.gangs.get(gang)
        if info_gang is None or info_gang.spec is None:
            return None
        specs.append(info_gang.spec)
        running = [pod for member in info_gang.members if (pod := pods.get(member)) is not None and is_running(pod)]
        missing += max(0, info_gang.spec.min_member - counted(info_gang.spec, running))
    resolved = resolve(state.topology, specs)
    if isinstance(resolved, InvalidConstraint):
        return None
    return Need(level=resolved.top_level, source=resolved.source, pods=max(1, min(missing, pending)),
                requests=tuple(sorted(smallest.items())))


class Premise(msgspec.Struct, frozen=True):
    """What of the tree a unit's reason was derived from (see the module docstring); the layer by its
    name, since levels are renumbered when a layer above comes or goes."""

    layer: str  # "" when the unit's need cannot be bounded (its constraint names no level of the tree, ...)
    source: str
    room_when_empty: int


def premise_of(state: ClusterState, need: Need | None, cache: dict[tuple[int, Requests], int]) -> Premise:
    """The unit's premise now, from its need (`need_of`) and `room_when_empty`'s cache."""
    if need is None:
        return Premise(layer="", source="", room_when_empty=0)
    return Premise(layer=state.topology.levels[need.level].layer, source=need.source,
                   room_when_empty=room_when_empty(state, need, cache))


def room_when_empty(state: ClusterState, need: Need, cache: dict[tuple[int, Requests], int]) -> int:
    """Pods of `need.requests` the largest domain at `need.level` holds with nothing running (cached by caller)."""
    key = (need.level, need.requests)
    room = cache.get(key)
    if room is None:
        room = 0
        nodes = state.nodes
        for domain in state.topology.domains_at(need.level):
            total = 0
            for name in domain.nodes:
                info = nodes.get(name)
                if info is not None:
                    total += slots_in(info.allocatable, need.requests)
            room = max(room, total)
        cache[key] = room
    return room


def room_now(state: ClusterState, need: Need) -> int:
    """An upper bound of the pods of `need.requests` the roomiest domain at `need.level` could take now."""
    room = 0
    requests = need.requests
    for domain in state.topology.domains_at(need.level):
        fit = slots_left(domain.allocatable, domain.used, requests)
        if fit > room:
            room = fit
    return room
