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

from collections.abc import Mapping
from typing import Any

from _sums import AGENT, SYSTEM, SumBenchmark, model_name
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled

from asynceval import Task
from asynceval.interop import openai_client


class OpenAIAgentsChat(SumBenchmark):
    """20 questions; one `Runner.run` each, on the chat-completions model."""

    def __init__(self) -> None:
        super().__init__()
        self.agent: Agent[Any] | None = None

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.agent is None:  # one model (one client, one connection pool) for the run
            set_tracing_disabled(True)
            model = OpenAIChatCompletionsModel(
                model=model_name(), openai_client=openai_client(agent=AGENT)
            )
            self.agent = Agent(name=AGENT, instructions=SYSTEM, model=model)
        agent = self.agent

        async def solver(query: str) -> str:
            result = await Runner.run(agent, query)
            return str(result.final_output).strip()

        return [solver], {AGENT: solver}


benchmark = OpenAIAgentsChat
