"""The Dockerfile builds the image the manifests expect: multi-stage on a pinned base, every package
copied, non-root with the uid the Deployment runs as, no HEALTHCHECK, OCI labels, the metrics port.
(No container engine runs in CI; these are the rules read from the file.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from daemon.config import DaemonConfig

from .opsfiles import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text(encoding="utf-8")
INSTRUCTIONS = [line.strip() for line in re.sub(r"\\\n", " ", DOCKERFILE).splitlines()
                if line.strip() and not line.lstrip().startswith("#")]


def instructions(name: str) -> list[str]:
    return [line[len(name):].strip() for line in INSTRUCTIONS if line.upper().startswith(name + " ")]


def final_stage() -> list[str]:
    starts = [i for i, line in enumerate(INSTRUCTIONS) if line.upper().startswith("FROM ")]
    return INSTRUCTIONS[starts[-1]:]


def packages() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return [name.rstrip("*") for name in project["tool"]["setuptools"]["packages"]["find"]["include"]]


def test_two_stages_on_one_base_pinned_to_a_patch_release() -> None:
    froms = instructions("FROM")
    assert len(froms) == 2 and froms[0].endswith(" AS build")
    base = next(arg for arg in instructions("ARG") if arg.startswith("PYTHON_IMAGE="))
    image = base.partition("=")[2]
    assert re.fullmatch(r"python:3\.(1[1-9])\.\d+-slim-[a-z]+", image), image
    assert all(f.startswith("${PYTHON_IMAGE}") for f in froms)


def test_every_package_is_copied_and_nothing_else_from_the_tree() -> None:
    copies = [c for c in instructions("COPY") if not c.startswith("--from")]
    sources = {part for c in copies for part in c.split()[:-1]}
    assert sources == {"pyproject.toml", "README.md", *packages()}


def test_final_stage_runs_as_non_root_without_healthcheck() -> None:
    stage = final_stage()
    users = [line for line in stage if line.upper().startswith("USER ")]
    assert users == ["USER 65532:65532"]
    assert stage.index(users[0]) > max(i for i, line in enumerate(stage) if line.upper().startswith(("RUN ", "COPY ")))
    assert not any(line.upper().startswith("HEALTHCHECK") for line in INSTRUCTIONS)
    assert not any(line.startswith("RUN") and "pip install" in line for line in stage), "install in the build stage"


def test_oci_labels_and_no_placeholder_urls() -> None:
    labels = " ".join(instructions("LABEL"))
    for key in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels
    assert not re.search(r"https?://|example\.(com|org)|CHANGEME|TODO", DOCKERFILE)


def test_exposes_the_daemon_port_and_runs_the_daemon_by_default() -> None:
    _, port = DaemonConfig().host_port()
    assert instructions("EXPOSE") == [str(port)]
    assert instructions("ENTRYPOINT") == ['["toposched"]']
    assert instructions("CMD") == ['["run"]']


def test_dockerignore_sends_only_what_the_dockerfile_copies() -> None:
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*"
    included = {line[1:] for line in lines if line.startswith("!")}
    assert included == {"pyproject.toml", "README.md", *packages()}
    for path in included:
        assert Path(REPO / path).exists(), path
