"""Quota scenarios beyond their expectation files: what makes each one discriminating."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from daemon.offline.simulator import Simulation
from events.scenario import load_scenario

HERE = Path(__file__).parent


def _simulate(path: Path) -> dict[str, Any]:
    return dict(json.loads(anyio.run(Simulation(load_scenario(path)).run).to_json()))


def test_without_mustgather_the_same_reclaim_takes_the_cheaper_pair_across_blocks(tmp_path: Path) -> None:
    text = (HERE / "quota-reclaim-mustgather.yaml").read_text().replace('"MustGather"', '"PreferGather"')
    prefer = tmp_path / "prefer.yaml"
    prefer.write_text(text)
    report = _simulate(prefer)
    assert [p["victims"] for p in report["preemptions"]] == [["team-a/a2-0", "team-a/a3-0"]]
    mustgather = _simulate(HERE / "quota-reclaim-mustgather.yaml")
    assert [p["victims"] for p in mustgather["preemptions"]] == [["team-a/a3-0", "team-a/a4-0"]]


def test_the_quotas_section_counts_gpu_seconds_of_bound_pods() -> None:
    report = _simulate(HERE / "quota-reclaim-siblings.yaml")
    team_a = next(q for q in report["quotas"] if q["quota"] == "quota team-a")
    # a1..a4 (8 GPUs each) bound at 0, 10, 20, 30; a3 and a4 leave at 130 (evicted at 100, 30 s grace)
    assert team_a["resource_seconds"] == {"nvidia.com/gpu": 8 * 130 + 8 * 120 + 8 * 110 + 8 * 100}
