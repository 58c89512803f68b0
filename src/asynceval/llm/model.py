"""ChatModel: a stateless codec for one provider API; the runtime sends what it encodes.

A provider subclass only says how to build a request body and how to read a completion from the
response. A model holds immutable fields (model name, base URL, key, options); everything mutable
(the limiter, rate buckets, connection pools per event loop, the embedded simulated provider)
belongs to the `Runtime`, the model's own or `Runtime.current()` at the moment of each call. So
one model object serves any number of runs, threads and event loops, in turn or at once, and
still works after `aclose()`. With no base URL anywhere, it talks to the embedded simulator.
"""

from __future__ import annotations

import json
import urllib.parse
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, SecretStr

from .. import events
from .._jsonfast import encoder
from .._version import __version__
from ..config import HttpTransport, Settings
from ..errors import ConfigError, ProviderError
from ..limits import ConcurrencyController, RateLimiter, RetryPolicy
from ..runtime import (
    CachedAnswer,
    EndpointKey,
    Runtime,
    create_client,
    from_thread,
    transport_of,
)
from ._cached import CacheUse
from ._http import (
    Reply,
    check_response,
    estimated_tokens,
    parse_or_malformed,
    post_to_transport,
    post_with_client,
)
from ._lease import Lease
from .gateway import UNSET, Gateway
from .types import Completion, Messages, as_messages

if TYPE_CHECKING:
    import httpx

    from ..sim import SimConfig, SimProvider

SIM_BASE_URL = "http://asynceval-sim/v1"
SIM_MODEL = "asynceval-sim"
_encode = encoder()  # json.dumps without its per-call set-up
_SIM_PATH = urllib.parse.urlsplit(SIM_BASE_URL).path  # where the simulator's routes are
ResponseFormat = Mapping[str, Any] | type[BaseModel]


def _checked_base_url(base_url: str) -> str:
    """The base URL without a trailing slash; refuses what cannot work or would leak a secret."""
    import httpx  # here, not at `import asynceval`: httpx brings its CLI (rich, click, pygments)

    url = httpx.URL(base_url)
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            f"LLM_BASE_URL must be an http(s) URL such as https://host/v1, got {base_url!r}"
        )
    if url.userinfo:
        raise ConfigError("LLM_BASE_URL must not hold credentials: set LLM_API_KEY (or api_key=)")
    for _, value in url.params.multi_items():
        events.register_secret(value)  # e.g. ?key=...: never written to an event
    return base_url.rstrip("/")


