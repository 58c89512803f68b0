"""After a kill -9 and a resume, the run's cost is what was billed: `report`, `report --json`
and `run_finished` give the sum of `cost_usd` over every segment's `released` events (calls the
resume replayed from the journal were paid in the killed segment), and each task's cost counts
its repetition's calls in every segment, so tasks alike cost alike however the kill fell."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from asynceval.analysis import summarize
from asynceval.analysis.cost import Billed, with_bill
from asynceval.analysis.view import view_data
from asynceval.cli import main

from ..cli._shell import start
from ._support import events_file, named, released_cost

TURNS = str(Path(__file__).parent.parent / "cli" / "turns_bench.py")


def wait_for_released(events: Path, at_least: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if events.exists() and events.read_text().count('"released"') >= at_least:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {at_least} calls released in {timeout} s")


def test_after_a_kill_and_a_resume_the_report_counts_what_every_segment_paid(
    tmp_path: Path, sim_server: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim_server("--latency", "0.05")
    out = tmp_path / "d"
    args = ("run", TURNS, "--base-url", url, "--model", "asynceval-sim", "--out", "d", "--quiet")
    run = start(*args, cwd=tmp_path)
    wait_for_released(out / "events.jsonl", 40)  # 24 agents x 6 calls: some finished, some not
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    capsys.readouterr()
    events = events_file(out / "events.jsonl")
    billed = released_cost(events)
    assert named(events, "journal_hit"), "the resume replayed calls the killed segment paid"

    assert main(["report", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert Decimal(repr(report["cost_usd"])) == billed
    assert report["reports_cost_usd"] < report["cost_usd"]  # the replayed calls cost 0 there
    (last_finished,) = named(events, "run_finished")  # the killed segment wrote none
    assert Decimal(repr(last_finished["cost_usd"])) == billed
    # Each task asks six alike questions: its cost is its six calls, wherever they were paid.
    costs = [task["cost_usd"] for task in report["cost_by_task"]]
    assert len(costs) == 24 and max(costs) < 1.2 * min(costs), costs

    assert main(["report", str(out)]) == 0
    table = capsys.readouterr().out
    assert "in the reports alone" in table

    # compare pairs the resumed run's repetitions at what they were billed: against a run of
    # the same tasks that was never killed, the two cost alike (it showed the resumed one
    # cheaper by what the journal replayed).
    whole = (
        "run",
        TURNS,
        "--base-url",
        url,
        "--model",
        "asynceval-sim",
        "--out",
        str(tmp_path / "e"),
    )
    assert main([*whole, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "e"), str(out), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert cost["b"] == pytest.approx(float(billed), rel=1e-9)
    assert cost["pairs"] == 24 and abs(cost["mean_difference"]) < 0.1 * cost["mean_a"], cost
    # and so does the view, its run's summary and its comparison alike.
    data, _ = view_data([tmp_path / "e", out])
    assert data["runs"][1]["summary"]["cost_usd"] == pytest.approx(float(billed), rel=1e-9)
    assert data["comparisons"][0]["cost"]["b"] == pytest.approx(float(billed), rel=1e-9)


def _report(task: str, cost: float) -> dict[str, object]:
    return {
        "task_id": task,
        "repeat_idx": 0,
        "status": "success",
        "eval": [{"passed": True}],
        "usage": {"llm_calls": 1, "cost_usd": cost, "unpriced_calls": 0},
    }


def test_a_bill_not_all_of_repetitions_keeps_the_tasks_costs_of_the_reports() -> None:
    """A provider batch's lines are billed by batch, in no repetition's `released` event: the
    total is the bill's, and each task keeps its reports' cost (not a share of the bill)."""
    records = [_report("a", 0.002), _report("b", 0.002)]
    reports = summarize(records)
    billed = Billed()
    for event in (
        {"event": "run_started", "max_cost_usd": None},
        {"event": "released", "task_id": "a", "repeat_idx": 0, "cost_usd": 0.001},
        {"event": "run_started", "max_cost_usd": None, "resumed": True},
        {"event": "batch_completed", "cost_usd": 0.004},
    ):
        billed.feed(event)
    summary = with_bill(reports, records, billed)
    assert summary.cost_usd == 0.005
    assert summary.cost_by_task == reports.cost_by_task
    # All of it the repetitions': each task's cost is its calls' in every segment.
    billed.feed({"event": "released", "task_id": "b", "repeat_idx": 0, "cost_usd": 0.004})
    billed.total -= Decimal("0.004")  # the batch's, as if its lines were released
    summary = with_bill(reports, records, billed)
    assert {t["task_id"]: t["cost_usd"] for t in summary.cost_by_task} == {"b": 0.004, "a": 0.001}
