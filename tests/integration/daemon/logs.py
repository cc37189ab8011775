"""The daemon's JSON log captured to a file, as `kubectl logs` would show it, for the tests to read.

`json_logs(path)` configures logging as `toposched run` does (JSON lines, info level) but into `path`,
and puts the process's logging back as it was on exit. `read_lines(path)` parses every line (each
must be one JSON object: a line that is not fails the test), `select(lines, gang=...)` is the
README's `jq 'select(.gang=="ns/name")'`, and `jq(path, filter)` runs the real jq when the machine
has it (the same answer is then asserted twice).
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from daemon.telemetry.observability import configure_logging

Line = dict[str, Any]


@contextmanager
def json_logs(path: Path, level: str = "info") -> Iterator[Path]:
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    with path.open("w", encoding="utf-8") as stream:
        configure_logging(level, stream=stream)
        try:
            yield path
        finally:
            structlog.reset_defaults()
            for handler in list(root.handlers):
                if handler not in handlers:
                    root.removeHandler(handler)
            root.setLevel(root_level)
            logging.captureWarnings(False)


def read_lines(path: Path) -> list[Line]:
    lines = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as error:
            raise AssertionError(f"log line {number} is not JSON ({error}): {text[:300]}") from error
        assert isinstance(parsed, dict), f"log line {number} is not a JSON object: {text[:300]}"
        lines.append(parsed)
    return lines


def select(lines: list[Line], **equal: str) -> list[Line]:
    return [line for line in lines if all(line.get(key) == value for key, value in equal.items())]


def jq(path: Path, program: str) -> list[Line] | None:
    """`jq -c PROGRAM PATH` parsed, or None when jq is not installed."""
    binary = shutil.which("jq")
    if binary is None:
        return None
    done = subprocess.run([binary, "-c", program, str(path)], capture_output=True, text=True, timeout=30, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
