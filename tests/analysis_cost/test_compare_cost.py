"""`asynceval compare`: each run's cost beside its pass rate, the difference of the totals, and
the paired difference in cost per repetition with its 95% interval (tasks resampled)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from asynceval.analysis.compare import compare_runs, task_difference_interval
from asynceval.cli import main

from ._files import header, report, stopped, usage, write_results

TASKS = ["t0", "t1", "t2", "t3", "t4"]


def cost_a(task: int, repeat: int) -> float:
    return 0.0001 * (task + 1) + 0.00001 * repeat


def cost_b(task: int, repeat: int) -> float:
    """About twice A's: B is the dearer run."""
    return 2 * cost_a(task, repeat) + 0.000003 * ((task * 7 + repeat) % 5)


def runs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Runs A and B of five tasks, two repeats each; in B, t4[1] made an unpriced call (its
    pair is left out of the paired figures) and t3[1] was stopped by the budget; A also has
    x[0], which B has not."""
    a = [header()]
    b = [header()]
    for task, name in enumerate(TASKS):
        for repeat in (0, 1):
            a.append(report(name, repeat, usage=usage(cost_a(task, repeat))))
            if (name, repeat) == ("t4", 1):
                b.append(report(name, repeat, usage=usage(cost_b(task, repeat), unpriced=1)))
            elif (name, repeat) == ("t3", 1):
                b.append(stopped(name, repeat, cost=0.00001))
            else:
                b.append(
                    report(name, repeat, passed=repeat == 0, usage=usage(cost_b(task, repeat)))
                )
    a.append(report("x", 0, usage=usage(0.5)))
    return a, b


def test_the_paired_cost_difference_is_over_pairs_whose_cost_both_runs_know() -> None:
    a, b = runs()
    cost = compare_runs(a, b).cost
    priced_a = [cost_a(t, r) for t in range(5) for r in (0, 1)] + [0.5]
    priced_b = [cost_b(t, r) for t in range(5) for r in (0, 1) if (t, r) != (3, 1)] + [0.00001]
    assert cost["a"] == math.fsum(priced_a) and cost["b"] == math.fsum(priced_b)
    assert cost["difference"] == cost["b"] - cost["a"]
    paired = [(t, r) for t in range(5) for r in (0, 1) if (t, r) not in ((3, 1), (4, 1))]
    assert (cost["pairs"], cost["pairs_left_out"], cost["tasks"]) == (8, 2, 5)
    diffs = [cost_b(t, r) - cost_a(t, r) for t, r in paired]
    assert cost["mean_a"] == pytest.approx(math.fsum(cost_a(t, r) for t, r in paired) / 8)
    assert cost["mean_b"] == pytest.approx(math.fsum(cost_b(t, r) for t, r in paired) / 8)
    assert cost["mean_difference"] == pytest.approx(math.fsum(diffs) / 8, rel=1e-12)
    by_task = [[cost_b(t, r) - cost_a(t, r) for t2, r in paired if t2 == t] for t in range(5)]
    (low, high), method = task_difference_interval(by_task)
    assert cost["mean_difference_ci95"] == [low, high]
    assert cost["interval_method"] == method == "paired bootstrap over tasks"
    assert 0 < low <= cost["mean_difference"] <= high
    assert cost["no_difference_shown"] is False


def test_compare_shows_each_runs_cost_and_the_paired_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    a, b = runs()
    run_a, run_b = write_results(tmp_path / "a", a), write_results(tmp_path / "b", b)
    assert main(["compare", str(run_a), str(run_b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cost"] == json.loads(json.dumps(compare_runs(a, b).cost))
    assert data["b"]["budget_exhausted"] == 1 and data["b"]["errors"] == 0
    assert main(["compare", str(run_a), str(run_b)]) == 0
    out = [
        " ".join(line.replace("│", " ").split()) for line in capsys.readouterr().out.splitlines()
    ]
    assert "cost $0.503" in out  # A's total, 0.50300000...3: four significant digits
    assert "cost $0.005344 + 1 call unpriced (not counted: no price for their model)" in out
    assert "budget exhausted 1 repetition (not scored; run again by --resume)" in out
    assert any(line.startswith("cost B - A, in all -$0.4") for line in out)
    paired = next(line for line in out if line.startswith("cost B - A, paired"))
    assert "per repetition (95% CI +$0.000" in paired and paired.endswith("a difference shown")
    assert "mean cost A / B $0.000" in " ".join(out)
    assert any(line.startswith("left out 2 pairs whose cost is unknown") for line in out)


def test_runs_without_cost_compare_as_before_and_say_so() -> None:
    a = [header(), report("t", 0), report("u", 0)]
    b = [header(), report("t", 0, passed=False), report("u", 0)]
    cost = compare_runs(a, b).cost
    assert cost["a"] is None and cost["difference"] is None and cost["pairs"] == 0
    assert cost["pairs_left_out"] == 2 and cost["mean_difference_ci95"] is None
