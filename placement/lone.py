"""`plan_pod`: where a pod without a gang goes.

A lone pod takes the node that keeps the network's domains least fragmented, chosen by a best-first
descent of the topology tree (busiest domains first at every level, bin-pack inside):

1. At each domain, starting at the root, its children are visited busiest first, busyness being
   the share of the pod's primary resource in use (the domain's aggregate `used / allocatable`);
   ties go to the name. The nodes hanging directly in a domain that also has children (a ragged
   tree, or non-fabric nodes under the root) form one more group, ranked by their own aggregate
   and placed after a child of equal busyness. A child whose aggregate free room (plus what
   `ignore_pods` give back) cannot hold one pod is visited only after all the others, since only an
   over-committed node can make the aggregate undercount the room of the rest.
2. The first group of nodes reached that holds a node the pod fits on (every filter of
   `placement/fit.py`: taints, selector, affinity, unschedulable, capacity net of nominations of
   higher-or-equal priority) gives the node: the busiest of them (share of the primary resource
   in use), ties to the name. Otherwise the descent backtracks to the next group.
3. Untolerated PreferNoSchedule taints: a node with none always wins over one with some. The
   descent first accepts only nodes with none; when no such node fits anywhere, it runs again
   accepting the fewest untolerated PreferNoSchedule taints any fitting node has.

So small pods fill gaps in busy spines, blocks and NVLink domains instead of breaking into the
empty ones that the next gang needs, and only the nodes of the groups actually reached are looked
at (a handful out of thousands), which is what makes a lone pod cheap on a big cluster. The worst
case is a pod whose filters turn away most nodes (a nodeSelector naming one node in a quiet domain)
or that fits nowhere: the descent then reaches every group, as a full scan would.

A group's rank (its shortness and busyness for the pod's requests) depends only on its nodes, so it
is kept between calls, per requests, in `state.reader_caches` (`RankTable`) and dropped for the
domains above every node `state.node_changes` names since (all of it when the tree is rebuilt or the
record is too far behind): between two pods only the ranks on the changed nodes' paths are summed
again. A call that treats pods as gone (`ignore_pods`) ranks from the live sums instead.

A pod nominated to a node (room preemption freed for it) goes there when it fits. A pod that
names a gang is planned with its gang (`plan_gang`).

Pure: no I/O, no clock. The result depends only on the state and the arguments.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from placement.fit import Capacity, Requests, Shape, prefer_no_schedule_count
from placement.gang import plan_gang
from placement.gather import Solver, primary_resource
from placement.members import domain_label, pod_shapes, where
from placement.plan import CAPACITY, INVALID, POD_FIT, QUOTA, VOLUME, Assignment, GangPlan, Unschedulable
from placement.quota import admit
from placement.reasons import takes_some_node
from state.cluster import ClusterState
from state.node_changes import kept_table
from state.resources import Resources
from state.topology import Domain

CACHE_KEY = "placement.lone"
MAX_REQUESTS = 64  # request vectors whose ranks are kept; past it the oldest is dropped

Rank = tuple[bool, float, int, str, int]  # (short, -busy, 0 child / 1 loose nodes, name, index among the children)


def _share(used: float, total: float) -> float:
    return min(max(used / total, 0.0), 1.0) if total > 0 else 0.0


class _Descent:
    """One best-first search for one pod (see the module docstring)."""

    __slots__ = ("freed", "min_penalty", "primary", "ranks", "requests", "shape", "solver", "state")

    def __init__(self, state: ClusterState, solver: Solver, shape: Shape, primary: str,
                 freed: dict[int, Resources], ranks: dict[int, Rank] | None) -> None:
        self.state = state
        self.ranks = ranks  # child domain id -> its rank, kept between calls (None: rank from live sums)
        self.solver = solver
        self.shape = shape
        self.primary = primary
        self.requests = shape.requests
        self.freed = freed
        self.min_penalty = 0  # fewest untolerated PreferNoSchedule taints seen on a fitting node (0: none seen)

    def _short(self, allocatable: Resources, used: Resources, freed: Resources | None) -> bool:
        for name, amount in self.requests:
            have = allocatable.get(name, 0) - used.get(name, 0)
            if freed is not None:
                have += freed.get(name, 0)
            if have < amount:
                return True
        return False

    def search(self, domain: Domain, allowed: int) -> str:
        """The chosen node inside `domain` accepting `allowed` untolerated PreferNoSchedule taints, or ""."""
        children = domain.children
        if not children:
            return self.best_node(domain.direct_nodes, allowed)
        primary, requests, freed_by_domain, ranks = self.primary, self.requests, self.freed, self.ranks
        # The index only keeps equal ranks in the children's order, so min() and sort() need no key function.
        ranked: list[Rank] = []
        for index, child in enumerate(children):
            if ranks is not None:
                rank = ranks.get(child.id)
                if rank is not None:
                    ranked.append(rank)
                    continue
            allocatable, used = child.allocatable, child.used
            if freed_by_domain:
                short = self._short(allocatable, used, freed_by_domain.get(child.id))
            else:  # `_short` without ignored pods, inline: this loop runs for every child on the way down
                short = False
                for name, amount in requests:
                    if allocatable.get(name, 0) - used.get(name, 0) < amount:
                        short = True
                        break
            total = allocatable.get(primary, 0)
            if total > 0:  # `_share`, inline
                busy = used.get(primary, 0) / total
                busy = 0.0 if busy < 0.0 else 1.0 if busy > 1.0 else busy
            else:
                busy = 0.0
            rank = (short, -busy, 0, child.name, index)
            if ranks is not None:
                ranks[child.id] = rank
            ranked.append(rank)
        if domain.direct_nodes:
            rank = ranks.get(_loose(domain.id)) if ranks is not None else None
            if rank is None:
                rank = self._loose_rank(domain)
                if ranks is not None:
                    ranks[_loose(domain.id)] = rank
            ranked.append(rank)
        # The first group usually holds the node: rank the rest only when it does not.
        first = min(ranked)
        found = self._visit(domain, first[4], allowed)
        if found:
            return found
        ranked.sort()
        for item in ranked:
            if item is not first:
                found = self._visit(domain, item[4], allowed)
                if found:
                    return found
        return ""

    def _loose_rank(self, domain: Domain) -> Rank:
        """The rank of the nodes hanging directly in `domain` (beside its children), as one group."""
        children, freed_by_domain, primary = domain.children, self.freed, self.primary
        # the loose nodes' aggregate: the domain's minus its children's
        loose_allocatable = dict(domain.allocatable)
        loose_used = dict(domain.used)
        for child in children:
            for name, amount in child.allocatable.items():
                loose_allocatable[name] = loose_allocatable.get(name, 0) - amount
            for name, amount in child.used.items():
                loose_used[name] = loose_used.get(name, 0) - amount
        freed: Resources | None = None
        if freed_by_domain:
            freed = dict(freed_by_domain.get(domain.id, {}))
            for child in children:
                for name, amount in freed_by_domain.get(child.id, {}).items():
                    freed[name] = freed.get(name, 0) - amount
        short = self._short(loose_allocatable, loose_used, freed)
        busy = _share(loose_used.get(primary, 0), loose_allocatable.get(primary, 0))
        return short, -busy, 1, "", len(children)

    def _visit(self, domain: Domain, index: int, allowed: int) -> str:
        children = domain.children
        if index < len(children):
            return self.search(children[index], allowed)
        return self.best_node(domain.direct_nodes, allowed)  # the loose nodes

    def best_node(self, names: list[str], allowed: int) -> str:
        """The busiest node of `names` the pod fits on, with at most `allowed` penalties; ties to the name."""
        solver, shape, primary, nodes = self.solver, self.shape, self.primary, self.state.nodes
        best = ""
        best_busy = -1.0
        for name in names:
            if solver.node_slots(shape, name) <= 0:
                continue
            node = nodes[name]
            if node.taints:
                penalty = prefer_no_schedule_count(shape, node.taints)
                if penalty:
                    if not self.min_penalty or penalty < self.min_penalty:
                        self.min_penalty = penalty
                    if penalty > allowed:
                        continue
            busy = _share(node.used.get(primary, 0), node.allocatable.get(primary, 0))
            if busy > best_busy:  # names come sorted: the first of equals stays
                best, best_busy = name, busy
        return best


class RankTable:
    """Ranks of the cluster tree's domains as children of their parents, and of each domain's loose
    nodes as a group (key `_loose(id)`), per request vector (see the module docstring). Get it with
    `rank_table(state)`."""

    __slots__ = ("by_requests", "changes", "root", "state")

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.changes = state.node_changes.cursor()
        self.root = state.topology.root
        self.by_requests: dict[Requests, dict[int, Rank]] = {}

    def sync(self) -> None:
        """Drop the ranks of every domain above a node changed since the last call."""
        state = self.state
        tree = state.topology
        root = tree.root
        if root is not self.root:
            self.root = root
            self.by_requests.clear()
        names = self.changes.take()
        if names is None:  # some changes were forgotten: every rank may be stale
            self.by_requests.clear()
        if not names or not self.by_requests:
            return
        domain_ids = {domain.id for name in set(names) for domain in tree.path(name)}
        for ranks in self.by_requests.values():
            for ident in domain_ids:
                ranks.pop(ident, None)
                ranks.pop(_loose(ident), None)

    def ranks(self, requests: Requests) -> dict[int, Rank]:
        found = self.by_requests.get(requests)
        if found is None:
            if len(self.by_requests) >= MAX_REQUESTS:
                del self.by_requests[next(iter(self.by_requests))]
            found = self.by_requests[requests] = {}
        return found


def _loose(ident: int) -> int:
    """The key of the rank of domain `ident`'s loose nodes (domain ids are >= 0)."""
    return -1 - ident


