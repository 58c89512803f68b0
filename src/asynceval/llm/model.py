"""ChatModel: what every provider shares: settings, the HTTP client, the gateway, the sync bridge.

A provider subclass only says how to build a request body and how to read a completion from the
response; every call still goes through the gateway (rate limiter, global concurrency slot,
per-attempt timeout, retry). With no base URL anywhere, the model talks to the in-process simulated
provider.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.from_thread
import httpx
import sniffio
from pydantic import BaseModel, SecretStr

from .. import events
from ..config import HttpTransport, Settings
from ..errors import ConfigError, ProviderConnectionError
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
    ) -> None:
        self.settings = settings = settings if settings is not None else Settings()
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
        self.base_url = base_url.rstrip("/")
        self._controller = controller
        self._rate_limiter = rate_limiter
        self._gateway: Gateway | None = None
        limit = controller.limit if controller is not None else settings.max_concurrent_llm_calls
        headers = self._headers(self._api_key.get_secret_value() if self._api_key else None)
        self._client = create_client(
            base_url=self.base_url + "/",
            limit=limit,
            transport=chosen_transport,
            headers={"content-type": "application/json", **headers},
        )
        # Absolute once, so httpx need not merge a relative path into base_url on every call.
        self._url = httpx.URL(f"{self.base_url}/{self.path}")

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
    def gateway(self) -> Gateway:
        """The gateway this model's calls go through (built on first use, inside the event loop)."""
        if self._gateway is None:
            settings = self.settings
            self._gateway = Gateway(
                controller=self._controller or default_controller(settings),
                retry_policy=RetryPolicy.from_settings(settings),
                call_timeout=settings.llm_call_timeout,
                rate_limiter=self._rate_limiter or default_rate_limiter(settings),
                endpoint=self.base_url,
            )
        return self._gateway

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

        async def attempt() -> Completion:
            try:
                response = await self._client.post(self._url, content=content)
            except httpx.TransportError as exc:
                raise ProviderConnectionError(f"{type(exc).__name__}: {exc}") from exc
            data = check_response(response)
            completion: Completion = parse_or_malformed(
                data, lambda b: self._parse(b, response_format)
            )
            return completion

        return await self.gateway.call(
            attempt, agent=agent, dimension=dimension, estimated_tokens=estimated
        )

    def generate_sync(self, messages: Messages, **kwargs: Any) -> Completion:
        """`generate` for sync code running in a worker thread started by anyio (the engine's
        sync hooks, `anyio.to_thread.run_sync`): the call hops back to the event loop and goes
        through the same controller. Calling it on the event loop thread is an error."""
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            library = None
        if library is not None:
            raise RuntimeError(
                "generate_sync() was called on the event loop thread, where it would block the "
                "loop; use `await model.generate(...)` there"
            )
        try:
            return anyio.from_thread.run(functools.partial(self.generate, messages, **kwargs))
        except RuntimeError as exc:
            if "worker thread" in str(exc) or "portal" in str(exc):
                raise RuntimeError(
                    "generate_sync() must run in a worker thread started by anyio "
                    "(anyio.to_thread.run_sync, as the engine does for sync code); "
                    "from plain threads use an anyio blocking portal"
                ) from exc
            raise

    async def aclose(self) -> None:
        """Close the HTTP client and its connections."""
        await self._client.aclose()

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
