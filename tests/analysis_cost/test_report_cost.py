"""`asynceval report`: a run's cost (total, per model, per task, p50/p95 per repetition),
unpriced calls apart and never $0, and repetitions the budget stopped counted apart."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from asynceval.analysis import summarize
from asynceval.analysis.cost import money, signed_money
from asynceval.cli import main

from ._files import MODEL, header, report, stopped, usage, write_results

PRICED = [0.0001, 0.0003, 0.00005, 0.0002, 0.00004]  # every priced report's cost, in file order


def resumed_run() -> list[dict[str, Any]]:
    """A run the budget stopped, resumed: b/0 ran out of budget (having spent $0.00005), then
    ran again and passed; d/0 never started; c/0 made two calls of a model without a price."""
    unpriced = {
        MODEL: {"calls": 1, "cost_usd": 0.00004},
        "mystery-1": {"calls": 2, "cost_usd": None},
    }
    return [
        header(),
        report("a", 0, usage=usage(0.0001)),
        report("a", 1, passed=False, usage=usage(0.0003)),
        stopped("b", 0, cost=0.00005),
        header(resumed=True, started_at_unix=2000.0),
        report("b", 0, usage=usage(0.0002)),
        report("c", 0, usage=usage(0.00004, unpriced=2, cached=7, by_model=unpriced)),
        stopped("d", 0),
    ]


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console wide enough that rich does not wrap a row of the table."""
    monkeypatch.setenv("COLUMNS", "250")


def table_row(line: str) -> str:
    """A line of a rich table as 'label │ text' (cells stripped, empty ones left out)."""
    return " │ ".join(cell.strip() for cell in line.split("│") if cell.strip())


def report_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["report", str(path), "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_json_has_the_total_of_every_report_and_the_figures_per_model_and_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = report_json(write_results(tmp_path / "run", resumed_run()), capsys)
    # The budget-stopped b/0's money was spent: the total sums every report, unrounded.
    assert data["cost_usd"] == math.fsum(PRICED)
    assert data["unpriced_calls"] == 2 and data["cached_tokens"] == 7
    assert data["cost_by_model"] == {
        MODEL: {"calls": 5, "unpriced_calls": 0, "cost_usd": math.fsum(PRICED)},
        "mystery-1": {"calls": 2, "unpriced_calls": 2, "cost_usd": None},
    }
    assert data["cost_by_task"] == [
        {"task_id": "a", "reports": 2, "unpriced_calls": 0, "cost_usd": math.fsum(PRICED[:2])},
        {"task_id": "b", "reports": 2, "unpriced_calls": 0, "cost_usd": math.fsum(PRICED[2:4])},
        {"task_id": "c", "reports": 1, "unpriced_calls": 2, "cost_usd": 0.00004},
        {"task_id": "d", "reports": 1, "unpriced_calls": 0, "cost_usd": None},
    ]
    # Per repetition: the last report of each pair whose cost is known in full (c has unpriced
    # calls, d was stopped): 0.0001, 0.0003, 0.0002 -> nearest rank p50 0.0002, p95 0.0003.
    assert (data["cost_p50_usd"], data["cost_p95_usd"]) == (0.0002, 0.0003)
    assert data["cost_repetitions"] == 3 and data["cost_unknown_reports"] == 0


def test_budget_exhausted_is_counted_apart_not_an_error_nor_in_the_pass_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = report_json(write_results(tmp_path / "run", resumed_run()), capsys)
    assert data["statuses"] == {"success": 4, "budget_exhausted": 1}
    assert data["budget_exhausted"] == 1
    assert data["errors"] == 0 and data["error_kinds"] == []  # not "your agent raised"
    assert (data["scored"], data["passed"], data["pass_rate"]) == (4, 3.0, 0.75)


def test_the_table_shows_the_cost_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    assert main(["report", str(write_results(tmp_path / "run", resumed_run()))]) == 0
    lines = [table_row(line) for line in capsys.readouterr().out.splitlines()]
    expected = [
        "errors │ none",
        "budget exhausted │ 1 repetition (not scored; run again by --resume)",
        "tokens in / out │ 66 / 6 (7 in from the provider's prompt cache)",
        "cost │ $0.00069 + 2 calls unpriced (not counted: no price for their model)",
        "per repetition p50 / p95 │ $0.0002 / $0.0003 (over 3 repetitions)",
        "by model",
        f"{MODEL} │ $0.00069 (5 calls)",
        "mystery-1 │ unpriced (2 calls)",
        "by task",
        "a │ $0.0004 (2 reports)",
        "b │ $0.00025 (2 reports)",
        "c │ $0.00004 (1 report, 2 calls unpriced)",
        "d │ no priced call",
    ]
    found = [line for line in lines if line in expected]
    assert found == expected


def test_unpriced_calls_alone_are_unknown_never_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    models = {"mystery-1": {"calls": 3, "cost_usd": None}}
    records = [header(), report("a", usage=usage(None, calls=0, unpriced=3, by_model=models))]
    path = write_results(tmp_path / "run", records)
    data = report_json(path, capsys)
    assert data["cost_usd"] is None and data["unpriced_calls"] == 3
    assert data["cost_p50_usd"] is None and data["cost_repetitions"] == 0
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "unknown: 3 calls unpriced (no price for their model)" in out
    assert "unpriced (3 calls)" in out and "$0" not in out


def test_an_old_results_file_without_cost_shows_no_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    path = write_results(tmp_path / "run", [header(), report("a"), report("b", passed=False)])
    data = report_json(path, capsys)
    assert data["cost_usd"] is None and data["cost_by_model"] == {} and data["cost_by_task"] == []
    assert data["cost_p50_usd"] is None and data["cost_unknown_reports"] == 2
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "unknown (the results were written before cost was recorded)" in out
    assert "$" not in out and "per repetition" not in out


def test_fail_under_says_the_budget_stopped_repetitions_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_results(tmp_path / "run", resumed_run())
    assert main(["report", str(path), "--fail-under", "0.9"]) == 1
    err = capsys.readouterr().err
    assert "pass rate 3/4 = 75.0% is below --fail-under 90%" in err
    assert "1 stopped by the cost budget (run again by --resume)" in err
    assert "without an evaluator's result" not in err


def test_a_file_with_some_reports_before_cost_counts_them_apart() -> None:
    summary = summarize([header(), report("a"), report("b", usage=usage(0.5))])
    assert summary.cost_usd == 0.5 and summary.cost_unknown_reports == 1
    assert [t["task_id"] for t in summary.cost_by_task] == ["b"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0123, "$0.0123"),
        (0.00001234, "$0.00001234"),
        (0.000012345678, "$0.00001235"),
        (0.5, "$0.50"),
        (1234.5678, "$1,234.57"),
        (0.0, "$0"),
        (-0.0012, "-$0.0012"),
    ],
)
def test_money_has_four_significant_digits_below_a_dollar(value: float, text: str) -> None:
    assert money(value) == text
    assert signed_money(value) == (text if value <= 0 else "+" + text)
