"""What a wire protocol (OpenAI chat completions and Responses, Anthropic messages) plugs into the app."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from asynceval.sim._answers import Answer, Turn


class BadRequest(ValueError):
    """Raised by a dialect's `parse` for a request it cannot read; the app answers 400 with it.

    `param` names the offending request parameter, when one is to blame (OpenAI's error `param`).
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True, slots=True)
class Parsed:
    """A request read by a dialect: the model name to echo, the turn, and prompt size in chars.

    `choices` answers are wanted (OpenAI's `n`); `stream` asks for server-sent events, and
    `include_usage` for a last chunk carrying the usage (chat completions' `stream_options`).
    `echo` holds request fields a dialect repeats in its answer (the Responses API's settings).
    `max_tokens` is the request's output cap (max_tokens, max_completion_tokens or
    max_output_tokens), if it sets one: usage reports at most that many completion tokens a choice.
    """

    model: str
    turn: Turn
    prompt_chars: int
    choices: int = 1
    stream: bool = False
    include_usage: bool = False
    echo: Mapping[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None


MAX_OUTPUT_TOKENS = 256
"""The most completion tokens the simulator reports for one choice, whatever the request: the
simulated model's output limit (`asynceval.runtime.prices.SIM_MAX_OUTPUT_TOKENS`, what a cost
budget reserves for a call to it that sets no max_tokens)."""
_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def output_cap(req: Mapping[str, Any]) -> int | None:
    """The output cap a request body sets (a whole number >= 1), if any."""
    for key in _CAPS:
        value = req.get(key)
        if type(value) is int and value >= 1:
            return value
    return None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported for one answer."""

    prompt: int
    completion: int


Renderer = Callable[[Parsed, Sequence[Answer], str, int, Usage], dict[str, Any]]
"""`render(parsed, answers, ident, created, usage)`: the JSON answer to a request."""

StreamRenderer = Callable[[Parsed, Sequence[Answer], str, int, Usage], list[bytes]]
"""`stream(parsed, answers, ident, created, usage)`: the same answer as server-sent event frames."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """One protocol: `parse` a JSON request, `render` an answer, shape an `error` body.

    `render` gets one answer per choice wanted (`parsed.choices`), a unique hex `ident` for the
    response id and the `created` Unix time; `error(status, message, param)` shapes an error
    body, `param` naming the parameter to blame if any. `stream`, when the protocol streams,
    renders the same answer as the SSE frames to send one by one.
    """

    parse: Callable[[Mapping[str, Any]], Parsed]
    render: Renderer
    error: Callable[[int, str, str | None], dict[str, Any]]
    stream: StreamRenderer | None = None


def status_message(status: int) -> str:
    """A human message for a simulated error status ("Simulated 503 Service Unavailable")."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return f"Simulated {status} {phrase}"


def require_messages(req: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The request's `messages`, checked to be a non-empty list of objects."""
    messages = req.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array")
    if not all(isinstance(m, Mapping) for m in messages):
        raise BadRequest("each message must be an object")
    return messages
