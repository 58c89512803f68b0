"""Usage for every streamed chat completion: asked of the provider, kept from a caller that did
not ask for it.

A chat completion stream reports its usage only when the request asks for it
(`stream_options.include_usage`), in one more chunk at its end whose `choices` is empty. The
OpenAI SDK does not ask by default, and a stream that reports nothing counts at its worst case.
So the funnel asks on every streamed chat completion a caller sends (`asking_usage`); when the
caller had not asked, that chunk is taken out of what the caller reads (`UsageChunkFilter`),
since code that reads `chunk.choices[0]` of every chunk breaks on it. The stream's usage is read
from the provider's bytes all the same. Responses API and Anthropic streams always report their
usage: they go as they are.

A provider that refuses the option (an OpenAI-compatible server answering 400 or 422 that names
`stream_options`, `refused`): the request is sent again as the caller wrote it, and later
streams to that endpoint on the same runtime go as written (that first refusal is a failed call
of its own, as is each refusal of a stream sent before the first one came back). Those streams
report no usage, so each counts at its worst case (`cost_unknown` on its event), which the run's
summary shows apart.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

_CHAT = "/chat/completions"
_REFUSAL_STATUSES = (400, 422)
_BOUNDARY = re.compile(rb"\r?\n\r?\n")
"""The blank line that ends a server-sent event."""


def asking_usage(request: httpx.Request) -> httpx.Request | None:
    """`request` with `stream_options.include_usage` set, when it is a streamed chat completion
    (a JSON POST to `.../chat/completions` with `stream: true`) that does not ask for its usage
    already; None otherwise (the request goes as it is). Its other stream options are kept."""
    if request.method != "POST" or not request.url.path.rstrip("/").endswith(_CHAT):
        return None
    try:
        body = json.loads(request.content)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("stream") is not True:
        return None
    options = body.get("stream_options")
    if options is None:
        options = {}
    elif not isinstance(options, dict) or options.get("include_usage") is True:
        return None
    content = json.dumps({**body, "stream_options": {**options, "include_usage": True}}).encode()
    headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
    return httpx.Request(
        request.method, request.url, headers=headers, content=content, extensions=request.extensions
    )


def refused(response: httpx.Response) -> bool:
    """Whether an answer to a request `asking_usage` made refuses the option itself: a 400 or
    422 whose body names `stream_options` (a server that does not know it)."""
    if response.status_code not in _REFUSAL_STATUSES:
        return False
    try:
        content = response.content
    except httpx.ResponseNotRead:
        return False
    return b"stream_options" in content or b"include_usage" in content


class UsageChunkFilter:
    """Takes the usage-only chunk (a chat chunk with empty `choices` and a `usage` object) out
    of server-sent events as they pass; every other event goes on unchanged. Events may be split
    across chunks: an event's bytes go on once its blank line has come (a reader parses whole
    events anyway), what is left at the stream's end with `flush`."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The bytes of `chunk` to hand on (maybe none, maybe some held from the chunk before)."""
        text = self._pending + chunk
        kept: list[bytes] = []
        start = 0
        for boundary in _BOUNDARY.finditer(text):
            event = text[start : boundary.end()]
            if not _usage_only(event):
                kept.append(event)
            start = boundary.end()
        self._pending = text[start:]
        return b"".join(kept)

    def flush(self) -> bytes:
        """What is left once the stream has ended (an event without its blank line)."""
        rest, self._pending = self._pending, b""
        return b"" if _usage_only(rest) else rest


def without_usage_chunk(content: bytes) -> bytes:
    """A whole stream's bytes without its usage-only chunk (a stored answer, replayed)."""
    hide = UsageChunkFilter()
    return hide.feed(content) + hide.flush()


def _usage_only(event: bytes) -> bool:
    """Whether one server-sent event is a chat chunk carrying only the usage."""
    if b'"usage"' not in event or b'"choices"' not in event:
        return False  # most events: no JSON parse
    data = [line[5:].strip() for line in event.splitlines() if line.startswith(b"data:")]
    try:
        document: Any = json.loads(b"\n".join(data))
    except ValueError:
        return False
    return (
        isinstance(document, dict)
        and document.get("choices") == []
        and isinstance(document.get("usage"), dict)
    )
