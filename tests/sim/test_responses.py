"""The Responses API (`POST /v1/responses`), streamed and not, driven by the openai SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import RateLimitError
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from pydantic import BaseModel

from ._sdk import RESPONSES_WEATHER, raw, sdk, sim

RESPONSES = "/v1/responses"


class City(BaseModel):
    name: str
    population: int


async def test_a_text_answer_is_a_completed_response_with_one_message() -> None:
    app = sim()
    async with sdk(app) as client:
        response = await client.responses.create(
            model="sim-1", input="What is 2 + 3?", instructions="Be brief."
        )
    assert response.id.startswith("resp_")
    assert (response.object, response.status, response.model) == ("response", "completed", "sim-1")
    assert response.instructions == "Be brief."
    (message,) = response.output
    assert isinstance(message, ResponseOutputMessage)
    assert (message.role, message.status, message.content[0].type) == (
        "assistant",
        "completed",
        "output_text",
    )
    assert response.output_text == "5"
    usage = response.usage
    assert usage is not None
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    stats = app.stats()
    assert (stats["requests"], stats["statuses"], stats["in_flight"]) == (1, {"200": 1}, 0)
    assert stats["tokens"] == {"prompt": usage.input_tokens, "completion": usage.output_tokens}


async def test_function_call_round_trip_ends_in_a_text_answer_using_the_output() -> None:
    items: list[Any] = [{"role": "user", "content": [{"type": "input_text", "text": "Oslo?"}]}]
    async with sdk(sim()) as client:
        first = await client.responses.create(model="m", input=items, tools=[RESPONSES_WEATHER])  # type: ignore[list-item]
        (call,) = first.output
        assert isinstance(call, ResponseFunctionToolCall)
        assert (call.name, call.call_id, call.status) == ("get_weather", "call_0", "completed")
        assert isinstance(json.loads(call.arguments)["city"], str)
        items += [
            call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "Snow, -4 C"},
        ]
        final = await client.responses.create(model="m", input=items, tools=[RESPONSES_WEATHER])  # type: ignore[list-item]
        again = await client.responses.create(
            model="m",
            input=[*items, *final.output, {"role": "user", "content": "And Bergen?"}],  # type: ignore[list-item]
            tools=[RESPONSES_WEATHER],  # type: ignore[list-item]
        )
    assert "Snow, -4 C" in final.output_text
    (new_call,) = again.output
    assert isinstance(new_call, ResponseFunctionToolCall)
    assert new_call.call_id == "call_1"  # ids do not repeat earlier calls


async def test_tool_choice_none_and_required_are_honoured() -> None:
    async with sdk(sim()) as client:
        none = await client.responses.create(
            model="m",
            input="Weather?",
            tools=[RESPONSES_WEATHER],
            tool_choice="none",  # type: ignore[list-item]
        )
        required = await client.responses.create(
            model="m",
            input="What is 1 + 1?",
            tools=[RESPONSES_WEATHER],
            tool_choice="required",  # type: ignore[list-item]
        )
    assert none.output[0].type == "message"
    assert required.output[0].type == "function_call"


async def test_json_schema_text_format_is_parsed_by_the_sdk() -> None:
    async with sdk(sim()) as client:
        response = await client.responses.parse(model="m", input="Name a city", text_format=City)
    assert isinstance(response.output_parsed, City)


async def test_streamed_text_is_the_event_sequence_the_sdk_expects() -> None:
    async with sdk(sim()) as client:
        stream = await client.responses.create(
            model="m", input="Describe the stream in a sentence", stream=True
        )
        events = [event async for event in stream]
        whole = await client.responses.create(model="m", input="Describe the stream in a sentence")
    kinds = [event.type for event in events]
    deltas = kinds.count("response.output_text.delta")
    assert deltas > 1
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * deltas,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == text
    assert completed.response.usage is not None
    assert events[0].response.status == "in_progress"  # type: ignore[union-attr]


async def test_streamed_function_call_and_schema_through_the_sdk_helper() -> None:
    async with sdk(sim()) as client:
        async with client.responses.stream(
            model="m",
            input="Weather in Oslo?",
            tools=[RESPONSES_WEATHER],  # type: ignore[list-item]
        ) as stream:
            kinds = [event.type async for event in stream]
            response = await stream.get_final_response()
        async with client.responses.stream(model="m", input="A city", text_format=City) as stream:
            parsed = (await stream.get_final_response()).output_parsed
    assert kinds.count("response.function_call_arguments.delta") > 1
    assert "response.function_call_arguments.done" in kinds
    (call,) = response.output
    assert isinstance(call, ResponseFunctionToolCall)
    assert isinstance(json.loads(call.arguments)["city"], str)
    assert isinstance(parsed, City)


async def test_stream_events_are_named_sse_events() -> None:
    async with raw(sim()) as c:
        response = await c.post(RESPONSES, json={"model": "m", "input": "Hi", "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    blocks = [block for block in response.text.split("\n\n") if block]
    for block in blocks:
        event, data = block.split("\n")
        assert event.startswith("event: ")
        assert json.loads(data.removeprefix("data: "))["type"] == event.removeprefix("event: ")
    assert "[DONE]" not in response.text


async def test_other_input_items_are_skipped_and_system_messages_are_not_the_question() -> None:
    items = [
        {"type": "message", "role": "developer", "content": "Be terse."},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "user", "content": "What is 3 * 3?"},
    ]
    async with raw(sim()) as c:
        body = (await c.post(RESPONSES, json={"model": "m", "input": items})).json()
    assert body["output"][0]["content"][0]["text"] == "9"


async def test_responses_requests_count_and_meet_faults_like_completions() -> None:
    app = sim(fail_first=1)
    async with sdk(app) as client:
        with pytest.raises(RateLimitError):
            await client.responses.create(model="m", input="Hi", stream=True)
        stream = await client.responses.create(model="m", input="Hi", stream=True)
        events = [event async for event in stream]
    completed = events[-1]
    assert completed.type == "response.completed"
    usage = completed.response.usage
    assert usage is not None
    stats = app.stats()
    assert (stats["requests"], stats["statuses"]) == (2, {"200": 1, "429": 1})
    assert (stats["in_flight"], stats["max_in_flight"], stats["window_max_requests"]) == (0, 1, 2)
    assert stats["tokens"] == {"prompt": usage.input_tokens, "completion": usage.output_tokens}
    assert stats["window_max_tokens"] == usage.total_tokens
