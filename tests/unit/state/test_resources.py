"""Kubernetes quantities: every string the API server accepts is read, exactly, capped, and fast.

The grammar is resource.Quantity's, as the API server's parser reads it: an optional sign, digits
with an optional point (either side may be empty), then a decimal SI suffix (n u m "" k M G T P E),
a binary SI suffix (Ki ... Ei) or an exponent (e/E and a signed 64-bit integer). Values are rounded
up to the milli-unit and capped at 2^63-1 units, as Kubernetes caps them.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from state.resources import MAX_MILLI, MAX_UNITS, QuantityError, parse_quantity

DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def expected_milli(whole: str, fraction: str, suffix: str) -> int:
    """The value by plain rational arithmetic (fine for the bounded strings generated here)."""
    number = Fraction(int(whole or "0")) + (Fraction(int(fraction), 10 ** len(fraction)) if fraction else 0)
    if suffix in BINARY:
        number *= 2 ** BINARY[suffix]
    elif suffix in DECIMAL:
        number *= Fraction(10) ** DECIMAL[suffix]
    else:
        number *= Fraction(10) ** int(suffix[1:])  # int() reads '+003' and '-003'
    milli = number * 1000
    return min(-((-milli.numerator) // milli.denominator), MAX_MILLI)


digits = st.text("0123456789", max_size=24)
@st.composite
def exponents(draw: st.DrawFn) -> str:
    exponent = draw(st.integers(-40, 40))
    sign = "-" if exponent < 0 else draw(st.sampled_from(["", "+"]))
    return f"{draw(st.sampled_from('eE'))}{sign}{'0' * draw(st.integers(0, 3))}{abs(exponent)}"


suffixes = st.one_of(st.sampled_from(sorted(DECIMAL) + sorted(BINARY)), exponents())


@st.composite
def quantities(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(text, whole digits, fraction digits, suffix) of a non-negative quantity the API server accepts."""
    whole = draw(digits)
    point = draw(st.booleans())
    fraction = draw(digits) if point else ""
    suffix = draw(suffixes)
    sign = draw(st.sampled_from(["", "+", "-"]))
    if sign == "-" and (whole.strip("0") or fraction.strip("0")):
        sign = ""  # negative quantities are their own test
    text = f"{sign}{whole}{'.' if point else ''}{fraction}{suffix}"
    return (text, whole, fraction, suffix) if text else ("0", "0", "", "")  # the empty string is refused


@given(quantities())
def test_every_accepted_quantity_is_read_exactly_rounded_up_and_capped(case: tuple[str, str, str, str]) -> None:
    text, whole, fraction, suffix = case
    assert parse_quantity(text) == expected_milli(whole, fraction, suffix)


@given(st.text(max_size=40))
def test_any_string_is_either_a_quantity_in_range_or_a_quantity_error(text: str) -> None:
    try:
        milli = parse_quantity(text)
    except QuantityError:
        return
    assert 0 <= milli <= MAX_MILLI


@given(st.text(st.characters(blacklist_characters="0123456789.+-eEinumkKMGTP"), min_size=1,
               max_size=8), st.sampled_from(["", "1", "1.5"]))
def test_a_character_outside_the_grammar_is_refused(junk: str, number: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(number + junk)


@given(st.integers(1, 10**30), st.sampled_from(["", "+"]))
def test_positive_exponent_form_of_an_integer_is_that_integer_capped(value: int, sign: str) -> None:
    mantissa, exponent = str(value).rstrip("0"), len(str(value)) - len(str(value).rstrip("0"))
    assert parse_quantity(f"{mantissa}e{sign}{exponent}") == min(value * 1000, MAX_MILLI)


@pytest.mark.parametrize(("text", "milli"), [
    ("500m", 500), ("8", 8000), ("64Gi", 64 * 2**30 * 1000), ("1.5", 1500), ("1.5Gi", 1536 * 2**20 * 1000),
    ("0.1m", 1),  # rounded up to the smallest amount, as Kubernetes does
    ("1n", 1), ("1e-3", 1), ("1E3", 1_000_000), ("1e+3", 1_000_000), ("1E", 10**18 * 1000),
    ("5.", 5000), (".5", 500), ("+2", 2000), ("-0", 0), ("0.000", 0),
    (".", 0), ("+", 0), ("Ki", 0),  # the API server's parser reads an empty number as 0
    ("1e18", 10**21),  # the GPU count: past 2^64 milli-units, below the cap
    ("20Pi", 20 * 2**50 * 1000),  # the memory request: past 2^64 milli-units
    ("9223372036854775807", MAX_MILLI),
    ("9223372036854775808", MAX_MILLI),  # capped at 2^63-1 units
    ("1" * 40, MAX_MILLI),  # the 40-digit cpu count
    ("1e999999999", MAX_MILLI), ("1e-999999999", 1), ("8Ei", MAX_MILLI),
    ("1e0000000000000000000000000000000003", 1_000_000),  # leading zeros in the exponent are fine
    ("0." + "0" * 5000 + "1e5001", 1000),  # long strings are read by magnitude, not converted whole
    ("1" + "0" * 10_000, MAX_MILLI),
])
def test_quantity_edge_cases(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("text", [
    "", " ", " 1", "1 ", "1\n", "abc", "1e", "1e+", "1.5.5", "1e3m", "1Ei3", "mi", "K", "1K", "1 Gi", "1e1.5", "0x10",
    "1_000", "--1", "\u0661",  # an Arabic-Indic digit is a digit to Python, not to the API server
    "1e99999999999999999999",  # the exponent must be a 64-bit integer
    "1e9223372036854775808",
])
def test_malformed_quantities_are_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("text", ["-1", "-0.5m", "-1Gi", "-1e3"])
def test_negative_quantities_are_refused(text: str) -> None:
    with pytest.raises(QuantityError, match="negative"):
        parse_quantity(text)


def test_the_cap_is_kubernetes_maximum_in_milli_units() -> None:
    assert MAX_UNITS == 2**63 - 1 and MAX_MILLI == MAX_UNITS * 1000
