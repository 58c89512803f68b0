"""The summary a run prints shows one interval per figure: the `mean` reducer is the pass rate
itself when every task has as many scored repetitions, so it carries the pass rate's interval
(the first run of examples/arithmetic.py showed Wilson's 68.1%-91.3% and a second 70.6%-94.4%
for the same 82.5%); and an all-pass run's interval is one-sided, not 100.0%-100.0%."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from asynceval import cli
from asynceval.engine.statistics import Z_95

ARITHMETIC = str(Path(__file__).parents[1] / "examples" / "arithmetic.py")


def main(*argv: str) -> tuple[int, str]:
    """`asynceval ARGV` in-process: (status, stdout with a table's cells on one line)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(list(argv))
    return status, re.sub(r"[│┃\s]+", " ", out.getvalue())


def intervals(text: str) -> list[str]:
    return re.findall(r"\(95% CI [\d.]+%-[\d.]+%\)", text)


def test_the_first_run_summary_shows_one_interval_for_the_pass_rate(tmp_path: Path) -> None:
    status, text = main("run", ARITHMETIC, "--out", str(tmp_path / "run"))
    assert status == 0
    rate = re.search(r"pass rate 33/40 = 82.5% (\(95% CI [^)]*\))", text)
    assert rate is not None, text
    # The mean reducer is the same figure: not shown again, and in JSON with the same interval.
    assert len(intervals(text)) == 1 and "reducers, over tasks" not in text
    summary = json.loads(main("report", str(tmp_path / "run"), "--json")[1])
    (mean,) = summary["reducers"]
    assert mean["is_pass_rate"] is True
    assert mean["ci95"] == pytest.approx(summary["pass_rate_ci95"])
    # Its 40 questions cost within 15% of one another: one line, not ten tasks picked from ties.
    assert re.search(r"by task 40 tasks alike: \$[\d.]+-\$[\d.]+ per report", text), text
    assert "costliest" not in text


def test_the_costliest_tasks_are_listed_where_task_costs_differ(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [{"type": "header"}]
    for index, cost in enumerate([0.0001, 0.0001, 0.0003]):
        usage = {"llm_calls": 1, "cost_usd": cost, "unpriced_calls": 0}
        lines.append({"task_id": f"t{index}", "repeat_idx": 0, "status": "success", "usage": usage})
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    _, text = main("report", str(run))
    assert " by task t2 $0.0003 (1 report) t0 $0.0001 (1 report)" in text and "alike" not in text


def write(path: Path, outcomes: dict[str, list[int]], reducers: list[str]) -> Path:
    header: dict[str, Any] = {"type": "header", "benchmark_config": {"reducers": reducers}}
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


def test_an_all_pass_run_shows_a_one_sided_interval_and_so_do_its_reducers(tmp_path: Path) -> None:
    """30 tasks x 2 repetitions, all passed (the review's run): Wilson's interval over the 30
    tasks, about 88.6%-100%, for the pass rate and every reducer, never 100.0%-100.0%."""
    run = write(tmp_path / "run", {f"t{i}": [1, 1] for i in range(30)}, ["mean", "pass_hat_k(2)"])
    summary = json.loads(main("report", str(run), "--json")[1])
    low = 30 / (30 + Z_95**2)
    assert summary["pass_rate"] == 1.0
    assert summary["pass_rate_ci95"] == pytest.approx([low, 1.0])
    for reducer in summary["reducers"]:
        assert reducer["value"] == 1.0 and reducer["ci95"] == pytest.approx([low, 1.0])
    _, text = main("report", str(run))
    assert "60/60 = 100.0% (95% CI 88.6%-100.0%)" in text
    assert "pass_hat_k(2) 100.0% (95% CI 88.6%-100.0%)" in text
    assert "reducers, over tasks mean the pass rate above pass_hat_k(2)" in text
    failed = write(tmp_path / "failed", {f"t{i}": [0, 0, 0] for i in range(10)}, ["mean"])
    summary = json.loads(main("report", str(failed), "--json")[1])
    assert summary["pass_rate_ci95"] == pytest.approx([0.0, Z_95**2 / (10 + Z_95**2)])
