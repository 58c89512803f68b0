"""Minimal ASGI 3 plumbing: types, reading a body, sending one response, lifespan, disconnects,
and a whole request and answer as values (`Call`, `Reply`) for the resource routes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

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
    send: Send,
    status: int,
    body: bytes,
    headers: Iterable[Header] = (),
    *,
    content_type: bytes = b"application/json",
) -> None:
    """Send a complete response (JSON unless said; content-length matches `body`) in one body
    message."""
    kind = _JSON if content_type == _JSON[1] else (b"content-type", content_type)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [kind, (b"content-length", b"%d" % len(body)), *headers],
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


class Call(NamedTuple):
    """One HTTP request to a resource route (files, batches), read whole.

    `headers` has lower-case names (the last value of a repeated one); `origin` is the
    `scheme://host` the client reached, for the absolute URLs an answer gives (Anthropic's
    `results_url`).
    """

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes
    origin: str


class Reply(NamedTuple):
    """A whole HTTP answer to a `Call`."""

    status: int
    body: bytes
    content_type: bytes = b"application/json"
    headers: tuple[Header, ...] = ()


def call_of(scope: Scope, path: str, body: bytes) -> Call:
    """The `Call` of an HTTP scope whose body was read."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
    host = headers.get("host")
    if host is None:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    origin = f"{scope.get('scheme', 'http')}://{host}"
    return Call(scope["method"], path, query, headers, body, origin)


async def send_reply(send: Send, reply: Reply) -> None:
    """Send a `Reply`."""
    await send_response(
        send, reply.status, reply.body, reply.headers, content_type=reply.content_type
    )
