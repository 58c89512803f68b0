"""A pydantic-ai `Agent` as a Benchmark, on asynceval's funnel.

pydantic-ai's `OpenAIChatModel` sends its requests with the `AsyncOpenAI` client its provider is
given: `OpenAIChatModel(name, provider=OpenAIProvider(openai_client=openai_client(agent="solver")))`
hands it asynceval's, so every chat completion takes a slot of the global limit
(MAX_CONCURRENT_LLM_CALLS), is retried by the funnel (the SDK's retries are off, `max_retries=0`),
is logged as queueing/acquired/released events with `agent="solver"`, and its tokens land in the
repetition's report. The instructions, run loop and output type stay pydantic-ai's. 20 tasks
("What is 7 + 7?"), judged by exact match.

Runs on the embedded simulated provider (no server, no key) unless LLM_BASE_URL / LLM_MODEL /
LLM_API_KEY point elsewhere:

    asynceval run examples/frameworks/pydantic_ai_agent.py
    asynceval run examples/frameworks/pydantic_ai_agent.py --max-concurrent-llm-calls 5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from _sums import AGENT, SYSTEM, SumBenchmark, model_name
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from asynceval import Task
from asynceval.interop import openai_client


class PydanticAISums(SumBenchmark):
    """20 questions; one `agent.run` each."""

    def __init__(self) -> None:
        super().__init__()
        self.agent: Agent[None, str] | None = None

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.agent is None:  # one model (one client, one connection pool) for the run
            provider = OpenAIProvider(openai_client=openai_client(agent=AGENT))
            model = OpenAIChatModel(model_name(), provider=provider)
            self.agent = Agent(model, instructions=SYSTEM, name=AGENT)
        agent = self.agent

        async def solver(query: str) -> str:
            result = await agent.run(query)
            return result.output.strip()

        return [solver], {AGENT: solver}


benchmark = PydanticAISums
