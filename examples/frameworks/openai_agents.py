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

from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled

from asynceval import Benchmark, Runtime, Task
from asynceval.interop import openai_client

AGENT = "solver"
N_TASKS = 20
SYSTEM = "Answer with the number only."


def sum_task(index: int) -> Task:
    """'What is i + i?', expecting the sum as the model writes it."""
    return Task(
        query=f"What is {index} + {index}?",
        id=f"sum-{index:02d}",
        evaluation_data={"expected": str(2 * index)},
    )


def model_name() -> str:
    """LLM_MODEL, else the embedded simulated provider's model."""
    return Runtime.current().settings.llm_model or "asynceval-sim"


class OpenAIAgentsResponses(Benchmark):
    """20 questions; one `Runner.run` each, on openai-agents' default (Responses) model."""

    def __init__(self) -> None:
        super().__init__()
        self.agent: Agent[Any] | None = None

    def default_tasks(self) -> list[Task]:
        return [sum_task(index) for index in range(1, N_TASKS + 1)]

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.agent is None:  # the SDK's default client is process-wide: set it once
            set_tracing_disabled(True)
            set_default_openai_client(openai_client(agent=AGENT), use_for_tracing=False)
            self.agent = Agent(name=AGENT, instructions=SYSTEM, model=model_name())
        agent = self.agent

        async def solver(query: str) -> str:
            result = await Runner.run(agent, query)
            return str(result.final_output).strip()

        return [solver], {AGENT: solver}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        async def exact_match(task: Task, answer: str, traces: Any) -> dict[str, Any]:
            return {"passed": answer == task.evaluation_data["expected"], "answer": answer}

        return [exact_match]


benchmark = OpenAIAgentsResponses
