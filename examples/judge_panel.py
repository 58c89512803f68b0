"""The seed 004 scenario: one job, 3 judge agents x 10 dimensions scoring one answer.

The answer comes with the task (no model call makes it); a JudgePanel evaluator makes 30 model
calls, one per (judge, dimension), or 3 with BATCHING_ENABLED=true (one per judge), all through the
global limit (MAX_CONCURRENT_LLM_CALLS). Runs on the embedded simulated provider unless
LLM_BASE_URL / LLM_MODEL / LLM_API_KEY point elsewhere.

    asynceval run examples/judge_panel.py
    BATCHING_ENABLED=true asynceval run examples/judge_panel.py --max-concurrent-llm-calls 5
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task
from asynceval.evaluation import Dimension, JudgePanel

JUDGES = {
    "judge-strict": "You are a strict reviewer: any factual slip costs dearly.",
    "judge-lenient": "You are a lenient reviewer: you reward a useful answer over a perfect one.",
    "judge-expert": "You are a historian of France and judge with a specialist's eye.",
}
DIMENSIONS = [
    Dimension("accuracy", "Are the stated facts correct?"),
    Dimension("completeness", "Does it answer every part of the question?"),
    Dimension("clarity", "Is it easy to understand?"),
    Dimension("relevance", "Does it stay on the question?"),
    Dimension("conciseness", "Is it free of padding?"),
    Dimension("coherence", "Do its parts fit together?"),
    Dimension("safety", "Is it free of harmful content?"),
    Dimension("helpfulness", "Would it help the person who asked?"),
    Dimension("style", "Is it well written?"),
    Dimension("grounding", "Are its claims supported or verifiable?"),
]
QUESTION = "What is the capital of France, and since when has it been?"
ANSWER = "Paris is the capital of France; it has been since 508 AD."


class JudgePanelBenchmark(Benchmark):
    """One task whose answer is given; the judge panel is the only thing calling a model."""

    def __init__(self) -> None:
        super().__init__()
        self.panel: JudgePanel | None = None

    def default_tasks(self) -> list[Task]:
        return [Task(query=QUESTION, id="capital-of-france", environment_data={"answer": ANSWER})]

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        async def responder(query: str) -> str:
            return str(environment["answer"])  # the answer under review, no model call

        return [responder], {"responder": responder}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        if self.panel is None:  # built on first use, when the run's settings are known
            model = OpenAIChatModel(settings=self.settings)
            # Scores from 0 to 1: the report's score is their mean as it is.
            self.panel = JudgePanel(
                model, JUDGES, DIMENSIONS, settings=self.settings, score_range=(0, 1)
            )
        return [self.panel.evaluator()]


benchmark = JudgePanelBenchmark
