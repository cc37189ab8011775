"""Manifests are read from YAML streams, JSON, NDJSON, lists and directories, the way kubectl reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from manifests.files import ManifestFileError, read_manifests

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}


def test_yaml_stream_skips_empty_documents_and_names_each_source(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("---\n" + yaml.safe_dump(NODE) + "---\n---\n" + yaml.safe_dump(POD))
    assert read_manifests(path) == [("s.yaml#1", NODE), ("s.yaml#3", POD)]  # the second document is empty


def test_a_list_stands_for_its_items_and_typed_lists_lend_their_kind(tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [NODE, POD]}))
    assert read_manifests(listed) == [("list.yaml#1[0]", NODE), ("list.yaml#1[1]", POD)]
    typed = tmp_path / "pods.json"  # what GET /api/v1/pods answers: items carry no apiVersion/kind
    typed.write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                                 "items": [{"metadata": {"name": "p"}, "spec": POD["spec"]}]}))
    assert read_manifests(typed) == [("pods.json#1[0]", POD)]


def test_json_and_ndjson_files_hold_the_same_objects_as_yaml(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [NODE, POD]}))
    (tmp_path / "b.ndjson").write_text(json.dumps(NODE) + "\n\n" + json.dumps(POD) + "\n")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all([NODE, POD]))
    objects = [[obj for _, obj in read_manifests(tmp_path / name)] for name in ("a.json", "b.ndjson", "c.yaml")]
    assert objects[0] == objects[1] == objects[2] == [NODE, POD]


def test_a_directory_is_read_in_name_order_ignoring_other_files(tmp_path: Path) -> None:
    (tmp_path / "2-pods.ndjson").write_text(json.dumps(POD) + "\n")
    (tmp_path / "1-nodes.yml").write_text(yaml.safe_dump(NODE))
    (tmp_path / "notes.txt").write_text("not a manifest")
    assert [source for source, _ in read_manifests(tmp_path)] == ["1-nodes.yml#1", "2-pods.ndjson#1"]


def test_yaml_values_are_what_kubernetes_reads(tmp_path: Path) -> None:
    path = tmp_path / "v.yaml"
    path.write_text("""
base: &base {cpu: "1", memory: 1Gi}
merged: {<<: *base, memory: 2Gi}
alias: *base
stamp: 2024-01-01T00:00:00Z
numbers: [8, 0.5, 0x10, 1_000, .inf, ~, yes, "8"]
""")
    (_, value), = read_manifests(path)
    assert value["merged"] == {"cpu": "1", "memory": "2Gi"} and value["alias"] == value["base"]
    assert value["stamp"] == "2024-01-01T00:00:00Z"  # a timestamp stays the string the API reads
    assert value["numbers"] == [8, 0.5, 16, 1000, float("inf"), None, True, "8"]
    safe = yaml.safe_load(path.read_text())
    assert {k: v for k, v in value.items() if k != "stamp"} == {k: v for k, v in safe.items() if k != "stamp"}


def test_yaml_builds_what_the_safe_loader_builds_but_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "features.yaml"
    path.write_text("""
a: &a {x: 1, y: [1, 2, {z: null}]}
b: &b {y: 3, w: !!str 8}
m1: {<<: *a, y: 4}
m2: {<<: [*a, *b], q: yes}
seq: &s [on, off, 0o17, 017, 1:20, -.inf, "str", 'single', !!int "42", !!float "1", ! plain]
again: *s
1: int key
true: bool key
~: null key
"quoted key": |
  block
  text
folded: >
  folded
  text
empty:
nested: [[1, [2, [3]]], {k: [a, b]}]
bin: !!binary aGVsbG8=
day: 2001-12-14
""")
    (_, value), = read_manifests(path)
    safe = yaml.safe_load(path.read_text())
    assert value.pop("day") == "2001-12-14" and str(safe.pop("day")) == "2001-12-14"
    assert value == safe


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("bad.yaml", "a: [1, 2\n", "not valid YAML"),
    ("bad.json", "{", "not valid JSON"),
    ("bad.ndjson", '{"a": 1}\n[\n', "not valid JSON"),
    ("scalar.yaml", "just a string\n", "must be a Kubernetes object"),
    ("items.yaml", "apiVersion: v1\nkind: List\nitems: [3]\n", "list item must be a Kubernetes object"),
])
def test_unreadable_files_are_refused_naming_the_file(tmp_path: Path, name: str, text: str, problem: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(ManifestFileError) as refused:
        read_manifests(tmp_path / name)
    assert problem in str(refused.value) and name in str(refused.value)


def test_missing_paths_and_empty_directories_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestFileError, match="no such file"):
        read_manifests(tmp_path / "missing.yaml")
    with pytest.raises(ManifestFileError, match="holds no"):
        read_manifests(tmp_path)
