"""Server-sent events: the frames a streamed answer is made of, and sending them over ASGI."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import anyio

from asynceval.sim._asgi import Receive, Send

DONE = b"data: [DONE]\n\n"
"""The frame OpenAI's chat completions stream ends with."""

PIECES = 4
"""How many deltas a streamed text or arguments string is split into (fewer when shorter)."""

_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]


def data_frame(document: dict[str, Any]) -> bytes:
    """`data: <json>` and a blank line: one chat completions chunk."""
    return b"data: " + _dumps(document) + b"\n\n"


def event_frame(name: str, document: dict[str, Any]) -> bytes:
    """`event: NAME`, `data: <json>` and a blank line: one Responses API event."""
    return b"event: " + name.encode() + b"\ndata: " + _dumps(document) + b"\n\n"


def pieces(text: str, count: int = PIECES) -> list[str]:
    """`text` cut into at most `count` consecutive non-empty pieces (none for an empty text)."""
    if not text:
        return []
    size = math.ceil(len(text) / count)
    return [text[i : i + size] for i in range(0, len(text), size)]


async def send_stream(send: Send, receive: Receive, frames: Sequence[bytes], gap: float) -> bool:
    """Send a 200 `text/event-stream` response of `frames`, `gap` seconds between two frames.

    Stops as soon as the client goes away: the request body has been read, so the next ASGI
    `receive` blocks until `http.disconnect` (a server that answers anything else instead is
    not watched further). True when every frame and the end of the body were sent, False when
    the client left first.
    """
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    finished = False
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            if (await receive())["type"] == "http.disconnect":
                tg.cancel_scope.cancel()

        tg.start_soon(watch)
        try:
            for i, frame in enumerate(frames):
                if i and gap > 0:
                    await anyio.sleep(gap)
                await send({"type": "http.response.body", "body": frame, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            finished = True
        except OSError:  # ASGI servers may raise it (rather than drop the data) once it left
            pass
        tg.cancel_scope.cancel()
    return finished


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()
