"""A benchmark for the adaptive-repeats CLI tests: task i passes with probability p_i, drawn
from a seed per (task, repeat); instant agents, no LLM. 4 tasks always or never pass, 4 flip."""

from __future__ import annotations

import random
from typing import Any

from asynceval import Benchmark, Task
from asynceval.engine import current_context

PROBABILITIES = [1.0, 1.0, 0.0, 0.0, 0.3, 0.5, 0.6, 0.8]


class Coins(Benchmark):
    def default_tasks(self) -> list[Task]:
        return [Task(query=i, id=f"t{i}", metadata={"p": p}) for i, p in enumerate(PROBABILITIES)]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        return [lambda query: query], {}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        context = current_context()
        assert context is not None
        draw = random.Random(f"{task.id}/{context.repeat_idx}").random()

        def coin(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            return {"passed": draw < float(task.metadata["p"])}

        return [coin]


bench = Coins()
