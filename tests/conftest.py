"""Shared test configuration."""

from hypothesis import settings

# CI has two cores; keep property tests thorough but bounded.
settings.register_profile("default", max_examples=60, deadline=None)
settings.load_profile("default")
