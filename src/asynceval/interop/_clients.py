"""Clients on the funnel transports: httpx ones, and the OpenAI SDK's."""

from __future__ import annotations

from typing import Any

import httpx

from ..funnel import SIM_BASE_URL
from ..runtime import Runtime
from ._transport import FunnelTransport, SyncFunnelTransport

__all__ = ["base_url", "http_client", "openai_client", "sync_http_client"]


def http_client(
    *, agent: str | None = None, runtime: Runtime | None = None, **httpx_kwargs: Any
) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` whose every request goes through the funnel (`FunnelTransport`).

    `transport=` in `httpx_kwargs` is wrapped, not replaced. No timeout of its own by default:
    LLM_CALL_TIMEOUT bounds each attempt, the funnel's retries included.
    """
    inner = httpx_kwargs.pop("transport", None)
    httpx_kwargs.setdefault("timeout", None)
    transport = FunnelTransport(inner, agent=agent, runtime=runtime)
    return httpx.AsyncClient(transport=transport, **httpx_kwargs)


def sync_http_client(
    *, agent: str | None = None, runtime: Runtime | None = None, **httpx_kwargs: Any
) -> httpx.Client:
    """An `httpx.Client` through the funnel (`SyncFunnelTransport`): for sync frameworks, from
    the engine's worker threads or from threads of your own; the same process-wide limit."""
    inner = httpx_kwargs.pop("transport", None)
    httpx_kwargs.setdefault("timeout", None)
    transport = SyncFunnelTransport(inner, agent=agent, runtime=runtime)
    return httpx.Client(transport=transport, **httpx_kwargs)


def base_url(runtime: Runtime | None = None) -> str:
    """The base URL to give a framework: LLM_BASE_URL, else the embedded simulated provider's
    (`http://asynceval-sim/v1`, answered in-process by the funnel transports)."""
    settings = (runtime or Runtime.current()).settings
    return settings.llm_base_url.rstrip("/") if settings.llm_base_url else SIM_BASE_URL


def openai_client(*, sync: bool = False, agent: str | None = None, **kwargs: Any) -> Any:
    """An `openai.AsyncOpenAI` (or `openai.OpenAI` with `sync=True`) on the funnel's client, with
    `max_retries=0`: the funnel retries, so the SDK must not multiply them. `base_url` and
    `api_key` default to `base_url()` and LLM_API_KEY (a placeholder for the simulator)."""
    import openai  # an optional dependency: only needed here

    runtime = kwargs.pop("runtime", None)
    settings = (runtime or Runtime.current()).settings
    kwargs.setdefault("base_url", base_url(runtime))
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "asynceval-sim"
    kwargs.setdefault("api_key", key)
    kwargs.setdefault("max_retries", 0)
    if sync:
        kwargs.setdefault("http_client", sync_http_client(agent=agent, runtime=runtime))
        return openai.OpenAI(**kwargs)
    kwargs.setdefault("http_client", http_client(agent=agent, runtime=runtime))
    return openai.AsyncOpenAI(**kwargs)


def anthropic_client(*, sync: bool = False, agent: str | None = None, **kwargs: Any) -> Any:
    """An `anthropic.AsyncAnthropic` (or `anthropic.Anthropic` with `sync=True`) whose calls go
    through the funnel, with `max_retries=0`: the funnel retries, so the SDK must not multiply
    them. `base_url` defaults to LLM_BASE_URL (or the embedded simulated provider's) without
    its `/v1`, which the SDK adds; `api_key` to LLM_API_KEY (a placeholder for the simulator).
    An SDK that sends with `httpx2` (2.x) gets an httpx2 client on `Httpx2FunnelTransport`, an
    older one `http_client()`."""
    import anthropic  # an optional dependency: only needed here

    runtime = kwargs.pop("runtime", None)
    settings = (runtime or Runtime.current()).settings
    kwargs.setdefault("base_url", base_url(runtime).removesuffix("/v1"))
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "asynceval-sim"
    kwargs.setdefault("api_key", key)
    kwargs.setdefault("max_retries", 0)
    if "http_client" not in kwargs:
        kwargs["http_client"] = _anthropic_http(sync, agent, runtime)
    return anthropic.Anthropic(**kwargs) if sync else anthropic.AsyncAnthropic(**kwargs)


def _anthropic_http(sync: bool, agent: str | None, runtime: Runtime | None) -> Any:
    """The funnel's client in the flavour the installed Anthropic SDK sends with."""
    import anthropic

    packages = {
        cls.__module__.partition(".")[0] for cls in anthropic.DefaultAsyncHttpxClient.__mro__
    }
    if "httpx2" not in packages:
        if sync:
            return sync_http_client(agent=agent, runtime=runtime)
        return http_client(agent=agent, runtime=runtime)
    import httpx2

    from ._httpx2 import Httpx2FunnelTransport, SyncHttpx2FunnelTransport

    if sync:
        return httpx2.Client(
            transport=SyncHttpx2FunnelTransport(agent=agent, runtime=runtime), timeout=None
        )
    return httpx2.AsyncClient(
        transport=Httpx2FunnelTransport(agent=agent, runtime=runtime), timeout=None
    )
