"""Topology spread constraints with `whenUnsatisfiable: DoNotSchedule`, read as kube-scheduler's
PodTopologySpread filter reads them.

A constraint names a topology key (a node label), a maxSkew and a label selector. For a pod P, its
*eligible nodes* are those that carry the keys of all of P's DoNotSchedule constraints and, per
constraint, match P's nodeSelector and required node affinity unless `nodeAffinityPolicy: Ignore`
(default Honor), and carry no NoSchedule / NoExecute taint P does not tolerate when
`nodeTaintsPolicy: Honor` (default Ignore). The constraint's *domains* are the values of its key on
its eligible nodes, each counting the placed pods (bound or assumed, not finished, not terminating) on
its eligible nodes that are in P's namespace and that its selector selects. The *global minimum* is
the lowest count of a domain, or 0 while there are fewer domains than `minDomains` (default 1). P may
go on node N (kube-scheduler's Filter, and its words) only when N carries every constraint's key
("node(s) didn't match pod topology spread constraints (missing required label)") and, for each,
`count(N's domain) + (1 if the selector selects P) - global minimum <= maxSkew` ("node(s) didn't match
pod topology spread constraints"); a domain that no eligible node has counts 0. The check is made twice,
as kube-scheduler makes it: with the pods placed now, and with the nominated pods of priority at least P's
(a preemptor's, while its victims leave; not P's own GangGroup's) counted on their nodes too; N must pass
both.

`matchLabelKeys` add `key In (P's value)` to the selector, as the API server does when it admits P
(adding them again changes nothing). A nil selector selects no pod; an empty one selects P but counts
no pod (kube-scheduler counts nothing with an empty selector). Constraints the API server would refuse
are reported by `state.pod_constraints` and not placed by.

These become `PodRule`s of the pod's shape (`spread_rules`), derived from the pods placed now, as
required pod affinity's are. What they are derived from is kept (`SpreadIndex`): each constraint's
eligible nodes while no node changes its labels or taints, and its counts per domain, brought up to date
from the fold's record of changed pods (a placement changes one count). The pods of one plan (a gang's,
placed together) do not see one another there; `plan_violation` checks a plan as kube-scheduler would
meet it, one pod at a time: it places the plan's pods in an order that always takes a pod whose domains
hold the fewest matching pods, and refuses the plan when at some step no remaining pod may go where the
plan puts it. Pods a plan ignores (`ignore_pods`: a preemption's victims) count in no domain, as
kube-scheduler's preemption removes its victims from the node and its PodTopologySpread counts. The planner
spreads a gang by itself in one case: the pods of a gang whose constraint over kubernetes.io/hostname
with maxSkew 1 selects them get a per-node token of their shape (`spread_tokens`, handed out once per node
as a host port is) while at least as many eligible nodes hold none of the pods it counts, so the plan puts
one per node. Otherwise a gang whose pods must spread over a layer it
gathers in waits with the reason.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Mapping, Sequence

import msgspec

from events.objects import LabelSelector, LabelSelectorRequirement, Pod, TopologySpreadConstraint
from placement.fit import Shape, node_affinity_matches, untolerated_taint
from placement.pod_affinity import _NOBODY, SELF_EXCLUSION_TOKEN, PodRule, Term, affinity_index, nominated_others
from state.cluster import ClusterState, NodeInfo, PodInfo
from state.label_selectors import selects
from state.node_changes import kept_table
from state.pod_constraints import DO_NOT_SCHEDULE, MAX_SPREAD_CONSTRAINTS, spread_problem

SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = f"{SPREAD} (missing required label)"
INDEX_KEY = "placement.pod_spread.index"
HONOR = "Honor"
HOSTNAME_KEY = "kubernetes.io/hostname"
# How the per-node tokens of `spread_tokens` begin (`placement.fit.Shape.host_ports` names).
SPREAD_TOKEN = f"{SELF_EXCLUSION_TOKEN}spread-"


class Spread(msgspec.Struct, frozen=True):
    """One DoNotSchedule constraint, resolved for the pod that carries it."""

    topology_key: str
    max_skew: int
    selector: LabelSelector | None  # matchLabelKeys merged in; None selects no pod
    min_domains: int
    honor_affinity: bool
    honor_taints: bool

    @property
    def counts_pods(self) -> bool:
        selector = self.selector
        return selector is not None and bool(selector.match_labels or selector.match_expressions)

    def selects(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and selects(self.selector, labels)


_NONE: tuple[Spread, ...] = ()


def has_spreads(pod: Pod) -> bool:
    """Whether the pod has a DoNotSchedule constraint (a few attribute reads for the usual pod)."""
    constraints = pod.spec.topology_spread_constraints
    return bool(constraints) and any(c.when_unsatisfiable == DO_NOT_SCHEDULE for c in constraints)


def spreads_of(pod: Pod) -> tuple[Spread, ...]:
    """The pod's usable DoNotSchedule constraints, resolved (of the first `MAX_SPREAD_CONSTRAINTS`)."""
    labels = pod.metadata.labels
    hard = [raw for raw in pod.spec.topology_spread_constraints if raw.when_unsatisfiable == DO_NOT_SCHEDULE]
    return tuple(_spread(raw, labels) for raw in hard[:MAX_SPREAD_CONSTRAINTS] if spread_problem(raw) is None)


