"""What the offline commands log goes to standard error, from warning up: standard output holds only
what the command writes there (`toposched simulate` without --out writes its report there)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# `toposched simulate` whose run logs a debug line (as the journal does for each snapshot), a warning,
# and writes its report to standard output.
PROGRAM = """
import sys, structlog, logging
import daemon.cli.simulate as simulate
from daemon.cli.main import main

def run(argv):
    structlog.get_logger().debug("journal.snapshot", seq=50000)
    structlog.get_logger().warning("journal.snapshot_killed", pid=1)
    logging.getLogger("kubernetes_asyncio").info("library chatter")
    sys.stdout.write('{"bindings": []}\\n')
    return 0

simulate.main = run
sys.exit(main(["simulate"]))
"""


def test_simulate_writes_only_its_report_to_stdout_and_warnings_to_stderr() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"bindings": []}
    assert "journal.snapshot_killed" in done.stderr
    assert "journal.snapshot " not in done.stderr and "seq=50000" not in done.stderr
    assert "library chatter" not in done.stderr
