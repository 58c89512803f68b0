"""FunnelTransport and SyncFunnelTransport: any httpx client's requests through the funnel.

Every request is one LLM call of the gateway our own models use: rate windows, the global slot
(and the endpoint's pause and adaptive limit), LLM_CALL_TIMEOUT per attempt, retries on 408,
429, 502, 503 and connection errors with Retry-After, and the same events, with `agent` and
`dimension` from the client or the context the engine binds, and usage counted into the running
repetition. What the framework gets back is the provider's answer: the response, or after the
last attempt the last error response (so the SDK raises its own error type), or an
`httpx.ConnectError` / `httpx.ReadTimeout` when no response came.

A streamed answer (server-sent events) keeps its slot until the stream is read to its end or
closed, and is retried only before its first byte; LLM_CALL_TIMEOUT then bounds each wait for
the next chunk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx

from ..config import Settings
from ..errors import (
    AttemptTimeout,
    LLMCallFailed,
    MalformedResponse,
    ProviderConnectionError,
    ProviderError,
    RateLimited,
)
from ..limits import ConcurrencyController, RateLimiter, RetryPolicy
from ..llm._http import parse_retry_after
from ..llm.gateway import Gateway, Lease
from ..llm.model import SIM_BASE_URL
from ..llm.types import Usage
from ..runtime import EndpointKey, Runtime, create_client, from_thread
from ._stream import LeasedStream, SyncStream, plain_headers
from ._usage import usage_from_json

_SIM_ORIGIN = SIM_BASE_URL.removesuffix("/v1")
_UNSET: Any = object()


class _Last:
    """The last error response of a call: what the framework gets once the funnel gives up."""

    __slots__ = ("response",)

    def __init__(self) -> None:
        self.response: httpx.Response | None = None


class FunnelTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends each request as one LLM call through the funnel.

    `transport` is what finally sends (default: the runtime's fast transport, per event loop;
    requests to the embedded simulated provider's URL are answered in-process). `agent` names the
    caller in events (default: the component the engine is running). `runtime` defaults to
    `Runtime.current()` at each request; `controller`, `rate_limiter` and `settings` override the
    runtime's, as on a model.
    """

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        agent: str | None = None,
        runtime: Runtime | None = None,
        controller: ConcurrencyController | None = None,
        rate_limiter: RateLimiter | None = _UNSET,
        settings: Settings | None = None,
    ) -> None:
        self._transport = transport
        self.agent = agent
        self.runtime = runtime
        self._controller = controller
        self._rate_limiter = rate_limiter
        self._settings = settings

    def _gateway(self, runtime: Runtime, endpoint: str) -> Gateway:
        settings = self._settings or runtime.settings
        return Gateway(
            controller=self._controller or runtime.limiter,
            retry_policy=RetryPolicy.from_settings(settings)
            if self._settings is not None
            else runtime.retry_policy,
            call_timeout=settings.llm_call_timeout,
            rate_limiter=runtime.rate if self._rate_limiter is _UNSET else self._rate_limiter,
            endpoint=endpoint,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        runtime = self.runtime or Runtime.current()
        await request.aread()  # the body, kept for every attempt
        origin = f"{request.url.scheme}://{request.url.netloc.decode('ascii')}"
        key = self._key(runtime, origin)
        entry = await runtime.pools.enter(key, lambda: self._open(runtime, origin))
        gateway = self._gateway(runtime, origin)
        last = _Last()
        timeout = gateway.call_timeout

        async def attempt(lease: Lease) -> httpx.Response:
            return await _send(entry.client, request, lease, last, timeout, entry.leave)

        try:
            response = await gateway.call(
                attempt,
                agent=self.agent,
                estimated_tokens=_estimate(request.content),
                usage_of=_body_usage,
            )
        except LLMCallFailed as exc:
            entry.leave()
            if last.response is not None and last.response.status_code == exc.status_code:
                return last.response  # the provider's own answer: the SDK raises its own error
            if isinstance(exc.__cause__, AttemptTimeout):
                raise httpx.ReadTimeout(str(exc), request=request) from exc
            raise httpx.ConnectError(str(exc), request=request) from exc
        except BaseException:
            entry.leave()
            raise
        if not isinstance(response.stream, LeasedStream):
            entry.leave()  # a stream leaves the pool when it is closed
        return response

    def _key(self, runtime: Runtime, origin: str) -> EndpointKey:
        if self._transport is not None:
            name = f"object:{id(self._transport)}"
        elif origin == _SIM_ORIGIN:
            name = f"sim:{id(runtime.sim)}"
        else:
            name = f"interop:{runtime.settings.llm_http_transport}"
        return EndpointKey(origin, name, ())

    def _open(self, runtime: Runtime, origin: str) -> httpx.AsyncClient:
        transport: Any
        if self._transport is not None:
            transport = self._transport
        elif origin == _SIM_ORIGIN:
            transport = httpx.ASGITransport(app=runtime.sim)
        else:
            transport = runtime.settings.llm_http_transport
        limit = (self._controller or runtime.limiter).limit
        return create_client(base_url=origin, limit=limit, transport=transport)


async def _send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    lease: Lease,
    last: _Last,
    chunk_timeout: float,
    leave: Callable[[], None],
) -> httpx.Response:
    """One attempt: the request, its status mapped to the funnel's errors, the body read
    within the slot (or a stream handed over with the lease)."""
    try:
        response = await client.send(request, stream=True)
    except httpx.DecodingError as exc:
        raise MalformedResponse(f"undecodable body: {exc}") from exc
    except (httpx.RequestError, aiohttp.ClientError) as exc:
        raise ProviderConnectionError(f"{type(exc).__name__}: {exc}") from exc
    try:
        if response.status_code < 400 and "text/event-stream" in response.headers.get(
            "content-type", ""
        ):
            lease.keep()
            stream = LeasedStream(response, lease, chunk_timeout, leave)
            return httpx.Response(
                response.status_code,
                headers=plain_headers(response.headers),
                stream=stream,
                request=request,
                extensions=response.extensions,
            )
        content = await response.aread()
    finally:
        if not lease.kept:
            await response.aclose()
    answer = httpx.Response(
        response.status_code,
        headers=plain_headers(response.headers),
        content=content,
        request=request,
        extensions=response.extensions,
    )
    if response.status_code >= 400:
        last.response = answer
        raise _error(answer)
    if "json" in response.headers.get("content-type", "") and not _is_json(content):
        raise MalformedResponse(
            f"HTTP {response.status_code} with a body that is not JSON",
            body=content[:2000].decode(),
        )
    return answer


