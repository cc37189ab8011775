"""Preemption acceptance scenarios: `preemption-*.yaml` played by the simulator (`toposched simulate`).

Each scenario's header comment says the situation and what must happen; its expected report is
`<name>.expected.json` in the report format of docs/scenarios.md. Bindings, preemptions, nominations,
the pending pods and the end time must match exactly; pending reasons are placement's words and
are compared loosely (they must name the gang). Regenerate an expectation only after checking the
new report by hand: `toposched simulate tests/scenarios/preemption-X.yaml --out ...expected.json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.offline.simulator import Simulation
from events.scenario import load_scenario

HERE = Path(__file__).parent
SCENARIOS = sorted(HERE.glob("preemption-*.yaml"))


def _simulate(path: Path) -> dict[str, Any]:
    simulation = Simulation(load_scenario(path))
    return dict(json.loads(anyio.run(simulation.run).to_json()))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_preemption_scenario_gives_its_expected_report(path: Path) -> None:
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    report = _simulate(path)
    for field in ("bindings", "preemptions", "nominations", "finished_at"):
        assert report[field] == expected[field], field
    assert [p["pod"] for p in report["pending"]] == [p["pod"] for p in expected["pending"]]
    for pending in report["pending"]:
        assert pending["reason"], pending


def test_story3_guarantee_job_evicts_the_best_effort_job_and_lands_under_one_spine() -> None:
    report = _simulate(HERE / "preemption-story3.yaml")
    assert report["preemptions"] == [{"preemptor": "default/job-3", "at": 20.0,
                                      "victims": [f"default/pod-2-{i}" for i in range(4)]}]
    job3 = {b["pod"]: b for b in report["bindings"] if b["pod"].startswith("default/pod-3-")}
    assert sorted(b["node"] for b in job3.values()) == sorted(f"node{i}" for i in range(4, 12))  # spine-1
    assert {b["at"] for b in job3.values()} == {50.0}  # job-2's 30 s grace period, then all 8 together
    nominated = {n["pod"]: n["node"] for n in report["nominations"]}
    assert nominated == {pod: b["node"] for pod, b in job3.items()}


def test_lower_priority_latecomer_never_takes_the_nominated_room() -> None:
    report = _simulate(HERE / "preemption-nominated-room.yaml")
    assert [b for b in report["bindings"] if b["pod"] == "default/latecomer"] == []
    assert [p["pod"] for p in report["pending"]] == ["default/latecomer"]
    nominated = {n["pod"]: n["node"] for n in report["nominations"]}
    bound = {b["pod"]: b["node"] for b in report["bindings"] if b["pod"] in nominated}
    assert bound == nominated


def test_never_policy_preemptor_evicts_nobody_and_says_why() -> None:
    report = _simulate(HERE / "preemption-never.yaml")
    assert report["preemptions"] == [] and report["nominations"] == []
    assert [p["pod"] for p in report["pending"]] == [f"default/polite-{i}" for i in range(4)]
    for pending in report["pending"]:
        assert "no preemption: pod default/polite-0 has preemptionPolicy Never" in pending["reason"]


def test_mustgather_preemptor_stays_pending_instead_of_spanning_two_blocks() -> None:
    report = _simulate(HERE / "preemption-mustgather-pending.yaml")
    assert report["preemptions"] == [] and report["nominations"] == []
    assert [p["pod"] for p in report["pending"]] == [f"default/boxed-{i}" for i in range(4)]
    assert report["bindings"] == []  # the fillers were running from the start; nothing moved


def test_exclusive_jobset_job_preempts_the_low_priority_job_out_of_one_block() -> None:
    report = _simulate(HERE / "preemption-jobset-exclusive.yaml")
    # GPUs were free in both blocks: only the exclusive-placement terms kept job-high out
    assert report["preemptions"] == [{"preemptor": "default/job-high", "at": 10.0,
                                      "victims": ["default/job-low-a-0"]}]
    high = {b["pod"]: b["node"] for b in report["bindings"] if b["pod"].startswith("default/job-high-")}
    assert set(high) == {"default/job-high-0", "default/job-high-1"}
    assert set(high.values()) <= {"n1", "n2"}  # block b1, which job-low-a held
    assert {b["at"] for b in report["bindings"]} == {15.0}  # job-low-a's 5 s grace period, then both together
    assert report["pending"] == []
