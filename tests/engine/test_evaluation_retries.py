"""An LLM call that fails for good during evaluation is an infrastructure failure, wherever it
happens: the repetition may be re-run by `max_retries`, as when the agent's call fails."""

from __future__ import annotations

from typing import Any

from asynceval import Benchmark, JudgePanel, OpenAIChatModel, Settings, Task, TaskProtocol
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig

AGENTS = ["strict", "lenient"]
DIMENSIONS = ["accuracy", "clarity"]


def _model(fail_first: int) -> OpenAIChatModel:
    """Every distinct request fails its first `fail_first` attempts with a 503; two attempts per
    call, so a call fails for good the first time it is made and succeeds when made again."""
    return OpenAIChatModel(
        settings=Settings(retry_max_attempts=2, retry_initial_delay=0.001, retry_max_delay=0.002),
        controller=ConcurrencyController(5),
        sim_config=SimConfig(latency=0, fail_first=fail_first, fail_first_status=503),
    )


class Judged(Benchmark):
    def __init__(self, evaluator: Any) -> None:
        super().__init__()
        self.evaluator = evaluator

    async def setup_agents(self, agent_data: Any, env: Any, task: Task, user: Any) -> Any:
        return [lambda query: "Paris."], {}

    async def setup_evaluators(self, env: Any, task: Task, agents: Any, user: Any) -> Any:
        return [self.evaluator]


def _task(max_retries: int) -> Task:
    return Task(query="Capital of France?", id="t", protocol=TaskProtocol(max_retries=max_retries))


async def test_a_judge_whose_call_failed_for_good_makes_the_repetition_retryable() -> None:
    model = _model(fail_first=2)
    panel = JudgePanel(model, AGENTS, DIMENSIONS)
    async with model:
        (report,) = await Judged(panel.evaluator()).run([_task(max_retries=1)])
    assert report["attempts"] == 2
    assert report["status"] == "success"
    (verdict,) = report["eval"]
    assert all(o["score"] is not None for o in verdict["opinions"]) and not verdict["errors"]


async def test_without_max_retries_a_failed_judge_call_leaves_the_repetition_failed() -> None:
    model = _model(fail_first=2)
    panel = JudgePanel(model, AGENTS, DIMENSIONS)
    async with model:
        (report,) = await Judged(panel.evaluator()).run([_task(max_retries=0)])
    assert report["attempts"] == 1 and report["status"] == "evaluation_failed"
    assert report["error"]["type"] == "LLMCallFailed"


async def test_an_evaluator_raising_a_failed_call_is_re_run_by_max_retries() -> None:
    model = _model(fail_first=2)

    async def judge(task: Task, answer: str, traces: Any) -> dict[str, Any]:
        completion = await model.generate(f"Is {answer!r} right?")
        return {"passed": bool(completion.text)}

    async with model:
        (report,) = await Judged(judge).run([_task(max_retries=1)])
    assert report["attempts"] == 2 and report["status"] == "success"
    assert report["eval"] == [{"passed": True}]
