"""Every `toposched` command exits 0 ok, 1 finding, 2 usage/config, 3 environment, 130 Ctrl-C, and says so
in --help; a failure is one line on standard error, never a traceback. Each code is checked on a real
process, as a shell or a CI job sees it."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.cli.exits import EXIT_INTERRUPTED, reporting
from daemon.cli.main import COMMANDS, main
from events.log import EventLog, FsyncPolicy

REPO = Path(__file__).resolve().parents[3]


def toposched(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "daemon", *args], capture_output=True, text=True, timeout=60,
                          check=False, cwd=cwd or REPO)


def one_line_error(done: subprocess.CompletedProcess[str], command: str) -> str:
    """Standard error is one line naming the command (no traceback, no usage dump), after the JSON log
    records of a daemon, if any."""
    *before, last = done.stderr.strip().splitlines()
    assert all(line.startswith("{") for line in before), done.stderr
    assert last.startswith(f"toposched {command}: "), done.stderr
    return last


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_documents_its_exit_codes_in_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "exit codes:" in out
    assert "\n  0 " in out and "\n  2 " in out


def test_the_top_level_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for code in ("0", "1", "2", "3", "130"):
        assert f"\n  {code} " in out


def test_exit_0_when_the_files_are_valid() -> None:
    done = toposched("validate", "ops/examples/hypernodes.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK:")


def test_exit_1_when_validate_finds_problems() -> None:
    done = toposched("validate", "examples/topology/invalid.yaml")
    assert done.returncode == 1
    assert "problem" in done.stdout and not done.stderr


def test_exit_2_for_a_log_level_argparse_does_not_know() -> None:
    done = toposched("run", "--log-level", "verbose")
    assert done.returncode == 2
    assert "invalid choice: 'verbose'" in done.stderr and "Traceback" not in done.stderr


def test_exit_2_for_replay_of_a_missing_directory(tmp_path: Path) -> None:
    done = toposched("replay", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "no such directory" in one_line_error(done, "replay")


def test_exit_2_for_replay_of_a_directory_that_holds_no_log(tmp_path: Path) -> None:
    done = toposched("replay", str(tmp_path))
    assert done.returncode == 2
    assert "holds no LOCK, segment" in one_line_error(done, "replay")
    assert not done.stdout  # no empty tables that look like an empty cluster


def test_replay_of_a_log_with_no_events_yet_is_not_an_error(tmp_path: Path) -> None:
    EventLog.open(tmp_path, fsync=FsyncPolicy.never()).close()
    done = toposched("replay", str(tmp_path))
    assert done.returncode == 0, done.stderr


def test_exit_2_for_a_devcluster_scenario_that_cannot_be_read(tmp_path: Path) -> None:
    done = toposched("devcluster", "--load", str(tmp_path / "missing.yaml"), "--kubeconfig", str(tmp_path / "kc"))
    assert done.returncode == 2
    assert "no such file" in one_line_error(done, "devcluster")


@pytest.mark.parametrize("command", [["simulate"], ["topology", "show", "--scenario"], ["devcluster", "--load"]],
                         ids=lambda argv: argv[0])
def test_exit_2_for_a_scenario_nested_ten_thousand_deep(tmp_path: Path, command: list[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' * 10_000 + "1" + "}" * 10_000)
    done = toposched(*command, str(deep), cwd=tmp_path)
    assert done.returncode == 2
    assert "nested too deeply" in one_line_error(done, command[0])


def test_exit_2_for_an_unknown_command() -> None:
    done = toposched("schedule")
    assert done.returncode == 2
    assert "invalid choice: 'schedule'" in done.stderr


def test_exit_3_when_the_event_log_is_held_by_another_process(tmp_path: Path) -> None:
    with EventLog.open(tmp_path / "log", fsync=FsyncPolicy.never()):
        done = toposched("run", "--log-dir", str(tmp_path / "log"), "--kubeconfig", str(tmp_path / "none"),
                         "--address", "127.0.0.1:0", "--log-level", "error")
    assert done.returncode == 3
    assert "already open for writing" in one_line_error(done, "run")


def test_exit_3_when_devclusters_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = toposched("devcluster", "--port", str(port), "--kubeconfig", str(tmp_path / "kc"))
    assert done.returncode == 3
    assert "address already in use" in one_line_error(done, "devcluster").lower()


def test_exit_3_when_simulates_report_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / "reports").write_text("a file, not a directory")
    done = toposched("simulate", "examples/demo-cluster.yaml", "--out", str(tmp_path / "reports" / "r.json"))
    assert done.returncode == 3
    assert "reports/r.json" in one_line_error(done, "simulate")


def test_exit_130_when_a_command_is_interrupted(capsys: pytest.CaptureFixture[str]) -> None:
    @reporting("replay")
    def interrupted(argv: object) -> int:
        raise KeyboardInterrupt

    assert interrupted([]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "toposched replay: interrupted\n"
