"""Message and completion types shared by every provider (`Usage` is the funnel's, which counts it).

Messages are plain OpenAI-style dicts (`{"role": "user", "content": "..."}`), so anything that
already speaks chat completions can pass its messages through unchanged; a bare string is taken as
one user message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..funnel import Usage

Message = Mapping[str, Any]
Messages = str | Sequence[Message]


def as_messages(messages: Messages) -> list[dict[str, Any]]:
    """Normalise a prompt to a list of message dicts; a string becomes one user message."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    out = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message:
            raise TypeError(f"message {index} must be a mapping with a 'role', got {message!r}")
        out.append(dict(message))
    return out


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for; `arguments` is the parsed JSON object ({} if unparseable)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""

    @classmethod
    def from_json(cls, id: str, name: str, raw: str | Mapping[str, Any] | None) -> ToolCall:
        if isinstance(raw, Mapping):
            return cls(id=id, name=name, arguments=dict(raw), raw_arguments=json.dumps(raw))
        text = raw or ""
        try:
            parsed = json.loads(text) if text else {}
        except json.JSONDecodeError:
            parsed = {}
        return cls(
            id=id,
            name=name,
            arguments=parsed if isinstance(parsed, dict) else {"value": parsed},
            raw_arguments=text,
        )


@dataclass(frozen=True)
class Completion:
    """One model answer: its text, any tool calls, token usage and the provider's raw JSON."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def json(self) -> Any:
        """The text parsed as JSON (for response_format requests); raises ValueError if it is not."""
        return json.loads(self.text)
