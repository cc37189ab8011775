"""docs/scenarios.md documents what the scenario loader and the simulator really read and write: every
label and annotation key toposched recognises, every kind, and every field of the report."""

from __future__ import annotations

import re

import msgspec
import pytest

import events.objects
from daemon.cli import simulate
from daemon.offline.quota_report import QuotaReport
from daemon.offline.simulator import Binding, Nomination, PendingPod, Preemption, Report
from events.ingest import KINDS, KindInfo
from events.scenario import AT_ANNOTATION, DELETE_AT_ANNOTATION, RUNTIME_ANNOTATION
from state.topology import LABEL_SCHEMES

from .opsfiles import REPO

DOC = (REPO / "docs" / "scenarios.md").read_text(encoding="utf-8")
# Not read from any object: the marker toposched puts on an object it logged as its core (events/objects.py).
NOT_INPUT = {events.objects.OVERSIZED_ANNOTATION}


def recognised_keys() -> list[str]:
    keys = {value for name, value in vars(events.objects).items()
            if name.endswith(("_LABEL", "_ANNOTATION")) and isinstance(value, str)}
    keys |= set(events.objects.KEPT_ANNOTATIONS)
    keys |= {AT_ANNOTATION, RUNTIME_ANNOTATION, DELETE_AT_ANNOTATION}
    keys |= {key for scheme in LABEL_SCHEMES for layer in scheme for key in layer.label_keys}
    return sorted(keys - NOT_INPUT)


@pytest.mark.parametrize("key", recognised_keys())
def test_every_label_and_annotation_the_loader_recognises_is_documented(key: str) -> None:
    assert f"`{key}`" in DOC


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.name)
def test_every_kind_read_is_documented(info: KindInfo) -> None:
    assert re.search(rf"`{re.escape(info.api_version)}` {info.kind}\b", DOC), f"{info.api_version} {info.kind}"


@pytest.mark.parametrize("struct", [Report, Binding, Preemption, Nomination, PendingPod, QuotaReport],
                         ids=lambda s: s.__name__)
def test_every_report_field_is_documented(struct: type[msgspec.Struct]) -> None:
    missing = [name for name in struct.__struct_fields__ if f"`{name}`" not in DOC and f'"{name}"' not in DOC]
    assert not missing


def test_simulate_help_points_to_the_document() -> None:
    assert "docs/scenarios.md" in simulate.parser().format_help()
    assert (REPO / "docs" / "scenarios.md").exists()


def test_nothing_points_to_a_scenario_document_outside_the_repository() -> None:
    sources = [p for p in REPO.rglob("*") if p.suffix in {".py", ".md"} and ".venv" not in p.parts
               and p.resolve() != (REPO / "tests" / "unit" / "ops" / "test_scenarios_doc.py").resolve()]
    pointing = [str(p.relative_to(REPO)) for p in sources if "SCENARIOS.md" in p.read_text(encoding="utf-8")]
    assert not pointing
