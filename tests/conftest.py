"""Shared test configuration."""

import logging
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

# CI has two cores; keep property tests thorough but bounded.
settings.register_profile("default", max_examples=60, deadline=None)
settings.load_profile("default")


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/chaos/conftest.py: options must be known before `pytest -m chaos` collects.
    parser.addoption("--chaos-iterations", type=int, default=1, metavar="N",
                     help="iterations of each chaos case (tests/chaos/; default 1, `make chaos` runs 20)")


@pytest.fixture(autouse=True)
def _logging_put_back() -> Iterator[None]:
    """A test that runs a `toposched` command in-process (`daemon.cli.main.main`) configures logging for
    the whole process, as the command does for a real one: put structlog and the root logger back as
    they were, so the tests after it log as they expect."""
    configured = structlog.is_configured()
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    if configured:
        structlog.configure(**config)
    else:
        structlog.reset_defaults()
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)
