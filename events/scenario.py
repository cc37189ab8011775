"""Scenario files: a cluster and the work that arrives on it, as plain Kubernetes objects.

The format is a contract (docs/scenarios.md): a YAML file of documents, a JSON file, an NDJSON
file (one object per line), or a directory of such files read in name order; each document an
ordinary Kubernetes object, `kind: List` standing for its items. Simulation annotations
(`sim.toposched.io/at`, `.../runtime`, `.../delete-at`, decimal seconds as strings) say when things
happen on the virtual clock.

Files are read by `manifests.read_manifests` and every object goes through
`manifests.load_object`, the same decoding, defaulting and admission that devcluster applies
(`toposched devcluster --load` reads the same files with the same two functions): canonical
quantities, requests from limits, schedulerName `default-scheduler`, priority resolved from the
PriorityClasses that exist when the pod is created (in virtual-time order), default tolerations.
What a real API server would have refused is reported in `problems`, naming the document and the
field; an object that cannot be decoded at all is skipped with its reason.

This module only reads and checks files; what happens when is `daemon/`'s simulator's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from events.ingest import KindInfo, KubeObject, decode_object, kind_of
from events.model import ObjectUndecodable, object_key
from events.objects import SIMULATION_ANNOTATION_PREFIX
from manifests import ManifestFileError, Rejected, SpecMemo, load_object, read_manifests

# Kept when objects are slimmed (`events.objects.slim` keeps the whole SIMULATION_ANNOTATION_PREFIX family).
AT_ANNOTATION = SIMULATION_ANNOTATION_PREFIX + "at"
RUNTIME_ANNOTATION = SIMULATION_ANNOTATION_PREFIX + "runtime"
DELETE_AT_ANNOTATION = SIMULATION_ANNOTATION_PREFIX + "delete-at"
PRIORITY_CLASS = ("scheduling.k8s.io/v1", "PriorityClass")


class ScenarioError(Exception):
    """A scenario that cannot be read at all (missing file, YAML or JSON syntax error)."""


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
    problems: list[str] = field(default_factory=list)  # documents skipped or suspicious, with why

    def of_kind(self, name: str) -> list[ScenarioObject]:
        return [o for o in self.objects if o.info.name == name]


@dataclass
class _Document:
    index: int
    source: str
    raw: dict[str, Any]
    at: float
    runtime: float | None
    delete_at: float | None
    problems: list[str] = field(default_factory=list)
    admitted: dict[str, Any] | None = None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _seconds(annotations: dict[str, Any], name: str, source: str, problems: list[str]) -> float | None:
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


def _describe(document: _Document) -> str:
    meta = _dict(document.raw.get("metadata"))
    name = object_key(str(meta.get("namespace") or ""), str(meta.get("name") or "?"))
    return f"{document.source}: {document.raw.get('kind') or '?'} {name}"


def _admit_in_creation_order(documents: list[_Document]) -> None:
    """`load_object` for each document in the order the simulation creates them (at, then document order),
    against the PriorityClasses that exist at that moment (deletions at a time come before creations)."""
    classes: dict[str, tuple[int, dict[str, Any]]] = {}  # name -> (index of its document, admitted object)
    removals: list[tuple[float, str, int]] = []  # (delete-at, class name, index of the class document)
    existing: dict[str, dict[str, Any]] = {}  # name -> admitted object: what a pod created now resolves against
    memo = SpecMemo()  # pod specs loaded against `existing` as it is
    for document in sorted(documents, key=lambda d: (d.at, d.index)):
        for when, name, index in [r for r in removals if r[0] <= document.at]:
            if name in classes and classes[name][0] == index:
                del classes[name]
                existing = {name: pc for name, (_, pc) in classes.items()}
                memo.clear()
            removals.remove((when, name, index))
        api_version, kind = str(document.raw.get("apiVersion", "")), str(document.raw.get("kind", ""))
        try:
            loaded = load_object(api_version, kind, document.raw, existing, memo)
        except Rejected as refusal:
            document.problems.append(f"{_describe(document)}: {refusal.message}; skipped")
            continue
        document.admitted = loaded.obj
        document.problems += [f"{_describe(document)}: {warning}" for warning in loaded.warnings]
        if (api_version, kind) == PRIORITY_CLASS:
            name = str(_dict(loaded.obj.get("metadata")).get("name") or "")
            classes[name] = (document.index, loaded.obj)
            existing = {name: pc for name, (_, pc) in classes.items()}
            memo.clear()
            if document.delete_at is not None:
                removals.append((document.delete_at, name, document.index))


def load_scenario(path: str | Path) -> Scenario:
    scenario = Scenario()
    try:
        manifests = read_manifests(path)
    except ManifestFileError as error:
        raise ScenarioError(str(error)) from None
    documents: list[_Document] = []
    for index, (source, raw) in enumerate(manifests):
        problems: list[str] = []
        annotations = _dict(_dict(raw.get("metadata")).get("annotations"))
        documents.append(_Document(
            index=index, source=source, raw=raw,
            at=_seconds(annotations, AT_ANNOTATION, source, problems) or 0.0,
            runtime=_seconds(annotations, RUNTIME_ANNOTATION, source, problems),
            delete_at=_seconds(annotations, DELETE_AT_ANNOTATION, source, problems),
            problems=problems))
    _admit_in_creation_order(documents)
    for document in documents:
        scenario.problems += document.problems
        item = _scenario_object(document, scenario.problems)
        if item is not None:
            scenario.objects.append(item)
    return scenario


# Kinds a manifest ships so that it applies to a real cluster, which scheduling never reads: a
# scenario file that is also a kubectl manifest (ops/examples) carries them, so skipping them is no news.
_CLUSTER_ONLY_KINDS = frozenset({("v1", "Namespace")})


def _scenario_object(document: _Document, problems: list[str]) -> ScenarioObject | None:
    if document.admitted is None:
        return None
    source, raw = document.source, document.admitted
    api_version, kind = str(raw.get("apiVersion", "")), str(raw.get("kind", ""))
    info = kind_of(api_version, kind)
    if info is None and (api_version, kind) in _CLUSTER_ONLY_KINDS:
        return None
    if info is None:
        problems.append(f"{source}: {api_version or '?'} {kind or '?'} is not a kind toposched reads; skipped")
        return None
    decoded = decode_object(info, raw, api_version)
    if isinstance(decoded, ObjectUndecodable):
        problems.append(f"{source}: {info.name} {decoded.key}: {decoded.problem}; skipped")
        return None
    meta = decoded.metadata
    if not meta.name:
        problems.append(f"{source}: {info.name}: metadata.name is missing; skipped")
        return None
    namespace = meta.namespace or ("default" if info.namespaced else "")
    if info.namespaced and not meta.namespace:
        decoded = msgspec.structs.replace(decoded, metadata=msgspec.structs.replace(meta, namespace=namespace))
    return ScenarioObject(info=info, obj=decoded, key=object_key(namespace, meta.name), index=document.index,
                          source=source, at=document.at, runtime=document.runtime, delete_at=document.delete_at)