def _spread(raw: TopologySpreadConstraint, labels: Mapping[str, str]) -> Spread:
    selector = raw.label_selector
    if selector is not None and raw.match_label_keys:
        extra = [LabelSelectorRequirement(key=key, operator="In", values=[labels[key]])
                 for key in raw.match_label_keys if key in labels]
        if extra:
            selector = LabelSelector(match_labels=selector.match_labels,
                                     match_expressions=[*selector.match_expressions, *extra])
    # Only usable constraints come here (`spread_problem`): their maxSkew is there, and at least 1.
    return Spread(raw.topology_key, raw.max_skew or 1, selector, 1 if raw.min_domains is None else raw.min_domains,
                  raw.node_affinity_policy in (None, HONOR), raw.node_taints_policy == HONOR)


# What decides a constraint's eligible nodes: its key, the keys of all the pod's constraints, and the
# pod's node affinity and tolerations when the policies honour them.
_EligibleKey = tuple[str, tuple[str, ...], bytes]
_encoder = msgspec.msgpack.Encoder(order="deterministic")


def _policy_key(spread: Spread, shape: Shape) -> bytes:
    """What of the pod's shape decides the constraint's eligible nodes."""
    return _encoder.encode(((shape.node_selector, shape.terms, shape.node_pool) if spread.honor_affinity else None,
                            shape.tolerations if spread.honor_taints else None))


class _View:
    """One constraint of one pod against the pods placed now: its eligible nodes, and matching pods per
    domain (every domain of an eligible node, 0 when it holds none)."""

    __slots__ = ("at_min", "counts", "eligible", "lowest", "moves", "namespace", "spread")

    def __init__(self, spread: Spread, namespace: str, eligible: frozenset[str], counts: dict[str, int]) -> None:
        self.spread = spread
        self.namespace = namespace
        self.eligible = eligible
        self.counts = counts
        self.lowest = min(counts.values()) if counts else None
        self.at_min = sum(1 for count in counts.values() if count == self.lowest)
        self.moves = 0  # how often `lowest` rose

    @property
    def global_minimum(self) -> int | None:
        """kube-scheduler's global minimum (None: no domain, so no node is over the skew)."""
        if len(self.counts) < self.spread.min_domains:
            return 0
        return self.lowest

    def over(self, value: str, self_match: int) -> int:
        """How far a pod going to domain `value` would be past maxSkew (> 0: refused)."""
        minimum = self.global_minimum
        if minimum is None:
            return 0
        return self.counts.get(value, 0) + self_match - minimum - self.spread.max_skew

    def add(self, value: str) -> None:
        """One more matching pod in domain `value` (on an eligible node)."""
        before = self.counts.get(value, 0)
        self.counts[value] = before + 1
        if before == self.lowest:
            self.at_min -= 1
            if self.at_min == 0:
                self.lowest = min(self.counts.values())
                self.at_min = sum(1 for count in self.counts.values() if count == self.lowest)
                self.moves += 1


