"""HyperNode rules: each object on its own, the set as a whole, the last good set, the forest in use."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from events.objects import (
    ExactMatch,
    HyperNode,
    HyperNodeMember,
    HyperNodeSpec,
    LabelSelector,
    LabelSelectorRequirement,
    MemberSelector,
    ObjectMeta,
    RegexMatch,
)
from state.gangs import Problem
from state.hypernodes import HyperNodeSet, check_hypernode, resolve_hypernodes, validate_hypernodes
from tests.unit.state.test_topology_validation import only


def member(kind: str, *, exact: str | None = None, regex: str | None = None,
           labels: dict[str, str] | None = None) -> HyperNodeMember:
    return HyperNodeMember(type=kind, selector=MemberSelector(
        exact_match=ExactMatch(name=exact) if exact is not None else None,
        regex_match=RegexMatch(pattern=regex) if regex is not None else None,
        label_match=LabelSelector(match_labels=labels) if labels is not None else None))


def hn(name: str, tier: int, *members: HyperNodeMember, tier_name: str = "") -> HyperNode:
    return HyperNode(metadata=ObjectMeta(name=name),
                     spec=HyperNodeSpec(tier=tier, tier_name=tier_name, members=list(members)))


def resolve(*hypernodes: HyperNode) -> tuple[dict[str, str], list[str], list[Problem]]:
    """(parents, HyperNodes in use, problems) with no history."""
    graph, problems = resolve_hypernodes({h.metadata.name: check_hypernode(h) for h in hypernodes})
    return graph.parent, sorted(graph.tiers), problems


# --------------------------------------------------------------------------- one object


def test_valid_hypernodes_have_no_problems_and_one_parent_each() -> None:
    parents, used, problems = resolve(hn("b1", 1, member("Node", regex="^n1"), tier_name="block"),
                                      hn("s1", 2, member("HyperNode", exact="b1"), tier_name="spine"))
    assert problems == []
    assert parents == {"b1": "s1"} and used == ["b1", "s1"]


def test_a_member_with_two_selectors_or_none_makes_the_hypernode_invalid() -> None:
    both = only(validate_hypernodes([hn("h", 1, member("Node", exact="n", regex="n.*"))]))
    assert both.field == "spec.members[0].selector"
    assert both.message == ("exactly one of exactMatch, regexMatch, labelMatch must be set, but exactMatch and "
                            "regexMatch are set together; the HyperNode is left out of the tree")
    none = only(validate_hypernodes([hn("h", 1, member("Node"))]))
    assert "none is set" in none.message


def test_an_invalid_regex_is_reported_with_re2s_reason() -> None:
    problem = only(validate_hypernodes([hn("h", 1, member("Node", exact="n1"), member("Node", regex="gpu-(["))]))
    assert str(problem) == ("HyperNode h: spec.members[1].selector.regexMatch.pattern: 'gpu-([' is not a valid RE2 "
                            "regular expression (missing ]: [); the HyperNode is left out of the tree")


def test_regex_or_label_match_on_a_hypernode_member_is_rejected() -> None:
    regex = only(validate_hypernodes([hn("h", 2, member("HyperNode", regex="b.*"))]))
    assert regex.field == "spec.members[0].selector.regexMatch"
    assert "only allowed for members of type Node" in regex.message
    labels = only(validate_hypernodes([hn("h", 2, member("HyperNode", labels={"a": "b"}))]))
    assert labels.field == "spec.members[0].selector.labelMatch"


def test_tier_below_one_and_unknown_member_type_are_rejected() -> None:
    assert "below 1" in only(validate_hypernodes([hn("h", 0)])).message
    assert "is not Node or HyperNode" in only(validate_hypernodes([hn("h", 1, member("Pod", exact="x"))])).message


def test_an_unusable_label_selector_is_rejected_field_by_field() -> None:
    bad = HyperNodeMember(type="Node", selector=MemberSelector(label_match=LabelSelector(
        match_expressions=[LabelSelectorRequirement(key="a", operator="Near"),
                           LabelSelectorRequirement(key="b", operator="In"),
                           LabelSelectorRequirement(key="c", operator="Exists", values=["x"]),
                           LabelSelectorRequirement(key="bad key", operator="Exists")])))
    problems = validate_hypernodes([hn("h", 1, bad)])
    assert [(p.field, p.message.split(";")[0]) for p in problems] == [
        ("spec.members[0].selector.labelMatch.matchExpressions[0].operator",
         "'Near' is not In, NotIn, Exists or DoesNotExist"),
        ("spec.members[0].selector.labelMatch.matchExpressions[1].values", "must not be empty for operator In"),
        ("spec.members[0].selector.labelMatch.matchExpressions[2].values", "must be empty for operator Exists"),
        ("spec.members[0].selector.labelMatch.matchExpressions[3].key",
         "'bad key' is not a valid label key (name part: at most 63 characters, alphanumerics, '-', '_', '.', "
         "starting and ending alphanumeric)"),
    ]
    assert "would match every node" in only(validate_hypernodes([hn("h", 1, member("Node", labels={}))])).message


# --------------------------------------------------------------------------- the set


def test_a_member_hypernode_that_does_not_exist_is_ignored_and_its_parent_kept() -> None:
    _, used, problems = resolve(hn("top", 2, member("HyperNode", exact="ghost")))
    problem = only(problems)
    assert problem.key == "top" and problem.field == "spec.members[0].selector.exactMatch.name"
    assert problem.message == "member HyperNode 'ghost' does not exist; member ignored"
    assert used == ["top"]


def test_every_hypernode_on_a_cycle_is_invalid_and_left_out() -> None:
    parents, used, problems = resolve(hn("a", 2, member("Node", exact="n1"), member("HyperNode", exact="b")),
                                      hn("b", 1, member("Node", exact="n2"), member("HyperNode", exact="a")),
                                      hn("c", 1, member("Node", exact="n3")))
    cycle = "HyperNode membership forms a cycle a -> b -> a; the HyperNode is left out of the tree"
    assert [(p.key, p.field, p.message) for p in problems] == [
        ("a", "spec.members[1]", cycle), ("b", "spec.members[1]", cycle)]
    assert used == ["c"] and parents == {}


def test_a_hypernode_listing_itself_is_a_cycle() -> None:
    problem = only(validate_hypernodes([hn("a", 2, member("HyperNode", exact="a"))]))
    assert problem.field == "spec.members[0]" and "forms a cycle a -> a" in problem.message


def test_a_member_whose_tier_is_not_below_makes_the_lister_invalid_not_the_member() -> None:
    _, used, problems = resolve(hn("a", 1, member("HyperNode", exact="b")), hn("b", 1, member("Node", exact="n")))
    problem = only(problems)
    assert problem.key == "a" and problem.field == "spec.members[0]"
    assert problem.message == ("member HyperNode 'b' has tier 1, not below 'a''s tier 1 (tiers grow upward); "
                               "the HyperNode is left out of the tree")
    assert used == ["b"]


def test_a_parent_of_a_left_out_hypernode_ignores_that_member() -> None:
    parents, used, problems = resolve(hn("s", 2, member("HyperNode", exact="bad"), member("HyperNode", exact="ok")),
                                      hn("bad", 1, member("Node", regex="(")), hn("ok", 1, member("Node", exact="n")))
    assert [(p.key, p.message) for p in problems if p.key == "s"] == [
        ("s", "member HyperNode 'bad' is invalid and left out of the tree; member ignored")]
    assert used == ["ok", "s"] and parents == {"ok": "s"}


def test_a_hypernode_claimed_by_two_parents_stays_under_the_lowest_tier_then_first_name() -> None:
    parents, _, problems = resolve(hn("b", 1, member("Node", exact="n")), hn("z", 2, member("HyperNode", exact="b")),
                                   hn("a", 3, member("HyperNode", exact="b")))
    assert parents == {"b": "z"}
    assert "'b' is claimed by z, a; it stays under 'z'" in only(problems).message


def test_conflicting_tier_names_for_one_tier_are_reported() -> None:
    problem = only(validate_hypernodes([hn("a", 1, tier_name="block"), hn("b", 1, tier_name="rack")]))
    assert problem.field == "spec.tierName" and "using 'block'" in problem.message


def test_hypernodes_describe_the_network_only_when_one_in_use_has_a_usable_member() -> None:
    def describes(*hypernodes: HyperNode) -> bool:
        return resolve_hypernodes({h.metadata.name: check_hypernode(h) for h in hypernodes})[0].describes

    assert not describes(hn("bad", 1, member("Node", regex="(")))
    assert not describes(hn("a", 1, member("HyperNode", exact="b")), hn("b", 1, member("HyperNode", exact="a")))
    assert not describes(hn("top", 2, member("HyperNode", exact="bad")), hn("bad", 1, member("Node", regex="(")))
    assert describes(hn("top", 2, member("HyperNode", exact="ok")), hn("ok", 1))  # an empty tier 1 is still a layer
    assert describes(hn("ok", 1, member("Node", exact="n-that-does-not-exist-yet")))


def test_a_chain_of_thousands_of_hypernodes_is_resolved_without_recursion() -> None:
    chain = [hn(f"h{i:05d}", 5000 - i, member("HyperNode", exact=f"h{i + 1:05d}")) for i in range(4999)]
    chain.append(hn("h04999", 1, member("Node", exact="n")))
    cyclic = [*chain[:-1], hn("h04999", 1, member("HyperNode", exact="h00000"))]
    assert validate_hypernodes(chain) == []
    assert len(validate_hypernodes(cyclic)) == 5000  # every HyperNode on the cycle


# --------------------------------------------------------------------------- history: the last good set


def in_use(hypernodes: HyperNodeSet) -> dict[str, int]:
    return resolve_problems_and_tiers(hypernodes)[0]


def resolve_problems_and_tiers(hypernodes: HyperNodeSet) -> tuple[dict[str, int], list[Problem]]:
    graph, problems = hypernodes.resolve()
    return dict(graph.tiers), problems


def test_an_invalid_update_keeps_the_version_from_the_last_good_set() -> None:
    hypernodes = HyperNodeSet()
    hypernodes.upsert(hn("b", 1, member("Node", regex="^gpu-0")))
    hypernodes.upsert(hn("s", 2, member("HyperNode", exact="b")))
    assert hypernodes.good
    hypernodes.upsert(hn("b", 1, member("Node", regex="^gpu-(")))
    assert not hypernodes.good
    graph, problems = hypernodes.resolve()
    assert graph.tiers == {"b": 1, "s": 2} and graph.parent == {"b": "s"}
    assert [rule.pattern.pattern for rule in graph.node_rules["b"] if rule.pattern] == ["^gpu-0"]
    assert only(problems).message.endswith("; the HyperNode's version from the last good set stays in use")
    hypernodes.upsert(hn("b", 1, member("Node", regex="^gpu-1")))  # fixed: the new version is used
    assert hypernodes.good
    assert [rule.pattern.pattern for rule in hypernodes.resolve()[0].node_rules["b"] if rule.pattern] == ["^gpu-1"]


def test_a_cycle_made_by_editing_a_good_set_keeps_the_good_versions() -> None:
    hypernodes = HyperNodeSet()
    hypernodes.upsert(hn("b", 1, member("Node", exact="n")))
    hypernodes.upsert(hn("s", 2, member("HyperNode", exact="b")))
    hypernodes.upsert(hn("b", 3, member("HyperNode", exact="s")))  # now s -> b -> s
    graph, problems = hypernodes.resolve()
    assert graph.tiers == {"b": 1, "s": 2} and graph.parent == {"b": "s"}
    assert {p.key for p in problems} == {"b", "s"}


def test_a_new_invalid_hypernode_that_was_never_good_is_left_out_while_the_others_stay() -> None:
    hypernodes = HyperNodeSet()
    hypernodes.upsert(hn("b", 1, member("Node", exact="n")))
    hypernodes.upsert(hn("new", 1, member("Node", regex="(")))
    assert in_use(hypernodes) == {"b": 1}
    hypernodes.upsert(hn("b2", 1, member("Node", exact="m")))  # a valid change still applies while one is bad
    assert in_use(hypernodes) == {"b": 1, "b2": 1}


def test_a_set_with_a_missing_member_is_not_recorded_as_good() -> None:
    # s0 alone (its member s1 not created yet) is valid but not a good set; when s1 arrives closing
    # a cycle, s0 has no good version to fall back to: both are left out.
    hypernodes = HyperNodeSet()
    hypernodes.upsert(hn("s0", 2, member("Node", exact="n0"), member("HyperNode", exact="s1")))
    assert not hypernodes.good
    hypernodes.upsert(hn("s1", 1, member("Node", exact="n1"), member("HyperNode", exact="s0")))
    graph, _ = hypernodes.resolve()
    assert graph.tiers == {} and not graph.describes


def test_a_deleted_hypernode_is_gone_even_if_it_was_in_the_last_good_set() -> None:
    hypernodes = HyperNodeSet()
    hypernodes.upsert(hn("a", 1, member("Node", exact="n")))
    hypernodes.upsert(hn("b", 1, member("Node", exact="m")))
    hypernodes.upsert(hn("a", 0))  # invalid: a's good version stays
    hypernodes.delete("b")
    assert in_use(hypernodes) == {"a": 1}


NAMES = ["a", "b", "c", "d"]
operations = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(NAMES), st.integers(0, 3),
              st.lists(st.sampled_from(NAMES), max_size=3), st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just(0), st.just([]), st.just(False)),
), max_size=25)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_set_is_judged_good_exactly_when_a_from_scratch_check_says_so(
        steps: list[tuple[str, str, int, list[str], bool]]) -> None:
    hypernodes = HyperNodeSet()
    current: dict[str, HyperNode] = {}
    for action, name, tier, children, broken in steps:
        if action == "upsert":
            members = [member("HyperNode", exact=c) for c in children]
            if broken:
                members.append(member("Node", regex="("))
            obj = hn(name, tier, *members)
            hypernodes.upsert(obj)
            current[name] = obj
        else:
            hypernodes.delete(name)
            current.pop(name, None)
        checks = {n: check_hypernode(h) for n, h in current.items()}
        expected = all(not c.problems for c in checks.values()) and all(
            child in checks and checks[child].tier < check.tier
            for check in checks.values() for _, child in check.children)
        assert hypernodes.good == expected
        if expected:  # a good set is used exactly as written, whatever happened before
            graph, problems = hypernodes.resolve()
            assert sorted(graph.tiers) == sorted(current)
            assert all("is claimed by" in p.message or "is named" in p.message for p in problems)
