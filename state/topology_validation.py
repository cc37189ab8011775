"""The admission rules for a Koordinator ClusterNetworkTopology, a Kueue Topology and a KAI Scheduler
Topology, and the names of layers and tiers.

Owns every check a user can get wrong when describing a network as layers of node labels (the
ClusterNetworkTopology layer chain). HyperNodes have their own module (`state/hypernodes.py`),
PodGroups theirs (`state/gangs.py` for what needs only the object, `state/topology_wishes.py` for
what needs the cluster's tree). Each rule yields a `Problem` naming the object, the field and
what is wrong (and, where the tree goes on anyway, how it was resolved). The same functions serve
`toposched validate` offline and the daemon's fold (`state/topology.py` builds its tree from what
survives here), so a manifest that validates cleanly is exactly one the tree takes as written.

Rules of this module: pure (no I/O, no clock, no logging); never raises on bad input, it reports it.

How conflicts are resolved (the tree and the messages say the same thing):
- A ClusterNetworkTopology that is not one chain of layers (unknown parentTopologyLayer, two
  layers on one label key, a cycle, two children of one layer, a duplicated layer) is unusable as a
  whole: `resolve_cnt_layers` returns no layers and the tree keeps the last good structure.
- A Kueue Topology breaking a rule of its CRD (no level, more than 16, a nodeLabel that is empty,
  not a label key or repeated, `kubernetes.io/hostname` above the lowest level) is unusable as a
  whole, as the API server would have refused it: `resolve_kueue_layers` returns no layers, and the
  tree keeps the object's last good levels (`state/topology.py`).
- A KAI Scheduler Topology (kai.scheduler/v1alpha1, derived from Kueue's) is held to the same rules
  (its CRD's), and to those KAI's webhook adds for a level's optional `alias` (a label-key-like name,
  unique, never another level's nodeLabel): `resolve_kai_layers`, with the same consequences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from events.objects import ClusterNetworkTopology, KaiTopology, KueueTopology
from state.gangs import Problem

CNT_KIND = "ClusterNetworkTopology"
KUEUE_TOPOLOGY_KIND = "KueueTopology"  # the Problem kind of a kueue.x-k8s.io Topology (our name for the kind)
KAI_TOPOLOGY_KIND = "KaiTopology"  # the Problem kind of a kai.scheduler Topology (our name for the kind)
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
    alias: str = ""  # a KAI Topology level's alias


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


# --------------------------------------------------------------------------- Kueue Topology levels

HOSTNAME_LABEL = "kubernetes.io/hostname"
KUEUE_MAX_LEVELS = 16
KUEUE_MAX_LABEL_LENGTH = 316
# The nodeLabel pattern of Kueue's Topology CRD: an optional DNS-subdomain prefix and `/`, then a name.
_KUEUE_LABEL = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                          r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])")
# The layer names of a Kueue Topology's levels, from the lowest domain level up, as the label schemes
# name their switch tiers (`state/topology.py`); a level above the third is `Tier<tier>Layer`, the name a
# HyperNode tier without a tierName gets.
_KUEUE_LAYER_NAMES = ("BlockLayer", "SpineLayer", "DatacenterLayer")


def kueue_layer_name(tier: int) -> str:
    """The layer name of a Kueue Topology level `tier` levels above the node (1 = the lowest domain level)."""
    return _KUEUE_LAYER_NAMES[tier - 1] if tier <= len(_KUEUE_LAYER_NAMES) else layer_name_of("", tier)


def resolve_kueue_layers(topology: KueueTopology) -> tuple[tuple[LayerDef, ...] | None, list[Problem]]:
    """The domain layers of a Kueue Topology, top first, without a lowest `kubernetes.io/hostname` level
    (the node itself), or None when the object breaks a rule of Kueue's CRD (every problem listed)."""
    return _resolve_levels(KUEUE_TOPOLOGY_KIND, topology.metadata.name,
                           [(level.node_label, "") for level in topology.spec.levels])


