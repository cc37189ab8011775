"""Kubernetes resource quantities: parsing, and the canonical form the API server stores.

A real API server decodes every `resource.Quantity` of a built-in kind (container requests and
limits, a node's capacity and allocatable, ...) and encodes it back in canonical form, so that what
a client reads is never what it wrote but what apimachinery's `Quantity.String()` makes of it:

- The number may be written as a JSON number (`nvidia.com/gpu: 8`) or a string (`"8"`).
- The suffix picks the format: none or `n u m k M G T P E` is DecimalSI, `Ki Mi Gi Ti Pi Ei` is
  BinarySI, `e<n>` / `E<n>` is DecimalExponent.
- Precision below nano is rounded up to the next nano unit.
- Canonical DecimalSI/DecimalExponent: trailing zeros move into the exponent, the exponent goes
  down to a multiple of 3 and picks the suffix: `1000` -> `1k`, `1.5` -> `1500m`, `0.1` -> `100m`,
  `12e2` -> `1200`.
- Canonical BinarySI: the value in the largest power of 1024 that divides it (`2048Mi` -> `2Gi`);
  a value under 1024 in magnitude, or not a whole number, is written DecimalSI instead
  (`0.5Gi` -> `512Mi`, `1.5Ki` -> `1536`, `0.5Ki` -> `512`).
- Zero is `0`.

A string that is not a quantity is refused with apimachinery's own words (`quantities must match
the regular expression ...`, `unable to parse quantity's suffix`).

Pure: no I/O, nothing of ours imported.
"""

from __future__ import annotations

import re
from fractions import Fraction

QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR = f"quantities must match the regular expression '{QUANTITY_PATTERN}'"
SUFFIX_ERROR = "unable to parse quantity's suffix"

_NUMBER = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?$")
_SHAPE = re.compile(QUANTITY_PATTERN)
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {0: "", **{exponent: suffix for suffix, exponent in _BINARY_SUFFIXES.items()}}
_NANO = Fraction(1, 10**9)
_CACHE: dict[str, str] = {}  # text -> canonical text; quantities repeat endlessly in a cluster
_VALUES: dict[str, Fraction] = {}  # text -> value, for the same reason

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"


class QuantityError(ValueError):
    """Not a quantity; the message is apimachinery's."""


def _split(text: str) -> tuple[str, str]:
    """(number, suffix) of a quantity string, as apimachinery's parseQuantityString cuts it."""
    end = 0
    if end < len(text) and text[end] in "+-":
        end += 1
    while end < len(text) and (text[end].isdigit() or text[end] == "."):
        end += 1
    return text[:end], text[end:]


def parse(raw: str | int | float) -> tuple[Fraction, str]:
    """The exact value and the format of a quantity (a string, or a JSON number as a client sends it)."""
    if isinstance(raw, bool):
        raise QuantityError(FORMAT_ERROR)
    if isinstance(raw, int):
        return Fraction(raw), DECIMAL_SI
    if isinstance(raw, float):
        if raw != raw or raw in (float("inf"), float("-inf")):
            raise QuantityError(FORMAT_ERROR)
        raw = repr(raw)  # the shortest text that reads back as this float, e.g. 0.1 -> "0.1", 1e+20 -> "1e+20"
    text = raw.strip() if isinstance(raw, str) else ""
    if not text or not _SHAPE.match(text):
        raise QuantityError(FORMAT_ERROR)
    number, suffix = _split(text)
    match = _NUMBER.match(number)
    if match is None or not (match.group(2) or match.group(3)):
        raise QuantityError(FORMAT_ERROR)
    sign, whole, fraction = match.group(1), match.group(2) or "0", match.group(3) or ""
    value = Fraction(int(whole + fraction), 10 ** len(fraction))
    if sign == "-":
        value = -value
    if suffix in _DECIMAL_SUFFIXES:
        value *= Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
        form = DECIMAL_SI
    elif suffix in _BINARY_SUFFIXES:
        value *= 2 ** _BINARY_SUFFIXES[suffix]
        form = BINARY_SI
    else:
        exponent = _EXPONENT.match(suffix)
        if exponent is None:
            raise QuantityError(SUFFIX_ERROR)
        value *= Fraction(10) ** int(exponent.group(1))
        form = DECIMAL_EXPONENT
    if value.denominator != 1 and (value / _NANO).denominator != 1:
        # More precise than nano: apimachinery rounds up (away from zero) to the next nano.
        nanos = value / _NANO
        rounded = -((-nanos.numerator) // nanos.denominator) if value > 0 else nanos.numerator // nanos.denominator
        value = rounded * _NANO
    return value, form


def _decimal(value: Fraction) -> tuple[int, int]:
    """(mantissa, exponent) with the exponent a multiple of 3 and no trailing zeros beyond that."""
    exponent = 0
    while value.denominator != 1:
        value *= 10
        exponent -= 1
    mantissa = int(value)
    while mantissa and mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return mantissa, exponent


def format_value(value: Fraction, form: str) -> str:
    """`Quantity.String()` of this value in this format."""
    if value == 0:
        return "0"
    if form == BINARY_SI and (abs(value) < 1024 or value.denominator != 1):
        form = DECIMAL_SI
    if form == BINARY_SI:
        amount, exponent = int(value), 0
        while amount % 1024 == 0 and exponent < 60:
            amount //= 1024
            exponent += 10
        return f"{amount}{_BINARY_BY_EXPONENT[exponent]}"
    mantissa, exponent = _decimal(value)
    if form == DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    if exponent > 18:  # beyond exa there is no suffix: scale the number instead
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


def canonical(raw: str | int | float) -> str:
    """The canonical string of a quantity; QuantityError if it is not one."""
    key = raw if isinstance(raw, str) else None
    if key is not None:
        found = _CACHE.get(key)
        if found is not None:
            return found
    value, form = parse(raw)
    text = format_value(value, form)
    if key is not None and len(_CACHE) < 50_000:
        _CACHE[key] = text
    return text


def value_of(raw: str | int | float) -> Fraction:
    """The exact value of a quantity; QuantityError if it is not one."""
    if isinstance(raw, str):
        found = _VALUES.get(raw)
        if found is None:
            found = parse(raw)[0]
            if len(_VALUES) < 50_000:
                _VALUES[raw] = found
        return found
    return parse(raw)[0]