class _Counts:
    """The matching pods per domain of one constraint (its selector, key, eligible nodes and namespace),
    kept true from the fold's record of changed pods: a placement changes one pod, so it costs one pod's
    look here, not a pass over every pod the selector may select."""

    __slots__ = ("changes", "counts", "eligible", "namespace", "of", "spread", "state")

    def __init__(self, state: ClusterState, spread: Spread, namespace: str, eligible: frozenset[str],
                 domains: frozenset[str]) -> None:
        self.state, self.spread, self.namespace, self.eligible = state, spread, namespace, eligible
        self.changes = state.pod_changes.cursor()
        self.counts = dict.fromkeys(domains, 0)
        self.of: dict[str, str] = {}  # pod counted -> its domain
        self._count()

    def _count(self) -> None:
        """Count every pod the selector may select (the counts are all 0 when this is called)."""
        term = Term(self.spread.topology_key, frozenset((self.namespace,)), self.spread.selector)
        for name in affinity_index(self.state).candidates(term):
            self._note(name)

    def sync(self) -> None:
        names = self.changes.take()
        if names is None:  # the record forgot some: count afresh
            self.counts = dict.fromkeys(self.counts, 0)
            self.of = {}
            self._count()
            return
        for name in names:
            before = self.of.pop(name, None)
            if before is not None:
                self.counts[before] -= 1
            self._note(name)

    def _note(self, name: str) -> None:
        """Count the pod `name` if it is placed on an eligible node, in the namespace, not terminating, and
        selected (it is counted nowhere when this is called)."""
        pod = self.state.pods.get(name)
        if pod is None or pod.namespace != self.namespace:
            return
        node = pod.placed_on
        if not node or node not in self.eligible or pod.terminating or not self.spread.selects(pod.obj.metadata.labels):
            return
        value = self.state.nodes[node].labels[self.spread.topology_key]
        self.of[name] = value
        self.counts[value] += 1


