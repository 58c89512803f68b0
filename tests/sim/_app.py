"""Helpers for driving the simulated provider's ASGI app directly, in process."""

from __future__ import annotations

from typing import Any

import httpx

from asynceval.sim import SimConfig, SimProvider

CHAT = "/v1/chat/completions"


def client(app: SimProvider) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim")


def sim(**config: Any) -> SimProvider:
    """A provider answering at once unless `latency` is given."""
    return SimProvider(SimConfig(**{"latency": 0.0, **config}))


def chat(text: str = "Hello?", **extra: Any) -> dict[str, Any]:
    return {"model": "sim-1", "messages": [{"role": "user", "content": text}], **extra}
