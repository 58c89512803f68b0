"""What a wire protocol (OpenAI chat completions, Anthropic messages) plugs into the app."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from asynceval.sim._answers import Answer, Turn


class BadRequest(ValueError):
    """Raised by a dialect's `parse` for a request it cannot read; the app answers 400 with it."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """A request read by a dialect: the model name to echo, the turn, and prompt size in chars."""

    model: str
    turn: Turn
    prompt_chars: int


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported for one answer."""

    prompt: int
    completion: int


@dataclass(frozen=True, slots=True)
class Dialect:
    """One protocol: `parse` a JSON request, `render` an answer, shape an `error` body.

    `render(parsed, answer, ident, created, usage)` gets a unique hex `ident` for the response id
    and the `created` Unix time.
    """

    parse: Callable[[Mapping[str, Any]], Parsed]
    render: Callable[[Parsed, Answer, str, int, Usage], dict[str, Any]]
    error: Callable[[int, str], dict[str, Any]]


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