class SpreadIndex:
    """Eligible nodes per kind of constraint, kept while no node changes; the rules of pods alike, kept
    while no pod and no node changes. Get it with `spread_index(state)`."""

    __slots__ = ("_changes", "_counts", "_eligible", "_keyed", "_marks", "_resolved", "_rules", "_rules_stamp",
                 "_tokens", "state")

    LIMIT = 4096
    KEYED_LIMIT = 64  # lists of nodes: few kinds of pods with constraints at once, each list up to every node
    COUNTS_LIMIT = 256  # count tables, each up to a count per domain and an entry per pod it counts

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._eligible: dict[_EligibleKey, tuple[frozenset[str], frozenset[str]]] = {}
        # What the eligible nodes depend on, per node (labels, taints): the eligible nodes stay known while
        # none changes, though pods come and go on the nodes (which the node change record notes too).
        self._changes = state.node_changes.cursor()
        self._marks = {name: _mark(node) for name, node in state.nodes.items()}
        self._keyed: dict[tuple[str, ...], list[NodeInfo]] = {}
        self._counts: dict[tuple[bytes, str, tuple[str, ...], bytes, str], _Counts] = {}
        self._resolved: dict[tuple[int, str, tuple[str | None, ...]], tuple[object, tuple[Spread, ...]]] = {}
        self._rules: dict[tuple[object, ...], tuple[tuple[Spread, ...], tuple[PodRule, ...]]] = {}
        self._tokens: dict[tuple[object, ...], tuple[tuple[Spread, ...], tuple[str, ...]]] = {}
        self._rules_stamp: tuple[int, int] = (-1, -1)

    def sync(self) -> None:
        """Forget the eligible nodes when a node came, went, or changed its labels or taints."""
        names = self._changes.take()
        nodes, marks = self.state.nodes, self._marks
        if names is None:
            self._marks = {name: _mark(node) for name, node in nodes.items()}
            self._forget_nodes()
            return
        moved = False
        for name in names:
            node = nodes.get(name)
            mark = _mark(node) if node is not None else None
            if marks.get(name) != mark:
                moved = True
                if mark is None:
                    marks.pop(name, None)
                else:
                    marks[name] = mark
        if moved:
            self._forget_nodes()

    def _forget_nodes(self) -> None:
        self._eligible.clear()
        self._keyed.clear()
        self._counts.clear()

    def spreads(self, pod: PodInfo) -> tuple[Spread, ...]:
        """`spreads_of(pod.obj)`, once per constraints object, namespace and the labels matchLabelKeys read."""
        obj = pod.obj
        constraints = obj.spec.topology_spread_constraints
        labels = obj.metadata.labels
        read = tuple(labels.get(key) for raw in constraints for key in raw.match_label_keys)
        key = (id(constraints), obj.metadata.namespace, read)
        hit = self._resolved.get(key)
        if hit is not None and hit[0] is constraints:
            return hit[1]
        found = spreads_of(obj)
        if len(self._resolved) >= self.LIMIT:
            self._resolved.clear()
        self._resolved[key] = (constraints, found)  # holding the list keeps its id from being reused
        return found

    def eligible(self, spread: Spread, keys: tuple[str, ...], shape: Shape) -> tuple[frozenset[str], frozenset[str]]:
        """The eligible nodes of `spread` for a pod of `shape` whose constraints name `keys`, and their domains."""
        cache_key: _EligibleKey = (spread.topology_key, keys, _policy_key(spread, shape))
        hit = self._eligible.get(cache_key)
        if hit is not None:
            return hit
        keyed = self._keyed.get(keys)
        if keyed is None:  # the nodes with every key, shared by the constraints of pods alike
            keyed = [node for node in self.state.nodes.values() if all(key in node.labels for key in keys)]
            if len(self._keyed) >= self.KEYED_LIMIT:
                self._keyed.clear()
            self._keyed[keys] = keyed
        names: list[str] = []
        domains: set[str] = set()
        for node in keyed:
            name, labels = node.name, node.labels
            if spread.honor_affinity and not node_affinity_matches(shape, node):
                continue
            if spread.honor_taints and untolerated_taint(shape, node.taints) is not None:
                continue
            names.append(name)
            domains.add(labels[spread.topology_key])
        found = (frozenset(names), frozenset(domains))
        if len(self._eligible) >= self.LIMIT:
            self._eligible.clear()
        self._eligible[cache_key] = found
        return found

    def view(self, spread: Spread, keys: tuple[str, ...], shape: Shape, namespace: str,
             ignore: frozenset[str] = _NOBODY) -> _View:
        """`spread` of a pod in `namespace` against the pods placed now (a view of its own, to add to), the
        pods in `ignore` counted as gone."""
        eligible, domains = self.eligible(spread, keys, shape)
        if not spread.counts_pods:
            return _View(spread, namespace, eligible, dict.fromkeys(domains, 0))
        count_key = (_encoder.encode(spread.selector), spread.topology_key, keys, _policy_key(spread, shape), namespace)
        table = self._counts.get(count_key)
        if table is None or table.eligible is not eligible:
            if len(self._counts) >= self.COUNTS_LIMIT:
                self._counts.clear()
            table = self._counts[count_key] = _Counts(self.state, spread, namespace, eligible, domains)
        else:
            table.sync()
        counts = dict(table.counts)
        for name in ignore:
            value = table.of.get(name)
            if value is not None:
                counts[value] -= 1
        return _View(spread, namespace, eligible, counts)

    def _fresh(self) -> None:
        """Forget the rules and tokens derived before a pod or a node changed."""
        stamp = (self.state.pod_changes.end, self.state.node_changes.end)
        if self._rules_stamp != stamp:
            self._rules_stamp = stamp
            self._rules.clear()
            self._tokens.clear()

    # Keyed by the id of the pod's resolved constraints (held with the entry, so the id is not reused).
    def remembered_rules(self, spreads: tuple[Spread, ...], key: tuple[object, ...]) -> tuple[PodRule, ...] | None:
        self._fresh()
        hit = self._rules.get((id(spreads), *key))
        return hit[1] if hit is not None and hit[0] is spreads else None

    def remember_rules(self, spreads: tuple[Spread, ...], key: tuple[object, ...], rules: tuple[PodRule, ...]) -> None:
        if len(self._rules) >= self.LIMIT:
            self._rules.clear()
        self._rules[(id(spreads), *key)] = (spreads, rules)

    def remembered_tokens(self, spreads: tuple[Spread, ...], key: tuple[object, ...]) -> tuple[str, ...] | None:
        self._fresh()
        hit = self._tokens.get((id(spreads), *key))
        return hit[1] if hit is not None and hit[0] is spreads else None

    def remember_tokens(self, spreads: tuple[Spread, ...], key: tuple[object, ...], tokens: tuple[str, ...]) -> None:
        if len(self._tokens) >= self.LIMIT:
            self._tokens.clear()
        self._tokens[(id(spreads), *key)] = (spreads, tokens)


