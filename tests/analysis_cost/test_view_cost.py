"""`asynceval view`: a run's cost beside its pass rate, per repetition in the table, and the
cost comparison of several runs; a resumed run's replaced reports still count in its total."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from asynceval.analysis import summarize
from asynceval.analysis.view import view_data, write_view
from asynceval.engine import read_records
from asynceval.engine.report import ERROR_KIND_LABELS

from ..test_view_browser import CHROMIUM, dump_dom
from ._files import header, report, write_results
from .test_compare_cost import runs
from .test_report_cost import PRICED, resumed_run


def test_the_view_sums_what_report_sums_replaced_reports_included(tmp_path: Path) -> None:
    path = write_results(tmp_path / "run", resumed_run())
    data, _ = view_data([path])
    (run,) = data["runs"]
    full, _ = read_records(path / "results.jsonl")
    assert run["summary"] == summarize(full).as_dict()  # the view keeps only the last reports
    assert run["summary"]["cost_usd"] == math.fsum(PRICED)
    assert run["summary"]["budget_exhausted"] == 1 and run["summary"]["errors"] == 0
    assert run["cost"]["total"] == "$0.00069"
    rows = dict(map(tuple, run["cost"]["rows"]))
    assert rows["cost"] == "$0.00069 + 2 calls unpriced (not counted: no price for their model)"
    assert rows["  per repetition p50 / p95"] == "$0.0002 / $0.0003 (over 3 repetitions)"
    assert rows["budget exhausted"] == "1 repetition (not scored; run again by --resume)"
    columns = run["columns"]
    assert columns["task_id"] == ["a", "a", "b", "c", "d"]
    assert columns["cost_usd"] == [0.0001, 0.0003, 0.0002, 0.00004, None]
    label = ERROR_KIND_LABELS.get("budget_exhausted", "budget exhausted")  # not "your agent raised"
    assert columns["error"][4] == f"{label}: BudgetExhausted: budget spent"


def test_an_old_run_shows_its_cost_as_unknown(tmp_path: Path) -> None:
    path = write_results(tmp_path / "run", [header(), report("a")])
    (run,) = view_data([path])[0]["runs"]
    assert run["cost"] == {
        "total": "-",
        "rows": [["cost", "unknown (the results were written before cost was recorded)"]],
    }
    assert run["columns"]["cost_usd"] == [None]


def test_several_runs_carry_the_cost_comparison(tmp_path: Path) -> None:
    a, b = runs()
    paths = [write_results(tmp_path / "a", a), write_results(tmp_path / "b", b)]
    (comparison,) = view_data(paths)[0]["comparisons"]
    assert comparison["cost"]["pairs"] == 8 and comparison["cost"]["pairs_left_out"] == 2
    labels = [label for label, _ in comparison["cost_rows"]]
    assert labels[:3] == ["cost B - A, in all", "cost B - A, paired", "  mean cost A / B"]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium or chromium-browser on PATH")
def test_the_page_shows_the_cost_beside_the_pass_rate(tmp_path: Path) -> None:
    path = write_results(tmp_path / "run", resumed_run())
    page = tmp_path / "view.html"
    write_view([path], page)
    dom = dump_dom(page, tmp_path / "profile")
    card = dom[dom.index('id="cost"') :]
    assert '<div class="big">$0.00069</div>' in card[:200]
    assert "2 calls unpriced" in card and "budget exhausted" in card
    assert 'data-col="cost_usd">cost</th>' in dom and '<td class="num">$0.0003</td>' in dom
    a, b = runs()
    paths = [write_results(tmp_path / "a", a), write_results(tmp_path / "b", b)]
    write_view(paths, page)
    both = dump_dom(page, tmp_path / "profile", "#run=compare")
    assert ">cost<" in both and ">$0.503<" in both  # the runs side by side
    assert 'id="cost-1"' in both and "cost B - A, paired" in both
    assert "+$0.0002715 per repetition" in both
