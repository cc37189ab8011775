"""The admission rules for topology objects and the topology wishes of PodGroups.

Owns every check a user can get wrong when describing a network or asking for a placement:
ClusterNetworkTopology layer chains and the topology parts of Koordinator and Volcano PodGroups
(HyperNodes have their own module, `state/hypernodes.py`). Each rule yields a `Problem`
naming the object, the field and what is wrong (and, where the tree goes on anyway, how it was
resolved). The same functions serve `toposched validate` offline and the daemon's fold
(`state/topology.py` builds its tree from what survives here), so a manifest that validates cleanly
is exactly one the tree takes as written.

Rules of this module: pure (no I/O, no clock, no logging); never raises on bad input, it reports it.

How conflicts are resolved (the tree and the messages say the same thing):
- A ClusterNetworkTopology that is not one chain of layers (unknown parentTopologyLayer, two
  layers on one label key, a cycle, two children of one layer, a duplicated layer) is unusable as a
  whole: `resolve_cnt_layers` returns no layers and the tree keeps the last good structure.
- HyperNodes: see `state/hypernodes.py` (an invalid one is never used as written; the last good
  set stays).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from events.objects import (
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    ClusterNetworkTopology,
    PodGroup,
    VolcanoPodGroup,
)
from state.gangs import MUST_GATHER, PREFER_GATHER, Problem

CNT_KIND = "ClusterNetworkTopology"
POD_GROUP_KIND = "PodGroup"
NODE_KIND = "Node"

DEFAULT_CNT_NAME = "default"
NODE_LAYER = "NodeTopologyLayer"
CLUSTER_LAYER = "ClusterTopologyLayer"
CLUSTER_TIER_NAME = "cluster"


# --------------------------------------------------------------------------- layer chains


class LayerDef(msgspec.Struct, frozen=True):
    """One domain layer built from node labels (Koordinator layer or topograph label)."""

    name: str
    label_keys: tuple[str, ...]
    tier_name: str


def tier_name_of(layer: str, label_keys: Sequence[str]) -> str:
    """The Volcano-style tierName of a label layer: the label key's last segment (`.../block` -> `block`)."""
    if label_keys:
        return label_keys[0].rsplit("/", 1)[-1]
    base = layer[: -len("Layer")] if layer.endswith("Layer") and len(layer) > len("Layer") else layer
    return base.lower()


