"""`toposched replay LOGDIR`: fold an event log and show what it holds; verify snapshots.

Reads the log read-only, so it works on the log of a running daemon too. A directory that holds no
log (missing, or without a segment or snapshot file) is a usage error (exit 2), so a mistyped path
never looks like an empty log.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from daemon.cli.exits import EXIT_FINDING, EXIT_OK, EXIT_USAGE, CommandError, exit_codes_epilog, reporting
from daemon.offline.explain import explain_gang
from daemon.offline.replay import Summary, fold_log, start_of, summarise, verify_snapshot_equivalence
from daemon.offline.verify import verify_decisions
from events.log import EventLog, EventLogError
from state.resources import format_quantity

_SHOWN_RESOURCES = ("nvidia.com/gpu", "cpu", "memory", "pods")
_SHOWN_VIOLATIONS = 20


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched replay", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_codes_epilog(
            finding="--verify found a different decision or a dishonest snapshot; the log is damaged; "
                    "--explain found nothing about the gang",
            usage="a bad flag, or LOGDIR is missing or holds no event log"))
    parser.add_argument("log_dir", metavar="LOGDIR", help="directory of the event log")
    parser.add_argument("--until", type=int, metavar="SEQ", help="stop after the event with this sequence number")
    parser.add_argument("--verify", action="store_true",
                        help="re-decide at every planning point of the log and check the scheduler makes the same "
                             "decisions; check the invariants (capacity, one node per pod, gangs at minMember) at "
                             "every decision and at the end; check that newest snapshot + tail folds to the same "
                             "state as the whole log")
    parser.add_argument("--nodes", action="store_true", help="list every node's usage (default: the 20 busiest)")
    parser.add_argument("--explain", metavar="NS/PODGROUP",
                        help="print one gang's history: arrival, attempts, why it waited, where it went and why")
    return parser


def _open(directory: str) -> EventLog:
    path = Path(directory)
    if not path.is_dir():
        problem = "not a directory" if path.exists() else "no such directory"
        raise CommandError(f"no event log at {directory}: {problem}", EXIT_USAGE)
    # The files of events/log.py's on-disk format: a writer's lock, segments, snapshots.
    if not any(entry.name == "LOCK" or entry.name.endswith((".seg", ".snap")) for entry in path.iterdir()):
        raise CommandError(f"no event log at {directory}: the directory holds no LOCK, segment (*.seg) or "
                           "snapshot (*.snap) file", EXIT_USAGE)
    try:
        return EventLog.open_readonly(directory)
    except EventLogError as error:
        raise CommandError(str(error), EXIT_FINDING) from error


@reporting("replay")
def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    # Piped output (files, CI logs) gets a wide fixed width so names are never cut.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    errors = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=200)
    if args.until is not None and args.until < 1:
        raise CommandError("--until must be a sequence number >= 1", EXIT_USAGE)
    log = _open(args.log_dir)
    try:
        if args.explain:
            return _explain(console, errors, log, args.explain, args.until)
        started = time.perf_counter()
        result = fold_log(log, until=args.until)
        elapsed = time.perf_counter() - started
        origin = f"snapshot at seq {result.snapshot_seq} + " if result.snapshot_seq else ""
        errors.print(f"folded {origin}{result.events_folded} events (up to seq {result.state.last_seq}) "
                     f"in {elapsed:.2f} s")
        _print_summary(console, summarise(result.state), all_nodes=args.nodes)
        if args.verify:
            verification = verify_snapshot_equivalence(log, until=args.until)
            (console if verification.ok else errors).print(
                f"[{'green' if verification.ok else 'red'}]verify snapshot:[/] {verification.message}")
            base, base_seq = start_of(log, until=args.until, use_snapshot=False,
                                      scheduler_name=result.state.scheduler_name,
                                      kai_node_pool_label=result.state.kai_node_pool_label)
            events = [event for event in log.read(base_seq + 1) if args.until is None or event.seq <= args.until]
            decisions = verify_decisions(events, scheduler_name=result.state.scheduler_name, start=base)
            summary = (f"{decisions.plans} gang plans, {decisions.lone_pods} lone-pod plans, "
                       f"{decisions.preemptions} preemptions, {decisions.pending_reasons} pending reasons and "
                       f"{decisions.waits} waits at Permit or on nominations re-decided by the loop's decision "
                       f"step ({decisions.events} decision events, each the same)")
            if decisions.same_decisions:
                console.print(f"[green]verify decisions:[/] same decisions: {summary}")
            else:
                errors.print(f"[red]verify decisions:[/] DIFFERENT decisions; {summary}")
                for line in decisions.mismatches:
                    errors.print(f"  - {line}")
            if decisions.violations:
                errors.print(f"[red]verify invariants:[/] {len(decisions.violations)} broken")
                for violation in decisions.violations[:_SHOWN_VIOLATIONS]:
                    errors.print(f"  - {violation}", markup=False)
                if len(decisions.violations) > _SHOWN_VIOLATIONS:
                    errors.print(f"  … {len(decisions.violations) - _SHOWN_VIOLATIONS} more not shown")
            else:
                console.print("[green]verify invariants:[/] held at every decision and at the end (capacity, "
                              "one node per pod, existing nodes, gangs at minMember within their timeout)")
            if not (verification.ok and decisions.ok):
                return EXIT_FINDING
    except EventLogError as error:
        raise CommandError(str(error), EXIT_FINDING) from error
    finally:
        log.close()
    return EXIT_OK


def _explain(console: Console, errors: Console, log: EventLog, gang: str, until: int | None) -> int:
    if "/" not in gang:
        raise CommandError(f"--explain takes NAMESPACE/NAME, got {gang!r}", EXIT_USAGE)
    events = (event for event in log.read(1) if until is None or event.seq <= until)
    lines = explain_gang(events, gang)
    if log.first_seq > 1:
        errors.print(f"the log was pruned: its history starts at seq {log.first_seq}; earlier events of {gang} "
                     "are not shown")
    if not lines:
        raise CommandError(f"the log holds nothing about {gang} (is the namespace right?)", EXIT_FINDING)
    origin = lines[0].time
    table = Table(title=f"History of {gang}")
    table.add_column("seq", justify="right")
    table.add_column("time", justify="right")
    table.add_column("what happened", overflow="fold")
    for line in lines:
        table.add_row(str(line.seq), f"+{line.time - origin:.1f}s", line.text)
    console.print(table)
    return EXIT_OK


def _print_summary(console: Console, summary: Summary, *, all_nodes: bool) -> None:
    objects = Table(title="Objects")
    objects.add_column("kind")
    objects.add_column("count", justify="right")
    for kind, count in summary.objects.items():
        objects.add_row(kind, str(count))
    console.print(objects)

    if summary.gangs:
        gangs = Table(title="Gangs")
        for column in ("gang", "state", "minMember", "members", "bound", "assumed", "pending", "last reason"):
            gangs.add_column(column, justify="right" if column in {"minMember", "members", "bound", "assumed",
                                                                   "pending"} else "left")
        for gang in summary.gangs:
            gangs.add_row(gang.key, gang.state, str(gang.min_member), str(gang.members), str(gang.bound),
                          str(gang.assumed), str(gang.pending), gang.reason)
        console.print(gangs)

    nodes = sorted(summary.nodes, key=lambda n: (-n.used.get("nvidia.com/gpu", 0), -n.pods, n.name))
    shown = nodes if all_nodes else nodes[:20]
    if shown:
        table = Table(title="Node usage (used / allocatable)")
        table.add_column("node")
        table.add_column("pods", justify="right")
        for resource in _SHOWN_RESOURCES:
            table.add_column(resource, justify="right")
        for node in shown:
            table.add_row(node.name, str(node.pods), *(
                f"{format_quantity(r, node.used.get(r, 0))} / {format_quantity(r, node.allocatable.get(r, 0))}"
                for r in _SHOWN_RESOURCES))
        console.print(table)
        if len(nodes) > len(shown):
            console.print(f"… {len(nodes) - len(shown)} more nodes (--nodes lists them all)")

    if summary.problems:
        console.print("[yellow]Problems found in the objects:[/]")
        for problem in summary.problems:
            console.print(f"  - {problem}")
