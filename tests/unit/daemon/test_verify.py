"""`replay --verify` re-runs the loop's decision step at every decision of a recorded log."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from daemon.cli.replay import main as replay
from daemon.cli.simulate import main as simulate
from daemon.offline.verify import verify_decisions
from events.log import EventLog, FsyncPolicy
from events.model import (
    BindRequested,
    Event,
    EvictionRequested,
    GangPending,
    GangPlanned,
    GangTimedOut,
    NominationCleared,
    PodAssumed,
    PodForgotten,
    PodNominated,
    PreemptionPlanned,
)
from state.cluster import ClusterState

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "demo-cluster.yaml"
STORY3 = Path(__file__).resolve().parents[3] / "tests" / "scenarios" / "preemption-story3.yaml"


def _recorded(scenario: Path, directory: Path) -> list[Event]:
    assert simulate([str(scenario), "--out", str(directory / "report.json"), "--log-dir", str(directory / "log")]) == 0
    with EventLog.open_readonly(directory / "log") as log:
        return list(log.read(1))


def test_a_simulation_log_replays_to_the_same_decisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _recorded(EXAMPLE, tmp_path)
    assert replay([str(tmp_path / "log"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "same decisions" in out


def test_preemption_decisions_are_re_decided_too(tmp_path: Path) -> None:
    check = verify_decisions(_recorded(STORY3, tmp_path))
    assert check.ok, check.mismatches
    assert check.preemptions >= 1 and check.plans >= 1


def test_a_decision_the_state_does_not_explain_is_reported(tmp_path: Path) -> None:
    events = _recorded(EXAMPLE, tmp_path)
    index = next(i for i, e in enumerate(events) if isinstance(e, PodAssumed) and e.gang)
    original = events[index]
    assert isinstance(original, PodAssumed)
    nodes = sorted({e.node for e in events if isinstance(e, PodAssumed)} - {original.node})
    events[index] = msgspec.structs.replace(original, node=nodes[0])
    check = verify_decisions(events)
    assert not check.ok
    assert any(original.pod in line and "re-planned" in line for line in check.mismatches)


def test_verify_exits_non_zero_on_a_tampered_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _recorded(EXAMPLE, tmp_path)
    index = next(i for i, e in enumerate(events) if isinstance(e, PodAssumed) and e.gang)
    original = events[index]
    assert isinstance(original, PodAssumed)
    other = next(e.node for e in events if isinstance(e, PodAssumed) and e.node != original.node)
    events[index] = msgspec.structs.replace(original, node=other)
    with EventLog.open(tmp_path / "tampered", fsync=FsyncPolicy.never()) as log:
        for event in events:
            log.append(msgspec.structs.replace(event, seq=0))
    assert replay([str(tmp_path / "tampered"), "--verify"]) == 1
    assert "DIFFERENT decisions" in capsys.readouterr().err


def _pruned_copy(events: list[Event], directory: Path, *, base: int, later: int) -> int:
    """The same events in a log with small segments, snapshots at `base` and `later`, and no history kept
    before `base` (pruned right after its snapshot)."""
    state = ClusterState()
    with EventLog.open(directory, fsync=FsyncPolicy.never(), segment_bytes=4096) as log:
        for event in events:
            stored = log.append(msgspec.structs.replace(event, seq=0))
            state.apply(stored)
            if stored.seq in (base, later):
                log.write_snapshot(stored.seq, state.snapshot())
            if stored.seq == base:
                log.prune(retention_bytes=0, retention_seconds=0)
        assert log.first_seq > 1
        return log.first_seq


def test_a_pruned_log_replays_and_verifies_from_its_oldest_snapshot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = _recorded(EXAMPLE, tmp_path)
    plans = [e.seq for e in events if isinstance(e, GangPlanned)]
    base = plans[len(plans) // 2] - 1
    first = _pruned_copy(events, tmp_path / "pruned", base=base, later=len(events) - 3)
    assert replay([str(tmp_path / "pruned"), "--verify"]) == 0
    captured = capsys.readouterr()
    assert f"from the base snapshot at seq {base}" in captured.out
    assert f"snapshot at seq {len(events) - 3} + 3 tail events gives exactly the state" in captured.out
    decided = re.search(r"same decisions: (\d+) gang plans", captured.out)
    assert decided is not None and int(decided.group(1)) == len(plans) - len(plans) // 2
    assert replay([str(tmp_path / "pruned"), "--until", str(first - 2)]) == 1
    assert "pruned" in capsys.readouterr().err


SCENARIOS = sorted(p for p in (Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml")
                   if not p.name.endswith(".expect.yaml"))
# What the loop decides (as opposed to what it observes, and the answers of the API to its binds).
DECISIONS = (GangPlanned, PodAssumed, BindRequested, GangPending, PreemptionPlanned, EvictionRequested, PodNominated,
             NominationCleared, PodForgotten, GangTimedOut)


@pytest.mark.parametrize("scenario", [EXAMPLE, *SCENARIOS], ids=lambda p: p.stem)
def test_verify_re_derives_every_decision_event_of_a_scenario_run_through_the_loops_step(
        scenario: Path, tmp_path: Path) -> None:
    events = _recorded(scenario, tmp_path)
    decided = [e for e in events if isinstance(e, DECISIONS)]
    check = verify_decisions(events)
    assert check.ok, check.mismatches
    assert check.events == len(decided) > 0


def test_a_pending_reason_the_state_does_not_explain_is_reported(tmp_path: Path) -> None:
    events = _recorded(STORY3, tmp_path)
    index = next(i for i, e in enumerate(events) if isinstance(e, GangPending))
    original = events[index]
    assert isinstance(original, GangPending)
    events[index] = msgspec.structs.replace(original, reason=original.reason + " (edited)")
    check = verify_decisions(events)
    assert any(original.gang in line and "(edited)" in line for line in check.mismatches), check.mismatches


def test_a_timeout_the_state_does_not_explain_is_reported(tmp_path: Path) -> None:
    events = _recorded(Path(__file__).resolve().parents[2] / "scenarios" / "gang-schedule-timeout.yaml", tmp_path)
    index = next(i for i, e in enumerate(events) if isinstance(e, GangTimedOut))
    del events[index]  # the log says the pods were released for a timeout, but no gang timed out
    check = verify_decisions(events)
    assert not check.ok
    assert any("GangTimedOut" in line or "timeout" in line for line in check.mismatches), check.mismatches
