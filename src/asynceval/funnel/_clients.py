"""The HTTP client a pool holds for one endpoint, with its transport chosen for throughput.

Measured on this project's 2-core machine (benchmarks/call_path.py), stock httpx with one pool of
50 connections spends most of its time in httpcore's pool bookkeeping, which grows with the
number of connections (encode/httpcore#1035); httpx's API over the `httpx-aiohttp` transport
keeps up with a bare loop. So "aiohttp" is the default and "httpx" (stock httpcore) stays
selectable (LLM_HTTP_TRANSPORT). aiohttp runs on asyncio only. The runtime keeps one such client
per (event loop, endpoint) in its pools; the funnel sends a ready request straight to its
transport (`transport_of`).
"""

from __future__ import annotations

import urllib.request
import weakref
from typing import TYPE_CHECKING

from ..config import HttpTransport

if TYPE_CHECKING:
    import httpx


def create_client(
    *,
    base_url: str,
    limit: int,
    transport: HttpTransport | httpx.AsyncBaseTransport = "aiohttp",
) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` whose pool holds `limit` connections, with no timeout of its own
    (each attempt runs within LLM_CALL_TIMEOUT, an anyio deadline, instead)."""
    import httpx  # here, not at `import asynceval`: httpx brings its CLI (rich, click, pygments)

    limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
    chosen: httpx.AsyncBaseTransport | None
    if isinstance(transport, httpx.AsyncBaseTransport):
        chosen = transport
    elif transport == "aiohttp":
        # Imported on first use: aiohttp is a tenth of a second of `import asynceval`.
        from httpx_aiohttp import AiohttpTransport

        chosen = AiohttpTransport(limits=limits)
    elif transport == "httpx":
        # What the client would build itself; left to it when the environment names a proxy,
        # since httpx routes through environment proxies only on transports it builds.
        chosen = None if urllib.request.getproxies() else httpx.AsyncHTTPTransport(limits=limits)
    else:
        raise ValueError(f"LLM_HTTP_TRANSPORT must be 'aiohttp' or 'httpx', got {transport!r}")
    client = httpx.AsyncClient(base_url=base_url, limits=limits, timeout=None, transport=chosen)
    if chosen is not None:  # every request goes to it (httpx mounts no proxy over a given one)
        _transports[client] = chosen
    return client


_transports: weakref.WeakKeyDictionary[httpx.AsyncClient, httpx.AsyncBaseTransport] = (
    weakref.WeakKeyDictionary()
)


def transport_of(client: httpx.AsyncClient) -> httpx.AsyncBaseTransport | None:
    """The transport every request of a `create_client` client goes to, for callers that send
    a ready request themselves (no cookies, auth, redirects or URL merging to do): None when the
    client routes requests itself (stock httpx with a proxy from the environment) or is not one
    of ours."""
    return _transports.get(client)
