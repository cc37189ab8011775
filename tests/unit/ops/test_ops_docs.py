"""The README and docs/architecture.md describe what really exists: every config key with its
default, every metric, every benchmark module, every sub-command and ops path they name, and the
copy-paste examples exactly as shipped (and tested) under ops/examples."""

from __future__ import annotations

import re

import msgspec
import pytest
import yaml

from daemon.cli.main import COMMANDS
from daemon.config import DaemonConfig
from daemon.telemetry.metrics import METRIC_NAMES

from .opsfiles import OPS, REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGES = ("events", "state", "placement", "preemption", "daemon", "devcluster", "ops")


def config_keys(struct: type[msgspec.Struct], prefix: str = "") -> list[tuple[str, object]]:
    keys: list[tuple[str, object]] = []
    default = struct()
    for name in struct.__struct_fields__:
        value = getattr(default, name)
        if isinstance(value, msgspec.Struct):
            keys += config_keys(type(value), f"{prefix}{name}.")
        else:
            keys.append((f"{prefix}{name}", value))
    return keys


def _yaml_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == "":
        return '""'
    return str(value)


def test_quick_start_with_the_two_commands_comes_first() -> None:
    head = README.split("\n## ")[1]
    assert head.startswith("Quick start")
    assert "make demo" in head and "make test" in head
    assert "make test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize(("key", "default"), config_keys(DaemonConfig))
def test_readme_documents_every_config_key_with_its_default(key: str, default: object) -> None:
    row = next((line for line in README.splitlines() if line.startswith(f"| `{key}` |")), None)
    assert row is not None, f"config key {key} is not in the README's configuration reference"
    assert f"`{_yaml_scalar(default)}`" in row.split("|")[2], f"{key}: default {default!r} not shown"


def test_readme_lists_every_metric() -> None:
    missing = [name for name in METRIC_NAMES if f"`{name}`" not in README]
    assert not missing


def test_readme_benchmarks_are_exactly_the_bench_modules() -> None:
    named = set(re.findall(r"python -m bench\.(\w+)", README))
    modules = {p.stem for p in (REPO / "bench").glob("*.py")
               if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")}
    assert named == modules


def test_every_subcommand_the_docs_name_exists() -> None:
    named = set(re.findall(r"`toposched (\w+)", README + ARCHITECTURE))
    for block in re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL):
        named |= set(re.findall(r"^toposched (\w+)", block, flags=re.MULTILINE))
    assert named <= set(COMMANDS), sorted(named - set(COMMANDS))


def test_every_ops_path_the_docs_name_exists() -> None:
    paths = set(re.findall(r"(?<![\w/.])ops/[\w./-]*[\w/]", README + ARCHITECTURE))
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing


def _pod_shape(document: dict[str, object]) -> str:
    """A pod with its name and its label and annotation values left out: members of one gang share it."""
    meta = document.get("metadata")
    assert isinstance(meta, dict)
    keys = {field: sorted(meta.get(field) or {}) for field in ("labels", "annotations")}
    return yaml.safe_dump([meta.get("namespace"), keys, document.get("spec")], sort_keys=True)


@pytest.mark.parametrize("name", sorted(p.name for p in (OPS / "examples").glob("*.yaml") if p.name != "nodes.yaml"))
def test_readme_shows_each_example_as_shipped(name: str) -> None:
    """Every document of the file, word for word, except the pods repeating an earlier member's shape
    (the README names the file for those)."""
    text = (OPS / "examples" / name).read_text(encoding="utf-8").rstrip("\n")
    shapes: set[str] = set()
    repeated = []
    for chunk in text.split("\n---\n"):
        document = yaml.safe_load(chunk)
        if document and document.get("kind") == "Pod":
            shape = _pod_shape(document)
            if shape in shapes:
                repeated.append(document["metadata"]["name"])
                continue
            shapes.add(shape)
        assert chunk in README, f"README's copy of ops/examples/{name} differs from the file:\n{chunk}"
    if repeated:
        assert f"ops/examples/{name} has all" in README or f"ops/examples/{name} has both" in README


def test_architecture_has_a_paragraph_per_package() -> None:
    for package in PACKAGES:
        assert re.search(rf"^\*\*`{package}/", ARCHITECTURE, flags=re.MULTILINE), package
