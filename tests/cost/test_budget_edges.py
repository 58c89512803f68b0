"""The budget at its edges: a budget below one call's worst case, an agent that catches the
refusal, calls from a sync agent's thread, a run cancelled mid-call, streamed answers (read to
their usage chunk, or left unread), a timed-out attempt, and requests whose output is bounded
by more than max_tokens alone (several choices, a max_tokens that bounds nothing)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest

from asynceval import OpenAIChatModel, Settings, SyncAgent, Task
from asynceval.errors import BudgetExhausted
from asynceval.interop import openai_client
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog
from ._support import (
    MODEL,
    PRICE,
    Calls,
    by_repetition,
    exact,
    price_file,
    released_cost,
    tasks,
    token_cost,
)


def priced(tmp_path: Path, **extra: Any) -> Settings:
    prices = price_file(tmp_path / "prices.json", {MODEL: PRICE})
    return Settings(llm_prices_file=str(prices), **extra)


async def test_a_budget_below_one_calls_worst_case_sends_nothing(
    tmp_path: Path, event_log: EventLog
) -> None:
    """The first request does not fit with nothing in flight: the budget is spent at once. The
    repetitions already started end budget_exhausted, no other starts, nothing reaches the
    provider and nothing is spent."""
    bench = Calls(settings=priced(tmp_path), max_concurrent_tasks=4)
    reports = await bench.run(tasks(20), max_cost_usd=1e-6)
    assert 1 <= len(reports) <= 4
    assert {r["status"] for r in reports} == {"budget_exhausted"}
    assert len(event_log.named("task_started")) == len(reports)
    assert bench.sim_stats()["requests"] == 0
    assert all(e["cost_usd"] == 0 for e in event_log.named("released"))
    assert bench.budget is not None and bench.budget.exhausted
    assert bench.budget.spent == 0 and bench.budget.reserved == 0
    assert bench.budget.refused == len(reports)
    (finished,) = event_log.named("run_finished")
    assert finished["budget_exhausted"] is True and finished["budget_spent_usd"] == 0
    assert finished["counts"] == {"budget_exhausted": len(reports)}


class Stubborn(Calls):
    """An agent that catches the budget's refusal and answers all the same."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = self.make_model()

        async def solver(query: str) -> str:
            try:
                return (await model.generate(query, max_tokens=16)).text
            except BudgetExhausted:
                return "an answer made up without the model"

        return [solver], {}


async def test_an_agent_that_catches_the_refusal_and_answers_is_still_budget_exhausted(
    tmp_path: Path,
) -> None:
    bench = Stubborn(settings=priced(tmp_path))
    reports = await bench.run(tasks(3), max_cost_usd=1e-6)
    for report in reports:
        assert report["status"] == "budget_exhausted"
        assert report["error"]["kind"] == "budget_exhausted"
        assert report["eval"] is None  # not scored


class Threaded(Calls):
    """A sync agent (a worker thread) making two calls a repetition: `generate_sync`, or the
    OpenAI SDK's sync client on the funnel (`sdk`)."""

    def __init__(self, sdk: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sdk = sdk

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = self.make_model()
        client: openai.OpenAI = openai_client(sync=True)

        def call(query: str) -> str:
            if not self.sdk:
                return model.generate_sync(query, max_tokens=16).text
            answer = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": query}], max_tokens=16
            )
            return answer.choices[0].message.content or ""

        class Solver:
            def run(self, query: str) -> str:
                call(query)
                return call(query)

        agent = SyncAgent(Solver(), name="sync-solver")
        return [agent], {"sync-solver": agent}


@pytest.mark.parametrize("sdk", [False, True], ids=["generate_sync", "sync-sdk"])
async def test_calls_from_a_sync_agents_thread_are_budgeted(
    tmp_path: Path, event_log: EventLog, sdk: bool
) -> None:
    config = priced(tmp_path, max_concurrent_llm_calls=8)
    bench = Threaded(sdk, settings=config, max_concurrent_tasks=4)
    full = await bench.run(tasks(20, "full"))
    budget = float(exact(r["usage"]["cost_usd"] for r in full)) / 3
    event_log.stream.seek(0)
    event_log.stream.truncate(0)
    reports = await bench.run(tasks(20), max_cost_usd=budget)
    statuses = {r["status"] for r in reports}
    assert statuses == {"success", "budget_exhausted"}
    spent = released_cost(event_log.all())
    assert 0 < spent <= Decimal(repr(budget))
    assert bench.budget is not None and bench.budget.spent == spent
    assert bench.budget.reserved == 0
    assert {e["agent"] for e in event_log.named("released")} == {"sync-solver"}


