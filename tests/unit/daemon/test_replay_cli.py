"""`toposched replay`: a user folds a log, sees its contents, and verifies snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.cli.replay import main
from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.log import EventLog, FsyncPolicy
from events.model import Event, GangPending, GangPlanned, PodAssumed, PodBound
from state.cluster import ClusterState


def _events() -> list[Event]:
    return [
        node_event(node("gpu-1", block="b1")), node_event(node("gpu-2", block="b1")),
        group_event(pod_group("train", min_member=2)),
        pod_event(bound(pod("train-0", gang="train"), "gpu-1")),
        pod_event(pod("train-1", gang="train")),
        PodAssumed(pod="default/train-1", uid="uid-default-train-1", node="gpu-2", gang="default/train"),
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


def test_replay_counts_the_pods_held_by_scheduling_gates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with EventLog.open(tmp_path, fsync=FsyncPolicy.never()) as log:
        for event in (node_event(node("gpu-1")), pod_event(pod("quota-wait", gates=("kueue.x-k8s.io/admission",))),
                      pod_event(pod("free"))):
            log.append(event)
    assert main([str(tmp_path)]) == 0
    rows = [[cell.strip() for cell in line.split("│") if cell.strip()] for line in capsys.readouterr().out.splitlines()]
    assert ["Pod (toposched, pending)", "1"] in rows
    assert ["Pod (toposched, held by scheduling gates)", "1"] in rows


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


def test_explain_tells_a_gangs_story_from_arrival_to_binding(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    events: list[Event] = [
        node_event(node("gpu-1", block="b1")),
        group_event(pod_group("train", min_member=2)),
        pod_event(pod("train-0", gang="train")),
        GangPending(gang="default/train", reason="1 of minMember 2 pods exist", attempt=1, held=True),
        pod_event(pod("train-1", gang="train")),
        GangPending(gang="default/train", reason="MustGather BlockLayer: best block b1 has room for 1 of 2 pods",
                    attempt=1),
        node_event(node("gpu-2", block="b1")),
        GangPlanned(gang="default/train", domain="b1", layer="BlockLayer", pods=2, explanation="tightest block",
                    attempt=2),
        PodAssumed(pod="default/train-0", uid="uid-default-train-0", node="gpu-1", gang="default/train"),
        PodAssumed(pod="default/train-1", uid="uid-default-train-1", node="gpu-2", gang="default/train"),
        PodBound(pod="default/train-0", uid="uid-default-train-0", node="gpu-1"),
        PodBound(pod="default/train-1", uid="uid-default-train-1", node="gpu-2"),
    ]
    with EventLog.open(tmp_path, fsync=FsyncPolicy.never()) as log:
        for event in events:
            log.append(event)
    assert main([str(tmp_path), "--explain", "default/train"]) == 0
    out = capsys.readouterr().out
    assert "PodGroup created (minMember 2)" in out
    assert "not ready for scheduling (not tried against nodes): 1 of minMember 2" in out
    assert "could not be placed: MustGather BlockLayer: best block b1 has room for 1 of 2 pods" in out
    assert "planned 2 pods in BlockLayer b1: tightest block" in out
    assert "bound 2 pods on gpu-1, gpu-2" in out


def test_explain_of_an_unknown_gang_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_log(tmp_path)
    assert main([str(tmp_path), "--explain", "default/nope"]) == 1
    assert "nothing about default/nope" in capsys.readouterr().err
