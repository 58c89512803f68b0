"""A smolagents ToolCallingAgent with one custom tool, run as a Benchmark (needs the extra).

Each task asks for a country's capital; the agent has a `lookup_capital` tool. The agent is sync:
`SyncAgent` runs it in the engine's worker threads, and its model, an `AsyncEvalModel` over an
asynceval `OpenAIChatModel`, sends every call through the run's global limit, retries and events.
Runs on the embedded simulated provider unless LLM_BASE_URL / LLM_MODEL / LLM_API_KEY point
elsewhere.

    pip install 'asynceval[smolagents]'
    asynceval run examples/smolagents_agent.py
    asynceval run examples/smolagents_agent.py --repeats 3 --max-concurrent-llm-calls 2

On the simulated provider the agent makes one tool step (`lookup_capital`), then calls smolagents'
`final_answer` tool with an answer carrying the observation: two model calls per task. The
simulated model picks the tool's argument itself, so not every answer names the right capital.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from smolagents import ToolCallingAgent, tool
from smolagents.monitoring import LogLevel

from asynceval import Benchmark, OpenAIChatModel, Task
from asynceval.agents import SyncAgent
from asynceval.agents.smolagents import AsyncEvalModel

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima"}


@tool
def lookup_capital(country: Literal["France", "Japan", "Kenya", "Peru"]) -> str:
    """Look up the capital city of a country.

    Args:
        country: The country, in English.
    """
    capital = CAPITALS.get(country)
    return f"The capital of {country} is {capital}." if capital else f"No record for {country}."


class SmolagentsCapitals(Benchmark):
    """Four questions; a fresh ToolCallingAgent per repetition (agents keep memory)."""

    def __init__(self) -> None:
        super().__init__()
        self.model: AsyncEvalModel | None = None

    def default_tasks(self) -> list[Task]:
        return [
            Task(
                query=f"What is the capital of {country}?",
                id=country.lower(),
                evaluation_data={"capital": capital},
            )
            for country, capital in CAPITALS.items()
        ]

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.model is None:  # built on first use, when the run's settings are known
            self.model = AsyncEvalModel(OpenAIChatModel(settings=self.settings))
        agent = ToolCallingAgent(
            tools=[lookup_capital],
            model=self.model,
            max_steps=4,
            verbosity_level=LogLevel.OFF,  # smolagents prints nothing; asynceval logs events
        )
        geographer = SyncAgent(agent, name="geographer")
        return [geographer], {"geographer": geographer}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        async def names_the_capital(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            text = str(answer)
            return {"passed": task.evaluation_data["capital"] in text, "answer": text}

        return [names_the_capital]


benchmark = SmolagentsCapitals