def layer_name_of(tier_name: str, tier: int) -> str:
    """The Koordinator-style layer name of a Volcano tier: `block` -> `BlockLayer`, no name -> `Tier2Layer`."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", tier_name) if w]
    if not words:
        return f"Tier{tier}Layer"
    return "".join(w[:1].upper() + w[1:] for w in words) + "Layer"


def resolve_cnt_layers(cnt: ClusterNetworkTopology) -> tuple[tuple[LayerDef, ...] | None, list[Problem]]:
    """The domain layers of a ClusterNetworkTopology, top first, or None when it is not one chain."""
    name = cnt.metadata.name
    problems: list[Problem] = []
    fatal = False

    def report(index: int, attr: str, message: str, *, is_fatal: bool = True) -> None:
        nonlocal fatal
        fatal = fatal or is_fatal
        problems.append(Problem(CNT_KIND, name, f"spec.networkTopologySpec[{index}].{attr}", message))

    spec = cnt.spec.network_topology_spec
    if not spec:
        problems.append(Problem(CNT_KIND, name, "spec.networkTopologySpec", "is empty: no layer is defined"))
        return None, problems
    by_name: dict[str, int] = {}
    label_owner: dict[str, str] = {}
    for index, layer in enumerate(spec):
        if not layer.topology_layer:
            report(index, "topologyLayer", "is empty")
            continue
        if layer.topology_layer == CLUSTER_LAYER:
            report(index, "topologyLayer", f"{CLUSTER_LAYER} is reserved for the cluster root and cannot be declared")
            continue
        if layer.topology_layer in by_name:
            report(index, "topologyLayer", f"{layer.topology_layer!r} is declared twice "
                   f"(first at spec.networkTopologySpec[{by_name[layer.topology_layer]}])")
            continue
        by_name[layer.topology_layer] = index
        if layer.topology_layer == NODE_LAYER:
            if layer.label_key:
                report(index, "labelKey", f"{NODE_LAYER} is the node itself and takes no labelKey; ignored",
                       is_fatal=False)
            continue
        if not layer.label_key:
            report(index, "labelKey", f"layer {layer.topology_layer!r} has no labelKey, so it cannot form domains")
        for key_index, key in enumerate(layer.label_key):
            owner = label_owner.get(key)
            if owner is not None and owner != layer.topology_layer:
                report(index, f"labelKey[{key_index}]", f"label {key!r} is already used by layer {owner!r}: "
                       "two layers cannot be built from one label")
            label_owner.setdefault(key, layer.topology_layer)
    # parents
    children: dict[str, list[str]] = {}
    tops: list[str] = []
    for layer_name, index in by_name.items():
        parent = spec[index].parent_topology_layer
        if parent in ("", CLUSTER_LAYER):
            if layer_name == NODE_LAYER:
                report(index, "parentTopologyLayer", f"{NODE_LAYER} needs a parentTopologyLayer "
                       "(the lowest domain layer)")
            else:
                tops.append(layer_name)
            continue
        if parent not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            report(index, "parentTopologyLayer", f"{parent!r} is not a layer of this ClusterNetworkTopology "
                   f"(known: {known})")
            continue
        if parent == NODE_LAYER:
            report(index, "parentTopologyLayer", f"{NODE_LAYER} is the bottom layer and cannot be a parent")
            continue
        if parent == layer_name:
            report(index, "parentTopologyLayer", f"layer {layer_name!r} names itself as parent (a cycle)")
            continue
        children.setdefault(parent, []).append(layer_name)
    for parent, kids in sorted(children.items()):
        domain_kids = [k for k in kids if k != NODE_LAYER]
        if len(domain_kids) > 1:
            report(by_name[sorted(domain_kids)[1]], "parentTopologyLayer",
                   f"layers {', '.join(sorted(domain_kids))} all name {parent!r} as parent: "
                   "the layers of a ClusterNetworkTopology form one chain")
    if len(tops) > 1:
        report(by_name[sorted(tops)[1]], "parentTopologyLayer",
               f"layers {', '.join(sorted(tops))} have no parentTopologyLayer: only the top layer may omit it")
    if fatal:
        return None, problems
    domain_layers = [n for n in by_name if n != NODE_LAYER]
    if not tops:
        first = min(by_name[n] for n in domain_layers) if domain_layers else 0
        report(first, "parentTopologyLayer", "every layer names a parent: the layers form a cycle")
        return None, problems
    chain: list[str] = []
    current: str | None = tops[0]
    while current is not None:
        chain.append(current)
        kids = [k for k in children.get(current, []) if k != NODE_LAYER]
        current = kids[0] if kids else None
    unreached = sorted(set(domain_layers) - set(chain))
    if unreached:
        report(by_name[unreached[0]], "parentTopologyLayer",
               f"layers {', '.join(unreached)} are not below the top layer {tops[0]!r}: their parents form a cycle")
        return None, problems
    if NODE_LAYER in by_name:
        node_index = by_name[NODE_LAYER]
        parent = spec[node_index].parent_topology_layer
        if parent and parent != chain[-1]:
            report(node_index, "parentTopologyLayer", f"{NODE_LAYER} must sit under the lowest layer "
                   f"{chain[-1]!r}, not {parent!r}")
            return None, problems
    layers = tuple(
        LayerDef(n, tuple(spec[by_name[n]].label_key), tier_name_of(n, spec[by_name[n]].label_key)) for n in chain
    )
    return layers, problems


def validate_network_topology(cnt: ClusterNetworkTopology) -> list[Problem]:
    problems = resolve_cnt_layers(cnt)[1]
    if cnt.metadata.name != DEFAULT_CNT_NAME:
        problems.append(Problem(CNT_KIND, cnt.metadata.name, "metadata.name",
                                f"only the ClusterNetworkTopology named {DEFAULT_CNT_NAME!r} is read; "
                                "this one is ignored"))
    return problems


# --------------------------------------------------------------------------- PodGroups


def validate_pod_group(group: PodGroup, known_layers: Iterable[str] | None = None) -> list[Problem]:
    """Koordinator PodGroup: minMember and the network-topology-spec annotation.

    `known_layers`: the layer names a gatherStrategy may name (from the cluster's topology); None
    skips the unknown-layer check (nothing is known about the cluster).
    """
    key = _key(group.metadata.namespace, group.metadata.name)
    problems: list[Problem] = []
    if group.spec.min_member < 0:
        problems.append(Problem(POD_GROUP_KIND, key, "spec.minMember", f"{group.spec.min_member} is negative"))
    elif group.spec.min_member == 0:
        problems.append(Problem(POD_GROUP_KIND, key, "spec.minMember", "is missing or 0: a gang needs at least 1"))
    timeout = group.spec.schedule_timeout_seconds
    if timeout is not None and timeout <= 0:
        problems.append(Problem(POD_GROUP_KIND, key, "spec.scheduleTimeoutSeconds", f"{timeout} is not positive"))
    raw = group.metadata.annotations.get(NETWORK_TOPOLOGY_SPEC_ANNOTATION)
    if raw is not None:
        problems += _gather_problems(raw, key, group.spec.min_member,
                                     None if known_layers is None else list(dict.fromkeys(known_layers)))
    return problems


def _gather_problems(raw: str, key: str, min_member: int, known: list[str] | None) -> list[Problem]:
    annotation = f"metadata.annotations[{NETWORK_TOPOLOGY_SPEC_ANNOTATION}]"
    shape = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"|"PreferGather"}]}'
    try:
        document = json.loads(raw)
    except ValueError as error:
        return [Problem(POD_GROUP_KIND, key, annotation, f"is not valid JSON ({error}); expected {shape}")]
    if not isinstance(document, dict) or not isinstance(document.get("gatherStrategy"), list):
        return [Problem(POD_GROUP_KIND, key, annotation, f"must be an object with a gatherStrategy list, like {shape}")]
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, rule in enumerate(document["gatherStrategy"]):
        where = f"{annotation}.gatherStrategy[{index}]"
        if not isinstance(rule, dict):
            problems.append(Problem(POD_GROUP_KIND, key, where, "must be an object with layer and strategy"))
            continue
        layer = rule.get("layer")
        if not isinstance(layer, str) or not layer:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.layer", "is missing or not a string"))
        elif known is not None and layer not in known:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.layer",
                                    f"{layer!r} is not a layer of the cluster's topology "
                                    f"(known: {', '.join(known) or 'none'})"))
        elif layer in seen:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.layer", f"{layer!r} appears twice"))
        if isinstance(layer, str):
            seen.add(layer)
        strategy = rule.get("strategy", PREFER_GATHER)
        if strategy not in (MUST_GATHER, PREFER_GATHER):
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.strategy",
                                    f"{strategy!r} is not {MUST_GATHER} or {PREFER_GATHER}"))
        if "podCountMultiple" in rule:
            multiple = rule["podCountMultiple"]
            if isinstance(multiple, bool) or not isinstance(multiple, int):
                problems.append(Problem(POD_GROUP_KIND, key, f"{where}.podCountMultiple",
                                        f"{multiple!r} is not an integer"))
            elif multiple <= 0:
                problems.append(Problem(POD_GROUP_KIND, key, f"{where}.podCountMultiple",
                                        f"{multiple} is not positive"))
            elif min_member > 0 and min_member % multiple != 0:
                problems.append(Problem(POD_GROUP_KIND, key, f"{where}.podCountMultiple",
                                        f"minMember {min_member} is not a multiple of {multiple}"))
    return problems


def validate_volcano_pod_group(group: VolcanoPodGroup, tiers: Mapping[int, str] | None = None) -> list[Problem]:
    """Volcano PodGroup: minMember, networkTopology, subGroupPolicy.

    `tiers`: tier number -> tierName of the cluster's topology (levels below the cluster root and
    the root itself); None skips the checks that need to know the cluster.
    """
    key = _key(group.metadata.namespace, group.metadata.name)
    problems: list[Problem] = []
    spec = group.spec
    if spec.min_member < 0:
        problems.append(Problem(POD_GROUP_KIND, key, "spec.minMember", f"{spec.min_member} is negative"))
    elif spec.min_member == 0:
        problems.append(Problem(POD_GROUP_KIND, key, "spec.minMember", "is missing or 0: a gang needs at least 1"))
    group_tier: int | None = None
    if spec.network_topology is not None:
        group_tier = _tier_problems(spec.network_topology.mode, spec.network_topology.highest_tier_allowed,
                                    spec.network_topology.highest_tier_name, key, "spec.networkTopology", tiers,
                                    problems)
    names: set[str] = set()
    for index, policy in enumerate(spec.sub_group_policy):
        where = f"spec.subGroupPolicy[{index}]"
        if not policy.name:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.name", "is empty"))
        elif policy.name in names:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.name", f"{policy.name!r} appears twice"))
        names.add(policy.name)
        size = policy.sub_group_size
        if size is not None and size < 1:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.subGroupSize", f"{size} is below 1"))
        elif size is not None and spec.min_member > 0 and size > spec.min_member:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.subGroupSize",
                                    f"{size} is larger than the gang's minMember {spec.min_member}"))
        minimum = policy.min_sub_groups
        if minimum is not None and minimum < 0:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.minSubGroups", f"{minimum} is negative"))
        elif (minimum is not None and size is not None and size > 0 and spec.min_member > 0
              and minimum * size > spec.min_member):
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.minSubGroups",
                                    f"{minimum} sub-groups of {size} pods exceed the gang's minMember "
                                    f"{spec.min_member}"))
        if policy.label_selector is None and not policy.match_label_keys:
            problems.append(Problem(POD_GROUP_KIND, key, where,
                                    "has neither labelSelector nor matchLabelKeys, so no pod belongs to it"))
        if policy.network_topology is not None:
            nt = policy.network_topology
            sub_tier = _tier_problems(nt.mode, nt.highest_tier_allowed, nt.highest_tier_name, key,
                                      f"{where}.networkTopology", tiers, problems)
            if sub_tier is not None and group_tier is not None and sub_tier > group_tier:
                problems.append(Problem(POD_GROUP_KIND, key, f"{where}.networkTopology",
                                        f"a sub-group may span tier {sub_tier}, above the whole gang's limit "
                                        f"{group_tier}"))
    return problems


def _tier_problems(mode: str, tier: int | None, tier_name: str, key: str, where: str,
                   tiers: Mapping[int, str] | None, problems: list[Problem]) -> int | None:
    """Check one networkTopology; return the tier it allows (None when unknown)."""
    if mode not in ("hard", "soft"):
        problems.append(Problem(POD_GROUP_KIND, key, f"{where}.mode", f"{mode!r} is not hard or soft"))
    if tier is not None and tier_name:
        problems.append(Problem(POD_GROUP_KIND, key, where,
                                "highestTierAllowed and highestTierName are both set; set only one"))
    if tier is not None:
        if tier < 1:
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.highestTierAllowed", f"{tier} is below 1"))
            return None
        if tiers is not None and tiers and tier > max(tiers):
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.highestTierAllowed",
                                    f"{tier} is above the cluster's top tier {max(tiers)}"))
        return tier
    if tier_name:
        if tiers is None:
            return None
        found = [t for t, n in tiers.items() if n == tier_name]
        if not found:
            known = ", ".join(n for _, n in sorted(tiers.items()) if n) or "none"
            problems.append(Problem(POD_GROUP_KIND, key, f"{where}.highestTierName",
                                    f"{tier_name!r} is not a tierName of the cluster's topology (known: {known})"))
            return None
        return found[0]
    return None


def _key(namespace: str, name: str) -> str:
    return f"{namespace or 'default'}/{name}"
