"""What the framework examples share: 20 sums to ask, the model name, an exact-match judge.

Each example subclasses `SumBenchmark` and says only how its framework's agent asks; `asynceval
run` puts this folder on the import path, so `from _sums import ...` works from any example.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynceval import Benchmark, Runtime, Task

AGENT = "solver"
"""The agent name every example gives its calls (the `agent` of their events)."""
N_TASKS = 20
SYSTEM = "Answer with the number only."


def model_name() -> str:
    """LLM_MODEL, else the embedded simulated provider's model."""
    return Runtime.current().settings.llm_model or "asynceval-sim"


class SumBenchmark(Benchmark):
    """'What is i + i?' for i = 1..20, each judged by `judge` (exact match by default)."""

    def default_tasks(self) -> list[Task]:
        return [
            Task(
                query=f"What is {i} + {i}?",
                id=f"sum-{i:02d}",
                evaluation_data={"expected": str(2 * i)},
            )
            for i in range(1, N_TASKS + 1)
        ]

    def judge(self, task: Task, answer: Any) -> bool:
        return bool(answer == task.evaluation_data["expected"])

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        async def sum_is_right(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            return {"passed": self.judge(task, answer), "answer": answer}

        return [sum_is_right]
