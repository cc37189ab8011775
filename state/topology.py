"""The network-topology tree: cluster > ... > node, from whichever source the cluster uses.

Owns the one internal model of the network that placement and preemption query, folded from five
user-facing descriptions (precedence in this order; `tree.source` says which one is in use, and
`tree.source_name` which object, for a ClusterNetworkTopology or a KAI or Kueue Topology):

1. `SOURCE_CNT`: the Koordinator ClusterNetworkTopology named `default`. Its layers (a chain of
   `topologyLayer`s with `labelKey`s and `parentTopologyLayer`s; `NodeTopologyLayer` is the node
   itself) become the levels; the domains of a layer are the distinct values of its label on the
   nodes (a layer with several label keys takes the first key the node carries), each parented by
   the node's value of the parent layer.
2. `SOURCE_HYPERNODES`: Volcano HyperNodes. Each distinct `spec.tier` is a level (tiers grow
   upward); a HyperNode is a domain, its HyperNode members its children, its Node members (exact
   name, RE2 regex searched in the name as Go's MatchString does (`state/name_patterns.py`), or
   label selector) its nodes.
3. `SOURCE_KAI`: an NVIDIA KAI Scheduler `Topology` (kai.scheduler/v1alpha1, cluster-scoped), derived
   from Kueue's and read exactly as a Kueue Topology below (the same levels, names, choice among
   several, bad objects and last good levels), each level's optional `alias` also naming it
   (`resolve_level`). It comes before a Kueue Topology, every usable one of which is then reported
   as not used: KAI is a scheduler and its Topology describes the network it places on, and KAI
   PodGroups name their KAI Topology (`state/kai_gangs.py`).
4. `SOURCE_KUEUE`: a Kueue `Topology` (kueue.x-k8s.io v1beta2 or v1beta1, cluster-scoped; as Kueue's
   Topology Aware Scheduling reads it). Its `spec.levels[].nodeLabel`s, top level first, are the
   levels, but a lowest `kubernetes.io/hostname` level, which is the node itself; built as from a CNT
   (a node's path is the prefix of levels whose label it carries). Layer names follow the label
   schemes': the level nearest the node is `BlockLayer`, then `SpineLayer`, then `DatacenterLayer`,
   and any level above those `Tier<tier>Layer` (`Tier4Layer`, ...: the name a HyperNode tier without a
   tierName gets); each level's tierName is its label key's last segment (`.../topology-rack` ->
   `topology-rack`) and its `label_keys` the key itself, so a Volcano `highestTierName`, a Koordinator
   layer name and an upstream Workload API topology key all resolve. With several Topologies, the one
   whose levels' labels the most nodes carry (a node counts when it carries any of them) is used, ties
   by name; the others are reported as not used. A Topology that no node carries a label of (or whose
   only level is the hostname) describes nothing and never takes the label schemes' place.
5. `SOURCE_LABELS`: node labels, of the first scheme in `LABEL_SCHEMES` any node carries: NVIDIA
   topograph v1 (`fabric.topograph.run/tier-N`, tier 0 nearest the node, and
   `accelerator.topograph.run/{domain,sub-domain}`), topograph before v1
   (`network.topology.nvidia.com/{datacenter|core,spine,block|leaf,accelerator}`), then the labels
   EKS (`topology.k8s.aws/network-node-layer-1..4`), GKE (`cloud.google.com/gce-topology-{block,
   subblock}`) and OCI (`oci.oraclecloud.com/host.{network_block_id,rack_id}`) put on nodes
   themselves. Whichever layers of that scheme any node carries become the levels, built as from a
   CNT; the switch tiers of every scheme are named alike (`DatacenterLayer` > `SpineLayer` >
   `BlockLayer`, the tier nearest the node being `BlockLayer`), each level's tierName its label key's
   last segment. A node without its scheme's accelerator label but with `nvidia.com/gpu.clique` (the
   NVLink clique the GPU Operator labels Multi-Node NVLink nodes with, as on GB200 NVL72) has its
   clique as its AcceleratorLayer domain; with cliques and no scheme, they alone are the levels. With
   no such label at all the tree is the cluster root alone, holding every node.

Levels (both vocabularies). Level 0 is always the cluster root, layer `ClusterTopologyLayer`,
tierName `cluster`; then one level per domain layer, top first, down to the lowest domain layer
above nodes. `Level.tier` counts from the bottom: the lowest domain level is tier 1 (or, with
HyperNodes, its `spec.tier`), the root is the top tier + 1 (tier 1 when there is nothing else).
A CNT layer's tierName is its label key's last segment (`.../block` -> `block`; a label scheme's
layers are named in `LABEL_SCHEMES`); a
HyperNode tier's layer name is its tierName in CamelCase + `Layer` (`block` -> `BlockLayer`, none
-> `Tier2Layer`), so the same network described either way gets the same levels.
`resolve_level("BlockLayer") == resolve_level("block") == resolve_level(1)` (ints and digit strings
are Volcano tier numbers, read as "up to this tier": the highest level whose tier does not exceed
it, the root for any tier at or above the root's); an unknown name or a tier below 1 raises
`TopologyError`.

Where nodes go when the description is incomplete (documented rules, each reported in `problems`
unless it is the ordinary case):
- CNT / Kueue Topology / labels: a node's path is the prefix of layers whose label it carries; at the
  first missing label it stops and the node sits directly under the last domain it has (the root when it has none
  of them). A node with no topology label at all is the ordinary case of a non-fabric node and is
  not reported; a node missing a layer in the middle is.
- A domain claimed under two parents (block b1 on nodes labelled spine s1 and spine s2) keeps the
  parent most of its nodes name (ties: first by name); every node of it follows, and the
  contradiction is reported naming the nodes.
- HyperNodes: a node not covered by any HyperNode hangs directly under the cluster root (not
  reported); a node claimed by two HyperNodes goes under the lowest-tier one (then first by name),
  reported unless one claimant is below the other. A HyperNode with no parent is a child of the
  root. `state/hypernodes.py` decides which HyperNodes are in use (an invalid one never as written:
  its version from the last good set, or left out) and whether they describe the network at all;
  when none in use has a usable member, they do not take precedence over the labels, so one bad
  HyperNode or a cycle never costs a labelled cluster its tree. Their problems are listed whichever
  source wins.
- A bad ClusterNetworkTopology (not one chain) does not take the tree down: the last good layer
  chain stays in use (if none was ever good, the next source is used), and the problem is listed.
- A bad Kueue Topology (no level, more than 16, a nodeLabel empty, not a label key or repeated,
  `kubernetes.io/hostname` above the lowest level: what Kueue's CRD refuses) keeps its last good
  levels in use (if it never had any, it is left out), each problem listed with the object and field
  (`state/topology_validation.py`). Its problems are listed whichever source wins.
  Note: "last good" (here and for HyperNodes) is history, judged as the objects are folded, so the
  same events give the same tree; a state restored from a snapshot knows only the current objects.

Query API (for placement and preemption):
- `tree.levels` -> tuple[Level] top first; `tree.root`; `tree.source`; `tree.source_name`;
  `tree.version` (bumped at
  every structural rebuild); `tree.problems` -> list[Problem] (kind, key, field, message).
- `tree.path(node)` -> tuple[Domain] root first ... the node's own domain (empty for an unknown node);
  `tree.domain_of(node)` the lowest domain holding it; `tree.domain_at(node, level)` (None when the
  path skips that level, as HyperNodes may).
- `tree.domains_at(level)` sorted by name; `tree.domain(level, name)`; `tree.domains` (by id).
- `tree.lca(nodes)` -> Domain (raises TopologyError for an empty set or an unknown node);
  `tree.lca_level(nodes)` -> int.
- `tree.resolve_level(name_or_tier)` -> level index.
- `Domain`: `id` (small int, index into `tree.domains`), `level`, `layer`, `tier`, `tier_name`,
  `name`, `parent`, `children` (sorted by name), `nodes` (every node below, sorted), `direct_nodes`
  (nodes hanging right here, sorted), `allocatable`, `used` (milli-unit vectors, never recounted:
  see below), `free()`; `depth` is the distance from the root.
- `tree.detail_status()` -> Koordinator's `status.detailStatus`; `tree.hypernode_node_counts()` ->
  HyperNode name -> `status.nodeCount`.

Aggregates: `usage_changed` (every pod bind/unbind) updates only the node's own vector and notes
the node; a node whose vector is the caller's own (passed as `used` to `node_upserted`, as the fold
passes `NodeInfo.used`) is updated by the caller, and `usage_noted` only notes it. The first read of
any domain's `used` afterwards carries each noted node's difference up its path (a few dict updates
per node, however many pods moved). So folding stays cheap and reads are always current;
`allocatable` changes are applied along the path at once.

Domain objects are replaced when the structure is rebuilt (node added, removed or relabelled,
topology object changed): hold them only within one scheduling cycle, never across fold events.
Structure is rebuilt lazily on the first query after a change, so folding 10,000 NodeUpserted
events costs one build, and the result depends only on the objects folded so far (ties broken by
name), never on their order (except for the last good versions above, which are history).

Pure: no I/O, no clock, no logging. Mutated only through the `*_upserted` / `*_deleted` /
`usage_changed` / `usage_noted` calls made by `state/cluster.py`.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Final

import msgspec

from events.objects import ClusterNetworkTopology, HyperNode, KaiTopology, KueueTopology, TopologyDetail, TopologyInfo
from state.gangs import Problem
from state.hypernodes import HYPERNODE_KIND, HyperNodeGraph, HyperNodeSet, NodeSelectorRule
from state.name_patterns import NamePattern, NamePatternSet
from state.resources import Resources, subtract
from state.topology_validation import (
    CLUSTER_LAYER,
    CLUSTER_TIER_NAME,
    CNT_KIND,
    DEFAULT_CNT_NAME,
    KAI_TOPOLOGY_KIND,
    KUEUE_TOPOLOGY_KIND,
    NODE_KIND,
    NODE_LAYER,
    LayerDef,
    layer_name_of,
    resolve_cnt_layers,
    resolve_kai_layers,
    resolve_kueue_layers,
)

SOURCE_CNT: Final = "ClusterNetworkTopology"
SOURCE_HYPERNODES: Final = "HyperNode"
SOURCE_KAI: Final = "KaiTopology"
SOURCE_KUEUE: Final = "KueueTopology"
SOURCE_LABELS: Final = "labels"

TOPOGRAPH_PREFIX: Final = "network.topology.nvidia.com/"
GPU_CLIQUE_LABEL: Final = "nvidia.com/gpu.clique"
# The NVLink domain: the scheme's own label, else the clique the NVIDIA GPU Operator labels a Multi-Node
# NVLink node with (GB200 NVL72: `<cluster UUID>.<clique id>`; only GPUs of one clique reach each other
# over NVLink). topograph leaves its own label off a node that carries the clique.
TOPOGRAPH_LAYERS: Final = (  # top first
    # topograph up to v0.1 wrote datacenter / block, later versions core / leaf for the same tiers.
    LayerDef("DatacenterLayer", (TOPOGRAPH_PREFIX + "datacenter", TOPOGRAPH_PREFIX + "core"), "datacenter"),
    LayerDef("SpineLayer", (TOPOGRAPH_PREFIX + "spine",), "spine"),
    LayerDef("BlockLayer", (TOPOGRAPH_PREFIX + "block", TOPOGRAPH_PREFIX + "leaf"), "block"),
    LayerDef("AcceleratorLayer", (TOPOGRAPH_PREFIX + "accelerator", GPU_CLIQUE_LABEL), "accelerator"),
)
# topograph v1: a variable-depth family of switch tiers (tier 0 nearest the node) and a two-level
# accelerator hierarchy. Tiers 0-2 are the leaf, spine and core of the other schemes; up to 8 are read.
FABRIC_TIER_PREFIX: Final = "fabric.topograph.run/tier-"
FABRIC_TIERS: Final = 8
ACCELERATOR_DOMAIN_LABEL: Final = "accelerator.topograph.run/domain"
ACCELERATOR_SUB_DOMAIN_LABEL: Final = "accelerator.topograph.run/sub-domain"
_TIER_LAYER_NAMES: Final = ("BlockLayer", "SpineLayer", "DatacenterLayer")
TOPOGRAPH_V1_LAYERS: Final = (
    *(LayerDef(_TIER_LAYER_NAMES[tier] if tier < len(_TIER_LAYER_NAMES) else f"FabricTier{tier}Layer",
               (f"{FABRIC_TIER_PREFIX}{tier}",), f"tier-{tier}") for tier in reversed(range(FABRIC_TIERS))),
    LayerDef("AcceleratorLayer", (ACCELERATOR_DOMAIN_LABEL, GPU_CLIQUE_LABEL), "domain"),
    LayerDef("AcceleratorSubDomainLayer", (ACCELERATOR_SUB_DOMAIN_LABEL,), "sub-domain"),
)
# The labels clouds put on GPU nodes themselves (EKS, GKE, OCI), as NVIDIA topograph's reference lists
# them: top first, mapped onto the same layer names as topograph's tiers.
AWS_PREFIX: Final = "topology.k8s.aws/network-node-layer-"
AWS_LAYERS: Final = (
    LayerDef("DatacenterLayer", (AWS_PREFIX + "1",), "network-node-layer-1"),
    LayerDef("SpineLayer", (AWS_PREFIX + "2",), "network-node-layer-2"),
    LayerDef("BlockLayer", (AWS_PREFIX + "3",), "network-node-layer-3"),
    # Only instance types whose topology has four layers carry it: their bottom layer, below the third.
    LayerDef("NetworkNodeLayer4Layer", (AWS_PREFIX + "4",), "network-node-layer-4"),
    LayerDef("AcceleratorLayer", (GPU_CLIQUE_LABEL,), "accelerator"),
)
GCP_LAYERS: Final = (
    LayerDef("SpineLayer", ("cloud.google.com/gce-topology-block",), "gce-topology-block"),
    LayerDef("BlockLayer", ("cloud.google.com/gce-topology-subblock",), "gce-topology-subblock"),
    LayerDef("AcceleratorLayer", (GPU_CLIQUE_LABEL,), "accelerator"),
)
OCI_LAYERS: Final = (
    LayerDef("SpineLayer", ("oci.oraclecloud.com/host.network_block_id",), "host.network_block_id"),
    LayerDef("BlockLayer", ("oci.oraclecloud.com/host.rack_id",), "host.rack_id"),
    LayerDef("AcceleratorLayer", (GPU_CLIQUE_LABEL,), "accelerator"),
)
# Precedence: the first scheme any node carries a label of (the clique aside) describes the network.
LABEL_SCHEMES: Final = (TOPOGRAPH_V1_LAYERS, TOPOGRAPH_LAYERS, AWS_LAYERS, GCP_LAYERS, OCI_LAYERS)
_SCHEME_KEYS: Final = tuple(frozenset(key for layer in scheme for key in layer.label_keys) - {GPU_CLIQUE_LABEL}
                            for scheme in LABEL_SCHEMES)
_TOPOLOGY_KEYS: Final = frozenset(key for scheme in LABEL_SCHEMES for layer in scheme for key in layer.label_keys)
ROOT_NAME: Final = "cluster"


class TopologyError(Exception):
    """An expected failure of a topology query, naming the object and field at fault."""

    def __init__(self, kind: str, name: str, field: str, message: str) -> None:
        super().__init__(f"{kind} {name}: {field}: {message}" if field else f"{kind} {name}: {message}")
        self.kind = kind
        self.name = name
        self.field = field
        self.message = message


class Level(msgspec.Struct, frozen=True):
    """One level of the tree in both vocabularies. `index` 0 is the cluster root."""

    index: int
    layer: str  # Koordinator topologyLayer
    tier: int  # Volcano tier (1 = lowest domain level)
    tier_name: str  # Volcano tierName
    label_keys: tuple[str, ...] = ()  # node labels the level is built from (CNT / topograph sources)
    alias: str = ""  # a KAI Topology level's alias (resolves as a name too)


class Domain:
    """One network domain. Read-only for callers; `used` follows the fold."""

    __slots__ = ("_pending", "_used", "allocatable", "children", "depth", "direct_nodes", "id", "layer", "level",
                 "name", "nodes", "parent", "path", "tier", "tier_name")

    def __init__(self, ident: int, level: Level, name: str, parent: Domain | None, pending: _Pending) -> None:
        self.id = ident
        self.level = level.index
        self.layer = level.layer
        self.tier = level.tier
        self.tier_name = level.tier_name
        self.name = name
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.path: tuple[Domain, ...] = (self,) if parent is None else (*parent.path, self)
        self.children: list[Domain] = []
        self.nodes: list[str] = []
        self.direct_nodes: list[str] = []
        self.allocatable: Resources = {}
        self._used: Resources = {}
        self._pending = pending

    @property
    def used(self) -> Resources:
        """Requests of the pods counted on the nodes below (milli-units), current as of the last fold call."""
        if self._pending.nodes:
            self._pending.flush()
        return self._used

    def free(self) -> Resources:
        return subtract(self.allocatable, self.used)

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"Domain({self.layer}/{self.name}, {len(self.nodes)} nodes)"


class _NodeRecord:
    __slots__ = ("allocatable", "domain", "flushed", "labels", "used")

    def __init__(self, labels: Mapping[str, str], allocatable: Resources, used: Resources | None) -> None:
        # Kept as given, not copied: the tree never changes them, nor do its callers once they have passed
        # them (a node's labels and its allocatable vector are shared, never-mutated values in the state).
        self.labels: Mapping[str, str] = labels
        self.allocatable: Resources = allocatable
        self.used: Resources = {} if used is None else used  # always current
        self.flushed: Resources = {}  # the part of `used` already added into the domains on the path
        self.domain: Domain | None = None  # lowest domain in the current structure (None while stale)


class _Pending:
    """Nodes whose `used` moved since their domains' aggregates were last brought up to date.

    `usage_changed` runs for every pod bind/unbind, so it only updates the node's own vector and
    notes the node here; the difference is carried up the node's path (a handful of dict updates per
    node, however many pods moved) the next time anyone reads a domain's `used`.
    """

    __slots__ = ("nodes", "records")

    def __init__(self, records: dict[str, _NodeRecord]) -> None:
        self.nodes: set[str] = set()
        self.records = records

    def flush(self) -> None:
        records = self.records
        for name in self.nodes:
            record = records.get(name)
            if record is None or record.domain is None:
                continue
            flushed = record.flushed
            diff = [(key, amount - flushed.get(key, 0)) for key, amount in record.used.items()
                    if amount != flushed.get(key, 0)]
            if not diff:
                continue
            for ancestor in record.domain.path:
                total = ancestor._used
                for key, amount in diff:
                    total[key] = total.get(key, 0) + amount
            for key, amount in diff:
                flushed[key] = flushed.get(key, 0) + amount
        self.nodes.clear()


class _Built:
    """The result of one structural build."""

    __slots__ = ("by_level", "domains", "levels", "node_domain", "pending", "problems", "root", "source",
                 "source_name")

    def __init__(self, source: str, levels: tuple[Level, ...], pending: _Pending, source_name: str = "") -> None:
        self.pending = pending
        self.source = source
        self.source_name = source_name
        self.levels = levels
        self.domains: list[Domain] = []
        self.by_level: list[dict[str, Domain]] = [{} for _ in levels]
        self.node_domain: dict[str, Domain] = {}
        self.problems: list[Problem] = []
        self.root = self.add(0, ROOT_NAME, None)

    def add(self, level: int, name: str, parent: Domain | None) -> Domain:
        domain = Domain(len(self.domains), self.levels[level], name, parent, self.pending)
        self.domains.append(domain)
        self.by_level[level][name] = domain
        return domain


class _LevelTopologies:
    """The Topologies of one kind made of label levels (Kueue's, KAI's): each object as folded, and the
    last good levels of each (judged as folded, as a CNT's last good chain is, so the same events give the
    same tree). `choice` picks the one the tree is built from."""

    def __init__(self, kind: str, words: str) -> None:
        self.kind = kind
        self.words = words  # how messages name the kind ("Kueue Topology")
        self.specs: dict[str, object] = {}
        self.found: dict[str, list[Problem]] = {}  # each object's own problems, as last folded
        self.last_good: dict[str, tuple[LayerDef, ...]] = {}

    def upsert(self, name: str, spec: object, resolved: tuple[tuple[LayerDef, ...] | None, list[Problem]]) -> bool:
        """Whether the tree must be rebuilt (the spec changed)."""
        if name in self.specs and self.specs[name] == spec:
            return False
        self.specs[name] = spec
        layers, found = resolved
        self.found[name] = found
        if layers is not None:
            self.last_good[name] = layers
        return True

    def delete(self, name: str) -> bool:
        if self.specs.pop(name, None) is None:
            return False
        self.found.pop(name, None)
        self.last_good.pop(name, None)
        return True

    def usable(self) -> list[str]:
        return [name for name, layers in self.last_good.items() if layers]

    def problems(self) -> list[Problem]:
        """Each object's own problems (reported whichever source wins), and what is done about them."""
        problems: list[Problem] = []
        for name in sorted(self.found):
            found = self.found[name]
            if not found:
                continue
            problems += found
            problems.append(Problem(self.kind, name, "spec.levels",
                                    "is not usable; the Topology's last good levels stay in use"
                                    if name in self.last_good else
                                    "is not usable and no good version was seen; the Topology is left out"))
        return problems

    def choice(self, nodes: Mapping[str, _NodeRecord]) -> tuple[str | None, list[Problem]]:
        """The Topology the tree is built from (None: none describes the network) and the problems: of
        every Topology, and which are not used. Among the usable ones (levels as written, else the last
        good ones), the one whose levels' labels the most nodes carry, then first by name; one that no node
        carries a label of describes nothing and never takes a later source's place."""
        problems = self.problems()
        usable = {name: self.last_good[name] for name in sorted(self.usable())}
        for name in sorted(self.last_good):
            if not self.last_good[name]:
                problems.append(Problem(self.kind, name, "spec.levels",
                                        "has no level above kubernetes.io/hostname (the node itself), so it describes "
                                        "no network domain; not used"))
        if not usable:
            return None, problems
        keys_of = {name: frozenset(key for layer in layers for key in layer.label_keys)
                   for name, layers in usable.items()}
        every_key = frozenset().union(*keys_of.values())
        counts = dict.fromkeys(usable, 0)
        for record in nodes.values():
            if record.labels:
                found = every_key.intersection(record.labels)
                if found:
                    for name, keys in keys_of.items():
                        if not keys.isdisjoint(found):
                            counts[name] += 1
        ranked = sorted(usable, key=lambda n: (-counts[n], n))
        chosen = ranked[0]
        if counts[chosen] == 0:
            for name in ranked:
                problems.append(Problem(self.kind, name, "spec.levels",
                                        "no node carries a label of its levels, so it describes no network domain; "
                                        "not used"))
            return None, problems
        for name in ranked[1:]:
            problems.append(Problem(
                self.kind, name, "spec.levels",
                f"not used: the tree is built from {self.words} {chosen!r}, whose levels {counts[chosen]} nodes "
                f"carry (this one's: {counts[name]}); with several Topologies the one the most nodes carry is "
                "used, then the first by name"))
        return chosen, problems


