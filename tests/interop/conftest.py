"""A simulated provider of a test's own config on a real loopback socket (in-process ASGI
buffers whole responses, so streams need a real server)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import uvicorn

from asynceval.sim import SimConfig, SimProvider

from ..conftest import free_port


@pytest.fixture
def loopback() -> Iterator[Callable[[SimConfig], tuple[str, SimProvider]]]:
    """`loopback(config)` serves a new SimProvider on 127.0.0.1; (base URL .../v1, provider)."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(config: SimConfig) -> tuple[str, SimProvider]:
        sim = SimProvider(config)
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(sim, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/stats", timeout=0.5)
                return f"http://127.0.0.1:{port}/v1", sim
            except httpx.TransportError:
                time.sleep(0.02)
        raise RuntimeError("the loopback simulator did not start")

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(5)
