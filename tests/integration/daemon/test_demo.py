"""`toposched demo` runs end to end in a subprocess, exits 0 and keeps its log when asked; its output
through a pipe is readable; `--keep-running --kubeconfig PATH` leaves a cluster that PATH reaches."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path


def test_demo_runs_places_every_gang_and_keeps_a_replayable_log(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    done = subprocess.run([sys.executable, "-m", "daemon", "demo", "--log-dir", str(log_dir), "--timeout", "40"],
                          capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "where every gang landed" in out
    assert "too-wide" in out and "pending:" in out  # the job that cannot fit says why
    assert "preemption: training/hot-fix" in out
    assert "unexpected" not in out
    # Through a pipe, each table and heading starts on its own line (the progress table's last frame
    # used to run straight into the topology heading) and the first line is not wrapped mid-URL.
    lines = out.splitlines()
    assert lines[0].startswith("devcluster at http://127.0.0.1:") and lines[0].endswith("/metrics")
    assert any(line.startswith("topology (labels): ") for line in lines)
    for line in lines:
        assert "┘" not in line or line.rstrip().endswith("┘"), line
    verify = subprocess.run([sys.executable, "-m", "daemon", "replay", str(log_dir), "--verify"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def written(output: Path) -> str:
    """What the demo wrote so far: read while it writes, so a character may be cut at the end of a buffer."""
    return output.read_bytes().decode("utf-8", errors="replace")


def test_keep_running_writes_the_kubeconfig_where_asked_and_the_cluster_answers_there(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "demo" / "kubeconfig"
    kubeconfig.parent.mkdir()
    output = tmp_path / "stdout"
    with output.open("w") as handle:
        demo = subprocess.Popen([sys.executable, "-m", "daemon", "demo", "--keep-running", "--kubeconfig",
                                 str(kubeconfig), "--timeout", "40"], stdout=handle, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while "press Ctrl-C" not in written(output):
                assert demo.poll() is None and time.monotonic() < deadline, written(output)
                time.sleep(0.1)
            assert f"kubectl --kubeconfig {kubeconfig} get pods" in written(output)
            shown = subprocess.run([sys.executable, "-m", "daemon", "topology", "show", "--kubeconfig",
                                    str(kubeconfig), "--json"], capture_output=True, text=True, timeout=60,
                                   check=False)
            assert shown.returncode == 0, shown.stderr
            assert json.loads(shown.stdout)["root"]["nodeCount"] == 48
            demo.send_signal(signal.SIGINT)
            assert demo.wait(timeout=30) == 0, written(output)
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()
