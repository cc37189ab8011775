"""Reading a scenario's objects for pre-loading: multi-document YAML files, or a directory of them.

A scenario (see SCENARIOS.md) is a multi-document YAML file or a directory of such files read in
name order. devcluster only needs the objects: `read_objects` returns every document that is a
Kubernetes object (`kind: List` documents are expanded), in order. Simulation annotations
(`sim.toposched.io/*`) are left on the objects and carry no meaning here.

Reads files; never writes, never talks to the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class ScenarioError(Exception):
    """A scenario path that cannot be read as Kubernetes objects."""


def _documents(path: Path) -> list[dict[str, Any]]:
    try:
        loaded = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path}: {exc}") from exc
    objects: list[dict[str, Any]] = []
    for index, document in enumerate(loaded):
        if document is None:
            continue
        if not isinstance(document, dict) or "kind" not in document or "apiVersion" not in document:
            raise ScenarioError(f"{path}: document {index + 1} is not a Kubernetes object")
        if document["kind"] == "List":
            objects.extend(item for item in document.get("items") or [] if isinstance(item, dict))
        else:
            objects.append(document)
    return objects


def read_objects(path: str | Path) -> list[dict[str, Any]]:
    """Every object of the scenario at `path` (a file, or a directory read in name order)."""
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.iterdir() if p.is_file() and p.suffix in (".yaml", ".yml", ".json"))
        return [obj for file in files for obj in _documents(file)]
    if not root.exists():
        raise ScenarioError(f"{root}: no such file or directory")
    return _documents(root)
