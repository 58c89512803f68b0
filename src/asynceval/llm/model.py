"""ChatModel: what every provider shares: settings, the HTTP client, the gateway, the sync bridge.

A provider subclass only says how to build a request body and how to read a completion from the
response; every call still goes through the gateway (rate limiter, global concurrency slot,
per-attempt timeout, retry). With no base URL anywhere, the model talks to the in-process simulated
provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import aiohttp
import anyio
import anyio.from_thread
import httpx
from anyio.lowlevel import RunVar
from pydantic import BaseModel, SecretStr

from .. import events
from ..config import HttpTransport, Settings
from ..errors import ConfigError, MalformedResponse, ProviderConnectionError
from ..limits import ConcurrencyController, RateLimiter, RetryPolicy
from ..limits.controller import default_controller
from ..limits.rate import default_rate_limiter
from ._http import check_response, parse_or_malformed
from .gateway import Gateway
from .transport import create_client
from .types import Completion, Messages, as_messages

if TYPE_CHECKING:
    from ..sim import SimConfig, SimProvider

SIM_BASE_URL = "http://asynceval-sim/v1"
SIM_MODEL = "asynceval-sim"
ResponseFormat = Mapping[str, Any] | type[BaseModel]


def _checked_base_url(base_url: str) -> str:
    """The base URL without a trailing slash; refuses what cannot work or would leak a secret."""
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
    """A chat model behind the bounded, retrying call path (`async with` it, or `aclose()` it).

    `model`, `base_url` and `api_key` default to LLM_MODEL, LLM_BASE_URL and LLM_API_KEY. The
    controller defaults to the one shared by the whole event loop run (`default_controller`).
    `transport` picks the HTTP transport ("aiohttp", "httpx") or takes any httpx transport.
    `structured_output=False` declares a provider without JSON-schema output (older Ollama models,
    some vLLM servers).
    """

    path: str

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | SecretStr | None = None,
        controller: ConcurrencyController | None = None,
        rate_limiter: RateLimiter | None = None,
        settings: Settings | None = None,
        transport: HttpTransport | httpx.AsyncBaseTransport | None = None,
        sim_config: SimConfig | None = None,
        structured_output: bool = True,
    ) -> None:
        self.settings = settings = settings if settings is not None else Settings()
        self.structured_output = structured_output
        """Whether the provider honours `response_format` JSON schemas; False makes the judge
        panel (and other structured callers) ask for JSON in the prompt instead."""
        self.sim: SimProvider | None = None
        """The in-process simulated provider when no base URL is set (its `stats()` are handy)."""
        base_url = base_url or settings.llm_base_url
        key = api_key if api_key is not None else settings.llm_api_key
        self._api_key = key if isinstance(key, SecretStr) or key is None else SecretStr(key)
        events.register_secret(self._api_key)
        chosen_transport: HttpTransport | httpx.AsyncBaseTransport = (
            transport if transport is not None else settings.llm_http_transport
        )
        if base_url is None:
            from ..sim import SimConfig, SimProvider  # only when the embedded provider is used

            base_url = SIM_BASE_URL
            self.sim = SimProvider(sim_config or SimConfig())
            chosen_transport = httpx.ASGITransport(app=self.sim)
            model = model or settings.llm_model or SIM_MODEL
        model = model or settings.llm_model
        if not model:
            raise ConfigError(f"no model name for {base_url}: pass model= or set LLM_MODEL")
        self.model = model
        self.base_url = _checked_base_url(base_url)
        self._controller = controller
        self._rate_limiter = rate_limiter
        self._transport = chosen_transport
        self._gateway: Gateway | None = None
        self._client: httpx.AsyncClient | None = None
        # Marks the event loop run the client and gateway were built in (see `_ensure_run`).
        self._run: RunVar[bool] = RunVar(f"asynceval_model_{id(self):x}")
        # Absolute once, so httpx need not merge a relative path into base_url on every call.
        self._url = httpx.URL(f"{self.base_url}/{self.path}")
        events.ensure_logging(settings)

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

    @property
    def gateway(self) -> Gateway | None:
        """The gateway this model's calls go through (built on first use in each event loop run)."""
        return self._gateway

    async def _ensure_run(self) -> tuple[httpx.AsyncClient, Gateway]:
        """The client and gateway for the running event loop, built anew in each new run.

        A model made at the top of a notebook or script outlives one `anyio.run`: its connections
        belong to the loop that made them, and the default controller is per run.
        """
        try:
            self._run.get()
        except LookupError:
            await self._close_client()
            settings = self.settings
            controller = self._controller or default_controller(settings)
            headers = self._headers(self._api_key.get_secret_value() if self._api_key else None)
            self._client = create_client(
                base_url=self.base_url + "/",
                limit=controller.limit,
                transport=self._transport,
                headers={"content-type": "application/json", **headers},
            )
            self._gateway = Gateway(
                controller=controller,
                retry_policy=RetryPolicy.from_settings(settings),
                call_timeout=settings.llm_call_timeout,
                rate_limiter=self._rate_limiter or default_rate_limiter(settings),
                endpoint=self.base_url,
            )
            self._run.set(True)
        assert self._client is not None and self._gateway is not None
        return self._client, self._gateway

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
        if isinstance(response_format, type):
            response_format = response_format_for(response_format)
        normalised = as_messages(messages)
        body = self._body(normalised, response_format, params)
        content = json.dumps(body).encode()
        max_tokens = params.get("max_tokens") or params.get("max_completion_tokens") or 0
        estimated = len(content) // 4 + int(max_tokens)

        client, gateway = await self._ensure_run()

        async def attempt() -> Completion:
            try:
                response = await client.post(self._url, content=content)
            except httpx.DecodingError as exc:
                raise MalformedResponse(f"undecodable body: {exc}") from exc
            except (httpx.RequestError, aiohttp.ClientError) as exc:
                # aiohttp errors the httpx-aiohttp transport does not translate (a garbled
                # status line or header) are connection-level failures too.
                raise ProviderConnectionError(f"{type(exc).__name__}: {exc}") from exc
            data = check_response(response)
            completion: Completion = parse_or_malformed(
                data, lambda b: self._parse(b, response_format)
            )
            return completion

        return await gateway.call(
            attempt, agent=agent, dimension=dimension, estimated_tokens=estimated
        )

    def generate_sync(self, messages: Messages, **kwargs: Any) -> Completion:
        """`generate` for sync code running in a worker thread started by anyio (the engine's
        sync hooks, `anyio.to_thread.run_sync`): the call hops back to the event loop and goes
        through the same controller. Calling it on the event loop thread is an error."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop runs in this thread: good
        else:
            raise RuntimeError(
                "generate_sync() was called on the event loop thread, where it would block the "
                "loop; use `await model.generate(...)` there"
            )
        started = False

        async def call() -> Completion:
            nonlocal started
            started = True
            return await self.generate(messages, **kwargs)

        try:
            return anyio.from_thread.run(call)
        except RuntimeError as exc:
            if started:
                raise
            raise RuntimeError(
                "generate_sync() must run in a worker thread started by anyio "
                "(anyio.to_thread.run_sync, as the engine does for sync code); "
                "from other threads use an anyio blocking portal"
            ) from exc

    async def aclose(self) -> None:
        """Close the HTTP client and its connections."""
        await self._close_client()

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            # A client left from an earlier event loop run cannot close cleanly in this one.
            with contextlib.suppress(Exception):
                await client.aclose()

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
