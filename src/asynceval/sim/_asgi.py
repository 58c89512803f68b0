"""Minimal ASGI 3 plumbing: types, reading a body, sending one response, lifespan, disconnects."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Header = tuple[bytes, bytes]

_JSON = (b"content-type", b"application/json")


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnected before sending it all."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_response(
    send: Send, status: int, body: bytes, headers: Iterable[Header] = ()
) -> None:
    """Send a complete JSON response (content-length matches `body`) in one body message."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [_JSON, (b"content-length", b"%d" % len(body)), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def wait_for_disconnect(receive: Receive) -> None:
    """Return once the client goes away; cancelling the caller also ends the wait."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge lifespan startup and shutdown; the app holds no resources to open or close."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
