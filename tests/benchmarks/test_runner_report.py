"""The benchmark runner itself: never rewrites docs/benchmarks.md unless asked, a crashed figure
is a FAIL row, a missing bench extra is one line (issue 12, "The benchmark itself")."""

from __future__ import annotations

from pathlib import Path

import pytest

import benchmarks.__main__ as runner
from benchmarks._report import write_report

DOC = Path(runner.__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def _info() -> dict[str, object]:
    return {
        "command": "python -m benchmarks",
        "root": "/r",
        "commit": "abc",
        "commit_subject": "s",
        "dirty": [],
        "date": "d",
        "duration_s": 1.0,
        "cpu": "c",
        "cores": 2,
        "memory": "m",
        "os": "o",
        "tmp": "t",
        "load_start": "0",
        "load_end": "0",
        "python": "3",
        "sqlite": "3",
        "versions": {},
    }


def test_a_crashed_figure_is_a_fail_row_in_the_targets_table() -> None:
    """A crash (or timeout) shows up as FAIL in the targets table, with its stderr in the figure."""
    fig = runner.crashed_figure(4, "fig4_bus", 1, "Traceback ...\nZeroDivisionError: boom")
    fig["seconds"] = 2.0
    timed_out = runner.crashed_figure(5, "fig5_concurrency", -1, "")
    timed_out["seconds"] = 1200.0
    text = write_report([fig, timed_out], _info())
    table = text.split("## Targets", 1)[1].split("\n## ", 1)[0]
    assert "| 4 | fig4_bus runs | completes | crashed (exit 1) | **FAIL** |" in table
    assert "| 5 | fig5_concurrency runs | completes | timed out | **FAIL** |" in table
    assert "ZeroDivisionError: boom" in text


def test_the_report_goes_to_stdout_unless_out_names_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --out nothing is written to docs/benchmarks.md; --out FILE writes FILE."""
    monkeypatch.setattr(runner, "BENCH_EXTRAS", ())  # CI installs [test] only, not the bench extra
    before = DOC.stat().st_mtime_ns if DOC.exists() else None
    assert runner.main(["--only", "99"]) == 0  # no figure selected: just the report
    assert "# acagent benchmarks" in capsys.readouterr().out
    assert (DOC.stat().st_mtime_ns if DOC.exists() else None) == before
    out = tmp_path / "report.md"
    assert runner.main(["--only", "99", "--out", str(out)]) == 0
    assert out.read_text().startswith("# acagent benchmarks")


def test_a_missing_bench_extra_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run stops before any figure with one line naming the missing modules and the fix."""
    monkeypatch.setattr(runner, "BENCH_EXTRAS", ("psutil", "no_such_bench_module.sub"))
    assert runner.main(["--only", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_bench_module.sub" in err and "pip install -e '.[bench]'" in err
