"""Calls from threads that do not copy the context are budgeted, counted and journaled: a sync
agent's own `ThreadPoolExecutor` and an async agent's `loop.run_in_executor(None, ...)` carry
their repetition's context while a run is in progress (and `ThreadPoolExecutor.submit` is
itself again once none is). Checked from outside: the provider's count of requests, the
`released` events' cost, the journal's replays on resume."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from asynceval import Settings, Task
from asynceval.cli import main
from asynceval.engine import read_records
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog
from ._support import events_file, named, released_cost
from .threads_bench import FAN_OUT, InExecutor, Pool, RawThread

BENCH = str(Path(__file__).parent / "threads_bench.py")
Loopback = Callable[[SimConfig], tuple[str, SimProvider]]


def reports_of(out: Path) -> list[dict[str, Any]]:
    records, damaged = read_records(out / "results.jsonl")
    assert damaged == 0
    return [r for r in records if r.get("type") != "header"]


def requests(url: str) -> int:
    return int(httpx.get(url.removesuffix("/v1") + "/stats").json()["requests"])


def summary_calls(printed: str) -> str:
    line = next(line for line in printed.splitlines() if "LLM calls / retries" in line)
    return line.split("│")[2].strip()


def test_a_sync_agents_thread_pool_is_budgeted_counted_and_journaled(
    tmp_path: Path, sim_server: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The review's repro/pool.py: 20 repetitions of 4 calls at once from the agent's own pool.
    Without a budget every call is in its repetition's usage and the summary (no warning that
    nothing went through the funnel); under a third of that cost the run stops with exit 3
    having spent no more than the budget (the provider's count and the released events agree
    with the reports); a resume replays from the journal the calls the cut repetitions had
    been answered."""
    url = sim_server("--latency", "0.01")
    run = ["run", f"{BENCH}:Pool", "--base-url", url, "--model", "asynceval-sim"]

    assert main([*run, "--out", str(tmp_path / "full")]) == 0
    printed = capsys.readouterr()
    assert "no LLM call went through" not in printed.err
    full = reports_of(tmp_path / "full")
    assert [r["usage"]["llm_calls"] for r in full] == [FAN_OUT] * 20
    assert requests(url) == 20 * FAN_OUT
    assert summary_calls(printed.out) == f"{20 * FAN_OUT} / 0"
    cost = released_cost(events_file(tmp_path / "full" / "events.jsonl"))
    assert cost > 0
    budget = cost / 3

    out = tmp_path / "cut"
    assert main([*run, "--out", str(out), "--max-cost", str(budget)]) == 3
    printed = capsys.readouterr()
    sent = requests(url) - 20 * FAN_OUT
    events = events_file(out / "events.jsonl")
    assert 0 < released_cost(events) <= budget
    reports = reports_of(out)
    assert Counter(r["status"] for r in reports)["budget_exhausted"] >= 1
    assert sum(r["usage"]["llm_calls"] for r in reports) == sent == len(named(events, "released"))
    assert summary_calls(printed.out) == f"{sent} / 0"
    answered = sum(r["usage"]["llm_calls"] for r in reports if r["status"] == "budget_exhausted")

    assert main(["run", "--resume", str(out), "--max-cost", "1"]) == 0, capsys.readouterr().err
    hits = named(events_file(out / "events.jsonl"), "journal_hit")
    assert answered > 0 and len(hits) == answered  # each call a cut repetition was answered
    resumed = [r for r in reports_of(out) if r["status"] == "success"]
    assert len({(r["task_id"], r["repeat_idx"]) for r in resumed}) == 20
    assert sum(r["usage"]["journal_hits"] for r in resumed) == answered


