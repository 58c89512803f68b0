"""A transport's request through the funnel (`Route.send`): httpx in, httpx out.

Every request is one call of the route's gateway: rate windows, the global slot (and the endpoint's
pause and adaptive limit), LLM_CALL_TIMEOUT per attempt, retries on 408, 429, 502, 503 and
connection errors with Retry-After, the same events, and usage counted into the running repetition.
What the framework gets back is the provider's answer: the response, or after the last attempt the
last error response (so the SDK raises its own error type), or an `httpx.ConnectError` /
`httpx.ReadTimeout` when no response came. A streamed answer (server-sent events) keeps its slot
until it is read to its end or closed, and is retried until its first content (the send reads it
that far inside the attempt). A streamed chat completion asks for its usage, which a caller that
did not ask for it does not see (`asynceval.funnel._usage_chunk`). Inference requests are answered
from the run's call journal (a resumed repetition's finished calls) or the model-call cache when
they hold them (a stream once it was read to its end); a stored answer is checked whole (length
and digest, and a JSON body that parses) before an SDK gets it.

The caller's own timeout is respected (`caller_timeout`): the read timeout its SDK client or
request set bounds each request sent for it (not its wait for a slot), when it is shorter than
LLM_CALL_TIMEOUT; once it expires the call ends there (a `timeout` event, the slot released, no
retry of ours) and the SDK gets `httpx.ReadTimeout`, which it raises as its own timeout error (the
OpenAI SDK's `APITimeoutError`) at the time it was told.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import httpx

from .. import events
from ..errors import AttemptTimeout, LLMCallFailed, ProviderConnectionError
from ..runtime import CachedAnswer, from_thread
from ._cache import CacheUse
from ._held import Held, adopted, current_scope
from ._journal import current_journal
from ._lease import Lease
from ._replies import check_response, provider_error
from ._send import plain_headers, send
from ._stream import LeasedStream, SyncStream
from ._usage import StreamUsage, Usage, estimated_tokens, usage_from_json
from ._usage_chunk import UsageChunkFilter, asking_usage, refused, without_usage_chunk

if TYPE_CHECKING:
    from ._route import Route


async def exchange(route: Route, request: httpx.Request, agent: str | None) -> httpx.Response:
    """`Route.send` (see the module)."""
    cache = route.cache
    journal = current_journal()
    await request.aread()  # the body, kept for every attempt
    if route.lane == "flex":
        request = flex_request(request)
    # A streamed chat completion asks for its usage, which its caller may not see (_usage_chunk).
    endpoint = route.gateway.endpoint
    asked = None if endpoint in route.plain_streams else asking_usage(request)
    sent = asked or request
    use = None
    if (cache is not None or journal is not None) and cacheable(sent):
        url = route.cache_url(str(sent.url))
        use = CacheUse(cache, "POST", url, sent.content, sent.headers.items(), journal)
        answer = await use.lookup()
        if answer is not None and _whole(answer):
            use.hit(_answer_usage(answer), agent=agent, answer=answer)
            content = answer.content
            if asked is not None and "text/event-stream" in answer.content_type:
                content = without_usage_chunk(content)
            return httpx.Response(
                answer.status_code, headers=dict(answer.headers), content=content, request=request
            )
    response = await _call(route, sent, agent)
    if asked is not None and refused(response):  # a server that does not know the option
        route.plain_streams.add(endpoint)  # its later streams go as written, whoever sends
        asked, use = None, None
        response = await _call(route, request, agent)
    if asked is not None and isinstance(response.stream, LeasedStream):
        response.stream.hide = UsageChunkFilter()
    if use is not None and response.status_code < 300:
        if isinstance(response.stream, LeasedStream):  # kept once it is read to its end
            response.stream.on_complete = functools.partial(_store, use, response)
        elif not _error_body(response):
            await _store(use, response, response.content)
    return response


async def _call(route: Route, request: httpx.Request, agent: str | None) -> httpx.Response:
    if route.batches is not None:  # issue 29: the batch lane, if a batch API serves it
        batched = route.batches.send(route, request, agent)
        if batched is not None:
            response: httpx.Response = await batched
            return response
    gateway = route.gateway
    timeout = gateway.stream_idle_timeout
    own = caller_timeout(request)
    if own is not None and own >= gateway.call_timeout:
        own = None  # LLM_CALL_TIMEOUT comes first: the funnel's deadline, retried as ever
    elif own is not None:
        timeout = min(timeout, own)  # httpx's read timeout bounds each wait for a chunk too
    entry = await route.pools.enter(route.key, route.open_client)
    leave = _Once(entry.leave)  # a stream leaves when it ends, every other outcome here
    last: list[httpx.Response] = []  # the last attempt's error answer, for the SDK to raise

    async def attempt(lease: Lease) -> httpx.Response:
        last.clear()
        sending = send(entry.client, request, lease, stream_then=leave, chunk_timeout=timeout)
        response = await (sending if own is None else _within(own, sending, lease))
        if isinstance(response.stream, LeasedStream):
            return response
        return _answer(response, request, last)

    body = _json_or_none(request.content)
    try:
        response = await gateway.call(
            attempt,
            agent=agent,
            usage_of=_body_usage,
            estimated_tokens=estimated_tokens(request.content, body),
            # A streamed answer is never hedged (DESIGN section 17): its first byte is no answer.
            hedge=not (isinstance(body, dict) and body.get("stream") is True),
            costing=route.pricing.costing(request.content, body, request.url.path, request.method),
            url=request.url,
            body=body,
        )
    except _CallerTimeout as exc:
        leave()
        raise httpx.ReadTimeout(str(exc), request=request) from exc
    except LLMCallFailed as exc:
        leave()
        if last:
            return last[0]  # the provider's own answer: the SDK raises its own error
        if isinstance(exc.__cause__, AttemptTimeout):
            raise httpx.ReadTimeout(str(exc), request=request) from exc
        raise httpx.ConnectError(str(exc), request=request) from exc
    except BaseException:
        leave()
        raise
    if not isinstance(response.stream, LeasedStream):
        leave()
    return response


_FLEX_PATHS = ("/chat/completions", "/responses")


def flex_request(request: httpx.Request) -> httpx.Request:
    """In the flex lane, an OpenAI chat completion or response asked for without a service
    tier goes with `service_tier: "flex"` (DESIGN section 16); anything else as it is."""
    if request.method != "POST" or not request.url.path.rstrip("/").endswith(_FLEX_PATHS):
        return request
    body = _json_or_none(request.content)
    if not isinstance(body, dict) or "service_tier" in body:
        return request
    content = json.dumps({**body, "service_tier": "flex"}).encode()
    headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
    flexed = httpx.Request(
        request.method, request.url, headers=headers, content=content, extensions=request.extensions
    )
    return flexed


def caller_timeout(request: httpx.Request) -> float | None:
    """The timeout the caller set on its client or request, in seconds, or None: httpx's
    `timeout` extension holds connect, read, write and pool; the read timeout is the one that
    counts, being what a user means by `timeout=` (the OpenAI SDK's `timeout=1.0` sets all four;
    `httpx.Timeout(60, connect=5)` means 60 s for an answer). It bounds the request from its
    send, not the wait for a slot before it: that is the funnel's queue, which a caller's timeout
    must not cut short (a run queues most calls). The inner transport applies all four from the
    request besides: its read, write or pool timeout ends the call the same way, its connect
    timeout (which httpx-aiohttp also raises for a refused connection) is a connection failure,
    retried. `asynceval.http_client()` sets none: None."""
    timeout = request.extensions.get("timeout")
    read = timeout.get("read") if timeout else None
    if read is None:  # http_client()'s: the common case, answered first
        return None
    return float(read) if isinstance(read, int | float) and read > 0 else None


class _CallerTimeout(Exception):
    """The caller's own timeout (`caller_timeout`) expired on a request: the call ends there,
    not retried by the funnel (not a `ProviderError`, so the gateway lets it through at once,
    releasing the slot); the SDK gets `httpx.ReadTimeout`."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"the caller's timeout of {timeout_s:g} s expired")
        self.timeout_s = timeout_s