def _error(response: httpx.Response) -> ProviderError:
    status = response.status_code
    cls = RateLimited if status == 429 else ProviderError
    return cls(
        _message(response),
        status_code=status,
        retry_after=parse_retry_after(response.headers),
        body=response.text[:2000],
    )


def _message(response: httpx.Response) -> str:
    try:
        body = json.loads(response.content)
        error = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    except ValueError:
        pass
    return response.text[:500] or response.reason_phrase


def _is_json(content: bytes) -> bool:
    try:
        json.loads(content)
    except ValueError:
        return False
    return True


def _body_usage(response: httpx.Response) -> Usage | None:
    """The usage a read body reports (a streamed one reports it when its lease is released)."""
    return usage_from_json(response.content)


def _estimate(content: bytes) -> int:
    """Tokens to charge the rate windows before the answer says: prompt size + the cap asked."""
    try:
        body = json.loads(content)
    except ValueError:
        return len(content) // 4
    cap = 0
    if isinstance(body, dict):
        for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            if isinstance(body.get(name), int):
                cap = body[name]
                break
    return len(content) // 4 + cap


class SyncFunnelTransport(httpx.BaseTransport):
    """`FunnelTransport` for sync clients: each request runs on an event loop through the same
    funnel: the run's, from the engine's worker threads; the process's background loop, from
    threads the user started. Same arguments as `FunnelTransport`."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None, **kwargs: Any) -> None:
        self._async = FunnelTransport(transport, **kwargs)

    @property
    def agent(self) -> str | None:
        return self._async.agent

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        response = from_thread(self._async.handle_async_request, request)
        if isinstance(response.stream, LeasedStream):
            response.stream = SyncStream(response.stream)
        return response
