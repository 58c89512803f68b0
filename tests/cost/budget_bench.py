"""A benchmark for the budget's command-line tests: 60 tasks of one call each (max_tokens=16),
to the provider and model the run is given (--base-url, --model)."""

from __future__ import annotations

from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task

QUESTION = "Describe task number {i} in one long sentence, with every detail of it you know."


class Budgeted(Benchmark):
    def default_tasks(self) -> list[Task]:
        return [Task(query=QUESTION.format(i=i), id=f"t{i}") for i in range(60)]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(settings=self.settings)

        async def solver(query: str) -> str:
            return (await model.generate(query, max_tokens=16)).text

        return [solver], {}


bench = Budgeted()
