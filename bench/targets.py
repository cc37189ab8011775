"""One line per benchmark figure against its target, the same in every benchmark (`make bench`).

    target | 3000-pod gang, creation to all bound | 1.80 s = 1668 pods/s = 20 % of devcluster's 8228/s | >= 60 % | ...

`line()` prints it, and appends it to the file named by `TOPOSCHED_BENCH_TARGETS` when that is set:
`make bench` sets it, runs every benchmark, then prints them all as one table with
`python -m bench.targets FILE` (or any benchmark output given to it, or on standard input).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

PREFIX = "target | "
COLLECT = "TOPOSCHED_BENCH_TARGETS"


def line(figure: str, value: str, target: str, met: bool) -> str:
    """Print the figure, its value (with its ceiling, when it is a ratio), its target and the verdict."""
    text = f"{PREFIX}{figure} | {value} | {target} | {'met' if met else 'NOT MET'}"
    print(text, flush=True)
    collect = os.environ.get(COLLECT)
    if collect:
        with open(collect, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Print the target lines found in the given benchmark output files (or standard input) as a table."""
    paths = list(sys.argv[1:] if argv is None else argv)
    lines: list[str] = []
    if paths:
        for path in paths:
            with open(path, encoding="utf-8") as handle:
                lines += handle.read().splitlines()
    else:
        lines = sys.stdin.read().splitlines()
    rows = [entry[len(PREFIX):].split(" | ") for entry in lines if entry.startswith(PREFIX)]
    rows = [row for row in rows if len(row) == 4]
    if not rows:
        print("no target lines found")
        return 1
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    header = ("figure", "value (ceiling)", "target", "verdict")
    widths = [max(width, len(title)) for width, title in zip(widths, header, strict=True)]
    for row in (header, tuple("-" * width for width in widths), *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
