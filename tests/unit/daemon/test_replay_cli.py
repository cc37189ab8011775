"""`toposched replay`: a user folds a log, sees its contents, and verifies snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.replay_cli import main
from events.log import EventLog, FsyncPolicy
from events.model import Event, PodAssumed
from state.cluster import ClusterState
from tests.factories import bound, group_event, node, node_event, pod, pod_event, pod_group


def _events() -> list[Event]:
    return [
        node_event(node("gpu-1", block="b1")), node_event(node("gpu-2", block="b1")),
        group_event(pod_group("train", min_member=2)),
        pod_event(bound(pod("train-0", gang="train"), "gpu-1")),
        pod_event(pod("train-1", gang="train")),
        PodAssumed(pod="default/train-1", uid="uid-default-train-1", node="gpu-2"),
    ]


def _write_log(directory: Path, *, snapshot_after: int | None = None, corrupt_snapshot: bool = False) -> None:
    state = ClusterState()
    with EventLog.open(directory, fsync=FsyncPolicy.never()) as log:
        for event in _events():
            stored = log.append(event)
            state.apply(stored)
            if snapshot_after is not None and stored.seq == snapshot_after:
                payload = state.snapshot()
                if corrupt_snapshot:
                    # A snapshot that is well-formed but claims a different state: verify must catch it.
                    liar = ClusterState.restore(payload)
                    liar.apply(node_event(node("phantom")))
                    payload = liar.snapshot()
                log.write_snapshot(stored.seq, payload)


def test_replay_prints_objects_gangs_and_node_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_log(tmp_path)
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Node" in out and "default/train" in out and "gpu-1" in out
    assert "Permit (waiting)" in out or "Running" in out


def test_replay_until_stops_early(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_log(tmp_path)
    assert main([str(tmp_path), "--until", "2"]) == 0
    captured = capsys.readouterr()
    assert "up to seq 2" in captured.err
    assert "default/train" not in captured.out


def test_verify_passes_for_an_honest_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_log(tmp_path, snapshot_after=4)
    assert main([str(tmp_path), "--verify"]) == 0
    assert "snapshot at seq 4" in capsys.readouterr().out


def test_verify_fails_when_the_snapshot_disagrees_with_the_log(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    _write_log(tmp_path, snapshot_after=4, corrupt_snapshot=True)
    assert main([str(tmp_path), "--verify"]) == 1
    assert "MISMATCH" in capsys.readouterr().err


def test_missing_log_directory_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    assert "no event log" in capsys.readouterr().err
