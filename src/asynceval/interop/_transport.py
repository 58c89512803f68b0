"""FunnelTransport and SyncFunnelTransport: any httpx client's requests through the funnel.

Every request is one LLM call through the funnel our own models use (`asynceval.funnel`): rate
windows, the global slot (and the endpoint's pause and adaptive limit), LLM_CALL_TIMEOUT per
attempt, retries on 408, 429, 502, 503 and connection errors with Retry-After, and the same
events, with `agent` from the client (else the component the engine is running) and `dimension`
from the context the engine binds, and usage counted into the running repetition. What the
framework gets back is the provider's answer: the response, or after the last attempt its error
response (so the SDK raises its own error type), or an `httpx.ConnectError` /
`httpx.ReadTimeout` when that attempt got no response.

A streamed answer (server-sent events) keeps its slot until the stream is read to its end or
closed, and is retried until its first content; LLM_STREAM_IDLE_TIMEOUT bounds each wait for a
chunk.

The SDK's own settings are respected: a read timeout set on its client or request ends the call
at that time as a timeout (`httpx.ReadTimeout`, not retried by the funnel), and its own retries
(marked `x-stainless-retry-count`), each a whole call through the funnel, are counted and warned
about once per run (`asynceval.interop._sdk`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import httpx

from .. import events
from ..config import Settings
from ..funnel import UNSET, Overrides, Route, endpoint_of, send_from_thread
from ..limits import ConcurrencyController, RateLimiter
from ..runtime import Runtime
from ._sdk import RETRY_HEADER, note_sdk_retry, sdk_retry_number


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
        self._own = Overrides.of(
            controller=controller, rate_limiter=rate_limiter, settings=settings
        )
        # The route of each endpoint (API base URL), for the runtime it was built on (weakly: a
        # runtime the application dropped still closes its pools when collected).
        self._routes: dict[str, tuple[weakref.ref[Runtime], Route]] = {}
        self._routes_lock = threading.Lock()

    def _route(self, runtime: Runtime, url: httpx.URL) -> Route:
        endpoint = endpoint_of(url)
        cached = self._routes.get(endpoint)
        if cached is not None and cached[0]() is runtime:
            return cached[1]
        route = Route(runtime, str(url), own=self._own, transport=self._transport)
        with self._routes_lock:
            if len(self._routes) >= MAX_ROUTES:  # a client fetching many sites (an agent's tool)
                self._routes.pop(next(iter(self._routes)), None)
            self._routes[endpoint] = (weakref.ref(runtime), route)
        return route

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        runtime = self.runtime or Runtime.current()
        route = self._route(runtime, request.url)
        if request.headers.get(RETRY_HEADER, "0") != "0":  # an SDK's own retry (rare)
            return await self._sdk_retry(runtime, route, request)
        return await route.send(request, agent=self.agent)

    async def _sdk_retry(
        self, runtime: Runtime, route: Route, request: httpx.Request
    ) -> httpx.Response:
        """An SDK's retry of a request the funnel already retried: counted and warned about
        (`_sdk`), and every event of its call carries `sdk_retry` (the SDK's retry number)."""
        number = sdk_retry_number(request)
        if not number:
            return await route.send(request, agent=self.agent)
        note_sdk_retry(runtime, request)
        with events.bind_context(sdk_retry=number):
            return await route.send(request, agent=self.agent)


MAX_ROUTES = 64
"""Routes a transport keeps (the oldest goes first): a route is cheap to build again."""


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
        return send_from_thread(self._async.handle_async_request, request)
