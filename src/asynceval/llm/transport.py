"""The HTTP client each model owns, on the transport chosen for throughput.

Measured on this project's 2-core machine (benchmarks/call_path.py), stock httpx with one pool of
50 connections spends most of its time in httpcore's pool bookkeeping, which grows with the number
of connections (encode/httpcore#1035); httpx's API over the `httpx-aiohttp` transport keeps up with a
bare loop. So "aiohttp" is the default and "httpx" (stock httpcore) stays selectable
(LLM_HTTP_TRANSPORT). aiohttp runs on asyncio only.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from httpx_aiohttp import AiohttpTransport

from ..config import HttpTransport


def create_client(
    *,
    base_url: str,
    limit: int,
    transport: HttpTransport | httpx.AsyncBaseTransport = "aiohttp",
    headers: Mapping[str, str] | None = None,
) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` whose pool holds `limit` connections, with no timeout of its own
    (each attempt runs under `anyio.fail_after(LLM_CALL_TIMEOUT)` instead)."""
    limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
    chosen: httpx.AsyncBaseTransport | None
    if isinstance(transport, httpx.AsyncBaseTransport):
        chosen = transport
    elif transport == "aiohttp":
        chosen = AiohttpTransport(limits=limits)
    elif transport == "httpx":
        chosen = None
    else:
        raise ValueError(f"LLM_HTTP_TRANSPORT must be 'aiohttp' or 'httpx', got {transport!r}")
    return httpx.AsyncClient(
        base_url=base_url,
        headers=dict(headers or {}),
        limits=limits,
        timeout=None,
        transport=chosen,
    )
