"""Reducers and task-clustered intervals in `asynceval report` and `compare`, on results files
written here by hand: the values are counted in the test, not taken from the code under test."""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest

from asynceval.analysis.compare import compare_runs, difference_interval, task_difference_interval
from asynceval.analysis.summary import wilson_interval
from asynceval.cli import _compare, _report

# task -> its repetitions' outcomes (1 passed, 0 failed); t4 has only two repetitions.
OUTCOMES = {
    "t0": [1, 1, 1, 1],
    "t1": [1, 0, 0, 0],
    "t2": [0, 0, 0, 0],
    "t3": [1, 1, 0, 1],
    "t4": [1, 0],
}
Z = 1.959963984540054
# Student's t, 97.5% quantiles (a printed table), by the number of tasks G: G - 1 degrees of freedom.
T_BY_TASKS = {4: 3.1824463052837, 5: 2.7764451051977987}


def header(reducers: list[str] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"name": "Hand", "n_task_repeats": 4}
    if reducers is not None:
        config["reducers"] = reducers
    return {
        "type": "header",
        "benchmark": "Hand",
        "started_at_unix": 1.0,
        "benchmark_config": config,
    }


def report(task_id: str, repeat: int, passed: bool) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "repeat_idx": repeat,
        "status": "success",
        "eval": [{"passed": passed}],
    }


def write_run(
    path: Path, outcomes: dict[str, list[int]], reducers: list[str] | None = None
) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    lines = [header(reducers)]
    for task_id, results in outcomes.items():
        lines += [report(task_id, i, bool(ok)) for i, ok in enumerate(results)]
    (path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def command(module: Any, *argv: str) -> tuple[int, str]:
    """A CLI handler called as the CLI would, through a parser of its own; (status, stdout)."""
    parser = argparse.ArgumentParser(prog="asynceval")
    module.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status: int = args.handler(args)
    return status, re.sub(r"[│\s]+", " ", out.getvalue())  # a table's wrapped cells as one line


def report_json(run: Path, *options: str) -> dict[str, Any]:
    status, out = command(_report, "report", str(run), "--json", *options)
    assert status == 0
    data: dict[str, Any] = json.loads(out)
    return data


def share_of_subsets(results: list[int], k: int, rule: Any) -> float:
    subsets = list(itertools.combinations(results, k))
    return sum(bool(rule(subset)) for subset in subsets) / len(subsets)


def over_tasks(values: list[float]) -> tuple[float, float, float]:
    """The mean of per-task values and its 95% interval, mean ± t·sd/√G (t with G - 1 degrees of
    freedom), clipped to [0, 1]."""
    g = len(values)
    m = sum(values) / g
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (g - 1))
    half = T_BY_TASKS[g] * sd / math.sqrt(g)
    return m, max(0.0, m - half), min(1.0, m + half)


def expected(name: str) -> tuple[float, float, float, int]:
    """(value, low, high, tasks left out) of a reducer over OUTCOMES, counted here."""
    per_task: list[float] = []
    for results in OUTCOMES.values():
        n = len(results)
        if name == "mean":
            per_task.append(sum(results) / n)
        elif name == "pass_at_k(3)" and n >= 3:
            per_task.append(share_of_subsets(results, 3, any))
        elif name == "pass_hat_k(2)" and n >= 2:
            per_task.append(share_of_subsets(results, 2, all))
        elif name == "at_least(3)" and n >= 3:
            per_task.append(1.0 if sum(results) >= 3 else 0.0)
    return (*over_tasks(per_task), len(OUTCOMES) - len(per_task))


NAMES = ["mean", "pass_at_k(3)", "pass_hat_k(2)", "at_least(3)"]


