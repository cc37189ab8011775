"""`toposched demo`: devcluster, the daemon and a sample training workload, on this machine, in seconds.

What happens (the first command of the README):
1. devcluster starts on 127.0.0.1 with a synthetic spine-block-NVLink GPU cluster
   (`daemon.cli.demo_workload`: 48 nodes of 8 GPUs with NVIDIA topograph labels).
2. The real daemon (`daemon.cli.run.Daemon`) starts in this process and talks to it over HTTP, as it
   would to a real cluster: list+watch, event log, the scheduler loop, Binding and Eviction calls.
3. Wave 1 arrives: gangs of several sizes, MustGather and PreferGather jobs, and one job that cannot
   fit (MustGather into an NVLink domain too small for it), which stays pending and says why.
4. Wave 2: a high-priority job arrives on the full cluster and preempts whole lower-priority jobs.
5. The end: the topology tree with what runs where, and a table of every gang (pods, the domain and
   layer holding it, its nodes, or why it waits). Exit 0 when every job did what it should.

`--log-dir DIR` keeps the event log (for `toposched replay DIR --verify` / `--explain`);
`--keep-running` keeps the cluster up afterwards and prints the kubeconfig path for kubectl (a
temporary file, or `--kubeconfig PATH`). The whole run is bounded by `--timeout` (default 50 s) and
fails with a clear message rather than hang. Printed to a pipe or a file, the output is the same
tables one after the other (132 columns wide), each starting on its own line.

Must never: bypass the daemon (the demo only creates objects and reads the results, as a user would).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from daemon.cli import demo_workload as world
from daemon.cli.exits import EXIT_FINDING, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, exit_codes_epilog, reporting
from daemon.cli.run import Daemon
from daemon.config import ConfigError, decode_config
from daemon.telemetry.observability import configure_logging, trace_export_from_env
from devcluster.cluster import DevCluster
from events.model import PreemptionPlanned
from state.cluster import ClusterState
from state.topology import Domain, TopologyError

_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta", "bright_green")


class JobView:
    """What the demo knows of one job, read from the API server and the daemon's state."""

    def __init__(self, job: world.DemoJob, colour: str) -> None:
        self.job = job
        self.colour = colour
        self.nodes: dict[str, str] = {}  # pod name -> node
        self.ever_bound = False
        self.gone = 0  # pods that were bound and then disappeared (preempted)
        self.reason = ""
        self.submitted = False

    @property
    def key(self) -> str:
        return f"{world.NAMESPACE}/{self.job.name}"

    @property
    def bound(self) -> int:
        return sum(1 for node in self.nodes.values() if node)

    @property
    def status(self) -> str:
        if not self.submitted:
            return "waiting for wave 2"
        if self.gone and not self.bound:
            return "preempted"
        if self.bound == self.job.pods:
            return "bound"
        if self.bound:
            return "binding"
        return "pending"


def _refresh(cluster: DevCluster, state: ClusterState | None, views: list[JobView]) -> None:
    for view in views:
        if not view.submitted:
            continue
        for index in range(view.job.pods):
            name = f"{view.job.name}-{index}"
            found = cluster.store.find("pods", name, world.NAMESPACE)
            if found is None:
                if view.nodes.get(name):
                    view.gone += 1
                view.nodes[name] = ""
                continue
            view.nodes[name] = str(found.get("spec", {}).get("nodeName") or "")
        if view.bound == view.job.pods:
            view.ever_bound = True
        if state is not None:
            gang = state.gangs.get(view.key)
            if gang is not None:
                view.reason = gang.last_reason


def _settled(view: JobView) -> bool:
    if view.job.expect == "pending":
        return bool(view.reason) and view.bound == 0
    return view.bound == view.job.pods


def _progress(views: list[JobView], phase: str, started: float) -> Table:
    table = Table(title=f"toposched demo: {phase} ({time.monotonic() - started:4.1f}s)", expand=False)
    table.add_column("gang")
    table.add_column("pods", justify="right")
    table.add_column("strategy")
    table.add_column("status")
    table.add_column("why / note", overflow="fold", max_width=70)
    for view in views:
        job = view.job
        status = view.status
        style = {"bound": "green", "pending": "yellow", "preempted": "red", "binding": "cyan"}.get(status, "dim")
        strategy = f"{job.strategy} {job.layer}".strip() or "-"
        note = view.reason if status in ("pending", "binding") and view.reason else job.note
        table.add_row(Text(job.name, style=view.colour), f"{view.bound}/{job.pods}", strategy,
                      Text(status, style=style), note)
    return table