async def _within(limit: float, sending: Awaitable[httpx.Response], lease: Lease) -> httpx.Response:
    """`sending` within the caller's `limit`: its answer, else a `timeout` event (written while
    the slot is held, as the gateway writes its own) and `_CallerTimeout`. The inner transport
    applies the same read timeout from the request and may be the first to notice: its
    `ReadTimeout` (or a write or pool timeout) is the caller's timeout too."""
    with anyio.move_on_after(limit) as scope:
        try:
            return await sending
        except ProviderConnectionError as exc:
            if not scope.cancel_called and not _timed_out(exc):
                raise  # a failure to connect, or a broken connection: retried as ever
        except TimeoutError:
            if not scope.cancel_called:
                raise
    events.timeout(
        agent=lease.agent, dimension=lease.dimension, call_id=lease.call_id, timeout_s=limit
    )
    raise _CallerTimeout(limit)


def _timed_out(exc: BaseException) -> bool:
    """Whether the inner transport gave up waiting (read, write or pool; not connect, which
    httpx-aiohttp also raises for a refused connection)."""
    cause = exc.__cause__
    return isinstance(cause, httpx.TimeoutException) and not isinstance(cause, httpx.ConnectTimeout)


class _Once:
    """`leave()` of a pool entry, done once whoever calls first (the call, or its stream)."""

    __slots__ = ("_leave",)

    def __init__(self, leave: Callable[[], None]) -> None:
        self._leave: Callable[[], None] | None = leave

    def __call__(self) -> None:
        leave, self._leave = self._leave, None
        if leave is not None:
            leave()


