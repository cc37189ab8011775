"""Volcano HyperNodes: each checked, the set judged as a whole, and the forest the tree is built from.

A bad HyperNode must never cost the cluster its good tree, so these are the rules (the README's
"When some HyperNodes are invalid" says the same to users):

1. A HyperNode is *invalid* when one of its own fields is (tier below 1; a member whose type is
   not Node or HyperNode, that does not set exactly one selector, that uses regexMatch or
   labelMatch for a HyperNode member, whose exactMatch name is empty, whose regex RE2 or Go
   rejects, whose label selector is unusable (`state/label_selectors.py`)); when a member
   HyperNode's tier is not below its own; or when it is on a membership cycle (every HyperNode of
   the cycle is). Every cycle contains a member whose tier is not below its parent's, since tiers
   would have to fall all the way round.
2. An invalid HyperNode is never used as written: the tree uses its version from the *last good
   set* (the HyperNodes as they were the last time every one of them was valid and every member
   HyperNode existed) when it was in that set, and otherwise leaves it out. Valid HyperNodes are
   used as written. A member HyperNode that does not exist (not created yet, or deleted) or that
   is left out is ignored; so is a member whose tier, in the versions in use, is not below its
   parent's (possible only when an old version meets a new one). What remains is a forest.
3. A HyperNode claimed by two parents stays under the parent of the lowest tier (then first by
   name); a node claimed by two HyperNodes is resolved by `state/topology.py`.
4. The HyperNodes *describe* the network (and so take precedence over node labels) only when at
   least one HyperNode in use has a member it can use: a Node selector, or a member HyperNode in
   use. One invalid HyperNode, or a cycle, added to a cluster described by labels changes nothing
   but the problems reported.

Every problem names the object and the field, and says what was done about it. The last good set
is history, judged as the objects are folded (so replaying the same events gives the same tree):
a restarted daemon, or `toposched validate`, knows only the objects as they are now.

Pure: no I/O, no clock, no logging.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from events.objects import HyperNode, LabelSelector
from state.gangs import Problem
from state.label_selectors import selector_problems, selects
from state.name_patterns import NamePattern, PatternError, compile_pattern

HYPERNODE_KIND = "HyperNode"
MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"

LAST_GOOD_STAYS = "the HyperNode's version from the last good set stays in use"
LEFT_OUT = "the HyperNode is left out of the tree"


@dataclass(frozen=True)
class NodeSelectorRule:
    """One usable Node member of a HyperNode: exactly one of name, pattern, labels."""

    name: str = ""
    pattern: NamePattern | None = None
    labels: LabelSelector | None = None

    def matches(self, node: str, labels: Mapping[str, str]) -> bool:
        if self.pattern is not None:
            return self.pattern.search(node)  # Go's regexp.MatchString: unanchored, RE2 semantics
        if self.labels is not None:
            return selects(self.labels, labels)
        return node == self.name


@dataclass(frozen=True)
class HyperNodeCheck:
    """One HyperNode as written, checked on its own (rule 1 without the cross-object parts)."""

    name: str
    tier: int
    tier_name: str
    node_rules: tuple[NodeSelectorRule, ...]
    children: tuple[tuple[int, str], ...]  # (member index, HyperNode name) of its well-formed HyperNode members
    problems: tuple[Problem, ...]  # what is wrong, without what is done about it


@dataclass
class HyperNodeGraph:
    """The HyperNodes in use: a forest whose tiers strictly decrease downwards."""

    tiers: dict[str, int] = field(default_factory=dict)
    tier_names: dict[str, str] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)  # child HyperNode -> the parent it stays under
    node_rules: dict[str, tuple[NodeSelectorRule, ...]] = field(default_factory=dict)
    describes: bool = False  # rule 4: the HyperNodes take precedence over node labels


def check_hypernode(hn: HyperNode) -> HyperNodeCheck:
    name = hn.metadata.name
    problems: list[Problem] = []

    def report(where: str, message: str) -> None:
        problems.append(Problem(HYPERNODE_KIND, name, where, message))

    if hn.spec.tier < 1:
        report("spec.tier", f"{hn.spec.tier} is below 1 (tiers count from 1 at the bottom)")
    rules: list[NodeSelectorRule] = []
    children: list[tuple[int, str]] = []
    for index, member in enumerate(hn.spec.members):
        where = f"spec.members[{index}].selector"
        selector = member.selector
        exact, regex, labels = selector.exact_match, selector.regex_match, selector.label_match
        if member.type not in (MEMBER_NODE, MEMBER_HYPERNODE):
            report(f"spec.members[{index}].type", f"{member.type!r} is not Node or HyperNode")
            continue
        given = [n for n, on in (("exactMatch", exact), ("regexMatch", regex), ("labelMatch", labels)) if on]
        if len(given) != 1:
            what = "none is set" if not given else f"{' and '.join(given)} are set together"
            report(where, f"exactly one of exactMatch, regexMatch, labelMatch must be set, but {what}")
            continue
        if member.type == MEMBER_HYPERNODE and exact is None:
            report(f"{where}.{given[0]}", f"{given[0]} is only allowed for members of type Node; "
                   "a HyperNode member must use exactMatch")
            continue
        if exact is not None:
            if not exact.name:
                report(f"{where}.exactMatch.name", "is empty")
            elif member.type == MEMBER_HYPERNODE:
                children.append((index, exact.name))
            else:
                rules.append(NodeSelectorRule(name=exact.name))
        elif regex is not None:
            try:
                rules.append(NodeSelectorRule(pattern=compile_pattern(regex.pattern)))
            except PatternError as error:
                report(f"{where}.regexMatch.pattern",
                       f"{regex.pattern!r} is not a valid RE2 regular expression ({error.message})")
        elif labels is not None:
            found = selector_problems(labels)
            for inner, message in found:
                report(f"{where}.labelMatch.{inner}", message)
            if not found and not labels.match_labels and not labels.match_expressions:
                report(f"{where}.labelMatch", "is empty and would match every node")
            elif not found:
                rules.append(NodeSelectorRule(labels=labels))
    return HyperNodeCheck(name, hn.spec.tier, hn.spec.tier_name, tuple(rules), tuple(children), tuple(problems))


# --------------------------------------------------------------------------- the set as a whole


def resolve_hypernodes(current: Mapping[str, HyperNodeCheck],
                       last_good: Mapping[str, HyperNodeCheck] | None = None
                       ) -> tuple[HyperNodeGraph, list[Problem]]:
    """Rules 1-4 over the HyperNodes as they are now: the forest in use and every problem found."""
    names = sorted(current)
    reasons: dict[str, list[Problem]] = {name: list(current[name].problems) for name in names}
    edges = {name: [child for _, child in current[name].children if child in current] for name in names}
    component_of: dict[str, int] = {}
    for number, component in enumerate(_cycles(edges)):
        members = set(component)
        path = " -> ".join(_cycle_path(min(component), edges, members))
        for name in component:
            component_of[name] = number
            index = next(i for i, child in current[name].children if child in members)
            reasons[name].append(Problem(HYPERNODE_KIND, name, f"spec.members[{index}]",
                                         f"HyperNode membership forms a cycle {path}"))
    for name in names:
        check = current[name]
        for index, child in check.children:
            other = current.get(child)
            if other is None or (name in component_of and component_of[name] == component_of.get(child)):
                continue  # missing members are ignored below; a cycle is reported once, above
            if check.tier >= 1 and other.tier >= check.tier:
                reasons[name].append(Problem(
                    HYPERNODE_KIND, name, f"spec.members[{index}]",
                    f"member HyperNode {child!r} has tier {other.tier}, not below {name!r}'s tier {check.tier} "
                    "(tiers grow upward)"))
    problems: list[Problem] = []
    used: dict[str, HyperNodeCheck] = {}
    for name in names:
        if not reasons[name]:
            used[name] = current[name]
            continue
        previous = (last_good or {}).get(name)
        if previous is not None:
            used[name] = previous
        else:  # the forest below sees only what is in use: name this one's missing members here
            reasons[name] += [Problem(HYPERNODE_KIND, name, f"spec.members[{index}].selector.exactMatch.name",
                                      f"member HyperNode {child!r} does not exist")
                              for index, child in current[name].children if child not in current]
        consequence = LEFT_OUT if previous is None else LAST_GOOD_STAYS
        problems += [Problem(p.kind, p.key, p.field, f"{p.message}; {consequence}") for p in reasons[name]]
    graph, forest_problems = _forest(used, current)
    return graph, problems + forest_problems


def _forest(used: Mapping[str, HyperNodeCheck], current: Mapping[str, HyperNodeCheck]
            ) -> tuple[HyperNodeGraph, list[Problem]]:
    """Rules 2-4 over the versions in use."""
    graph = HyperNodeGraph()
    problems: list[Problem] = []
    for name in sorted(used):
        check = used[name]
        graph.tiers[name] = check.tier
        graph.tier_names[name] = check.tier_name
        graph.node_rules[name] = check.node_rules
    claims: dict[str, list[str]] = {}
    for name in sorted(used):
        check = used[name]
        for index, child in check.children:
            if child not in used:
                problems.append(Problem(
                    HYPERNODE_KIND, name, f"spec.members[{index}].selector.exactMatch.name",
                    f"member HyperNode {child!r} is invalid and left out of the tree; member ignored"
                    if child in current else f"member HyperNode {child!r} does not exist; member ignored"))
                continue
            if used[child].tier >= check.tier:
                problems.append(Problem(
                    HYPERNODE_KIND, name, f"spec.members[{index}]",
                    f"member HyperNode {child!r} has tier {used[child].tier} in the version in use, not below "
                    f"{name!r}'s tier {check.tier}; member ignored"))
                continue
            claims.setdefault(child, []).append(name)
    for child, parents in sorted(claims.items()):
        unique = sorted(set(parents), key=lambda p: (graph.tiers[p], p))
        graph.parent[child] = unique[0]
        if len(unique) > 1:
            problems.append(Problem(HYPERNODE_KIND, unique[1], "spec.members",
                                    f"HyperNode {child!r} is claimed by {', '.join(unique)}; it stays under "
                                    f"{unique[0]!r} (lowest tier, then first by name) and is ignored elsewhere"))
    graph.describes = any(check.node_rules for check in used.values()) or bool(claims)
    by_tier: dict[int, set[str]] = {}
    for name, tier in graph.tiers.items():
        if graph.tier_names[name]:
            by_tier.setdefault(tier, set()).add(graph.tier_names[name])
    for tier, tier_names in sorted(by_tier.items()):
        if len(tier_names) > 1:
            chosen = sorted(tier_names)[0]
            first = sorted(n for n, t in graph.tiers.items() if t == tier and graph.tier_names[n] != chosen)[0]
            problems.append(Problem(HYPERNODE_KIND, first, "spec.tierName",
                                    f"tier {tier} is named {', '.join(sorted(tier_names))} by different HyperNodes; "
                                    f"using {chosen!r}"))
    return graph, problems


def _cycles(edges: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The strongly connected components that hold a cycle (Tarjan's algorithm, iterative: a chain
    of thousands of HyperNodes must not exhaust Python's recursion limit)."""
    index_of: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index_of:
            continue
        index_of[root] = low[root] = len(index_of)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(edges[root]))]
        while work:
            node, children = work[-1]
            descended = False
            for child in children:
                if child not in index_of:
                    index_of[child] = low[child] = len(index_of)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                    descended = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index_of[child])
            if descended:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index_of[node]:
                component: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    found.append(sorted(component))
    return found


