"""The four tables against the files they are read from: a row per event line, per report, per
call_id, per segment; every value as the file has it; keys that join back."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from asynceval.analysis import frames
from asynceval.analysis.summary import report_score

from .conftest import json_lines, reports


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


def test_each_event_line_is_one_row_with_every_field_kept(mixed_run: Path) -> None:
    """Typed columns plus `fields` give back each line exactly, in file order."""
    lines = json_lines(mixed_run / "events.jsonl")
    rows = _rows(frames.events(mixed_run))
    assert len(rows) == len(lines) > 100
    assert [row["seq"] for row in rows] == list(range(1, len(lines) + 1))
    typed = set(rows[0]) - {"seq", "fields"}
    for row, line in zip(rows, lines, strict=True):
        assert row["timestamp"] == datetime.fromisoformat(line.pop("timestamp"))
        fields = json.loads(row["fields"]) if row["fields"] else {}
        assert fields == {key: value for key, value in line.items() if key not in typed}
        for key in typed - {"timestamp"}:
            assert row[key] == line.get(key), (key, line)


def test_each_report_is_one_row_scored_as_the_summary_scores_it(mixed_run: Path) -> None:
    written = reports(mixed_run)
    rows = _rows(frames.repetitions(mixed_run))
    assert len(rows) == len(written) == 16  # 12, then the 4 errors run again
    last = {(r["task_id"], r["repeat_idx"]): index for index, r in enumerate(written)}
    for index, (row, report) in enumerate(zip(rows, written, strict=True)):
        usage, timing = report["usage"], report["timing"]
        assert (row["run_id"], row["task_id"], row["repeat_idx"]) == (
            report["run_id"],
            report["task_id"],
            report["repeat_idx"],
        )
        assert row["status"] == report["status"]
        assert row["score"] == report_score(report)
        assert row["latest"] == (last[(report["task_id"], report["repeat_idx"])] == index)
        assert row["llm_calls"] == usage["llm_calls"] and row["retries"] == usage["retries"]
        assert row["cost_usd"] == usage["cost_usd"]
        assert row["duration_s"] == timing["duration_s"]
        assert row["finished_at"].timestamp() == pytest.approx(timing["finished_at"])
        assert (None if row["eval"] is None else json.loads(row["eval"])) == report["eval"]
        assert json.loads(row["cost_by_model"]) == usage["by_model"]
        error = report["error"] or {}
        assert (row["error_kind"], row["error_type"]) == (error.get("kind"), error.get("type"))
    assert sum(row["latest"] for row in rows) == 12


def test_calls_are_the_call_ids_of_the_events_and_join_their_repetitions(mixed_run: Path) -> None:
    """A call per call_id; per repetition, as many calls, retries, failures and dollars as its
    report counts."""
    events = json_lines(mixed_run / "events.jsonl")
    ids = {(e["run_id"], e["call_id"]) for e in events if e.get("call_id")}
    rows = _rows(frames.calls(mixed_run))
    assert {(row["run_id"], row["call_id"]) for row in rows} == ids
    assert len(rows) == len(ids)
    by_pair: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_pair[(row["run_id"], row["task_id"], row["repeat_idx"])].append(row)
    outcomes = Counter(row["outcome"] for row in rows)
    assert outcomes["failed"] and outcomes["journal_hit"] and outcomes["answered"]
    for report in reports(mixed_run):
        calls = by_pair.pop((report["run_id"], report["task_id"], report["repeat_idx"]))
        usage = report["usage"]
        assert len(calls) == usage["llm_calls"]
        assert sum(c["retries"] for c in calls) == usage["retries"]
        assert sum(c["outcome"] == "failed" for c in calls) == usage["failed_calls"]
        assert sum(c["outcome"] == "journal_hit" for c in calls) == usage["journal_hits"]
        assert sum(c["cost_usd"] or 0 for c in calls) == pytest.approx(usage["cost_usd"])
    assert not by_pair  # no call outside a repetition
    for row in rows:
        if row["outcome"] == "answered":
            assert row["attempts"] == row["retries"] + 1
        if row["retries"]:
            assert row["status_code"] == 503 and "503" in row["error"]
        assert row["started_at"] <= row["ended_at"]
        assert row["elapsed_s"] == pytest.approx(
            (row["ended_at"] - row["started_at"]).total_seconds()
        )


def test_a_resumed_run_is_a_row_per_segment_under_the_runs_own_id(mixed_run: Path) -> None:
    manifest = json.loads((mixed_run / "run.json").read_text())
    rows = _rows(frames.runs(mixed_run))
    assert [row["run_id"] for row in rows] == [s["run_id"] for s in manifest["segments"]]
    assert [row["run_dir_id"] for row in rows] == [manifest["run_id"]] * 2
    assert rows[0]["run_id"] == manifest["run_id"]  # the run's id is its first segment's
    assert [(row["segment"], row["resumed"]) for row in rows] == [(0, False), (1, True)]
    counted = Counter(report["run_id"] for report in reports(mixed_run))
    assert [row["repetitions"] for row in rows] == [counted[row["run_id"]] for row in rows]
    finished = [e for e in json_lines(mixed_run / "events.jsonl") if e["event"] == "run_finished"]
    for row, event in zip(rows, finished, strict=True):
        assert row["cost_usd"] == event["cost_usd"]
        assert json.loads(row["counts"]) == event["counts"]
        assert row["interrupted"] is False and row["finished_at"] >= row["started_at"]
        assert (row["benchmark"], row["repeats"], row["lane"]) == ("Mixed", 2, "live")
    ids = {row["run_id"] for row in rows}
    for table in (frames.repetitions, frames.calls, frames.events):
        assert set(table(mixed_run).column("run_id").to_pylist()) == ids


def test_columns_are_typed(mixed_run: Path) -> None:
    tables = frames.tables(mixed_run)
    utc = pa.timestamp("us", tz="UTC")
    expected = {
        "events": {"timestamp": utc, "seq": pa.int64(), "wait_s": pa.float64()},
        "repetitions": {"finished_at": utc, "duration_s": pa.float64(), "llm_calls": pa.int64()},
        "calls": {"started_at": utc, "held_s": pa.float64(), "attempts": pa.int64()},
        "runs": {"started_at": utc, "cost_usd": pa.float64(), "repetitions": pa.int64()},
    }
    for name, columns in expected.items():
        schema = tables[name].schema
        assert schema.field("run_id").type in (pa.string(), pa.dictionary(pa.int32(), pa.string()))
        for column, kind in columns.items():
            assert schema.field(column).type == kind, (name, column)
    assert pa.types.is_dictionary(tables["events"].schema.field("event").type)
    assert pa.types.is_dictionary(tables["repetitions"].schema.field("status").type)
    assert tables["repetitions"].schema.field("latest").type == pa.bool_()
    frame = tables["repetitions"].to_pandas()
    assert str(frame["finished_at"].dtype) == "datetime64[us, UTC]"


def test_several_directories_are_one_table_each(mixed_run: Path, batch_run: Path) -> None:
    both = frames.tables(mixed_run, batch_run, mixed_run)  # a directory given twice: once
    assert both["runs"].num_rows == 3
    assert both["repetitions"].num_rows == 16 + 40
    assert (
        both["events"].num_rows
        == frames.events(mixed_run).num_rows + frames.events(batch_run).num_rows
    )
    assert [r["run_dir"] for r in _rows(both["runs"])] == [str(mixed_run)] * 2 + [str(batch_run)]


def test_connect_gives_duckdb_views_of_the_same_tables(mixed_run: Path) -> None:
    con = frames.connect(mixed_run)
    tables = frames.tables(mixed_run)
    for name in frames.TABLES:
        assert con.sql(f"SELECT count(*) FROM {name}").fetchall() == [(tables[name].num_rows,)]
    joined = con.sql(
        "SELECT count(*) FROM calls c JOIN repetitions r ON c.run_id = r.run_id "
        "AND c.task_id = r.task_id AND c.repeat_idx = r.repeat_idx"
    ).fetchall()
    assert joined == [(tables["calls"].num_rows,)]  # every call joins its one report
