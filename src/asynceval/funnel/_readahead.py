"""Reading a streamed answer ahead, inside its attempt, up to its first generated content.

A provider that stalls usually does so right after it has answered: the headers and a first event
that says nothing yet (a chat chunk with only the assistant's role, a keep-alive comment,
Anthropic's `message_start`, the Responses API's `response.created`), then nothing. Had the
stream been handed to the caller at its headers, the caller would have received bytes and the
stall could no longer be retried. So the send reads on, within the attempt's slot and deadline,
each wait bounded by LLM_STREAM_IDLE_TIMEOUT, until the first event that carries content or
ends the stream; a stall before it fails the attempt as `StreamStalled` (retried like a
timeout). What was read is handed to the caller first, unchanged (`LeasedStream`).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx

from .. import events
from ..errors import StreamStalled
from ._lease import Lease

MAX_AHEAD = 64 * 1024
"""Bytes read ahead at most: past this many bytes of content-free events the stream is handed
on as it is (a provider that sends only keep-alives is bounded by LLM_CALL_TIMEOUT anyway)."""

_EMPTY_EVENTS = frozenset(
    {
        "ping",
        "message_start",
        "content_block_start",
        "response.created",
        "response.in_progress",
    }
)
"""Server-sent event names (or their JSON `type`) that carry no generated content."""

_NEUTRAL = (b":", b"id:", b"retry:")
"""Lines that say nothing of the answer: a comment (`:`, a keep-alive), an event id, a
reconnection delay."""

_NOT_CONTENT = frozenset({"role", "obfuscation"})
"""Keys of a chat chunk's delta that say nothing generated (OpenAI pads deltas with
`obfuscation`)."""


_TEXT = re.compile(rb'"(?:content|text|delta|arguments)":"[^"]')
"""A generated string in an event's JSON, found without parsing it (the common first content
chunk of every dialect); a false find only hands the stream on early."""


class Ahead:
    """What was read of a stream before it was handed on: its chunks and the rest of it."""

    __slots__ = ("chunks", "rest")

    def __init__(self, chunks: list[bytes], rest: AsyncIterator[bytes]) -> None:
        self.chunks = chunks
        self.rest = rest


async def read_ahead(response: httpx.Response, lease: Lease, idle_s: float) -> Ahead:
    """Read `response`'s decoded body up to its first event with content, or its end, or
    `MAX_AHEAD` bytes; each wait for a chunk within `idle_s`. A stall raises `StreamStalled`
    (with a `stream_stalled` event: nothing was delivered); the caller closes the response.
    Errors of the client itself propagate (the send maps them)."""
    chunks = response.aiter_bytes()
    scan = FirstContent()
    read: list[bytes] = []
    while True:
        try:
            with anyio.fail_after(idle_s):
                chunk = await chunks.__anext__()
        except StopAsyncIteration:
            return Ahead(read, chunks)
        except TimeoutError:
            events.stream_stalled(
                agent=lease.agent,
                dimension=lease.dimension,
                call_id=lease.call_id,
                idle_s=idle_s,
                delivered=False,
            )
            raise StreamStalled(idle_s) from None
        read.append(chunk)
        if scan.feed(chunk) or scan.size > MAX_AHEAD:
            return Ahead(read, chunks)


class FirstContent:
    """Scans server-sent events as bytes arrive (events may be split across chunks) for the
    first one that carries content or ends the stream."""

    __slots__ = ("_pending", "size")

    def __init__(self) -> None:
        self._pending = b""
        self.size = 0

    def feed(self, chunk: bytes) -> bool:
        """Take the next bytes; True once an event with content (or the end) has arrived."""
        self.size += len(chunk)
        text = (self._pending + chunk).replace(b"\r\n", b"\n")
        *whole, self._pending = text.split(b"\n\n")
        return any(not _empty(event) for event in whole)


def _empty(event: bytes) -> bool:
    """Whether one server-sent event (its lines, without the blank line) carries nothing
    generated. Anything not known to be empty counts as content (an error event, a body that
    is not JSON): it is handed on rather than waited past."""
    name, data = "", []
    for line in event.split(b"\n"):
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            data.append(line[5:].strip())
        elif line and not line.startswith(_NEUTRAL):
            return False
    if name in _EMPTY_EVENTS:
        return True
    if not data:
        return not name  # comments only, or a blank event: a keep-alive
    payload = b"\n".join(data)
    if _TEXT.search(payload):
        return False
    try:
        document = json.loads(payload)
    except ValueError:
        return False  # `[DONE]` (the end) or something unknown
    return isinstance(document, dict) and _empty_document(document)


def _empty_document(document: dict[str, Any]) -> bool:
    """An event's JSON: empty when its type is one of `_EMPTY_EVENTS`, or when it is a chat
    chunk with no usage whose choices have neither a finish reason nor anything generated."""
    kind = document.get("type")
    if isinstance(kind, str):
        return kind in _EMPTY_EVENTS
    choices = document.get("choices")
    if not isinstance(choices, list) or document.get("usage"):
        return False
    return all(isinstance(choice, dict) and _empty_choice(choice) for choice in choices)


def _empty_choice(choice: dict[str, Any]) -> bool:
    if choice.get("finish_reason") is not None or choice.get("text"):
        return False
    delta = choice.get("delta")
    if delta is None:
        return True
    if not isinstance(delta, dict):
        return False
    return not any(value for key, value in delta.items() if key not in _NOT_CONTENT)
