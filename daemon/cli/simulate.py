"""`toposched simulate SCENARIO --out REPORT.json [--until S] [--stats] [--log-dir DIR]`.

Runs the scheduler loop on a virtual clock over a scenario and writes the report. The scenario format
(every kind, field and annotation read) and every report field: docs/scenarios.md in the repository.

Documents the loader had to skip are listed on standard error as warnings; a scenario that cannot be
read at all is an error (exit 2). `--stats` prints event, gang and bind counts and the wall time to
standard error (never into the report, which must be the same on every run). `--log-dir` keeps the
simulation's event log, which `toposched replay` reads.

Progress goes to standard error too (`--progress`): on a terminal, a bar of the scenario's objects
created so far with the virtual time, binds and pending pods, redrawn at most ten times a second;
otherwise (a pipe, a CI log) the same figures as a plain line every 10 s of wall time, so a short run
prints none; `none` turns it off.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from daemon.cli.exits import (
    EXIT_ENVIRONMENT,
    EXIT_FINDING,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    exit_codes_epilog,
    reporting,
)
from daemon.offline.bulk import paused_gc
from daemon.offline.simulator import Simulation, SimulationError, SimulationProgress
from daemon.scheduling.loop import SchedulerError
from events.log import EventLog, EventLogError, LogLockedError
from events.scenario import ScenarioError, load_scenario


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched simulate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_codes_epilog(
            finding="the simulation could not finish (the world never settles at one instant)",
            usage="a bad flag, a scenario that cannot be read, a --log-dir that already holds a log",
            environment="--out or --log-dir cannot be written (a file, read-only, the disk full, the log's "
                        "lock held)"))
    parser.add_argument("scenario", metavar="SCENARIO", help="scenario YAML file, or a directory of them")
    parser.add_argument("--out", metavar="REPORT.json", help="where to write the report (default: standard output)")
    parser.add_argument("--until", type=float, metavar="SECONDS", help="stop at this virtual time")
    parser.add_argument("--stats", action="store_true", help="print counts and wall time to standard error")
    parser.add_argument("--log-dir", metavar="DIR", help="keep the simulation's event log here (for replay)")
    parser.add_argument("--progress", choices=("auto", "bar", "lines", "none"), default="auto",
                        help="on standard error: a bar on a terminal, plain lines every 10 s otherwise (default auto)")
    return parser


BAR_EVERY_SECONDS = 0.1
LINE_EVERY_SECONDS = 10.0


class ProgressDisplay:
    """Shows a running simulation's `SimulationProgress` on standard error (see the module docstring)."""

    def __init__(self, mode: str, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.mode = ("bar" if self.console.is_terminal else "lines") if mode == "auto" else mode
        self.started = time.monotonic()
        every = BAR_EVERY_SECONDS if self.mode == "bar" else LINE_EVERY_SECONDS
        self._every = every
        self._next = self.started + every
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._last: SimulationProgress | None = None
        self._shown = False

    def __enter__(self) -> ProgressDisplay:
        if self.mode == "bar":
            self._bar = Progress(BarColumn(bar_width=10), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=self.console, auto_refresh=False)
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._last is not None and (self._bar is not None or self._shown):
            self._show(self._last, time.monotonic())  # where it ended, unless nothing was shown at all
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, progress: SimulationProgress) -> None:
        self._last = progress
        now = time.monotonic()
        if self.mode == "none" or now < self._next:
            return
        self._next = now + self._every
        self._show(progress, now)

    def _show(self, progress: SimulationProgress, now: float) -> None:
        self._shown = True
        if self._bar is not None:
            words = (f"{progress.created:,}/{progress.objects:,} objects  t={progress.time:,.0f}s  "
                     f"{progress.binds:,} binds  {progress.pending:,} pending")
            if self._task is None:
                self._task = self._bar.add_task(words, total=progress.objects)
            self._bar.update(self._task, completed=progress.created, description=words, refresh=True)
        elif self.mode == "lines":
            print(f"simulate: {progress.created:,} of {progress.objects:,} objects created, t={progress.time:,.0f}s, "
                  f"{progress.binds:,} binds, {progress.pending:,} pods pending, {progress.events:,} events; "
                  f"{now - self.started:.0f} s elapsed", file=sys.stderr, flush=True)
@reporting("simulate")
def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    if args.until is not None and not args.until >= 0:
        raise CommandError("--until must be a number of seconds >= 0", EXIT_USAGE)
    started = time.perf_counter()
    try:
        with paused_gc(freeze=True):  # the scenario lives on for the whole run
            scenario = load_scenario(args.scenario)
    except ScenarioError as error:
        raise CommandError(str(error), EXIT_USAGE) from error
    except RecursionError as error:  # JSON nested thousands deep: the decoder's recursion, not a bug of ours
        raise CommandError(f"{args.scenario} is nested too deeply to hold Kubernetes objects", EXIT_USAGE) from error
    for problem in scenario.problems:
        print(f"warning: {problem}", file=sys.stderr)
    loaded = time.perf_counter()
    log: EventLog | None = None
    try:
        if args.log_dir:
            log = EventLog.open(args.log_dir, fsync="never")
            if log.last_seq:
                raise CommandError(f"{args.log_dir} already holds an event log ({log.last_seq} events); "
                                   "give an empty directory", EXIT_USAGE)
        with ProgressDisplay(args.progress) as display:
            simulation = Simulation(scenario, until=args.until, log=log, progress=display)
            report = anyio.run(simulation.run)
    except LogLockedError as error:
        raise CommandError(str(error), EXIT_ENVIRONMENT) from error
    except EventLogError as error:
        raise CommandError(str(error), EXIT_ENVIRONMENT if isinstance(error.__cause__, OSError) else EXIT_USAGE
                           ) from error
    except (SchedulerError, SimulationError) as error:
        raise CommandError(str(error), EXIT_FINDING) from error
    finally:
        if log is not None:
            log.close()
    text = report.to_json()
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    if args.stats:
        stats = simulation.stats
        finished = time.perf_counter()
        print(f"simulate: {stats.events} events, {stats.gangs} gangs, {stats.pods} pods, {stats.binds} binds "
              f"({stats.bind_failures} failed), {len(report.pending)} pending, {stats.preemptions} preemptions; "
              f"{stats.attempts} attempts in {stats.cycles} cycles; virtual end t={report.finished_at:g}s; "
              f"wall {finished - started:.3f} s (load {loaded - started:.3f} s, "
              f"simulate {finished - loaded:.3f} s)", file=sys.stderr)
    return EXIT_OK
