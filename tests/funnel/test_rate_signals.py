"""What a provider says beside its answers, as the funnel acts on it: announced rate limits pace
a run that set none, a 429 whose headers say the budget is spent pauses the endpoint even beside
calls in flight (and keeps its limit), and an overload cuts the limit once per round trip.

The provider here is the test's own, over real HTTP: it keeps a requests budget as OpenAI
announces it (`x-ratelimit-*`), refuses with 429 once it is spent, and logs every arrival, so
the counts and times asserted are the provider's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from asynceval import AnthropicChatModel, LLMCallFailed, OpenAIChatModel, Runtime, Settings
from asynceval.errors import RateLimited
from asynceval.funnel._replies import provider_error
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog

FAST_RETRY: dict[str, Any] = {"retry_initial_delay": 0.05, "retry_max_delay": 2.0}

_COMPLETION = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()
_REFUSAL = json.dumps({"error": {"message": "Rate limit reached", "type": "requests"}}).encode()


class BudgetProvider:
    """An OpenAI-compatible ASGI provider with a requests budget of `limit` per minute, of which
    `left` remain until `first_reset` seconds from its creation (then `limit` per minute).

    Every answer announces it: `x-ratelimit-limit-requests`, `-remaining-requests`,
    `-reset-requests`; a request over budget gets 429 with remaining 0 and `retry-after-ms`.
    `refuse` lists arrival numbers (1-based) answered 429 with remaining 0 whatever the budget
    (`retry-after-ms: refuse_ms`). `arrivals` is (time.monotonic(), status) per request."""

    def __init__(
        self,
        *,
        limit: int = 120,
        left: int = 40,
        first_reset: float = 1.0,
        latency: float = 0.02,
        announce: bool = True,
        refuse: frozenset[int] = frozenset(),
        refuse_ms: int = 800,
    ) -> None:
        self.limit, self.left, self.latency, self.announce = limit, left, latency, announce
        self.reset_at = time.monotonic() + first_reset
        self.refuse, self.refuse_ms = refuse, refuse_ms
        self.arrivals: list[tuple[float, int]] = []
        self.in_flight = 0

    def _budget(self, now: float) -> list[tuple[bytes, bytes]]:
        if now >= self.reset_at:
            self.left, self.reset_at = self.limit, now + 60.0
        if not self.announce:
            return []
        return [
            (b"x-ratelimit-limit-requests", b"%d" % self.limit),
            (b"x-ratelimit-remaining-requests", b"%d" % self.left),
            (b"x-ratelimit-reset-requests", f"{self.reset_at - now:.3f}s".encode()),
        ]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        now = time.monotonic()
        number = len(self.arrivals) + 1
        headers = self._budget(now)
        if number in self.refuse or self.left == 0:
            status, wait_ms = 429, self.refuse_ms
            if number not in self.refuse:
                wait_ms = max(1, round((self.reset_at - now) * 1000))
            said = {b"x-ratelimit-remaining-requests": b"0"}
            if number in self.refuse:  # the budget is spent for `refuse_ms`, says the provider
                said[b"x-ratelimit-reset-requests"] = b"%dms" % wait_ms
            headers = [(k, said.get(k, v)) for k, v in headers]
            headers.append((b"retry-after-ms", b"%d" % wait_ms))
            body = _REFUSAL
        else:
            self.left -= 1
            status, body = 200, _COMPLETION
            headers = self._budget(now)  # what is left after this one
        self.arrivals.append((now, status))
        if status == 200:
            self.in_flight += 1
            try:
                await anyio.sleep(self.latency)
            finally:
                self.in_flight -= 1
        start = [(b"content-type", b"application/json"), *headers]
        await send({"type": "http.response.start", "status": status, "headers": start})
        await send({"type": "http.response.body", "body": body})

    def count(self, status: int) -> int:
        return sum(1 for _, s in self.arrivals if s == status)


async def until(condition: Callable[[], bool]) -> None:
    """Poll a provider serving in another thread (no event of this loop can tell us)."""
    while not condition():  # noqa: ASYNC110
        await anyio.sleep(0.005)


def turned_away(event_log: EventLog) -> list[dict[str, Any]]:
    """The `retry` events of attempts an overloaded provider turned away (sent again)."""
    return [r for r in event_log.named("retry") if "front of the line" in r["error"]]


async def _one_call_each(
    model: OpenAIChatModel | AnthropicChatModel, n: int
) -> list[LLMCallFailed]:
    failures: list[LLMCallFailed] = []

    async def one(index: int) -> None:
        try:
            await model.generate(f"question {index}")
        except LLMCallFailed as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        for index in range(n):
            tg.start_soon(one, index)
    return failures


async def test_announced_limits_pace_a_run_that_set_none(
    asgi_server: Callable[[Any], int], event_log: EventLog
) -> None:
    """120 RPM announced with 40 left until the reset, no LLM_REQUESTS_PER_MINUTE, 60 tasks of
    one call at limit 20: at most a handful of 429s and no task failed (before: 74 429s and 12
    tasks failed), and the learned limit is said once."""
    provider = BudgetProvider(limit=120, left=40, first_reset=1.0)
    base_url = f"http://127.0.0.1:{asgi_server(provider)}/v1"
    settings = Settings(max_concurrent_llm_calls=20, **FAST_RETRY)
    async with Runtime(settings), OpenAIChatModel("m", base_url=base_url, api_key="k") as model:
        with anyio.fail_after(15):
            failures = await _one_call_each(model, 60)
    assert failures == []
    assert provider.count(200) == 60
    assert provider.count(429) <= 3, provider.count(429)
    (learned,) = event_log.named("rate_learned")
    assert learned["requests_per_minute"] == 120 and learned["dialect"] == "openai"
    assert any(e["reason"] == "announced" for e in event_log.named("endpoint_paused"))


async def test_the_simulated_provider_paces_a_run_through_anthropic_headers(
    event_log: EventLog,
) -> None:
    """The in-process simulator at 20 requests per 1 s window, announced in Anthropic's
    headers: 60 calls at limit 20 with no RPM setting draw at most a handful of 429s."""
    sim = SimConfig(latency=0.01, rpm=20, rate_window=1.0)
    settings = Settings(max_concurrent_llm_calls=20, **FAST_RETRY)
    async with Runtime(settings), AnthropicChatModel(sim_config=sim) as model:
        with anyio.fail_after(15):
            failures = await _one_call_each(model, 60)
        stats = model.sim.stats()  # type: ignore[union-attr]
    assert failures == [] and stats["statuses"]["200"] == 60
    assert stats["statuses"].get("429", 0) <= 3, stats["statuses"]
    (learned,) = event_log.named("rate_learned")
    assert learned["requests_per_minute"] == 1200 and learned["dialect"] == "anthropic"


async def test_a_setting_wins_over_an_announced_limit(
    asgi_server: Callable[[Any], int], event_log: EventLog
) -> None:
    """With LLM_REQUESTS_PER_MINUTE set, the announced requests limit is not learned."""
    provider = BudgetProvider(limit=120, left=120, first_reset=60.0)
    base_url = f"http://127.0.0.1:{asgi_server(provider)}/v1"
    settings = Settings(max_concurrent_llm_calls=5, llm_requests_per_minute=1000, **FAST_RETRY)
    async with (
        Runtime(settings) as runtime,
        OpenAIChatModel("m", base_url=base_url, api_key="k") as model,
    ):
        assert await _one_call_each(model, 5) == []
        rates = runtime.provider_rates(f"http://127.0.0.1:{base_url.split(':')[2]}")
    assert rates.requests_per_minute is None and rates.active
    assert not event_log.named("rate_learned")


async def test_a_spent_budget_429_beside_calls_in_flight_pauses_and_keeps_the_limit(
    asgi_server: Callable[[Any], int], event_log: EventLog
) -> None:
    """Ten calls in flight, then a 429 saying `x-ratelimit-remaining-requests: 0` with
    `retry-after-ms: 800`: no request reaches the provider for 0.8 s after it (before: the
    limit was cut to 10 and new calls went on), and the endpoint's limit is not cut."""
    provider = BudgetProvider(
        limit=10_000, left=10_000, first_reset=60.0, latency=0.5, refuse=frozenset({11})
    )
    base_url = f"http://127.0.0.1:{asgi_server(provider)}/v1"
    settings = Settings(max_concurrent_llm_calls=20, **FAST_RETRY)
    async with (
        Runtime(settings) as runtime,
        OpenAIChatModel("m", base_url=base_url, api_key="k") as model,
    ):
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_one_call_each, model, 10)
                await until(lambda: provider.in_flight >= 10)
                tg.start_soon(_one_call_each, model, 1)  # the 11th arrival: refused
                await until(lambda: provider.count(429) >= 1)
                await anyio.sleep(0.05)  # the refusal has reached the funnel
                tg.start_soon(_one_call_each, model, 5)  # later calls: must wait the pause
        limit = runtime.limiter.endpoint_limit(f"http://127.0.0.1:{base_url.split(':')[2]}")
    refused_at = next(t for t, status in provider.arrivals if status == 429)
    later = [t - refused_at for t, _ in provider.arrivals if t > refused_at]
    assert len(later) == 6  # the refused call's retry and the 5 later calls
    assert min(later) >= 0.8, later
    assert limit == 20
    assert not [e for e in event_log.named("limit_changed") if e["reason"] == "429"]
    paused = event_log.named("endpoint_paused")
    assert paused and paused[0]["reason"] == "rate" and paused[0]["seconds"] == 0.8