def _mark(node: NodeInfo) -> tuple[Mapping[str, str], tuple[object, ...]]:
    """What of a node decides whether it is eligible for a constraint."""
    return node.labels, tuple(node.taints)


def spread_index(state: ClusterState) -> SpreadIndex:
    """The state's `SpreadIndex` (made on first use)."""
    return kept_table(state, INDEX_KEY, SpreadIndex)


def _keys(spreads: Sequence[Spread]) -> tuple[str, ...]:
    return tuple(sorted({spread.topology_key for spread in spreads}))


def spread_rules(state: ClusterState, pod: PodInfo, shape: Shape,
                 ignore: frozenset[str] = _NOBODY) -> tuple[PodRule, ...]:
    """The rules the pods placed now (but those in `ignore`) set for the pending `pod` of `shape` (its own
    parts) through its DoNotSchedule constraints (the module docstring), in a stable order; () for a pod
    without any. A domain is refused when it is past the skew with the pods placed now, or with the nominated
    pods of priority at least the pod's counted on their nodes too (`nominated_others`): kube-scheduler
    filters a pod both ways and keeps the nodes that pass both."""
    index = spread_index(state)
    spreads = index.spreads(pod)
    if not spreads:
        return ()
    labels = pod.obj.metadata.labels
    self_matches = tuple(spread.selects(labels) for spread in spreads)
    others = nominated_others(state, pod, ignore) if state.nominating else []
    memo_key: tuple[object, ...] = (pod.namespace, self_matches, shape.key, ignore)
    if others:
        memo_key = (*memo_key, tuple(other.key for other in others))
    known = index.remembered_rules(spreads, memo_key)
    if known is not None:
        return known
    keys = _keys(spreads)
    rules = [PodRule(key, None, True, MISSING_LABEL) for key in keys]
    refused: dict[str, set[str]] = {}
    for spread, self_match in zip(spreads, self_matches, strict=True):
        view = index.view(spread, keys, shape, pod.namespace, ignore)
        over = {value for value in view.counts if view.over(value, int(self_match)) > 0}
        nominated = _with_nominated(state, view, others)
        if nominated is not None:
            over.update(value for value in nominated.counts if nominated.over(value, int(self_match)) > 0)
        if over:
            refused.setdefault(spread.topology_key, set()).update(over)
    rules.extend(PodRule(key, frozenset(values), False, SPREAD) for key, values in sorted(refused.items()))
    found = tuple(rules)
    index.remember_rules(spreads, memo_key, found)
    return found


def _with_nominated(state: ClusterState, view: _View, others: Sequence[PodInfo]) -> _View | None:
    """`view` with the nominated pods `others` it counts added on their nodes (None: it counts none of them):
    those in its namespace, not terminating, nominated to an eligible node, that its selector selects."""
    spread = view.spread
    if not spread.counts_pods:
        return None
    counts: dict[str, int] | None = None
    for other in others:
        node = other.nominated_on
        if (other.namespace != view.namespace or node not in view.eligible or other.terminating
                or not spread.selects(other.obj.metadata.labels)):
            continue
        if counts is None:
            counts = dict(view.counts)
        value = state.nodes[node].labels[spread.topology_key]
        counts[value] = counts.get(value, 0) + 1
    return _View(spread, view.namespace, view.eligible, counts) if counts is not None else None


