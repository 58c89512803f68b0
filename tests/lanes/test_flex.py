"""The flex lane (DESIGN section 16): OpenAI's `service_tier: "flex"` on every chat completion, an
attempt deadline of 900 s unless LLM_CALL_TIMEOUT says otherwise, its "resource unavailable" 429
retried without pausing the endpoint or lowering its limit, and calls priced at the flex price."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from asynceval import AnthropicChatModel, OpenAIChatModel, Runtime, Settings
from asynceval.errors import ConfigError
from asynceval.funnel import Gateway
from asynceval.interop import http_client, openai_client
from asynceval.llm import track_usage

from ..conftest import EventLog

ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "flex-model",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100},
}
UNAVAILABLE = {
    "error": {
        "message": "Resource Unavailable: flex capacity is exhausted, try again later.",
        "type": "resource_unavailable",
        "code": "resource_unavailable",
    }
}
PRICES = {
    "flex-model": {
        "input_mtok": 2.0,
        "output_mtok": 8.0,
        "flex": {"input_mtok": 1.0, "output_mtok": 4.0},
        "batch": {"input_mtok": 1.0, "output_mtok": 4.0},
    }
}


class Provider:
    """A provider double: answers after `unavailable` flex 429s, and keeps each request body."""

    def __init__(self, unavailable: int = 0) -> None:
        self.unavailable = unavailable
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        if self.unavailable:
            self.unavailable -= 1
            return httpx.Response(429, json=UNAVAILABLE, headers={"retry-after-ms": "10"})
        return httpx.Response(200, json=ANSWER)


def _settings(tmp_path: Path, **values: Any) -> Settings:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    return Settings(
        llm_prices_file=str(prices), retry_initial_delay=0.01, retry_max_delay=0.05, **values
    )


async def test_a_flex_call_asks_for_flex_and_costs_the_flex_price(
    tmp_path: Path, event_log: EventLog
) -> None:
    provider = Provider()
    async with Runtime(_settings(tmp_path)) as runtime:
        model = OpenAIChatModel(
            "flex-model",
            base_url="http://provider.test/v1",
            runtime=runtime,
            transport=httpx.MockTransport(provider),
            lane="flex",
        )
        with track_usage() as usage:
            answer = await model.generate("What is 6 * 7?")
    assert answer.text == "42"
    assert provider.bodies[0]["service_tier"] == "flex"
    (released,) = event_log.named("released")
    assert released["cost_usd"] == pytest.approx((1000 * 1.0 + 100 * 4.0) / 1e6)  # half of live
    assert float(usage.cost or 0) == pytest.approx(0.0014)


async def test_a_live_call_asks_for_no_tier_and_costs_the_live_price(
    tmp_path: Path, event_log: EventLog
) -> None:
    provider = Provider()
    async with Runtime(_settings(tmp_path)) as runtime:
        model = OpenAIChatModel(
            "flex-model",
            base_url="http://provider.test/v1",
            runtime=runtime,
            transport=httpx.MockTransport(provider),
        )
        await model.generate("What is 6 * 7?")
    assert "service_tier" not in provider.bodies[0]
    (released,) = event_log.named("released")
    assert released["cost_usd"] == pytest.approx((1000 * 2.0 + 100 * 8.0) / 1e6)


async def test_resource_unavailable_is_retried_without_pausing_or_cutting_the_limit(
    tmp_path: Path, event_log: EventLog
) -> None:
    """Two flex 429s then an answer: two `retry` events, and no `endpoint_paused` nor
    `limit_changed` (the flex tier's capacity says nothing of how many calls we send)."""
    provider = Provider(unavailable=2)
    async with Runtime(_settings(tmp_path, llm_lane="flex")) as runtime:
        model = OpenAIChatModel(
            "flex-model",
            base_url="http://provider.test/v1",
            runtime=runtime,
            transport=httpx.MockTransport(provider),
        )
        answer = await model.generate("What is 6 * 7?")
        endpoint = "http://provider.test/v1"
        assert runtime.limiter.statistics().limit == runtime.settings.max_concurrent_llm_calls
        assert runtime.limiter.cooldown_remaining(endpoint) == 0
    assert answer.text == "42" and len(provider.bodies) == 3
    assert [r["status_code"] for r in event_log.named("retry")] == [429, 429]
    assert not event_log.named("endpoint_paused") and not event_log.named("limit_changed")
    costs = [e["cost_usd"] for e in event_log.named("released")]
    assert costs[:2] == [0, 0] and costs[2] > 0  # a refused request costs nothing


def test_a_flex_attempt_waits_900_s_unless_the_timeout_is_set(tmp_path: Path) -> None:
    flex = Runtime(_settings(tmp_path))
    assert Gateway.for_runtime(flex, "http://p/v1", lane="flex").call_timeout == 900.0
    assert Gateway.for_runtime(flex, "http://p/v1").call_timeout == 120.0
    own = Runtime(_settings(tmp_path, llm_call_timeout=30))
    assert Gateway.for_runtime(own, "http://p/v1", lane="flex").call_timeout == 30.0


def test_flex_is_openais_only(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no flex lane"):
        AnthropicChatModel("claude", lane="flex")
    with pytest.raises(ConfigError, match="lane must be"):
        OpenAIChatModel("m", lane="fast")  # type: ignore[arg-type]


async def test_an_sdk_call_in_the_flex_lane_asks_for_flex(tmp_path: Path) -> None:
    provider = Provider()
    async with Runtime(_settings(tmp_path, llm_lane="flex")) as runtime:
        client = openai_client(
            base_url="http://provider.test/v1",
            api_key="k",
            http_client=http_client(transport=httpx.MockTransport(provider), runtime=runtime),
            runtime=runtime,
        )
        async with client:
            await client.chat.completions.create(
                model="flex-model", messages=[{"role": "user", "content": "hi"}]
            )
            await client.chat.completions.create(
                model="flex-model",
                messages=[{"role": "user", "content": "hi"}],
                service_tier="default",  # the caller's own choice stays
            )
    assert [b["service_tier"] for b in provider.bodies] == ["flex", "default"]
