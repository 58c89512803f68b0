"""AnthropicChatModel: the Anthropic Messages API, fed the same OpenAI-style messages.

System messages become the `system` field, assistant `tool_calls` become `tool_use` blocks and
`tool` messages become `tool_result` blocks. A json_schema `response_format` is served the way
Anthropic recommends: a tool whose input schema is that schema, forced with `tool_choice`; the
completion's text is then that tool input as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..funnel import Usage
from .model import ChatModel
from .types import Completion, ToolCall

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def to_anthropic_messages(
    messages: list[dict[str, Any]],
) -> tuple[str | None, list[dict[str, Any]]]:
    """(system, messages) in the Messages API shape, from OpenAI-style messages."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content")))
            continue
        if role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
                "content": _text_of(message.get("content")),
            }
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        content = message.get("content")
        if role == "assistant" and message.get("tool_calls"):
            blocks: list[dict[str, Any]] = []
            if content:
                blocks.append({"type": "text", "text": _text_of(content)})
            for call in message["tool_calls"]:
                function = call["function"]
                arguments = function.get("arguments") or "{}"
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": function["name"],
                        "input": json.loads(arguments) if isinstance(arguments, str) else arguments,
                    }
                )
            out.append({"role": "assistant", "content": blocks})
            continue
        out.append({"role": role, "content": content if content is not None else ""})
    return ("\n\n".join(system) if system else None), out


def to_anthropic_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic tool from an OpenAI function tool (Anthropic-shaped tools pass unchanged)."""
    if "input_schema" in tool:
        return dict(tool)
    function = tool.get("function", tool)
    return {
        "name": function["name"],
        "description": function.get("description", ""),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }


class AnthropicChatModel(ChatModel):
    """An Anthropic Messages API model (`POST {base_url}/messages`, base_url ending in `/v1`)."""

    path = "messages"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def _body(
        self,
        messages: list[dict[str, Any]],
        response_format: Mapping[str, Any] | None,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        system, converted = to_anthropic_messages(messages)
        params = dict(params)
        # Both popped: the Messages API knows only max_tokens, and refuses the other name.
        max_tokens = params.pop("max_tokens", None)
        max_completion_tokens = params.pop("max_completion_tokens", None)
        max_tokens = max_tokens or max_completion_tokens
        body: dict[str, Any] = {
            "model": self.model,
            "messages": converted,
            "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system is not None:
            body["system"] = system
        tools = [to_anthropic_tool(tool) for tool in params.pop("tools", None) or ()]
        schema_tool = _schema_tool(response_format)
        if schema_tool is not None:
            tools.append(schema_tool)
            body["tool_choice"] = {"type": "tool", "name": schema_tool["name"]}
        if tools:
            body["tools"] = tools
        body.update(params)
        return body

    def _parse(self, body: dict[str, Any], response_format: Mapping[str, Any] | None) -> Completion:
        schema_tool = _schema_tool(response_format)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in body["content"]:
            if block["type"] == "text":
                texts.append(block["text"])
            elif block["type"] == "tool_use":
                if schema_tool is not None and block["name"] == schema_tool["name"]:
                    texts.append(json.dumps(block["input"]))
                else:
                    calls.append(ToolCall.from_json(block["id"], block["name"], block["input"]))
        return Completion(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=Usage.from_body(body.get("usage"), "input_tokens", "output_tokens"),
            finish_reason=body.get("stop_reason"),
            model=body.get("model"),
            raw=body,
        )


def _schema_tool(response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not response_format or response_format.get("type") != "json_schema":
        return None
    spec = response_format["json_schema"]
    return {
        "name": spec.get("name") or "structured_output",
        "description": "Answer by calling this tool with the requested structure.",
        "input_schema": spec["schema"],
    }
