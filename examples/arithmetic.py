"""An arithmetic benchmark: a solver agent answers, an exact-match evaluator judges.

Runs on the embedded simulated provider (which answers simple arithmetic exactly) unless
LLM_BASE_URL / LLM_MODEL / LLM_API_KEY point elsewhere. Some questions ask for a rounded answer the
solver does not give, so the pass rate is not a foregone 100%.

    asynceval run examples/arithmetic.py
    asynceval run examples/arithmetic.py --repeats 3 --max-concurrent-llm-calls 5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task


def _questions() -> list[Task]:
    tasks = []
    for a in range(2, 12):
        for b, op in ((3, "+"), (7, "*"), (4, "-"), (3, "/")):
            value = {"+": a + b, "*": a * b, "-": a - b, "/": round(a / b, 2)}[op]
            tasks.append(
                Task(
                    query=f"What is {a} {op} {b}?",
                    id=f"{a}{op}{b}",
                    evaluation_data={"expected": f"{value:g}"},
                    metadata={"operator": op},
                )
            )
    return tasks


class Arithmetic(Benchmark):
    """40 questions; one LLM call each."""

    def __init__(self) -> None:
        super().__init__(max_concurrent_tasks=16)
        self.model: OpenAIChatModel | None = None

    def default_tasks(self) -> list[Task]:
        return _questions()

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if self.model is None:
            self.model = OpenAIChatModel(settings=self.settings)

        async def solver(query: str) -> str:
            assert self.model is not None
            completion = await self.model.generate(
                [
                    {"role": "system", "content": "Answer with the number only."},
                    {"role": "user", "content": query},
                ],
                agent="solver",
                dimension=task.metadata.get("operator"),  # a CSV of questions may lack it
            )
            return completion.text.strip()

        return [solver], {"solver": solver}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        async def exact_match(task: Task, answer: str, traces: Any) -> dict[str, Any]:
            return {"passed": answer == task.evaluation_data["expected"], "answer": answer}

        return [exact_match]


benchmark = Arithmetic
