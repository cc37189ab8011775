"""`toposched topology show|generate`: look at a scenario's network topology, or convert it.

- `show --scenario FILE [--json]` folds the scenario's objects (nodes, pods already carrying
  spec.nodeName, ClusterNetworkTopology, HyperNodes, Kueue and KAI Topologies) into a `ClusterState`
  and prints its topology: the source (and the object, for a ClusterNetworkTopology or a Kueue or
  KAI Topology), the levels (layer, tier, tierName, node label keys), then a rich tree with layer
  names, domains, node counts and free GPUs, or with `--json` the
  document other tools read: `{"layers": [layer names, top first], "root": domain}`, every domain
  `{"name", "layer", "tier", "nodeCount", "free": {resource: quantity}, "children": [domains],
  "nodes": [node names]}`. `nodes` lists the nodes hanging directly on a domain, which in a fully
  labelled cluster is the lowest domains only (a node missing a lower layer's label shows up on the
  domain it stops at).
- `generate --scenario FILE --to hypernodes|cnt` writes HyperNode or ClusterNetworkTopology YAML
  describing the same tree, so a Koordinator user can move to HyperNodes and back: loading the
  generated HyperNodes over the same nodes gives the same tree. Going to a ClusterNetworkTopology
  from HyperNodes also needs node labels; they are written as `kubectl label` comments.
  `generate --kubeconfig PATH [--context NAME]` does the same from a live cluster's Nodes,
  ClusterNetworkTopologies and HyperNodes (listed once, as `show --kubeconfig` lists them).

- `show --kubeconfig PATH [--context NAME] [--json]` does the same with a live cluster: it lists
  Nodes, ClusterNetworkTopologies, HyperNodes, Kueue and KAI Topologies and Pods once (the watchers' own
  paginated list, each
  object decoded from raw JSON by `events.ingest`; a topology CRD that is not installed is skipped)
  and folds them. Exactly one of --scenario / --kubeconfig.

Only reads files or lists objects from the API (never writes to it), and writes to stdout/stderr;
the tree itself is `state/topology.py`'s.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import yaml
from rich.console import Console
from rich.tree import Tree

from daemon.cli.exits import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    exit_codes_epilog,
    reporting,
)
from daemon.config import ConfigError, load_config
from daemon.kube.client import KubeApiError, KubeConnectError, connect
from daemon.kube.watch import CrdMissing, KindWatcher
from events.ingest import KIND_BY_NAME
from events.model import Event
from events.objects import CLUSTER_NETWORK_TOPOLOGY_API, HYPERNODE_API, KAI_NODE_POOL_LABEL
from events.scenario import ScenarioError, load_scenario
from state.cluster import ClusterState
from state.resources import format_quantity, is_host_port
from state.topology import SOURCE_HYPERNODES, SOURCE_KAI, SOURCE_KUEUE, TOPOGRAPH_LAYERS, Domain, Level, TopologyTree
from state.topology_validation import DEFAULT_CNT_NAME, NODE_LAYER

GPU = "nvidia.com/gpu"
GENERATED_LABEL_PREFIX = "topology.toposched.io/"


def tree_of_scenario(path: str) -> tuple[TopologyTree, list[str]]:
    """Fold every object of the scenario (timing annotations aside) and return its tree and load problems."""
    scenario = load_scenario(path)
    state = ClusterState()
    for item in sorted(scenario.objects, key=lambda o: o.index):
        state.apply(item.info.upsert(item.obj))
    return state.topology, list(scenario.problems)


class _Fold:
    """A `daemon.kube.watch.Recorder` that folds straight into a state (nothing is logged)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    async def record(self, event: Event) -> None:
        self.state.apply(event)

    async def record_many(self, events: Sequence[Event]) -> None:
        self.state.apply_all(events)

    async def record_listed(self, events: Sequence[Event]) -> int:
        changed = self.state.not_held(events)
        self.state.apply_all(changed)
        return len(events) - len(changed)


# Nodes first: pods count on them.
LIVE_KINDS = ("Node", "ClusterNetworkTopology", "HyperNode", "KueueTopology", "KaiTopology", "Pod")
TREE_KINDS = LIVE_KINDS[:5]  # what the tree is built from (generate needs no pods: it writes no free capacity)


