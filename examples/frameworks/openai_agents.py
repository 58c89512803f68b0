"""openai-agents (`Agent` + `Runner.run`, its default Responses model) as a Benchmark, on the funnel.

openai-agents sends its requests with the `AsyncOpenAI` client it is given:
`set_default_openai_client(openai_client(agent="solver"))` hands it asynceval's, so every
Responses API request (`POST /v1/responses`, the SDK's default model) takes a slot of the global
limit (MAX_CONCURRENT_LLM_CALLS), is retried by the funnel (the SDK's retries are off,
`max_retries=0`), is logged as queueing/acquired/released events with `agent="solver"`, and its
tokens land in the repetition's report. `set_tracing_disabled(True)`: its tracing would post to
OpenAI. The prompt, the run loop and the output stay openai-agents'. 20 tasks ("What is 7 + 7?"),
judged by exact match. The chat-completions model is in `openai_agents_chat.py`.

Runs on the embedded simulated provider (no server, no key) unless LLM_BASE_URL / LLM_MODEL /
LLM_API_KEY point elsewhere:

    asynceval run examples/frameworks/openai_agents.py
    asynceval run examples/frameworks/openai_agents.py --max-concurrent-llm-calls 5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from _sums import AGENT, SYSTEM, SumBenchmark, model_name
from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled

from asynceval import Task
from asynceval.interop import openai_client


class OpenAIAgentsResponses(SumBenchmark):
    """20 questions; one `Runner.run` each, on openai-agents' default (Responses) model."""

    def __init__(self) -> None:
        super().__init__()
        self.agent: Agent[Any] | None = None

    def build_agent(self) -> Agent[Any]:
        """The run's agent, built once: the SDK's default client is process-wide."""
        set_default_openai_client(openai_client(agent=AGENT), use_for_tracing=False)
        return Agent(name=AGENT, instructions=SYSTEM, model=model_name())

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.agent is None:
            set_tracing_disabled(True)
            self.agent = self.build_agent()
        agent = self.agent

        async def solver(query: str) -> str:
            result = await Runner.run(agent, query)
            return str(result.final_output).strip()

        return [solver], {AGENT: solver}


benchmark = OpenAIAgentsResponses