def spread_tokens(state: ClusterState, pod: PodInfo, shape: Shape,
                  ignore: frozenset[str] = _NOBODY) -> tuple[str, ...]:
    """The per-node tokens of a gang's pod (of `shape`, its own parts) whose constraints over
    kubernetes.io/hostname with maxSkew 1 select the pod itself, while more eligible nodes hold none of the
    pods they count than the gang has pods to place: then kube-scheduler lets one such pod go to each of
    those nodes and none to a node holding one, so the plan puts one per node. (The plan check holds
    every plan to the constraints in any case.) The pods in `ignore` count as gone."""
    gang = state.gangs.get(pod.gang) if pod.gang else None
    if gang is None:
        return ()
    index = spread_index(state)
    spreads = index.spreads(pod)
    labels = pod.obj.metadata.labels
    chosen = [spread for spread in spreads if spread.topology_key == HOSTNAME_KEY and spread.max_skew == 1
              and spread.counts_pods and spread.selects(labels)]
    if not chosen:
        return ()
    memo_key = (pod.namespace, pod.gang, shape.key, ignore)
    known = index.remembered_tokens(spreads, memo_key)
    if known is not None:
        return known
    pending = state.pending
    placing = sum(1 for member in gang.members if member in pending)
    keys = _keys(spreads)
    tokens = tuple(sorted({SPREAD_TOKEN + hashlib.blake2b(_encoder.encode((pod.namespace, spread)),
                                                          digest_size=8).hexdigest()
                           for spread in chosen
                           if sum(1 for count in index.view(spread, keys, shape, pod.namespace, ignore).counts.values()
                                  if count == 0) >= placing}))
    index.remember_tokens(spreads, memo_key, tokens)
    return tokens


def placed_violation(state: ClusterState, pod: PodInfo, node: str, shape: Shape) -> str:
    """Why `pod` (of `shape`, its own parts), placed on `node`, breaks one of its DoNotSchedule constraints
    next to the other pods placed now, in kube-scheduler's words ("" when it keeps them): the check of a
    plan adopted after a restart, whose pods are placed already (so the pod is left out of its own count)."""
    if not has_spreads(pod.obj):
        return ""
    index = spread_index(state)
    spreads = index.spreads(pod)
    info = state.nodes.get(node)
    if not spreads or info is None:
        return ""
    keys = _keys(spreads)
    labels = pod.obj.metadata.labels
    for spread in spreads:
        value = info.labels.get(spread.topology_key)
        if value is None:
            return MISSING_LABEL
        view = index.view(spread, keys, shape, pod.namespace)
        self_match = spread.selects(labels)
        if (self_match and spread.counts_pods and node in view.eligible and not pod.terminating
                and pod.placed_on == node):
            counts = dict(view.counts)
            counts[value] -= 1
            view = _View(spread, pod.namespace, view.eligible, counts)
        if view.over(value, int(self_match)) > 0:
            return SPREAD
    return ""


