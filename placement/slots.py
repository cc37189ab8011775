"""The offerslot table: how many pods of a shape each node and each domain offers, kept between
planning calls and re-derived only where the cluster changed.

Every planning call used to count, node by node, what the nodes it looked at offer; a gang that does
not fit looks at every node, at every attempt. Between two attempts only the nodes some event
touched can offer differently, and the fold names them (`state.node_changes`). So the table keeps,
per shape (its requests and filters; priority aside), the *base* figures of `placement/fit.py`:
- per node: `admits` (the filters' reason), the offerslots, and the first resource short of one pod;
- per domain of the cluster's topology tree (per podCountMultiple rule): the (raw, strict) offerslots
  `Solver.offer` would sum from those nodes;
- over all nodes: the kube-scheduler style refusal counts of `Solver.rejections`.
Base means "as the node stands": allocatable - used, no nomination held on it. A planning call
still counts live (as before) every node that holds a nomination, every node whose pods it treats
as gone (`ignore_pods`) and every node its own tentative commits filled; a domain holding any such
node is summed from its nodes. Everything else is read from the table, so a call costs what changed
since the last one, plus the nodes that are special to it.

Every figure equals what recounting gives (tests/property/test_slot_table.py checks it against a
fresh count after random folds). The table lives in `state.reader_caches` and is brought up to date
from `state.node_changes` when a planning call starts (`slot_table`): a changed node loses its
figures and so do the domains above it; a rebuilt topology tree (a new root) loses every domain
figure; a record too far behind (`since` is None) drops everything. At most `MAX_SHAPES` shapes are
kept (the oldest goes first), so a cluster of many pod shapes does not grow it without bound.

Pure: no I/O, no clock. It never changes the state's meaning, only what planning remembers of it.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from placement.fit import STATIC_VOLUME_TOKEN, UNLIMITED, Shape, admits, attach_fit, port_taken, volumes_key
from placement.pod_affinity import ANTI_AFFINITY, SELF_EXCLUSION_TOKEN
from placement.pod_spread import SPREAD, SPREAD_TOKEN
from state.cluster import ClusterState
from state.node_changes import kept_table
from state.resources import is_host_port
from state.topology import Domain
from state.volumes import ATTACH_PREFIX, MAX_VOLUME_COUNT, NO_VOLUME_TO_BIND

CACHE_KEY = "placement.slots"
MAX_SHAPES = 64  # shapes kept (each up to a few figures per node); past it the oldest is dropped
TOO_MANY_PODS = "Too many pods"
NODE_PORTS = "node(s) didn't have free ports for the requested pod ports"  # kube-scheduler's NodePorts

MultiplesKey = tuple[tuple[int, int], ...]

_encoder = msgspec.msgpack.Encoder(order="deterministic")


def refusal(short: str) -> str:
    """kube-scheduler's words for a node short of `short` (a resource, or a host port) for one more pod."""
    if short == "pods":
        return TOO_MANY_PODS
    if short == STATIC_VOLUME_TOKEN:  # another pod of the plan takes the node's volume made in advance
        return NO_VOLUME_TO_BIND
    if short.startswith(SPREAD_TOKEN):  # another pod of the plan holds the node (placement/pod_spread.py)
        return SPREAD
    if short.startswith(SELF_EXCLUSION_TOKEN):  # another pod of the plan holds the node (placement/pod_affinity.py)
        return ANTI_AFFINITY
    if short.startswith(ATTACH_PREFIX):  # a CSI driver's attach limit (placement/fit.py `attach_fit`)
        return MAX_VOLUME_COUNT
    return NODE_PORTS if is_host_port(short) else f"Insufficient {short}"


class ShapeSlots:
    """The base figures of one shape (see the module docstring)."""

    __slots__ = ("domains", "refusals", "refused", "shape", "slots", "stale", "why")

    def __init__(self, shape: Shape) -> None:
        self.shape = shape  # the first Shape seen with these requests and filters
        self.why: dict[str, str] = {}  # node -> admits() ("" when the filters pass)
        self.slots: dict[str, int] = {}  # node -> base offerslots (0 when the filters turn it away)
        self.domains: dict[MultiplesKey, dict[int, tuple[int, int]]] = {}  # multiples -> domain id -> (raw, strict)
        self.refused: dict[str, str] = {}  # node -> why it takes not one pod ("" when it takes one)
        self.refusals: dict[str, int] | None = None  # over every node of the state: refusal -> nodes
        self.stale: set[str] = set()  # nodes whose refusal left `refusals` and must be counted back in


