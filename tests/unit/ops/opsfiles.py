"""Read the shipped manifests under ops/ the way kustomize assembles them, without kubectl.

`base_objects()` gives every object ops/base/kustomization.yaml lists under `resources`, keyed by
(kind, name); `component_objects(name)` the CRDs of one ops/crds/<name> component. The
integration test (tests/integration/test_ops_manifests.py) renders the same files with the real
`kubectl kustomize`; these unit tests check what the objects say.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
OPS = REPO / "ops"
BASE = OPS / "base"
CRDS = OPS / "crds"

Manifest = dict[str, Any]


def load_documents(path: Path) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def kustomization(directory: Path) -> Manifest:
    document = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def _objects(directory: Path) -> dict[tuple[str, str], Manifest]:
    found: dict[tuple[str, str], Manifest] = {}
    for name in kustomization(directory).get("resources", []):
        for doc in load_documents(directory / name):
            key = (doc["kind"], doc["metadata"]["name"])
            assert key not in found, f"{key} is declared twice under {directory}"
            found[key] = doc
    return found


def base_objects() -> dict[tuple[str, str], Manifest]:
    return _objects(BASE)


def component_objects(component: str) -> dict[tuple[str, str], Manifest]:
    return _objects(CRDS / component)


def one(kind: str, name: str = "") -> Manifest:
    """The one base object of `kind` (named `name` when given)."""
    matches = [doc for (k, n), doc in base_objects().items() if k == kind and (not name or n == name)]
    assert len(matches) == 1, f"expected one {kind} {name!r} in ops/base, found {len(matches)}"
    return matches[0]


def config_file() -> Path:
    """The daemon config file the ConfigMap generator packs (ops/base/config.yaml)."""
    generators = kustomization(BASE)["configMapGenerator"]
    assert len(generators) == 1
    files = generators[0]["files"]
    assert len(files) == 1
    name: str = files[0]
    key, _, path = name.partition("=")
    return BASE / (path or key)


def config_map_name() -> str:
    name: str = kustomization(BASE)["configMapGenerator"][0]["name"]
    return name