def _cycle_path(start: str, edges: Mapping[str, Sequence[str]], members: set[str]) -> list[str]:
    """A shortest cycle through `start` inside its component, as names from `start` back to it."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(set(edges[node])):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child in members and child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return [start, start]  # unreachable for a member of a cyclic component


# --------------------------------------------------------------------------- the fold's view


class HyperNodeSet:
    """The HyperNodes folded so far, whether they form a good set, and the last good set.

    A set is good when every HyperNode is valid on its own, every member HyperNode exists and has a
    lower tier (which rules out cycles). That is judged at every fold call from counters kept
    up to date per member entry, so folding n HyperNodes costs O(n + members), and the last good set
    is copied only when a good set turns bad.
    """

    def __init__(self) -> None:
        self._objects: dict[str, HyperNode] = {}
        self._checks: dict[str, HyperNodeCheck] = {}
        self._parents: dict[str, dict[str, int]] = {}  # member HyperNode -> {HyperNode listing it: entries}
        self._invalid_objects = 0  # HyperNodes with a problem of their own
        self._inverted = 0  # member entries whose HyperNode exists with a tier not below the lister's
        self._missing = 0  # member entries naming a HyperNode that does not exist
        self._last_good: dict[str, HyperNodeCheck] | None = None  # None while the current set is good
        self._resolved: tuple[HyperNodeGraph, list[Problem]] | None = None

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, name: object) -> bool:
        return name in self._objects

    def names(self) -> list[str]:
        return sorted(self._objects)

    @property
    def good(self) -> bool:
        return self._invalid_objects == 0 and self._inverted == 0 and self._missing == 0

    def upsert(self, hn: HyperNode) -> bool:
        """Fold one HyperNode; True when its spec changed (a status write does not change the tree)."""
        name = hn.metadata.name
        known = self._objects.get(name)
        self._objects[name] = hn
        if known is not None and known.spec == hn.spec:
            return False
        self._change(name, self._checks.get(name), check_hypernode(hn))
        return True

    def delete(self, name: str) -> bool:
        if self._objects.pop(name, None) is None:
            return False
        self._change(name, self._checks.get(name), None)
        return True

    def resolve(self) -> tuple[HyperNodeGraph, list[Problem]]:
        """The forest in use and the problems, recomputed only after a spec changed."""
        if self._resolved is None:
            self._resolved = resolve_hypernodes(self._checks, self._last_good)
        return self._resolved

    def _change(self, name: str, old: HyperNodeCheck | None, new: HyperNodeCheck | None) -> None:
        was_good = self.good
        self._resolved = None
        checks = self._checks
        if old is not None:
            self._count_entries(old, -1)
            self._invalid_objects -= bool(old.problems)
        listers = [(p, n) for p, n in self._parents.get(name, {}).items() if p != name]
        for lister, entries in listers:  # entries naming this HyperNode, as it was
            self._count_entry(checks[lister].tier, old, -entries)
        if new is None:
            del checks[name]
        else:
            checks[name] = new
            self._invalid_objects += bool(new.problems)
        for lister, entries in listers:  # ... and as it is
            self._count_entry(checks[lister].tier, new, entries)
        if new is not None:
            self._count_entries(new, 1)
        if self.good:
            self._last_good = None
        elif was_good:  # the set as it was just before this change is the last good one
            previous = dict(checks)
            if old is None:
                del previous[name]
            else:
                previous[name] = old
            self._last_good = previous

    def _count_entries(self, check: HyperNodeCheck, sign: int) -> None:
        """Add (or remove) the member entries `check` lists to the counters and the lister index."""
        for _, child in check.children:
            self._count_entry(check.tier, self._checks.get(child), sign)
            listers = self._parents.setdefault(child, {})
            listers[check.name] = listers.get(check.name, 0) + sign
            if listers[check.name] == 0:
                del listers[check.name]
                if not listers:
                    del self._parents[child]

    def _count_entry(self, lister_tier: int, member: HyperNodeCheck | None, sign: int) -> None:
        if member is None:
            self._missing += sign
        elif member.tier >= lister_tier:
            self._inverted += sign


def validate_hypernodes(hypernodes: Iterable[HyperNode]) -> list[Problem]:
    """Every problem of these HyperNodes taken together, with no history (as `toposched validate` sees them)."""
    checks = {hn.metadata.name: check_hypernode(hn) for hn in hypernodes}
    return resolve_hypernodes(checks)[1]
