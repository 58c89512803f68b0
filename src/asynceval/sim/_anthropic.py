"""The Anthropic Messages dialect: `POST /v1/messages` requests and responses (non-streaming).

`tool_choice` {"type": "tool", "name": X} forces a call of X, {"type": "any"} a call of every
tool, {"type": "none"} none; `disable_parallel_tool_use` keeps only the first. A user message
holding `tool_result` blocks after the question means the tools already ran this turn. The
structured-output `output_format: {"type": "json_schema", "schema": ...}` is honoured too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from asynceval.sim._answers import Answer, ToolSpec, Turn, text_of
from asynceval.sim._dialect import (
    BadRequest,
    Dialect,
    Parsed,
    Usage,
    output_cap,
    require_messages,
)

_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def parse(req: Mapping[str, Any]) -> Parsed:
    """Read a Messages request; `BadRequest` for missing messages or `stream: true`."""
    messages = require_messages(req)
    if req.get("stream"):
        raise BadRequest("the simulated provider does not stream; send 'stream': false")
    chars = len(text_of(req.get("system")))
    calls = 0
    for message in messages:
        content = message.get("content")
        chars += len(text_of(content))
        for block in _blocks(content):
            if block.get("type") == "tool_use":
                chars += len(str(block.get("name", ""))) + len(json.dumps(block.get("input")))
                calls += message.get("role") == "assistant"
            elif block.get("type") == "tool_result":
                chars += len(_result_text(block))
    question, results = _question(messages)
    offered = req.get("tools") or []
    tools, force, parallel = _tools(offered, req.get("tool_choice"))
    fmt = req.get("output_format")
    schema = fmt.get("schema") if isinstance(fmt, Mapping) else None
    if offered:
        chars += len(json.dumps(offered))
    turn = Turn(
        question=question,
        tool_results=results,
        tools=tools,
        force_tools=force,
        parallel_tools=parallel,
        schema=schema if isinstance(schema, Mapping) else None,
        call_offset=calls,
    )
    return Parsed(
        model=str(req.get("model", "sim")),
        turn=turn,
        prompt_chars=chars,
        max_tokens=output_cap(req),
    )


def render(
    parsed: Parsed, answers: Sequence[Answer], ident: str, created: int, usage: Usage
) -> dict[str, Any]:
    """A Messages API `message` object for the one answer (the API has no `n` and no `created`)."""
    del created
    answer = answers[0]
    content: list[dict[str, Any]]
    if answer.tool_calls:
        content = [
            {"type": "tool_use", "id": f"toolu_{c.index}", "name": c.name, "input": c.arguments}
            for c in answer.tool_calls
        ]
    else:
        content = [{"type": "text", "text": answer.text or ""}]
    return {
        "id": f"msg_{ident}",
        "type": "message",
        "role": "assistant",
        "model": parsed.model,
        "content": content,
        "stop_reason": "tool_use" if answer.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage.prompt, "output_tokens": usage.completion},
    }


def error(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """An Anthropic error body: `{"type": "error", "error": {"type", "message"}}` (no `param`)."""
    del param
    kind = _ERRORS.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def _result_text(block: Mapping[str, Any]) -> str:
    return text_of(block.get("content"))


def _question(messages: list[Mapping[str, Any]]) -> tuple[str, tuple[str, ...]]:
    """The last user text and the tool results sent with or after it."""
    results: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = _blocks(content)
        results[:0] = [_result_text(b) for b in blocks if b.get("type") == "tool_result"]
        text = (
            content
            if isinstance(content, str)
            else text_of([b for b in blocks if b.get("type") == "text"])
        )
        if text:
            return text, tuple(results)
    return "", tuple(results)


def _tools(offered: Any, choice: Any) -> tuple[tuple[ToolSpec, ...], bool, bool]:
    """The tools `choice` allows, whether it forces a call, whether calls may be parallel."""
    if not isinstance(offered, list):
        return (), False, True
    choice = choice if isinstance(choice, Mapping) else {"type": "auto"}
    parallel = not choice.get("disable_parallel_tool_use", False)
    kind = choice.get("type", "auto")
    if kind == "none":
        return (), False, parallel
    tools = tuple(
        ToolSpec(str(t["name"]), t.get("input_schema") or {})
        for t in offered
        if isinstance(t, Mapping) and "name" in t
    )
    if kind == "tool":
        return tuple(t for t in tools if t.name == choice.get("name")), True, parallel
    return tools, kind == "any", parallel


ANTHROPIC = Dialect(parse=parse, render=render, error=error)
"""The Anthropic Messages dialect."""
