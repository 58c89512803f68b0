"""How the simulated model serves tool-using agents that follow smolagents' conventions."""

from __future__ import annotations

from typing import Any

import httpx

from asynceval.sim import SimConfig, SimProvider

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
FINAL = {
    "type": "function",
    "function": {
        "name": "final_answer",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}},
    },
}


async def ask(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=SimProvider(SimConfig(latency=0)))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
        response = await client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": messages, "tools": tools, "tool_choice": "required"},
        )
    message: dict[str, Any] = response.json()["choices"][0]["message"]
    return message


async def test_final_answer_is_left_for_last_while_other_tools_have_not_run() -> None:
    message = await ask([{"role": "user", "content": "Weather in Oslo?"}], [TOOL, FINAL])
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]


async def test_an_observation_message_counts_as_the_tool_result_and_final_answer_follows() -> None:
    messages = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "Calling tools: get_weather(Oslo)"},
        {"role": "user", "content": "Observation: Snow, -4 C"},
    ]
    message = await ask(messages, [TOOL, FINAL])
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "final_answer"
    assert "Observation: Snow, -4 C" in call["function"]["arguments"]  # the answer carries it


async def test_final_answer_alone_is_called_at_once_and_answers_arithmetic() -> None:
    message = await ask([{"role": "user", "content": "What is 6 * 7?"}], [FINAL])
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "final_answer"
    assert '"answer": "42"' in call["function"]["arguments"]
