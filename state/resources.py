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
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, Context, Decimal

Resources = dict[str, int]

MILLI = 1000
# Kubernetes caps a quantity at 2^63-1 units ("numbers larger ... will be capped"); so do we, for the
# exponent form too, so that no request or allocatable is ever larger than this many milli-units.
MAX_UNITS = 2**63 - 1
MAX_MILLI = MAX_UNITS * MILLI

_DECIMAL_SUFFIX: dict[str, int] = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
                                   "E": 18}
_BINARY_SUFFIX: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# resource.Quantity's grammar, as the API server's parser reads it: a sign, digits with an optional
# point (either side may be empty: "5.", ".5", even "." and "Ki" mean 0 there), then a decimal SI or
# binary SI suffix, or an exponent `e`/`E` followed by a signed int64.
_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)")
_INT64_DIGITS = 19
_LOG10_2 = 0.30102999566398120  # log10(2), for a bound on 2^k's number of digits


class QuantityError(ValueError):
    """A quantity string that Kubernetes would reject."""


def parse_quantity(text: str) -> int:
    """Parse a Kubernetes quantity into milli-units: rounded up as Kubernetes does, capped at `MAX_MILLI`.

    Every string the API server accepts is read (any length, any exponent) in time linear in its
    length: the value's magnitude is bounded from its digits before any arithmetic is done, so
    `1e999999999` costs no more than `1e9`.
    """
    cached = QUANTITY_CACHE.get(text)
    if cached is not None:
        return cached
    milli = _parse(text)
    if len(QUANTITY_CACHE) < 100_000 and len(text) <= 64:  # a hostile object's megabyte of digits is not kept
        QUANTITY_CACHE[text] = milli
    return milli


def _parse(text: str) -> int:
    match = _QUANTITY.fullmatch(text) if text else None  # no whitespace either, as the API server
    if match is None:
        raise QuantityError(f"{_shown(text)} is not a Kubernetes quantity (e.g. '500m', '8', '64Gi', '1e3')")
    sign, whole, fraction, exponent, suffix = match.groups()
    whole = whole.lstrip("0")
    fraction = (fraction or "").rstrip("0")
    power_of_two = 0
    if exponent is not None:
        digits = exponent.lstrip("+-").lstrip("0") or "0"
        power_of_ten = 0 if len(digits) > _INT64_DIGITS else int(digits)  # int() of a long string is refused
        if exponent.startswith("-"):
            power_of_ten = -power_of_ten
        if len(digits) > _INT64_DIGITS or not -(2**63) <= power_of_ten <= MAX_UNITS:
            raise QuantityError(f"{_shown(text)}: the exponent is not a 64-bit integer (as Kubernetes requires)")
    elif suffix in _BINARY_SUFFIX:
        power_of_ten, power_of_two = 0, _BINARY_SUFFIX[suffix]
    else:
        power_of_ten = _DECIMAL_SUFFIX[suffix or ""]
    if not whole and not fraction:
        return 0
    if sign == "-":
        raise QuantityError(f"{_shown(text)} is negative")
    # The value in milli-units lies in [10^low, 10^(low + 2)): `low` is the place of its most
    # significant digit, plus the whole powers of ten in the binary suffix (2^k < 10^(int(k log10 2) + 1)).
    leading = len(whole) - 1 if whole else -(len(fraction) - len(fraction.lstrip("0"))) - 1
    low = leading + power_of_ten + 3 + int(power_of_two * _LOG10_2)
    if low >= 22:  # 10^22 > MAX_MILLI
        return MAX_MILLI
    if low + 2 <= 0:  # below one milli-unit and not zero: rounds up to 1m
        return 1
    # Here the exponent is bounded by the digits' length: exact decimal arithmetic, then the ceiling.
    context = Context(prec=len(whole) + len(fraction) + 60, Emax=MAX_EMAX, Emin=MIN_EMIN)
    value = context.scaleb(Decimal(f"{whole or 0}.{fraction or 0}"), power_of_ten + 3)
    if power_of_two:
        value = context.multiply(value, Decimal(2**power_of_two))
    milli = int(value.to_integral_value(rounding=ROUND_CEILING, context=context))
    return min(milli, MAX_MILLI)


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 64 else f"{text[:60]!r}... ({len(text)} characters)"


QUANTITY_CACHE: dict[str, int] = {}  # read directly by the fold's hot path (state/cluster.py)


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


# A host port a pod holds on its node (kube-scheduler's NodePorts), as a resource of the pod's requests
# vector: one unit per pod holding it, and room for one holder on every node (no node lists it in its
# allocatable; `port_room` gives it). The colon keeps the name apart from every resource name the API
# server accepts (a qualified name has none). The host IP is not part of it: two pods holding one port
# on two different host IPs of a node count as a conflict (conservative: never two on one address).
HOST_PORT_PREFIX = "hostport:"


def host_port_resource(protocol: str, port: int) -> str:
    """The resource name of host port `port` of `protocol` (the API server's default: TCP)."""
    return f"{HOST_PORT_PREFIX}{protocol or 'TCP'}/{port}"


def is_host_port(name: str) -> bool:
    return name.startswith(HOST_PORT_PREFIX)


def port_room(free: Mapping[str, int], name: str) -> int:
    """What a free vector (allocatable - used - ...) leaves of resource `name`: for a host port, the room
    for one holder (MILLI) less the holders there."""
    have = free.get(name, 0)
    return have + MILLI if name.startswith(HOST_PORT_PREFIX) else have


# The "protocol" of the per-node tokens that keep one pod per node among pods whose required
# podAntiAffinity over kubernetes.io/hostname selects one another (placement/pod_affinity.py).
SELF_EXCLUSION_PROTOCOL = "pod-anti-affinity"
# The "protocol" of the per-node token of pods waiting for a volume made in advance: one per node in a plan
# (placement/fit.py `shape_of`).
STATIC_VOLUME_PROTOCOL = "static-volume"


def shown_host_port(name: str) -> str:
    """`hostport:TCP/29500` as a user reads it: "host port 29500/TCP"."""
    protocol, _, port = name[len(HOST_PORT_PREFIX):].partition("/")
    if protocol == SELF_EXCLUSION_PROTOCOL:
        return "one pod per node (required podAntiAffinity over kubernetes.io/hostname)"
    if protocol == STATIC_VOLUME_PROTOCOL:
        return "one pod per node of a plan waiting for a PersistentVolume made in advance"
    return f"host port {port}/{protocol}"


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


def summed(vectors: Iterable[Mapping[str, int]]) -> Resources:
    total: Resources = {}
    for vector in vectors:
        add_into(total, vector)
    return total
