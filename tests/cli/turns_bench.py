"""A benchmark for the CLI tests: 24 tasks of an agent that makes 6 LLM calls in a row, 8 at a
time; each call's prompt names its task and turn (so the provider sees 144 different calls)."""

from __future__ import annotations

from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task

TURNS = 6


class Turns(Benchmark):
    def __init__(self) -> None:
        super().__init__(max_concurrent_tasks=8)

    def default_tasks(self) -> list[Task]:
        return [Task(query=str(i), id=f"turns-{i}") for i in range(24)]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(settings=self.settings)

        async def agent(query: str) -> str:
            answer = ""
            async with model:
                for turn in range(TURNS):
                    prompt = f"What is {turn} + {query}? (task {query}, turn {turn})"
                    answer = (await model.generate(prompt)).text
            return answer

        return [agent], {}
