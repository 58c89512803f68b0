"""A benchmark for the hedging CLI test: 60 one-call tasks on the embedded simulator with a
heavy-tailed latency (lognormal, median 20 ms, sigma 1.5: a quarter of calls past 50 ms)."""

from __future__ import annotations

from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task
from asynceval.sim import SimConfig

TAIL = SimConfig(latency=0.02, latency_jitter=1.5, latency_distribution="lognormal", seed=3)


class Hedged(Benchmark):
    def default_tasks(self) -> list[Task]:
        return [Task(query=f"What is {i} + 1?", id=f"t{i}") for i in range(60)]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(sim_config=TAIL)

        async def solver(query: str) -> str:
            return (await model.generate(query)).text

        return [solver], {}


bench = Hedged()
