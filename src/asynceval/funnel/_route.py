"""Route: a caller's way into the funnel on one runtime, the funnel's one internal entry.

A model (`asynceval.llm`) and a transport (`asynceval.interop`) each build a route per runtime
and send every call through it. The route holds where the calls go (a URL, or the embedded
simulated provider, answered in process) and what bounds them (the runtime's gateway: limiter,
rate windows, retry policy and deadline, or the caller's own overrides), finds the loop's pool,
and keeps the run's call journal and the model-call cache in front of it all. It has two faces on one path:

- `post(content, body, read, ...)`: a codec's request (a POST of a JSON body to the route's URL,
  with its fixed headers); `read` turns the reply into the caller's result inside the attempt, so
  a body it cannot read is retried like any malformed answer. Raises `LLMCallFailed`.
- `send(request, ...)`: a transport's `httpx.Request`, whatever it is; returns the provider's
  answer as an `httpx.Response` (a streamed one holding its slot until read or closed), or once
  the funnel gives up, the last attempt's error answer so that the SDK raises its own error.

Cheap to build and holding no event-loop state: a model keeps its last route, a transport one
per API base URL (`endpoint_of`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .._jsonfast import encoder
from ..errors import ProviderError
from ..runtime import CachedAnswer, EndpointKey, Price, Runtime
from ..telemetry import current_telemetry
from ._cache import CacheUse
from ._costing import Costing, Pricing
from ._gateway import Gateway, Overrides
from ._journal import CallJournal, current_journal
from ._lease import Lease
from ._replies import Reply
from ._usage import Usage, estimated_tokens

if TYPE_CHECKING:
    import httpx

    from ..config import HttpTransport, Lane
    from ..sim import SimProvider
    from ._batch_lane import BatchLane

T = TypeVar("T")

SIM_BASE_URL = "http://asynceval-sim/v1"
"""The embedded simulated provider's base URL: a route to it is answered in process."""
SIM_ORIGIN = SIM_BASE_URL.removesuffix("/v1")

UsageOf = Callable[[T], Usage | None]
"""Reads the tokens a caller's result reports."""

_API_SEGMENTS = frozenset(
    {
        "assistants", "audio", "batches", "chat", "completions", "conversations", "embeddings",
        "files", "fine_tuning", "images", "messages", "models", "moderations", "realtime",
        "responses", "threads", "uploads", "vector_stores",
    }
)  # fmt: skip
"""Path segments that name an API resource: what comes before the first is the API's base."""
_canonical = encoder(sort_keys=True)
"""`json.dumps(body, sort_keys=True)`, without its per-call set-up (`asynceval._jsonfast`)."""


def origin_of(url: httpx.URL) -> str:
    """scheme://host[:port] as httpx normalises it (host in lower case, no default port)."""
    return f"{url.scheme}://{url.netloc.decode('ascii')}"


def endpoint_of(url: httpx.URL) -> str:
    """The endpoint whose 429 pause and adaptive limit a request to `url` meets: its API's base
    URL, i.e. the origin and the path before the first segment naming an API resource
    (`chat/completions`, `messages`, `responses`, `models` ...). So a model and an SDK client on
    `https://api.openai.com/v1` meet one endpoint, and two Azure deployments (or two servers
    behind one gateway) on one host keep their own. A path naming no resource: up to its last
    `/`."""
    segments = url.path.split("/")
    end = next((i for i, s in enumerate(segments) if s in _API_SEGMENTS), len(segments) - 1)
    return origin_of(url) + "/".join(segments[:end])


def in_process(url: str, transport: HttpTransport | httpx.AsyncBaseTransport | None) -> bool:
    """Whether calls to `url` go to the embedded simulated provider in process: its URL, with no
    transport object of the caller's (a transport named by LLM_HTTP_TRANSPORT cannot reach it;
    an object given can, and is used)."""
    return url.startswith(SIM_ORIGIN) and (transport is None or isinstance(transport, str))


