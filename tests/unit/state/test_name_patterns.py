"""HyperNode regexMatch patterns mean what they mean in Volcano (Go's regexp: RE2) and match in linear time."""

from __future__ import annotations

import pytest
import re2
from hypothesis import given
from hypothesis import strategies as st

from state.name_patterns import SET_MAX_MEM, NamePattern, NamePatternSet, PatternError, compile_pattern


def test_a_pattern_is_searched_anywhere_in_the_name_as_gos_match_string_does() -> None:
    pattern = compile_pattern("gpu-1")
    assert pattern.search("gpu-1") and pattern.search("gpu-10") and pattern.search("rack-gpu-1")
    assert not pattern.search("gpu-2")
    anchored = compile_pattern("^gpu-1$")
    assert anchored.search("gpu-1") and not anchored.search("gpu-10")


def test_dollar_is_the_end_of_the_name_not_before_a_trailing_newline() -> None:
    # Python's re lets `$` match before a final "\n"; RE2 and Go do not.
    assert not compile_pattern("^gpu-1$").search("gpu-1\n")


def test_nested_quantifiers_take_linear_time_on_a_name_that_almost_matches() -> None:
    # A backtracking engine explores 2^40 ways to split the a's before giving up; RE2 scans once.
    assert not compile_pattern("^(a+)+$").search("a" * 40 + "-b")
    assert compile_pattern("^(a+)+$").search("a" * 40)


@pytest.mark.parametrize(("pattern", "reason"), [
    ("(a)\\1", "invalid escape sequence: \\1"),  # backreference: Python accepts it, RE2 and Go do not
    ("gpu-(?=1)", "invalid perl operator: (?="),  # lookahead
    ("gpu-\\Z", "invalid escape sequence: \\Z"),
    ("gpu-([", "missing ]: ["),
    ("a{1001}", "invalid repetition size: {1001}"),
    ("gpu-\\C", "invalid escape sequence: \\C"),  # RE2 accepts \C (any byte); Go does not
    ("", "is empty"),
])
def test_patterns_re2_or_go_reject_are_rejected_with_the_reason(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as raised:
        compile_pattern(pattern)
    assert reason in raised.value.message
    assert raised.value.pattern == pattern


def test_escaped_backslash_and_quoted_text_are_not_mistaken_for_the_any_byte_escape() -> None:
    assert compile_pattern("gpu\\\\C").search("gpu\\C")
    assert compile_pattern("\\Qa\\C\\E$").search("xa\\C")


def test_a_name_that_is_not_valid_unicode_text_does_not_break_matching() -> None:
    assert not compile_pattern("^gpu$").search("gpu\ud800")
    assert compile_pattern("gpu").search("gpu\ud800")


# --------------------------------------------------------------------------- many patterns at once

NAMES = ["gpu-1", "gpu-10", "gpu-2", "rack-gpu-1", "a" * 40 + "-b", "", "gpu-1\n", "x\ud800"]
PATTERNS = ["gpu-1", "^gpu-1$", "^(a+)+$", "^gpu-[0-9]+$", "rack", "^$", "-b$", "\\pN"]


def one_by_one(patterns: list[NamePattern], name: str) -> list[int]:
    return [index for index, pattern in enumerate(patterns) if pattern.search(name)]


@given(st.lists(st.sampled_from(PATTERNS), max_size=6), st.lists(st.sampled_from(NAMES), max_size=6),
       st.sampled_from([SET_MAX_MEM, 4096, 1024]))
def test_a_set_finds_exactly_the_patterns_that_match_one_by_one(chosen: list[str], names: list[str],
                                                               max_mem: int) -> None:
    patterns = [compile_pattern(p) for p in chosen]
    together = NamePatternSet(patterns, max_mem=max_mem)  # small budgets split the set, down to one by one
    for name in names:
        assert together.matching(name) == one_by_one(patterns, name)


def test_a_thousand_patterns_are_one_set_and_each_name_finds_its_own() -> None:
    patterns = [compile_pattern(f"^gpu-{i:04d}-[0-7]$") for i in range(1250)]
    together = NamePatternSet(patterns)
    assert together.matching("gpu-0012-3") == [12]
    assert together.matching("gpu-0012-8") == []
    assert together.fallbacks == 0


class GivingUp:
    """Stands in for an RE2 Set whose DFA ran out of memory: RE2 then reports no match at all."""

    def Add(self, pattern: bytes) -> int:
        return 0

    def Compile(self) -> None:
        return None

    def Match(self, text: bytes) -> list[int] | None:
        return None


def test_when_the_set_gives_up_the_names_are_matched_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(re2.Set, "SearchSet", lambda options: GivingUp())
    patterns = [compile_pattern("gpu-1"), compile_pattern("^gpu-2$")]
    together = NamePatternSet(patterns)
    assert together.matching("gpu-10") == [0]
    assert together.matching("gpu-2") == [1]
    assert together.fallbacks == 2
