"""asynceval.sim: a simulated LLM provider, the test double and the embedded default provider.

An ASGI app speaking the OpenAI chat completions (streamed or not, `n` choices) and Responses
(streamed or not) APIs, `GET /v1/models`, the Anthropic Messages protocol, and both providers'
batch APIs (OpenAI's Files and Batch APIs, Anthropic's Message Batches), with configurable
latency, server-side caps, injected faults and deterministic answers that satisfy a request's
JSON schema. What it cannot honour (log probabilities, server-side state...) is a 400 naming
the parameter. It speaks what the OpenAI SDK, openai-agents, pydantic-ai, langchain-openai and
smolagents send by default. In process: `httpx.ASGITransport(app=SimProvider(SimConfig(...)))`;
on a socket: `serve(SimConfig(...), port=8000)`. It stands apart from the layers of DESIGN
section 1: it imports no other asynceval module (a contract `lint-imports` checks), and the
runtime, the funnel, the models and the command line import it.
"""

from asynceval.sim._app import SimProvider, sim_app
from asynceval.sim._config import LatencyDistribution, SimConfig
from asynceval.sim._server import serve

__all__ = ["LatencyDistribution", "SimConfig", "SimProvider", "serve", "sim_app"]
