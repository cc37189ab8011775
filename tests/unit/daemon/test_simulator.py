"""`toposched simulate`: the virtual world's rules and the report, exactly as docs/scenarios.md says."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from daemon.cli import simulate as simulate_cli
from daemon.cli.simulate import main
from daemon.offline.replay import fold_log
from daemon.offline.simulator import Simulation, SimulationProgress
from events.log import EventLog
from events.scenario import load_scenario

EXAMPLE = Path(__file__).parents[3] / "examples" / "demo-cluster.yaml"


def node(name: str, *, block: str = "b0", gpus: int = 8, delete_at: str | None = None, zone: str = "") -> str:
    annotations = f'\n  annotations:\n    sim.toposched.io/delete-at: "{delete_at}"' if delete_at else ""
    zoned = f"\n    topology.kubernetes.io/zone: {zone}" if zone else ""
    return f"""---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    network.topology.nvidia.com/spine: s0
    network.topology.nvidia.com/block: {block}{zoned}{annotations}
status:
  allocatable: {{cpu: "96", memory: 1Ti, pods: "110", nvidia.com/gpu: "{gpus}"}}
"""


def pod(name: str, *, gpus: int = 8, gang: str = "", at: str | None = None, runtime: str | None = None,
        node_name: str = "", delete_at: str | None = None, scheduler: str = "toposched", gate: str = "") -> str:
    annotations = {"sim.toposched.io/at": at, "sim.toposched.io/runtime": runtime,
                   "sim.toposched.io/delete-at": delete_at}
    lines = "".join(f'\n    {key}: "{value}"' for key, value in annotations.items() if value is not None)
    labels = f"\n  labels:\n    pod-group.scheduling.sigs.k8s.io: {gang}" if gang else ""
    gates = f"\n  schedulingGates:\n  - name: {gate}" if gate else ""
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default{labels}""" + (f"\n  annotations:{lines}" if lines else "") + f"""
spec:
  schedulerName: {scheduler}
  nodeName: "{node_name}"{gates}
  containers:
  - name: main
    resources:
      requests: {{cpu: "1", memory: 1Gi, nvidia.com/gpu: "{gpus}"}}
"""


def pod_group(name: str, min_member: int, *, timeout: int | None = None) -> str:
    extra = f"\n  scheduleTimeoutSeconds: {timeout}" if timeout else ""
    return f"""---
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: {name}
  namespace: default
spec:
  minMember: {min_member}{extra}
"""


def simulate(tmp_path: Path, text: str, until: float | None = None) -> dict[str, Any]:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    report = anyio.run(Simulation(load_scenario(path), until=until).run)
    return dict(json.loads(report.to_json()))


