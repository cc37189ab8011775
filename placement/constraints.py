"""A GangGroup's topology wishes, resolved against the cluster's topology tree.

Koordinator's `gatherStrategy` and Volcano's `networkTopology` say the same things in two
vocabularies; here both become level indices of `state/topology.py`'s tree (0 = cluster root):
- `top_level`: the highest level the job may span. MustGather at layer L and Volcano hard mode
  with highestTierAllowed / highestTierName both set it to L's level; with several MustGather
  rules (or several gangs of one GangGroup) the tightest wins. PreferGather, soft mode and "no
  spec at all" leave it at the root: the search is lowest-layer-first anyway, so a job is always
  as tight as free capacity allows and soft never means spread.
- `multiples`: per gang, level -> podCountMultiple (values above 1 only).
- Kubernetes' `schedulingConstraints.topology[].key` (a node label) is a required domain: every pod
  on nodes sharing one value of the label. When a layer of the tree is built from exactly that
  label, it sets `top_level` like a MustGather there. When none is (HyperNodes, other labels, a
  label the topology does not use), the gang is planned on `state.label_trees[key]` instead, a tree
  whose only layer is that label's values (`planning_tree`): the same search, bin-packing and
  preemption run on it, and nodes without the label are never used. The finer layers of the
  cluster's own tree are not seen there; the node layer still is (`placement/gather.py`).
- KAI's `requiredTopologyLevel` (a node label key, or a KAI level alias) is its gang's topology key,
  read as Kubernetes' (`state/kai_gangs.py`): a layer whose KAI alias it is counts as built from it;
  its preferredTopologyLevel is only a wish.
A MustGather or hard limit naming a layer the cluster does not have cannot be honoured: it is
reported as `invalid` (a PreferGather / soft wish on an unknown layer is only a wish and is dropped).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from placement.plan import HARD_TIER, MUST_GATHER
from state.cluster import ClusterState
from state.composites import LABEL_PATH_SEPARATOR, key_path
from state.gangs import MUST_GATHER as MUST_GATHER_STRATEGY
from state.gangs import GangSpec, TierLimit
from state.kai_gangs import shown
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


def key_level(tree: TopologyTree, label_key: str) -> int | None:
    """The level of `tree` built from exactly the node label `label_key`, or whose KAI alias it is (None when
    none is)."""
    return next((level.index for level in tree.levels
                 if level.label_keys == (label_key,) or (level.alias and level.alias == label_key)), None)


def layer_of_key(tree: TopologyTree, label_key: str) -> int | None:
    """`key_level`, else the level of a layer read from several keys, `label_key` among them (as topograph's
    accelerator label or nvidia.com/gpu.clique): a CompositePodGroup hierarchy's keys resolve so."""
    found = key_level(tree, label_key)
    if found is not None:
        return found
    return next((level.index for level in tree.levels[1:] if label_key in level.label_keys), None)


def planning_tree(state: ClusterState, specs: Sequence[GangSpec]) -> TopologyTree:
    """The tree a GangGroup is planned on: the cluster's, unless a gang's topology key is not one of its
    layers (then that key's label tree; see the module docstring); a CompositePodGroup hierarchy's, unless one
    of its keys is not a layer (then the label tree of its keys, `state.composites.key_path`)."""
    tree = state.topology
    composite = specs[0].composite if specs else None
    if composite is not None:
        keys = key_path(composite)
        if all(layer_of_key(tree, key) is not None for key in keys):
            return tree
        return state.label_trees.get(LABEL_PATH_SEPARATOR.join(keys), tree)
    for spec in specs:
        if spec.topology_key and key_level(tree, spec.topology_key) is None:
            return state.label_trees.get(spec.topology_key, tree)
    return tree


def resolve(tree: TopologyTree, specs: Sequence[GangSpec]) -> Constraints | InvalidConstraint:
    top_level = 0
    kind = source = ""
    multiples: dict[str, dict[int, int]] = {}
    for spec in specs:
        if spec.kai is not None and spec.kai.required and not spec.topology_key:  # not a label key at all
            return InvalidConstraint(spec.key, f"KAI requiredTopologyLevel {shown(spec.kai.required)}: is not a node "
                                     "label key or level alias")
        if spec.topology_key:
            level_of_key = key_level(tree, spec.topology_key)
            if level_of_key is not None and level_of_key > top_level:
                top_level, kind = level_of_key, MUST_GATHER
                # A KAI level is a free string of an untrusted PodGroup (a Kubernetes key is a checked label key).
                named = (f"KAI requiredTopologyLevel {shown(spec.topology_key)}" if spec.kai is not None
                         else f"topology key {spec.topology_key}")
                source = f"{named} ({tree.levels[level_of_key].layer})"
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
                named = (f"highestTierAllowed {limit.highest_tier}" if limit.highest_tier is not None
                         else f"highestTierName {limit.highest_tier_name!r}")
                return InvalidConstraint(spec.key, f"networkTopology {named}: {error.message}")
            if level_or_none is not None and level_or_none > top_level:
                top_level, kind = level_or_none, HARD_TIER
                chosen = tree.levels[level_or_none]
                source = f"hard tier limit {chosen.tier} ({chosen.layer})"
    return Constraints(top_level=top_level, kind=kind, source=source, multiples=multiples)