def _answer(
    response: httpx.Response, request: httpx.Request, last: list[httpx.Response]
) -> httpx.Response:
    """A read answer as the framework gets it (headers of the decoded body); an error status or
    a broken JSON body raises the funnel's error, to be retried or to fail the call."""
    answer = httpx.Response(
        response.status_code,
        headers=plain_headers(response.headers),
        content=response.content,
        request=request,
        extensions=response.extensions,
    )
    if answer.status_code >= 400:
        last.append(answer)
        raise provider_error(answer)
    if "json" in answer.headers.get("content-type", ""):
        check_response(answer)  # a 2xx whose JSON is broken is malformed: retried
    return answer


_INFERENCE = ("/chat/completions", "/completions", "/messages", "/responses", "/embeddings")


def cacheable(request: httpx.Request) -> bool:
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


def _whole(answer: CachedAnswer) -> bool:
    """Whether a stored answer may be handed to an SDK: its digest was checked when it was read;
    a JSON body must parse too (an entry that does not is a miss, asked again and replaced), so
    no client ever meets a JSONDecodeError from a stored answer."""
    if "json" not in answer.content_type:
        return True
    return _json_or_none(answer.content) is not None


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


def send_from_thread(
    send: Callable[[httpx.Request], Awaitable[httpx.Response]], request: httpx.Request
) -> httpx.Response:
    """A sync client's request, sent by `send` on an event loop (the run's, from the engine's
    threads; the process's background loop, from the user's): the streams it opens count as
    this thread's, and a streamed answer is read from here chunk by chunk."""
    request.read()
    response = from_thread(_adopting, send, request, current_scope())
    if isinstance(response.stream, LeasedStream):
        response.stream = SyncStream(response.stream)
    return response


async def _adopting(
    send: Callable[[httpx.Request], Awaitable[httpx.Response]],
    request: httpx.Request,
    held: Held,
) -> httpx.Response:
    with adopted(held):
        return await send(request)
