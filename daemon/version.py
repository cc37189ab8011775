"""The installed toposched's version, for `toposched --version` and the API client's User-Agent.

Its own module so that the Kubernetes adapter (`daemon/kube/`) and the command line (`daemon/cli/`)
can both read it without one importing the other. Must never import anything of ours.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("toposched")
    except PackageNotFoundError:
        return "0+unknown"