class SlotTable:
    """See the module docstring. Get it with `slot_table(state)`, never construct it for a shared state."""

    __slots__ = ("_filter_keys", "_nominated_domains", "changes", "nominated", "root", "shapes", "state")

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.changes = state.node_changes.cursor()
        self.shapes: dict[bytes, ShapeSlots] = {}
        self._filter_keys: dict[bytes, bytes] = {}  # Shape.key -> the key of its requests and filters
        self.nominated: set[str] = {name for name, info in state.nodes.items() if info.nominated}
        self.root: Domain = state.topology.root
        self._nominated_domains: set[int] | None = None

    # ------------------------------------------------------------------ keeping up with the state

    def sync(self) -> None:
        """Forget the figures of every node changed since the last call, and of the domains above them."""
        state = self.state
        root = state.topology.root
        if root is not self.root:
            self.root = root
            self._nominated_domains = None
            for entry in self.shapes.values():
                entry.domains.clear()
        names = self.changes.take()
        if not names:
            if names is None:  # some changes were forgotten: count everything afresh
                self.shapes.clear()
                self.nominated = {name for name, info in state.nodes.items() if info.nominated}
                self._nominated_domains = None
            return
        changed = set(names)
        nodes = state.nodes
        tree = state.topology
        domain_ids: set[int] = set()
        for name in changed:
            info = nodes.get(name)
            if info is not None and info.nominated:
                if name not in self.nominated:
                    self.nominated.add(name)
                    self._nominated_domains = None
            elif name in self.nominated:
                self.nominated.discard(name)
                self._nominated_domains = None
            for domain in tree.path(name):
                domain_ids.add(domain.id)
        for entry in self.shapes.values():
            why, slots, refused = entry.why, entry.slots, entry.refused
            counts, stale = entry.refusals, entry.stale
            for name in changed:
                why.pop(name, None)
                slots.pop(name, None)
                previous = refused.pop(name, None)
                if counts is not None:
                    # Take the node's refusal out of the counts (unless it is out already) until the next read.
                    if previous and name not in stale:
                        tally(counts, previous, -1)
                    stale.add(name)
            for memo in entry.domains.values():
                for ident in domain_ids:
                    memo.pop(ident, None)

    def nominated_domains(self) -> set[int]:
        """Ids of the domains of the cluster's tree holding a node with a nomination on it."""
        found = self._nominated_domains
        if found is None:
            tree = self.state.topology
            found = {domain.id for name in self.nominated for domain in tree.path(name)}
            self._nominated_domains = found
        return found

    # ------------------------------------------------------------------ base figures

    def entry(self, shape: Shape) -> ShapeSlots:
        key = self._filter_keys.get(shape.key)
        if key is None:
            if len(self._filter_keys) >= MAX_SHAPES * 4:
                self._filter_keys.clear()
            key = _filter_key(shape)
            self._filter_keys[shape.key] = key
        found = self.shapes.get(key)
        if found is None:
            if len(self.shapes) >= MAX_SHAPES:  # the oldest shape goes: a cluster asks for a few at a time
                del self.shapes[next(iter(self.shapes))]
            found = self.shapes[key] = ShapeSlots(shape)
        return found

    def reason(self, entry: ShapeSlots, node: str) -> str:
        found = entry.why.get(node)
        if found is None:
            info = self.state.nodes.get(node)
            found = "node not found" if info is None else admits(entry.shape, info)
            entry.why[node] = found
        return found

    def node_slots(self, entry: ShapeSlots, node: str) -> int:
        """Base offerslots of `node` for the entry's shape: 0 when its filters turn the shape away."""
        count = entry.slots.get(node)
        if count is not None:
            return count
        shape = entry.shape
        info = self.state.nodes.get(node)
        if info is None or ((info.unschedulable or info.taints or not shape.unconstrained)
                            and self.reason(entry, node)):
            count = 0
        else:
            allocatable, used = info.allocatable, info.used
            count = UNLIMITED
            for name, amount in shape.requests:
                have = allocatable.get(name, 0) - used.get(name, 0)
                if have < amount:
                    count = 0
                    break
                fit = have // amount
                if fit < count:
                    count = fit
            if count and shape.attach:
                room, attached = self.state.attach_room(node)
                count = min(count, attach_fit(shape.attach, room.get, attached.__contains__)[0])
            if count and shape.host_ports:
                count = 0 if port_taken(shape, info) else 1
        entry.slots[node] = count
        return count

    def offer(self, entry: ShapeSlots, multiples_key: MultiplesKey, multiples: Mapping[int, int],
              domain: Domain) -> tuple[int, int]:
        """Base (raw, strict) offerslots of a domain of the cluster's tree (see `Solver.offer`)."""
        return self._offer(entry, multiples, domain, self.domain_offers(entry, multiples_key))

    def domain_offers(self, entry: ShapeSlots, key: MultiplesKey = ()) -> dict[int, tuple[int, int]]:
        """The (raw, strict) offerslots `offer` has summed so far for the multiples `key`, by domain id
        (read-only: a domain missing is asked of `offer`)."""
        memo = entry.domains.get(key)
        if memo is None:
            memo = entry.domains[key] = {}
        return memo

    def _offer(self, entry: ShapeSlots, multiples: Mapping[int, int], domain: Domain,
               memo: dict[int, tuple[int, int]]) -> tuple[int, int]:
        found = memo.get(domain.id)
        if found is not None:
            return found
        raw = strict = 0
        if domain.direct_nodes:
            slots = entry.slots
            for node in domain.direct_nodes:
                count = slots.get(node)
                raw += count if count is not None else self.node_slots(entry, node)
            strict = raw
        for child in domain.children:
            child_raw, child_strict = self._offer(entry, multiples, child, memo)
            raw += child_raw
            k = multiples.get(child.level, 1) if multiples else 1
            strict += child_strict - child_strict % k if k > 1 else child_strict
        memo[domain.id] = found = (raw, strict)
        return found

    def refused(self, entry: ShapeSlots, node: str) -> str:
        """Why `node` as it stands takes not one pod of the shape: the filters' reason, else
        "Insufficient <resource>" / "Too many pods" / NodePorts' reason for a host port held there; "" when it
        takes one (or is not a node)."""
        found = entry.refused.get(node)
        if found is not None:
            return found
        info = self.state.nodes.get(node)
        shape = entry.shape
        found = ""
        if info is not None:
            if not shape.unconstrained or info.unschedulable or info.taints:
                found = self.reason(entry, node)
            if not found and self.node_slots(entry, node) == 0:
                allocatable, used = info.allocatable, info.used
                for name, amount in shape.requests:
                    if allocatable.get(name, 0) - used.get(name, 0) < amount:
                        found = refusal(name)
                        break
                else:
                    if shape.attach:
                        room, attached = self.state.attach_room(node)
                        short = attach_fit(shape.attach, room.get, attached.__contains__)[1]
                        found = refusal(short) if short else ""
                    if not found:
                        found = NODE_PORTS if shape.host_ports and port_taken(shape, info) else ""
        entry.refused[node] = found
        return found

    def refusals(self, entry: ShapeSlots) -> dict[str, int]:
        """Refusal -> how many of the state's nodes, as they stand, give it (read-only: copy to change)."""
        counts = entry.refusals
        if counts is None:
            counts = {}
            for node in self.state.nodes:
                why = self.refused(entry, node)
                if why:
                    counts[why] = counts.get(why, 0) + 1
            entry.refusals = counts
            entry.stale.clear()
        elif entry.stale:
            nodes = self.state.nodes
            for node in entry.stale:
                if node in nodes:
                    why = self.refused(entry, node)
                    if why:
                        tally(counts, why, 1)
            entry.stale.clear()
        return counts


