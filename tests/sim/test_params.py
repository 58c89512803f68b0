"""Parameters: what frameworks send by default is accepted, what cannot be honoured is a 400
naming the parameter; and `GET /v1/models`."""

from __future__ import annotations

from typing import Any

import pytest
from openai import BadRequestError

from ._sdk import RESPONSES_WEATHER, WEATHER, raw, sdk, sim, user

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"

CHAT_DEFAULTS: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": user("What is 2 + 2?"),
    "stream": False,
    "stream_options": {"include_usage": True},
    "tools": [WEATHER],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "stop": ["Observation:"],
    "temperature": 0.7,
    "top_p": 1.0,
    "seed": 7,
    "user": "u",
    "max_tokens": 100,
    "max_completion_tokens": 100,
    "frequency_penalty": 0,
    "presence_penalty": 0,
    "logprobs": False,
    "logit_bias": {},
    "store": False,
    "metadata": {"k": "v"},
    "reasoning_effort": "low",
    "service_tier": "auto",
    "prompt_cache_key": "p",
    "response_format": {"type": "text"},
    "some_vendor_extra": 1,  # unknown names are ignored, as vLLM and others do
}
"""Every chat parameter the OpenAI SDK and the frameworks on it were seen sending, and more."""

RESPONSES_DEFAULTS: dict[str, Any] = {
    "model": "gpt-5",
    "input": [{"role": "user", "content": "What is 2 + 2?"}],
    "instructions": "Be brief.",
    "include": ["reasoning.encrypted_content"],
    "reasoning": {"effort": "none"},
    "text": {"verbosity": "low"},
    "tools": [RESPONSES_WEATHER],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "store": True,
    "truncation": "disabled",
    "metadata": {"k": "v"},
    "user": "u",
    "safety_identifier": "s",
    "temperature": 0.7,
    "top_p": 1.0,
    "max_output_tokens": 100,
    "previous_response_id": None,
    "service_tier": "auto",
    "prompt_cache_key": "p",
    "stream": False,
}
"""Every Responses parameter openai-agents, pydantic-ai and langchain-openai were seen sending."""


async def test_what_frameworks_send_by_default_is_accepted() -> None:
    async with raw(sim()) as c:
        chat = await c.post(CHAT, json=CHAT_DEFAULTS)
        responses = await c.post(RESPONSES, json=RESPONSES_DEFAULTS)
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["content"] == "4"
    assert responses.status_code == 200, responses.text
    body = responses.json()
    assert body["output"][0]["content"][0]["text"] == "4"
    assert (body["temperature"], body["max_output_tokens"], body["metadata"]) == (
        0.7,
        100,
        {"k": "v"},
    )


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"n": 9}, "n"),
        ({"n": 0}, "n"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "tools[0].type"),
        ({"tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"web_search_options": {}}, "web_search_options"),
    ],
)
async def test_chat_parameters_it_cannot_honour_are_a_400_naming_them(
    extra: dict[str, Any], param: str
) -> None:
    app = sim()
    async with sdk(app) as client:
        with pytest.raises(BadRequestError) as caught:
            await client.chat.completions.create(model="m", messages=user("Hi"), **extra)  # type: ignore[arg-type]
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == param
    assert error["code"] == "unsupported_parameter"
    assert f"'{param}'" in error["message"]
    assert app.stats()["statuses"] == {"400": 1}
    assert app.stats()["in_flight"] == 0


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"background": True}, "background"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"include": ["message.output_text.logprobs"]}, "include"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"tool_choice": {"type": "file_search"}}, "tool_choice"),
        ({"text": {"format": {"type": "xml"}}}, "text.format.type"),
        ({"text": {"format": {"type": "json_schema", "name": "s"}}}, "text.format.schema"),
        ({"input": []}, "input"),
        ({"input": 3}, "input"),
    ],
)
async def test_responses_parameters_it_cannot_honour_are_a_400_naming_them(
    extra: dict[str, Any], param: str
) -> None:
    async with raw(sim()) as c:
        response = await c.post(RESPONSES, json={"model": "m", "input": "Hi", **extra})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert param.split("[")[0].split(".")[0] in error["message"]


async def test_a_missing_input_is_a_400() -> None:
    async with raw(sim()) as c:
        response = await c.post(RESPONSES, json={"model": "m"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "input"


async def test_models_lists_the_sim_and_any_model_can_be_retrieved() -> None:
    app = sim()
    async with sdk(app) as client:
        listed = [model.id async for model in client.models.list()]
        retrieved = await client.models.retrieve("gpt-4o-mini")
    assert listed == ["asynceval-sim"]
    assert (retrieved.id, retrieved.object) == ("gpt-4o-mini", "model")
    assert app.stats()["requests"] == 0  # metadata, not a completion
    async with raw(app) as c:
        assert (await c.post("/v1/models")).status_code == 405
        assert (await c.get("/v1/models/")).status_code == 200  # a trailing slash is the list
        assert (await c.get("/v1/responses")).status_code == 405