def _topology_tree(state: ClusterState, views: list[JobView]) -> Tree:
    owner: dict[str, list[JobView]] = {}
    for view in views:
        for node in view.nodes.values():
            if node:
                owner.setdefault(node, []).append(view)
    tree_model = state.topology

    def label(domain: Domain) -> Text:
        used = sum(1 for node in domain.nodes if node in owner)
        return Text.assemble((f"{domain.name or 'cluster'}", "bold"), f"  {domain.layer}  ",
                             (f"{used}/{len(domain.nodes)} nodes busy", "dim"))

    def add(branch: Tree, domain: Domain) -> None:
        if not domain.children:
            cells = Text()
            for node in domain.nodes:
                jobs = owner.get(node, [])
                if jobs:
                    cells.append(f" {'+'.join(j.job.name for j in jobs)}", style=jobs[0].colour)
                else:
                    cells.append(" ·free·", style="dim")
            branch.add(Text.assemble(label(domain), "\n ", cells))
            return
        child_branch = branch.add(label(domain))
        for child in domain.children:
            add(child_branch, child)

    root = Tree(Text(f"topology ({tree_model.source}): " + " > ".join(level.layer for level in tree_model.levels),
                     style="bold"))
    for child in tree_model.root.children:
        add(root, child)
    return root


def _landing(state: ClusterState, views: list[JobView]) -> Table:
    table = Table(title="where every gang landed")
    table.add_column("gang")
    table.add_column("pods", justify="right")
    table.add_column("domain / layer")
    table.add_column("nodes", overflow="fold", max_width=60)
    table.add_column("outcome", overflow="fold", max_width=60)
    for view in views:
        nodes = sorted({node for node in view.nodes.values() if node})
        where = "-"
        if nodes:
            try:
                domain = state.topology.lca(nodes)
                where = f"{domain.name or 'cluster'} / {domain.layer}"
            except TopologyError:
                where = "?"
        if view.status == "bound":
            outcome = Text("bound", style="green")
        elif view.status == "preempted":
            outcome = Text(f"preempted (all {view.gone} pods evicted for a higher-priority job)", style="red")
        else:
            outcome = Text(f"{view.status}: {view.reason or 'no reason recorded'}", style="yellow")
        table.add_row(Text(view.job.name, style=view.colour), f"{view.bound}/{view.job.pods}", where,
                      _compact(nodes), outcome)
    return table


def _compact(nodes: list[str]) -> str:
    """gpu-s0-b1-n0-0 gpu-s0-b1-n0-1 ... -> gpu-s0-b1-n0-{0,1,...}: one entry per NVLink domain."""
    if not nodes:
        return "-"
    groups: dict[str, list[str]] = {}
    for node in nodes:
        prefix, _, suffix = node.rpartition("-")
        groups.setdefault(prefix, []).append(suffix)
    parts = [f"{prefix}-{{{','.join(suffixes)}}}" if len(suffixes) > 1 else f"{prefix}-{suffixes[0]}"
             for prefix, suffixes in groups.items()]
    return " ".join(parts)


def _check(views: list[JobView]) -> list[str]:
    problems = []
    for view in views:
        expect = view.job.expect
        if expect in ("bound", "bound-after-preemption") and view.status not in ("bound", "preempted"):
            problems.append(f"{view.job.name}: expected to be bound, is {view.status} ({view.reason})")
        if expect == "pending" and (view.bound or not view.reason):
            problems.append(f"{view.job.name}: expected to stay pending with a reason")
    return problems


async def _wait_settled(cluster: DevCluster, daemon: Daemon, views: list[JobView], live: Live, phase: str,
                        started: float, wanted: list[JobView]) -> None:
    while True:
        _refresh(cluster, daemon.state, views)
        live.update(_progress(views, phase, started))
        if all(_settled(view) for view in wanted):
            return
        await anyio.sleep(0.1)


async def _demo(args: argparse.Namespace, console: Console) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toposched-demo-") as temporary:
        return await _demo_in(args, console, Path(temporary), started)


