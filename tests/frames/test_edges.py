"""What is not a run, what a run lacks, and what a kill leaves: clear errors for the first,
tolerant reading for the others (a line cut short is skipped, as `asynceval report` skips it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from asynceval.analysis import frames
from asynceval.engine.report import eval_score

from .conftest import json_lines, reports

EVALS: list[Any] = [
    [{"passed": True}],
    [{"passed": True}, {"passed": False}],
    [{"passed": True, "score": 0.1}, {"score": 0.9}],  # passed decides
    [{"score": 0.25}, {"score": 1}, {"score": 7}],  # 7 is no score in [0, 1]
    [{"score": True}],  # a bool is not a score
    [{"score": "0.5"}, {"label": "x"}],
    [{"score": -0.1}],
    [],
    None,
    {"passed": True},  # not a list
    "passed",
    [3, "x", None, {"passed": "yes"}, {"score": 0.5}],
    [{"score": 18446744073709551616}],
    [{"passed": False, "score": 1.0}, {"passed": True}],
]


def _results_only_run(folder: Path, evals: list[Any], status: str = "success") -> Path:
    """A run directory with a results file only (a library run without an event log)."""
    folder.mkdir()
    header = {"type": "header", "run_id": "lib-1", "started_at": "2026-01-02T03:04:05+00:00"}
    header |= {"benchmark": "Hand", "max_concurrent_llm_calls": 3, "resumed": False}
    lines = [header] + [
        {"run_id": "lib-1", "task_id": f"t{i}", "repeat_idx": 0, "status": status, "eval": e}
        for i, e in enumerate(evals)
    ]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def test_the_score_is_the_one_eval_score_gives(tmp_path: Path) -> None:
    run = _results_only_run(tmp_path / "run", EVALS)
    scores = frames.repetitions(run).column("score").to_pylist()
    for entries, score in zip(EVALS, scores, strict=True):
        expected = eval_score(entries)
        assert score == expected or math.isclose(score, expected), entries  # type: ignore[arg-type]


def test_an_unscored_status_has_no_score(tmp_path: Path) -> None:
    run = _results_only_run(tmp_path / "run", [[{"passed": True}]], status="timeout")
    assert frames.repetitions(run).column("score").to_pylist() == [None]


def test_a_run_without_events_has_runs_and_repetitions_but_no_calls(tmp_path: Path) -> None:
    run = _results_only_run(tmp_path / "run", EVALS[:3])
    tables = frames.tables(run)
    assert (tables["events"].num_rows, tables["calls"].num_rows) == (0, 0)
    assert tables["events"].schema == frames.events(tmp_path / "run").schema
    (row,) = tables["runs"].to_pylist()
    assert (row["run_id"], row["run_dir_id"], row["segment"]) == ("lib-1", "lib-1", 0)
    assert (row["benchmark"], row["max_concurrent_llm_calls"], row["repetitions"]) == ("Hand", 3, 3)
    assert row["finished_at"] is None and row["started_at"].year == 2026


def test_a_path_with_a_quote_is_read(mixed_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "it's a run"
    run.mkdir()
    for name in ("results.jsonl", "events.jsonl", "run.json"):
        (run / name).write_bytes((mixed_run / name).read_bytes())
    assert frames.tables(run)["repetitions"].num_rows == 16


def test_a_value_of_the_wrong_type_is_null_and_a_damaged_line_is_skipped(tmp_path: Path) -> None:
    run = _results_only_run(tmp_path / "run", [[{"passed": True}]])
    with open(run / "results.jsonl", "a", encoding="utf-8") as file:
        file.write('{"run_id": "lib-1", "task_id": "t9", "repeat_idx": "x", "status": "success"}\n')
        file.write("not json\n")
        file.write('{"run_id": "lib-1", "task_id": "t10", "repeat_idx": 1, "status": "succ')
    rows = frames.repetitions(run).to_pylist()
    assert [(r["task_id"], r["repeat_idx"], r["seq"]) for r in rows] == [
        ("t0", 0, 2),
        ("t9", None, 3),
    ]


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p / "nowhere", "no such directory"),
        (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", "not a directory"),
        (lambda p: (p / "empty").mkdir() or p / "empty", "not a run directory"),
    ],
)
def test_what_is_not_a_run_directory_is_a_frames_error_naming_it(
    tmp_path: Path, make: Any, said: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(frames.FramesError, match=said) as caught:
        frames.runs(path)
    assert str(path) in str(caught.value)
    with pytest.raises(frames.FramesError, match="no run directory given"):
        frames.events()


def test_a_killed_run_reads_as_far_as_it_went(killed_run: tuple[Path, Path]) -> None:
    """SIGKILL mid-way, each file ending in a line cut short: the whole lines are rows; the
    segment has no end; calls still in flight are unfinished."""
    killed, _ = killed_run
    tables = frames.tables(killed)
    assert tables["events"].num_rows == len(json_lines(killed / "events.jsonl"))
    assert tables["repetitions"].num_rows == len(reports(killed)) >= 8
    (run,) = tables["runs"].to_pylist()
    assert run["finished_at"] is None and run["interrupted"] is None
    assert run["repetitions"] == len(reports(killed))
    calls = tables["calls"].to_pylist()
    assert {c["outcome"] for c in calls} <= {"answered", "unfinished"}
    done = {(r["task_id"], r["repeat_idx"]) for r in reports(killed)}
    for call in calls:  # a repetition with a report had its call answered
        if (call["task_id"], call["repeat_idx"]) in done:
            assert call["outcome"] == "answered"


def test_a_killed_run_resumed_is_two_segments_and_every_pair_once_latest(
    killed_run: tuple[Path, Path],
) -> None:
    _, resumed = killed_run
    runs = frames.runs(resumed).to_pylist()
    assert [(r["segment"], r["resumed"]) for r in runs] == [(0, False), (1, True)]
    assert runs[0]["finished_at"] is None and runs[1]["interrupted"] is False
    reps = frames.repetitions(resumed).to_pylist()
    latest = [(r["task_id"], r["repeat_idx"]) for r in reps if r["latest"]]
    assert sorted(latest) == sorted((f"slow-{i}", 0) for i in range(40))
    assert sum(r["repetitions"] for r in runs) == len(reps)
