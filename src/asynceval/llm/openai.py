"""OpenAIChatModel: the chat completions API (OpenAI, vLLM, Ollama, LM Studio and the simulator)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..funnel import Usage
from .model import ChatModel
from .types import Completion, ToolCall


class OpenAIChatModel(ChatModel):
    """An OpenAI-compatible `/v1/chat/completions` model; base_url ends in `/v1` as with the SDK.

    Messages, `tools` / `tool_calls` and `response_format` (json_schema) pass through unchanged.
    """

    path = "chat/completions"
    flex = True

    def _headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def _body(
        self,
        messages: list[dict[str, Any]],
        response_format: Mapping[str, Any] | None,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, **params}
        if response_format is not None:
            body["response_format"] = dict(response_format)
        return body

    def _parse(self, body: dict[str, Any], response_format: Mapping[str, Any] | None) -> Completion:
        choice = body["choices"][0]
        message = choice["message"]
        calls = tuple(
            ToolCall.from_json(call["id"], call["function"]["name"], call["function"]["arguments"])
            for call in message.get("tool_calls") or ()
        )
        return Completion(
            text=message.get("content") or "",
            tool_calls=calls,
            usage=Usage.from_body(body.get("usage"), "prompt_tokens", "completion_tokens"),
            finish_reason=choice.get("finish_reason"),
            model=body.get("model"),
            raw=body,
        )
