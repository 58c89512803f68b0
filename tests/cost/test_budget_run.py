"""A run's budget, end to end: 60 repetitions under a budget of a third of what they cost, with
retries the provider forces: what every request cost stays within it, the run stops with exit
status 3 and one line, no repetition starts once it is spent, and a resume with a larger budget
finishes the run. Through the command line on `sim serve`, the API, hedged calls and the OpenAI
SDK on the funnel."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from asynceval import Settings, Task
from asynceval.cli import main
from asynceval.engine import read_records
from asynceval.interop import openai_client
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog
from ._support import (
    MODEL,
    PRICE,
    QUESTION,
    Calls,
    events_file,
    exact,
    named,
    price_file,
    released_cost,
    tasks,
)

BENCH = str(Path(__file__).parent / "budget_bench.py")
FAULTS = {503: 0.15, 429: 0.1}
"""What the provider answers instead, per attempt: retried by the funnel."""


def bill(stats: Mapping[str, Any]) -> Decimal:
    """What the provider's own token counters cost at PRICE."""
    prompt, completion = int(stats["tokens"]["prompt"]), int(stats["tokens"]["completion"])
    rates = {key: Decimal(repr(value)) for key, value in PRICE.items()}
    return (prompt * rates["input_mtok"] + completion * rates["output_mtok"]) / 1_000_000


