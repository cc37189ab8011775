"""Reading Kubernetes manifests from files: YAML streams, JSON, NDJSON, lists and directories.

What `kubectl apply -f` accepts, read the way it reads it:
- `.yaml` / `.yml`: a stream of YAML documents separated by `---` (empty documents skipped);
- `.json`: one JSON value;
- `.ndjson` / `.jsonl`: one JSON object per line (blank lines skipped);
- a directory: its files with those suffixes, in name order (not recursive).
A document of kind `List` (or `<Kind>List` with `items`, as `kubectl get -o yaml` and the API's
list responses write them) stands for its items, in order; an item without apiVersion/kind takes
them from the list (`PodList` -> `Pod`).

JSON is decoded by msgspec, YAML by libyaml's parser with a constructor written for Kubernetes
manifests: plain data only (maps, lists, strings, numbers, booleans, null), timestamps kept as the
strings Kubernetes reads them as, merge keys (`<<`) and anchors honoured. It builds the same values
as PyYAML's safe loader for every manifest, several times faster on large scenarios.

Every document comes back with where it came from (`file.yaml#3`, `list.json#1[2]`) so that a
message can name it. Reads files; never writes; imports nothing of ours.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import yaml

SUFFIXES = (".yaml", ".yml", ".json", ".ndjson", ".jsonl")
Manifest = tuple[str, dict[str, Any]]  # (source, object)


class ManifestFileError(Exception):
    """A path that cannot be read as Kubernetes objects (missing, unreadable, not YAML/JSON, not objects)."""


# --------------------------------------------------------------------------- YAML

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_PLAIN_TAGS: dict[str, str] = {}
_NO_PATHS: dict[Any, None] = {}  # stays empty: see `_ManifestLoader`
_SCALARS = {tag: yaml.SafeLoader.yaml_constructors[tag] for tag in (
    "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:binary")}  # plain scalar text -> resolved tag; manifests repeat the same scalars


class _ManifestLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's parser and composer; tag resolution cached, construction by `_construct` below.

    The composer calls `descend_resolver` / `ascend_resolver` around every node and `resolve` for
    every node. This loader has no path resolvers (its own empty table, so none added to another
    loader class reaches it), which leaves those two nothing to do: they are C-level no-ops here
    instead of Python calls, and `resolve` answers PyYAML's `BaseResolver.resolve` without them.
    """

    yaml_path_resolvers: dict[Any, Any] = {}
    descend_resolver = _NO_PATHS.get  # (node, index) -> None, in C
    ascend_resolver = tuple  # () -> (), in C

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode:
            if not implicit[0]:  # quoted, or a plain scalar not to be resolved: a string
                return _STR
            tag = _PLAIN_TAGS.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)
                if len(_PLAIN_TAGS) < 100_000:
                    _PLAIN_TAGS[value] = tag
            return tag
        return _MAP if kind is yaml.MappingNode else _SEQ


_ScalarNode, _SequenceNode, _MappingNode = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode


def _construct(loader: Any, node: yaml.Node, built: dict[int, Any]) -> Any:
    """The value of one node; strings (most of a manifest) are taken in line, without a call each."""
    kind = type(node)
    if kind is _ScalarNode:
        tag = node.tag
        if tag in (_STR, _TIMESTAMP):
            return node.value
        scalar = _SCALARS.get(tag)  # null, bool, int, float, binary: PyYAML's own rules
        return scalar(loader, node) if scalar is not None else loader.construct_object(node, deep=True)
    done = built.get(id(node))
    if done is not None:  # an alias: the same node again
        return done
    if kind is _SequenceNode:
        if node.tag != _SEQ:
            return loader.construct_object(node, deep=True)
        items: list[Any] = []
        built[id(node)] = items
        for child in node.value:
            items.append(child.value if type(child) is _ScalarNode and child.tag == _STR
                         else _construct(loader, child, built))
        return items
    if kind is _MappingNode and node.tag == _MAP:
        pairs = node.value
        for key_node, _ in pairs:
            if key_node.tag == _MERGE:
                loader.flatten_mapping(node)  # `<<: *anchor` merges the anchor's keys, as YAML 1.1 says
                pairs = node.value
                break
        mapping: dict[Any, Any] = {}
        built[id(node)] = mapping
        for key_node, value_node in pairs:
            key = (key_node.value if type(key_node) is _ScalarNode and key_node.tag == _STR
                   else _construct(loader, key_node, built))
            try:
                mapping[key] = (value_node.value if type(value_node) is _ScalarNode and value_node.tag == _STR
                                else _construct(loader, value_node, built))
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, "found unhashable key",
                    key_node.start_mark) from None
        return mapping
    return loader.construct_object(node, deep=True)  # any other tag: PyYAML's safe rules refuse or build it


def _yaml_documents(text: str) -> Iterator[Any]:
    loader = _ManifestLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            yield None if node is None else _construct(loader, node, {})
            loader.constructed_objects = {}
    finally:
        loader.dispose()


# --------------------------------------------------------------------------- JSON

_json = msgspec.json.Decoder()


def _json_documents(data: bytes, lines: bool) -> list[Any]:
    return _json.decode_lines(data) if lines else [_json.decode(data)]


# --------------------------------------------------------------------------- lists and paths


def _is_list(document: dict[str, Any]) -> bool:
    kind = document.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list)


def _expand(source: str, document: dict[str, Any]) -> Iterator[Manifest]:
    if not _is_list(document):
        yield source, document
        return
    list_kind = str(document["kind"])
    item_kind = list_kind[: -len("List")]
    for index, item in enumerate(document["items"]):
        where = f"{source}[{index}]"
        if not isinstance(item, dict):
            raise ManifestFileError(f"{where}: a list item must be a Kubernetes object (a mapping)")
        if item_kind and ("kind" not in item or "apiVersion" not in item):
            item = {"apiVersion": document.get("apiVersion"), "kind": item_kind, **item}
        yield from _expand(where, item)


def manifest_files(path: Path) -> list[Path]:
    """The files a path stands for: itself, or a directory's manifest files in name order."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SUFFIXES)
        if not files:
            raise ManifestFileError(f"{path}: directory holds no {', '.join(SUFFIXES)} files")
        return files
    if not path.exists():
        raise ManifestFileError(f"{path}: no such file or directory")
    return [path]


def read_file(file: Path) -> list[Manifest]:
    """Every object in one file, lists expanded, with its source."""
    try:
        data = file.read_bytes()
    except OSError as error:
        raise ManifestFileError(f"{file}: cannot read: {error}") from None
    try:
        if file.suffix in (".json", ".ndjson", ".jsonl"):
            documents = _json_documents(data, lines=file.suffix != ".json")
        else:
            documents = list(_yaml_documents(data.decode("utf-8")))
    except msgspec.DecodeError as error:
        raise ManifestFileError(f"{file}: not valid JSON: {error}") from None
    except yaml.YAMLError as error:
        raise ManifestFileError(f"{file}: not valid YAML: {error}") from None
    except UnicodeDecodeError as error:
        raise ManifestFileError(f"{file}: not UTF-8 text: {error}") from None
    manifests: list[Manifest] = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        source = f"{file.name}#{number}"
        if not isinstance(document, dict):
            raise ManifestFileError(f"{source}: a document must be a Kubernetes object (a mapping)")
        manifests.extend(_expand(source, document))
    return manifests


def read_manifests(path: str | Path) -> list[Manifest]:
    """Every object under `path` (a file or a directory), in order, with its source."""
    return [manifest for file in manifest_files(Path(path)) for manifest in read_file(file)]
