"""Over real loopback HTTP against `asynceval sim serve`: the limit holds as the provider sees it,
and the real OpenAI SDK speaks to the simulated provider (so it speaks the real protocol)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import openai
import pytest

from asynceval import OpenAIChatModel, Settings
from asynceval.limits import ConcurrencyController

from ..conftest import EventLog


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_200_calls_at_limit_5_never_exceed_5_in_flight(
    sim_server: Callable[..., str], event_log: EventLog, transport: Any
) -> None:
    base_url = sim_server("--latency", "0.02", "--jitter", "0.01")
    controller = ConcurrencyController(5)
    model = OpenAIChatModel(
        "sim", base_url=base_url, api_key="sk-loopback-secret-000", controller=controller,
        settings=Settings(), transport=transport,
    )  # fmt: skip
    async with model, anyio.create_task_group() as tg:
        for index in range(200):
            tg.start_soon(model.generate, f"What is {index} + 1?")
    async with httpx.AsyncClient() as client:
        stats = (await client.get(base_url.removesuffix("/v1") + "/stats")).json()
    assert stats["requests"] == 200 and stats["statuses"] == {"200": 200}
    assert stats["max_in_flight"] == 5  # the provider's own count (SC-002 from the outside)
    assert event_log.max_in_flight() == 5  # replaying acquired/released (SC-002 from the log)
    assert len(event_log.named("queueing")) == 200
    assert "sk-loopback-secret-000" not in event_log.stream.getvalue()


async def test_openai_sdk_chat_json_schema_and_tool_call(sim_server: Callable[..., str]) -> None:
    base_url = sim_server("--latency", "0")
    async with openai.AsyncOpenAI(base_url=base_url, api_key="sk-unused") as client:
        chat = await client.chat.completions.create(
            model="sim", messages=[{"role": "user", "content": "What is 12 * 12?"}]
        )
        assert chat.choices[0].message.content == "144"
        assert chat.usage is not None and chat.usage.total_tokens > 0

        schema = {
            "type": "object",
            "properties": {
                "criterion_id": {"type": "string", "enum": ["accuracy"]},
                "score": {"type": "number"},
                "argument": {"type": "string"},
            },
            "required": ["criterion_id", "score", "argument"],
            "additionalProperties": False,
        }
        structured = await client.chat.completions.create(
            model="sim",
            messages=[{"role": "user", "content": "Judge accuracy."}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "judicial_opinion", "schema": schema, "strict": True},
            },
        )
        opinion = json.loads(structured.choices[0].message.content or "")
        assert opinion["criterion_id"] == "accuracy" and isinstance(opinion["score"], int | float)

        tools: Any = [
            {
                "type": "function",
                "function": {
                    "name": "search",
                    "parameters": {
                        "type": "object",
                        "properties": {"q": {"type": "string"}},
                        "required": ["q"],
                    },
                },
            }
        ]
        called = await client.chat.completions.create(
            model="sim", messages=[{"role": "user", "content": "Find asynceval."}], tools=tools
        )
        (call,) = called.choices[0].message.tool_calls or []
        assert called.choices[0].finish_reason == "tool_calls"
        assert call.function.name == "search" and "q" in json.loads(call.function.arguments)
