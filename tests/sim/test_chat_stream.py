"""Chat completions with `"stream": true` and with `n`, driven by the openai SDK in process."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from openai import RateLimitError

from ._sdk import WEATHER, raw, sdk, sim, user

CHAT = "/v1/chat/completions"


def frames(body: bytes) -> list[str]:
    """The `data:` payloads of an SSE body, in order."""
    events = [event for event in body.decode().split("\n\n") if event]
    assert all(event.startswith("data: ") for event in events)
    return [event.removeprefix("data: ") for event in events]


async def test_a_stream_is_sse_chunks_ending_in_done() -> None:
    async with raw(sim()) as c:
        response = await c.post(
            CHAT, json={"model": "m", "messages": user("Say hello to the world"), "stream": True}
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    *chunks, done = frames(response.content)
    assert done == "[DONE]"
    documents = [json.loads(chunk) for chunk in chunks]
    assert {d["object"] for d in documents} == {"chat.completion.chunk"}
    assert len({d["id"] for d in documents}) == 1
    assert documents[0]["choices"][0]["delta"]["role"] == "assistant"
    assert documents[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in d for d in documents)  # not asked for
    assert len(documents) >= 5  # role, several content pieces, finish


async def test_the_sdk_assembles_the_same_text_as_the_unstreamed_answer() -> None:
    app = sim()
    messages = user("Tell me about streams")
    async with sdk(app) as client:
        whole = await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        stream = await client.chat.completions.create(model="m", messages=messages, stream=True)  # type: ignore[arg-type]
        pieces = [chunk.choices[0].delta.content async for chunk in stream]
    text = "".join(piece for piece in pieces if piece)
    assert text == whole.choices[0].message.content
    assert len([piece for piece in pieces if piece]) > 1


async def test_include_usage_adds_a_last_chunk_with_usage_and_no_choices() -> None:
    app = sim()
    async with sdk(app) as client:
        stream = await client.chat.completions.create(
            model="m",
            messages=user("What is 6 * 7?"),  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    *body, last = chunks
    assert all(chunk.usage is None for chunk in body)
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert "".join(c.choices[0].delta.content or "" for c in body) == "42"
    assert app.stats()["tokens"] == {
        "prompt": last.usage.prompt_tokens,
        "completion": last.usage.completion_tokens,
    }


async def test_tool_calls_stream_as_index_id_name_then_argument_pieces() -> None:
    async with (
        sdk(sim()) as client,
        client.chat.completions.stream(
            model="m",
            messages=user("Weather in Oslo?"),  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
        ) as stream,
    ):
        deltas = [event.chunk.choices[0].delta async for event in stream if event.type == "chunk"]
        final = await stream.get_final_completion()
    headers = [call for d in deltas for call in d.tool_calls or () if call.id is not None]
    assert [(h.index, h.id, h.type, h.function.name) for h in headers] == [  # type: ignore[union-attr]
        (0, "call_0", "function", "get_weather")
    ]
    argument_pieces = [
        call.function.arguments
        for d in deltas
        for call in d.tool_calls or ()
        if call.id is None and call.function is not None
    ]
    assert len(argument_pieces) > 1
    (call,) = final.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == json.loads("".join(argument_pieces))  # type: ignore[arg-type]
    assert final.choices[0].finish_reason == "tool_calls"


async def test_n_gives_that_many_choices_streamed_or_not() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
    request: dict[str, Any] = {
        "model": "m",
        "messages": user("Rate it"),
        "n": 3,
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
    }
    async with sdk(sim()) as client:
        single = await client.chat.completions.create(**{**request, "n": 1})
        whole = await client.chat.completions.create(**request)
        stream = await client.chat.completions.create(**request, stream=True)
        streamed: dict[int, str] = {}
        async for chunk in stream:
            for choice in chunk.choices:
                streamed[choice.index] = streamed.get(choice.index, "") + (
                    choice.delta.content or ""
                )
    assert [choice.index for choice in whole.choices] == [0, 1, 2]
    texts = [choice.message.content for choice in whole.choices]
    assert len(set(texts)) == 3  # generated values differ between choices
    assert sorted(streamed) == [0, 1, 2]
    assert all(set(json.loads(text)) == {"x"} for text in [*texts, *streamed.values()])
    assert whole.usage is not None and single.usage is not None
    assert whole.usage.completion_tokens > single.usage.completion_tokens


@pytest.mark.parametrize("config", [{"fail_first": 1}, {"fault_rates": {429: 1.0}}])
async def test_faults_answer_an_error_status_instead_of_the_stream(config: dict[str, Any]) -> None:
    app = sim(**config)
    async with sdk(app) as client:
        with pytest.raises(RateLimitError):
            await client.chat.completions.create(model="m", messages=user("Hi"), stream=True)  # type: ignore[arg-type]
    assert app.stats()["statuses"] == {"429": 1}
    assert app.stats()["in_flight"] == 0


async def test_a_truncated_stream_stops_half_way_without_done() -> None:
    request = {"model": "m", "messages": user("Say something long"), "stream": True}
    async with raw(sim()) as c:
        whole = frames((await c.post(CHAT, json=request)).content)
    async with raw(app := sim(truncated_rate=1.0)) as c:
        cut = frames((await c.post(CHAT, json=request)).content)
    assert cut == whole[: len(whole) // 2]
    assert app.stats()["tokens"] == {"prompt": 0, "completion": 0}  # never fully delivered


async def test_latency_comes_before_the_stream() -> None:
    app = sim(latency=0.1, latency_distribution="fixed")
    async with raw(app) as c:
        started = time.monotonic()
        response = await c.post(CHAT, json={"messages": user("Hi"), "stream": True})
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.1