async def _demo_in(args: argparse.Namespace, console: Console, workdir: Path, started: float) -> int:
    log_dir = Path(args.log_dir) if args.log_dir else workdir / "log"
    kubeconfig_path = Path(args.kubeconfig) if args.kubeconfig else workdir / "kubeconfig"
    views = [JobView(job, _COLOURS[index % len(_COLOURS)]) for index, job in enumerate(world.JOBS)]
    stop = anyio.Event()
    async with DevCluster(kubelet_delay=0.02) as cluster:
        cluster.write_kubeconfig(kubeconfig_path, namespace=world.NAMESPACE)
        cluster.load_objects([world.namespace(), *world.priority_classes(), *world.nodes()])
        config = decode_config({
            "kubeconfig": str(kubeconfig_path), "log_dir": str(log_dir), "fsync": "interval:50ms",
            "address": "127.0.0.1:0", "leader_election": {"enabled": False},
            "timeouts": {"backoff_initial_seconds": 0.05, "backoff_max_seconds": 1.0},
        })
        daemon = Daemon(config, shutdown_grace_seconds=5.0)
        async with anyio.create_task_group() as group:
            await group.start(daemon.run, stop)
            preemptions: list[PreemptionPlanned] = []
            if daemon.journal is not None:
                daemon.journal.subscribe(
                    lambda event: preemptions.append(event) if isinstance(event, PreemptionPlanned) else None
                )
            endpoints = daemon.endpoints
            console.print(f"devcluster at {cluster.url}: {len(world.nodes())} GPU nodes "
                          f"({world.SPINES} spines x {world.BLOCKS_PER_SPINE} blocks x {world.NVL_PER_BLOCK} "
                          f"NVLink domains x {world.NODES_PER_NVL} nodes, {world.GPUS_PER_NODE} GPUs each); "
                          f"daemon metrics at http://127.0.0.1:{endpoints.port if endpoints else 0}/metrics",
                          soft_wrap=True)
            timed_out = False
            with Live(_progress(views, "wave 1", started), console=console, refresh_per_second=8,
                      transient=False) as live, anyio.move_on_after(args.timeout - (time.monotonic() - started)) \
                    as bound:
                first = [view for view in views if view.job.phase == 1]
                for view in first:
                    cluster.load_objects([world.pod_group(view.job), *world.pods(view.job)])
                    view.submitted = True
                await _wait_settled(cluster, daemon, views, live, "wave 1: training jobs arrive", started, first)
                second = [view for view in views if view.job.phase == 2]
                for view in second:
                    cluster.load_objects([world.pod_group(view.job), *world.pods(view.job)])
                    view.submitted = True
                await _wait_settled(cluster, daemon, views, live, "wave 2: an urgent job on a full cluster",
                                    started, second)
            if not console.is_terminal:
                console.line()  # Live leaves its last frame without a newline when it cannot redraw in place
            timed_out = bound.cancelled_caught
            _refresh(cluster, daemon.state, views)
            state = daemon.state
            assert state is not None
            console.print(_topology_tree(state, views))
            console.print(_landing(state, views))
            for plan in preemptions:
                console.print(Text.assemble(("preemption: ", "bold"), f"{plan.gang} evicted {len(plan.victims)} "
                                            f"pod(s) of {', '.join(plan.victim_jobs)}: ", (plan.explanation, "dim")))
            problems = _check(views)
            if timed_out:
                problems.insert(0, f"gave up after {args.timeout:g}s: the workload did not settle in time")
            for problem in problems:
                console.print(f"[red]unexpected:[/red] {problem}")
            kept = (f"\n  toposched replay {log_dir} --verify\n  toposched replay {log_dir} --explain "
                    f"{world.NAMESPACE}/hot-fix")
            console.print(f"finished in {time.monotonic() - started:.1f}s; event log: {log_dir}"
                          + (kept if args.log_dir else " (temporary; pass --log-dir to keep it)"))
            if args.keep_running:
                scope_note = "(the run's time limit no longer applies)"
                console.print(scope_note, style="dim")
                console.print(f"cluster still running at {cluster.url}\n"
                              f"  kubectl --kubeconfig {kubeconfig_path} get pods -o wide -n {world.NAMESPACE}\n"
                              "press Ctrl-C to stop")
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        break
            stop.set()
    return EXIT_FINDING if problems else EXIT_OK


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched demo", description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_codes_epilog(
            ok="every job did what it should (with --keep-running: then stopped by Ctrl-C)",
            finding="a job did not do what it should, or the workload did not settle within --timeout",
            environment="a file cannot be written (--log-dir, --kubeconfig: a file, read-only, the disk full)"))
    parser.add_argument("--log-dir", metavar="DIR", help="keep the event log here (for toposched replay)")
    parser.add_argument("--keep-running", action="store_true", help="keep the cluster up for kubectl afterwards")
    parser.add_argument("--kubeconfig", metavar="PATH",
                        help="with --keep-running: write the cluster's kubeconfig here (default: a temporary file)")
    parser.add_argument("--timeout", type=float, default=50.0, help="give up after this many seconds (default 50)")
    return parser


@reporting("demo")
def main(argv: Sequence[str]) -> int:
    command = parser()
    args = command.parse_args(list(argv))
    if args.kubeconfig and not args.keep_running:
        command.error("--kubeconfig needs --keep-running (the cluster stops when the demo ends)")
    try:
        trace_export_from_env(os.environ)  # the daemon it starts reads the OTEL_* variables, as `run` does
    except ConfigError as error:
        print(f"toposched demo: bad configuration: {error}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging("critical")
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 132)

    async def bounded() -> int:
        # The workload waits are bounded by --timeout; this outer bound catches a start-up or shutdown hang
        # (not with --keep-running, which waits for Ctrl-C by design).
        with anyio.move_on_after(math.inf if args.keep_running else args.timeout + 15) as scope:
            return await _demo(args, console)
        if scope.cancelled_caught:
            console.print(f"[red]toposched demo: gave up after {args.timeout + 15:g}s "
                          "(start-up or shutdown hung)[/red]")
        return EXIT_FINDING

    try:
        return anyio.run(bounded)
    except KeyboardInterrupt:
        print("toposched demo: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
