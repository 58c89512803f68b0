"""Hedging the slow tail (LLM_HEDGE): a request still out past the delay is sent once more, the
first answer wins and the other is cancelled. The provider is this test's own, on a real socket:
its counters (requests, disconnections, in flight) are the witness."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import openai
import pytest

from asynceval import OpenAIChatModel, Runtime, Settings, http_client
from asynceval.analysis.logcheck import check_events
from asynceval.funnel import Route
from asynceval.limits import ConcurrencyController
from asynceval.llm import track_usage

from ..conftest import EventLog

FAST: dict[str, Any] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
Plan = list[tuple[float, int]]


class TailProvider:
    """Chat completions whose every request says how it is served: the message is a JSON plan,
    `[[delay_s, status], ...]`, one step per time the same message arrives (the last step for
    every later one). A step waits `delay_s` (a client that goes meanwhile is counted in
    `disconnected`), then answers `status`; a 200 reports 10 x (its arrival number + 1)
    completion tokens, so the usage says which request answered."""

    def __init__(self) -> None:
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.disconnected = 0
        self.answered = 0
        self.seen: dict[str, int] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        text = json.loads(body)["messages"][-1]["content"]
        arrival = self.seen.get(text, 0)
        self.seen[text] = arrival + 1
        plan = json.loads(text)["plan"]
        delay, status = plan[min(arrival, len(plan) - 1)]
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            with anyio.move_on_after(delay):
                if (await receive())["type"] == "http.disconnect":
                    self.disconnected += 1  # the client went: nothing to answer
                    return
            await _answer(send, status, 10 * (arrival + 1))
            self.answered += 1
        finally:
            self.in_flight -= 1


async def _answer(send: Any, status: int, completion_tokens: int) -> None:
    if status == 200:
        body: dict[str, Any] = {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": completion_tokens},
        }
    else:
        body = {"error": {"message": f"status {status}", "type": "server_error"}}
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def plan(*steps: tuple[float, int], tag: object = 0) -> str:
    """A message asking the provider for these steps (`tag` keeps equal plans apart)."""
    return json.dumps({"plan": steps, "tag": tag})


@pytest.fixture
def provider(asgi_server: Callable[[Any], int]) -> tuple[str, TailProvider]:
    app = TailProvider()
    return f"http://127.0.0.1:{asgi_server(app)}/v1", app


def model_on(
    url: str, limit: int, **settings: Any
) -> tuple[OpenAIChatModel, ConcurrencyController]:
    """A model on the provider at `url` with these settings, and its own limiter of `limit`;
    LLM_HEDGE_BUDGET 1 unless given (the default 5% allows the first hedge at the 20th request)."""
    controller = ConcurrencyController(limit)
    settings = {**FAST, "llm_hedge_budget": 1.0, **settings}
    model = OpenAIChatModel(
        model="m", base_url=url, api_key="k", settings=Settings(**settings), controller=controller
    )
    return model, controller


async def settle(app: TailProvider) -> None:
    """Give the provider (its own thread and loop) up to 2 s to see the closed connections."""
    for _ in range(200):
        if not app.in_flight:
            return
        await anyio.sleep(0.01)


SLOW_THEN_FAST = ((5.0, 200), (0.01, 200))


async def test_a_call_past_the_delay_is_hedged_and_the_hedge_wins(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """The first request hangs; past LLM_HEDGE the same request goes again and answers: the call
    returns the hedge's answer, the first request is cancelled (the provider sees it go), both
    slots are released, the hedge's tokens are counted and `logs check` counts two calls."""
    url, app = provider
    model, controller = model_on(url, 4, llm_hedge=0.1)
    async with model:
        with track_usage() as usage:
            started = time.monotonic()
            completion = await model.generate(plan(*SLOW_THEN_FAST))
            elapsed = time.monotonic() - started
        await settle(app)
        stats = controller.statistics()
    assert elapsed < 1.0  # not the first request's 5 s
    assert completion.usage.completion_tokens == 20  # the second arrival's answer
    assert (app.requests, app.answered, app.disconnected, app.in_flight) == (2, 1, 1, 0)
    assert stats.active == 0  # both slots back
    assert (usage.llm_calls, usage.hedges, usage.retries) == (1, 1, 0)
    assert (usage.prompt_tokens, usage.completion_tokens) == (3, 20)
    [sent] = event_log.named("hedge_sent")
    [won] = event_log.named("hedge_won")
    assert sent["after_s"] == 0.1 and won["winner"] == "hedge"
    assert won["call_id"] == sent["call_id"] != sent["hedge_call_id"]
    acquired = {e["call_id"] for e in event_log.named("acquired")}
    released = {e["call_id"] for e in event_log.named("released")}
    assert acquired == released == {sent["call_id"], sent["hedge_call_id"]}
    check = check_events(event_log.all(), limit=4)
    assert check.calls == 2 and check.max_in_flight == 2 and check.ok and not check.unbalanced


