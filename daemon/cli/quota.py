"""`toposched quota show`: the quota trees of a scenario or a live cluster, with what each quota holds.

- `show --scenario FILE [--json]` folds the scenario's objects (timing annotations aside: every
  object as created, pods carrying spec.nodeName as running) into a `ClusterState` and prints each
  dialect's tree (Koordinator ElasticQuotas, capacity scheduling ElasticQuotas, Volcano Queues, KAI
  Queues):
  per quota its min and max, what it uses (bound, assumed and nominated pods), its runtime (the share
  it may use now: min plus its weighted share of idle capacity; for capacity scheduling, what the
  unused sum of mins leaves it) and how many of its pods are pending, then the problems found in
  the quota objects. With `--json`, the document other tools read: `{"trees": [{"dialect", "quotas":
  [quota]}], "problems": [text]}`, every quota `{"name", "kind", "key", "min", "max", "used",
  "runtime", "pending", "children": [quota]}` (quantities as Kubernetes writes them).
- `show --kubeconfig PATH [--context NAME] [--json]` does the same with a live cluster: it lists
  Nodes, the quota kinds, every PodGroup kind and Pods once (the watchers' own list; a CRD that is
  not installed is skipped) and folds them. Exactly one of --scenario / --kubeconfig.

Only reads files or lists objects from the API (never writes to it); the trees and the numbers are
`state/quota.py`'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.tree import Tree

from daemon.cli.exits import EXIT_OK, EXIT_USAGE, CommandError, exit_codes_epilog, reporting
from daemon.cli.topology import listed_state
from daemon.config import pool_label_problem
from events.objects import KAI_NODE_POOL_LABEL
from events.scenario import ScenarioError, load_scenario
from state.cluster import ClusterState
from state.quota import DIALECTS, Quota, shown_amount

# nodes first (the runtime's total), quotas and gangs before the pods that join them
LIVE_KINDS = ("Node", "ElasticQuota", "CapacityElasticQuota", "Queue", "KaiQueue", "PodGroup", "VolcanoPodGroup",
              "SchedulerPluginsPodGroup", "KaiPodGroup", "Pod")
TITLES = {"koordinator": "Koordinator ElasticQuotas (scheduling.sigs.k8s.io)",
          "scheduler-plugins": "capacity scheduling ElasticQuotas (scheduling.x-k8s.io)",
          "volcano": "Volcano Queues (scheduling.volcano.sh)",
          "kai": "KAI Scheduler Queues (scheduling.run.ai)"}


def state_of_scenario(path: str, kai_node_pool_label: str = KAI_NODE_POOL_LABEL) -> tuple[ClusterState, list[str]]:
    """Fold every object of the scenario (timing annotations aside) and return the state and load problems."""
    scenario = load_scenario(path)
    state = ClusterState(kai_node_pool_label=kai_node_pool_label)
    for item in sorted(scenario.objects, key=lambda o: o.index):
        state.apply(item.info.upsert(item.obj))
    return state, list(scenario.problems)


def _quantities(values: Mapping[str, int]) -> dict[str, str]:
    return {resource: shown_amount(resource, amount) for resource, amount in sorted(values.items()) if amount}


def _pending(state: ClusterState) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in state.pending:
        quota = state.quotas.quota_of(key)
        node: Quota | None = quota
        while node is not None and not node.is_root:
            counts[node.id] = counts.get(node.id, 0) + 1
            node = node.parent
    return counts


def quota_json(state: ClusterState, quota: Quota, pending: Mapping[str, int]) -> dict[str, Any]:
    used = {r: a for r, a in quota.used.items() if r in quota.constrained}
    return {
        "name": quota.name, "kind": quota.kind, "key": quota.key,
        "min": _quantities(quota.min), "max": _quantities(quota.max),
        "used": _quantities(used), "runtime": _quantities(state.quotas.runtime(state, quota)),
        "pending": pending.get(quota.id, 0),
        "children": [quota_json(state, child, pending) for child in quota.children],
    }


def document(state: ClusterState) -> dict[str, Any]:
    """The JSON document of `show --json` (see the module docstring)."""
    book = state.quotas
    pending = _pending(state)
    trees = [{"dialect": dialect, "quotas": [quota_json(state, q, pending) for q in book.roots[dialect].children]}
             for dialect in DIALECTS if book.roots[dialect].children]
    return {"trees": trees, "problems": [str(problem) for problem in book.all_problems()]}


def _line(quota: dict[str, Any], label: str) -> str:
    resources = sorted(set(quota["min"]) | set(quota["max"]) | set(quota["used"]) | set(quota["runtime"]))
    parts = []
    for resource in resources:
        parts.append(f"{resource}: min {quota['min'].get(resource, '0')} / max {quota['max'].get(resource, '-')} / "
                     f"used {quota['used'].get(resource, '0')} / runtime {quota['runtime'].get(resource, '-')}")
    pending = f"; {quota['pending']} pod(s) pending" if quota["pending"] else ""
    return f"[bold]{label}[/bold]  " + ("; ".join(parts) or "no resource named") + pending


def _add(node: Tree, quota: dict[str, Any], dialect: str) -> None:
    label = {"volcano": "queue", "kai": "KAI queue", "scheduler-plugins": "ElasticQuota"}.get(dialect, "quota")
    branch = node.add(_line(quota, f"{label} {quota['name']}"))
    for child in quota["children"]:
        _add(branch, child, dialect)


def render(doc: dict[str, Any], console: Console) -> None:
    if not doc["trees"]:
        console.print("no quota objects (ElasticQuota, Queue): no pod is limited by a quota")
    for tree in doc["trees"]:
        root = Tree(f"[bold]{TITLES[tree['dialect']]}[/bold]")
        for quota in tree["quotas"]:
            _add(root, quota, tree["dialect"])
        console.print(root)
    for problem in doc["problems"]:
        console.print(f"[yellow]problem[/yellow] {problem}")


def parser() -> argparse.ArgumentParser:
    epilog = exit_codes_epilog(
        usage="a bad flag, a scenario that cannot be read, an unusable kubeconfig path or context",
        environment="the API server cannot be reached or refuses the list")
    parser = argparse.ArgumentParser(prog="toposched quota",
                                     description="Show the quota trees of a scenario or a live cluster.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="print each quota's min, max, usage and runtime",
                               formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)
    source = show.add_mutually_exclusive_group(required=True)
    source.add_argument("--scenario", help="scenario YAML file or directory")
    source.add_argument("--kubeconfig", metavar="PATH", help="read Nodes, quotas, PodGroups and Pods from this cluster")
    show.add_argument("--context", help="kubeconfig context (with --kubeconfig)")
    show.add_argument("--json", action="store_true", help="print the machine-readable JSON document")
    show.add_argument("--kai-node-pool-label", default=KAI_NODE_POOL_LABEL, metavar="KEY",
                      help="the node label naming KAI node pools, as the daemon's kai_node_pool_label (default "
                           "%(default)s; \"\" for no pools): each pool's KAI queues share that pool's nodes")
    return parser


@reporting("quota")
def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    bad_label = pool_label_problem(args.kai_node_pool_label)
    if bad_label is not None:
        raise CommandError(f"--kai-node-pool-label: {bad_label}", EXIT_USAGE)
    if args.scenario:
        try:
            state, load_problems = state_of_scenario(args.scenario, args.kai_node_pool_label)
        except ScenarioError as error:
            raise CommandError(str(error), EXIT_USAGE) from error
        except RecursionError as error:  # JSON nested thousands deep: the decoder's recursion, not a bug of ours
            raise CommandError(f"{args.scenario} is nested too deeply to hold Kubernetes objects",
                               EXIT_USAGE) from error
        for problem in load_problems:
            sys.stderr.write(f"warning: {problem}\n")
    else:
        state = listed_state(args.kubeconfig, args.context, LIVE_KINDS, args.kai_node_pool_label)
    doc = document(state)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render(doc, Console(highlight=False))
    return EXIT_OK
