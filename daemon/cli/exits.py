"""The exit codes every `toposched` sub-command uses, and how a command fails in one line.

- 0: done, what was asked worked (a valid file, a verified log, a daemon stopped by a signal);
- 1: a finding or a failed check (validate found problems, `replay --verify` re-decided differently,
  the demo's jobs did not do what they should, the daemon lost its lease);
- 2: usage or configuration (a bad flag or value; a config file, scenario or manifest that cannot be
  used; no usable kubeconfig or context; a directory that holds no event log);
- 3: the environment (a port in use, the disk full, the event log's lock held by another process, a
  log directory that is a file or read-only, an API server that cannot be read, a damaged log under
  `refuse`).

argparse already exits 2 on a usage error. Everything else is raised as a `CommandError` (or an
`OSError`, which is the environment by definition) and turned into `toposched COMMAND: message` on
standard error by `reporting` (each command's `main`, and the dispatcher `daemon.cli.main` around
them): one line, never a traceback. A traceback means a bug in toposched. Ctrl-C exits 130, as a
shell reports an interrupted command.
"""

from __future__ import annotations

import errno
import functools
import sys
from collections.abc import Callable, Sequence

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERRUPTED = 130

MEANINGS: dict[int, str] = {
    EXIT_OK: "ok",
    EXIT_FINDING: "a finding or a failed check",
    EXIT_USAGE: "usage or configuration error",
    EXIT_ENVIRONMENT: "environment: port in use, disk full, log lock held, log dir unusable, API unreachable",
}


class CommandError(Exception):
    """A command cannot go on; `message` is the one line shown after `toposched COMMAND: `."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def exit_codes_epilog(heading: str = "exit codes:", **cases: str) -> str:
    """The `exit codes:` block of a --help: each code with what it means for this command.

    Keys are `ok`, `finding`, `usage` and `environment`; without any, every code with its general
    meaning (the dispatcher's help). With some, the codes given plus `ok` and `usage`, which every
    command can return.
    """
    codes = {"ok": EXIT_OK, "finding": EXIT_FINDING, "usage": EXIT_USAGE, "environment": EXIT_ENVIRONMENT}
    unknown = set(cases) - set(codes)
    if unknown:
        raise ValueError(f"unknown exit code names {sorted(unknown)}")
    lines = [heading]
    for name, code in codes.items():
        if name in cases:
            lines.append(f"  {code:<4} {cases[name]}")
        elif not cases or name in ("ok", "usage"):
            lines.append(f"  {code:<4} {MEANINGS[code]}")
    lines.append(f"  {EXIT_INTERRUPTED:<4} interrupted (Ctrl-C)")
    return "\n".join(lines)


def describe_os_error(error: OSError) -> str:
    """`path: No space left on device`: the system's words and the file, no errno number or traceback."""
    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = f"{reason} (the disk is full)"
    names = [str(name) for name in (error.filename, error.filename2) if name is not None]
    return f"{' -> '.join(names)}: {reason}" if names else reason


def report(name: str, error: BaseException) -> int:
    """Print what `error` means to the user on one line of standard error; its exit code. Others re-raise."""
    if isinstance(error, CommandError):
        message, code = error.message, error.code
    elif isinstance(error, OSError):
        message, code = describe_os_error(error), EXIT_ENVIRONMENT
    elif isinstance(error, KeyboardInterrupt):
        message, code = "interrupted", EXIT_INTERRUPTED
    else:
        raise error
    print(f"toposched {name}: {message}", file=sys.stderr, flush=True)
    return code


def reporting(name: str) -> Callable[[Callable[[Sequence[str]], int]], Callable[[Sequence[str]], int]]:
    """Decorate a command's `main(argv) -> int`: a `CommandError`, an `OSError` or Ctrl-C becomes one line
    (`report`) and its exit code, so callers (tests, the dispatcher) always get a code back."""

    def decorate(main: Callable[[Sequence[str]], int]) -> Callable[[Sequence[str]], int]:
        @functools.wraps(main)
        def wrapped(argv: Sequence[str]) -> int:
            try:
                return main(argv)
            except (CommandError, OSError, KeyboardInterrupt) as error:
                return report(name, error)

        return wrapped

    return decorate
