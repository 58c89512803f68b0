"""Streams on a real socket: chunks spaced by `stream_chunk_delay`, in flight until the end, and
a client that goes away mid-stream (in process too)."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from asynceval.sim import SimConfig, SimProvider

CHAT = "/v1/chat/completions"
STREAM = {
    "model": "m",
    "messages": [{"role": "user", "content": "Tell me a long story about streams"}],
    "stream": True,
}


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[str, SimProvider]]]:
    """A factory: `serve(**config)` runs a provider under uvicorn in a thread on loopback and
    returns (its base URL, the provider)."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(**config: Any) -> tuple[str, SimProvider]:
        app = SimProvider(SimConfig(**config))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return f"http://127.0.0.1:{sock.getsockname()[1]}", app

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=5)


async def test_chunks_arrive_stream_chunk_delay_apart_after_the_latency(
    serve: Callable[..., tuple[str, SimProvider]],
) -> None:
    url, app = serve(latency=0.1, latency_distribution="fixed", stream_chunk_delay=0.05)
    arrivals: list[float] = []
    async with httpx.AsyncClient(base_url=url) as client:
        started = time.monotonic()
        async with client.stream("POST", CHAT, json=STREAM) as response:
            headers_at = time.monotonic() - started
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    arrivals.append(time.monotonic() - started)
                    if len(arrivals) == 2:
                        assert app.stats()["in_flight"] == 1  # in flight while streaming
    assert headers_at >= 0.1
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert len(gaps) >= 5
    assert min(gaps) >= 0.03  # each chunk waited for its delay (less a little timer slack)
    assert app.stats()["in_flight"] == 0
    assert app.stats()["tokens"]["completion"] > 0


async def test_a_client_leaving_mid_stream_ends_it_and_the_server_serves_on(
    serve: Callable[..., tuple[str, SimProvider]],
) -> None:
    url, app = serve(latency=0, stream_chunk_delay=0.5)
    async with httpx.AsyncClient(base_url=url) as client:
        async with client.stream("POST", CHAT, json=STREAM) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    break  # leave after the first chunk; the rest would take seconds
        left = time.monotonic()
        for _ in range(200):  # up to 2 s
            if not app.stats()["in_flight"]:
                break
            await anyio.sleep(0.01)
        assert app.stats()["in_flight"] == 0
        assert time.monotonic() - left < 1  # ended at once, not after the remaining chunks
        after = await client.post(CHAT, json={**STREAM, "stream": False})
    assert after.status_code == 200
    stats = app.stats()
    assert stats["statuses"] == {"200": 2}
    assert stats["max_in_flight"] == 1


async def test_in_process_a_disconnect_mid_stream_stops_sending_and_leaves_in_flight() -> None:
    app = SimProvider(SimConfig(latency=0, stream_chunk_delay=0.2))
    body = httpx.Request("POST", "http://sim" + CHAT, json=STREAM).content
    first_chunk = anyio.Event()
    sent: list[MutableMapping[str, Any]] = []
    requests = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await first_chunk.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            first_chunk.set()

    scope = {"type": "http", "method": "POST", "path": CHAT, "headers": []}
    with anyio.fail_after(1):  # the whole stream would take seconds
        await app(scope, receive, send)
    assert sent[0]["status"] == 200
    assert len(sent) == 2  # the start and one chunk, then nothing
    stats = app.stats()
    assert (stats["in_flight"], stats["statuses"]) == (0, {"200": 1})
    assert stats["tokens"] == {"prompt": 0, "completion": 0}  # never delivered


async def test_a_server_raising_oserror_on_send_after_a_disconnect_does_not_crash_the_app() -> None:
    app = SimProvider(SimConfig(latency=0))
    body = httpx.Request("POST", "http://sim" + CHAT, json=STREAM).content
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    chunks = 0

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal chunks
        if message["type"] == "http.response.body":
            chunks += 1
            if chunks > 1:
                raise ConnectionResetError("client went away")  # what the ASGI spec asks for

    scope = {"type": "http", "method": "POST", "path": CHAT, "headers": []}
    with anyio.fail_after(1):
        await app(scope, receive, send)
    assert chunks == 2
    assert app.stats()["in_flight"] == 0
