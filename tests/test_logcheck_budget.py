"""`asynceval logs check` adds up a run's spending from its `released` events and says whether a
budgeted run stayed within its budget: exit 1 when it did not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asynceval.analysis.logcheck import check_events
from asynceval.cli import main


def _log(path: Path, costs: list[float | None], budget: float | None, finished: bool) -> Path:
    limits = {"max_concurrent_llm_calls": 5, "max_cost_usd": budget}
    lines: list[dict[str, object]] = [
        {"event": "run_started", "limits": limits, "max_concurrent_llm_calls": 5}
    ]
    for n, cost in enumerate(costs):
        call = f"c{n}"
        lines.append({"event": "acquired", "call_id": call, "active_slots": 1, "wait_s": 0.0})
        lines.append({"event": "released", "call_id": call, "held_s": 0.01, "cost_usd": cost})
    if finished:
        lines.append({"event": "run_finished", "counts": {}, "budget_usd": budget})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_run_that_spent_its_budget_to_the_last_digit_held_it(tmp_path: Path) -> None:
    # 0.1 + 0.2 is 0.30000000000000004 in floats: the decimals as written add up to 0.3.
    check = check_events(
        json.loads(line)
        for line in _log(tmp_path / "e.jsonl", [0.1, 0.2], 0.3, True).read_text().splitlines()
    )
    assert check.budget_held and check.ok
    assert check.cost_usd == pytest.approx(0.3) and check.runs[0]["budget_usd"] == 0.3


def test_a_run_over_its_budget_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _log(tmp_path / "e.jsonl", [0.2, 0.2, None], 0.3, False)  # killed: no run_finished
    assert main(["logs", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "budget            $0.4 of $0.3: EXCEEDED" in out
    assert out.rstrip().endswith("VIOLATED")


def test_a_run_without_a_budget_only_says_what_it_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _log(tmp_path / "e.jsonl", [0.25, 0.5], None, True)
    assert main(["logs", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cost              $0.75 (the released events' cost_usd)" in out
    assert "budget" not in out