def resolve_kai_layers(topology: KaiTopology) -> tuple[tuple[LayerDef, ...] | None, list[Problem]]:
    """The domain layers of a KAI Scheduler Topology, as `resolve_kueue_layers` (KAI's CRD has Kueue's
    rules), each with its alias; None when the object breaks a rule of KAI's CRD or of its webhook's
    alias checks (every problem listed)."""
    return _resolve_levels(KAI_TOPOLOGY_KIND, topology.metadata.name,
                           [(level.node_label, level.alias) for level in topology.spec.levels])


def label_key_problem(value: str) -> str | None:
    """What is wrong with `value` as a node label key (as Kueue's and KAI's CRDs check a nodeLabel), or None."""
    return _label_key_problem(value)


def _label_key_problem(value: str) -> str | None:
    if len(value) > KUEUE_MAX_LABEL_LENGTH or _KUEUE_LABEL.fullmatch(value) is None:
        shown = value if len(value) <= 80 else value[:80] + "..."
        return (f"{shown!r} is not a node label key (at most {KUEUE_MAX_LABEL_LENGTH} characters: an optional DNS "
                "subdomain and '/', then a name of letters, digits, '-', '_', '.' that starts and ends with a letter "
                "or digit)")
    return None


def _resolve_levels(kind: str, name: str, levels: Sequence[tuple[str, str]]
                    ) -> tuple[tuple[LayerDef, ...] | None, list[Problem]]:
    """`levels`: (nodeLabel, alias) top first, alias "" when none."""
    problems: list[Problem] = []
    if not levels:
        problems.append(Problem(kind, name, "spec.levels", "is empty: no level is defined"))
        return None, problems
    if len(levels) > KUEUE_MAX_LEVELS:
        problems.append(Problem(kind, name, "spec.levels",
                                f"has {len(levels)} levels; a Topology has at most {KUEUE_MAX_LEVELS}"))
    first_at: dict[str, int] = {}
    for index, (key, _) in enumerate(levels):
        where = f"spec.levels[{index}].nodeLabel"
        if not key:
            problems.append(Problem(kind, name, where, "is empty"))
            continue
        bad = _label_key_problem(key)
        if bad is not None:
            problems.append(Problem(kind, name, where, bad))
            continue
        if key in first_at:
            problems.append(Problem(kind, name, where,
                                    f"{key!r} is already spec.levels[{first_at[key]}]: each level needs its own label"))
            continue
        first_at[key] = index
        if key == HOSTNAME_LABEL and index != len(levels) - 1:
            problems.append(Problem(kind, name, where,
                                    f"{HOSTNAME_LABEL} can only be the lowest level (it is the node itself)"))
    alias_at: dict[str, int] = {}
    for index, (_, alias) in enumerate(levels):
        if not alias:
            continue
        where = f"spec.levels[{index}].alias"
        bad = _label_key_problem(alias)
        if bad is not None:
            problems.append(Problem(kind, name, where, bad.replace("a node label key", "a valid alias")))
        elif alias in alias_at:
            problems.append(Problem(kind, name, where, f"{alias!r} is already the alias of "
                                    f"spec.levels[{alias_at[alias]}]: aliases are unique"))
        elif alias in first_at:
            problems.append(Problem(kind, name, where, f"{alias!r} is the nodeLabel of "
                                    f"spec.levels[{first_at[alias]}]: an alias cannot be a level's nodeLabel"))
        else:
            alias_at[alias] = index
    if problems:
        return None, problems
    named = list(levels)
    if named[-1][0] == HOSTNAME_LABEL:
        named.pop()
    depth = len(named)
    return tuple(LayerDef(kueue_layer_name(depth - index), (key,), tier_name_of("", (key,)), alias)
                 for index, (key, alias) in enumerate(named)), problems


def validate_kueue_topology(topology: KueueTopology) -> list[Problem]:
    return resolve_kueue_layers(topology)[1]


def validate_kai_topology(topology: KaiTopology) -> list[Problem]:
    return resolve_kai_layers(topology)[1]
