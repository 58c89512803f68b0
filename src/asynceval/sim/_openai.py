"""The OpenAI chat completions dialect: `POST /v1/chat/completions` requests and responses.

`n` asks for that many choices (1 to 8), `"stream": true` for server-sent chunks (`_chat_stream`);
the parameters it cannot honour get a 400 naming them (`_params`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from asynceval.sim._answers import Answer, ToolSpec, Turn, text_of
from asynceval.sim._chat_stream import stream, usage_document
from asynceval.sim._dialect import Dialect, Parsed, Usage, output_cap, require_messages
from asynceval.sim._params import check_chat

_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    408: ("timeout", "request_timeout"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
}


def parse(req: Mapping[str, Any]) -> Parsed:
    """Read a chat completions request; `BadRequest` for missing messages or a parameter the
    simulator cannot honour.

    Prompt size counts message texts, earlier tool calls, and the JSON of `tools` and of the
    requested schema (models read those too).
    """
    messages = require_messages(req)
    choices = check_chat(req)
    streamed = req.get("stream") is True
    options = req.get("stream_options")
    include_usage = streamed and isinstance(options, Mapping) and options.get("include_usage")
    chars = 0
    calls = 0
    for message in messages:
        chars += len(text_of(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            chars += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
            calls += 1
    offered = req.get("tools") or []
    tools = _tools(offered, req.get("tool_choice"))
    turn, extra = turn_of(
        req, messages, offered, tools, _response_format(req.get("response_format")), calls
    )
    return Parsed(
        model=str(req.get("model", "sim")),
        turn=turn,
        prompt_chars=chars + extra,
        choices=choices,
        stream=streamed,
        include_usage=bool(include_usage),
        max_tokens=output_cap(req),
    )


def render(
    parsed: Parsed, answers: Sequence[Answer], ident: str, created: int, usage: Usage
) -> dict[str, Any]:
    """A `chat.completion` object exactly as OpenAI shapes it, one choice per answer."""
    return {
        "id": f"chatcmpl-{ident}",
        "object": "chat.completion",
        "created": created,
        "model": parsed.model,
        "choices": [_choice(index, answer) for index, answer in enumerate(answers)],
        "usage": usage_document(usage),
        "system_fingerprint": None,
    }


def error(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """An OpenAI error body: `{"error": {"message", "type", "param", "code"}}`."""
    kind, code = _ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    if status == 400 and param is not None:
        code = "unsupported_parameter"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _choice(index: int, answer: Answer) -> dict[str, Any]:
    """One choice of a `chat.completion`: the assistant message and why it finished."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
    if answer.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{call.index}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in answer.tool_calls
        ]
    return {
        "index": index,
        "message": message,
        "logprobs": None,
        "finish_reason": "tool_calls" if answer.tool_calls else "stop",
    }


OBSERVATION = "Observation:"
"""How agents that do not send `tool` messages (smolagents) hand tool results back: a user
message starting with this counts as a tool result, not as the question."""


def turn_of(
    req: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    offered: Any,
    tools: tuple[tuple[ToolSpec, ...], bool],
    schema: tuple[Any, bool],
    calls: int,
) -> tuple[Turn, int]:
    """What the answer generator reads of a chat or Responses request (`tools` and `schema` as
    each API states them: (specs, forced), (schema, json_object)), and the characters of prompt
    the offered tools and the schema add."""
    question, results = question_of(messages)
    extra = len(json.dumps(offered)) if offered else 0
    if schema[0] is not None:
        extra += len(json.dumps(schema[0]))
    turn = Turn(
        question=question,
        tool_results=results,
        tools=tools[0],
        force_tools=tools[1],
        parallel_tools=req.get("parallel_tool_calls") is not False,
        schema=schema[0],
        json_object=schema[1],
        call_offset=calls,
    )
    return turn, extra


def question_of(messages: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[str, ...]]:
    """The last user message's text and the tool results sent after it."""
    results: list[str] = []
    for message in reversed(messages):
        role = message.get("role")
        text = text_of(message.get("content"))
        if role == "tool" or (role == "user" and text.lstrip().startswith(OBSERVATION)):
            results.append(text)
        elif role == "user":
            return text, tuple(reversed(results))
    return "", tuple(reversed(results))


def _tools(offered: Any, choice: Any) -> tuple[tuple[ToolSpec, ...], bool]:
    """The function tools `choice` still allows, and whether it forces a call."""
    if not isinstance(offered, list) or choice == "none":
        return (), False
    tools = []
    for tool in offered:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and "name" in function:
            tools.append(ToolSpec(str(function["name"]), function.get("parameters") or {}))
    if isinstance(choice, Mapping):
        name = (choice.get("function") or {}).get("name")
        return tuple(t for t in tools if t.name == name), True
    return tuple(tools), choice == "required"


def _response_format(fmt: Any) -> tuple[Any, bool]:
    """The requested JSON schema (or None) and whether a bare JSON object is wanted."""
    if not isinstance(fmt, Mapping):
        return None, False
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        return (schema, False) if isinstance(schema, Mapping) else (None, True)
    return None, fmt.get("type") == "json_object"


OPENAI = Dialect(parse=parse, render=render, error=error, stream=stream)
"""The OpenAI chat completions dialect."""
