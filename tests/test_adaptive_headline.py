"""Under adaptive repeats (`--repeats auto`) the headline pass rate is the mean over tasks: the
allocation sends repetitions to tasks whose results vary, so the plain mean over repetitions
over-weights them (65% shown for a true 75%). `report`, its JSON, `view` and `compare` show one
figure, with the interval of the task mean; the values are counted in the test."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from asynceval import cli
from asynceval.analysis.compare import compare_runs
from asynceval.analysis.view import view_data
from asynceval.engine import read_records

COINS = str(Path(__file__).parent / "cli" / "coins_bench.py")
T_9 = 2.2621571627982  # Student's t, 97.5% quantile, 9 degrees of freedom (10 tasks)
# 5 tasks that always pass, with 2 repetitions each, and 5 that pass 1 in 2, with 10 each: as
# the adaptive rule leaves them. The task set's pass rate is 0.75; over repetitions, 35/60.
UNEVEN = {**{f"s{i}": [1, 1] for i in range(5)}, **{f"v{i}": [1, 0] * 5 for i in range(5)}}


def write_run(path: Path, outcomes: dict[str, list[int]], *, adaptive: bool = True) -> Path:
    header: dict[str, Any] = {"type": "header", "benchmark": "Hand", "started_at_unix": 1.0}
    if adaptive:
        header["adaptive_repeats"] = {"ci_width": 0.05, "max_repeats": 20, "prior": [0.1, 0.1]}
    lines = [header]
    for task_id, results in outcomes.items():
        for index, passed in enumerate(results):
            eval_ = [{"passed": bool(passed)}]
            lines.append(
                {"task_id": task_id, "repeat_idx": index, "status": "success", "eval": eval_}
            )
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def main(*argv: str) -> tuple[int, str]:
    """`asynceval ARGV` in-process: (status, stdout with a table's cells on one line)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(list(argv))
    return status, re.sub(r"[│┃\s]+", " ", out.getvalue())


def test_report_under_adaptive_repeats_gives_the_task_mean_and_its_interval(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path / "run", UNEVEN)
    status, out = main("report", str(run), "--json")
    summary = json.loads(out)
    assert status == 0
    assert summary["pass_rate"] == pytest.approx(0.75) and summary["pass_rate_over"] == "tasks"
    task_means = [1.0] * 5 + [0.5] * 5
    se = math.sqrt(sum((m - 0.75) ** 2 for m in task_means) / 9 / 10)
    assert summary["pass_rate_ci95"] == pytest.approx([0.75 - T_9 * se, 0.75 + T_9 * se])
    (mean_reducer,) = summary["reducers"]
    assert mean_reducer["value"] == pytest.approx(0.75)
    assert mean_reducer["ci95"] == pytest.approx(summary["pass_rate_ci95"])  # one interval
    _, text = main("report", str(run))
    low, high = summary["pass_rate_ci95"]
    assert f"pass rate 75.0% (95% CI {low:.1%}-{high:.1%})" in text
    assert "35/60" not in text and "58.3%" not in text  # never a second figure for the rate
    assert "mean over tasks (adaptive repeats)" in text


def test_a_file_without_adaptive_repeats_keeps_the_mean_over_repetitions(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", UNEVEN, adaptive=False)
    summary = json.loads(main("report", str(run), "--json")[1])
    assert summary["pass_rate"] == pytest.approx(35 / 60)
    assert summary["pass_rate_over"] == "repetitions"


def test_a_repeats_auto_run_reports_the_mean_of_its_task_means(tmp_path: Path) -> None:
    """A real adaptive run (seeded coins, no LLM; one task at a time, so that the allocation is
    the same on every run): the summary it prints and `report --json` give the mean over tasks
    of the file's own task means, not passed/scored."""
    out = tmp_path / "run"
    status, text = main(
        "run", COINS, "--repeats", "auto", "--ci-width", "0.1", "--max-repeats", "30",
        "--max-concurrent-tasks", "1", "--out", str(out),
    )  # fmt: skip
    assert status == 0
    records, _ = read_records(out / "results.jsonl")
    by_task: dict[str, list[float]] = {}
    for record in records:
        if "task_id" in record:
            by_task.setdefault(record["task_id"], []).append(float(record["eval"][0]["passed"]))
    task_mean = sum(sum(v) / len(v) for v in by_task.values()) / len(by_task)
    over_repetitions = sum(map(sum, by_task.values())) / sum(map(len, by_task.values()))
    assert abs(task_mean - over_repetitions) > 0.01  # the allocation is uneven
    summary = json.loads(main("report", str(out), "--json")[1])
    assert summary["pass_rate"] == pytest.approx(task_mean)
    assert f"pass rate {task_mean:.1%} (95% CI" in text
    # The progress line printed last says the same figure, never the mean over repetitions.
    assert f"pass rate {task_mean:.1%} over 8 tasks ({len(records) - 1} scored)" in text
    assert f"{over_repetitions:.1%}" not in text


def test_view_and_compare_show_the_task_mean(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", UNEVEN)
    better = {task: [1] * len(results) for task, results in UNEVEN.items()}
    b = write_run(tmp_path / "b", better)
    data, _ = view_data([a, b])
    assert data["runs"][0]["summary"]["pass_rate"] == pytest.approx(0.75)
    assert data["comparisons"][0]["mean_a"] == pytest.approx(0.75)
    comparison = compare_runs(*(read_records(p / "results.jsonl")[0] for p in (a, b)))
    assert comparison.mean_a == pytest.approx(0.75) and comparison.mean_b == 1.0
    assert comparison.difference == pytest.approx(0.25)
    assert comparison.interval_method == "paired bootstrap over tasks"
    _, text = main("compare", str(a), str(b))
    assert "pass rate A 75.0% (95% CI" in text and "35/60" not in text
    assert "mean score A / B (over tasks) 75.0% / 100.0%" in text


def test_fail_under_judges_the_task_mean_under_adaptive_repeats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gate compares the figure the report shows, an agent error counted as a failure of
    its task: s0-s4 1.0, v0 5/11, v1-v4 0.5 -> 0.7454..., not 35/61 over repetitions."""
    run = write_run(tmp_path / "run", UNEVEN)
    error = {"task_id": "v0", "repeat_idx": 10, "status": "agent_error", "eval": None}
    with open(run / "results.jsonl", "a") as file:
        file.write(json.dumps(error) + "\n")
    gate = (5 * 1.0 + 5 / 11 + 4 * 0.5) / 10
    assert cli.main(["report", str(run), "--fail-under", "0.7"]) == 0
    out = capsys.readouterr().out
    assert f"pass rate {gate:.1%} (mean over tasks) (1 agent or user errors" in out
    assert "meets --fail-under 70%" in out
    assert cli.main(["report", str(run), "--fail-under", "0.75"]) == 1
    err = capsys.readouterr().err
    assert f"pass rate {gate:.1%} (mean over tasks)" in err and "is below" in err


def test_summarize_of_reports_without_a_header_takes_adaptive_from_its_caller() -> None:
    """Reports from `bench.run(repeats=AdaptiveRepeats(...))` carry no header: the caller says."""
    from asynceval.analysis import summarize

    reports = [
        {"task_id": task, "repeat_idx": index, "status": "success", "eval": [{"passed": bool(ok)}]}
        for task, results in UNEVEN.items()
        for index, ok in enumerate(results)
    ]
    assert summarize(reports).pass_rate == pytest.approx(35 / 60)
    summary = summarize(reports, adaptive=True)
    assert summary.pass_rate == pytest.approx(0.75) and summary.pass_rate_over == "tasks"
