"""asynceval.sim: a simulated LLM provider, the test double and the embedded default provider.

An ASGI app speaking the OpenAI chat completions and Anthropic Messages protocols, with
configurable latency, server-side caps, injected faults and deterministic answers that satisfy
a request's JSON schema. In process: `httpx.ASGITransport(app=SimProvider(SimConfig(...)))`;
on a socket: `serve(SimConfig(...), port=8000)`. It imports no other asynceval module.
"""

from asynceval.sim._app import SimProvider, sim_app
from asynceval.sim._config import LatencyDistribution, SimConfig
from asynceval.sim._server import serve

__all__ = ["LatencyDistribution", "SimConfig", "SimProvider", "serve", "sim_app"]
