"""The gather algorithm: which domain holds a job, and which node takes which of its pods.

Rules, in the order they are applied (Koordinator's and Volcano's, normalised to one model):

1. Offerslots. For each pod shape, a node offers `Capacity.slots` pods if the shape passes its
   filters (see `placement/fit.py`), else 0. A domain offers what its children offer, computed
   bottom-up; at a layer that carries a `podCountMultiple` k, a child domain counts only in whole
   multiples of k (`floor(slots / k) * k`). Shapes of one job share nodes, so several shapes are
   placed one after the other, each seeing what the previous ones took.
2. Lowest layer first, and the node is the lowest layer (Koordinator's NodeTopologyLayer): a job of
   several pods that one node can hold goes on one node, whatever the constraints (a node is
   inside every domain). Candidate nodes are looked for domain by domain in the order of rule 3
   (from the lowest level up, short domains skipped), and the first domain with such a node gives
   the node that leaves least behind (untolerated PreferNoSchedule taints first, then nodes
   nominated for the job, then least leftover, then name). A job with running members only
   qualifies when they all run on one node, and then only that node. Otherwise candidate domains
   are tried level by level from the lowest domain layer up to the root, or only up to
   `Job.top_level` (MustGather / hard tier: never above it). The first level where some domain
   holds the whole job wins. If the job has running members, the only candidate at a level is the
   one that contains them all.
3. Among the candidates of that level, the one holding most of the nodes nominated for the job
   (room that preemption freed for it) comes first; then bin-packing: least leftover first, where
   leftover is the domain's free amount of the job's primary resource (GPUs when asked for) after
   the job, so big free domains stay whole for the next big job; ties go to the candidate whose
   parent (then grandparent, ...) has least free, so an empty block is not opened for a job that
   fits in a gap of a busy one; then to the domain name. Domain aggregates from the topology tree
   bound what a domain can offer, so candidates are pruned and ranked without touching their
   nodes; only the candidates actually tried are looked at node by node.
4. Inside the chosen domain, each domain splits its pods among its children: if one child can take
   them all, it goes there (preferring children with untolerated PreferNoSchedule taints least,
   then the one holding more of the job's running members and nominated nodes, then the one that
   leaves least behind, then by name); otherwise the child with most room is filled first, and so
   on. So a partly used NVLink domain is filled before a fresh one is opened, and as few domains
   as possible are opened. With a `podCountMultiple` k at the children's layer, every child takes
   a multiple of k except at most one, which takes the job's remainder (`count mod k`). When k is
   given at several layers, each should divide the one above.
5. Pods are handed out in `network-topology-index` order (then name) to the nodes in the order the
   fill visited them, so members i and i+1 share the lowest domain whenever possible.

Pure: no I/O, no clock. The only mutable data is the `Solver`'s own scratch (what this planning
call has tentatively taken), never the state.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from placement.fit import (
    Capacity,
    Shape,
    attach_fit_in,
    port_short_in,
    prefer_no_schedule_count,
    shape_slots_in,
    take,
)
from placement.slots import MultiplesKey, ShapeSlots, multiples_key, refusal, slot_table, tally
from state.cluster import ClusterState
from state.resources import Resources
from state.topology import Domain, TopologyTree

EXTENDED_FIRST = ("nvidia.com/gpu",)
BASIC_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")


class Demand:
    """Pods of one shape (and one gang) to place: `pods` in the order they should sit."""

    __slots__ = ("gang", "multiples", "pods", "shape")

    def __init__(self, shape: Shape, pods: Sequence[str], gang: str = "",
                 multiples: Mapping[int, int] | None = None) -> None:
        self.shape = shape
        self.pods = list(pods)
        self.gang = gang
        self.multiples: Mapping[int, int] = multiples or {}


class Job:
    """What one search places: its demands, the highest level it may span, its running members."""

    __slots__ = ("anchor", "demands", "preferred_by_domain", "preferred_by_node", "running_nodes", "top_level")

    def __init__(self, demands: Sequence[Demand], *, top_level: int = 0, running_nodes: Iterable[str] = (),
                 tree: TopologyTree | None = None, nominated_nodes: Iterable[str] = ()) -> None:
        self.demands = list(demands)
        self.top_level = top_level
        # Running members anchor the job (its domain must hold them); running members and the
        # nodes nominated for its pods (room preemption freed for it) are where it prefers to grow.
        self.preferred_by_node: dict[str, int] = {}
        self.preferred_by_domain: dict[int, int] = {}
        self.anchor: Domain | None = None
        running = list(running_nodes)
        self.running_nodes = frozenset(running)
        nominated = list(nominated_nodes)
        for node in running + nominated:
            self.preferred_by_node[node] = self.preferred_by_node.get(node, 0) + 1
        if tree is not None:
            known = [node for node in running if tree.domain_of(node) is not None]
            if known:
                self.anchor = tree.lca(known)
            for node in known + [n for n in nominated if tree.domain_of(n) is not None]:
                for domain in tree.path(node):
                    self.preferred_by_domain[domain.id] = self.preferred_by_domain.get(domain.id, 0) + 1

    @property
    def size(self) -> int:
        return sum(len(demand.pods) for demand in self.demands)

    def total(self) -> Resources:
        total: Resources = {}
        for demand in self.demands:
            count = len(demand.pods)
            for name, amount in demand.shape.requests:
                total[name] = total.get(name, 0) + amount * count
        return total


# per shape and multiples: the call's domain memo, the table's entry, multiples key and domain memo
_Offers = tuple[dict[int, tuple[int, int]], ShapeSlots, MultiplesKey, dict[int, tuple[int, int]]]


class Found:
    """A successful search: the domain holding the job and the pods' nodes, in placement order.
    `node` is set when one node holds the whole job (`domain` is then the lowest domain holding it)."""

    __slots__ = ("assignments", "candidates", "domain", "leftover", "node", "primary")

    def __init__(self, domain: Domain, assignments: list[tuple[str, str]], leftover: int, primary: str,
                 candidates: int, node: str = "") -> None:
        self.domain = domain
        self.assignments = assignments
        self.leftover = leftover
        self.primary = primary
        self.candidates = candidates
        self.node = node


class Closest:
    """The candidate of a level that came closest to holding a job that did not fit there."""

    __slots__ = ("domain", "fit", "needed")

    def __init__(self, domain: Domain | None, fit: int, needed: int) -> None:
        self.domain = domain
        self.fit = fit
        self.needed = needed


def primary_resource(total: Mapping[str, int]) -> str:
    """The resource whose leftover ranks candidate domains: GPUs, else another extended resource, else cpu."""
    for name in EXTENDED_FIRST:
        if total.get(name, 0) > 0:
            return name
    extended = sorted(name for name, amount in total.items() if amount > 0 and name not in BASIC_RESOURCES)
    if extended:
        return extended[0]
    for name in BASIC_RESOURCES:
        if total.get(name, 0) > 0:
            return name
    return "pods"


class Solver:
    """Answers "where can this job go" for one planning call.

    Holds per-shape memos of node offerslots and domain offerslots, and `taken`: explicit free
    vectors of nodes that earlier commits of this call (other shapes, other sub-group partitions)
    have tentatively filled. Commits can be rolled back with `mark` / `rollback`.

    Figures of nodes and domains nothing special to this call touches come from the state's offerslot
    table (`placement/slots.py`); *live* nodes are counted here: those holding a nomination, those
    whose pods the call treats as gone, and those its commits filled (`taken`). `_live_domains` are
    the domains holding a live node (of the cluster's tree; on another tree every domain is summed here).
    """

    def __init__(self, state: ClusterState, capacity: Capacity, tree: TopologyTree | None = None) -> None:
        self.state = state
        self.tree = tree if tree is not None else state.topology  # another: a label tree (`planning_tree`)
        self.capacity = capacity
        self.taken: dict[str, Resources] = {}
        self._journal: list[tuple[str, Resources | None]] = []
        self._node_memo: dict[bytes, dict[str, int]] = {}
        self._domain_memo: dict[tuple[bytes, int], dict[int, tuple[int, int]]] = {}
        self._offers: dict[tuple[bytes, int], _Offers] = {}
        self._freed_by_domain: dict[int, Resources] | None = None
        self._ancestry_memo: dict[tuple[int, str], tuple[int, ...]] = {}
        self.table = table = slot_table(state)
        self._live: set[str] = table.nominated | capacity.ignored_on.keys() if capacity.ignored_on else table.nominated
        self._base_domains = self.tree is state.topology
        self._live_domains: set[int] = set()
        if self._base_domains:
            self._live_domains = set(table.nominated_domains())
            for node in capacity.ignored_on:
                for domain in self.tree.path(node):
                    self._live_domains.add(domain.id)

    # ------------------------------------------------------------------ offerslots

    def reason(self, shape: Shape, node: str) -> str:
        return self.table.reason(self.table.entry(shape), node)

    def node_slots(self, shape: Shape, node: str) -> int:
        memo = self._node_memo.get(shape.key)
        if memo is None:
            memo = self._node_memo[shape.key] = {}
        count = memo.get(node)
        if count is not None:
            return count
        taken = self.taken.get(node)
        if taken is None and node not in self._live:
            count = self.table.node_slots(self.table.entry(shape), node)
        else:
            info = self.state.nodes.get(node)
            if info is None or ((info.unschedulable or info.taints or not shape.unconstrained)
                                and self.reason(shape, node)):
                count = 0
            else:
                count = shape_slots_in(taken, shape) if taken is not None else self.capacity.slots(shape, info)
        memo[node] = count
        return count

    def offer(self, shape: Shape, multiples: Mapping[int, int], domain: Domain) -> tuple[int, int]:
        """(raw, strict) offerslots of `domain`: raw sums children as they are (an upper bound);
        strict rounds each child domain down to its layer's podCountMultiple."""
        offers = self.offers(shape, multiples)
        found = offers[0].get(domain.id)
        return found if found is not None else self._offer(shape, multiples, domain, offers)

    def offers(self, shape: Shape, multiples: Mapping[int, int]) -> _Offers:
        """What `offer` reads for one shape and multiples: this call's memo (domain id -> (raw, strict)),
        and the offerslot table's entry, multiples key and memo for the domains it answers."""
        memo_key = (shape.key, id(multiples) if multiples else 0)
        found = self._offers.get(memo_key)
        if found is None:
            memo = self._domain_memo.get(memo_key)
            if memo is None:
                memo = self._domain_memo[memo_key] = {}
            entry = self.table.entry(shape)
            key = multiples_key(multiples)
            found = self._offers[memo_key] = (memo, entry, key, self.table.domain_offers(entry, key))
        return found

    def _offer(self, shape: Shape, multiples: Mapping[int, int], domain: Domain,
               offers: _Offers) -> tuple[int, int]:
        memo = offers[0]
        found = memo.get(domain.id)
        if found is not None:
            return found
        if self._base_domains and domain.id not in self._live_domains:
            found = offers[3].get(domain.id)
            if found is None:
                found = self.table.offer(offers[1], offers[2], multiples, domain)
            memo[domain.id] = found
            return found
        raw = strict = 0
        if domain.direct_nodes:
            node_memo = self._node_memo.get(shape.key)
            for node in domain.direct_nodes:
                count = node_memo.get(node) if node_memo is not None else None
                if count is None:
                    count = self.node_slots(shape, node)
                    node_memo = self._node_memo[shape.key]
                raw += count
            strict += raw
        for child in domain.children:
            child_raw, child_strict = self._offer(shape, multiples, child, offers)
            raw += child_raw
            k = multiples.get(child.level, 1) if multiples else 1
            strict += child_strict - child_strict % k if k > 1 else child_strict
        memo[domain.id] = (raw, strict)
        return raw, strict

    # ------------------------------------------------------------------ tentative commits

    def mark(self) -> int:
        return len(self._journal)

    def rollback(self, mark: int) -> None:
        touched: list[str] = []
        while len(self._journal) > mark:
            node, previous = self._journal.pop()
            if previous is None:
                self.taken.pop(node, None)
            else:
                self.taken[node] = previous
            touched.append(node)
        self._forget(touched)

    def commit(self, shape: Shape, placed: Iterable[tuple[str, int]]) -> None:
        touched: list[str] = []
        for node, count in placed:
            current = self.taken.get(node)
            self._journal.append((node, None if current is None else dict(current)))
            if current is None:
                info = self.state.nodes[node]
                current = self.capacity.free(info, shape.priority)
                self.taken[node] = current
            take(current, shape, count)
            touched.append(node)
        self._forget(touched)

    def _forget(self, nodes: Iterable[str]) -> None:
        domain_ids: set[int] = set()
        for node in nodes:
            for memo in self._node_memo.values():
                memo.pop(node, None)
            for domain in self.tree.path(node):
                domain_ids.add(domain.id)
        if self._base_domains:
            self._live_domains |= domain_ids  # a taken node's domains are summed here from now on
        if domain_ids:
            for dmemo in self._domain_memo.values():
                for ident in domain_ids:
                    dmemo.pop(ident, None)

    # ------------------------------------------------------------------ aggregates

    def upper_free(self, domain: Domain, names: Iterable[str]) -> dict[str, int]:
        """What `domain` can offer at most per resource: its allocatable - used (+ ignored pods)."""
        freed = self._freed().get(domain.id)
        allocatable, used = domain.allocatable, domain.used
        out: dict[str, int] = {}
        for name in names:
            have = allocatable.get(name, 0) - used.get(name, 0)
            if freed is not None:
                have += freed.get(name, 0)
            out[name] = have
        return out

    def ancestry(self, domain: Domain, primary: str) -> tuple[int, ...]:
        """Free `primary` of the domain's ancestors, nearest first: among equally tight candidates
        the one inside the busiest parent wins, so empty parents stay whole."""
        parent = domain.parent
        if parent is None or parent.parent is None:
            return ()
        key = (parent.id, primary)
        found = self._ancestry_memo.get(key)
        if found is None:
            found = (self.upper_free(parent, (primary,))[primary], *self.ancestry(parent, primary))
            self._ancestry_memo[key] = found
        return found

    def _freed(self) -> dict[int, Resources]:
        if self._freed_by_domain is None:
            freed: dict[int, Resources] = {}
            for node, amounts in self.capacity.ignored_on.items():
                for domain in self.tree.path(node):
                    bucket = freed.setdefault(domain.id, {})
                    for name, amount in amounts.items():
                        bucket[name] = bucket.get(name, 0) + amount
            self._freed_by_domain = freed
        return self._freed_by_domain

    # ------------------------------------------------------------------ the search

    def candidates(self, job: Job, within: Domain, level: int) -> list[Domain]:
        """Domains at `level` inside `within` that could hold the job's running members."""
        if level < within.level:
            return []
        anchor = job.anchor
        if anchor is not None:
            if anchor.level < level:
                # the running members span above this level; only a deeper anchor has an ancestor here
                return []
            ancestor = next((d for d in anchor.path if d.level == level), None)
            if ancestor is None or within not in ancestor.path:
                return []
            return [ancestor]
        if level == within.level:
            return [within]
        if within.parent is None:
            return self.tree.domains_at(level)
        out: list[Domain] = []
        stack = [within]
        while stack:
            domain = stack.pop()
            for child in domain.children:
                if child.level == level:
                    out.append(child)
                elif child.level < level:
                    stack.append(child)
                # a child already below `level` (a ragged HyperNode tree) has no domain at `level`
        out.sort(key=_name)
        return out

    def search(self, job: Job, within: Domain | None = None, *, keep: bool = True) -> Found | None:
        """One node if one holds the whole job; else lowest level first, then least leftover: the first
        domain that holds the whole job (rules 2 and 3). With `keep` its pods stay taken for later
        searches of this call (`mark` / `rollback`)."""
        root = within if within is not None else self.tree.root
        total = job.total()
        primary = primary_resource(total)
        wanted = list(total.items())
        deepest = len(self.tree.levels) - 1
        top = max(job.top_level, root.level)
        viable = self._viable_levels(job, root, deepest)
        if not viable:
            return None
        if job.size > 1 and self._one_node_may_hold(wanted):
            found = self._search_node(job, root, wanted, primary, keep, viable)
            if found is not None:
                return found
        for level in range(deepest, top - 1, -1):
            if level not in viable:
                continue
            ranked = self._ranked(job, root, level, wanted, primary, keep_short=level == top)
            for leftover, domain in self._tie_broken(ranked, primary):
                assignments = self.place(job, domain, keep=keep)
                if assignments is not None:
                    return Found(domain, assignments, leftover, primary, len(ranked))
        return None

    def _viable_levels(self, job: Job, root: Domain, deepest: int) -> set[int]:
        """The levels where some domain inside `root` offers every demand at least its pods (raw
        offerslots, each demand alone): no domain elsewhere can hold the job, so `search` ranks no
        candidate there (it would only see each fail). A subtree is entered while a level below is
        still undecided; a domain short of room rules out its whole subtree."""
        demands = [(demand.shape, demand.multiples, len(demand.pods)) for demand in job.demands if demand.pods]
        levels: set[int] = set()
        undecided = deepest - root.level + 1  # levels root.level..deepest not yet known to have one
        known_from = deepest + 1  # every level from this one to `deepest` is known to have one
        asked = [(shape, multiples, count, self.offers(shape, multiples)) for shape, multiples, count in demands]
        offer = self._offer
        stack = [root]
        while stack:
            domain = stack.pop()
            if domain.level >= known_from:
                continue  # nothing left to learn below it
            short = False
            for shape, multiples, count, offers in asked:
                found = offers[0].get(domain.id)
                if (found if found is not None else offer(shape, multiples, domain, offers))[0] < count:
                    short = True
                    break
            if short:
                continue
            if domain.level not in levels:
                levels.add(domain.level)
                undecided -= 1
                if not undecided:
                    break
                while known_from - 1 in levels:
                    known_from -= 1
            stack.extend(domain.children)
        return levels

    def _ranked(self, job: Job, root: Domain, level: int, wanted: Sequence[tuple[str, int]], primary: str, *,
                keep_short: bool) -> list[tuple[bool, int, int, str, Domain]]:
        """The candidates of `level` in rule 3's order (before tie-breaks): those the aggregates say
        are short of room are left out, or (`keep_short`) ranked after the others."""
        freed_map = self._freed()
        preferred_map = job.preferred_by_domain
        primary_total = next((amount for name, amount in wanted if name == primary), 0)
        ranked: list[tuple[bool, int, int, str, Domain]] = []
        for domain in self.candidates(job, root, level):
            allocatable, used = domain.allocatable, domain.used
            freed = freed_map.get(domain.id) if freed_map else None
            short = False
            for name, amount in wanted:
                have = allocatable.get(name, 0) - used.get(name, 0)
                if freed is not None:
                    have += freed.get(name, 0)
                if have < amount:
                    short = True
                    break
            # Aggregates undercount a domain holding an over-committed node (negative free), so at
            # the last level allowed, domains that look short are still tried, after the others.
            if short and not keep_short:
                continue
            free = allocatable.get(primary, 0) - used.get(primary, 0)
            if freed is not None:
                free += freed.get(primary, 0)
            preferred = preferred_map.get(domain.id, 0) if preferred_map else 0
            ranked.append((short, -preferred, free - primary_total, domain.name, domain))
        ranked.sort(key=_rank)
        return ranked

    # ------------------------------------------------------------------ the node layer

    def _one_node_may_hold(self, wanted: Sequence[tuple[str, int]]) -> bool:
        """False when the job asks more of some resource than any node has at all (the usual case
        for big jobs: the node pass then costs nothing)."""
        largest = self.state.largest_allocatable()
        return all(largest.get(name, 0) >= amount for name, amount in wanted)

    def _search_node(self, job: Job, root: Domain, wanted: Sequence[tuple[str, int]], primary: str,
                     keep: bool, viable: AbstractSet[int]) -> Found | None:
        """Rule 2's node layer: the node of the first domain (in rule 3's order, lowest level first)
        that holds the whole job alone."""
        if job.running_nodes:
            if len(job.running_nodes) != 1:
                return None
            home = next(iter(job.running_nodes))
            domain = self.tree.domain_of(home)
            if domain is None or root not in domain.path:
                return None
            return self._take_node(job, domain, [home], primary, keep, 1)
        considered = 0
        for level in range(len(self.tree.levels) - 1, root.level - 1, -1):
            if level not in viable:
                continue  # no domain there offers the job's pods: none of its nodes holds them all
            for _, domain in self._tie_broken(self._ranked(job, root, level, wanted, primary, keep_short=False),
                                              primary):
                if not domain.direct_nodes:
                    continue
                considered += 1
                found = self._take_node(job, domain, domain.direct_nodes, primary, keep, considered)
                if found is not None:
                    return found
        return None

    def _take_node(self, job: Job, domain: Domain, nodes: Iterable[str], primary: str, keep: bool,
                   considered: int) -> Found | None:
        """The best of `nodes` (directly in `domain`) that holds every pod of the job, taken."""
        demands = [demand for demand in job.demands if demand.pods]
        first = demands[0].shape
        primary_total = job.total().get(primary, 0)
        ranked: list[tuple[int, int, int, str]] = []
        for node in nodes:
            if any(self.node_slots(demand.shape, node) < len(demand.pods) for demand in demands):
                continue
            info = self.state.nodes[node]
            taken = self.taken.get(node)
            free = taken if taken is not None else self.capacity.free(info, first.priority)
            penalty = prefer_no_schedule_count(first, info.taints) if info.taints else 0
            ranked.append((penalty, -job.preferred_by_node.get(node, 0), free.get(primary, 0) - primary_total, node))
        ranked.sort()
        for _, _, leftover, node in ranked:
            mark = self.mark()
            assignments: list[tuple[str, str]] = []
            for position, demand in enumerate(demands):
                if self.node_slots(demand.shape, node) < len(demand.pods):
                    break  # the shapes fit one by one but not together
                if keep or position < len(demands) - 1:
                    self.commit(demand.shape, [(node, len(demand.pods))])
                assignments.extend((pod, node) for pod in demand.pods)
            else:
                return Found(domain, assignments, leftover, primary, considered, node=node)
            self.rollback(mark)
        return None

    def _tie_broken(self, ranked: list[tuple[bool, int, int, str, Domain]],
                    primary: str) -> Iterator[tuple[int, Domain]]:
        """Candidates in rank order; equally ranked ones by `ancestry`, then name (computed only
        for the groups actually reached, so a search that succeeds early stays cheap)."""
        start = 0
        while start < len(ranked):
            end = start + 1
            while end < len(ranked) and ranked[end][:3] == ranked[start][:3]:
                end += 1
            group = ranked[start:end]
            if len(group) > 1:
                group.sort(key=lambda item: (self.ancestry(item[4], primary), item[3]))
            for item in group:
                yield item[2], item[4]
            start = end

    def place(self, job: Job, domain: Domain, *, keep: bool = True) -> list[tuple[str, str]] | None:
        """Fill every demand of the job into `domain` and commit it, or change nothing and return None.
        Without `keep` the last demand is not committed (nothing after it needs to see it)."""
        mark = self.mark()
        assignments: list[tuple[str, str]] = []
        last = len(job.demands) - 1
        for position, demand in enumerate(job.demands):
            count = len(demand.pods)
            if count == 0:
                continue
            raw, _ = self.offer(demand.shape, demand.multiples, domain)
            if raw < count:
                self.rollback(mark)
                return None
            placed: list[tuple[str, int]] = []
            if not self._fill(demand, job, domain, count, placed):
                self.rollback(mark)
                return None
            if keep or position < last:
                self.commit(demand.shape, placed)
            pods = iter(demand.pods)
            for node, many in placed:
                for _ in range(many):
                    assignments.append((next(pods), node))
        return assignments

    def _fill(self, demand: Demand, job: Job, domain: Domain, count: int, placed: list[tuple[str, int]]) -> bool:
        """Split `count` pods of `demand` among the children of `domain` (rule 4); append (node, n)."""
        shape, multiples = demand.shape, demand.multiples
        running_nodes, running_domains = job.preferred_by_node, job.preferred_by_domain
        # children: (kind, item, raw, strict-as-a-child, k, running, penalty, name)
        entries: list[tuple[Domain | None, str, int, int, int, int, int]] = []
        for node in domain.direct_nodes:
            slots = self.node_slots(shape, node)
            if slots > 0:
                info = self.state.nodes[node]
                penalty = prefer_no_schedule_count(shape, info.taints) if info.taints else 0
                entries.append((None, node, slots, slots, 1, running_nodes.get(node, 0), penalty))
        for child in domain.children:
            raw, strict = self.offer(shape, multiples, child)
            if raw > 0:
                k = multiples.get(child.level, 1) if multiples else 1
                entries.append((child, child.name, raw, strict, k, running_domains.get(child.id, 0), 0))
        remaining = count
        used: set[int] = set()
        while remaining > 0:
            # a single child that can take the rest: the one leaving least behind
            best: int | None = None
            best_key: tuple[int, int, int, str] | None = None
            for index, (_, name, _raw, strict, _k, running, penalty) in enumerate(entries):
                if index in used or strict < remaining:
                    continue
                key = (penalty, -running, strict - remaining, name)
                if best_key is None or key < best_key:
                    best, best_key = index, key
            if best is not None:
                found_child, found_name = entries[best][0], entries[best][1]
                return self._give(demand, job, found_child, found_name, remaining, placed)
            # else the child with most room, in whole multiples
            best = None
            best_take = 0
            best_rank: tuple[int, int, int, str] | None = None
            for index, (_, name, _raw, strict, k, running, penalty) in enumerate(entries):
                if index in used:
                    continue
                take = min(strict - strict % k, remaining - remaining % k) if k > 1 else min(strict, remaining)
                if take <= 0:
                    continue
                rank = (penalty, -running, -take, name)
                if best_rank is None or rank < best_rank:
                    best, best_take, best_rank = index, take, rank
            if best is None:
                return False
            used.add(best)
            taken_child, taken_name = entries[best][0], entries[best][1]
            if not self._give(demand, job, taken_child, taken_name, best_take, placed):
                return False
            remaining -= best_take
        return True

    def _give(self, demand: Demand, job: Job, child: Domain | None, node: str, count: int,
              placed: list[tuple[str, int]]) -> bool:
        if child is None:
            placed.append((node, count))
            return True
        return self._fill(demand, job, child, count, placed)

    # ------------------------------------------------------------------ failure analysis

    def closest(self, job: Job, level: int, within: Domain | None = None) -> Closest:
        """The candidate at `level` that could take most of the job (how close the best one came)."""
        root = within if within is not None else self.tree.root
        total = job.total()
        names = list(total)
        needed = job.size
        ranked: list[tuple[int, str, Domain]] = []
        single = job.demands[0].shape if len(job.demands) == 1 else None
        for domain in self.candidates(job, root, level):
            bound = needed
            if single is not None:
                free = self.upper_free(domain, names)
                for name, amount in single.requests:
                    bound = min(bound, max(free[name], 0) // amount)
            ranked.append((-bound, domain.name, domain))
        ranked.sort(key=lambda item: (item[0], item[1]))
        best: Closest = Closest(None, 0, needed)
        for negative_bound, _, domain in ranked:
            if -negative_bound <= best.fit and best.domain is not None:
                break
            fit = self.fit(job, domain)
            if best.domain is None or fit > best.fit:
                best = Closest(domain, fit, needed)
        return best

    def fit(self, job: Job, domain: Domain) -> int:
        """How many of the job's pods `domain` could take (shapes counted independently, but that the pods
        of shapes that all hold one host port count at most one per node of the domain that takes one)."""
        fits = [min(len(demand.pods), self.offer(demand.shape, demand.multiples, domain)[1]) for demand in job.demands]
        sharing = [i for i, demand in enumerate(job.demands) if demand.shape.host_ports]
        # (only for a port every such shape holds, the usual case: ranks of one job on one port)
        if len(sharing) < 2 or not set.intersection(*(set(job.demands[i].shape.host_ports) for i in sharing)):
            return sum(fits)
        shapes = [job.demands[i].shape for i in sharing]
        nodes = sum(1 for node in domain.nodes if any(self.node_slots(shape, node) > 0 for shape in shapes))
        return sum(fits) - sum(fits[i] for i in sharing) + min(nodes, sum(fits[i] for i in sharing))

    def rejections(self, shape: Shape, nodes: Collection[str]) -> dict[str, int]:
        """kube-scheduler style: how many nodes turned the shape away, per reason."""
        table = self.table
        entry = table.entry(shape)
        infos = self.state.nodes
        if nodes is infos or (len(nodes) == len(infos) and nodes is self.tree.root.nodes):
            # Every node of the state (a tree holds no node the state lacks): the table's counts as the
            # nodes stand, corrected for the nodes special to this call.
            counts = dict(table.refusals(entry))
            for node in self._live | self.taken.keys():
                if node in infos:
                    before = table.refused(entry, node)
                    if before:
                        tally(counts, before, -1)
                    now = self._refused(shape, node)
                    if now:
                        tally(counts, now, 1)
            return counts
        counts = {}
        live, taken = self._live, self.taken
        for node in nodes:
            why = self._refused(shape, node) if node in live or node in taken else table.refused(entry, node)
            if why:
                counts[why] = counts.get(why, 0) + 1
        return counts

    def _refused(self, shape: Shape, node: str) -> str:
        """Why `node` takes not one pod of `shape` in this call ("" when it takes one or is not a node)."""
        info = self.state.nodes.get(node)
        if info is None:
            return ""
        if not shape.unconstrained or info.unschedulable or info.taints:
            why = self.reason(shape, node)
            if why:
                return why
        taken = self.taken.get(node)
        short = _short_in(taken, shape) if taken is not None else self.capacity.short_of(shape, info)
        return refusal(short) if short else ""


def _short_in(free: Mapping[str, int], shape: Shape) -> str:
    for name, amount in shape.requests:
        if free.get(name, 0) < amount:
            return name
    if shape.attach:
        short = attach_fit_in(free, shape.attach)[1]
        if short:
            return short
    return port_short_in(free, shape) if shape.host_ports else ""


def _name(domain: Domain) -> str:
    return domain.name


def _rank(item: tuple[bool, int, int, str, Domain]) -> tuple[bool, int, int]:
    return item[0], item[1], item[2]
