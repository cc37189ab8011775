"""Quota decisions are folded state and events: `replay --verify` re-decides them and `replay
--explain` tells the quota reasons and the reclaims; a restored snapshot admits as the log did."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.cli.replay import main as replay
from daemon.cli.simulate import main as simulate
from daemon.offline.verify import verify_decisions
from events.log import EventLog
from events.model import Event, PreemptionPlanned
from placement import Unschedulable, plan_gang
from state.cluster import ClusterState

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _recorded(name: str, directory: Path) -> list[Event]:
    scenario = SCENARIOS / f"{name}.yaml"
    assert simulate([str(scenario), "--out", str(directory / "report.json"), "--log-dir", str(directory / "log")]) == 0
    with EventLog.open_readonly(directory / "log") as log:
        return list(log.read(1))


@pytest.mark.parametrize("name", ["quota-reclaim-siblings", "quota-hierarchical-min", "volcano-queue-reclaimable",
                                  "capacity-quota-borrow-reclaim", "quota-reclaim-mustgather"])
def test_replay_re_decides_every_plan_and_reclaim(name: str, tmp_path: Path) -> None:
    events = _recorded(name, tmp_path)
    reclaims = [e for e in events if isinstance(e, PreemptionPlanned)]
    assert reclaims and all(e.reclaim_from for e in reclaims)
    check = verify_decisions(events)
    assert check.ok, check.mismatches
    assert check.preemptions == len(reclaims) and check.plans >= 1


def test_explain_tells_the_quota_reason_and_the_reclaim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _recorded("quota-reclaim-non-preemptible", tmp_path)
    assert replay([str(tmp_path / "log"), "--explain", "team-b/b1"]) == 0
    story = capsys.readouterr().out
    assert "reclaiming 4 pods of 2 job(s) (team-a/e1, team-a/e2) from quota team-a" in story
    assert "reclaim: quota team-b nvidia.com/gpu 0 used + 16 asked <= min 16" in story
    assert replay([str(tmp_path / "log"), "--explain", "team-a/core2"]) == 0
    waiting = capsys.readouterr().out
    assert "quota team-a: nvidia.com/gpu 16 used by non-preemptible pods + 8 asked > min 16" in waiting
    assert replay([str(tmp_path / "log"), "--explain", "team-a/e1"]) == 0
    victim = capsys.readouterr().out
    assert "chosen as a reclaim victim of team-b/b1 (its quota borrowed the capacity: quota team-a)" in victim


def test_a_state_restored_from_a_snapshot_admits_as_the_folded_one(tmp_path: Path) -> None:
    events = _recorded("quota-borrow", tmp_path)
    folded = ClusterState()
    folded.apply_all(events)
    restored = ClusterState.restore(folded.snapshot())
    assert restored.canonical() == folded.canonical()
    for state in (folded, restored):
        result = plan_gang(state, "team-a/a5")
        assert isinstance(result, Unschedulable)
        assert "quota team-a: nvidia.com/gpu 32 used + 8 asked > max 32" in result.reason