def test_report_gives_the_reducers_the_header_names_each_over_tasks_with_its_interval(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path / "run", OUTCOMES, reducers=NAMES)
    reducers = report_json(run)["reducers"]
    assert [r["name"] for r in reducers] == NAMES
    for found in reducers:
        value, low, high, too_few = expected(found["name"])
        assert found["value"] == pytest.approx(value), found["name"]
        assert found["ci95"] == pytest.approx([low, high]), found["name"]
        assert found["too_few"] == too_few
    _, text = command(_report, "report", str(run))
    assert "pass_at_k(3)" in text and "1 tasks with too few repetitions left out" in text


def test_reducer_on_the_command_line_replaces_the_headers_and_mean_is_the_default(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path / "run", OUTCOMES, reducers=NAMES)
    found = report_json(run, "--reducer", "pass_hat_k(2)", "--reducer", "max")
    assert [r["name"] for r in found["reducers"]] == ["pass_hat_k(2)", "max"]
    plain = write_run(tmp_path / "plain", OUTCOMES)
    assert [r["name"] for r in report_json(plain)["reducers"]] == ["mean"]
    with pytest.raises(SystemExit) as raised:
        command(_report, "report", str(run), "--reducer", "pass@3")
    assert raised.value.code == 2


def test_the_pass_rate_interval_is_clustered_by_task(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", OUTCOMES)
    summary = report_json(run)
    ys = [float(y) for results in OUTCOMES.values() for y in results]
    n, g = len(ys), len(OUTCOMES)
    rate = sum(ys) / n
    meat = sum(sum(y - rate for y in results) ** 2 for results in OUTCOMES.values())
    se = math.sqrt(g / (g - 1) * meat) / n  # CR1
    assert summary["pass_rate"] == pytest.approx(rate)
    t = T_BY_TASKS[g]
    assert summary["pass_rate_ci95"] == pytest.approx(
        [max(0.0, rate - t * se), min(1.0, rate + t * se)]
    )
    assert summary["pass_rate_interval"] == "clustered by task" and summary["tasks"] == 5
    _, text = command(_report, "report", str(run))
    assert "clustered by task" in text


def test_one_repetition_per_task_keeps_wilson_over_repetitions(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", {f"t{i}": [i % 3 == 0] for i in range(30)})
    summary = report_json(run)
    assert summary["pass_rate_interval"] == "Wilson, over repetitions"
    assert summary["pass_rate_ci95"] == pytest.approx(list(wilson_interval(10, 30)))
    assert "Wilson, over repetitions" in command(_report, "report", str(run))[1]


def test_report_says_add_tasks_when_tasks_always_pass_or_always_fail(tmp_path: Path) -> None:
    between = {f"t{i}": [i % 2] * 8 for i in range(40)}
    summary = report_json(write_run(tmp_path / "between", between))
    assert summary["add_tasks_not_repeats"] is True
    assert "add tasks, not repeats" in command(_report, "report", str(tmp_path / "between"))[1]
    rng = random.Random(1)  # every task a coin: the spread is within tasks
    within = {f"t{i}": [int(rng.random() < 0.5) for _ in range(4)] for i in range(40)}
    assert report_json(write_run(tmp_path / "within", within))["add_tasks_not_repeats"] is False


def records(outcomes: dict[str, list[int]]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [header()]
    for task_id, results in outcomes.items():
        lines += [report(task_id, i, bool(ok)) for i, ok in enumerate(results)]
    return lines


def test_compare_resamples_tasks_so_a_difference_between_tasks_gets_its_width() -> None:
    """Two runs whose difference lies between tasks (each task's pass probability drawn anew in
    B): resampling repetitions gives an interval about half as wide as resampling tasks."""
    rng = random.Random(5)
    run_a, run_b = {}, {}
    for i in range(40):
        p_a, p_b = rng.betavariate(0.5, 0.5), rng.betavariate(0.5, 0.5)
        run_a[f"t{i}"] = [int(rng.random() < p_a) for _ in range(8)]
        run_b[f"t{i}"] = [int(rng.random() < p_b) for _ in range(8)]
    comparison = compare_runs(records(run_a), records(run_b))
    assert comparison.interval_method == "paired bootstrap over tasks"
    assert comparison.mcnemar_p is None  # pairs of one task are not independent
    low, high = comparison.difference_ci95 or (0.0, 0.0)
    pair_diffs = [b - a for t in run_a for a, b in zip(run_a[t], run_b[t], strict=True)]
    (rep_low, rep_high), _ = difference_interval(pair_diffs)  # repetitions resampled
    ratio = (rep_high - rep_low) / (high - low)
    print(f"repetition-resampling width / task-resampling width: {ratio:.2f}")
    assert 0.4 < ratio < 0.7
    task_diffs = [(sum(run_b[t]) - sum(run_a[t])) / 8 for t in run_a]
    m = sum(task_diffs) / 40
    sd = math.sqrt(sum((d - m) ** 2 for d in task_diffs) / 39)
    assert high - low == pytest.approx(2 * Z * sd / math.sqrt(40), rel=0.15)


def test_compare_says_no_difference_shown_and_keeps_mcnemar_for_one_repetition(
    tmp_path: Path,
) -> None:
    a = write_run(tmp_path / "a", {f"t{i}": [i % 2] for i in range(20)})
    b = write_run(tmp_path / "b", {f"t{i}": [(i // 2) % 2] for i in range(20)})
    status, text = command(_compare, "compare", str(a), str(b), "--reducer", "mean")
    assert status == 0 and "no difference shown" in text and "McNemar p" in text
    assert text.split("McNemar p ")[1].startswith("exact")
    status, out = command(_compare, "compare", str(a), str(b), "--json")
    data = json.loads(out)
    assert data["no_difference_shown"] is True and data["interval_method"] == "paired bootstrap"
    assert data["mcnemar_p"] is not None and [r["name"] for r in data["reducers"]] == ["mean"]


def test_compare_shows_a_difference_and_each_reducers(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", {f"t{i}": [0, 0, 1, 0] for i in range(30)}, ["pass_at_k(2)"])
    b = write_run(tmp_path / "b", {f"t{i}": [1, 1, 0, 1] for i in range(30)}, ["pass_at_k(2)"])
    _, out = command(_compare, "compare", str(a), str(b), "--json")
    data = json.loads(out)
    assert data["no_difference_shown"] is False and data["difference"] == pytest.approx(0.5)
    (reducer,) = data["reducers"]
    assert reducer["name"] == "pass_at_k(2)"
    assert reducer["a"] == pytest.approx(0.5) and reducer["b"] == pytest.approx(1.0)
    assert "a difference shown" in command(_compare, "compare", str(a), str(b))[1]


T_300 = 1.9679030113  # Student's t, 97.5% quantile, 300 degrees of freedom


def test_compare_normal_approximations_use_t_with_tasks_minus_one_degrees_of_freedom() -> None:
    """Where `compare` does not resample (301 tasks of uneven sizes; 301 pairs with many distinct
    fractional differences), its interval is mean ± t·se, t with 300 degrees of freedom."""
    rng = random.Random(3)
    by_task = [[rng.random() - 0.4 for _ in range(1 + i % 3)] for i in range(301)]
    (low, high), method = task_difference_interval(by_task)
    ys = [d for diffs in by_task for d in diffs]
    n, g = len(ys), len(by_task)
    mean = sum(ys) / n
    se = math.sqrt(g / (g - 1) * sum(sum(d - mean for d in ds) ** 2 for ds in by_task)) / n
    assert method == "normal approximation, clustered by task"
    assert (low, high) == pytest.approx((mean - T_300 * se, mean + T_300 * se), rel=1e-9)
    diffs = [rng.random() - 0.5 for _ in range(301)]
    (low, high), method = difference_interval(diffs)
    mean = sum(diffs) / 301
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 300)
    assert method == "normal approximation"
    half = T_300 * sd / math.sqrt(301)
    assert (low, high) == pytest.approx((mean - half, mean + half), rel=1e-9)
