"""The `toposched` command line.

Every sub-command lives in its own module with a `main(argv) -> int`; this module only knows their
names and one-line summaries, so `toposched --help` stays fast and a broken optional sub-command
cannot take the others down. It also turns what a command raises for the user to read (a
`CommandError`, an `OSError`, Ctrl-C) into one line on standard error and the exit code of
`daemon.cli.exits`; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Protocol, cast

from daemon.cli.exits import EXIT_USAGE, CommandError, exit_codes_epilog, report
from daemon.version import package_version

DESCRIPTION = "Network-topology-aware gang scheduler for Kubernetes."
# name -> (module holding `main(argv) -> int`, summary shown by --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("daemon.cli.run", "run the scheduler daemon against a Kubernetes API"),
    "demo": ("daemon.cli.demo", "start devcluster, the daemon and a sample workload; show where gangs land"),
    "devcluster": ("devcluster.cli", "serve the embedded Kubernetes API server on 127.0.0.1"),
    "simulate": ("daemon.cli.simulate", "run a scenario on a virtual clock and write a report"),
    "replay": ("daemon.cli.replay", "fold an event log; verify it or explain a gang's history"),
    "topology": ("daemon.cli.topology", "show or generate the network topology of a scenario"),
    "quota": ("daemon.cli.quota", "show the quota trees (min, max, used, runtime) of a scenario or a cluster"),
    "validate": ("daemon.cli.validate", "validate HyperNode, ClusterNetworkTopology and PodGroup manifests"),
    "completion": ("daemon.cli.completion", "print a bash or zsh completion script (see its --help to install)"),
}

# Commands that set up logging themselves (`run`: a level option and JSON lines; `demo`: quiet under its
# display); the others log warnings and errors to standard error.
CONFIGURE_OWN_LOGGING = frozenset({"run", "demo"})


class _CommandModule(Protocol):
    def main(self, argv: Sequence[str]) -> int: ...


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
        + "\n".join(f"  {name:<12} {summary}" for name, (_, summary) in COMMANDS.items())
        + "\n\n" + exit_codes_epilog("exit codes (`toposched COMMAND --help` says what each means there):")
        + "\n\nRun `toposched COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"toposched {package_version()}")
    parser.add_argument("command", nargs="?", choices=sorted(COMMANDS), metavar="COMMAND")
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if not arguments:
        parser.print_help()
        return EXIT_USAGE
    namespace = parser.parse_args(arguments[:1])
    if namespace.command is None:
        parser.print_help()
        return EXIT_USAGE
    name = namespace.command
    module_name, _ = COMMANDS[name]
    if name not in CONFIGURE_OWN_LOGGING:
        # Logs go to standard error and only from warning up: structlog's own default prints every level
        # to standard output, where `simulate` writes its report (a snapshot's debug line landed in it).
        from daemon.telemetry.observability import configure_logging

        configure_logging("warning", json=False)
    try:
        module = cast(_CommandModule, importlib.import_module(module_name))
        return module.main(arguments[1:])
    except (CommandError, OSError, KeyboardInterrupt) as error:  # a command not decorated with `reporting`
        return report(name, error)


if __name__ == "__main__":
    raise SystemExit(main())