class Route:
    """Where one caller's calls go on one runtime, and through which limits (see the module).

    `url` is the URL a `post` goes to (a transport's route is built on a request's URL, and
    sends each request to its own URL); its endpoint (`endpoint_of`) keys the 429 pause and the
    adaptive limit, its origin the connection pool. `own` replaces the runtime's limits for this
    caller, `price` the price of every model it sends, and `lane` how its calls go (live, flex,
    batch; default LLM_LANE); `transport` picks the HTTP transport
    ("aiohttp", "httpx", or any httpx transport; default LLM_HTTP_TRANSPORT); `headers` go with
    every `post`. With the embedded simulator's
    URL and no transport object, `sim` (default: the runtime's) answers: in process for a
    `post`, over ASGI for a `send` (which may stream).
    """

    __slots__ = (
        "_cache_url",
        "_headers",
        "_sim",
        "_sim_path",
        "_transport",
        "_url",
        "batches",
        "cache",
        "gateway",
        "key",
        "lane",
        "plain_streams",
        "pools",
        "pricing",
    )

    def __init__(
        self,
        runtime: Runtime,
        url: str,
        *,
        own: Overrides = Overrides(),  # noqa: B008 (an immutable tuple)
        transport: HttpTransport | httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        sim: SimProvider | None = None,
        price: Price | None = None,
        lane: Lane | None = None,
    ) -> None:
        import httpx  # built once per caller and runtime: not at `import asynceval`

        parsed = httpx.URL(url)
        origin = origin_of(parsed)
        endpoint = endpoint_of(parsed)
        self.lane: Lane = lane or runtime.settings.llm_lane
        self.gateway = gateway = Gateway.for_runtime(runtime, endpoint, own, lane=self.lane)
        # OpenTelemetry for its calls made outside a run (a run decides for its own calls).
        gateway.telemetry = telemetry = current_telemetry()
        if telemetry is not None:
            telemetry.watch_limiter(gateway.controller)
        # Each request's model priced (in its lane): the caller's own price, else the runtime's.
        self.pricing = Pricing(runtime.prices, endpoint, price, self.lane)
        self._url = url
        self._headers = dict(headers or {})
        self.pools = runtime.pools
        self.cache = runtime.cache
        self._sim: SimProvider | None = None
        self._sim_path = parsed.path
        self._transport = transport
        if in_process(origin, transport):
            self._sim = sim = sim or runtime.sim
            name = f"sim:{id(sim)}"
        elif transport is None or isinstance(transport, str):
            self._transport = transport or runtime.settings.llm_http_transport
            name = self._transport
        else:
            name = f"object:{id(transport)}"
        self._cache_url = self.cache_url(url)
        controller = self.gateway.controller
        self.key = EndpointKey(origin, name, id(controller), controller.limit)
        # Issue 29, the batch lane: its calls go into provider batches (`_batch_lane`).
        self.batches: BatchLane | None = _batch_lane(runtime, self.lane)
        # The runtime's endpoints that refused `stream_options` (`asynceval.funnel._usage_chunk`).
        self.plain_streams = runtime.plain_streams

    def cache_url(self, url: str) -> str:
        """The URL the model-call cache files an answer to `url` under: `url`, and for the
        embedded simulator its seed and tokens_per_char too (its answers follow them, so callers
        of simulators on other configurations keep their own)."""
        if self._sim is None:
            return url
        config = self._sim.config
        joint = "&" if "?" in url else "?"
        return f"{url}{joint}sim_seed={config.seed}&sim_tokens_per_char={config.tokens_per_char!r}"

    def open_client(self) -> httpx.AsyncClient:
        """A new client for this route's pool (the runtime keeps it per event loop)."""
        import httpx

        from ._clients import create_client

        transport = self._transport
        if self._sim is not None:  # a transport's request to the embedded simulator (streams)
            transport = httpx.ASGITransport(app=self._sim)
        assert transport is not None
        return create_client(
            base_url=self.key.origin, limit=self.key.connections, transport=transport
        )

    def post(
        self,
        content: bytes,
        body: Mapping[str, Any],
        read: Callable[[Reply], T],
        usage_of: UsageOf[T],
        *,
        agent: str | None = None,
        dimension: str | None = None,
    ) -> Awaitable[T]:
        """POST `content` (`body` encoded) to the route's URL as one call and return what `read`
        makes of the answer; raises `LLMCallFailed` when the funnel gives up. What to await:
        on the embedded simulator without a cache or journal, the gateway's own call, no frame
        between."""
        journal = current_journal()
        if self.cache is not None or journal is not None:
            return self._post_kept(content, body, read, usage_of, agent, dimension, journal)
        return self._post(content, body, read, usage_of, agent, dimension)

    def _post(
        self,
        content: bytes,
        body: Mapping[str, Any],
        read: Callable[[Reply], T],
        usage_of: UsageOf[T],
        agent: str | None,
        dimension: str | None,
    ) -> Awaitable[T]:
        if self.batches is not None:  # issue 29: the batch lane, if a batch API serves it
            batched = self.batches.post(
                self, self._url, self._headers, content, body, read, usage_of, agent, dimension
            )
            if batched is not None:
                return batched
        estimated = estimated_tokens(content, body)
        costing = self.pricing.costing(content, body)
        sim = self._sim
        if sim is not None:
            # Served in process without HTTP emulation: the same simulated provider (its
            # counters see every request), the same gateway, the same reader.
            path = self._sim_path

            async def simulated(lease: Lease) -> T:
                reply = await sim.respond(path, content)
                lease.answered(reply.headers, reply.status_code)
                return read(reply)

            return self.gateway.call(
                simulated,
                agent=agent,
                dimension=dimension,
                usage_of=usage_of,
                estimated_tokens=estimated,
                costing=costing,
                url=self._url,
                body=body,
            )
        return self._post_http(content, body, read, usage_of, agent, dimension, estimated, costing)

    async def _post_http(
        self,
        content: bytes,
        body: Mapping[str, Any],
        read: Callable[[Reply], T],
        usage_of: UsageOf[T],
        agent: str | None,
        dimension: str | None,
        estimated: int,
        costing: Costing | None,
    ) -> T:
        import httpx

        from ._send import send

        entry = await self.pools.enter(self.key, self.open_client)
        try:
            client = entry.client
            request: httpx.Request | None = None

            async def attempt(lease: Lease) -> T:
                # Built with the first slot, not before the wait for one: callers in line hold
                # no request, and the first sends are not held up by the building of the rest's.
                nonlocal request
                if request is None:
                    request = httpx.Request(
                        "POST", self._url, headers=self._headers, content=content
                    )
                return read(await send(client, request, lease))

            return await self.gateway.call(
                attempt,
                agent=agent,
                dimension=dimension,
                usage_of=usage_of,
                estimated_tokens=estimated,
                costing=costing,
                url=self._url,
                body=body,
            )
        finally:
            entry.leave()

    async def _post_kept(
        self,
        content: bytes,
        body: Mapping[str, Any],
        read: Callable[[Reply], T],
        usage_of: UsageOf[T],
        agent: str | None,
        dimension: str | None,
        journal: CallJournal | None,
    ) -> T:
        """`_post` behind the call journal and the model-call cache: a stored answer the reader
        can read is the result (no slot, nothing sent); else the call is made and its answer
        kept."""
        # Keyed by the body with its keys sorted: the order keyword arguments came in is no news.
        canonical = _canonical(body).encode()
        use = CacheUse(
            self.cache, "POST", self._cache_url, canonical, self._headers.items(), journal
        )
        stored = await use.lookup()
        if stored is not None:
            try:
                result = read(stored)
            except ProviderError:
                pass  # an entry this caller cannot read: asked again, and replaced
            else:
                use.hit(usage_of(result), agent=agent, dimension=dimension, answer=stored)
                return result
        answered: list[tuple[object, Reply]] = []

        def keeping(reply: Reply) -> T:
            result = read(reply)
            answered.append((result, reply))  # only a reply that reads
            return result

        result = await self._post(content, body, keeping, usage_of, agent, dimension)
        # The reply the caller got: with hedging, a losing request may have been read last.
        reply = next(r for kept, r in reversed(answered) if kept is result)
        content_type = reply.headers.get("content-type", "application/json")
        await use.store(CachedAnswer(reply.status_code, content_type, reply.content))
        return result

    async def send(self, request: httpx.Request, *, agent: str | None = None) -> httpx.Response:
        """A transport's request as one call (see the module): the provider's answer; once the
        funnel gives up, the last attempt's error answer if that attempt got one (so the SDK
        raises its own error), else `httpx.ReadTimeout` (it ran out of time) or
        `httpx.ConnectError` (no answer: the connection failed or the body was broken)."""
        from ._exchange import exchange  # httpx's side of the funnel, loaded with the first send

        return await exchange(self, request, agent)

    def __repr__(self) -> str:
        return f"Route({self._url!r}, key={self.key!r})"


def _batch_lane(runtime: Runtime, lane: str) -> BatchLane | None:
    """`runtime`'s batch lane for a route whose lane is `lane` (None unless it is `batch`: the
    batch lane's modules load with the first route that needs them, not with asynceval)."""
    if lane != "batch":
        return None
    from ._batch_lane import batch_lane

    return batch_lane(runtime, lane)
