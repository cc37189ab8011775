"""`python -m bench.simulate --before DIR`: the code to compare with runs on the same trace in a new
process, alternately with this code, and its report is compared with ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.simulate import _measure, generate

ROOT = Path(__file__).resolve().parents[2]


def test_the_code_before_runs_on_the_same_trace_one_run_before_each_of_ours() -> None:
    trace = generate(6, nodes=32)
    (wall, _load, _simulate, cpu, simulation), befores, ours = _measure(trace, 2, before=ROOT)
    assert len(befores) == len(ours) == 2
    assert simulation.report is not None
    # this checkout compared with itself: the same report, and runs that took time and CPU
    assert all(run.report == simulation.report.to_json() for run in [*befores, *ours])
    assert all(run.wall > 0 and run.cpu > 0 for run in [*befores, *ours])
    assert wall > 0 and cpu > 0


def test_a_directory_without_the_code_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=f"--before {tmp_path}: not a checkout of toposched"):
        _measure(generate(2, nodes=16), 1, before=tmp_path)


def test_a_checkout_whose_modules_do_not_load_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "daemon" / "cli").mkdir(parents=True)
    (tmp_path / "daemon" / "cli" / "main.py").write_text("raise ImportError('half a checkout')\n")
    with pytest.raises(SystemExit, match="half a checkout") as raised:
        _measure(generate(2, nodes=16), 1, before=tmp_path)
    assert f"--before {tmp_path}: toposched simulate exited" in str(raised.value)