def plan_violation(state: ClusterState, assignments: Sequence[tuple[str, str]],
                   shapes: Mapping[str, Shape], ignore: frozenset[str] = _NOBODY) -> str:
    """"" when the pods of one plan (`assignments`: pod, node) may be placed one at a time, each where the
    plan puts it, without breaking a DoNotSchedule constraint of one of them (the module docstring); else
    why not. `shapes`: each carrier's shape of its own parts (which nodes its policies count); the pods in
    `ignore` (a preemption's victims) count as gone."""
    pods, nodes = state.pods, state.nodes
    members = [(pods[key], node) for key, node in assignments if key in pods and node in nodes]
    if not any(has_spreads(pod.obj) for pod, _ in members):
        return ""
    index = spread_index(state)
    # One view per kind of constraint and namespace, shared by the carriers alike (a gang's are).
    views: dict[tuple[object, ...], _View] = {}
    # Carriers alike (the same views, going to the same node) wait together: (views, node) -> pods.
    waiting: dict[tuple[int, str], tuple[list[tuple[_View, int]], str, list[PodInfo]]] = {}
    owns: dict[tuple[tuple[tuple[object, ...], bool], ...], list[tuple[_View, int]]] = {}
    carriers: set[str] = set()
    for pod, node in members:
        spreads = index.spreads(pod) if has_spreads(pod.obj) else _NONE
        if not spreads:
            continue
        carriers.add(pod.key)
        keys = _keys(spreads)
        shape = shapes[pod.key]
        labels = pod.obj.metadata.labels
        own_key: list[tuple[tuple[object, ...], bool]] = []
        for spread in spreads:
            view_key = (_encoder.encode(spread), keys, pod.namespace, _policy_key(spread, shape))
            if view_key not in views:
                views[view_key] = index.view(spread, keys, shape, pod.namespace, ignore)
            own_key.append((view_key, spread.selects(labels)))
        own = owns.get(tuple(own_key))
        if own is None:
            own = owns[tuple(own_key)] = [(views[view_key], int(self_match)) for view_key, self_match in own_key]
        group = waiting.setdefault((id(own), node), (own, node, []))
        group[2].append(pod)
    all_views = list(views.values())

    def place(pod: PodInfo, node: str) -> None:
        """`pod` goes to `node`: one more matching pod in each view that counts it there."""
        if pod.terminating:
            return
        labels = pod.obj.metadata.labels
        for view in all_views:
            if node in view.eligible and view.namespace == pod.namespace and view.spread.selects(labels) \
                    and view.spread.counts_pods:
                view.add(nodes[node].labels[view.spread.topology_key])

    def excess(own: list[tuple[_View, int]], node: str) -> int:
        """How far a pod would be past its worst constraint on `node` (> 0: refused)."""
        labels = nodes[node].labels
        worst = -(1 << 62)
        for view, self_match in own:
            value = labels.get(view.spread.topology_key)
            if value is None:
                return 1 << 62
            worst = max(worst, view.over(value, self_match))
        return worst

    for pod, node in members:  # pods without constraints may go at any time: first, as they need nothing
        if pod.key not in carriers:
            place(pod, node)
    # kube-scheduler meets the pods one at a time: take, each time, a pod whose constraints have the most
    # room where it goes. While no global minimum moves, counts only grow, so a key read before is a lower
    # bound (re-read it when it comes up); when one moves, every key is read again.
    groups = list(waiting.values())
    minima = sum(view.moves for view in all_views)
    heap = [(excess(own, node), position) for position, (own, node, _) in enumerate(groups)]
    heapq.heapify(heap)
    while heap:
        moved = sum(view.moves for view in all_views)
        if moved != minima:
            minima = moved
            heap = [(excess(groups[position][0], groups[position][1]), position) for _, position in heap]
            heapq.heapify(heap)
        past, position = heapq.heappop(heap)
        own, node, left = groups[position]
        now = excess(own, node)
        if now > past:
            heapq.heappush(heap, (now, position))
            continue
        if now > 0:
            return _why(left[-1], node, own, nodes)
        place(left.pop(), node)
        if left:
            heapq.heappush(heap, (excess(own, node), position))
    return ""


def _why(pod: PodInfo, node: str, own: list[tuple[_View, int]], nodes: Mapping[str, NodeInfo]) -> str:
    """Why `pod` may not go to `node` now (one of its views refuses it)."""
    labels = nodes[node].labels
    for view, self_match in own:
        spread = view.spread
        key = spread.topology_key
        value = labels.get(key)
        if value is None:
            return f"pod {pod.key}: topologySpreadConstraints (topologyKey {key}): its node {node} has no {key} label"
        if view.over(value, self_match) > 0:
            minimum = view.global_minimum or 0
            lowest = sorted(domain for domain, count in view.counts.items() if count == minimum)
            where = f"{key}={lowest[0]} holds {minimum}" if lowest else f"the global minimum is {minimum}"
            return (f"pod {pod.key}: topologySpreadConstraints (topologyKey {key}, maxSkew {spread.max_skew}): "
                    f"placed one at a time, as kube-scheduler places them, the plan would put a pod in "
                    f"{key}={value}, which holds {view.counts.get(value, 0)} matching pods already, while {where}")
    return f"pod {pod.key}: topologySpreadConstraints: the plan cannot be placed one pod at a time"