async def test_run_in_executor_calls_are_budgeted_and_counted(
    tmp_path: Path, loopback: Loopback, event_log: EventLog
) -> None:
    """The review's repro/rie.py: an async agent awaits its sync SDK call in the loop's default
    executor. Each call is in its repetition's usage; under a budget of a third of the full
    cost, what the provider was sent is what the events and the reports count, within it."""
    url, sim = loopback(SimConfig(latency=0.01))
    settings = Settings(llm_base_url=url, llm_model="asynceval-sim")
    bench = InExecutor(settings=settings, max_concurrent_tasks=4)
    full = await bench.run(bench.default_tasks())
    assert [r["usage"]["llm_calls"] for r in full] == [1] * 20
    assert sim.stats()["requests"] == 20 and not event_log.named("no_llm_calls")
    cost = released_cost(event_log.all())
    event_log.stream.truncate(0)
    event_log.stream.seek(0)

    bench = InExecutor(settings=settings, max_concurrent_tasks=4)
    budget = cost / 2
    reports = await bench.run(bench.default_tasks(), max_cost_usd=budget)
    sent = sim.stats()["requests"] - 20
    assert {r["status"] for r in reports} >= {"budget_exhausted"}
    assert 0 < released_cost(event_log.all()) <= budget
    assert sum(r["usage"]["llm_calls"] for r in reports) == sent
    assert len(event_log.named("acquired")) == sent


async def test_the_pools_submit_is_wrapped_during_a_run_only(
    tmp_path: Path, loopback: Loopback
) -> None:
    """`ThreadPoolExecutor.submit` is wrapped while a run goes on and exactly itself again
    after it; code outside a repetition submits as before (no context copied)."""
    original = ThreadPoolExecutor.submit
    url, _ = loopback(SimConfig(latency=0.001))
    seen: list[Any] = []

    class Seeing(Pool):
        n_tasks = 2

        async def setup_agents(self, *args: Any) -> Any:
            seen.append(ThreadPoolExecutor.submit)
            return await super().setup_agents(*args)

    bench = Seeing(settings=Settings(llm_base_url=url, llm_model="asynceval-sim"))
    reports = await bench.run(bench.default_tasks())
    assert [r["usage"]["llm_calls"] for r in reports] == [FAN_OUT] * 2
    assert seen and all(submit is not original for submit in seen)
    assert ThreadPoolExecutor.submit is original


async def test_two_runs_at_once_each_count_their_own_repetitions_calls(
    tmp_path: Path, loopback: Loopback
) -> None:
    """Two runs on one loop at once, each agent fanning out through its own pool: every call
    is counted in the repetition that made it, in its own run's reports and events file."""
    url, sim = loopback(SimConfig(latency=0.005))
    settings = Settings(llm_base_url=url, llm_model="asynceval-sim")
    original = ThreadPoolExecutor.submit

    class Named(Pool):
        def __init__(self, prefix: str, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.prefix = prefix

        def default_tasks(self) -> list[Task]:
            return [Task(query=f"What is {i} + 2?", id=f"{self.prefix}{i}") for i in range(8)]

    found: dict[str, list[dict[str, Any]]] = {}

    async def one(prefix: str) -> None:
        bench = Named(prefix, settings=settings, max_concurrent_tasks=4)
        path = tmp_path / prefix / "results.jsonl"
        path.parent.mkdir()
        found[prefix] = await bench.run(bench.default_tasks(), results_path=path)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "a")
        tg.start_soon(one, "b")
    assert sim.stats()["requests"] == 2 * 8 * FAN_OUT
    assert ThreadPoolExecutor.submit is original  # removed once both have ended
    for prefix, reports in found.items():
        assert [r["usage"]["llm_calls"] for r in reports] == [FAN_OUT] * 8
        events = events_file(tmp_path / prefix / "events.jsonl")
        released = named(events, "released")
        assert len(released) == 8 * FAN_OUT
        assert {e["task_id"][0] for e in released} == {prefix}