def rank_table(state: ClusterState) -> RankTable:
    """The state's rank table, brought up to date (made on first use)."""
    return kept_table(state, CACHE_KEY, RankTable)


def _freed_by_domain(state: ClusterState, capacity: Capacity) -> dict[int, Resources]:
    """What `ignore_pods` give back, summed up every domain of their nodes' paths."""
    freed: dict[int, Resources] = {}
    tree = state.topology
    for node, resources in capacity.ignored_on.items():
        for domain in tree.path(node):
            total = freed.setdefault(domain.id, {})
            for name, amount in resources.items():
                total[name] = total.get(name, 0) + amount
    return freed


def plan_pod(state: ClusterState, pod: str, *,
             ignore_pods: AbstractSet[str] = frozenset()) -> GangPlan | Unschedulable:
    info = state.pods.get(pod)
    if info is None:
        return Unschedulable(gangs=(), constraint=INVALID, reason=f"pod {pod}: not found")
    if info.gang:
        return plan_gang(state, info.gang, ignore_pods=ignore_pods)
    if info.unusable:
        return Unschedulable(gangs=(), constraint=INVALID, reason=f"pod {pod}: {info.unusable}")
    if info.obj.spec.volumes:
        blocked = state.volume_needs(info).blocked
        if blocked:
            return Unschedulable(gangs=(), constraint=VOLUME, reason=f"pod {pod}: {blocked}")
    refusal = admit(state, [pod], ignore_pods=ignore_pods)
    if refusal:
        return Unschedulable(gangs=(), constraint=QUOTA, needed=1, fit=0, reason=f"pod {pod}: {refusal}")
    shape = pod_shapes(state).shape(info, frozenset(ignore_pods))
    capacity = Capacity(state, frozenset(), ignore_pods, frozenset({pod}))
    solver = Solver(state, capacity)
    tree = state.topology
    primary = primary_resource(dict(shape.requests))
    nominated = info.nominated_on
    if nominated and solver.node_slots(shape, nominated) > 0:
        home = tree.domain_of(nominated) or tree.root
        return GangPlan(gangs=(), assignments=(Assignment(pod=pod, node=nominated),), domain=domain_label(home),
                        level=home.layer, explanation=f"pod {pod}: node {nominated}, nominated for it, has room")
    freed = _freed_by_domain(state, capacity) if ignore_pods else {}
    descent = _Descent(state, solver, shape, primary, freed, None if freed else rank_table(state).ranks(shape.requests))
    best_node = descent.search(tree.root, 0)
    if not best_node and descent.min_penalty:
        best_node = descent.search(tree.root, descent.min_penalty)
    if best_node:
        home = tree.domain_of(best_node) or tree.root
        share = _share(home.used.get(primary, 0), home.allocatable.get(primary, 0)) if home.parent is not None else 0.0
        return GangPlan(
            gangs=(), assignments=(Assignment(pod=pod, node=best_node),), domain=domain_label(home),
            level=home.layer,
            explanation=(f"pod {pod}: node {best_node} in {where(home)}: busiest domains with room "
                         f"(best-first descent, bin-pack inside; {share:.0%} of {primary} in use there)"))
    counts = solver.rejections(shape, state.nodes)
    detail = ", ".join(f"{count} {why}" for why, count in sorted(counts.items(), key=lambda i: (-i[1], i[0])))
    never = not takes_some_node(solver, shape, state.nodes)
    return Unschedulable(
        gangs=(), constraint=POD_FIT if never else CAPACITY, needed=1, fit=0,
        reason=f"pod {pod}: 0/{len(state.nodes)} nodes are available" + (f": {detail}" if detail else ""))
