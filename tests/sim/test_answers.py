"""The answer rules, through each dialect's request parsing (no HTTP)."""

from __future__ import annotations

import json
from typing import Any

from asynceval.sim._answers import Answer, Turn, answer
from asynceval.sim._anthropic import ANTHROPIC
from asynceval.sim._openai import OPENAI

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city", "days"],
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}


def openai(**request: Any) -> Answer:
    return answer(OPENAI.parse(request).turn, salt=b"t")


def anthropic(**request: Any) -> Answer:
    return answer(ANTHROPIC.parse(request).turn, salt=b"t")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_plain_question_gets_a_text_answer_echoing_it() -> None:
    reply = openai(messages=[user("Why is the sky blue?")])
    assert reply.text == "Simulated answer: Why is the sky blue?"
    assert reply.tool_calls == ()


def test_content_given_as_text_parts_is_read() -> None:
    parts = [{"type": "text", "text": "What is"}, {"type": "text", "text": "6 * 7?"}]
    assert openai(messages=[{"role": "user", "content": parts}]).text == "42"


def test_offered_tools_are_called_once_each_with_arguments_matching_their_schema() -> None:
    reply = openai(messages=[user("Weather and time?")], tools=[WEATHER, CLOCK])
    assert reply.text is None
    assert [c.name for c in reply.tool_calls] == ["get_weather", "get_time"]
    assert isinstance(reply.tool_calls[0].arguments["city"], str)
    assert reply.tool_calls[0].arguments["days"] >= 1
    assert reply.tool_calls[1].arguments == {}


def test_parallel_tool_calls_false_calls_only_the_first_tool() -> None:
    reply = openai(messages=[user("x")], tools=[WEATHER, CLOCK], parallel_tool_calls=False)
    assert [c.name for c in reply.tool_calls] == ["get_weather"]


def test_tool_choice_naming_a_function_calls_only_that_one() -> None:
    choice = {"type": "function", "function": {"name": "get_time"}}
    reply = openai(messages=[user("What is 1 + 1?")], tools=[WEATHER, CLOCK], tool_choice=choice)
    assert [c.name for c in reply.tool_calls] == ["get_time"]


def test_tool_choice_none_answers_in_text() -> None:
    assert openai(messages=[user("x")], tools=[WEATHER], tool_choice="none").tool_calls == ()


def test_after_tool_results_the_answer_is_text_containing_them() -> None:
    call = {"id": "call_0", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    messages = [
        user("What time is it?"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "12:34"},
    ]
    reply = openai(messages=messages, tools=[CLOCK])
    assert reply.tool_calls == ()
    assert reply.text is not None
    assert "12:34" in reply.text


def test_a_new_user_question_after_tool_results_calls_tools_again_with_new_ids() -> None:
    call = {"id": "call_0", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    messages = [
        user("time?"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "12:34"},
        {"role": "assistant", "content": "It is 12:34."},
        user("And now?"),
    ]
    reply = openai(messages=messages, tools=[CLOCK])
    assert [c.index for c in reply.tool_calls] == [1]


def test_arithmetic_is_answered_before_optional_tools() -> None:
    assert openai(messages=[user("What is 2 + 3?")], tools=[WEATHER]).text == "5"


def test_json_schema_answer_wins_over_arithmetic() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": True}}
    reply = openai(messages=[user("What is 2 + 3?")], response_format=fmt)
    assert reply.text is not None
    assert set(json.loads(reply.text)) == {"n"}


def test_json_object_format_answers_with_a_json_object() -> None:
    reply = openai(messages=[user("hi")], response_format={"type": "json_object"})
    assert reply.text is not None
    assert isinstance(json.loads(reply.text), dict)


def test_anthropic_forced_tool_is_called_with_input_matching_its_schema() -> None:
    tool = {
        "name": "record",
        "input_schema": {
            "type": "object",
            "properties": {"label": {"enum": ["good", "bad"]}, "score": {"type": "number"}},
            "required": ["label", "score"],
        },
    }
    reply = anthropic(
        messages=[user("What is 1 + 1?")],
        tools=[tool, {"name": "other", "input_schema": {"type": "object"}}],
        tool_choice={"type": "tool", "name": "record"},
    )
    assert [c.name for c in reply.tool_calls] == ["record"]
    assert reply.tool_calls[0].arguments["label"] == "good"


def test_anthropic_tool_result_blocks_end_the_tool_phase() -> None:
    messages = [
        user("Look it up"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "42"}]},
    ]
    reply = anthropic(messages=messages, tools=[{"name": "f", "input_schema": {}}])
    assert reply.text == "Simulated answer: Look it up Tool results: 42"


def test_long_questions_are_shortened_in_the_text_answer() -> None:
    text = answer(Turn(question="word " * 100)).text
    assert text is not None
    assert text.endswith("...")
    assert len(text) < 120