async def state_of_cluster(kubeconfig: str, context: str | None = None, kinds: Sequence[str] = LIVE_KINDS,
                           kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> ClusterState:
    """List `kinds` (by default those the tree needs) from a live API server and fold them into a fresh state
    (KAI node pools named by `kai_node_pool_label`)."""
    overrides: dict[str, Any] = {"kubeconfig": kubeconfig, "leader_election.enabled": False}
    if context:
        overrides["context"] = context
    config = load_config(None, overrides)
    state = ClusterState(kai_node_pool_label=kai_node_pool_label)
    recorder = _Fold(state)
    async with connect(config, pool_size=4) as client:
        for name in kinds:
            try:
                await KindWatcher(client, KIND_BY_NAME[name], recorder, config.timeouts).relist()
            except CrdMissing:
                continue  # e.g. no HyperNode CRD: that source is simply absent
    return state


def listed_state(kubeconfig: str, context: str | None, kinds: Sequence[str] = LIVE_KINDS,
                 kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> ClusterState:
    """`state_of_cluster` for a command: what stops it is a `CommandError` (a bad kubeconfig path or context
    is usage, exit 2; an API server that cannot be reached or refuses the list is the environment, 3)."""
    try:
        return anyio.run(state_of_cluster, kubeconfig, context, kinds, kai_node_pool_label)
    except ConfigError as error:
        raise CommandError(str(error), EXIT_USAGE) from error
    except KubeConnectError as error:
        raise CommandError(f"no usable API server configuration: {error}", EXIT_USAGE) from error
    except KubeApiError as error:
        raise CommandError(f"cannot read the cluster: {error}", EXIT_ENVIRONMENT) from error


def _tree_of_cluster(kubeconfig: str, context: str | None,
                     kinds: Sequence[str] = LIVE_KINDS) -> tuple[TopologyTree, list[str]]:
    state = listed_state(kubeconfig, context, kinds)
    return state.topology, [str(problem) for problem in state.undecodable.values()]


def _tree_of(args: argparse.Namespace, kinds: Sequence[str] = LIVE_KINDS) -> tuple[TopologyTree, list[str], str]:
    """The tree of `--scenario` or `--kubeconfig`, the problems met reading it, and which it was."""
    if args.kubeconfig:
        return (*_tree_of_cluster(args.kubeconfig, args.context, kinds), "cluster")
    return (*_load(args.scenario), "scenario")


# --------------------------------------------------------------------------- show


def domain_json(domain: Domain) -> dict[str, Any]:
    free = domain.free()
    return {
        "name": domain.name,
        "layer": domain.layer,
        "tier": domain.tier,
        "nodeCount": len(domain.nodes),
        "free": {name: format_quantity(name, free[name]) for name in sorted(free) if not is_host_port(name)},
        "children": [domain_json(child) for child in domain.children],
        "nodes": list(domain.direct_nodes),
    }


def tree_json(tree: TopologyTree) -> dict[str, Any]:
    return {"layers": [level.layer for level in tree.levels], "root": domain_json(tree.root)}


def _gpus(domain: Domain) -> str:
    free = domain.free().get(GPU, 0)
    total = domain.allocatable.get(GPU, 0)
    return f"{format_quantity(GPU, free)}/{format_quantity(GPU, total)} GPUs free"


def _label(domain: Domain) -> str:
    nodes = len(domain.nodes)
    return (f"[bold]{domain.layer}[/bold] [cyan]{domain.name}[/cyan] [dim](tier {domain.tier}"
            f"{', ' + domain.tier_name if domain.tier_name else ''})[/dim] · {nodes} node{'s' * (nodes != 1)} · "
            f"{_gpus(domain)}")


def rich_tree(tree: TopologyTree, *, max_nodes: int = 8) -> Tree:
    def grow(branch: Tree, domain: Domain) -> None:
        for child in domain.children:
            grow(branch.add(_label(child)), child)
        shown = domain.direct_nodes[:max_nodes]
        if shown:
            more = len(domain.direct_nodes) - len(shown)
            prefix = "nodes directly here: " if domain.children else ""
            branch.add(f"[dim]{prefix}{', '.join(shown)}{f' … (+{more})' if more else ''}[/dim]")

    top = Tree(_label(tree.root))
    grow(top, tree.root)
    return top


def source_line(tree: TopologyTree) -> str:
    """The tree's source, and the object it is built from where that is one object (`ClusterNetworkTopology
    default`, `KueueTopology default (kueue.x-k8s.io Topology)`, `KaiTopology default (kai.scheduler Topology)`)."""
    if tree.source == SOURCE_KUEUE:
        return f"{tree.source} {tree.source_name} (kueue.x-k8s.io Topology)"
    if tree.source == SOURCE_KAI:
        return f"{tree.source} {tree.source_name} (kai.scheduler Topology)"
    return f"{tree.source} {tree.source_name}" if tree.source_name else tree.source


def levels_line(tree: TopologyTree) -> str:
    """Each level top first: layer (tier, tierName, the node label keys it is built from)."""
    def one(level: Level) -> str:
        parts = [f"tier {level.tier}", *([level.tier_name] if level.tier_name else []),
                 *([" | ".join(level.label_keys)] if level.label_keys else [])]
        return f"{level.layer} ({', '.join(parts)})"

    return " > ".join(one(level) for level in tree.levels)


def _show(args: argparse.Namespace) -> int:
    tree, load_problems, source = _tree_of(args)
    if args.json:
        sys.stdout.write(json.dumps(tree_json(tree), indent=2) + "\n")
    else:
        console = Console()
        console.print(f"source: [bold]{source_line(tree)}[/bold]   levels: {levels_line(tree)}", highlight=False)
        console.print(rich_tree(tree))
    _report(tree, load_problems, source)
    return EXIT_OK


# --------------------------------------------------------------------------- generate


def _dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")
    return name[:253] or "domain"


def hypernode_names(tree: TopologyTree) -> dict[int, str]:
    """Domain id -> HyperNode name: the domain's name, made unique across levels where needed."""
    seen: dict[str, int] = {}
    for domain in tree.domains[1:]:
        base = _dns_name(domain.name)
        seen[base] = seen.get(base, 0) + 1
    names: dict[int, str] = {}
    used: set[str] = set()
    for domain in tree.domains[1:]:
        base = _dns_name(domain.name)
        name = base if seen[base] == 1 else _dns_name(f"{domain.tier_name or 'tier' + str(domain.tier)}-{domain.name}")
        while name in used:
            name = f"{name}-{domain.level}"
        used.add(name)
        names[domain.id] = name
    return names


def generate_hypernodes(tree: TopologyTree) -> list[dict[str, Any]]:
    names = hypernode_names(tree)
    documents: list[dict[str, Any]] = []
    for level in tree.levels[1:]:
        for domain in tree.domains_at(level.index):
            members: list[dict[str, Any]] = [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": names[child.id]}}}
                for child in domain.children
            ]
            members += [{"type": "Node", "selector": {"exactMatch": {"name": node}}} for node in domain.direct_nodes]
            spec: dict[str, Any] = {"tier": domain.tier}
            if domain.tier_name:
                spec["tierName"] = domain.tier_name
            spec["members"] = members
            documents.append({"apiVersion": HYPERNODE_API, "kind": "HyperNode",
                              "metadata": {"name": names[domain.id]}, "spec": spec})
    return documents


def _label_key(tier_name: str, tier: int) -> str:
    for layer in TOPOGRAPH_LAYERS:
        if layer.tier_name == tier_name:
            return layer.label_keys[0]
    return GENERATED_LABEL_PREFIX + (_dns_name(tier_name) if tier_name else f"tier-{tier}")


def generate_cnt(tree: TopologyTree) -> tuple[dict[str, Any], list[str], list[str]]:
    """The ClusterNetworkTopology, the `kubectl label` commands nodes need (HyperNode source), warnings."""
    keys = {level.index: (list(level.label_keys) if level.label_keys else [_label_key(level.tier_name, level.tier)])
            for level in tree.levels[1:]}
    layers: list[dict[str, Any]] = []
    parent = ""
    for level in tree.levels[1:]:
        layer: dict[str, Any] = {"topologyLayer": level.layer, "labelKey": keys[level.index]}
        if parent:
            layer["parentTopologyLayer"] = parent
        layers.append(layer)
        parent = level.layer
    bottom: dict[str, Any] = {"topologyLayer": NODE_LAYER}
    if parent:
        bottom["parentTopologyLayer"] = parent
    layers.append(bottom)
    cnt = {"apiVersion": CLUSTER_NETWORK_TOPOLOGY_API, "kind": "ClusterNetworkTopology",
           "metadata": {"name": DEFAULT_CNT_NAME}, "spec": {"networkTopologySpec": layers}}
    commands: list[str] = []
    warnings: list[str] = []
    if tree.source == SOURCE_HYPERNODES:
        for domain in tree.domains[1:]:
            if domain.children and domain.children[0].level != domain.level + 1:
                warnings.append(f"{domain.layer} {domain.name} holds {domain.children[0].layer} "
                                f"{domain.children[0].name} directly; a ClusterNetworkTopology cannot skip a layer, "
                                "so nodes below it stop at the first missing label")
        for node in tree.node_names:
            labels = [f"{keys[d.level][0]}={d.name}" for d in tree.path(node)[1:]]
            if labels:
                commands.append(f"kubectl label node {node} {' '.join(labels)} --overwrite")
    return cnt, commands, warnings


def _generate(args: argparse.Namespace) -> int:
    tree, load_problems, source = _tree_of(args, TREE_KINDS)
    if args.to == "hypernodes":
        text = yaml.safe_dump_all(generate_hypernodes(tree), sort_keys=False)
    else:
        cnt, commands, warnings = generate_cnt(tree)
        text = yaml.safe_dump(cnt, sort_keys=False)
        if commands:
            text += "# Nodes need these labels for the layers above:\n" + "".join(f"# {c}\n" for c in commands)
        for warning in warnings:
            sys.stderr.write(f"warning: {warning}\n")
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    _report(tree, load_problems, source)
    return EXIT_OK


# --------------------------------------------------------------------------- shared


def _load(path: str) -> tuple[TopologyTree, list[str]]:
    try:
        return tree_of_scenario(path)
    except ScenarioError as error:
        raise CommandError(str(error), EXIT_USAGE) from error
    except RecursionError as error:  # JSON nested thousands deep: the decoder's recursion, not a bug of ours
        raise CommandError(f"{path} is nested too deeply to hold Kubernetes objects", EXIT_USAGE) from error


def _report(tree: TopologyTree, load_problems: list[str], source: str = "scenario") -> None:
    for problem in load_problems:
        sys.stderr.write(f"{source}: {problem}\n")
    for found in tree.problems:
        sys.stderr.write(f"topology: {found}\n")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched topology",
        description="Show the network topology tree of a scenario or a live cluster, or convert it.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG)
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="print the topology tree of a scenario or a live cluster",
                               formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG)
    source = show.add_mutually_exclusive_group(required=True)
    source.add_argument("--scenario", help="scenario YAML file or directory")
    source.add_argument("--kubeconfig", metavar="PATH", help="read Nodes, Pods and topology objects from this cluster")
    show.add_argument("--context", help="kubeconfig context (with --kubeconfig)")
    show.add_argument("--json", action="store_true", help="print the machine-readable JSON document")
    generate = commands.add_parser("generate", help="write HyperNode or ClusterNetworkTopology YAML for the tree",
                                   formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG)
    origin = generate.add_mutually_exclusive_group(required=True)
    origin.add_argument("--scenario", help="scenario YAML file or directory")
    origin.add_argument("--kubeconfig", metavar="PATH",
                        help="read Nodes, ClusterNetworkTopologies and HyperNodes from this cluster (reads only)")
    generate.add_argument("--context", help="kubeconfig context (with --kubeconfig)")
    generate.add_argument("--to", required=True, choices=("hypernodes", "cnt"), help="what to write")
    generate.add_argument("--output", "-o", help="write to this file instead of standard output")
    return parser


_EPILOG = exit_codes_epilog(
    ok="done (problems found in the topology objects are printed on standard error as warnings)",
    usage="a bad flag, a scenario that cannot be read, an unusable kubeconfig path or context",
    environment="the API server cannot be reached or refuses the list; --output cannot be written")


@reporting("topology")
def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if args.command == "show":
        return _show(args)
    return _generate(args)
