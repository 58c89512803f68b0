"""Helpers for driving the simulated provider with the official openai SDK, in process."""

from __future__ import annotations

from typing import Any

import httpx
from openai import AsyncOpenAI

from asynceval.sim import SimConfig, SimProvider

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
"""A chat completions function tool."""

RESPONSES_WEATHER = {"type": "function", **WEATHER["function"]}  # type: ignore[dict-item]
"""The same tool as the Responses API writes it (name and parameters at the top)."""


def sim(**config: Any) -> SimProvider:
    """A provider with no latency unless asked for."""
    return SimProvider(SimConfig(**{"latency": 0.0, **config}))


def sdk(app: SimProvider) -> AsyncOpenAI:
    """An `AsyncOpenAI` answered in process by `app`, with the SDK's own retries off."""
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
    return AsyncOpenAI(base_url="http://sim/v1", api_key="x", http_client=http, max_retries=0)


def raw(app: SimProvider) -> httpx.AsyncClient:
    """A plain httpx client answered in process by `app`."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim")


def user(text: str) -> list[dict[str, Any]]:
    """Chat messages: one user message."""
    return [{"role": "user", "content": text}]
