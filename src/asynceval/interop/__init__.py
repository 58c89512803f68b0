"""Every framework's LLM calls through the funnel: httpx transports and clients on them (layer 6
of DESIGN section 1, beside `asynceval.llm`: it imports the funnel and the layers below; the
engine and the layers above may import it).

The OpenAI SDK, and everything built on it (openai-agents, pydantic-ai, langchain-openai,
smolagents' OpenAIServerModel), accepts an httpx client. Hand it `asynceval.http_client()` (or
`sync_http_client()`), or take `openai_client()`, and its requests get what our own models get:
the global limit, the rate windows, retries with backoff and Retry-After, the per-attempt
timeout, the events and the usage in the report. `base_url()` is the URL to give a framework:
LLM_BASE_URL, or the embedded simulated provider's, which these transports answer in-process.

The SDK's own settings are respected: its timeout ends a call at that time, its own retries
stacked on the funnel's are warned about once per run, and a run whose agents hold SDK clients
that send around the funnel ends with a `funnel_bypassed` warning (`logs check` then says its
verdict covers only the funnel's calls).
"""

from ._bypass import check_clients as check_clients  # asynceval's own: the run-end check
from ._clients import base_url, http_client, openai_client, sync_http_client
from ._transport import FunnelTransport, SyncFunnelTransport

__all__ = [
    "FunnelTransport",
    "SyncFunnelTransport",
    "base_url",
    "http_client",
    "openai_client",
    "sync_http_client",
]
