"""`toposched completion bash|zsh`: a script the shell accepts, completing commands, options and choices
from the same parsers the commands parse with."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.cli.main import COMMANDS

BASH_PROBE = """
source "$1"
complete -p toposched
complete_words() {
  COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
  COMPREPLY=(); _shtab_toposched; echo "${COMPREPLY[*]}"
}
complete_words toposched ""
complete_words toposched run --log-l
complete_words toposched run --log-level ""
complete_words toposched topology generate --to ""
complete_words toposched replay "$2/lo"
"""


def generated(shell: str, tmp_path: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "daemon", "completion", shell], capture_output=True, text=True,
                          timeout=60, check=True)
    path = tmp_path / f"toposched.{shell}"
    path.write_text(done.stdout)
    return path


def test_bash_loads_the_script_and_completes_commands_options_choices_and_paths(tmp_path: Path) -> None:
    script = generated("bash", tmp_path)
    (tmp_path / "logs").mkdir()
    done = subprocess.run(["bash", "-c", BASH_PROBE, "probe", str(script), str(tmp_path)], capture_output=True,
                          text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    registered, commands, flag, levels, targets, paths = done.stdout.splitlines()
    assert registered == "complete -o bashdefault -F _shtab_toposched toposched"
    assert set(commands.split()) == set(COMMANDS)
    assert flag == "--log-level"
    assert levels.split() == ["debug", "info", "warning", "error"]
    assert targets.split() == ["hypernodes", "cnt"]
    assert paths == f"{tmp_path}/logs"


def test_the_zsh_script_defines_the_completion_of_every_command(tmp_path: Path) -> None:
    text = generated("zsh", tmp_path).read_text()
    assert text.startswith("#compdef toposched\n")
    for name, (_, summary) in COMMANDS.items():
        assert f"{name}:'{summary}'" in text.replace("'\"'\"'", "'")


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed on this machine")
def test_zsh_accepts_the_script(tmp_path: Path) -> None:
    script = generated("zsh", tmp_path)
    done = subprocess.run(["zsh", "-n", str(script)], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