def slot_table(state: ClusterState) -> SlotTable:
    """The state's offerslot table, brought up to date (made on first use)."""
    return kept_table(state, CACHE_KEY, SlotTable)


def multiples_key(multiples: Mapping[int, int]) -> MultiplesKey:
    return tuple(sorted(multiples.items())) if multiples else ()


def _filter_key(shape: Shape) -> bytes:
    # What Shape.key encodes but its priority: the base figures do not depend on priority (only
    # nominations do, and those never enter the table), so shapes differing only in priority share one
    # entry. Encoded once per distinct Shape.key.
    if shape.node_pool is not None:  # one msgpack value more keeps keys equal exactly when both parts are
        return _shape_filter_key(shape) + _encoder.encode(("pool", shape.node_pool))
    return _shape_filter_key(shape)


def _shape_filter_key(shape: Shape) -> bytes:
    spelled = tuple((name, str(amount)) for name, amount in shape.requests)
    if shape.attach:  # rare: spelled out whole, the other parts with it
        return _encoder.encode((spelled, shape.node_selector, shape.tolerations, shape.terms,
                                volumes_key(shape.volumes), shape.host_ports, shape.pod_rules, shape.attach))
    if shape.pod_rules:
        return _encoder.encode((spelled, shape.node_selector, shape.tolerations, shape.terms,
                                volumes_key(shape.volumes), shape.host_ports, shape.pod_rules))
    if shape.host_ports:
        return _encoder.encode((spelled, shape.node_selector, shape.tolerations, shape.terms,
                                volumes_key(shape.volumes), shape.host_ports))
    if shape.volumes:
        return _encoder.encode((spelled, shape.node_selector, shape.tolerations, shape.terms,
                                volumes_key(shape.volumes)))
    return _encoder.encode((spelled, shape.node_selector, shape.tolerations, shape.terms))


def tally(counts: dict[str, int], why: str, delta: int) -> None:
    """Add `delta` nodes to the refusal `why` (dropped at 0)."""
    left = counts.get(why, 0) + delta
    if left:
        counts[why] = left
    else:
        counts.pop(why, None)