async def test_an_overload_cuts_the_limit_once_per_round_trip(
    loopback: Callable[[SimConfig], tuple[str, SimProvider]], event_log: EventLog
) -> None:
    """A provider serving 5 at once refuses 15 of 20 calls sent together (429s with no rate
    headers, beside calls in flight: an overload): the limit drops once for that round, not
    once per 429 (before: a cut per 429, each to the calls still out)."""
    base_url, sim = loopback(SimConfig(latency=0.4, max_concurrency=5, retry_after=2.0))
    settings = Settings(max_concurrent_llm_calls=20, **FAST_RETRY)
    async with Runtime(settings), OpenAIChatModel("m", base_url=base_url, api_key="k") as model:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_one_call_each, model, 20)
                await until(lambda: len(turned_away(event_log)) >= 15)  # all 15 refusals
                tg.cancel_scope.cancel()
    assert sim.stats()["statuses"]["429"] == 15
    cuts = [e for e in event_log.named("limit_changed") if e["reason"] == "429"]
    assert len(cuts) == 1, [(c["previous"], c["limit"]) for c in cuts]
    assert cuts[0]["previous"] == 20 and cuts[0]["limit"] < 20


@pytest.mark.parametrize(
    ("headers", "empty", "retry_after"),
    [
        ({"x-ratelimit-remaining-requests": "0", "retry-after-ms": "1000"}, True, 1.0),
        # No Retry-After: the reset pauses the endpoint, the call has no sleep of its own.
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2.5s"}, True, None),
        (
            {
                "anthropic-ratelimit-requests-remaining": "49",
                "anthropic-ratelimit-input-tokens-remaining": "0",
                "retry-after": "3",
            },
            True,
            3.0,
        ),
        ({"x-ratelimit-remaining-requests": "7", "retry-after-ms": "500"}, False, 0.5),
        ({"retry-after": "1"}, False, 1.0),
    ],
)
def test_a_429_that_says_a_budget_is_spent_is_marked_a_rate_refusal(
    headers: dict[str, str], empty: bool, retry_after: float | None
) -> None:
    """Either dialect, any spent budget; the call's own wait is the provider's Retry-After."""
    error = provider_error(httpx.Response(429, headers=headers, content=_REFUSAL))
    assert isinstance(error, RateLimited)
    assert error.budget_empty is empty
    if retry_after is None:
        assert error.retry_after is None
    else:
        assert error.retry_after == pytest.approx(retry_after)
