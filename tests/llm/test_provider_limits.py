"""Limits as the provider sees them: its own counters are the witness.

A provider cap below MAX_CONCURRENT_LLM_CALLS costs no call; LLM_REQUESTS_PER_MINUTE and
LLM_TOKENS_PER_MINUTE hold in every window, the first one included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx

from asynceval import LLMCallFailed, OpenAIChatModel, Runtime, Settings
from asynceval.limits import ConcurrencyController, RateLimiter
from asynceval.sim import SimConfig

from ..conftest import EventLog

FAST_RETRY: dict[str, Any] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.2}


async def generate_all(model: OpenAIChatModel, n: int, **params: Any) -> list[BaseException]:
    """n calls at once; the failures (there should be none)."""
    failures: list[BaseException] = []

    async def one(index: int) -> None:
        try:
            await model.generate(f"question {index}", **params)
        except LLMCallFailed as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        for index in range(n):
            tg.start_soon(one, index)
    return failures


async def test_a_provider_cap_below_the_limit_costs_no_call(event_log: EventLog) -> None:
    """Limit 40 against a provider serving 30 at once: every call succeeds within three
    attempts' budget, the provider never serves more than 30, and the endpoint's limit settles
    under 30 (before: a pause per 429 and calls failing after three 429s)."""
    sim = SimConfig(latency=0.05, max_concurrency=30, retry_after=0.05)
    model = OpenAIChatModel(
        settings=Settings(retry_max_attempts=3, **FAST_RETRY),
        controller=ConcurrencyController(40),
        sim_config=sim,
    )
    async with model:
        failures = await generate_all(model, 400)
        stats = model.sim.stats()  # type: ignore[union-attr]
    assert failures == []
    assert stats["statuses"]["200"] == 400  # (the provider refuses above 30 by itself)
    assert stats["statuses"].get("429", 0) > 0  # it did turn calls away
    changes = event_log.named("limit_changed")
    assert changes and all(1 <= c["limit"] <= 40 and c["cap"] == 40 for c in changes)
    assert changes[0]["reason"] == "429" and changes[0]["limit"] < 40
    assert min(c["limit"] for c in changes) <= 30  # it did come down to the provider's cap
    assert stats["statuses"]["429"] < 400  # turned away less than once per call
    assert not event_log.named("llm_call_failed")
    turned_away = [r for r in event_log.named("retry") if "front of the line" in r["error"]]
    assert turned_away and all(r["status_code"] == 429 for r in turned_away)


async def test_a_provider_refusing_everyone_still_fails_after_the_attempts() -> None:
    """A 429 with nothing else in flight is a rate or quota refusal: it counts, and the call
    fails after RETRY_MAX_ATTEMPTS (the overload rule does not make it retry forever)."""
    sim = SimConfig(latency=0, fault_rates={429: 1.0}, retry_after=0.01)
    model = OpenAIChatModel(
        settings=Settings(retry_max_attempts=3, **FAST_RETRY),
        controller=ConcurrencyController(4),
        sim_config=sim,
    )
    async with model:
        with anyio.fail_after(10):
            failures = await generate_all(model, 3)
        stats = model.sim.stats()  # type: ignore[union-attr]
    assert len(failures) == 3
    assert all(isinstance(f, LLMCallFailed) and f.status_code == 429 for f in failures)
    assert [f.attempts for f in failures] == [3, 3, 3]  # the policy's attempts, all used
    # each call: at least its 3 counted attempts, at most 10 sends turned away on top
    assert 3 * 3 <= stats["statuses"]["429"] <= 3 * (10 + 3)


async def test_requests_per_window_hold_at_the_provider_the_first_window_included() -> None:
    window = 0.5
    sim = SimConfig(latency=0.01, rate_window=window)
    model = OpenAIChatModel(
        controller=ConcurrencyController(20),
        rate_limiter=RateLimiter(requests_per_minute=15, window_s=window, margin_s=0.15),
        sim_config=sim,
    )
    async with model:
        failures = await generate_all(model, 50)
        stats = model.sim.stats()  # type: ignore[union-attr]
    assert failures == []
    assert stats["requests"] == 50
    assert stats["window_max_requests"] == 15  # a full window at once, never more


async def test_tokens_per_window_hold_at_the_provider() -> None:
    window = 0.4
    sim = SimConfig(latency=0, rate_window=window)
    model = OpenAIChatModel(
        controller=ConcurrencyController(20),
        rate_limiter=RateLimiter(tokens_per_minute=100, window_s=window, margin_s=0.15),
        sim_config=sim,
    )
    async with model:
        failures = await generate_all(model, 30, max_tokens=15)
        stats = model.sim.stats()  # type: ignore[union-attr]
    assert failures == []
    total = stats["tokens"]["prompt"] + stats["tokens"]["completion"]
    assert total > 2 * 100  # more than two windows' worth went through
    assert 0 < stats["window_max_tokens"] <= 100


async def test_requests_per_minute_from_settings_hold_in_the_first_second_over_loopback(
    sim_server: Callable[..., str],
) -> None:
    """LLM_REQUESTS_PER_MINUTE=60 and 61 calls: the provider sees 60 (a bucket that starts
    full let the 61st through within a second)."""
    base_url = sim_server("--latency", "0")
    settings = Settings(llm_requests_per_minute=60, max_concurrent_llm_calls=50)
    async with (
        Runtime(settings),
        OpenAIChatModel("asynceval-sim", base_url=base_url, api_key="k") as model,
    ):
        with anyio.move_on_after(1.5):
            await generate_all(model, 61)
        async with httpx.AsyncClient() as client:
            stats = (await client.get(base_url.removesuffix("/v1") + "/stats")).json()
    assert stats["requests"] == 60


async def test_a_429_while_the_others_only_wait_for_their_rate_turn_is_not_overload(
    event_log: EventLog,
) -> None:
    """Slot holders waiting for the rate window have sent nothing: a 429 on the one request
    out is a rate refusal (pause, counted attempt), not overload (no limit change)."""
    sim = SimConfig(latency=0, fault_rates={429: 1.0}, retry_after=0.05)
    model = OpenAIChatModel(
        settings=Settings(retry_max_attempts=2, **FAST_RETRY),
        controller=ConcurrencyController(4),
        rate_limiter=RateLimiter(requests_per_minute=1, window_s=0.2, margin_s=0.0),
        sim_config=sim,
    )
    async with model:
        failures = await generate_all(model, 3)
        stats = model.sim.stats()  # type: ignore[union-attr]
    assert len(failures) == 3 and stats["max_in_flight"] == 1
    assert stats["statuses"]["429"] == 6  # two counted attempts each, nothing turned away
    assert not event_log.named("limit_changed")
