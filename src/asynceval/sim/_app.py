"""SimProvider: the simulated LLM provider as a raw ASGI 3 application.

Routes: `POST /v1/chat/completions` (OpenAI chat completions), `POST /v1/responses` (OpenAI
Responses API), `POST /v1/messages` (Anthropic), `GET /v1/models` and `GET /v1/models/{id}`,
`GET /stats`, `POST /stats/reset`; and the batch APIs' resource routes, `/v1/files`,
`/v1/batches` and `/v1/messages/batches` (`asynceval.sim._batches`). Unknown paths answer 404,
wrong methods 405, unreadable bodies and parameters the simulator cannot honour 400.

A completion request goes through, in order: counting, the RPM and TPM caps, the concurrency cap
(all answer 429 at once and are not in flight), then, once admitted and in flight: `fail_first`,
`fault_rates`, `hang_rate`, the latency sleep, `malformed_rate`/`truncated_rate`, the answer.
A streamed answer (`"stream": true`) is sent as server-sent events once the latency has passed,
`stream_chunk_delay` seconds between two events; the request stays in flight until the last
event is sent or the client goes away. Truncation cuts a stream after half its events.

With an RPM or TPM cap on, every answer of a completion route announces the caps in rate-limit
headers, OpenAI's `x-ratelimit-*` on `/v1/chat/completions` and `/v1/responses`, Anthropic's
`anthropic-ratelimit-*` on `/v1/messages` (limits per minute, what the window has left, when it
is whole again; see `asynceval.sim._rates`). A cap's 429 says its budget is spent (remaining 0,
with `retry-after-ms`); a concurrency 429 does not (an overload).
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple

import anyio

from asynceval.sim._anthropic import ANTHROPIC
from asynceval.sim._asgi import (
    Header,
    Message,
    Receive,
    Scope,
    Send,
    call_of,
    lifespan,
    read_body,
    send_reply,
    send_response,
    wait_for_disconnect,
)
from asynceval.sim._batches import BatchRoutes
from asynceval.sim._compose import compose, request_digest
from asynceval.sim._compose import ident as ident_of
from asynceval.sim._config import SimConfig
from asynceval.sim._dialect import (
    BadRequest,
    Dialect,
    Parsed,
    Usage,
    status_message,
)
from asynceval.sim._faults import Corruption, Draws
from asynceval.sim._memory import AttemptMemory
from asynceval.sim._models import MODELS_PATH, model_route
from asynceval.sim._openai import OPENAI
from asynceval.sim._rates import RateCaps, announcing, retry_headers
from asynceval.sim._responses import RESPONSES
from asynceval.sim._sse import send_stream
from asynceval.sim._stats import Stats

_ROUTES: dict[str, Dialect] = {
    "/v1/chat/completions": OPENAI,
    "/v1/responses": RESPONSES,
    "/v1/messages": ANTHROPIC,
}
_RETRY_STATUSES = frozenset({429, 503, 529})
_MALFORMED = b"<html><body><h1>502 Bad Gateway</h1>simulated malformed body</body></html>"
_ALLOW_POST: tuple[Header, ...] = ((b"allow", b"POST"),)
_ALLOW_GET: tuple[Header, ...] = ((b"allow", b"GET"),)


class SimProvider:
    """The simulated provider: an ASGI app for `httpx.ASGITransport(app=...)` or uvicorn.

    Deterministic under `config.seed`: answers depend on (seed, path, body), and each attempt's
    faults and latency on (seed, path, body, attempt index of that body), never on arrival order.
    Attempt indexes count admitted attempts only (cap 429s do not advance them) and survive
    `reset_stats()`; `reset()` forgets them too. They are kept for the `config.attempt_memory`
    most recently admitted distinct requests only: an older one starts again at attempt 0.

    Nothing it keeps grows with the number of requests served: attempt indexes are capped by
    `attempt_memory`, the RPM window and the rate witnesses hold the last `rate_window` seconds,
    and the status counts one entry per status code. Only what clients make is kept until they
    delete it or `reset()`: uploaded files, batches and their output (`_batches`; batch lines
    have attempt indexes of their own, capped alike). It holds no event-loop primitive, so loops
    in several threads may share it (a Runtime's embedded one is shared); its counters are plain
    integers, exact within one thread.
    """

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config if config is not None else SimConfig()
        self._stats = Stats(self.config.rate_window)
        self._attempts = AttemptMemory(self.config.attempt_memory)
        # The last `rate_window` seconds of admissions and tokens, for the RPM and TPM caps.
        self._caps = RateCaps(self.config.rpm, self.config.tpm, self.config.rate_window)
        self._retry_headers = retry_headers(self.config.retry_after)
        self._salt = b"%d:" % self.config.seed
        self._batches = BatchRoutes(self.config, self._stats)

    def stats(self) -> dict[str, Any]:
        """The `GET /stats` document (a fresh dict; its keys are described on `Stats`).

        Keys: requests, statuses, in_flight, max_in_flight, tokens, window_max_requests and
        window_max_tokens; and batches, once a batch counter is not zero (`BatchCounts`).
        """
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        """Zero the counters and rate witnesses (`POST /stats/reset`).

        Attempt indexes and the RPM cap's window stay: a reset between runs does not lift the cap.
        """
        self._stats.reset()

    def reset(self) -> None:
        """Zero the counters, forget attempt indexes, the RPM window, files and batches: as good
        as new."""
        self._stats.reset()
        self._attempts.clear()
        self._caps.clear()
        self._batches.clear()

    async def respond(self, path: str, body: bytes) -> SimReply:
        """Answer one POST to a completion route (`/v1/chat/completions`, ...) in process, without
        HTTP emulation: the same admission, caps, faults, latency, answers and counters as over
        ASGI or a socket. A streamed request's events come back as one body once all are sent.
        A hang waits until the caller is cancelled (its timeout), as a hung socket would."""
        reply = _Collector()
        dialect = _ROUTES.get(path)
        if dialect is None:
            await _send_json(reply, 404, OPENAI.error(404, f"No route for POST {path}", None))
        else:
            await self._complete(dialect, path, body, _never_disconnects, reply)
        return reply.finish()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point: HTTP and lifespan scopes (anything else is ignored)."""
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await lifespan(receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if len(path) > 1:
            path = path.rstrip("/")
        method: str = scope["method"]
        dialect = _ROUTES.get(path)
        if dialect is not None:
            if method != "POST":
                await _send_json(
                    send, 405, dialect.error(405, _not_allowed(method), None), _ALLOW_POST
                )
                return
            body = await read_body(receive)
            if body is not None:
                await self._complete(dialect, path, body, receive, send)
        elif BatchRoutes.serves(path):
            body = await read_body(receive)
            if body is not None:
                await send_reply(send, self._batches.handle(call_of(scope, path, body)))
        elif path == "/stats":
            if method != "GET":
                await _send_json(
                    send, 405, OPENAI.error(405, _not_allowed(method), None), _ALLOW_GET
                )
            else:
                await _send_json(send, 200, self._stats.snapshot())
        elif path.startswith(MODELS_PATH) and (document := model_route(path)) is not None:
            if method != "GET":
                await _send_json(
                    send, 405, OPENAI.error(405, _not_allowed(method), None), _ALLOW_GET
                )
            else:
                await _send_json(send, 200, document)
        elif path == "/stats/reset":
            if method != "POST":
                await _send_json(
                    send, 405, OPENAI.error(405, _not_allowed(method), None), _ALLOW_POST
                )
            else:
                self._stats.reset()
                await _send_json(send, 200, self._stats.snapshot())
        else:
            await _send_json(send, 404, OPENAI.error(404, f"No route for {method} {path}", None))

    async def _complete(
        self, dialect: Dialect, path: str, body: bytes, receive: Receive, send: Send
    ) -> None:
        """Count, parse, apply the caps, then serve the request while it is in flight."""
        stats = self._stats
        config = self.config
        now = time.monotonic()
        stats.arrive(now)
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise BadRequest("the request body must be a JSON object")
            parsed = dialect.parse(request)
        except BadRequest as exc:
            await self._error(send, dialect, 400, str(exc), param=exc.param)
            return
        except Exception as exc:  # not JSON, or JSON of the wrong shape
            await self._error(send, dialect, 400, f"Could not parse the request body: {exc}")
            return
        caps = self._caps
        if caps.on:  # every answer announces the caps (see `asynceval.sim._rates`)
            refused = caps.refusal(now)
            if refused is not None:
                announced = (*retry_headers(refused[1]), *caps.headers(path, now))
                await self._error(send, dialect, 429, refused[0], announced)
                return
        if config.max_concurrency is not None and stats.in_flight >= config.max_concurrency:
            message = f"Simulated concurrency limit: {config.max_concurrency} requests at once"
            busy = self._retry_headers
            await self._error(send, dialect, 429, message, busy + caps.headers(path, now))
            return
        if caps.on:
            caps.admit(now)
            send = announcing(send, caps.headers(path, now))
        digest = request_digest(path, body)
        attempt = self._attempts.next(digest)
        stats.enter()
        try:
            await self._serve(dialect, parsed, digest, attempt, receive, send)
        finally:
            stats.leave()

    async def _serve(
        self,
        dialect: Dialect,
        parsed: Parsed,
        digest: bytes,
        attempt: int,
        receive: Receive,
        send: Send,
    ) -> None:
        """Inject the configured faults and latency for this attempt, then answer."""
        config = self.config
        if attempt < config.fail_first:
            status = config.fail_first_status
            message = f"{status_message(status)} (attempt {attempt + 1} of {config.fail_first})"
            await self._error(send, dialect, status, message, self._retry_for(status))
            return
        draws = Draws.for_attempt(config.seed, digest, attempt)
        status_or_none = draws.fault_status(config.fault_rates)
        if status_or_none is not None:
            status = status_or_none
            await self._error(
                send, dialect, status, status_message(status), self._retry_for(status)
            )
            return
        if draws.hang < config.hang_rate:
            await wait_for_disconnect(receive)
            return
        delay = draws.delay(config)
        if delay > 0:
            await anyio.sleep(delay)
        corruption = draws.corruption(config)
        await self._answer(dialect, parsed, digest, attempt, corruption, receive, send)

    async def _answer(
        self,
        dialect: Dialect,
        parsed: Parsed,
        digest: bytes,
        attempt: int,
        corruption: Corruption,
        receive: Receive,
        send: Send,
    ) -> None:
        """The 200 answer for this attempt, malformed or truncated when the draw says so."""
        if corruption is Corruption.MALFORMED:
            self._stats.record(200)
            await send_response(send, 200, _MALFORMED)
            return
        try:
            replies, usage = compose(parsed, self._salt + digest, self.config.tokens_per_char)
        except Exception as exc:  # a schema the generator cannot satisfy
            await self._error(send, dialect, 400, f"The simulator cannot answer this: {exc!r}")
            return
        ident = ident_of(digest, attempt)
        if parsed.stream and dialect.stream is not None:
            frames = dialect.stream(parsed, replies, ident, int(time.time()), usage)
            await self._stream(frames, corruption, usage, receive, send)
            return
        document = dialect.render(parsed, replies, ident, int(time.time()), usage)
        payload = json.dumps(document, separators=(",", ":")).encode()
        if corruption is Corruption.TRUNCATED:
            payload = payload[: len(payload) // 2]
        else:
            # Only a readable answer counts: a truncated body's usage never reaches the client.
            self._answered(usage)
        self._stats.record(200)
        await send_response(send, 200, payload)

    async def _stream(
        self,
        frames: list[bytes],
        corruption: Corruption,
        usage: Usage,
        receive: Receive,
        send: Send,
    ) -> None:
        """Send a streamed 200 answer; its usage counts once the whole stream was sent."""
        if corruption is Corruption.TRUNCATED:
            frames = frames[: len(frames) // 2]
        self._stats.record(200)
        finished = await send_stream(send, receive, frames, self.config.stream_chunk_delay)
        if finished and corruption is Corruption.NONE:
            self._answered(usage)

    def _answered(self, usage: Usage) -> None:
        """A readable answer with `usage` was sent: it counts, towards the TPM cap too."""
        now = time.monotonic()
        self._stats.answered(now, usage.prompt, usage.completion)
        self._caps.spend(now, usage.prompt + usage.completion)

    def _retry_for(self, status: int) -> tuple[Header, ...]:
        return self._retry_headers if status in _RETRY_STATUSES else ()

    async def _error(
        self,
        send: Send,
        dialect: Dialect,
        status: int,
        message: str,
        headers: tuple[Header, ...] = (),
        *,
        param: str | None = None,
    ) -> None:
        """Send an error answer in the route's format; `param` names the parameter to blame."""
        self._stats.record(status)
        payload = json.dumps(dialect.error(status, message, param)).encode()
        await send_response(send, status, payload, headers)


class SimReply(NamedTuple):
    """What `SimProvider.respond` answers: status, headers (lower-case names), whole body."""

    status_code: int
    headers: dict[str, str]
    content: bytes


class _Collector:
    """An ASGI `send` that keeps the response in memory."""

    __slots__ = ("chunks", "headers", "status")

    def __init__(self) -> None:
        self.status = 500
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in message["headers"]}
        else:
            self.chunks.append(message.get("body", b""))

    def finish(self) -> SimReply:
        chunks = self.chunks
        return SimReply(
            self.status, self.headers, chunks[0] if len(chunks) == 1 else b"".join(chunks)
        )


async def _never_disconnects() -> Message:
    """`receive` for an in-process caller: it leaves by being cancelled, never by a message."""
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


def sim_app(config: SimConfig | None = None) -> SimProvider:
    """A new `SimProvider` for `config` (the defaults when None)."""
    return SimProvider(config)


def _not_allowed(method: str) -> str:
    return f"Method {method} not allowed"


async def _send_json(
    send: Send, status: int, document: dict[str, Any], headers: tuple[Header, ...] = ()
) -> None:
    await send_response(send, status, json.dumps(document).encode(), headers)