async def test_a_raw_threads_calls_are_the_runs_with_one_warning(
    tmp_path: Path, loopback: Loopback, event_log: EventLog
) -> None:
    """Calls from a `threading.Thread` the agent starts carry no repetition's context: they are
    the run's. Counted at the run level (one `calls_outside_repetitions` WARNING, the run's
    cost, no false warning that nothing went through the funnel), and under a budget of half
    their cost what the provider was sent stays within it."""
    url, sim = loopback(SimConfig(latency=0.005))
    settings = Settings(llm_base_url=url, llm_model="asynceval-sim")
    bench = RawThread(settings=settings, max_concurrent_tasks=4)
    full = await bench.run(bench.default_tasks())
    assert {r["status"] for r in full} == {"success"}
    assert sim.stats()["requests"] == 20
    (warning,) = event_log.named("calls_outside_repetitions")
    assert warning["level"] == "WARNING" and warning["calls"] == 20
    assert "contextvars.copy_context().run" in warning["advice"]
    assert not event_log.named("no_llm_calls")
    cost = released_cost(event_log.all())
    (finished,) = event_log.named("run_finished")
    assert Decimal(repr(finished["cost_usd"])) == cost == Decimal(repr(warning["cost_usd"]))
    event_log.stream.truncate(0)
    event_log.stream.seek(0)

    bench = RawThread(settings=settings, max_concurrent_tasks=4)
    budget = cost / 2
    reports = await bench.run(bench.default_tasks(), max_cost_usd=budget)
    sent = sim.stats()["requests"] - 20
    assert Counter(r["status"] for r in reports)["budget_exhausted"] >= 1
    assert 0 < released_cost(event_log.all()) <= budget
    assert len(event_log.named("released")) == sent
    (warning,) = event_log.named("calls_outside_repetitions")
    assert warning["calls"] == sent


def test_the_command_line_counts_a_raw_threads_calls_in_the_summary(
    tmp_path: Path, sim_server: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`asynceval run` of an agent calling from its own `threading.Thread` under --max-cost: the
    budget holds (exit 3), the summary's "LLM calls" is what the provider received, and one
    warning line says the calls were the run's and how to make them the repetitions'."""
    url = sim_server("--latency", "0.005")
    out = tmp_path / "raw"
    run = ["run", f"{BENCH}:RawThread", "--base-url", url, "--model", "asynceval-sim"]
    assert main([*run, "--out", str(out), "--max-cost", "0.0008"]) == 3
    printed = capsys.readouterr()
    sent = requests(url)
    events = events_file(out / "events.jsonl")
    assert 0 < released_cost(events) <= Decimal("0.0008")
    assert 0 < sent == len(named(events, "released")) < 20
    assert summary_calls(printed.out) == f"{sent} / 0"
    assert "no LLM call went through" not in printed.out + printed.err
    lines = [line for line in printed.err.splitlines() if "no repetition's context" in line]
    assert len(lines) == 1 and lines[0].startswith(f"asynceval: warning: {sent} LLM calls")
    assert main(["report", str(out)]) == 0  # the report says what the run's summary said
    assert summary_calls(capsys.readouterr().out) == f"{sent} / 0"


async def test_with_two_runs_a_raw_threads_call_under_a_budget_is_refused(
    tmp_path: Path, loopback: Loopback, event_log: EventLog
) -> None:
    """Two runs at once, one under a budget: a call from a thread without a run's context
    cannot be tied to either, so it is not sent (CostUnbounded, one line saying how to carry
    the context); the runs' own calls go on."""
    url, _ = loopback(SimConfig(latency=0.005))
    settings = Settings(llm_base_url=url, llm_model="asynceval-sim")
    found: dict[str, list[dict[str, Any]]] = {}

    async def one(name: str, bench: Any, **kwargs: Any) -> None:
        found[name] = await bench.run(bench.default_tasks(), **kwargs)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "raw", RawThread(settings=settings, max_concurrent_tasks=2))
        pool = Pool(settings=settings, max_concurrent_tasks=2)
        tg.start_soon(functools.partial(one, "pool", pool, max_cost_usd=1.0))
    assert [r["usage"]["llm_calls"] for r in found["pool"]] == [FAN_OUT] * 20
    raw = found["raw"]
    refused = [r for r in raw if r["status"] != "success"]
    assert refused, "some raw-thread calls met the budgeted run"
    assert all("CostUnbounded" in str(r.get("error")) for r in refused)
