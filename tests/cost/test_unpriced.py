"""A model nobody prices: its requests are unpriced (cost_usd null, `unpriced: true`), counted
apart and never as $0; `asynceval run` warns once, and refuses a budget it cannot keep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asynceval import Settings, Task, TaskExecutionStatus
from asynceval.cli import main

from ..conftest import EventLog
from ._support import MODEL, PRICE, UNPRICED, Calls, events_file, named, price_file, tasks

ARITHMETIC = str(Path(__file__).parents[2] / "examples" / "arithmetic.py")


async def test_an_unpriced_models_requests_cost_null_and_are_counted_apart(
    event_log: EventLog,
) -> None:
    bench = Calls(UNPRICED, calls=2)
    reports = await bench.run(tasks(3))
    assert {r["status"] for r in reports} == {"success"}
    released = event_log.named("released")
    assert len(released) == 6
    assert all(e["cost_usd"] is None and e["unpriced"] is True for e in released)
    for report in reports:
        usage = report["usage"]
        assert usage["cost_usd"] is None and usage["unpriced_calls"] == 2
        assert usage["by_model"] == {UNPRICED: {"calls": 2, "cost_usd": None}}
    (finished,) = event_log.named("run_finished")
    assert finished["cost_usd"] is None and finished["unpriced_calls"] == 6


class Mixed(Calls):
    """Each repetition calls a priced model, then one nobody prices."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        priced = self.make_model()
        self.model = UNPRICED
        unpriced = self.make_model()
        self.model = MODEL

        async def solver(query: str) -> str:
            await priced.generate(query, max_tokens=16)
            return (await unpriced.generate(query, max_tokens=16)).text

        return [solver], {}


async def test_a_repetition_with_priced_and_unpriced_calls_sums_the_priced_ones(
    tmp_path: Path, event_log: EventLog
) -> None:
    prices = price_file(tmp_path / "prices.json", {MODEL: PRICE})
    bench = Mixed(settings=Settings(llm_prices_file=str(prices)))
    (report,) = await bench.run(tasks(1))
    usage = report["usage"]
    priced = [e for e in event_log.named("released") if not e.get("unpriced")]
    (cost,) = [e["cost_usd"] for e in priced]
    assert cost > 0 and usage["cost_usd"] == cost and usage["unpriced_calls"] == 1
    assert usage["by_model"][UNPRICED] == {"calls": 1, "cost_usd": None}
    (finished,) = event_log.named("run_finished")
    assert finished["cost_usd"] == cost and finished["unpriced_calls"] == 1


async def test_under_a_budget_an_unpriced_model_is_refused_before_anything_is_sent(
    event_log: EventLog,
) -> None:
    """Through the API: the funnel cannot bound its cost, so its call is refused (a
    `CostUnbounded`, a ConfigError: its repetition's error names the model, of kind
    cost_unbounded), and no request goes out."""
    bench = Calls(UNPRICED)
    reports = await bench.run(tasks(2), max_cost_usd=1.0)
    for report in reports:
        assert report["status"] != TaskExecutionStatus.SUCCESS
        error = report["error"]
        assert error["type"] == "CostUnbounded" and UNPRICED in error["message"]
        assert error["kind"] == "cost_unbounded"
    assert not event_log.named("acquired")
    assert bench.budget is not None and bench.budget.spent == 0


def test_run_warns_once_at_the_start_about_a_model_without_a_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    status = main(["run", ARITHMETIC, "--out", str(out), "--model", UNPRICED, "--quiet"])
    err = capsys.readouterr().err
    assert status == 0, err
    (line,) = err.splitlines()
    assert "warning" in line and UNPRICED in line and "LLM_PRICES_FILE" in line
    (finished,) = named(events_file(out / "events.jsonl"), "run_finished")
    assert finished["cost_usd"] is None and finished["unpriced_calls"] == 40


@pytest.mark.parametrize("how", ["option", "environment"])
def test_run_refuses_a_budget_for_a_model_without_a_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    args = ["run", ARITHMETIC, "--out", str(tmp_path / "out"), "--model", UNPRICED, "--quiet"]
    if how == "option":
        args += ["--max-cost", "5"]
    else:
        monkeypatch.setenv("MAX_COST_USD", "5")
    assert main(args) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert UNPRICED in line and "no price" in line and "LLM_PRICES_FILE" in line
    assert not (tmp_path / "out").exists()  # refused before the run directory was made
