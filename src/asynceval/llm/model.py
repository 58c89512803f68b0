"""ChatModel: a stateless codec for one provider API; the funnel sends what it encodes.

A provider subclass only says how to build a request body and how to read a completion from the
answer. `generate` encodes the messages, hands the bytes to its route into the funnel
(`asynceval.funnel.Route.post`: cache, slot, rate windows, deadline, retries, usage, the send)
and reads the reply inside the attempt, so an answer it cannot read is retried. A model holds
immutable fields (model name, base URL, key, options); everything mutable (the limiter, rate
buckets, connection pools per event loop, the embedded simulated provider) belongs to the
`Runtime`, the model's own or `Runtime.current()` at the moment of each call. So one model object
serves any number of runs, threads and event loops, in turn or at once, and still works after
`aclose()`. With no base URL anywhere, it talks to the embedded simulator, in process.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, SecretStr

from .. import events
from .._jsonfast import encoder
from .._version import __version__
from ..config import HttpTransport, Lane, Settings
from ..errors import ConfigError
from ..funnel import (
    SIM_BASE_URL,
    UNSET,
    Overrides,
    Reply,
    Route,
    Usage,
    check_response,
    in_process,
    parse_or_malformed,
)
from ..limits import ConcurrencyController, RateLimiter
from ..runtime import Price, Runtime, from_thread
from .types import Completion, Messages, as_messages

if TYPE_CHECKING:
    import httpx

    from ..sim import SimConfig, SimProvider

SIM_MODEL = "asynceval-sim"
_encode = encoder()  # json.dumps without its per-call set-up
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
    or takes any httpx transport (then used even for the embedded simulator's URL, and never
    closed by the model). `sim_config` configures a simulator of the model's own when it talks
    to the embedded one (no base URL, no transport object), and is unused otherwise (so setting
    LLM_BASE_URL points the same code at a real provider). `structured_output=False` declares a
    provider without JSON-schema output (older Ollama models, some vLLM servers). `price` is
    what this model's calls cost, in genai-prices' vocabulary (`{"input_mtok": 2.5,
    "output_mtok": 10, "cache_read_mtok": 1.25}`, USD per million tokens), ahead of
    LLM_PRICES_FILE and genai-prices' own prices (with `batch` / `flex` entries for those lanes).
    `lane` (default LLM_LANE) is how its calls go: live, flex (OpenAI's `service_tier: "flex"`:
    half the price, slower) or batch (provider batches).
    """

    path: str
    flex = False
    """Whether the provider's API has OpenAI's flex processing (`service_tier: "flex"`)."""

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
        price: Price | Mapping[str, Any] | None = None,
        lane: Lane | None = None,
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
        self._transport = (
            transport
            if transport is not None
            else (settings.llm_http_transport if settings is not None else None)
        )
        if base_url is None:
            base_url = SIM_BASE_URL
            model = model or defaults.llm_model or SIM_MODEL
        self._in_process = in_process(base_url, self._transport)
        if sim_config is not None and self._in_process:  # else unused: a real provider answers
            from ..sim import SimProvider  # only when the embedded provider is used

            self._own_sim = SimProvider(sim_config)
        model = model or defaults.llm_model
        if not model:
            raise ConfigError(f"no model name for {base_url}: pass model= or set LLM_MODEL")
        self.model = model
        self.lane: Lane | None = self._checked_lane(lane)  # None: LLM_LANE's
        self._price_spec = price  # `price=`: ahead of LLM_PRICES_FILE and genai-prices'
        self.price = None if price is None else Price.of(price, model, lane or "live")
        self.base_url = _checked_base_url(base_url)
        self._own = Overrides.of(
            controller=controller, rate_limiter=rate_limiter, settings=settings
        )
        self._last_route: tuple[weakref.ref[Runtime], Route] | None = None
        headers = self._headers(self._api_key.get_secret_value() if self._api_key else None)
        self._headers_sent = {
            "content-type": "application/json",
            "accept": "application/json",
            "accept-encoding": "gzip, deflate",  # what httpx's client would ask for
            "user-agent": f"asynceval/{__version__}",
            **headers,
        }

    def _checked_lane(self, lane: Lane | None) -> Lane | None:
        """`lane=` as given, refused when it is none of the lanes or one this API has not."""
        if lane is not None and lane not in ("live", "flex", "batch"):
            raise ConfigError(f"lane must be live, flex or batch, got {lane!r}")
        if lane == "flex" and not self.flex:
            raise ConfigError(
                f"{type(self).__name__} has no flex lane (flex is OpenAI's service_tier): use "
                "lane='live' or 'batch'"
            )
        return lane

    @property
    def settings(self) -> Settings:
        """The settings this model was given, else its runtime's (`Runtime.current()`'s)."""
        return self._settings or (self.runtime or Runtime.current()).settings

    @property
    def sim(self) -> SimProvider | None:
        """The simulated provider this model talks to when it has no base URL (its `stats()`
        are handy), else None."""
        if not self._in_process:
            return None
        return self._own_sim or (self.runtime or Runtime.current()).sim

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

    def _route(self, runtime: Runtime) -> Route:
        """This model's way into `runtime`'s funnel: built once per runtime (a runtime's limiter,
        windows, policy and settings are fixed for its life), not once per call."""
        cached = self._last_route
        if cached is not None and cached[0]() is runtime:
            return cached[1]
        lane = self.lane or runtime.settings.llm_lane
        if lane == "flex" and not self.flex:
            raise ConfigError(
                f"LLM_LANE is flex, which {type(self).__name__} has not (flex is OpenAI's "
                "service_tier): give this model lane='live' or 'batch'"
            )
        price = self.price
        if self._price_spec is not None and lane != (self.lane or "live"):
            price = Price.of(self._price_spec, self.model, lane)
        route = Route(
            runtime,
            f"{self.base_url}/{self.path}",
            own=self._own,
            transport=self._transport,
            headers=self._headers_sent,
            sim=self._own_sim,
            price=price,
            lane=lane,
        )
        # Weakly: a runtime the application dropped still closes its pools when collected.
        self._last_route = (weakref.ref(runtime), route)  # one assignment: thread-safe
        return route

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
        route = self._route(self.runtime or Runtime.current())
        if route.lane == "flex":
            params.setdefault("service_tier", "flex")
        body = self._body(as_messages(messages), response_format, params)
        fmt = response_format

        def decode(reply: Reply) -> Completion:
            completion: Completion = parse_or_malformed(
                check_response(reply), lambda data: self._parse(data, fmt)
            )
            return completion

        content = _encode(body).encode()
        return await route.post(content, body, decode, _usage_of, agent=agent, dimension=dimension)

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
        """Close the idle connections of this model's pool in this event loop (a pool it shares
        with other callers of the same provider under the same limiter); a later call reopens
        them. A transport object given to the model stays open: it is the caller's to close."""
        if self._in_process:
            return  # served in process: no connections
        runtime = self.runtime or Runtime.current()
        await runtime.pools.aclose(self._route(runtime).key)

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


def _usage_of(completion: Completion) -> Usage:
    return completion.usage
