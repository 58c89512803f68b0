"""openai-agents with `OpenAIChatCompletionsModel` as a Benchmark, on asynceval's funnel.

The model is given its client: `OpenAIChatCompletionsModel(model=..., openai_client=
openai_client(agent="solver"))`, so every chat completion openai-agents sends takes a slot of the
global limit (MAX_CONCURRENT_LLM_CALLS), is retried by the funnel (the SDK's retries are off,
`max_retries=0`), is logged as queueing/acquired/released events with `agent="solver"`, and its
tokens land in the repetition's report. `set_tracing_disabled(True)`: its tracing would post to
OpenAI. 20 tasks ("What is 7 + 7?"), judged by exact match. The default (Responses) model is in
`openai_agents.py`.

Runs on the embedded simulated provider (no server, no key) unless LLM_BASE_URL / LLM_MODEL /
LLM_API_KEY point elsewhere:

    asynceval run examples/frameworks/openai_agents_chat.py
    asynceval run examples/frameworks/openai_agents_chat.py --max-concurrent-llm-calls 5
"""

from __future__ import annotations

from typing import Any

from _sums import AGENT, SYSTEM, model_name
from agents import Agent, OpenAIChatCompletionsModel
from openai_agents import OpenAIAgentsResponses

from asynceval.interop import openai_client


class OpenAIAgentsChat(OpenAIAgentsResponses):
    """20 questions; one `Runner.run` each, on the chat-completions model (the run loop and
    everything else as in `openai_agents.py`)."""

    def build_agent(self) -> Agent[Any]:
        """One model (one client, one connection pool) for the run."""
        model = OpenAIChatCompletionsModel(
            model=model_name(), openai_client=openai_client(agent=AGENT)
        )
        return Agent(name=AGENT, instructions=SYSTEM, model=model)


benchmark = OpenAIAgentsChat