class TopologyTree:
    """See the module docstring. Construct empty; `state/cluster.py` feeds it."""

    def __init__(self) -> None:
        self._nodes: dict[str, _NodeRecord] = {}
        self._cnt: ClusterNetworkTopology | None = None
        self._hypernodes = HyperNodeSet()
        self._last_good_layers: tuple[LayerDef, ...] | None = None  # judged as the CNT is folded
        self._kueue = _LevelTopologies(KUEUE_TOPOLOGY_KIND, "Kueue Topology")
        self._kai = _LevelTopologies(KAI_TOPOLOGY_KIND, "KAI Topology")
        self._built: _Built | None = None
        self._version = 0
        self._pending = _Pending(self._nodes)
        # HyperNode Node-member matching is kept between builds and redone only for nodes added,
        # relabelled or deleted since (`_touched`), unless the members themselves changed: regexMatch
        # members in one RE2 set over all their patterns (`_regexes`), labelMatch members per HyperNode
        # version in use (`_matches`).
        self._touched: set[str] = set()
        self._regexes: _RegexIndex | None = None
        self._matches: dict[str, tuple[tuple[NodeSelectorRule, ...], set[str]]] = {}

    # ------------------------------------------------------------------ fold inputs

    def node_upserted(self, name: str, labels: Mapping[str, str], allocatable: Resources,
                      used: Resources | None = None) -> None:
        """A node added or changed. `used`: a new node's usage vector is this one, kept current by the caller
        (who then reports changes with `usage_noted`, not `usage_changed`); ignored for a node already held.
        `labels` and `allocatable` are kept, not copied: the caller must not change them afterwards."""
        record = self._nodes.get(name)
        if record is None:
            self._nodes[name] = _NodeRecord(labels, allocatable, used)
            self._touched.add(name)
            self._built = None
            return
        if record.labels != labels:
            record.labels = labels
            record.allocatable = allocatable
            self._touched.add(name)
            self._built = None
            return
        if record.allocatable != allocatable:
            built = self._built
            if built is not None:
                domain = built.node_domain.get(name)
                if domain is not None:
                    for ancestor in domain.path:
                        total = ancestor.allocatable
                        for key, amount in record.allocatable.items():
                            total[key] = total.get(key, 0) - amount
                        for key, amount in allocatable.items():
                            total[key] = total.get(key, 0) + amount
            record.allocatable = allocatable

    def node_deleted(self, name: str) -> None:
        if self._nodes.pop(name, None) is not None:
            self._pending.nodes.discard(name)
            self._touched.add(name)
            self._built = None

    def usage_changed(self, node: str, delta: Resources, sign: int) -> None:
        # The fold's hot path: the node's own vector now, its domains' at the next read (see _Pending).
        record = self._nodes.get(node)
        if record is None:
            return
        used = record.used
        for key, amount in delta.items():
            used[key] = used.get(key, 0) + sign * amount
        self._pending.nodes.add(node)

    def usage_noted(self, node: str) -> None:
        """The node's usage vector (the caller's own, see `node_upserted`) changed: its domains follow at the
        next read."""
        if node in self._nodes:
            self._pending.nodes.add(node)

    def network_topology_upserted(self, cnt: ClusterNetworkTopology) -> None:
        if cnt.metadata.name != DEFAULT_CNT_NAME:
            return
        # Only the spec shapes the tree: a status write (ours, echoed back by the watch) must not rebuild it.
        if self._cnt is None or cnt.spec != self._cnt.spec:
            self._built = None
            layers, _ = resolve_cnt_layers(cnt)
            if layers is not None:  # judged here, not at the (lazy) build, so the same events give the same tree
                self._last_good_layers = layers
        self._cnt = cnt

    def network_topology_deleted(self, name: str) -> None:
        if name == DEFAULT_CNT_NAME and self._cnt is not None:
            self._cnt = None
            self._last_good_layers = None
            self._built = None

    def kueue_topology_upserted(self, topology: KueueTopology) -> None:
        if self._kueue.upsert(topology.metadata.name, topology.spec, resolve_kueue_layers(topology)):
            self._built = None

    def kueue_topology_deleted(self, name: str) -> None:
        if self._kueue.delete(name):
            self._built = None

    def kai_topology_upserted(self, topology: KaiTopology) -> None:
        if self._kai.upsert(topology.metadata.name, topology.spec, resolve_kai_layers(topology)):
            self._built = None

    def kai_topology_deleted(self, name: str) -> None:
        if self._kai.delete(name):
            self._built = None

    def hypernode_upserted(self, hn: HyperNode) -> None:
        if self._hypernodes.upsert(hn):  # a status write does not change the spec, so no rebuild
            self._built = None

    def hypernode_deleted(self, name: str) -> None:
        if self._hypernodes.delete(name):
            self._built = None

    # ------------------------------------------------------------------ queries

    @property
    def source(self) -> str:
        return self._ensure().source

    @property
    def source_name(self) -> str:
        """The name of the object the tree is built from: `default` for a ClusterNetworkTopology, the KAI or
        Kueue Topology's name; "" for HyperNodes (many objects) and labels."""
        return self._ensure().source_name

    def kai_topology_names(self) -> frozenset[str]:
        """The names of the KAI Topologies folded (whether or not the tree is built from one)."""
        return frozenset(self._kai.specs)

    @property
    def levels(self) -> tuple[Level, ...]:
        return self._ensure().levels

    @property
    def root(self) -> Domain:
        return self._ensure().root

    @property
    def domains(self) -> list[Domain]:
        """Every domain, indexed by `Domain.id` (the root is id 0)."""
        return self._ensure().domains

    @property
    def problems(self) -> list[Problem]:
        return list(self._ensure().problems)

    @property
    def version(self) -> int:
        self._ensure()
        return self._version

    @property
    def node_names(self) -> list[str]:
        return sorted(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def path(self, node: str) -> tuple[Domain, ...]:
        domain = self._ensure().node_domain.get(node)
        return () if domain is None else domain.path

    def domain_of(self, node: str) -> Domain | None:
        return self._ensure().node_domain.get(node)

    def domain_at(self, node: str, level: int) -> Domain | None:
        for domain in self.path(node):
            if domain.level == level:
                return domain
        return None

    def domains_at(self, level: int) -> list[Domain]:
        built = self._ensure()
        if not 0 <= level < len(built.levels):
            raise TopologyError("Level", str(level), "", f"no such level (0..{len(built.levels) - 1})")
        by_name = built.by_level[level]
        return [by_name[name] for name in sorted(by_name)]

    def domain(self, level: int, name: str) -> Domain | None:
        built = self._ensure()
        if not 0 <= level < len(built.levels):
            return None
        return built.by_level[level].get(name)

    def node_used(self, node: str) -> Resources:
        record = self._nodes.get(node)
        return dict(record.used) if record is not None else {}

    def node_allocatable(self, node: str) -> Resources:
        record = self._nodes.get(node)
        return dict(record.allocatable) if record is not None else {}

    def lca(self, nodes: Iterable[str]) -> Domain:
        """The lowest domain holding every node given."""
        node_domain = self._ensure().node_domain
        leaves: dict[int, Domain] = {}
        for node in nodes:
            domain = node_domain.get(node)
            if domain is None:
                raise TopologyError(NODE_KIND, node, "", "is not a node of the topology tree")
            leaves[domain.id] = domain
        if not leaves:
            raise TopologyError("NodeSet", "", "", "the lowest common ancestor of no nodes is undefined")
        iterator = iter(leaves.values())
        best = next(iterator)
        for other in iterator:
            if best.depth == 0:
                break
            if other.depth >= best.depth:
                if other.path[best.depth] is best:
                    continue
                other = other.path[best.depth]
            else:
                best = best.path[other.depth]
            while best is not other:
                assert best.parent is not None and other.parent is not None
                best, other = best.parent, other.parent
        return best

    def lca_level(self, nodes: Iterable[str]) -> int:
        return self.lca(nodes).level

    def resolve_level(self, name_or_tier: str | int) -> int:
        """Level index of a Koordinator layer name, a Volcano tier number, or a tierName."""
        levels = self._ensure().levels
        # A tier is an int or a short string of ASCII digits ("²" is a digit to str.isdigit, not to int;
        # int refuses strings of thousands of digits): anything else is a name.
        if isinstance(name_or_tier, int) or (isinstance(name_or_tier, str) and name_or_tier.isascii()
                                             and name_or_tier.isdigit() and len(name_or_tier) <= 18):
            tier = int(name_or_tier)
            if tier < 1:
                raise TopologyError("Tier", str(tier), "", "is below 1 (tiers count from 1 at the lowest domain level)")
            # The highest level whose tier does not exceed the one asked for: with HyperNode tiers 1 and 3,
            # "up to tier 2" means tier 1; anything at or above the cluster root's tier means the root.
            allowed = [level.index for level in levels if level.tier <= tier]
            if not allowed:
                lowest = min(level.tier for level in levels)
                raise TopologyError("Tier", str(tier), "", f"is below the cluster's lowest domain tier {lowest}: "
                                    "no domain is that small")
            return min(allowed)
        for level in levels:
            if level.layer == name_or_tier:
                return level.index
        for level in levels:
            if level.tier_name and level.tier_name == name_or_tier:
                return level.index
        for level in levels:
            if level.alias and level.alias == name_or_tier:
                return level.index
        if name_or_tier == NODE_LAYER:
            raise TopologyError("Layer", name_or_tier, "", "is the node itself, not a domain layer")
        known = ", ".join(f"{level.layer}/{level.tier_name}/tier {level.tier}" for level in levels)
        raise TopologyError("Layer", name_or_tier, "", f"is not a layer, tierName or tier of the cluster's "
                            f"topology (known: {known})")

    # ------------------------------------------------------------------ status the daemon writes

    def detail_status(self) -> list[TopologyDetail]:
        """Koordinator's ClusterNetworkTopology `status.detailStatus`: one entry per domain, pre-order,
        children by name; the root is `ClusterTopologyLayer` named "" with no parent; `childTopologyNames`
        is omitted where the children are nodes (`childTopologyLayer: NodeTopologyLayer`); `nodeNum`
        counts every node below. A domain holding both domains and stray nodes (a node missing a lower
        label) lists its domain children, and its nodeNum counts the stray nodes too. Meant for
        `source == SOURCE_CNT` (the daemon writes it to the `default` object)."""
        built = self._ensure()
        details: list[TopologyDetail] = []

        def info(domain: Domain) -> TopologyInfo:
            return TopologyInfo(topology_layer=domain.layer, topology_name="" if domain.parent is None else domain.name)

        def walk(domain: Domain) -> None:
            if domain.children:
                child_layer = domain.children[0].layer
                child_names = [child.name for child in domain.children]
            else:
                child_layer, child_names = (NODE_LAYER, []) if domain.nodes else ("", [])
            details.append(TopologyDetail(
                topology_info=info(domain),
                parent_topology_info=None if domain.parent is None else info(domain.parent),
                child_topology_layer=child_layer,
                child_topology_names=child_names,
                node_num=len(domain.nodes),
            ))
            for child in domain.children:
                walk(child)

        walk(built.root)
        return details

    def hypernode_node_counts(self) -> dict[str, int]:
        """HyperNode name -> `status.nodeCount` (nodes below it); 0 for HyperNodes outside the tree."""
        built = self._ensure()
        counts = dict.fromkeys(self._hypernodes.names(), 0)
        if built.source == SOURCE_HYPERNODES:
            for domain in built.domains[1:]:
                if domain.name in counts:
                    counts[domain.name] = len(domain.nodes)
        return counts

    # ------------------------------------------------------------------ building

    def _ensure(self) -> _Built:
        built = self._built
        if built is None:
            built = self._build()
            self._built = built
            self._version += 1
        return built

    def _build(self) -> _Built:
        problems: list[Problem] = []
        # HyperNodes are judged whichever source wins, so their problems are reported in any case.
        graph, hypernode_problems = self._hypernodes.resolve()
        if self._cnt is not None:
            layers, cnt_problems = resolve_cnt_layers(self._cnt)
            problems += cnt_problems
            if layers is None and self._last_good_layers is not None:
                problems.append(Problem(CNT_KIND, self._cnt.metadata.name, "spec",
                                        "is not usable; the last good layer chain stays in use"))
                layers = self._last_good_layers
            if layers is not None:
                self._forget_matches()
                built = self._build_from_labels(SOURCE_CNT, layers, DEFAULT_CNT_NAME)
                built.problems[:0] = (problems + hypernode_problems + self._kai.problems()
                                      + self._kueue.problems())
                return built
            problems.append(Problem(CNT_KIND, self._cnt.metadata.name, "spec",
                                    "is not usable and no good version was seen; topology falls back to "
                                    "HyperNodes, a KAI or Kueue Topology or node labels"))
        problems += hypernode_problems
        if graph.describes:
            built = self._build_from_hypernodes(graph)
            problems += self._kai.problems() + self._kueue.problems()
        else:  # no HyperNode, or none usable: they must not take the labels' tree away
            self._forget_matches()
            kai_chosen, kai_problems = self._kai.choice(self._nodes)
            problems += kai_problems
            if kai_chosen is not None:
                built = self._build_from_labels(SOURCE_KAI, self._kai.last_good[kai_chosen], kai_chosen)
                problems += self._kueue.problems()
                problems += [Problem(KUEUE_TOPOLOGY_KIND, name, "spec.levels",
                                     f"not used: the tree is built from KAI Topology {kai_chosen!r} "
                                     "(a KAI Topology takes precedence over a Kueue one)")
                             for name in sorted(self._kueue.usable())]
            else:
                chosen, kueue_problems = self._kueue.choice(self._nodes)
                problems += kueue_problems
                if chosen is not None:
                    built = self._build_from_labels(SOURCE_KUEUE, self._kueue.last_good[chosen], chosen)
                else:
                    built = self._build_from_labels(SOURCE_LABELS, self._label_layers())
        built.problems[:0] = problems
        return built

    def _label_layers(self) -> tuple[LayerDef, ...]:
        """The layers of the first label scheme (`LABEL_SCHEMES`) any node carries, those some node carries;
        with none, the NVLink cliques alone (topograph's accelerator layer) if any node has one."""
        present: set[str] = set()
        keys = _TOPOLOGY_KEYS
        for record in self._nodes.values():
            if record.labels:
                found = keys.intersection(record.labels)  # walks the node's few labels, not the keys
                if found:
                    present |= found
        if not present:
            return ()
        chosen = next((scheme for scheme, marks in zip(LABEL_SCHEMES, _SCHEME_KEYS, strict=True) if marks & present),
                      TOPOGRAPH_LAYERS)
        return tuple(layer for layer in chosen if not present.isdisjoint(layer.label_keys))

    def _forget_matches(self) -> None:
        self._regexes = None
        self._matches.clear()
        self._touched.clear()

    def _finish(self, built: _Built) -> None:
        """Fill node lists, children order and aggregates from `built.node_domain`."""
        node_domain = built.node_domain
        nodes = self._nodes
        self._pending.nodes.clear()
        for name in sorted(node_domain):
            domain = node_domain[name]
            domain.direct_nodes.append(name)
            record = nodes[name]
            record.domain = domain
            record.flushed = dict(record.used)
            for ancestor in domain.path:
                ancestor.nodes.append(name)
                total = ancestor.allocatable
                for key, amount in record.allocatable.items():
                    total[key] = total.get(key, 0) + amount
                total = ancestor._used
                for key, amount in record.used.items():
                    total[key] = total.get(key, 0) + amount
        for domain in built.domains:
            if domain.parent is not None:
                domain.parent.children.append(domain)
        for domain in built.domains:
            if len(domain.children) > 1:
                domain.children.sort(key=_domain_name)

    def _build_from_labels(self, source: str, layers: tuple[LayerDef, ...], source_name: str = "") -> _Built:
        depth = len(layers)
        levels = (Level(0, CLUSTER_LAYER, depth + 1, CLUSTER_TIER_NAME),
                  *(Level(i + 1, layer.name, depth - i, layer.tier_name, layer.label_keys, layer.alias)
                    for i, layer in enumerate(layers)))
        built = _Built(source, levels, self._pending, source_name)
        # 1. each node's label values, top first, up to its first missing label
        values_of: dict[str, tuple[str, ...]] = {}
        votes: list[dict[str, dict[str, list[str]]]] = [{} for _ in range(depth + 1)]
        missing: list[tuple[str, int]] = []
        for name in sorted(self._nodes):
            labels = self._nodes[name].labels
            collected: list[str] = []
            for index, layer in enumerate(layers):
                value = next((labels[key] for key in layer.label_keys if key in labels), None)
                if value is None:
                    if (collected and source in (SOURCE_CNT, SOURCE_KAI, SOURCE_KUEUE)) or any(
                            key in labels for lower in layers[index + 1:] for key in lower.label_keys):
                        missing.append((name, index))
                    break
                collected.append(value)
            found = tuple(collected)
            values_of[name] = found
            parent_value = ""
            for index, value in enumerate(found, start=1):
                votes[index].setdefault(value, {}).setdefault(parent_value, []).append(name)
                parent_value = value
        # 2. domains top-down; a domain claimed under two parents keeps the majority's
        for index in range(1, depth + 1):
            level = levels[index]
            for value in sorted(votes[index]):
                claims = votes[index][value]
                ranked = sorted(claims, key=lambda p: (-len(claims[p]), p))
                chosen = ranked[0]
                parent = built.root if index == 1 else built.by_level[index - 1][chosen]
                built.add(index, value, parent)
                if len(ranked) > 1:
                    parent_layer = levels[index - 1]
                    others = [n for p in ranked[1:] for n in claims[p]]
                    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
                    claimed = ", ".join(f"{p} ({len(claims[p])} nodes)" for p in ranked)
                    built.problems.append(Problem(
                        NODE_KIND, others[0], f"metadata.labels[{parent_layer.label_keys[0]}]",
                        f"labels contradict the hierarchy: {level.layer} {value!r} is under {parent_layer.layer} "
                        f"{claimed}; it stays under {chosen!r} (most nodes, then first by name), "
                        f"so nodes {shown} are placed there"))
        for name, index in missing:
            have = values_of[name]
            where = f"{levels[index].layer} {have[-1]!r}" if have else "the cluster root"
            built.problems.append(Problem(
                NODE_KIND, name, f"metadata.labels[{layers[index].label_keys[0] if layers[index].label_keys else ''}]",
                f"is missing while the node has other topology labels; layer {layers[index].name} and those below "
                f"are skipped and the node sits directly under {where}"))
        # 3. nodes
        for name, values in values_of.items():
            built.node_domain[name] = built.by_level[len(values)][values[-1]] if values else built.root
        self._finish(built)
        return built

    def _build_from_hypernodes(self, graph: HyperNodeGraph) -> _Built:
        tiers = sorted(set(graph.tiers.values()), reverse=True)
        top = (tiers[0] if tiers else 0) + 1
        level_of_tier = {tier: index for index, tier in enumerate(tiers, start=1)}
        tier_names: dict[int, str] = {}
        for name in sorted(graph.tiers):
            tier_name = graph.tier_names[name]
            tier = graph.tiers[name]
            if tier_name and (tier not in tier_names or tier_name < tier_names[tier]):
                tier_names[tier] = tier_name
        levels = (Level(0, CLUSTER_LAYER, top, CLUSTER_TIER_NAME),
                  *(Level(level_of_tier[t], layer_name_of(tier_names.get(t, ""), t), t, tier_names.get(t, ""))
                    for t in tiers))
        built = _Built(SOURCE_HYPERNODES, levels, self._pending)
        # domains top-down (a parent's tier is always above its children's)
        for name in sorted(graph.tiers, key=lambda n: (-graph.tiers[n], n)):
            parent_name = graph.parent.get(name)
            parent = built.root if parent_name is None else built.by_level[level_of_tier[graph.tiers[parent_name]]][
                parent_name]
            built.add(level_of_tier[graph.tiers[name]], name, parent)
        # node members: exact names, then one RE2 set over every regexMatch, then labelMatch selectors
        exact: dict[str, list[str]] = {}
        by_pattern: dict[str, list[str]] = {}  # pattern -> HyperNodes listing it
        compiled: dict[str, NamePattern] = {}
        labelled: list[tuple[str, tuple[NodeSelectorRule, ...], list[NodeSelectorRule]]] = []
        for hn_name in sorted(graph.node_rules):
            rules = graph.node_rules[hn_name]
            for rule in rules:
                if rule.pattern is not None:
                    by_pattern.setdefault(rule.pattern.pattern, []).append(hn_name)
                    compiled[rule.pattern.pattern] = rule.pattern
                elif rule.labels is None:
                    exact.setdefault(rule.name, []).append(hn_name)
            selecting = [r for r in rules if r.labels is not None]
            if selecting:
                labelled.append((hn_name, rules, selecting))
        claims: dict[str, list[str]] = {}
        for node, hns in exact.items():
            if node in self._nodes:
                claims.setdefault(node, []).extend(hns)
        members = tuple((pattern, tuple(hns)) for pattern, hns in sorted(by_pattern.items()))
        regexes = self._regexes
        if regexes is None or regexes.members != members:
            regexes = self._regexes = _RegexIndex(members, compiled)
            regexes.refresh(self._nodes, self._nodes)
        else:
            regexes.refresh(self._touched, self._nodes)
        for node, owners in regexes.claims.items():
            claims.setdefault(node, []).extend(owners)
        fresh: dict[str, tuple[tuple[NodeSelectorRule, ...], set[str]]] = {}
        for hn_name, rules, selecting in labelled:
            cached = self._matches.get(hn_name)
            if cached is not None and cached[0] is rules:
                matched = cached[1]
                for node in self._touched:
                    record = self._nodes.get(node)
                    if record is not None and any(rule.matches(node, record.labels) for rule in selecting):
                        matched.add(node)
                    else:
                        matched.discard(node)
            else:
                matched = {node for node, record in self._nodes.items()
                           if any(rule.matches(node, record.labels) for rule in selecting)}
            fresh[hn_name] = (rules, matched)
            for node in matched:
                claims.setdefault(node, []).append(hn_name)
        self._matches = fresh
        self._touched.clear()
        for node in sorted(self._nodes):
            hns = claims.get(node, [])
            if not hns:
                built.node_domain[node] = built.root
                continue
            candidates = [built.by_level[level_of_tier[graph.tiers[h]]][h] for h in sorted(set(hns))]
            candidates.sort(key=lambda d: (d.level * -1, d.name))
            chosen = candidates[0]
            built.node_domain[node] = chosen
            conflicting = [d.name for d in candidates[1:] if d not in chosen.path]
            if conflicting:
                built.problems.append(Problem(
                    HYPERNODE_KIND, conflicting[0], "spec.members",
                    f"node {node!r} is claimed by HyperNodes {', '.join([chosen.name, *conflicting])}; it stays "
                    f"under {chosen.name!r} (lowest tier, then first by name)"))
        self._finish(built)
        return built


class _RegexIndex:
    """Which HyperNodes' regexMatch members take each node: every pattern in one RE2 set, each node
    name scanned once for all of them (`state/name_patterns.py`), kept between builds."""

    __slots__ = ("claims", "members", "owners", "patterns")

    def __init__(self, members: tuple[tuple[str, tuple[str, ...]], ...], compiled: Mapping[str, NamePattern]) -> None:
        self.members = members  # (pattern, HyperNodes listing it), by pattern: what this index was built for
        self.owners = [hns for _, hns in members]
        self.patterns = NamePatternSet([compiled[pattern] for pattern, _ in members])
        self.claims: dict[str, tuple[str, ...]] = {}  # node -> HyperNodes whose pattern it matches

    def refresh(self, nodes: Iterable[str], known: Container[str]) -> None:
        """Match these nodes again; those no longer `known` (deleted) lose their claims."""
        owners, claims = self.owners, self.claims
        for node in nodes:
            found = self.patterns.matching(node) if node in known else []
            if not found:
                claims.pop(node, None)
            elif len(found) == 1:
                claims[node] = owners[found[0]]
            else:
                claims[node] = tuple(hn for index in found for hn in owners[index])


def _domain_name(domain: Domain) -> str:
    return domain.name
