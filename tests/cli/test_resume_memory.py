"""A run directory whose results file is large because of its reports' bulk (traces, an
evaluator's long text) is read back, by a resume with nothing left to do and by `report`, with
one line's worth of memory, whatever field holds the bulk (measured with tracemalloc in
process: a resume of a 100 MB file peaked at 148 MB of RSS against 52 MB for a small one)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from asynceval.cli import main

EXAMPLE = str(Path(__file__).parents[2] / "examples" / "arithmetic.py")
BULK = 1_000_000  # characters per report: 40 reports make a 40 MB file


def _inflate(results: Path, where: str) -> int:
    """Put BULK characters into every report of `results`, in `where`; returns its size."""
    lines = []
    for line in results.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") != "header":
            if where == "traces":
                record["traces"] = {"agents": {"solver": {"messages": ["x" * BULK]}}}
            else:  # an evaluator that keeps the whole transcript beside its verdict
                record["eval"][0]["transcript"] = "y" * BULK
        lines.append(json.dumps(record))
    results.write_text("\n".join(lines) + "\n")
    return results.stat().st_size


def _peak_mb(argv: list[str]) -> tuple[int, float]:
    tracemalloc.start()
    try:
        status = main(argv)
        return status, tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("where", ["traces", "eval"])
def test_a_large_results_file_is_read_back_one_line_at_a_time(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["run", EXAMPLE, "--out", str(out), "--quiet"]) == 0
    size = _inflate(out / "results.jsonl", where)
    assert size > 40 * BULK

    status, resumed_mb = _peak_mb(["run", "--resume", str(out)])
    assert status == 0
    assert "pass rate" in capsys.readouterr().out  # the summary read the whole file
    status, report_mb = _peak_mb(["report", str(out)])
    assert status == 0
    assert "pass rate" in capsys.readouterr().out
    # One report's line (1 MB of text, a few times over while it is parsed), not the file's 40.
    assert resumed_mb < 12, f"a resume with nothing to do peaked at {resumed_mb:.1f} MB"
    assert report_mb < 12, f"report peaked at {report_mb:.1f} MB"