def started_after_exhaustion(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The repetitions started after the first one ended `budget_exhausted` (its refusal came
    before that end)."""
    ends = [
        i
        for i, e in enumerate(events)
        if e["event"] == "task_finished" and e["status"] == "budget_exhausted"
    ]
    assert ends, "no repetition ran out of budget"
    return [e["task_id"] for e in events[ends[0] :] if e["event"] == "task_started"]


def results_of(out: Path) -> list[dict[str, Any]]:
    records, damaged = read_records(out / "results.jsonl")
    assert damaged == 0
    return [r for r in records if r.get("type") != "header"]


def one_success_each(reports: Sequence[Mapping[str, Any]], expected: int) -> None:
    successes = Counter(
        (r["task_id"], r["repeat_idx"]) for r in reports if r["status"] == "success"
    )
    assert len(successes) == expected and set(successes.values()) == {1}


def test_the_command_line_keeps_a_third_of_the_cost_and_a_resume_finishes(
    tmp_path: Path,
    sim_server: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    faults = [arg for status, rate in FAULTS.items() for arg in ("--fault", f"{status}={rate}")]
    url = sim_server("--latency", "0.01", "--retry-after", "0", "--seed", "11", *faults)
    prices = price_file(tmp_path / "prices.yaml", {MODEL: PRICE})
    for name, value in {
        "LLM_PRICES_FILE": str(prices),
        "RETRY_INITIAL_DELAY": "0.01",
        "RETRY_MAX_DELAY": "0.05",
        "RETRY_MAX_ATTEMPTS": "12",
        "MAX_CONCURRENT_LLM_CALLS": "20",
    }.items():
        monkeypatch.setenv(name, value)
    run = ["run", BENCH, "--base-url", url, "--model", MODEL, "--quiet"]

    # What the whole run costs without a budget.
    assert main([*run, "--out", str(tmp_path / "full")]) == 0, capsys.readouterr().err
    full = named(events_file(tmp_path / "full" / "events.jsonl"), "run_finished")[0]
    assert full["counts"] == {"success": 60} and "budget_usd" not in full
    budget = full["cost_usd"] / 3
    httpx.post(url.removesuffix("/v1") + "/stats/reset")
    capsys.readouterr()

    out = tmp_path / "cut"
    assert main([*run, "--out", str(out), "--max-cost", repr(budget)]) == 3
    err = capsys.readouterr().err
    events = events_file(out / "events.jsonl")
    spent = released_cost(events)
    assert 0 < spent <= Decimal(repr(budget))
    # The provider's own count of what it served agrees: nothing was billed beyond the budget.
    assert bill(httpx.get(url.removesuffix("/v1") + "/stats").json()) == spent
    assert named(events, "retry"), "the provider's 503s and 429s were retried"
    (finished,) = named(events, "run_finished")
    assert finished["budget_exhausted"] is True and finished["budget_usd"] == budget
    assert Decimal(repr(finished["budget_spent_usd"])) == spent
    assert finished["cost_usd"] == float(spent)
    reports = results_of(out)
    statuses = Counter(r["status"] for r in reports)
    assert set(statuses) == {"success", "budget_exhausted"}, statuses
    assert statuses == finished["counts"]
    assert not started_after_exhaustion(events)
    assert len(named(events, "task_started")) == len(reports) < 60  # some never started
    left = 60 - statuses["success"]
    (line,) = err.splitlines()
    assert line.startswith("asynceval: budget exhausted: spent $") and f"of ${budget:.6g}" in line
    assert f"{left} repetitions left to run" in line
    assert line.endswith(f"finish with: asynceval run --resume {out} --max-cost USD")

    assert main(["run", "--resume", str(out), "--max-cost", "1"]) == 0, capsys.readouterr().err
    reports = results_of(out)
    one_success_each(reports, 60)
    resumed = named(events_file(out / "events.jsonl"), "run_finished")[-1]
    assert resumed["budget_usd"] == 1 and resumed["budget_exhausted"] is False
    assert resumed["skipped_as_done"] == 60 - left and resumed["counts"] == {"success": left}
    # The successes of the two segments cost what the run without a budget did.
    assert exact(r["usage"]["cost_usd"] for r in reports if r["status"] == "success") == exact(
        [full["cost_usd"]]
    )


def faulty(**extra: Any) -> SimConfig:
    return SimConfig(latency=0.005, fault_rates=FAULTS, retry_after=0, seed=5, **extra)


def settings(tmp_path: Path, **extra: Any) -> Settings:
    prices = price_file(tmp_path / "prices.json", {MODEL: PRICE})
    return Settings(
        llm_prices_file=str(prices),
        max_concurrent_llm_calls=20,
        retry_initial_delay=0.01,
        retry_max_delay=0.05,
        retry_max_attempts=12,
        **extra,
    )


async def budgeted_then_resumed(
    bench: Calls, n: int, tmp_path: Path, event_log: EventLog
) -> list[dict[str, Any]]:
    """Run `bench` on `n` tasks unbudgeted, then afresh at a third of that cost, then resumed
    with a budget ten times that; checks what every run must show, returns the budgeted run's
    events."""
    full = await bench.run(tasks(n, "full"))
    assert {r["status"] for r in full} == {"success"}
    budget = float(exact(r["usage"]["cost_usd"] for r in full)) / 3
    event_log.stream.seek(0)
    event_log.stream.truncate(0)

    results = tmp_path / "results.jsonl"
    reports = await bench.run(tasks(n), results_path=results, max_cost_usd=budget)
    events = event_log.all()
    spent = released_cost(events)
    assert bench.budget is not None and bench.budget.exhausted
    assert 0 < spent <= Decimal(repr(budget)) and bench.budget.spent == spent
    assert bench.budget.reserved == 0 and bench.budget.overrun == 0
    statuses = Counter(r["status"] for r in reports)
    assert set(statuses) == {"success", "budget_exhausted"}, statuses
    assert not started_after_exhaustion(events)
    assert len(named(events, "task_started")) == len(reports)
    for report in reports:
        if report["status"] == "budget_exhausted":
            assert report["error"]["kind"] == "budget_exhausted"
            assert report["error"]["type"] == "BudgetExhausted"

    again = await bench.run(tasks(n), results_path=results, resume=True, max_cost_usd=budget * 10)
    resumed = bench.budget  # a new budget, the run's own
    assert resumed is not None and not resumed.exhausted
    assert resumed.spent <= Decimal(repr(budget * 10)) and resumed.reserved == 0
    assert {r["status"] for r in again} == {"success"}
    assert len(again) == n - statuses["success"]  # only what had not succeeded ran again
    one_success_each(results_of(tmp_path), n)
    return events


async def test_the_api_keeps_the_budget_through_retries(
    tmp_path: Path, event_log: EventLog
) -> None:
    bench = Calls(sim=faulty(), settings=settings(tmp_path))
    events = await budgeted_then_resumed(bench, 60, tmp_path, event_log)
    assert named(events, "retry")


async def test_hedged_requests_are_within_the_budget(tmp_path: Path, event_log: EventLog) -> None:
    """With LLM_HEDGE, a slow call's second request reserves its own worst case: the hedges and
    the requests they beat (cancelled, counted at their worst case) stay within the budget.
    Fewer repetitions at once than slots, so that hedges find a free one."""
    tail = SimConfig(latency=0.01, latency_jitter=1.2, latency_distribution="lognormal", seed=2)
    hedging = settings(tmp_path, llm_hedge=0.015, llm_hedge_budget=0.5)
    bench = Calls(sim=tail, settings=hedging, max_concurrent_tasks=8)
    events = await budgeted_then_resumed(bench, 60, tmp_path, event_log)
    assert named(events, "hedge_sent"), "no call was hedged under the budget"
    # The requests a hedge beat were cancelled unanswered: counted at their worst case.
    assert any(e.get("cost_unknown") for e in named(events, "released"))


class Sdk(Calls):
    """Each repetition's agent makes one call with the OpenAI SDK on the funnel, to `url`."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client: openai.AsyncOpenAI = openai_client(base_url=self.url)

        async def solver(query: str) -> str:
            answer = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": query}], max_tokens=16
            )
            return answer.choices[0].message.content or ""

        return [solver], {}


async def test_sdk_calls_on_the_funnel_are_within_the_budget(
    tmp_path: Path, event_log: EventLog, asgi_server: Callable[[Any], int]
) -> None:
    sim = SimProvider(faulty())
    url = f"http://127.0.0.1:{asgi_server(sim)}/v1"
    bench = Sdk(url, settings=settings(tmp_path, llm_base_url=url))
    events = await budgeted_then_resumed(bench, 40, tmp_path, event_log)
    assert named(events, "retry")


def test_the_question_is_the_benchmarks() -> None:
    """budget_bench.py asks what the API tests ask (so the same price makes the same costs)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("budget_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.QUESTION == QUESTION
