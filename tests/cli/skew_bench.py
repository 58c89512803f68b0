"""A benchmark for the estimate's tests: 100 tasks, one LLM call each (at most 20 tokens of
answer), of which every 20th has a query 150 times as long: 5 tasks hold most of the run's
prompt tokens, and a sample of 20 misses all of them about a third of the time."""

from __future__ import annotations

from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task


class Skew(Benchmark):
    def default_tasks(self) -> list[Task]:
        return [
            Task(query=f"What is {i} + 1? " * (150 if i % 20 == 0 else 1), id=f"skew-{i}")
            for i in range(100)
        ]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(settings=self.settings)

        async def agent(query: str) -> str:
            async with model:
                return (await model.generate(query, max_tokens=20)).text

        return [agent], {}
