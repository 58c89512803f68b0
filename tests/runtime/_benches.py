"""Small benchmarks shared by the runtime tests."""

from __future__ import annotations

from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task


class OneCall(Benchmark):
    """Each repetition makes one call with a model built in the hook (the common pattern)."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel()

        async def agent(query: Any) -> str:
            return (await model.generate(str(query), agent="solver")).text

        return [agent], {}


def tasks(prefix: str, n: int) -> list[Task]:
    return [Task(query=f"What is {i} + 1?", id=f"{prefix}{i}") for i in range(n)]
