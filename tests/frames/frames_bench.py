"""Benchmarks for the frames tests, run by `asynceval run` on the embedded simulated provider.

Mixed: 6 tasks, two LLM calls each (solver, then checker), 30% of attempts answered 503 (so
calls are retried, and a few fail for good), one task in three expecting a wrong answer (score
0). While the file named by FRAMES_FAIL_MARKER exists, task t5's agent raises after its first
call (an error a resume runs again).

Slow: 40 tasks of 0.05 s, 4 at a time, one call each: a run to kill mid-way.
"""

from __future__ import annotations

import os
from typing import Any

import anyio

from asynceval import Benchmark, OpenAIChatModel, Task
from asynceval.sim import SimConfig


class Mixed(Benchmark):
    def __init__(self) -> None:
        super().__init__(max_concurrent_tasks=8)
        self.model: OpenAIChatModel | None = None

    def default_tasks(self) -> list[Task]:
        return [
            Task(
                query=f"What is {i} + {i}?",
                id=f"t{i}",
                evaluation_data={"expected": str(2 * i + (1 if i % 3 == 2 else 0))},
            )
            for i in range(6)
        ]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        if self.model is None:
            sim = SimConfig(latency=0.001, fault_rates={503: 0.3}, retry_after=0.0)
            self.model = OpenAIChatModel(sim_config=sim, settings=self.settings)
        model = self.model
        marker = os.environ.get("FRAMES_FAIL_MARKER")
        fails = task.id == "t5" and marker is not None and await anyio.Path(marker).exists()

        async def agent(query: str) -> str:
            first = (await model.generate(query, agent="solver", dimension="answer")).text
            if fails:
                raise RuntimeError("t5 fails while the marker exists")
            await model.generate(f"Is {first} right?", agent="checker", dimension="check")
            return first

        return [agent], {}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        def exact(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            return {"passed": str(answer).strip() == task.evaluation_data["expected"]}

        return [exact]


class Slow(Benchmark):
    def __init__(self) -> None:
        super().__init__(max_concurrent_tasks=4)

    def default_tasks(self) -> list[Task]:
        return [Task(query=f"What is {i} + 1?", id=f"slow-{i}") for i in range(40)]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(settings=self.settings)

        async def agent(query: str) -> str:
            await anyio.sleep(0.05)
            async with model:
                return (await model.generate(query, agent="slow")).text

        return [agent], {}