async def test_a_first_request_that_answers_first_wins_and_its_hedge_goes(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """A first request that answers while its hedge is out wins: the hedge is cancelled and
    only the first's tokens count (the hedge never answered), with `hedge_won` saying so."""
    url, app = provider
    model, _ = model_on(url, 4, llm_hedge=0.05)
    async with model:
        with track_usage() as usage:
            completion = await model.generate(plan((0.2, 200), (5.0, 200)))
        await settle(app)
    assert completion.usage.completion_tokens == 10
    assert (app.requests, app.answered, app.disconnected) == (2, 1, 1)
    assert (usage.llm_calls, usage.hedges, usage.completion_tokens) == (1, 1, 10)
    [won] = event_log.named("hedge_won")
    assert won["winner"] == "first" and won["saved_s"] is None


async def test_a_first_request_that_fails_waits_for_its_hedge(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """The first request fails (503) while its hedge is still out: the call waits for the hedge
    and returns its answer, with no retry (today's policy would have retried)."""
    url, app = provider
    model, _ = model_on(url, 4, llm_hedge=0.05)
    async with model:
        with track_usage() as usage:
            completion = await model.generate(plan((0.15, 503), (0.3, 200), (0.0, 200)))
    assert completion.usage.completion_tokens == 20
    assert app.requests == 2 and usage.retries == 0 and not event_log.named("retry")
    [won] = event_log.named("hedge_won")
    assert won["winner"] == "hedge"


async def test_the_budget_stops_hedging(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """LLM_HEDGE_BUDGET=0.25: eight slow calls at once get two hedges (a quarter of eight
    requests); the other six wait for their first request."""
    url, app = provider
    model, _ = model_on(url, 20, llm_hedge=0.05, llm_hedge_budget=0.25)
    slow = ((0.4, 200), (0.01, 200))
    async with model:
        with track_usage() as usage:
            async with anyio.create_task_group() as tg:
                for index in range(8):
                    tg.start_soon(model.generate, plan(*slow, tag=index))
        await settle(app)
    assert usage.hedges == 2 and len(event_log.named("hedge_sent")) == 2
    assert app.requests == 10 and app.disconnected == 2 and app.answered == 8


async def test_no_hedge_when_no_slot_is_free(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """At limit 1 the first request holds the only slot: no hedge, one request."""
    url, app = provider
    model, _ = model_on(url, 1, llm_hedge=0.05)
    async with model:
        with track_usage() as usage:
            completion = await model.generate(plan((0.3, 200), (0.01, 200)))
    assert completion.usage.completion_tokens == 10
    assert app.requests == 1 and usage.hedges == 0 and not event_log.named("hedge_sent")


@pytest.mark.parametrize(("hedge", "requests"), [("off", 3), (0.05, 6)])
async def test_off_sends_one_request_per_call(
    provider: tuple[str, TailProvider], hedge: str | float, requests: int
) -> None:
    """LLM_HEDGE=off (the default): three slow calls, three requests; with a delay, six."""
    url, app = provider
    model, _ = model_on(url, 10, llm_hedge=hedge)
    async with model:
        with track_usage() as usage:
            async with anyio.create_task_group() as tg:
                for index in range(3):
                    tg.start_soon(model.generate, plan((0.3, 200), (0.01, 200), tag=index))
        await settle(app)
    assert app.requests == requests and usage.hedges == requests - 3 and usage.llm_calls == 3


async def test_p95_is_learned_before_any_hedge(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """LLM_HEDGE=p95: no hedge before 20 answers (a slow 5th call waits for its request), then a
    slow call is hedged after the endpoint's learned p95 (about the fast calls' 10 ms)."""
    url, app = provider
    model, _ = model_on(url, 4, llm_hedge="p95")
    async with model:
        for index in range(20):
            steps = ((0.3, 200), (0.01, 200)) if index == 4 else ((0.01, 200),)
            await model.generate(plan(*steps, tag=index))
        assert not event_log.named("hedge_sent") and app.requests == 20
        started = time.monotonic()
        await model.generate(plan(*SLOW_THEN_FAST, tag="late"))
        elapsed = time.monotonic() - started
    [sent] = event_log.named("hedge_sent")
    assert 0.005 < sent["after_s"] < 0.3 and elapsed < 1.0 and app.requests == 22


async def test_cancelling_the_call_cancels_both_requests(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """A hedged call cancelled while both requests are out: both go (the provider sees two
    disconnections), both slots are released before the cancellation completes."""
    url, app = provider
    model, controller = model_on(url, 4, llm_hedge=0.05)
    async with model:
        with anyio.move_on_after(0.3):
            await model.generate(plan((5.0, 200)))
        assert controller.statistics().active == 0
        await settle(app)
    assert (app.requests, app.disconnected, app.in_flight) == (2, 2, 0)
    assert len(event_log.named("hedge_sent")) == 1 and not event_log.named("hedge_won")
    assert len(event_log.named("released")) == 2


async def test_an_sdk_request_through_interop_is_hedged(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """The OpenAI SDK on `asynceval.http_client()`: its request is hedged like a model's."""
    url, app = provider
    settings = Settings(llm_hedge=0.1, llm_hedge_budget=1.0, max_concurrent_llm_calls=4, **FAST)
    async with Runtime(settings):
        client = openai.AsyncOpenAI(
            base_url=url, api_key="k", max_retries=0, http_client=http_client()
        )
        with track_usage() as usage:
            started = time.monotonic()
            answer = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": plan(*SLOW_THEN_FAST)}]
            )
            elapsed = time.monotonic() - started
        await client.close()
        await settle(app)
    assert elapsed < 1.0 and answer.usage is not None and answer.usage.completion_tokens == 20
    assert (app.requests, app.disconnected, usage.hedges) == (2, 1, 1)
    assert [e["winner"] for e in event_log.named("hedge_won")] == ["hedge"]


@pytest.mark.parametrize(("hedge", "requests"), [(False, 1), (True, 2)])
async def test_a_call_may_refuse_hedging(
    provider: tuple[str, TailProvider], hedge: bool, requests: int
) -> None:
    """`Gateway.call(hedge=False)` (what a streamed request asks for): one request however slow;
    the same call allowing it is hedged."""
    url, app = provider
    settings = Settings(llm_hedge=0.05, llm_hedge_budget=1.0, **FAST)
    gateway = Route(Runtime(settings), f"{url}/chat/completions").gateway
    body = {"model": "m", "messages": [{"role": "user", "content": plan(*SLOW_THEN_FAST)}]}
    async with httpx.AsyncClient(timeout=10) as client:

        async def attempt(lease: Any) -> int:
            return (await client.post(f"{url}/chat/completions", json=body)).status_code

        with anyio.fail_after(8):
            assert await gateway.call(attempt, hedge=hedge) == 200
    await settle(app)
    assert app.requests == requests and app.disconnected == requests - 1


async def test_a_streamed_sdk_request_is_never_hedged(
    provider: tuple[str, TailProvider], event_log: EventLog
) -> None:
    """`stream=True` through `asynceval.http_client()`: one request however slow its first byte
    (a hedge of a stream could deliver two answers' chunks)."""
    url, app = provider
    settings = Settings(llm_hedge=0.05, llm_hedge_budget=1.0, max_concurrent_llm_calls=4, **FAST)
    async with Runtime(settings):
        client = openai.AsyncOpenAI(
            base_url=url, api_key="k", max_retries=0, http_client=http_client()
        )
        with anyio.fail_after(8):
            stream = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": plan((0.4, 200))}],
                stream=True,
            )
            async for _ in stream:  # this provider answers JSON: no event to read
                pass
        await client.close()
        await settle(app)
    assert app.requests == 1
    assert not event_log.named("hedge_sent")
