"""`asynceval export --parquet` and `asynceval sql` from the command line: the same tables,
and every mistake one line with exit status 2."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from asynceval.analysis import frames
from asynceval.cli import main

TABLES = ("runs", "repetitions", "calls", "events")


def test_export_writes_one_parquet_file_per_table_that_reads_back_the_same(
    mixed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tables" / "nested"  # made, parents too
    assert main(["export", str(mixed_run), "--parquet", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.parquet" for t in TABLES)
    expected = frames.tables(mixed_run)
    for name, line in zip(TABLES, printed, strict=True):
        back = pq.read_table(out / f"{name}.parquet")
        assert back.equals(expected[name]), name
        assert line == f"{out / f'{name}.parquet'}  {back.num_rows} rows"
    assert main(["export", str(mixed_run), "--parquet", str(out)]) == 0  # replaced in place


def test_sql_prints_a_table_csv_or_json(
    mixed_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = (
        "SELECT r.status, count(*) AS n, sum(c.retries) AS retries FROM repetitions r "
        "JOIN calls c USING (run_id, task_id, repeat_idx) WHERE r.latest "
        "GROUP BY r.status ORDER BY r.status"
    )
    assert main(["sql", str(mixed_run), query, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    latest = [r for r in frames.repetitions(mixed_run).to_pylist() if r["latest"]]
    assert {r["status"] for r in rows} == {r["status"] for r in latest}
    assert sum(r["n"] for r in rows) == sum(r["llm_calls"] for r in latest)
    assert all(type(r["retries"]) is int for r in rows)  # DuckDB's sum of ints: an int
    assert main(["sql", str(mixed_run), query, "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["status"], int(r["n"])) for r in table] == [(r["status"], r["n"]) for r in rows]
    assert main(["sql", str(mixed_run), "SELECT task_id FROM events", "--max-rows", "3"]) == 0
    shown = capsys.readouterr().out
    total = frames.events(mixed_run).num_rows
    assert f"{total} rows; {total - 3} more not shown" in shown


def test_sql_reads_only_the_files_its_query_names(
    mixed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A query of repetitions alone does not read events.jsonl (here: one DuckDB cannot read)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_bytes((mixed_run / "results.jsonl").read_bytes())
    (run / "events.jsonl").mkdir()  # a folder where the file belongs: reading it fails
    assert main(["sql", str(run), "SELECT count(*) AS n FROM repetitions", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["n", "16"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["export", "{missing}", "--parquet", "{tmp}/out"], "{missing}: no such directory"),
        (["export", "{run}", "--parquet", "{run}/run.json"], "a file, not a directory"),
        (["export", "{tmp}", "--parquet", "{tmp}/out"], "not a run directory"),
        (["sql", "{missing}", "SELECT 1"], "{missing}: no such directory"),
        (["sql", "{run}", "SELEC * FROM runs"], 'syntax error at or near "SELEC"'),
        (["sql", "{run}", "SELECT nope FROM runs"], "nope"),
        (["sql", "{run}", "SELECT 1", "--max-rows", "0"], "--max-rows 0"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(
    mixed_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    said: str,
) -> None:
    names = {"run": str(mixed_run), "tmp": str(tmp_path), "missing": str(tmp_path / "gone")}
    assert main([arg.format(**names) for arg in args]) == 2
    err = capsys.readouterr().err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"asynceval {args[0]}: ") and said.format(**names) in line, line


BLOCKED = "import sys; sys.modules['pyarrow'] = None; sys.modules['duckdb'] = None\n"


def _without_analysis_extra(*args: str) -> subprocess.CompletedProcess[str]:
    """`asynceval ARGS` in a process where pyarrow and DuckDB cannot be imported."""
    script = BLOCKED + "from asynceval.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60
    )


def test_without_the_analysis_extra_export_and_sql_say_how_to_install_it(
    mixed_run: Path, tmp_path: Path
) -> None:
    for args in (
        ["export", str(mixed_run), "--parquet", str(tmp_path)],
        ["sql", str(mixed_run), "SELECT 1"],
    ):
        done = _without_analysis_extra(*args)
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "pip install 'asynceval[analysis]'" in line
    report = _without_analysis_extra("report", str(mixed_run))  # every other command works
    assert report.returncode == 0 and "Mixed" in report.stdout, report.stderr
