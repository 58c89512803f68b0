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

import functools
import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx

from ..config import Settings
from ..errors import (
    AttemptTimeout,
    LLMCallFailed,
)
from ..limits import ConcurrencyController, RateLimiter, RetryPolicy
from ..llm._cached import CacheUse
from ..llm._held import Held, adopted, current_scope
from ..llm._http import check_response, estimated_tokens, provider_error, request_errors
from ..llm._lease import Lease
from ..llm.gateway import UNSET, Gateway
from ..llm.model import SIM_BASE_URL
from ..llm.types import Usage
from ..runtime import CachedAnswer, EndpointKey, Runtime, create_client, from_thread
from ._stream import LeasedStream, SyncStream, plain_headers
from ._usage import StreamUsage, usage_from_json

_SIM_ORIGIN = SIM_BASE_URL.removesuffix("/v1")


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
        rate_limiter: RateLimiter | None = UNSET,
        settings: Settings | None = None,
    ) -> None:
        self._transport = transport
        self.agent = agent
        self.runtime = runtime
        self._controller = controller
        self._rate_limiter = rate_limiter
        self._policy = RetryPolicy.from_settings(settings) if settings is not None else None
        self._call_timeout = settings.llm_call_timeout if settings is not None else None

    def _gateway(self, runtime: Runtime, endpoint: str) -> Gateway:
        return Gateway.for_runtime(
            runtime,
            endpoint=endpoint,
            controller=self._controller,
            rate_limiter=self._rate_limiter,
            retry_policy=self._policy,
            call_timeout=self._call_timeout,
        )

    async def handle_for_thread(self, request: httpx.Request, held: Held) -> httpx.Response:
        """A sync client's request, made on a loop: its streams count as its thread's."""
        with adopted(held):
            return await self.handle_async_request(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        runtime = self.runtime or Runtime.current()
        await request.aread()  # the body, kept for every attempt
        use = None
        if runtime.cache is not None and _cacheable(request):
            use = CacheUse(
                runtime.cache, "POST", str(request.url), request.content, request.headers.items()
            )
            answer = await use.lookup()
            if answer is not None:
                use.hit(_answer_usage(answer), agent=self.agent)
                return httpx.Response(
                    answer.status_code,
                    headers=dict(answer.headers),
                    content=answer.content,
                    request=request,
                )
        response = await self._funnel(runtime, request)
        if use is not None and response.status_code < 300:
            if isinstance(response.stream, LeasedStream):  # kept once it is read to its end
                response.stream.on_complete = functools.partial(_store, use, response)
            elif not _error_body(response):
                await _store(use, response, response.content)
        return response

    async def _funnel(self, runtime: Runtime, request: httpx.Request) -> httpx.Response:
        origin = f"{request.url.scheme}://{request.url.netloc.decode('ascii')}"
        key = self._key(runtime, origin)
        gateway = self._gateway(runtime, origin)
        last = _Last()
        timeout = gateway.call_timeout
        entry = await runtime.pools.enter(key, lambda: self._open(runtime, origin))

        async def attempt(lease: Lease) -> httpx.Response:
            return await _send(entry.client, request, lease, last, timeout, entry.leave)

        try:
            response = await gateway.call(
                attempt,
                agent=self.agent,
                estimated_tokens=estimated_tokens(request.content, _json_or_none(request.content)),
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
    with request_errors():
        response = await client.send(request, stream=True)
    try:
        if response.status_code < 400 and "text/event-stream" in response.headers.get(
            "content-type", ""
        ):
            stream = LeasedStream(response, lease, chunk_timeout, leave)
            lease.keep()  # the stream releases it from now on
            return httpx.Response(
                response.status_code,
                headers=plain_headers(response.headers),
                stream=stream,
                request=request,
                extensions=response.extensions,
            )
        with request_errors():
            content = await response.aread()
    finally:
        if not lease.kept:
            with anyio.CancelScope(shield=True):  # a cancelled read still gives back the socket
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
        raise provider_error(answer)
    if "json" in response.headers.get("content-type", ""):
        check_response(answer)  # a 2xx whose JSON is broken is malformed: retried
    return answer


_INFERENCE = ("/chat/completions", "/completions", "/messages", "/responses", "/embeddings")


def _cacheable(request: httpx.Request) -> bool:
    """Whether an answer to `request` may come from the cache: an inference POST (not a file
    upload, a batch, a thread or a background response: their side effects must happen)."""
    if request.method != "POST" or not request.url.path.rstrip("/").endswith(_INFERENCE):
        return False
    if "multipart/" in request.headers.get("content-type", ""):
        return False
    body = _json_or_none(request.content)
    return isinstance(body, dict) and not body.get("background")


def _error_body(response: httpx.Response) -> bool:
    """A 2xx whose JSON says it is an error (some gateways answer errors with 200)."""
    if "json" not in response.headers.get("content-type", ""):
        return False
    body = _json_or_none(response.content)
    return isinstance(body, dict) and "error" in body and body["error"] is not None


async def _store(use: CacheUse, response: httpx.Response, content: bytes) -> None:
    content_type = response.headers.get("content-type", "application/octet-stream")
    await use.store(CachedAnswer(response.status_code, content_type, content))


def _answer_usage(answer: CachedAnswer) -> Usage | None:
    """The tokens a stored answer reports: a JSON body's usage, or a stream's last report."""
    if "text/event-stream" in answer.content_type:
        scanner = StreamUsage()
        scanner.feed(answer.content)
        return scanner.usage()
    return usage_from_json(answer.content)


def _body_usage(response: httpx.Response) -> Usage | None:
    """The usage a read body reports (a streamed one reports it when its lease is released)."""
    return usage_from_json(response.content)


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


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
        response = from_thread(self._async.handle_for_thread, request, current_scope())
        if isinstance(response.stream, LeasedStream):
            response.stream = SyncStream(response.stream)
        return response
