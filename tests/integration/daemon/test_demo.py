"""`toposched demo` runs end to end in a subprocess, exits 0 and keeps its log when asked."""

from __future__ import annotations

import subprocess
import sys
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
    verify = subprocess.run([sys.executable, "-m", "daemon", "replay", str(log_dir), "--verify"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
