"""The chaos suite's fixtures: how many iterations each case runs, and the tally printed at the end.

`--chaos-iterations N` (registered in tests/conftest.py; default 1, the short form `make test` runs;
`make chaos` runs 20). Every case counts the iterations it attempted and those it survived in its
`Tally`; the terminal summary lists them per case, with what broke.
"""

from __future__ import annotations

import pytest

from tests.chaos.harness import Tally

TALLIES = pytest.StashKey[dict[str, Tally]]()


@pytest.fixture
def iterations(request: pytest.FixtureRequest) -> int:
    count: int = request.config.getoption("--chaos-iterations")
    if count < 1:
        raise pytest.UsageError(f"--chaos-iterations: expected a number >= 1, got {count}")
    return count


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Tally:
    tallies = request.config.stash.setdefault(TALLIES, {})
    name = request.node.name
    return tallies.setdefault(name, Tally(name))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    tallies = config.stash.get(TALLIES, {})
    if not tallies:
        return
    terminalreporter.section("chaos: iterations survived per case")
    for found in tallies.values():
        terminalreporter.write_line(f"{found.survived:>3} / {found.attempted:<3} survived  {found.case}")
        for failure in found.failures:
            terminalreporter.write_line(f"      - {failure}")
