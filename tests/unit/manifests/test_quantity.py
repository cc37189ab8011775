"""Quantities are stored the way apimachinery's Quantity.String() writes them, whatever the client sent."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manifests.quantity import FORMAT_ERROR, SUFFIX_ERROR, QuantityError, canonical, value_of


@pytest.mark.parametrize(("written", "stored"), [
    ("8", "8"), (8, "8"), (8.0, "8"), ("+8", "8"), (" 8 ", "8"), ("08", "8"),
    ("1000", "1k"), ("1500", "1500"), ("1.5", "1500m"), (0.5, "500m"), ("0.1", "100m"), (".5", "500m"), ("5.", "5"),
    ("100M", "100M"), ("1000E", "1000E"), ("250u", "250u"), ("0", "0"), ("0Gi", "0"), ("0.0000000001", "1n"),
    ("1.0000000001", "1000000001n"),
    ("64Gi", "64Gi"), ("2048Mi", "2Gi"), ("0.5Gi", "512Mi"), ("1.5Ki", "1536"), ("0.5Ki", "512"),
    ("1024Ki", "1Mi"), ("1.1Mi", "1153433600m"), ("562.5Ki", "576000"), ("576000", "576k"),
    ("1e3", "1e3"), ("1E3", "1e3"), ("12e2", "1200"), ("1e-3", "1e-3"), (1e20, "100e18"),
])
def test_quantity_is_stored_in_canonical_form(written: str | int | float, stored: str) -> None:
    assert canonical(written) == stored


@pytest.mark.parametrize(("written", "message"), [
    ("8 GPUs", FORMAT_ERROR), ("", FORMAT_ERROR), ("abc", FORMAT_ERROR), ("1..2", FORMAT_ERROR), ("-", FORMAT_ERROR),
    ("1e", SUFFIX_ERROR), ("1Kk", SUFFIX_ERROR), (True, FORMAT_ERROR), (float("nan"), FORMAT_ERROR),
])
def test_what_is_not_a_quantity_is_refused_in_apimachinerys_words(written: str | float, message: str) -> None:
    with pytest.raises(QuantityError) as refused:
        canonical(written)
    assert str(refused.value) == message


_SUFFIXES = ["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-2"]


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=4), st.sampled_from(_SUFFIXES))
def test_canonical_form_keeps_the_value_and_is_a_fixed_point(digits: int, scale: int, suffix: str) -> None:
    text = f"{digits // 10**scale}.{digits % 10**scale:0{scale}d}{suffix}" if scale else f"{digits}{suffix}"
    stored = canonical(text)
    # apimachinery keeps the binary format of "562.5Ki" but writes it without a suffix ("576000", no
    # power of 1024 divides it), which reads back as decimal and is written "576k" on the next store:
    # the second store is the fixed point.
    restored = canonical(stored)
    assert canonical(restored) == restored
    assert stored == restored or (suffix.endswith("i") and stored.isdigit())
    assert value_of(stored) == value_of(text) or value_of(text).denominator > 10**9


def test_value_of_reads_exact_fractions() -> None:
    assert value_of("1500m") == Fraction(3, 2)
    assert value_of("64Gi") == 64 * 2**30
