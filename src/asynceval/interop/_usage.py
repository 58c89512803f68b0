"""Token usage read from what a provider answers, whatever API the framework speaks.

A JSON body is a chat completion (`usage.prompt_tokens` / `completion_tokens`), a Responses API
result (`usage.input_tokens` / `output_tokens`) or an Anthropic message (`usage.input_tokens` /
`output_tokens`). A stream (server-sent events) reports usage in its last chat chunk (with
`stream_options.include_usage`), in `response.completed`, or, for Anthropic, in `message_start`
(input) and `message_delta` (output). Anything else: no usage (the call still counts).
"""

from __future__ import annotations

import json
from typing import Any

from ..llm.types import Usage


def usage_from_body(body: Any) -> Usage | None:
    """The usage a JSON response body reports, or None."""
    if not isinstance(body, dict):
        return None
    if body.get("type") == "response.completed" or body.get("object") == "response.completed":
        body = body.get("response", body)
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return Usage.from_body(usage, "prompt_tokens", "completion_tokens")
    if "input_tokens" in usage or "output_tokens" in usage:
        return Usage.from_body(usage, "input_tokens", "output_tokens")
    return None


def usage_from_json(content: bytes) -> Usage | None:
    """`usage_from_body` of raw JSON bytes; None when they are not JSON."""
    try:
        return usage_from_body(json.loads(content))
    except ValueError:
        return None


class StreamUsage:
    """Reads server-sent events as they pass and keeps the usage they report."""

    __slots__ = ("_pending", "completion", "prompt", "seen")

    def __init__(self) -> None:
        self._pending = b""
        self.prompt = 0
        self.completion = 0
        self.seen = False

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream (lines may be split across chunks)."""
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                self._data(line[5:].strip())

    def _data(self, payload: bytes) -> None:
        if not payload or payload == b"[DONE]" or b"usage" not in payload:
            return  # most chunks carry no usage: no JSON parse for them
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        message = event.get("message")
        if event.get("type") == "message_start" and isinstance(message, dict):
            found = usage_from_body(message)  # Anthropic: the input tokens come first
            if found is not None:
                self.prompt, self.seen = found.prompt_tokens, True
            return
        usage = event.get("usage")
        if event.get("type") == "message_delta" and isinstance(usage, dict):
            self.completion = int(usage.get("output_tokens") or 0)
            self.seen = True
            return
        found = usage_from_body(event)
        if found is not None:
            self.prompt, self.completion, self.seen = (
                found.prompt_tokens,
                found.completion_tokens,
                True,
            )

    def usage(self) -> Usage | None:
        """What the stream reported so far, or None if it reported nothing."""
        return Usage(self.prompt, self.completion) if self.seen else None
