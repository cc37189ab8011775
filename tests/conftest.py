"""Shared test configuration."""

import pytest
from hypothesis import settings

# CI has two cores; keep property tests thorough but bounded.
settings.register_profile("default", max_examples=60, deadline=None)
settings.load_profile("default")


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/chaos/conftest.py: options must be known before `pytest -m chaos` collects.
    parser.addoption("--chaos-iterations", type=int, default=1, metavar="N",
                     help="iterations of each chaos case (tests/chaos/; default 1, `make chaos` runs 20)")
