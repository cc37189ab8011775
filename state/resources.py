"""Resource quantities and resource vectors.

Kubernetes quantities ("500m", "8", "100Gi", "1.5") are parsed once into integers of milli-units,
so that every resource (cpu, memory, pods, nvidia.com/gpu, ...) is compared and summed with integer
arithmetic and no rounding drift. A resource vector is a plain `dict[str, int]` of milli-units;
absent means zero.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction

Resources = dict[str, int]

MILLI = 1000

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")

QUANTITY_CACHE: dict[str, int] = {}  # read directly by the fold's hot path (state/cluster.py)


class QuantityError(ValueError):
    """A quantity string that Kubernetes would reject."""


def parse_quantity(text: str) -> int:
    """Parse a Kubernetes quantity into milli-units, rounding up as Kubernetes does."""
    cached = QUANTITY_CACHE.get(text)
    if cached is not None:
        return cached
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity (e.g. '500m', '8', '64Gi')")
    number, suffix = match.group(1), match.group(2) or ""
    if number.count(".") > 1:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity (e.g. '500m', '8', '64Gi')")
    try:
        value = Fraction(Decimal(number)) * _SUFFIX[suffix] * MILLI
    except (InvalidOperation, ValueError) as error:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity: {error}") from None
    if value < 0:
        raise QuantityError(f"{text!r} is negative")
    milli = -((-value.numerator) // value.denominator)  # ceil
    if len(QUANTITY_CACHE) < 100_000:
        QUANTITY_CACHE[text] = milli
    return milli


def format_quantity(resource: str, milli: int) -> str:
    """Render milli-units the way a user writes them for this resource."""
    if resource == "memory" or resource.startswith("hugepages-") or resource == "ephemeral-storage":
        whole = milli // MILLI
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if whole >= size and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    if milli % MILLI == 0:
        return str(milli // MILLI)
    return f"{milli}m"


def add_into(target: Resources, delta: Mapping[str, int], sign: int = 1) -> None:
    for name, amount in delta.items():
        target[name] = target.get(name, 0) + sign * amount


def subtract(total: Mapping[str, int], used: Mapping[str, int]) -> Resources:
    free = dict(total)
    for name, amount in used.items():
        free[name] = free.get(name, 0) - amount
    return free


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(amount <= free.get(name, 0) for name, amount in request.items() if amount > 0)


def how_many_fit(request: Mapping[str, int], free: Mapping[str, int]) -> int:
    """How many copies of `request` fit in `free` (a large number when the request is empty)."""
    best = 1 << 30
    for name, amount in request.items():
        if amount > 0:
            have = free.get(name, 0)
            if have < amount:
                return 0
            count = have // amount
            if count < best:
                best = count
    return best


def summed(vectors: Iterable[Mapping[str, int]]) -> Resources:
    total: Resources = {}
    for vector in vectors:
        add_into(total, vector)
    return total
