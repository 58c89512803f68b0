"""The OpenAI Responses API dialect: `POST /v1/responses` requests and `response` objects.

`input` is a string (one user message) or a list of items: messages (`role`, `content` as a
string or `input_text`/`output_text` parts), `function_call` items (the model's earlier calls) and
`function_call_output` items (their results); other items (reasoning, ...) are skipped. The same
answer rules as chat completions apply: the question is the last user text, the tool results are
the `function_call_output` items after it. `instructions` counts towards the prompt; `tools` are
function tools (`{"type": "function", "name", "parameters"}`); `text.format` of type
`json_schema` asks for an instance of its `schema`. The sim keeps no state, so a
`previous_response_id` is refused (`_params`). Streamed answers are in `_responses_stream`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from asynceval.sim._answers import Answer, ToolSpec, text_of
from asynceval.sim._dialect import BadRequest, Dialect, Parsed, Usage, output_cap
from asynceval.sim._openai import error, turn_of
from asynceval.sim._params import check_responses, unsupported
from asynceval.sim._responses_stream import events

_ECHOED = (
    "instructions",
    "max_output_tokens",
    "metadata",
    "parallel_tool_calls",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
    "user",
)


def parse(req: Mapping[str, Any]) -> Parsed:
    """Read a Responses API request; `BadRequest` for a missing `input` or a parameter the
    simulator cannot honour.

    Prompt size counts the instructions, the input's texts, earlier calls and their results, and
    the JSON of `tools` and of the requested schema.
    """
    check_responses(req)
    messages, chars, calls = _conversation(_items(req.get("input")))
    chars += len(text_of(req.get("instructions")))
    offered = req.get("tools") or []
    tools = _tools(offered, req.get("tool_choice"))
    turn, extra = turn_of(req, messages, offered, tools, _text_format(req.get("text")), calls)
    return Parsed(
        model=str(req.get("model", "sim")),
        turn=turn,
        prompt_chars=chars + extra,
        stream=req.get("stream") is True,
        echo={key: req[key] for key in _ECHOED if req.get(key) is not None},
        max_tokens=output_cap(req),
    )


def render(
    parsed: Parsed, answers: Sequence[Answer], ident: str, created: int, usage: Usage
) -> dict[str, Any]:
    """A completed `response` object for the one answer (the Responses API has no `n`)."""
    return response_document(parsed, output_items(answers[0], ident), ident, created, usage)


def stream(
    parsed: Parsed, answers: Sequence[Answer], ident: str, created: int, usage: Usage
) -> list[bytes]:
    """The SSE events that build, piece by piece, the response `render` would answer."""
    return events(render(parsed, answers, ident, created, usage))


def response_document(
    parsed: Parsed, output: list[dict[str, Any]], ident: str, created: int, usage: Usage
) -> dict[str, Any]:
    """A completed `response` object with `output`, echoing the request's settings."""
    echo = parsed.echo
    return {
        "id": f"resp_{ident}",
        "object": "response",
        "created_at": created,
        "status": "completed",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": echo.get("instructions"),
        "max_output_tokens": echo.get("max_output_tokens"),
        "metadata": echo.get("metadata", {}),
        "model": parsed.model,
        "output": output,
        "parallel_tool_calls": echo.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "temperature": echo.get("temperature", 1.0),
        "text": echo.get("text", {"format": {"type": "text"}}),
        "tool_choice": echo.get("tool_choice", "auto"),
        "tools": echo.get("tools", []),
        "top_p": echo.get("top_p", 1.0),
        "truncation": echo.get("truncation", "disabled"),
        "usage": _usage(usage),
        "user": echo.get("user"),
    }


def output_items(answer: Answer, ident: str) -> list[dict[str, Any]]:
    """The `output` of a completed response: one `message`, or one `function_call` per call."""
    if not answer.tool_calls:
        part = {"type": "output_text", "text": answer.text or "", "annotations": [], "logprobs": []}
        message = {
            "type": "message",
            "id": f"msg_{ident}",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        return [message]
    return [
        {
            "type": "function_call",
            "id": f"fc_{ident}_{call.index}",
            "call_id": f"call_{call.index}",
            "name": call.name,
            "arguments": json.dumps(call.arguments),
            "status": "completed",
        }
        for call in answer.tool_calls
    ]


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt + usage.completion,
    }


def _items(value: Any) -> list[Mapping[str, Any]]:
    """The input items: a string is one user message."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise BadRequest("'input' must be a string or a non-empty array of items", "input")
    if not all(isinstance(item, Mapping) for item in value):
        raise BadRequest("each input item must be an object", "input")
    return value


def _conversation(items: list[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int, int]:
    """The items as chat messages (what `question_of` reads), their size in chars, and how many
    function calls the model made before."""
    messages: list[dict[str, Any]] = []
    chars = calls = 0
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            text = text_of(item.get("content"))
            messages.append({"role": item.get("role"), "content": text})
        elif kind == "function_call":
            text = f"{item.get('name', '')}{item.get('arguments', '')}"
            messages.append({"role": "assistant", "content": ""})
            calls += 1
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else text_of(output)
            messages.append({"role": "tool", "content": text})
        else:
            continue  # reasoning and other items carry nothing the answer rules read
        chars += len(text)
    return messages, chars, calls


def _tools(offered: Any, choice: Any) -> tuple[tuple[ToolSpec, ...], bool]:
    """The function tools `choice` still allows, and whether it forces a call."""
    if not isinstance(offered, list) or choice == "none":
        return (), False
    tools = tuple(ToolSpec(str(t["name"]), t.get("parameters") or {}) for t in offered)
    if isinstance(choice, Mapping):
        return tuple(t for t in tools if t.name == choice.get("name")), True
    return tools, choice == "required"


def _text_format(text: Any) -> tuple[Any, bool]:
    """The requested JSON schema (or None) and whether a bare JSON object is wanted."""
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(fmt, Mapping):
        return None, False
    if fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        if not isinstance(schema, Mapping):
            raise unsupported("text.format.schema", "a json_schema format needs a schema object")
        return schema, False
    return None, fmt.get("type") == "json_object"


RESPONSES = Dialect(parse=parse, render=render, error=error, stream=stream)
"""The OpenAI Responses API dialect (errors shaped as chat completions' are)."""
