"""Every framework's LLM calls through the funnel: httpx transports and clients on them (layer 6
of DESIGN section 1, beside `asynceval.llm`: it imports the funnel and the layers below; the
engine and the layers above may import it).

The OpenAI SDK, and everything built on it (openai-agents, pydantic-ai, langchain-openai,
smolagents' OpenAIServerModel), accepts an httpx client. Hand it `asynceval.http_client()` (or
`sync_http_client()`), or take `openai_client()`, and its requests get what our own models get:
the global limit, the rate windows, retries with backoff and Retry-After, the per-attempt
timeout, the events and the usage in the report. `base_url()` is the URL to give a framework:
LLM_BASE_URL, or the embedded simulated provider's, which these transports answer in-process.
The Anthropic SDK (2.x sends with `httpx2`, httpx's successor) takes `anthropic_client()`, or an
`httpx2` client on `Httpx2FunnelTransport` (loaded when first asked for: httpx2 is optional).

The SDK's own settings are respected: its timeout ends a call at that time, its own retries
stacked on the funnel's are warned about once per run, and a run whose agents hold SDK clients
that send around the funnel ends with a `funnel_bypassed` warning (`logs check` then says its
verdict covers only the funnel's calls).
"""

from typing import TYPE_CHECKING, Any

from ._bypass import check_clients as check_clients  # asynceval's own: the run-end check
from ._clients import anthropic_client, base_url, http_client, openai_client, sync_http_client
from ._transport import FunnelTransport, SyncFunnelTransport

if TYPE_CHECKING:
    from ._httpx2 import Httpx2FunnelTransport, SyncHttpx2FunnelTransport

__all__ = [
    "FunnelTransport",
    "Httpx2FunnelTransport",
    "SyncFunnelTransport",
    "SyncHttpx2FunnelTransport",
    "anthropic_client",
    "base_url",
    "http_client",
    "openai_client",
    "sync_http_client",
]


def __getattr__(name: str) -> Any:
    # httpx2 is the Anthropic SDK's, not ours: imported with the first use of its transports.
    if name in ("Httpx2FunnelTransport", "SyncHttpx2FunnelTransport"):
        from . import _httpx2

        return getattr(_httpx2, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
