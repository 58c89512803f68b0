"""AnthropicChatModel over the simulated provider's /v1/messages route."""

from __future__ import annotations

import pytest

from asynceval import AnthropicChatModel, LLMCallFailed, Settings
from asynceval.limits import ConcurrencyController
from asynceval.llm.anthropic import to_anthropic_messages
from asynceval.sim import SimConfig

from ..conftest import EventLog

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def model_for(sim: SimConfig) -> AnthropicChatModel:
    return AnthropicChatModel(
        settings=Settings(retry_initial_delay=0.01, retry_max_delay=0.05),
        controller=ConcurrencyController(3),
        sim_config=sim,
        api_key="sk-ant-test-key-0123456789",
    )


def test_openai_style_messages_become_messages_api_shape() -> None:
    system, messages = to_anthropic_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "t1", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
                    {"id": "t2", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "cold"},
            {"role": "tool", "tool_call_id": "t2", "content": "warm"},
        ]
    )
    assert system == "Be brief."
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["input"]["city"] for b in messages[1]["content"]] == ["Oslo", "Rome"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["t1", "t2"]


async def test_chat_with_system_prompt_and_usage(event_log: EventLog) -> None:
    async with model_for(SimConfig(latency=0)) as model:
        completion = await model.generate(
            [
                {"role": "system", "content": "Answer with a number."},
                {"role": "user", "content": "What is 6 * 7?"},
            ],
            agent="solver",
        )
    assert completion.text == "42" and completion.finish_reason == "end_turn"
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert [e["agent"] for e in event_log.named("acquired")] == ["solver"]


async def test_tool_use_round_trip() -> None:
    async with model_for(SimConfig(latency=0)) as model:
        first = await model.generate("Weather in Oslo?", tools=TOOLS)
        (call,) = first.tool_calls
        assert call.name == "weather" and "city" in call.arguments
        second = await model.generate(
            [
                {"role": "user", "content": "Weather in Oslo?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "function": {"name": call.name, "arguments": call.raw_arguments},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call.id, "content": "minus four degrees"},
            ],
            tools=TOOLS,
        )
    assert second.tool_calls == () and "minus four degrees" in second.text


async def test_json_schema_is_served_through_a_forced_tool() -> None:
    schema = {
        "type": "object",
        "properties": {
            "score": {"type": "number", "minimum": 1, "maximum": 5},
            "why": {"type": "string"},
        },
        "required": ["score", "why"],
    }
    async with model_for(SimConfig(latency=0)) as model:
        completion = await model.generate(
            "Rate it.",
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "rating", "schema": schema},
            },
        )
    data = completion.json()
    assert 1 <= data["score"] <= 5 and isinstance(data["why"], str)
    assert completion.tool_calls == ()


async def test_overloaded_is_retried_and_a_bad_request_is_not() -> None:
    async with model_for(SimConfig(latency=0, fault_rates={529: 1.0}, retry_after=0)) as model:
        with pytest.raises(LLMCallFailed) as overloaded:
            await model.generate("hi")
    async with model_for(SimConfig(latency=0, fault_rates={400: 1.0})) as model:
        with pytest.raises(LLMCallFailed) as bad:
            await model.generate("hi")
    assert overloaded.value.attempts == 3 and overloaded.value.status_code == 529
    assert bad.value.attempts == 1 and bad.value.status_code == 400


@pytest.mark.parametrize(
    "params",
    [
        {"max_completion_tokens": 77},
        {"max_tokens": 77, "max_completion_tokens": 99},
        {"max_tokens": 77},
    ],
)
async def test_max_completion_tokens_becomes_max_tokens_and_is_never_sent_too(
    params: dict[str, int],
) -> None:
    """The Messages API knows only max_tokens: OpenAI's newer name maps onto it, never both."""
    import json

    import httpx

    sent: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(
            200,
            json={
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )

    model = AnthropicChatModel(
        "claude", base_url="http://anthropic.test/v1", transport=httpx.MockTransport(handler)
    )
    async with model:
        assert (await model.generate("hi", **params)).text == "ok"
    (body,) = sent
    assert body["max_tokens"] == 77 and "max_completion_tokens" not in body
