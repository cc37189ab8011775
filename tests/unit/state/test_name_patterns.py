"""HyperNode regexMatch patterns mean what they mean in Volcano (Go's regexp: RE2) and match in linear time."""

from __future__ import annotations

import pytest

from state.name_patterns import PatternError, compile_pattern


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
