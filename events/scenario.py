"""Scenario files: a cluster and the work that arrives on it, as plain Kubernetes objects.

The format is a contract (shared/SCENARIOS.md): a multi-document YAML file, or a directory of such
files read in name order, each document an ordinary Kubernetes object. Simulation annotations
(`sim.toposched.io/at`, `.../runtime`, `.../delete-at`, decimal seconds as strings) say when things
happen on the virtual clock.

This module only reads and checks files; what happens when is `daemon/`'s simulator's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

from events.ingest import KindInfo, KubeObject, decode_object, kind_of
from events.model import ObjectUndecodable, object_key
from events.objects import SIMULATION_ANNOTATION_PREFIX

# Kept when objects are slimmed (`events.objects.slim` keeps the whole SIMULATION_ANNOTATION_PREFIX family).
AT_ANNOTATION = SIMULATION_ANNOTATION_PREFIX + "at"
RUNTIME_ANNOTATION = SIMULATION_ANNOTATION_PREFIX + "runtime"
DELETE_AT_ANNOTATION = SIMULATION_ANNOTATION_PREFIX + "delete-at"


# libyaml's safe loader is ~9x faster on large traces; pure Python's is the same safe subset.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ScenarioError(Exception):
    """A scenario that cannot be read at all (missing file, YAML syntax error)."""


@dataclass(frozen=True)
class ScenarioObject:
    info: KindInfo
    obj: KubeObject
    key: str
    index: int  # position in the scenario, the tie-break for objects created at the same time
    source: str  # "file.yaml#3": where the document came from, for messages
    at: float = 0.0
    runtime: float | None = None
    delete_at: float | None = None


@dataclass
class Scenario:
    objects: list[ScenarioObject] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # documents skipped, with why

    def of_kind(self, name: str) -> list[ScenarioObject]:
        return [o for o in self.objects if o.info.name == name]


def scenario_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not files:
            raise ScenarioError(f"{path}: directory holds no .yaml or .yml files")
        return files
    if not path.exists():
        raise ScenarioError(f"{path}: no such file or directory")
    return [path]


def load_documents(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every YAML document under `path` as (source, mapping), in scenario order."""
    documents: list[tuple[str, dict[str, Any]]] = []
    for file in scenario_files(path):
        try:
            loaded = list(yaml.load_all(file.read_text(), Loader=_SAFE_LOADER))
        except yaml.YAMLError as error:
            raise ScenarioError(f"{file}: not valid YAML: {error}") from None
        except OSError as error:
            raise ScenarioError(f"{file}: cannot read: {error}") from None
        for number, document in enumerate(loaded, start=1):
            if document is None:
                continue
            source = f"{file.name}#{number}"
            if not isinstance(document, dict):
                raise ScenarioError(f"{source}: a document must be a Kubernetes object (a mapping)")
            documents.append((source, document))
    return documents


def _seconds(annotations: dict[str, str], name: str, source: str, problems: list[str]) -> float | None:
    raw = annotations.get(name)
    if raw is None:
        return None
    try:
        value = float(str(raw))
    except ValueError:
        problems.append(f"{source}: metadata.annotations[{name}]: {raw!r} is not a number of seconds; ignored")
        return None
    if value < 0 or value != value:
        problems.append(f"{source}: metadata.annotations[{name}]: {raw!r} is negative; ignored")
        return None
    return value


def load_scenario(path: str | Path) -> Scenario:
    scenario = Scenario()
    for index, (source, document) in enumerate(load_documents(Path(path))):
        api_version, kind = str(document.get("apiVersion", "")), str(document.get("kind", ""))
        info = kind_of(api_version, kind)
        if info is None:
            scenario.problems.append(
                f"{source}: {api_version or '?'} {kind or '?'} is not a kind toposched reads; skipped")
            continue
        decoded = decode_object(info, document)
        if isinstance(decoded, ObjectUndecodable):
            scenario.problems.append(f"{source}: {info.name} {decoded.key}: {decoded.problem}; skipped")
            continue
        meta = decoded.metadata
        if not meta.name:
            scenario.problems.append(f"{source}: {info.name}: metadata.name is missing; skipped")
            continue
        namespace = meta.namespace or ("default" if info.namespaced else "")
        if info.namespaced and not meta.namespace:
            decoded = msgspec.structs.replace(decoded, metadata=msgspec.structs.replace(meta, namespace=namespace))
        annotations = meta.annotations
        scenario.objects.append(ScenarioObject(
            info=info,
            obj=decoded,
            key=object_key(namespace, meta.name),
            index=index,
            source=source,
            at=_seconds(annotations, AT_ANNOTATION, source, scenario.problems) or 0.0,
            runtime=_seconds(annotations, RUNTIME_ANNOTATION, source, scenario.problems),
            delete_at=_seconds(annotations, DELETE_AT_ANNOTATION, source, scenario.problems),
        ))
    return scenario
