"""Required inter-pod affinity and anti-affinity, read as kube-scheduler's InterPodAffinity filter reads them.

A pod's `spec.affinity.podAffinity` / `podAntiAffinity` `requiredDuringSchedulingIgnoredDuringExecution`
terms each name a topology key (a node label), a label selector and the namespaces it looks in. A pod
P may go on node N only when (kube-scheduler's Filter; its reasons are the messages used here):
- no anti-affinity term of P selects a placed pod whose node shares N's value of the term's key
  ("node(s) didn't match pod anti-affinity rules");
- no anti-affinity term of a placed pod selects P while that pod's node shares N's value of the term's
  key ("node(s) didn't satisfy existing pods anti-affinity rules");
- N has the key of every affinity term of P and, for each, shares its value with the node of a placed
  pod that matches all of P's affinity terms; unless no placed pod anywhere matches them all and P
  matches them all itself: the first pod of a series that has affinity to itself
  ("node(s) didn't match pod affinity rules").
A term looks in its `namespaces`, else in the namespace of the pod that carries it; an empty
`namespaceSelector` ({}) means every namespace. A non-empty namespaceSelector selects namespaces by their
labels, and toposched reads no Namespace objects: such a term is read as every namespace (for
anti-affinity the safe side; `state.pod_constraints` reports it). `matchLabelKeys` / `mismatchLabelKeys`
add `key In / NotIn (the pod's value)` to the selector, as the API server does when it admits the pod
(adding them again changes nothing). A nil labelSelector selects no pod, an empty one every pod.
Placed pods are those bound or assumed and not finished (terminating ones included, as kube-scheduler
counts them until they are gone). Of each kind, the first `MAX_REQUIRED_TERMS` terms of a pod are placed
by (a pod may carry thousands; `state.pod_constraints` reports the rest).
Nominated pods (a preemptor's, while its victims leave) count as kube-scheduler counts them: it filters a
pod both with the nominated pods of priority at least its own added to their nodes and without them, and
keeps the nodes that pass both. So such a nominated pod counts as placed on its node for anti-affinity,
either way round; and for affinity it only narrows the first pod of a series (no placed pod matches, so
the pod could go anywhere) to the domains where the series' nominated pods are; it never satisfies an
affinity term alone. A pod's own nomination, and those of its GangGroup (planned with it), do not count.

These become `PodRule`s of the pod's shape (`placement.fit.admits` checks them node by node), derived
from the pods placed now. The pods of one plan (a gang's, placed together) do not see one another
there; for them:
- an anti-affinity term over `kubernetes.io/hostname` that selects its own pod becomes a per-node
  token of the shape (`self_exclusion`), which the planner hands out once per node, as a host port;
- an affinity term that selects its own pod over a key that is a layer of the topology gathers the
  plan in one domain of that layer (`gather_level`), like a MustGather there;
- every plan is then checked as a whole (`plan_violation`): no two of its pods, nor one of them and a
  placed pod, may break an anti-affinity term, and a pod whose affinity no placed pod satisfies must
  share each term's domain with the plan's pods that match its terms (all in one domain when none is
  placed yet), one of which may be placed first (kube-scheduler places one pod at a time: the first
  needs no other, or meets its own terms). A plan that breaks one is not made: the gang waits with the
  reason.
A plan adopted after a restart, whose pods are placed already, is checked pod by pod against every other
placed pod (`placed_violation`).

What is indexed (`AffinityIndex`, kept in the state's reader caches, following the fold's record of
changed pods): the anti-affinity terms of placed pods, each filed under the labels a pod must carry to
be selected; and, once a term first asks, the placed pods by node, namespace and label. The rules of
pods alike in what they read are derived once while nothing changes. A pod without terms, in a cluster
where no placed pod has anti-affinity, costs a few attribute reads.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import msgspec

from events.objects import Affinity, LabelSelector, LabelSelectorRequirement, Pod, PodAffinityTerm
from state.cluster import ClusterState, PodInfo
from state.indexes import leave
from state.label_selectors import selects
from state.node_changes import kept_table
from state.pod_constraints import MAX_REQUIRED_TERMS
from state.resources import HOST_PORT_PREFIX, SELF_EXCLUSION_PROTOCOL

HOSTNAME_KEY = "kubernetes.io/hostname"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
AFFINITY = "node(s) didn't match pod affinity rules"
INDEX_KEY = "placement.pod_affinity.index"
_NOBODY: frozenset[str] = frozenset()
# How the per-node tokens of `self_exclusion` begin (`placement.fit.Shape.host_ports` names).
SELF_EXCLUSION_TOKEN = f"{HOST_PORT_PREFIX}{SELF_EXCLUSION_PROTOCOL}/"


class Term(msgspec.Struct, frozen=True):
    """One required term, resolved for the pod that carries it."""

    topology_key: str
    namespaces: frozenset[str] | None  # None: every namespace
    selector: LabelSelector | None  # None: selects no pod

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.selector is None or (self.namespaces is not None and namespace not in self.namespaces):
            return False
        return selects(self.selector, labels)


class PodRule(msgspec.Struct, frozen=True, array_like=True):
    """What a node's value of `key` must be. `allow`: one of `values` (any value when `values` is None);
    else none of `values`. `reason`: kube-scheduler's words for a node it turns away."""

    key: str
    values: frozenset[str] | None
    allow: bool
    reason: str

    def refuses(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.allow:
            return value is None or (self.values is not None and value not in self.values)
        return value is not None and self.values is not None and value in self.values


class PodTerms(msgspec.Struct, frozen=True):
    affinity: tuple[Term, ...]
    anti: tuple[Term, ...]
    label_keys: tuple[str, ...] = ()  # the label keys its selectors read (what its own match depends on)


NO_TERMS = PodTerms((), ())


def _selector_keys(terms: Iterable[Term]) -> set[str]:
    keys: set[str] = set()
    for term in terms:
        selector = term.selector
        if selector is not None:
            keys.update(selector.match_labels)
            keys.update(expression.key for expression in selector.match_expressions)
    return keys


def has_terms(pod: Pod) -> bool:
    affinity = pod.spec.affinity
    if affinity is None:
        return False
    return bool((affinity.pod_affinity is not None
                 and affinity.pod_affinity.required_during_scheduling_ignored_during_execution)
                or (affinity.pod_anti_affinity is not None
                    and affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution))


def terms_of(pod: Pod) -> PodTerms:
    """The pod's required terms, resolved (namespaces, selector with its label keys)."""
    affinity = pod.spec.affinity
    if affinity is None:
        return NO_TERMS
    together = affinity.pod_affinity.required_during_scheduling_ignored_during_execution \
        if affinity.pod_affinity is not None else []
    apart = affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution \
        if affinity.pod_anti_affinity is not None else []
    if not together and not apart:
        return NO_TERMS
    joined = tuple(_term(raw, pod) for raw in together[:MAX_REQUIRED_TERMS])
    excluded = tuple(_term(raw, pod) for raw in apart[:MAX_REQUIRED_TERMS])
    return PodTerms(joined, excluded, tuple(sorted(_selector_keys((*joined, *excluded)))))


def _term(raw: PodAffinityTerm, pod: Pod) -> Term:
    meta = pod.metadata
    namespaces: frozenset[str] | None
    if raw.namespace_selector is not None:
        namespaces = None  # {}: every namespace; a non-empty one is read so too (module docstring)
    elif raw.namespaces:
        namespaces = frozenset(raw.namespaces)
    else:
        namespaces = frozenset((meta.namespace,))
    selector = raw.label_selector
    if selector is not None and (raw.match_label_keys or raw.mismatch_label_keys):
        labels = meta.labels
        extra = [LabelSelectorRequirement(key=key, operator="In", values=[labels[key]])
                 for key in raw.match_label_keys if key in labels]
        extra += [LabelSelectorRequirement(key=key, operator="NotIn", values=[labels[key]])
                  for key in raw.mismatch_label_keys if key in labels]
        if extra:
            selector = LabelSelector(match_labels=selector.match_labels,
                                     match_expressions=[*selector.match_expressions, *extra])
    return Term(raw.topology_key, namespaces, selector)


def _label_keys_of(affinity: Affinity) -> tuple[str, ...]:
    """The matchLabelKeys / mismatchLabelKeys of the affinity's required terms."""
    keys: list[str] = []
    for part in (affinity.pod_affinity, affinity.pod_anti_affinity):
        if part is not None:
            for raw in part.required_during_scheduling_ignored_during_execution[:MAX_REQUIRED_TERMS]:
                keys += raw.match_label_keys
                keys += raw.mismatch_label_keys
    return tuple(keys)


def matches_all(terms: Sequence[Term], namespace: str, labels: Mapping[str, str]) -> bool:
    """kube-scheduler's "matches all affinity terms" (false for no terms)."""
    return bool(terms) and all(term.selects(namespace, labels) for term in terms)


class _AntiGroup:
    """The placed pods carrying one anti-affinity term (equal terms share a group)."""

    __slots__ = ("owners", "pairs", "stamp", "term", "values")

    def __init__(self, term: Term) -> None:
        self.term = term
        self.owners: dict[str, str] = {}  # pod -> its node
        self.stamp: tuple[int, int] = (-1, -1)
        self.values: frozenset[str] = frozenset()
        self.pairs = _required_pairs(term)


def _required_pairs(term: Term) -> tuple[tuple[str, str | None], ...] | None:
    """Labels one of which a pod must carry for `term` to select it: (key, value), or (key, None) for any
    value; None when its selector requires none (every pod is a candidate)."""
    selector = term.selector
    if selector is None:
        return ()  # selects no pod
    for key, value in sorted(selector.match_labels.items()):
        return ((key, value),)
    for expression in selector.match_expressions:
        if expression.operator == "In":
            return tuple((expression.key, value) for value in sorted(set(expression.values)))
        if expression.operator == "Exists":
            return ((expression.key, None),)
    return None


@dataclass(frozen=True, slots=True)
class Nominations:
    """The pods holding a nomination on a node (a preemptor's, while its victims leave), as kube-scheduler
    adds them when it filters a pod of lower or equal priority: `anti`, whether one of them has required
    anti-affinity, and `label_keys`, the label keys those terms' selectors read."""

    stamp: tuple[int, int]
    pods: tuple[PodInfo, ...]
    anti: bool
    label_keys: tuple[str, ...]


_NO_NOMINATIONS = Nominations((-1, -1), (), False, ())


def nominated_others(state: ClusterState, pod: PodInfo, ignore: AbstractSet[str] = _NOBODY) -> list[PodInfo]:
    """The nominated pods kube-scheduler would add to the nodes when it filters `pod`: of priority at least
    the pod's, not the pod itself nor a pod of its GangGroup (planned with it), nor treated as gone."""
    found = affinity_index(state).nominations().pods
    if not found:
        return []
    own = _own_group(state, pod)
    priority, key = pod.priority, pod.key
    return [other for other in found if other.priority >= priority and other.key != key and other.key not in ignore
            and not (other.gang and other.gang in own)]


def _own_group(state: ClusterState, pod: PodInfo) -> tuple[str, ...]:
    gang = state.gangs.get(pod.gang) if pod.gang else None
    return gang.spec.gang_group if gang is not None and gang.spec is not None else (pod.gang,)


class AffinityIndex:
    """Placed pods by namespace and the anti-affinity terms of placed pods, kept true from the fold's
    record of changed pods (`state.pod_changes`); and what was derived from them, for as long as no pod
    and no node changes (a gang's pods share their terms: derived once per planning call). Get it with
    `affinity_index(state)`."""

    __slots__ = ("_alike", "_by_key", "_by_label", "_changes", "_derived", "_group_keys", "_groups_by_pair", "_kept",
                 "_labels_of", "_loose_groups", "_nominations", "_rules", "_rules_stamp", "_terms", "_tokens", "anti",
                 "anti_of", "by_namespace", "placed_on", "state")

    TERMS_LIMIT = 4096

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._terms: dict[tuple[int, str, int], tuple[object, object, PodTerms]] = {}
        self._alike: dict[tuple[bytes, str, tuple[tuple[str, str | None], ...]], PodTerms] = {}
        self._rules: dict[tuple[object, ...], tuple[PodRule, ...]] = {}  # `rules_for`, while nothing changes
        self._rules_stamp: tuple[int, int] = (-1, -1)
        self._tokens: dict[int, tuple[PodTerms, tuple[tuple[Term, str], ...]]] = {}  # `host_tokens`
        self._nominations: Nominations | None = None
        self._rebuild()

    def _rebuild(self) -> None:
        self._changes = self.state.pod_changes.cursor()
        self.anti: dict[bytes, _AntiGroup] = {}
        self.anti_of: dict[str, tuple[bytes, ...]] = {}  # placed pod -> its groups
        # The groups by a label a pod must carry to be selected (`_required_pairs`), and those with none.
        self._groups_by_pair: dict[tuple[str, str | None], set[bytes]] = {}
        self._loose_groups: set[bytes] = set()
        self._group_keys: tuple[str, ...] | None = None  # `group_label_keys`, until a group comes or goes
        self.by_namespace: dict[str, set[str]] = {}
        self.placed_on: dict[str, str] = {}  # placed pod -> the node it is indexed under
        self._derived: dict[bytes, tuple[tuple[int, int], object]] = {}
        # Placed pods by node, namespace, (namespace, label key, value) and (namespace, key): made when a
        # term first asks (`_keep`: a cluster where no pod has terms never pays for them), then kept.
        self._kept = False
        self._by_label: dict[tuple[str, str, str], set[str]] = {}
        self._by_key: dict[tuple[str, str], set[str]] = {}
        self._labels_of: dict[str, Mapping[str, str]] = {}
        for key, pod in self.state.pods.items():
            if pod.placed_on and has_terms(pod.obj):
                self._note(key)

    def sync(self) -> None:
        keys = self._changes.take()
        if keys is None:
            self._rebuild()
            return
        for key in keys:
            self._note(key)

    @property
    def stamp(self) -> tuple[int, int]:
        """Where the fold's change records stand: a derivation holds while this does."""
        return self.state.pod_changes.end, self.state.node_changes.end

    def terms(self, pod: PodInfo) -> PodTerms:
        """`terms_of(pod.obj)`, computed once per affinity object, namespace and label set, and shared by
        the pods whose terms are alike (a gang's pods, each decoded on its own, with labels of their own)."""
        meta = pod.obj.metadata
        affinity = pod.obj.spec.affinity
        if affinity is None:
            return NO_TERMS
        key = (id(affinity), meta.namespace, id(meta.labels))
        hit = self._terms.get(key)
        if hit is not None and hit[0] is affinity and hit[1] is meta.labels:
            return hit[2]
        if len(self._terms) >= self.TERMS_LIMIT:
            self._terms.clear()
            self._alike.clear()
        # The terms depend on the labels only through their matchLabelKeys / mismatchLabelKeys.
        labels = meta.labels
        alike = (_encoder.encode(affinity), meta.namespace,
                 tuple((name, labels.get(name)) for name in _label_keys_of(affinity)))
        found = self._alike.get(alike)
        if found is None:
            found = self._alike[alike] = terms_of(pod.obj)
        self._terms[key] = (affinity, labels, found)  # holding both keeps their ids from being reused
        return found

    def host_tokens(self, terms: PodTerms) -> tuple[tuple[Term, str], ...]:
        """The anti-affinity terms of `terms` over kubernetes.io/hostname, each with its per-node token (a
        digest of the term), made once per shared `PodTerms` rather than per pod."""
        hit = self._tokens.get(id(terms))
        if hit is not None and hit[0] is terms:
            return hit[1]
        found = tuple((term, SELF_EXCLUSION_TOKEN + hashlib.blake2b(_encoder.encode(term), digest_size=8).hexdigest())
                      for term in terms.anti if term.topology_key == HOSTNAME_KEY)
        if len(self._tokens) >= self.TERMS_LIMIT:
            self._tokens.clear()
        self._tokens[id(terms)] = (terms, found)  # holding the terms keeps their id from being reused
        return found

    def nominations(self) -> Nominations:
        """The pods holding a nomination (`ClusterState.nominating`), made afresh when a pod or a node changed:
        few but while a preemption's victims leave, none most of the time."""
        state = self.state
        if not state.nominating:
            return _NO_NOMINATIONS
        stamp = self.stamp
        found = self._nominations
        if found is not None and found.stamp == stamp:
            return found
        pods = tuple(pod for key in sorted(state.nominating)
                     if (pod := state.pods.get(key)) is not None and not pod.placed_on and not pod.terminating)
        anti = [term for pod in pods if has_terms(pod.obj) for term in self.terms(pod).anti]
        found = self._nominations = Nominations(stamp, pods, bool(anti), tuple(sorted(_selector_keys(anti))))
        return found

    def group_label_keys(self) -> tuple[str, ...]:
        """The label keys the running pods' anti-affinity selectors read."""
        found = self._group_keys
        if found is None:
            found = self._group_keys = tuple(sorted(_selector_keys(group.term for group in self.anti.values())))
        return found

    def remembered_rules(self, key: tuple[object, ...]) -> tuple[PodRule, ...] | None:
        stamp = self.stamp
        if self._rules_stamp != stamp:
            self._rules_stamp = stamp
            self._rules.clear()
            return None
        return self._rules.get(key)

    def remember_rules(self, key: tuple[object, ...], rules: tuple[PodRule, ...]) -> None:
        if len(self._rules) >= self.TERMS_LIMIT:
            self._rules.clear()
        self._rules[key] = rules

    def _note(self, key: str) -> None:
        pod = self.state.pods.get(key)
        node = pod.placed_on if pod is not None else ""
        if self._kept and key in self.placed_on:
            namespace = key.partition("/")[0]
            leave(self.by_namespace, namespace, key)
            del self.placed_on[key]
            self._unlabel(key, namespace)
        for group_key in self.anti_of.pop(key, ()):
            group = self.anti[group_key]
            del group.owners[key]
            group.stamp = (-1, -1)
            if not group.owners:
                del self.anti[group_key]
                self._group_keys = None
                if group.pairs is None:
                    self._loose_groups.discard(group_key)
                for pair in group.pairs or ():
                    leave(self._groups_by_pair, pair, group_key)
        if pod is None or not node:
            return
        if self._kept:
            self._place(key, pod, node)
        if has_terms(pod.obj):
            groups = []
            for term in self.terms(pod).anti:
                group_key = _encoder.encode(term)
                joined = self.anti.get(group_key)
                if joined is None:
                    joined = self.anti[group_key] = _AntiGroup(term)
                    self._group_keys = None
                    if joined.pairs is None:
                        self._loose_groups.add(group_key)
                    for pair in joined.pairs or ():
                        self._groups_by_pair.setdefault(pair, set()).add(group_key)
                joined.owners[key] = node
                joined.stamp = (-1, -1)
                groups.append(group_key)
            if groups:
                self.anti_of[key] = tuple(groups)

    def _place(self, key: str, pod: PodInfo, node: str) -> None:
        self.placed_on[key] = node
        namespace = pod.namespace
        self.by_namespace.setdefault(namespace, set()).add(key)
        labels = pod.obj.metadata.labels
        self._labels_of[key] = labels
        for name, value in labels.items():
            self._by_label.setdefault((namespace, name, value), set()).add(key)
            self._by_key.setdefault((namespace, name), set()).add(key)

    def _keep(self) -> None:
        """Start keeping every placed pod by namespace and label (the first time a term asks)."""
        if self._kept:
            return
        self._kept = True
        for key, pod in self.state.pods.items():
            if pod.placed_on:
                self._place(key, pod, pod.placed_on)

    def _unlabel(self, key: str, namespace: str) -> None:
        for name, value in self._labels_of.pop(key, {}).items():
            leave(self._by_label, (namespace, name, value), key)
            leave(self._by_key, (namespace, name), key)

    def candidates(self, term: Term) -> list[str]:
        """The placed pods `term` may select (a superset, narrowed by its selector's labels), in a stable order."""
        selector = term.selector
        if selector is None:
            return []
        self._keep()
        found: list[str] = []
        for namespace in sorted(self.by_namespace if term.namespaces is None else term.namespaces):
            narrowest: AbstractSet[str] = self.by_namespace.get(namespace, _NOBODY)
            there: AbstractSet[str]
            for name, value in selector.match_labels.items():
                there = self._by_label.get((namespace, name, value), _NOBODY)
                if len(there) < len(narrowest):
                    narrowest = there
            for expression in selector.match_expressions:
                if expression.operator == "Exists":
                    there = self._by_key.get((namespace, expression.key), _NOBODY)
                elif expression.operator == "In" and sum(
                        len(self._by_label.get((namespace, expression.key, value), _NOBODY))
                        for value in expression.values) < len(narrowest):
                    there = set().union(*(self._by_label.get((namespace, expression.key, value), _NOBODY)
                                          for value in expression.values))
                else:
                    continue
                if len(there) < len(narrowest):
                    narrowest = there
            found.extend(sorted(narrowest))
        return found

    def groups_for(self, labels: Mapping[str, str]) -> list[_AntiGroup]:
        """The anti-affinity groups that may select a pod with `labels` (a superset), in a stable order."""
        by_pair = self._groups_by_pair
        found = set(self._loose_groups)
        if by_pair:
            for key, value in labels.items():
                exact = by_pair.get((key, value))
                if exact:
                    found.update(exact)
                present = by_pair.get((key, None))
                if present:
                    found.update(present)
        return [self.anti[group_key] for group_key in sorted(found)]

    def group_values(self, group: _AntiGroup, ignore: AbstractSet[str] = _NOBODY) -> frozenset[str]:
        """The values of the group's key on its pods' nodes, the pods in `ignore` counted as gone."""
        if ignore and not ignore.isdisjoint(group.owners):
            # pods treated as gone (preemption's victims): derived for this question only, not kept
            key = group.term.topology_key
            return frozenset(value for owner, node in group.owners.items()
                             if owner not in ignore and (value := _value(self.state, node, key)) is not None)
        stamp = self.stamp
        if group.stamp != stamp:
            key = group.term.topology_key
            group.values = frozenset(value for node in group.owners.values()
                                     if (value := _value(self.state, node, key)) is not None)
            group.stamp = stamp
        return group.values

    def selected_values(self, term: Term, ignore: AbstractSet[str] = _NOBODY) -> frozenset[str]:
        """The values of `term`'s key on the nodes of the placed pods it selects, those in `ignore` counted
        as gone (then derived for this question only, not kept)."""
        cache_key = b"a" + _encoder.encode(term)
        stamp = self.stamp
        hit = self._derived.get(cache_key) if not ignore else None
        if hit is not None and hit[0] == stamp:
            return hit[1]  # type: ignore[return-value]
        pods, key = self.state.pods, term.topology_key
        values = set()
        for name in self.candidates(term):
            if ignore and name in ignore:
                continue
            other = pods.get(name)
            if other is not None and term.selects(other.namespace, other.obj.metadata.labels):
                value = _value(self.state, self.placed_on[name], key)
                if value is not None:
                    values.add(value)
        found = frozenset(values)
        if not ignore:
            self._remember(cache_key, stamp, found)
        return found

    def matching_all(self, together: tuple[Term, ...],
                     ignore: AbstractSet[str] = _NOBODY) -> dict[str, frozenset[str]] | None:
        """Per key of `together`, the values on the nodes of the placed pods matching all its terms; None
        when no placed pod on a node with one of the keys matches them all. Pods in `ignore` count as gone
        (then derived for this question only, not kept)."""
        cache_key = b"f" + _encoder.encode(together)
        stamp = self.stamp
        hit = self._derived.get(cache_key) if not ignore else None
        if hit is not None and hit[0] == stamp:
            return hit[1]  # type: ignore[return-value]
        candidates = min((self.candidates(term) for term in together), key=len)
        found: dict[str, set[str]] = {term.topology_key: set() for term in together}
        any_match = False
        pods = self.state.pods
        for name in candidates:
            if ignore and name in ignore:
                continue
            other = pods.get(name)
            if other is None or not matches_all(together, other.namespace, other.obj.metadata.labels):
                continue
            node = self.placed_on[name]
            for term in together:
                value = _value(self.state, node, term.topology_key)
                if value is not None:
                    any_match = True
                    found[term.topology_key].add(value)
        result = {key: frozenset(values) for key, values in found.items()} if any_match else None
        if not ignore:
            self._remember(cache_key, stamp, result)
        return result

    def _remember(self, key: bytes, stamp: tuple[int, int], value: object) -> None:
        if len(self._derived) >= self.TERMS_LIMIT:
            self._derived.clear()
        self._derived[key] = (stamp, value)


def affinity_index(state: ClusterState) -> AffinityIndex:
    """The state's `AffinityIndex` (made on first use), brought up to date."""
    return kept_table(state, INDEX_KEY, AffinityIndex)


def _value(state: ClusterState, node: str, key: str) -> str | None:
    info = state.nodes.get(node)
    return info.labels.get(key) if info is not None else None


def rules_for(state: ClusterState, pod: PodInfo, ignore: frozenset[str] = _NOBODY) -> tuple[PodRule, ...]:
    """The rules the pods placed now set for the pending `pod` (the module docstring), in a stable order;
    () for the usual pod. Pods in `ignore` count as gone (preemption's victims: a plan is validated
    with them away, so a term only they kept in force no longer holds). The nominated pods of priority at
    least the pod's (`nominated_others`) count as placed on their nodes for anti-affinity either way round,
    and for affinity only where no placed pod satisfies it, as kube-scheduler filters a pod both with them
    added and without them and keeps the nodes that pass both."""
    index = affinity_index(state)
    terms = index.terms(pod) if has_terms(pod.obj) else NO_TERMS
    nominations = index.nominations()
    if not index.anti and terms is NO_TERMS and not nominations.anti:
        return ()
    namespace, labels = pod.namespace, pod.obj.metadata.labels
    # Pods alike in what the rules read (their terms, namespace, whether in a gang, the labels a selector
    # reads) get the same rules: a gang's pods differ in labels no selector reads (their index, say).
    # The pods counted as gone join the key only when there are some (a frozenset keeps its hash); which
    # nominations count (the pod's priority and GangGroup), only when there are some.
    read = (*index.group_label_keys(), *terms.label_keys, *nominations.label_keys)
    memo_key: tuple[object, ...] = (id(terms), namespace, bool(pod.gang),
                                    tuple((name, labels.get(name)) for name in read))
    if ignore:
        memo_key = (*memo_key, ignore)
    if nominations.pods:
        memo_key = (*memo_key, pod.priority, _own_group(state, pod) if pod.gang else (),
                    pod.key if pod.key in state.nominating else "")
    known = index.remembered_rules(memo_key)
    if known is not None:
        return known
    others = nominated_others(state, pod, ignore) if nominations.pods else []
    found = _derive_rules(index, pod, terms, namespace, labels, ignore, others)
    index.remember_rules(memo_key, found)
    return found


def _derive_rules(index: AffinityIndex, pod: PodInfo, terms: PodTerms, namespace: str,
                  labels: Mapping[str, str], ignore: frozenset[str], others: Sequence[PodInfo]) -> tuple[PodRule, ...]:
    rules: list[PodRule] = []
    state = index.state
    excluded: dict[str, set[str]] = {}
    if index.anti:
        for group in index.groups_for(labels):
            term = group.term
            if term.selects(namespace, labels):
                values = index.group_values(group, ignore)
                if values:
                    excluded.setdefault(term.topology_key, set()).update(values)
    for other in others:  # a nominated pod's anti-affinity selecting the pod keeps it off that node's domains
        if has_terms(other.obj):
            for term in index.terms(other).anti:
                if term.selects(namespace, labels):
                    value = _value(state, other.nominated_on, term.topology_key)
                    if value is not None:
                        excluded.setdefault(term.topology_key, set()).add(value)
    rules.extend(PodRule(key, frozenset(values), False, EXISTING_ANTI_AFFINITY)
                 for key, values in sorted(excluded.items()))
    if terms.anti:
        apart: dict[str, set[str]] = {}
        for term in terms.anti:
            values = index.selected_values(term, ignore)
            if values:
                apart.setdefault(term.topology_key, set()).update(values)
            for other in others:
                if term.selects(other.namespace, other.obj.metadata.labels):
                    value = _value(state, other.nominated_on, term.topology_key)
                    if value is not None:
                        apart.setdefault(term.topology_key, set()).add(value)
        rules.extend(PodRule(key, frozenset(values), False, ANTI_AFFINITY) for key, values in sorted(apart.items()))
    if terms.affinity:
        rules.extend(_affinity_rules(index, pod, terms.affinity, ignore, others))
    return tuple(rules)


def _affinity_rules(index: AffinityIndex, pod: PodInfo, together: tuple[Term, ...],
                    ignore: frozenset[str], others: Sequence[PodInfo]) -> list[PodRule]:
    found = index.matching_all(together, ignore)
    keys = sorted({term.topology_key for term in together})
    if found is not None:
        return [PodRule(key, found[key], True, AFFINITY) for key in keys]
    # No placed pod matches them all: the first of a series goes on any node with every key, when it
    # matches its own terms; a gang's pod also when a pod of its plan may (`plan_violation` decides).
    if pod.gang or matches_all(together, pod.namespace, pod.obj.metadata.labels):
        # But a nominated pod matching them all is one kube-scheduler counts: then only its domains pass both
        # of its filter runs (with the nominated pods, where the series has begun; without them, anywhere).
        nominated = _nominated_matches(index.state, together, others)
        if nominated is not None:
            return [PodRule(key, nominated[key], True, AFFINITY) for key in keys]
        return [PodRule(key, None, True, AFFINITY) for key in keys]
    return [PodRule(key, frozenset(), True, AFFINITY) for key in keys]


def _nominated_matches(state: ClusterState, together: tuple[Term, ...],
                       others: Sequence[PodInfo]) -> dict[str, frozenset[str]] | None:
    """`AffinityIndex.matching_all` of the nominated pods `others`, on the nodes they are nominated to."""
    found: dict[str, set[str]] = {term.topology_key: set() for term in together}
    any_match = False
    for other in others:
        if not matches_all(together, other.namespace, other.obj.metadata.labels):
            continue
        for term in together:
            value = _value(state, other.nominated_on, term.topology_key)
            if value is not None:
                any_match = True
                found[term.topology_key].add(value)
    return {key: frozenset(values) for key, values in found.items()} if any_match else None


def self_exclusion(state: ClusterState, pod: PodInfo) -> tuple[str, ...]:
    """The per-node tokens of `pod`'s anti-affinity terms over kubernetes.io/hostname that select the pod
    itself (one pod per node of those that carry an equal term), as `placement.fit.Shape.host_ports`
    names them."""
    if not has_terms(pod.obj):
        return ()
    index = affinity_index(state)
    namespace, labels = pod.namespace, pod.obj.metadata.labels
    return tuple(sorted({token for term, token in index.host_tokens(index.terms(pod))
                         if term.selects(namespace, labels)}))


_encoder = msgspec.msgpack.Encoder(order="deterministic")


def gather_level(state: ClusterState, levels: Mapping[str, int], pods: Iterable[str]) -> tuple[int, str]:
    """The deepest level (`levels`: a topology key -> its level in the tree planned on) that an affinity
    term of one of `pods` selecting its own pod names, and words for it; (0, "") when none does."""
    index = affinity_index(state)
    best, source = 0, ""
    seen: set[int] = set()
    for key in pods:
        pod = state.pods.get(key)
        if pod is None or not has_terms(pod.obj):
            continue
        terms = index.terms(pod)
        if id(terms) in seen:
            continue
        seen.add(id(terms))
        for term in terms.affinity:
            level = levels.get(term.topology_key)
            if level is not None and level > best and term.selects(pod.namespace, pod.obj.metadata.labels):
                best, source = level, f"required podAffinity (topologyKey {term.topology_key})"
    return best, source


def plan_violation(state: ClusterState, assignments: Sequence[tuple[str, str]],
                   ignore: frozenset[str] = _NOBODY) -> str:
    """"" when the pods of one plan (`assignments`: pod, node) keep every required term among themselves
    (the module docstring); else why the first that does not, does not. Their terms against the pods
    placed now are their shapes' rules, which the planner kept; pods in `ignore` count as gone, as
    they did for those rules."""
    pods = state.pods
    index = affinity_index(state)
    carriers = [(pods[key], node) for key, node in assignments if key in pods and has_terms(pods[key].obj)]
    if not carriers:
        return ""
    members = [(pods[key], node) for key, node in assignments if key in pods]
    nodes = state.nodes

    def value(node: str, key: str) -> str | None:
        info = nodes.get(node)
        return info.labels.get(key) if info is not None else None

    occupancy: dict[bytes, dict[str, int]] = {}
    for pod, node in carriers:
        for term in index.terms(pod).anti:
            group = _encoder.encode(term)
            counts = occupancy.get(group)
            if counts is None:
                counts = occupancy[group] = {}
                for other, other_node in members:
                    if term.selects(other.namespace, other.obj.metadata.labels):
                        there = value(other_node, term.topology_key)
                        if there is not None:
                            counts[there] = counts.get(there, 0) + 1
            here = value(node, term.topology_key)
            if here is None:
                continue
            others = counts.get(here, 0) - (1 if term.selects(pod.namespace, pod.obj.metadata.labels) else 0)
            if others > 0:
                return (f"pod {pod.key}: required podAntiAffinity (topologyKey {term.topology_key}): the plan would "
                        f"put it in {term.topology_key}={here} with another of its pods that the term selects")
    series: dict[bytes, tuple[list[tuple[PodInfo, str]], dict[str, set[str | None]], bool]] = {}

    def may_start(other: PodInfo) -> bool:
        """Whether `other` passes its own affinity before any other pod of the plan is placed: it has none,
        placed pods satisfy it, or it matches its own terms (the first of a series)."""
        if not has_terms(other.obj):
            return True
        own = index.terms(other).affinity
        return (not own or index.matching_all(own, ignore) is not None
                or matches_all(own, other.namespace, other.obj.metadata.labels))

    for pod, node in carriers:
        together = index.terms(pod).affinity
        if not together or index.matching_all(together, ignore) is not None:
            continue  # placed pods satisfy it: its shape's rules kept it next to them
        group = _encoder.encode(together)
        found = series.get(group)
        if found is None:  # the plan's pods its terms select, where they go, and whether one may go first
            partners = [(other, other_node) for other, other_node in members
                        if matches_all(together, other.namespace, other.obj.metadata.labels)]
            found = series[group] = (partners, {term.topology_key: {value(other_node, term.topology_key)
                                                                     for _, other_node in partners}
                                                for term in together},
                                     any(may_start(other) for other, _ in partners))
        partners, where, startable = found
        if not any(other is not pod for other, _ in partners):
            if partners:
                continue  # the first of its series, selected by its own terms alone
            keys = ", ".join(sorted(where))
            return (f"pod {pod.key}: required podAffinity (topologyKey {keys}): no pod its terms select runs or "
                    f"is placed with it")
        if not startable:
            # kube-scheduler places one pod at a time: the first of them would find none of the others.
            keys = ", ".join(sorted(where))
            return (f"pod {pod.key}: required podAffinity (topologyKey {keys}): no pod its terms select runs, and "
                    f"each of the plan's pods they select needs another placed before it")
        for key, values in sorted(where.items()):
            here = value(node, key)
            if here is None or values != {here}:
                apart = next((other for other, other_node in partners if value(other_node, key) != here), None)
                if apart is None:
                    return (f"pod {pod.key}: required podAffinity (topologyKey {key}): its node has no {key} label")
                return (f"pod {pod.key}: required podAffinity (topologyKey {key}): no pod its terms select runs "
                        f"yet, so all of them must share one {key}; the plan would put it in {key}={here} and pod "
                        f"{apart.key} elsewhere")
    return ""


def placed_violation(state: ClusterState, pod: PodInfo, node: str) -> str:
    """Why `pod`, placed on `node`, breaks a required term next to the other pods placed now, in
    kube-scheduler's words ("" when it keeps them all): the check of a plan adopted after a restart,
    whose pods are placed already (so each is left out of its own count)."""
    index = affinity_index(state)
    info = state.nodes.get(node)
    if info is None:
        return ""
    here = info.labels
    me, namespace, labels = pod.key, pod.namespace, pod.obj.metadata.labels
    pods = state.pods

    def shares(other_node: str, key: str) -> bool:
        value = here.get(key)
        return value is not None and _value(state, other_node, key) == value

    for group in index.groups_for(labels):
        term = group.term
        if term.selects(namespace, labels) and any(
                owner != me and shares(owner_node, term.topology_key) for owner, owner_node in group.owners.items()):
            return EXISTING_ANTI_AFFINITY
    terms = index.terms(pod) if has_terms(pod.obj) else NO_TERMS
    for term in terms.anti:
        for key in index.candidates(term):
            other = pods.get(key)
            if (key != me and other is not None and term.selects(other.namespace, other.obj.metadata.labels)
                    and shares(index.placed_on[key], term.topology_key)):
                return ANTI_AFFINITY
    together = terms.affinity
    if not together:
        return ""
    if any(term.topology_key not in here for term in together):
        return AFFINITY
    partners = [index.placed_on[key] for key in min((index.candidates(term) for term in together), key=len)
                if key != me and (other := pods.get(key)) is not None
                and matches_all(together, other.namespace, other.obj.metadata.labels)]
    if not any(_value(state, partner, term.topology_key) is not None for partner in partners for term in together):
        return "" if matches_all(together, namespace, labels) else AFFINITY  # the first of its series
    if all(any(shares(partner, term.topology_key) for partner in partners) for term in together):
        return ""
    return AFFINITY