def test_report_has_exactly_the_documented_shape(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert main([str(EXAMPLE), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert list(report) == ["bindings", "preemptions", "nominations", "pending", "finished_at"]
    assert report["bindings"] and all(list(b) == ["pod", "node", "at"] for b in report["bindings"])
    assert all(isinstance(b["at"], float) and "/" in b["pod"] for b in report["bindings"])
    assert report["pending"] and all(list(p) == ["pod", "reason"] for p in report["pending"])
    assert all("research/llm-giant" in p["reason"] and "MustGather" in p["reason"] for p in report["pending"])
    assert isinstance(report["finished_at"], float)
    times = [b["at"] for b in report["bindings"]]
    assert times == sorted(times)  # in the order they were made


def test_preemption_and_nomination_entries_have_the_documented_shape(tmp_path: Path) -> None:
    text = (node("n0") + "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: high\n"
            "value: 1000\n" + pod("low", node_name="n0")
            + pod("urgent", at="10").replace("  schedulerName: toposched", "  schedulerName: toposched\n"
                                             "  priorityClassName: high"))
    report = simulate(tmp_path, text)
    assert report["preemptions"] == [{"preemptor": "default/urgent", "victims": ["default/low"], "at": 10.0}]
    assert report["nominations"] == [{"pod": "default/urgent", "node": "n0", "at": 10.0}]
    assert report["bindings"] == [{"pod": "default/urgent", "node": "n0", "at": 40.0}]  # 30 s default grace
    assert report["pending"] == []


def test_the_same_scenario_gives_the_same_report_twice(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert main([str(EXAMPLE), "--out", str(first)]) == 0
    assert main([str(EXAMPLE), "--out", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()


def test_releases_happen_before_creations_at_the_same_time(tmp_path: Path) -> None:
    text = (node("n0") + pod("old", node_name="n0", runtime="10") + pod("new", at="10")
            + node("n1", block="b1") + pod("blocker", node_name="n1", delete_at="20") + pod("next", at="20"))
    report = simulate(tmp_path, text)
    assert {"pod": "default/new", "node": "n0", "at": 10.0} in report["bindings"]
    assert {"pod": "default/next", "node": "n1", "at": 20.0} in report["bindings"]
    assert report["finished_at"] == 20.0


def test_a_pod_with_node_name_runs_there_and_its_runtime_counts_from_its_creation(tmp_path: Path) -> None:
    report = simulate(tmp_path, node("n0") + pod("running", node_name="n0", at="5", runtime="10")
                      + pod("waiting", at="6"))
    assert report["bindings"] == [{"pod": "default/waiting", "node": "n0", "at": 15.0}]


def test_pods_of_other_schedulers_are_capacity_not_work(tmp_path: Path) -> None:
    report = simulate(tmp_path, node("n0") + pod("theirs", scheduler="default-scheduler")
                      + pod("placed-by-them", scheduler="default-scheduler", node_name="n0") + pod("ours"))
    assert report["bindings"] == []
    assert [p["pod"] for p in report["pending"]] == ["default/ours"]


def test_pods_held_by_scheduling_gates_are_reported_pending_with_their_gates(tmp_path: Path) -> None:
    text = (node("n0") + node("n1") + pod("quota-wait", gate="kueue.x-k8s.io/admission") + pod("free")
            + pod_group("w", 2) + pod("w-0", gang="w") + pod("w-1", gang="w", gate="example.com/image"))
    report = simulate(tmp_path, text)
    assert [b["pod"] for b in report["bindings"]] == ["default/free"]
    reasons = {p["pod"]: p["reason"] for p in report["pending"]}
    assert reasons["default/quota-wait"] == (
        "pod default/quota-wait: held by its scheduling gates (spec.schedulingGates: kueue.x-k8s.io/admission); "
        "no scheduler may place it until they are all removed")
    assert reasons["default/w-1"].startswith("gang default/w: pod default/w-1: held by its scheduling gates")
    assert "1 more held by their scheduling gates" in reasons["default/w-0"]


def test_a_lost_node_takes_its_pods_and_a_recreated_member_rejoins_its_gang(tmp_path: Path) -> None:
    text = (node("n0") + node("n1", delete_at="50") + node("n2") + "".join(node(f"m{i}", block="b1") for i in range(4))
            + pod_group("w", 2) + pod("w-0", gang="w", node_name="n0") + pod("w-1", gang="w", node_name="n1")
            + pod("w-1", gang="w", at="60"))
    report = simulate(tmp_path, text)
    assert report["bindings"] == [{"pod": "default/w-1", "node": "n2", "at": 60.0}]  # next to w-0, in block b0
    assert report["pending"] == []


def test_until_stops_the_world_and_reports_what_waits(tmp_path: Path) -> None:
    text = node("n0") + pod("first", runtime="100") + pod("second", runtime="50") + pod("late", at="200")
    report = simulate(tmp_path, text, until=50.0)
    assert [b["pod"] for b in report["bindings"]] == ["default/first"]
    assert [p["pod"] for p in report["pending"]] == ["default/second"]
    assert "default/second" in report["pending"][0]["reason"]
    assert report["finished_at"] == 50.0
    full = simulate(tmp_path, text)
    assert [b["pod"] for b in full["bindings"]] == ["default/first", "default/second", "default/late"]


def test_a_gang_waiting_for_members_times_out_and_stays_pending_with_the_reason(tmp_path: Path) -> None:
    text = (node("n0") + node("n1") + node("n2") + pod_group("t", 3, timeout=30)
            + pod("t-0", gang="t") + pod("t-1", gang="t"))
    report = simulate(tmp_path, text)
    assert report["bindings"] == []
    assert [p["pod"] for p in report["pending"]] == ["default/t-0", "default/t-1"]
    assert all("default/t" in p["reason"] for p in report["pending"])


def test_cli_writes_stats_to_stderr_and_warns_about_skipped_documents(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(node("n0") + pod("p") + "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
    out = tmp_path / "r.json"
    assert main([str(path), "--out", str(out), "--stats"]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "Widget" in err and "skipped" in err
    assert "events" in err and "binds" in err and "gangs" in err and "wall" in err
    assert "wall" not in out.read_text()


def test_cli_off_a_terminal_prints_plain_progress_lines_and_the_same_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    quiet, chatty = tmp_path / "quiet.json", tmp_path / "chatty.json"
    assert main([str(EXAMPLE), "--out", str(quiet)]) == 0
    assert "simulate:" not in capsys.readouterr().err  # a short run: no line before the first 10 s
    monkeypatch.setattr(simulate_cli, "LINE_EVERY_SECONDS", 0.0)
    assert main([str(EXAMPLE), "--out", str(chatty)]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("simulate:")]
    objects = len(load_scenario(EXAMPLE).objects)
    assert lines and f"of {objects} objects created" in lines[-1]
    assert "binds" in lines[-1] and "pods pending" in lines[-1] and "t=" in lines[-1]
    assert chatty.read_bytes() == quiet.read_bytes()


def test_on_a_terminal_progress_is_a_bar_of_the_objects_created(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulate_cli, "BAR_EVERY_SECONDS", 0.0)
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160)
    with simulate_cli.ProgressDisplay("auto", console) as display:
        assert display.mode == "bar"
        display(SimulationProgress(time=120.0, created=30, objects=40, binds=25, pending=3, events=90))
    text = screen.getvalue()
    assert "30/40 objects" in text and "t=120s" in text and "25 binds" in text and "3 pending" in text


def test_cli_rejects_a_scenario_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "r.json")]) == 2
    assert capsys.readouterr().err.startswith("toposched simulate: ")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    assert main([str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_cli_keeps_the_event_log_for_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "log"
    out = tmp_path / "r.json"
    assert main([str(EXAMPLE), "--out", str(out), "--log-dir", str(logs)]) == 0
    report = json.loads(out.read_text())
    log = EventLog.open_readonly(logs)
    try:
        state = fold_log(log).state
    finally:
        log.close()
    assert state.last_time == report["finished_at"]
    assert sorted(key for key, p in state.pods.items() if p.pending) == sorted(p["pod"] for p in report["pending"])
    assert main([str(EXAMPLE), "--out", str(out), "--log-dir", str(logs)]) == 2  # never appends to an old log
    assert "already holds" in capsys.readouterr().err


def test_the_report_does_not_depend_on_the_process_hash_seed(tmp_path: Path) -> None:
    reports = []
    for seed in ("1", "2"):
        out = tmp_path / f"report-{seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-m", "daemon", "simulate", str(EXAMPLE), "--out", str(out)],
                       check=True, env=env, capture_output=True, timeout=120)
        reports.append(out.read_bytes())
    assert reports[0] == reports[1]


def test_the_example_cluster_tells_the_story_its_header_promises(tmp_path: Path) -> None:
    report = anyio.run(Simulation(load_scenario(EXAMPLE)).run)
    at = {b.pod: (b.node, b.at) for b in report.bindings}
    node_number = {pod: int(node.split("-")[1]) for pod, (node, _) in at.items()}

    def block(pod: str) -> int:
        return node_number[pod] // 8

    def nvlink(pod: str) -> int:
        return node_number[pod] // 4

    pretrain = [f"research/llm-pretrain-{i}" for i in range(8)]
    assert len({block(p) for p in pretrain}) == 1 and {at[p][1] for p in pretrain} == {0.0}
    assert len({nvlink(f"research/llm-finetune-{i}") for i in range(4)}) == 1
    assert len({block(f"vision/vit-sweep-{i}") for i in range(6)}) == 1
    busy_nvlink = {nvlink(f"vision/vit-sweep-{i}") for i in range(6)}
    assert {nvlink("inference/serve-0"), nvlink("inference/serve-1")} <= busy_nvlink  # gaps, not fresh domains
    following = [f"research/llm-next-{i}" for i in range(8)]
    assert {at[p][1] for p in following} == {200.0} and len({block(p) for p in following}) == 1
    assert [p.pod for p in report.pending] == sorted(f"research/llm-giant-{i}" for i in range(12))