async def test_a_run_cancelled_mid_call_leaves_nothing_reserved(
    tmp_path: Path, event_log: EventLog
) -> None:
    """The calls in flight when the run's task group is cancelled were sent and never answered:
    each counts at its worst case (cost_unknown), and the budget keeps no reservation. (Under
    a budget the first request goes alone until its answer says the model's tokens per byte:
    it is answered, then four go at once.)"""
    slow = SimConfig(latency=0.5)
    bench = Calls(sim=slow, settings=priced(tmp_path, max_concurrent_llm_calls=4))
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(bench.run, tasks(12), max_cost_usd=1.0))
        with anyio.fail_after(10):
            while len(event_log.named("acquired")) < 5 or bench.sim_stats()["in_flight"] < 4:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    budget = bench.budget
    assert budget is not None and budget.reserved == 0 and not budget.exhausted
    first, *released = event_log.named("released")
    assert "cost_unknown" not in first and len(released) == 4
    assert all(e["cost_unknown"] is True and e["cost_usd"] > 0 for e in released)
    assert budget.spent == released_cost(event_log.all())


async def test_a_timed_out_attempt_counts_at_its_worst_case(
    tmp_path: Path, event_log: EventLog
) -> None:
    """Sent, and not answered within LLM_CALL_TIMEOUT: the provider may bill it, so it counts
    at its worst case: its body's bytes as prompt tokens, and max_tokens."""
    bodies: list[bytes] = []

    class Recording(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.ASGITransport(app=SimProvider(SimConfig(latency=5.0)))

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            bodies.append(await request.aread())
            return await self.inner.handle_async_request(request)

    model = OpenAIChatModel(MODEL, base_url="http://provider.test/v1", transport=Recording())

    class Slow(Calls):
        def make_model(self) -> OpenAIChatModel:
            return model

    config = priced(tmp_path, llm_call_timeout=0.05, retry_max_attempts=1)
    bench = Slow(settings=config)
    (report,) = await bench.run(tasks(1), max_cost_usd=1.0)
    assert report["status"] != "success"
    (event,) = event_log.named("released")
    (body,) = bodies
    worst = token_cost(PRICE, len(body), 16)
    assert event["cost_unknown"] is True and event["cost_usd"] == worst
    assert report["usage"]["cost_usd"] == worst
    assert bench.budget is not None and float(bench.budget.spent) == worst
    assert bench.budget.reserved == 0


class Streaming(Calls):
    """One streamed SDK call a repetition to `url`: read to its end with the usage chunk, or
    read one chunk and left unread."""

    def __init__(self, url: str, unread: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url
        self.unread = unread
        self.usage: list[Any] = []

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client: openai.AsyncOpenAI = openai_client(base_url=self.url)

        async def solver(query: str) -> str:
            stream = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": query}],
                max_tokens=16,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for chunk in stream:
                if self.unread:
                    break  # and left open: the repetition's end reclaims it
                if chunk.usage is not None:
                    self.usage.append(chunk.usage)
            return "42"

        return [solver], {}


@pytest.fixture
def sim_url(asgi_server: Callable[[Any], int]) -> str:
    """A simulator on a socket (in-process ASGI buffers whole responses: no stream)."""
    sim = SimProvider(SimConfig(latency=0.005, stream_chunk_delay=0.005))
    return f"http://127.0.0.1:{asgi_server(sim)}/v1"


async def test_a_streamed_answer_is_priced_from_its_usage_chunk(
    tmp_path: Path, event_log: EventLog, sim_url: str
) -> None:
    bench = Streaming(sim_url, False, settings=priced(tmp_path, llm_base_url=sim_url))
    reports = await bench.run(tasks(3), max_cost_usd=1.0)
    assert {r["status"] for r in reports} == {"success"} and len(bench.usage) == 3
    released = by_repetition(event_log.all())
    for report in reports:
        (event,) = released[(report["task_id"], report["repeat_idx"])]
        usage = report["usage"]
        expected = token_cost(PRICE, usage["prompt_tokens"], usage["completion_tokens"])
        assert usage["completion_tokens"] == 16 and "cost_unknown" not in event
        assert event["cost_usd"] == expected and usage["cost_usd"] == expected
    seen = [token_cost(PRICE, u.prompt_tokens, u.completion_tokens) for u in bench.usage]
    assert sorted(seen) == sorted(r["usage"]["cost_usd"] for r in reports)
    assert bench.budget is not None and bench.budget.spent == released_cost(event_log.all())
    assert bench.budget.reserved == 0


async def test_a_stream_left_unread_counts_at_its_worst_case(
    tmp_path: Path, event_log: EventLog, sim_url: str
) -> None:
    """Its usage chunk never read: what the provider served is not known, so it counts at its
    worst case (cost_unknown), in its repetition's report too, and the budget keeps nothing."""
    bench = Streaming(sim_url, True, settings=priced(tmp_path, llm_base_url=sim_url))
    reports = await bench.run(tasks(3), max_cost_usd=1.0)
    assert {r["status"] for r in reports} == {"success"}
    assert len(event_log.named("stream_abandoned")) == 3
    released = by_repetition(event_log.all())
    for report in reports:
        (event,) = released[(report["task_id"], report["repeat_idx"])]
        assert event["cost_unknown"] is True and event["cost_usd"] >= token_cost(PRICE, 0, 16)
        assert report["usage"]["cost_usd"] == event["cost_usd"]
    assert bench.budget is not None and bench.budget.spent == released_cost(event_log.all())
    assert bench.budget.reserved == 0
    (finished,) = event_log.named("run_finished")
    assert finished["cost_usd"] == finished["budget_spent_usd"]


@pytest.mark.parametrize(
    ("params", "budget"),
    [({"max_tokens": 16, "n": 4}, 0.005), ({"max_tokens": 0}, 3.0), ({"max_tokens": -3}, 3.0)],
    ids=["four-choices", "max-tokens-0", "max-tokens-negative"],
)
async def test_what_a_request_may_answer_is_reserved_whatever_its_output_cap_says(
    tmp_path: Path, event_log: EventLog, params: dict[str, Any], budget: float
) -> None:
    """n choices are n times max_tokens; a max_tokens below 1 bounds nothing (the simulator
    answers up to its own limit; a model of unknown output limit reserves 32,768 tokens, $1.31
    here): either way no answer costs more than its reservation, and the budget holds."""
    bench = Calls(params=params, settings=priced(tmp_path))
    reports = await bench.run(tasks(12), max_cost_usd=budget)
    assert bench.budget is not None
    assert bench.budget.overrun == 0
    assert released_cost(event_log.all()) <= Decimal(repr(budget))
    assert "success" in {r["status"] for r in reports}


async def test_a_call_to_the_simulator_reserves_no_more_than_its_256_tokens(
    event_log: EventLog,
) -> None:
    """asynceval-sim answers at most 256 completion tokens: a max_tokens of 100,000 reserves
    256 ($0.0005 at $2 per million, with its prompt's bound), not 100,000 ($0.20)."""
    bench = Calls("asynceval-sim", params={"max_tokens": 100_000})
    reports = await bench.run(tasks(3), max_cost_usd=0.002)
    assert {r["status"] for r in reports} == {"success"}
    assert bench.budget is not None and bench.budget.overrun == 0


async def test_the_simulator_answers_at_most_max_tokens_a_choice_and_256_without() -> None:
    """What the simulator's usage says (the budget's worst case of a call to it relies on it):
    here every answer's text would be hundreds of tokens (ten tokens a character)."""
    wordy = SimConfig(latency=0.0, tokens_per_char=10.0)
    bench = Calls("asynceval-sim", params={"max_tokens": 5, "n": 3}, sim=wordy)
    (capped,) = await bench.run(tasks(1))
    assert capped["usage"]["completion_tokens"] == 15
    bench = Calls("asynceval-sim", params={}, sim=wordy)
    (uncapped,) = await bench.run(tasks(1))
    assert uncapped["usage"]["completion_tokens"] == 256


@pytest.mark.parametrize(
    "read",
    ["first-chunks", "nothing"],
)
async def test_a_run_cancelled_mid_stream_leaves_nothing_reserved(
    tmp_path: Path, event_log: EventLog, asgi_server: Callable[[Any], int], read: str
) -> None:
    """Streams being read when the run is cancelled (their first chunks read and handed on, or
    nothing read yet: the headers only) end with it, each at its worst case (cost_unknown: its
    usage chunk never came), and the budget keeps no reservation."""
    # Until an answer says the model's tokens per byte, each stream goes out once the one
    # before it has its first content: five are open after four delays.
    delay = 0.1 if read == "first-chunks" else 0.6
    sim = SimProvider(SimConfig(latency=0.005, stream_chunk_delay=delay))
    url = f"http://127.0.0.1:{asgi_server(sim)}/v1"
    bench = Streaming(url, False, settings=priced(tmp_path, llm_base_url=url))
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(bench.run, tasks(6), max_cost_usd=1.0))
        with anyio.fail_after(10):
            while sim.stats()["in_flight"] < 5:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        await anyio.sleep(0.05)
        open_streams = sim.stats()["in_flight"]
        tg.cancel_scope.cancel()
    budget = bench.budget
    assert budget is not None and budget.reserved == 0
    released = event_log.named("released")
    assert len(released) == sim.stats()["requests"]
    unknown = [e for e in released if e.get("cost_unknown")]
    assert len(unknown) >= open_streams >= 4
    assert all(e["cost_usd"] > 0 for e in released)
    assert budget.spent == released_cost(event_log.all())
