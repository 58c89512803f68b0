"""A benchmark for the CLI tests: 60 tasks of 0.1 s each, 4 at a time, one LLM call each."""

from __future__ import annotations

from typing import Any

import anyio

from asynceval import Benchmark, OpenAIChatModel, Task


class Slow(Benchmark):
    def __init__(self) -> None:
        super().__init__(max_concurrent_tasks=4)

    def default_tasks(self) -> list[Task]:
        return [Task(query=f"What is {i} + 1?", id=f"slow-{i}") for i in range(60)]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(settings=self.settings)

        async def agent(query: str) -> str:
            await anyio.sleep(0.1)
            async with model:
                return (await model.generate(query)).text

        return [agent], {}


not_a_benchmark = 42
