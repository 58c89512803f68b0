"""serve() on a real socket, driven by the official openai SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated

import httpx
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

from ..conftest import start_sim_server, stop_sim_server
from .test_schema import Criterion


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """`asynceval sim serve` in a subprocess (uvicorn on loopback); its OpenAI base URL."""
    url, process = start_sim_server("--latency", "0")
    try:
        yield url
    finally:
        stop_sim_server(process)


class Opinion(BaseModel):
    criterion_id: Criterion
    score: Annotated[float, Field(ge=0, le=10)]
    argument: str


class Verdict(BaseModel):
    opinions: list[Opinion]
    summary: str


async def test_openai_sdk_chat_gets_the_arithmetic_answer(base_url: str) -> None:
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        completion = await client.chat.completions.create(
            model="sim", messages=[{"role": "user", "content": "What is 12 * 7?"}]
        )
    assert completion.choices[0].message.content == "84"
    assert completion.usage is not None
    assert completion.usage.total_tokens >= 2


async def test_openai_sdk_parse_validates_a_json_schema_answer(base_url: str) -> None:
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        completion = await client.chat.completions.parse(
            model="sim",
            messages=[{"role": "user", "content": "Judge the answer"}],
            response_format=Verdict,
        )
    verdict = completion.choices[0].message.parsed
    assert isinstance(verdict, Verdict)
    assert [o.criterion_id for o in verdict.opinions] == list(Criterion)


async def test_openai_sdk_tool_call_then_final_answer(base_url: str) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
    messages: list[dict[str, object]] = [{"role": "user", "content": "Find the capital"}]
    async with AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        first = await client.chat.completions.create(
            model="sim",
            messages=messages,  # type: ignore[arg-type]
            tools=[tool],  # type: ignore[list-item]
        )
        message = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls"
        assert message.tool_calls is not None
        (call,) = message.tool_calls
        assert call.function.name == "search"  # type: ignore[union-attr]
        assert isinstance(json.loads(call.function.arguments)["query"], str)  # type: ignore[union-attr]
        messages += [
            message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "Paris"},
        ]
        final = await client.chat.completions.create(
            model="sim",
            messages=messages,  # type: ignore[arg-type]
            tools=[tool],  # type: ignore[list-item]
        )
    assert final.choices[0].finish_reason == "stop"
    assert "Paris" in (final.choices[0].message.content or "")


def test_stats_endpoint_answers_on_the_real_server(base_url: str) -> None:
    stats = httpx.get(base_url.removesuffix("/v1") + "/stats").json()
    assert set(stats) == {
        "requests",
        "statuses",
        "in_flight",
        "max_in_flight",
        "tokens",
        "window_max_requests",
        "window_max_tokens",
        "batches",
    }
