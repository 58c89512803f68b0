"""Httpx2FunnelTransport and SyncHttpx2FunnelTransport: clients of `httpx2` through the funnel.

`httpx2` is httpx's successor (the same API under another name); the `anthropic` SDK sends with
it from 2.x and refuses an `httpx` client, so `asynceval.http_client()` cannot be handed to it.
These httpx2 transports carry each request to a `FunnelTransport` (`SyncFunnelTransport`) as
the httpx request it is, and its answer back as an httpx2 response, so such a client's calls get
what every other framework's get: the global limit, the rate windows, retries, the per-attempt
timeout, events and usage. A streamed answer is passed on unread (its slot is held until it is
read to its end or closed); an error the funnel ends with (`httpx.ReadTimeout`,
`httpx.ConnectError` ...) is raised as httpx2's error of the same name, which an SDK turns into
its own. Imported only when used: `httpx2` is not a dependency of asynceval.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2

from ._transport import FunnelTransport, SyncFunnelTransport


class Httpx2FunnelTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport whose requests go through the funnel (see the module); its arguments
    are `FunnelTransport`'s."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.funnel = FunnelTransport(*args, **kwargs)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        inner = _request(request, await request.aread())
        try:
            response = await self.funnel.handle_async_request(inner)
        except httpx.HTTPError as exc:
            raise _error(exc) from exc
        return httpx2.Response(
            response.status_code,
            headers=response.headers.multi_items(),
            stream=_AsyncStream(response),
            request=request,
            extensions=dict(response.extensions),
        )

    async def aclose(self) -> None:
        await self.funnel.aclose()


class SyncHttpx2FunnelTransport(httpx2.BaseTransport):
    """The sync twin of `Httpx2FunnelTransport` (`SyncFunnelTransport`'s arguments), for a sync
    client in the engine's worker threads or threads of your own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.funnel = SyncFunnelTransport(*args, **kwargs)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        inner = _request(request, request.read())
        try:
            response = self.funnel.handle_request(inner)
        except httpx.HTTPError as exc:
            raise _error(exc) from exc
        return httpx2.Response(
            response.status_code,
            headers=response.headers.multi_items(),
            stream=_SyncStream(response),
            request=request,
            extensions=dict(response.extensions),
        )

    def close(self) -> None:
        self.funnel.close()


class _AsyncStream(httpx2.AsyncByteStream):
    """An httpx answer's bytes: the body the funnel read (decoded, its headers plain), or a
    stream's raw bytes unread until httpx2 reads them; closing it closes the answer (and gives
    a streamed call's slot back)."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._response.is_stream_consumed:  # read by the funnel: its body, decoded
            yield self._response.content
            return
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise _error(exc) from exc

    async def aclose(self) -> None:
        await self._response.aclose()


class _SyncStream(httpx2.SyncByteStream):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        if self._response.is_stream_consumed:
            yield self._response.content
            return
        try:
            yield from self._response.iter_raw()
        except httpx.HTTPError as exc:
            raise _error(exc) from exc

    def close(self) -> None:
        self._response.close()


def _request(request: httpx2.Request, content: bytes) -> httpx.Request:
    """An httpx2 request as httpx's (its timeout and other extensions kept)."""
    return httpx.Request(
        request.method,
        str(request.url),
        headers=request.headers.multi_items(),
        content=content,
        extensions=dict(request.extensions),
    )


def _error(exc: httpx.HTTPError) -> Exception:
    """httpx's error as httpx2's of the same name (its nearest ancestor's that httpx2 has)."""
    for cls in type(exc).__mro__:
        found = getattr(httpx2, cls.__name__, None)
        if isinstance(found, type) and issubclass(found, Exception):
            error: Exception = found(str(exc))
            return error
    return httpx2.TransportError(str(exc))
