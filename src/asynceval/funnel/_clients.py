"""The HTTP client a pool holds for one endpoint, with its transport chosen for throughput.

Measured on this project's 2-core machine (benchmarks/call_path.py), stock httpx with one pool of
50 connections spends most of its time in httpcore's pool bookkeeping, which grows with the
number of connections (encode/httpcore#1035); httpx's API over the `httpx-aiohttp` transport
keeps up with a bare loop. So "aiohttp" is the default and "httpx" (stock httpcore) stays
selectable (LLM_HTTP_TRANSPORT). aiohttp runs on asyncio only. The runtime keeps one such client
per event loop and pool key; the funnel sends a ready request straight to its transport
(`transport_of`). Imported with the first pool (httpx is not part of `import asynceval`).

A pool serves every caller of its origin (models and SDK clients, any API key), so its transport
keeps no cookies: aiohttp's session would otherwise hand one key's cookies to another's requests
(httpx's transports keep none either: cookies are a client's business). A transport object a
caller gave stays theirs: closing the pool leaves it open, so the caller's model still works
after `aclose()` or the end of a run.
"""

from __future__ import annotations

import urllib.request
import weakref
from typing import TYPE_CHECKING

import httpx

from ..config import HttpTransport

if TYPE_CHECKING:
    import aiohttp


def create_client(
    *,
    base_url: str,
    limit: int,
    transport: HttpTransport | httpx.AsyncBaseTransport = "aiohttp",
) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` whose pool holds `limit` connections, with no timeout of its own
    (each attempt runs within LLM_CALL_TIMEOUT, an anyio deadline, instead)."""
    limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
    chosen: httpx.AsyncBaseTransport | None
    owned: httpx.AsyncBaseTransport | None  # what the client closes with itself
    if isinstance(transport, httpx.AsyncBaseTransport):
        chosen, owned = transport, _Borrowed(transport)
    elif transport == "aiohttp":
        chosen = owned = _aiohttp_transport(limits)
    elif transport == "httpx":
        # What the client would build itself; left to it when the environment names a proxy,
        # since httpx routes through environment proxies only on transports it builds.
        chosen = None if urllib.request.getproxies() else httpx.AsyncHTTPTransport(limits=limits)
        owned = chosen
    else:
        raise ValueError(f"LLM_HTTP_TRANSPORT must be 'aiohttp' or 'httpx', got {transport!r}")
    client = httpx.AsyncClient(base_url=base_url, limits=limits, timeout=None, transport=owned)
    if chosen is not None:  # every request goes to it (httpx mounts no proxy over a given one)
        _transports[client] = chosen
    return client


def _aiohttp_transport(limits: httpx.Limits) -> httpx.AsyncBaseTransport:
    """httpx-aiohttp's transport on a session without a cookie jar (see the module); otherwise
    the session it would build itself."""
    import aiohttp  # on first use: a tenth of a second to import, and not for stock httpx
    from httpx_aiohttp import AiohttpTransport

    ssl_context = httpx.create_ssl_context()  # the transport's own default, made once

    def session() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=limits.max_connections or 0,
            keepalive_timeout=limits.keepalive_expiry,
            ssl=ssl_context,
        )
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

    return AiohttpTransport(limits=limits, client=session)


class _Borrowed(httpx.AsyncBaseTransport):
    """A caller's transport as the pool's client holds it: `aclose` leaves it open (the caller
    closes what it made). Requests never come here: they go to the transport itself."""

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        self._transport = transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._transport.handle_async_request(request)

    async def aclose(self) -> None:
        return None


_transports: weakref.WeakKeyDictionary[httpx.AsyncClient, httpx.AsyncBaseTransport] = (
    weakref.WeakKeyDictionary()
)


def transport_of(client: httpx.AsyncClient) -> httpx.AsyncBaseTransport | None:
    """The transport every request of a `create_client` client goes to, for callers that send
    a ready request themselves (no cookies, auth, redirects or URL merging to do): None when the
    client routes requests itself (stock httpx with a proxy from the environment) or is not one
    of ours."""
    return _transports.get(client)