def response_format_for(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI `json_schema` response_format for a pydantic model class."""
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "schema": model.model_json_schema()},
    }


class ChatModel(ABC):
    """A chat model behind the bounded call path (`async with` it, or `aclose()` it).

    `model`, `base_url` and `api_key` default to LLM_MODEL, LLM_BASE_URL and LLM_API_KEY of
    `settings` if given, else of the runtime's settings. `runtime` defaults to `Runtime.current()`
    at each call. `controller` and `rate_limiter` override the runtime's shared ones (and so leave
    the process-wide limit: for tests and special cases); `settings` also fixes this model's
    retry policy and LLM_CALL_TIMEOUT. `transport` picks the HTTP transport ("aiohttp", "httpx")
    or takes any httpx transport. `structured_output=False` declares a provider without
    JSON-schema output (older Ollama models, some vLLM servers).
    """

    path: str

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | SecretStr | None = None,
        runtime: Runtime | None = None,
        controller: ConcurrencyController | None = None,
        rate_limiter: RateLimiter | None = UNSET,
        settings: Settings | None = None,
        transport: HttpTransport | httpx.AsyncBaseTransport | None = None,
        sim_config: SimConfig | None = None,
        structured_output: bool = True,
    ) -> None:
        self.runtime = runtime
        self._settings = settings
        defaults = settings or (runtime or Runtime.current()).settings
        self.structured_output = structured_output
        """Whether the provider honours `response_format` JSON schemas; False makes the judge
        panel (and other structured callers) ask for JSON in the prompt instead."""
        base_url = base_url or defaults.llm_base_url
        key = api_key if api_key is not None else defaults.llm_api_key
        self._api_key = key if isinstance(key, SecretStr) or key is None else SecretStr(key)
        events.register_secret(self._api_key)
        self._own_sim: SimProvider | None = None
        if base_url is None:
            if sim_config is not None:
                from ..sim import SimProvider  # only when the embedded provider is used

                self._own_sim = SimProvider(sim_config)
            base_url = SIM_BASE_URL
            model = model or defaults.llm_model or SIM_MODEL
        model = model or defaults.llm_model
        if not model:
            raise ConfigError(f"no model name for {base_url}: pass model= or set LLM_MODEL")
        self.model = model
        self.base_url = _checked_base_url(base_url)
        self._controller = controller
        self._rate_limiter = rate_limiter
        self._transport = (
            transport
            if transport is not None
            else (settings.llm_http_transport if settings is not None else None)
        )
        self._policy = RetryPolicy.from_settings(settings) if settings is not None else None
        self._call_timeout = settings.llm_call_timeout if settings is not None else None
        self._last_gateway: tuple[weakref.ref[Runtime], Gateway] | None = None
        headers = self._headers(self._api_key.get_secret_value() if self._api_key else None)
        self._headers_sent = {
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": f"asynceval/{__version__}",
            **headers,
        }
        self._header_key = tuple(self._headers_sent.items())
        # Absolute once, so httpx need not merge a relative path into base_url on every call.
        self._url = f"{self.base_url}/{self.path}"
        self._sim_path = f"{_SIM_PATH}/{self.path}"

    @property
    def settings(self) -> Settings:
        """The settings this model was given, else its runtime's (`Runtime.current()`'s)."""
        return self._settings or (self.runtime or Runtime.current()).settings

    @property
    def sim(self) -> SimProvider | None:
        """The simulated provider this model talks to when it has no base URL (its `stats()`
        are handy), else None."""
        if self._own_sim is not None:
            return self._own_sim
        if self.base_url != SIM_BASE_URL:
            return None
        return (self.runtime or Runtime.current()).sim

    @abstractmethod
    def _headers(self, api_key: str | None) -> dict[str, str]:
        """Headers sent with every request (authentication, API version)."""

    @abstractmethod
    def _body(
        self,
        messages: list[dict[str, Any]],
        response_format: Mapping[str, Any] | None,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        """The JSON request body for one call."""

    @abstractmethod
    def _parse(self, body: dict[str, Any], response_format: Mapping[str, Any] | None) -> Completion:
        """A Completion from a successful response body (KeyError etc. mean a malformed body)."""

    def _key(self, runtime: Runtime) -> EndpointKey:
        """Which of `runtime`'s pools this model's calls go through (not the embedded
        simulator's: those need no pool)."""
        chosen = self._transport or runtime.settings.llm_http_transport
        transport = chosen if isinstance(chosen, str) else f"object:{id(chosen)}"
        return EndpointKey(self.base_url, transport, self._header_key)

    def _open(self, runtime: Runtime) -> httpx.AsyncClient:
        """A new client for this model's endpoint (the runtime keeps it per event loop)."""
        transport = self._transport or runtime.settings.llm_http_transport
        return create_client(
            base_url=self.base_url + "/",
            limit=(self._controller or runtime.limiter).limit,
            transport=transport,
            headers=self._headers_sent,
        )

    def _gateway(self, runtime: Runtime) -> Gateway:
        """This model's gateway on `runtime`: built once per runtime (a runtime's limiter,
        windows, policy and settings are fixed for its life), not once per call."""
        cached = self._last_gateway
        if cached is not None and cached[0]() is runtime:
            return cached[1]
        gateway = Gateway.for_runtime(
            runtime,
            endpoint=self.base_url,
            controller=self._controller,
            rate_limiter=self._rate_limiter,
            retry_policy=self._policy,
            call_timeout=self._call_timeout,
        )
        # Weakly: a runtime the application dropped still closes its pools when collected.
        self._last_gateway = (weakref.ref(runtime), gateway)  # one assignment: thread-safe
        return gateway

    async def generate(
        self,
        messages: Messages,
        *,
        agent: str | None = None,
        dimension: str | None = None,
        response_format: ResponseFormat | None = None,
        **params: Any,
    ) -> Completion:
        """One chat completion through the bounded call path; raises `LLMCallFailed` on failure.

        `params` go into the request body as they are (temperature, max_tokens, tools, ...).
        `response_format` is the OpenAI shape or a pydantic model class.
        """
        if params.get("stream"):
            # A streamed body is not a completion: each attempt would fail as malformed and
            # be retried, three requests for nothing. Refused before anything is sent.
            raise ConfigError(
                f"{type(self).__name__}.generate returns the whole completion and does not "
                "stream: drop stream=True (to stream, use an SDK on asynceval's funnel: "
                "asynceval.interop.openai_client())"
            )
        if isinstance(response_format, type):
            response_format = response_format_for(response_format)
        body = self._body(as_messages(messages), response_format, params)
        content = _encode(body).encode()
        runtime = self.runtime or Runtime.current()
        if runtime.cache is None:
            return await self._funnel(runtime, content, body, response_format, agent, dimension)
        # Keyed by the body with its keys sorted: the order keyword arguments came in is no news.
        canonical = json.dumps(body, sort_keys=True).encode()
        url = self._url
        if self.base_url == SIM_BASE_URL:
            # One URL for every embedded simulator: its answers follow its seed and its token
            # counts its tokens_per_char, so models on other configurations keep their own.
            config = (self._own_sim or runtime.sim).config
            url += f"?sim_seed={config.seed}&sim_tokens_per_char={config.tokens_per_char!r}"
        use = CacheUse(runtime.cache, "POST", url, canonical, self._headers_sent.items())
        cached = await self._cached(use, response_format)
        if cached is not None:
            use.hit(cached.usage, agent=agent, dimension=dimension)
            return cached
        answered: list[Reply] = []  # the reply decoded, to be kept
        completion = await self._funnel(
            runtime, content, body, response_format, agent, dimension, answered
        )
        reply = answered[-1]
        content_type = reply.headers.get("content-type", "application/json")
        await use.store(CachedAnswer(reply.status_code, content_type, reply.content))
        return completion

    def _funnel(
        self,
        runtime: Runtime,
        content: bytes,
        body: Mapping[str, Any],
        response_format: Mapping[str, Any] | None,
        agent: str | None,
        dimension: str | None,
        answered: list[Reply] | None = None,
    ) -> Awaitable[Completion]:
        """The request through the gateway (what to await for it: the gateway's own call on the
        embedded simulator, no frame of ours between); the reply that decoded is appended to
        `answered`."""
        estimated = estimated_tokens(content, body)
        gateway = self._gateway(runtime)

        def decoded(reply: Reply) -> Completion:
            completion = self._decode(reply, response_format)
            if answered is not None:
                answered.append(reply)
            return completion

        if self.base_url == SIM_BASE_URL:
            # The embedded simulator is served in process, without HTTP emulation: same codec,
            # same funnel, same simulated provider (its counters see every request).
            sim = self._own_sim or runtime.sim
            path = self._sim_path

            async def simulated(lease: Lease) -> Completion:
                return decoded(await sim.respond(path, content))

            return gateway.call(
                simulated, agent=agent, dimension=dimension, estimated_tokens=estimated
            )
        return self._pooled(runtime, gateway, content, decoded, agent, dimension, estimated)

    async def _pooled(
        self,
        runtime: Runtime,
        gateway: Gateway,
        content: bytes,
        decoded: Callable[[Reply], Completion],
        agent: str | None,
        dimension: str | None,
        estimated: int,
    ) -> Completion:
        """The request over HTTP, on the runtime's pool for this model's endpoint."""
        pool = await runtime.pools.enter(self._key(runtime), lambda: self._open(runtime))
        try:
            client = pool.client
            transport = transport_of(client)
            headers = self._headers_sent

            async def attempt(lease: Lease) -> Completion:
                if transport is None:
                    return decoded(await post_with_client(client, self._url, content))
                return decoded(await post_to_transport(transport, self._url, headers, content))

            return await gateway.call(
                attempt, agent=agent, dimension=dimension, estimated_tokens=estimated
            )
        finally:
            pool.leave()

    async def _cached(
        self, use: CacheUse, response_format: Mapping[str, Any] | None
    ) -> Completion | None:
        """The completion of a stored answer; None on a miss, or for an entry this model cannot
        decode (then the call is made, and its answer replaces the entry)."""
        answer = await use.lookup()
        if answer is None:
            return None
        try:
            return self._decode(answer, response_format)
        except ProviderError:
            return None

    def _decode(self, response: Reply, response_format: Mapping[str, Any] | None) -> Completion:
        data = check_response(response)
        completion: Completion = parse_or_malformed(data, lambda b: self._parse(b, response_format))
        return completion

    def generate_sync(self, messages: Messages, **kwargs: Any) -> Completion:
        """`generate` for sync code in a worker thread: the engine's (sync hooks, `SyncAgent`),
        whose calls reach the run's loop through its bridge, or anyio's
        (`anyio.to_thread.run_sync`). Either way the call goes through the same limiter. From a
        thread abandoned by its repetition's timeout it raises `RepetitionExpired` at once; after
        the run, `RunFinished`. Calling it on the event loop thread is an error."""

        async def call() -> Completion:
            return await self.generate(messages, **kwargs)

        return from_thread(call)

    async def aclose(self) -> None:
        """Close this model's idle connections in this event loop; a later call reopens them."""
        if self.base_url == SIM_BASE_URL:
            return  # served in process: no connections
        runtime = self.runtime or Runtime.current()
        await runtime.pools.aclose(self._key(runtime))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"
