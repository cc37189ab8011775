"""Acceptance scenarios: every `NAME.yaml` with a `NAME.expect.yaml` beside it, run through the real simulator.

Each scenario's header comment tells the situation (taken from what the Koordinator and Volcano
documentation describe) and what must happen. The expectation file asserts on the report
(docs/scenarios.md); every key is optional:

    description: one line, shown when an assertion fails
    until: 50                 # simulate with --until 50
    bindings: 6               # exact number of bindings
    bound:                    # pods that must be bound: a glob, or {pod, node?, at?} for one binding
    - default/train-*
    - {pod: default/job-3, node: n4, at: 60.0}
    not_bound: [default/x-*]  # globs no binding may match
    together:                 # the bound pods matching `pods` (a glob)...
    - pods: default/train-*
      count: 6                # ...are exactly this many,
      layer: BlockLayer       # ...sit in `domains` (default 1) domain(s) of this layer,
      domains: 1
      at: 100.0               # ...and all bound at this time (without `at`: all at one time)
      nodes: [n2, n4]         # ...and only on these nodes
    pending:                  # the pending pods matching `pods`: how many, and words their reasons hold
    - pods: default/train-*
      count: 6
      reason: [default/train, MustGather, BlockLayer]
    pending_count: 0          # exact number of pending pods
    preemptions: 0            # exact number of preemptions
    victims: [default/low-*]  # globs each matching some preempted pod
    not_victims: [default/x-*]  # globs no preempted pod may match
    quotas:                   # the report's `quotas` section: per quota (its label), fields that must match
      quota team-a: {reclaimed: 4, peak: {nvidia.com/gpu: "32"}}
    finished_at: 100.0

Globs are `fnmatch` patterns over `namespace/name`. Layers are resolved on the scenario's own topology
(node labels, ClusterNetworkTopology or HyperNodes), so `BlockLayer` means the same as in placement.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from daemon.offline.simulator import Simulation
from events.scenario import load_scenario
from state.cluster import ClusterState
from state.topology import TopologyTree

HERE = Path(__file__).parent
EXPECTATIONS = sorted(HERE.glob("*.expect.yaml"))
TOPOLOGY_KINDS = ("Node", "ClusterNetworkTopology", "HyperNode", "KueueTopology", "KaiTopology")
QUOTA_KINDS = {"ElasticQuota", "CapacityElasticQuota", "Queue", "KaiQueue"}


def _scenario_of(expect: Path) -> Path:
    return expect.with_name(expect.name.removesuffix(".expect.yaml") + ".yaml")


def _topology(scenario: Path) -> TopologyTree:
    state = ClusterState()
    for item in load_scenario(scenario).objects:
        if item.info.name in TOPOLOGY_KINDS:
            state.apply(item.info.upsert(item.obj))
    return state.topology


def _check(scenario: Path, expect: dict[str, Any], report: dict[str, Any]) -> None:
    bindings: list[dict[str, Any]] = report["bindings"]
    pending: list[dict[str, Any]] = report["pending"]
    context = f"{scenario.name}: {expect.get('description', '')}\nreport: {json.dumps(report, indent=1)[:3000]}"
    if "bindings" in expect:
        assert len(bindings) == expect["bindings"], context
    for wanted in expect.get("bound", []):
        if isinstance(wanted, str):
            assert any(fnmatchcase(b["pod"], wanted) for b in bindings), f"{wanted} not bound\n{context}"
            continue
        matches = [b for b in bindings if b["pod"] == wanted["pod"]]
        assert matches, f"{wanted['pod']} not bound\n{context}"
        for field in ("node", "at"):
            if field in wanted:
                assert matches[-1][field] == wanted[field], f"{wanted['pod']} {field}\n{context}"
    for pattern in expect.get("not_bound", []):
        assert not [b for b in bindings if fnmatchcase(b["pod"], pattern)], f"{pattern} bound\n{context}"
    tree = _topology(scenario) if any("layer" in t for t in expect.get("together", [])) else None
    for together in expect.get("together", []):
        group = [b for b in bindings if fnmatchcase(b["pod"], together["pods"])]
        assert group, f"nothing bound matches {together['pods']}\n{context}"
        if "count" in together:
            assert len(group) == together["count"], f"{together['pods']} count\n{context}"
        times = {b["at"] for b in group}
        if "at" in together:
            assert times == {together["at"]}, f"{together['pods']} bound at {times}\n{context}"
        elif "layer" not in together:
            assert len(times) == 1, f"{together['pods']} bound at several times {times}\n{context}"
        if "nodes" in together:
            outside = sorted({b["node"] for b in group} - set(together["nodes"]))
            assert not outside, f"{together['pods']} bound on {outside}\n{context}"
        if "layer" in together:
            assert tree is not None
            level = tree.resolve_level(together["layer"])
            domains = {getattr(tree.domain_at(b["node"], level), "name", None) for b in group}
            assert None not in domains, f"{together['pods']}: a node outside every {together['layer']}\n{context}"
            assert len(domains) == together.get("domains", 1), (
                f"{together['pods']} spans {together['layer']} {sorted(d or '' for d in domains)}\n{context}")
    for wanted in expect.get("pending", []):
        matches = [p for p in pending if fnmatchcase(p["pod"], wanted["pods"])]
        if "count" in wanted:
            assert len(matches) == wanted["count"], f"pending {wanted['pods']}\n{context}"
        for entry in matches:
            for word in wanted.get("reason", []):
                assert word in entry["reason"], f"{entry['pod']}: {word!r} not in {entry['reason']!r}"
    if "pending_count" in expect:
        assert len(pending) == expect["pending_count"], context
    if "preemptions" in expect:
        assert len(report["preemptions"]) == expect["preemptions"], context
    if "quotas" in expect:
        by_label = {q["quota"]: q for q in report.get("quotas", [])}
        for label, fields in expect["quotas"].items():
            assert label in by_label, f"{label} not in the report's quotas\n{context}"
            for field, value in fields.items():
                assert by_label[label][field] == value, f"{label} {field}: {by_label[label][field]!r}\n{context}"

    if "finished_at" in expect:
        assert report["finished_at"] == expect["finished_at"], context
    victims = {v for p in report["preemptions"] for v in p["victims"]}
    assert not victims & {p["pod"] for p in pending}, "a victim is also pending"
    for pattern in expect.get("victims", []):
        assert any(fnmatchcase(v, pattern) for v in victims), f"{pattern} not preempted\n{context}"
    for pattern in expect.get("not_victims", []):
        assert not any(fnmatchcase(v, pattern) for v in victims), f"{pattern} preempted\n{context}"


def _run(scenario: Path, until: float | None) -> dict[str, Any]:
    report = anyio.run(Simulation(load_scenario(scenario), until=until).run)
    return dict(json.loads(report.to_json()))


@pytest.mark.parametrize("expect_path", EXPECTATIONS, ids=[p.name.removesuffix(".expect.yaml") for p in EXPECTATIONS])
def test_scenario_meets_its_expectations(expect_path: Path) -> None:
    expect = yaml.safe_load(expect_path.read_text())
    scenario = _scenario_of(expect_path)
    until = expect.get("until")
    report = _run(scenario, float(until) if until is not None else None)
    _check(scenario, expect, report)
    assert _run(scenario, float(until) if until is not None else None) == report  # deterministic


def test_a_report_has_a_quotas_section_exactly_when_the_scenario_has_quotas() -> None:
    for expect in EXPECTATIONS:
        scenario = _scenario_of(expect)
        kinds = {item.info.name for item in load_scenario(scenario).objects}
        report = _run(scenario, None)
        assert ("quotas" in report) == bool(kinds & QUOTA_KINDS), scenario.name


def test_every_expectation_has_its_scenario() -> None:
    assert EXPECTATIONS
    for path in EXPECTATIONS:
        assert _scenario_of(path).is_file(), path
