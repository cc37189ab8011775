"""A GangGroup's topology wishes, resolved against the cluster's topology tree.

Koordinator's `gatherStrategy` and Volcano's `networkTopology` say the same things in two
vocabularies; here both become level indices of `state/topology.py`'s tree (0 = cluster root):
- `top_level`: the highest level the job may span. MustGather at layer L and Volcano hard mode
  with highestTierAllowed / highestTierName both set it to L's level; with several MustGather
  rules (or several gangs of one GangGroup) the tightest wins. PreferGather, soft mode and "no
  spec at all" leave it at the root: the search is lowest-layer-first anyway, so a job is always
  as tight as free capacity allows and soft never means spread.
- `multiples`: per gang, level -> podCountMultiple (values above 1 only).
A MustGather or hard limit naming a layer the cluster does not have cannot be honoured: it is
reported as `invalid` (a PreferGather / soft wish on an unknown layer is only a wish and is dropped).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from placement.plan import HARD_TIER, MUST_GATHER
from state.gangs import MUST_GATHER as MUST_GATHER_STRATEGY
from state.gangs import GangSpec, TierLimit
from state.topology import TopologyError, TopologyTree


class Constraints(msgspec.Struct, frozen=True):
    top_level: int = 0
    kind: str = ""  # MUST_GATHER | HARD_TIER when top_level comes from a rule, else ""
    source: str = ""  # human words for the rule that set top_level
    multiples: dict[str, dict[int, int]] = {}


class InvalidConstraint(msgspec.Struct, frozen=True):
    gang: str
    message: str


def tier_level(tree: TopologyTree, limit: TierLimit) -> int | None:
    """The level a Volcano tier limit names (None when it names none); raises TopologyError."""
    if limit.highest_tier is not None:
        return tree.resolve_level(limit.highest_tier)
    if limit.highest_tier_name:
        return tree.resolve_level(limit.highest_tier_name)
    return None


def resolve(tree: TopologyTree, specs: Sequence[GangSpec]) -> Constraints | InvalidConstraint:
    top_level = 0
    kind = source = ""
    multiples: dict[str, dict[int, int]] = {}
    for spec in specs:
        for rule in spec.gather:
            try:
                level = tree.resolve_level(rule.layer)
            except TopologyError as error:
                if rule.strategy == MUST_GATHER_STRATEGY:
                    return InvalidConstraint(spec.key, f"MustGather layer {rule.layer!r}: {error.message}")
                continue
            if rule.pod_count_multiple > 1:
                multiples.setdefault(spec.key, {})[level] = rule.pod_count_multiple
            if rule.strategy == MUST_GATHER_STRATEGY and level > top_level:
                top_level, kind = level, MUST_GATHER
                source = f"MustGather at {tree.levels[level].layer}"
        limit = spec.tier_limit
        if limit is not None and limit.mode == "hard":
            try:
                level_or_none = tier_level(tree, limit)
            except TopologyError as error:
                return InvalidConstraint(spec.key, f"networkTopology highest tier: {error.message}")
            if level_or_none is not None and level_or_none > top_level:
                top_level, kind = level_or_none, HARD_TIER
                chosen = tree.levels[level_or_none]
                source = f"hard tier limit {chosen.tier} ({chosen.layer})"
    return Constraints(top_level=top_level, kind=kind, source=source, multiples=multiples)
