"""The send: the one place a request leaves for a provider over HTTP, as one attempt.

Both faces of the funnel come here: a model's POST (`Route.post`) and a transport's request
(`Route.send`). The request goes straight to the pool's transport (a ready request has no
cookies, auth, redirects or URL merging left to do: the client's layer would cost a few hundred
microseconds for nothing), or through the client when it routes requests itself (stock httpx
with a proxy from the environment). The body is read within the attempt's slot and deadline, or,
for a 2xx event stream a transport asked for, read up to its first content (so that a stall
before it is retried: `asynceval.funnel._readahead`), then handed on with the lease
(`LeasedStream`).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import httpx

from ._clients import transport_of
from ._lease import Lease
from ._readahead import read_ahead
from ._replies import request_errors
from ._stream import LeasedStream

_DROPPED = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def plain_headers(headers: httpx.Headers) -> list[tuple[bytes, bytes]]:
    """The provider's headers for a body handed on already decoded (no encoding, no length)."""
    return [(k, v) for k, v in headers.raw if k.decode("latin-1").lower() not in _DROPPED]


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    lease: Lease,
    *,
    stream_then: Callable[[], None] | None = None,
    chunk_timeout: float = 0.0,
) -> httpx.Response:
    """Send `request` on `client`'s transport as one attempt and return the answer, whatever its
    status (the caller's reader maps it); failures to connect or read raise
    `ProviderConnectionError` or `MalformedResponse`.

    With `stream_then`, a 2xx event stream is read here only up to its first event with
    content (a stall before it raises `StreamStalled`, retried like a timeout); then the lease
    is kept by the returned response's `LeasedStream` (each further chunk within
    `chunk_timeout`), which calls `stream_then` once it is finished, closed or collected.
    """
    transport = transport_of(client)
    with request_errors():  # what the clients raise, sending, reading or closing: mapped
        if transport is None:
            response = await client.send(request, stream=True)
        else:
            response = await transport.handle_async_request(request)
            response.request = request
        lease.answered(response.headers, response.status_code)
        try:
            if (
                stream_then is not None
                and response.status_code < 400
                and "text/event-stream" in response.headers.get("content-type", "")
            ):
                ahead = await read_ahead(response, lease, chunk_timeout)
                stream = LeasedStream(response, lease, chunk_timeout, stream_then, ahead)
                lease.keep()  # the stream releases it from now on
                return httpx.Response(
                    response.status_code,
                    headers=plain_headers(response.headers),
                    stream=stream,
                    request=request,
                    extensions=response.extensions,
                )
            await response.aread()
        finally:
            if not lease.kept:
                with anyio.CancelScope(shield=True):  # a cancelled read still frees the socket
                    await response.aclose()
    return response
