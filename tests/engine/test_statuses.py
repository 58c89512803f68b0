"""What status a repetition gets when its agents fail in unusual ways (a stray cancellation, one
of several agents failing, an application's own BaseException), and the one exception, Ctrl-C,
that ends the whole run instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from asynceval import Benchmark, Task, TaskProtocol
from asynceval.engine import successful_pairs

from ._benches import Agents


async def test_a_stray_cancellation_fails_that_repetition_only() -> None:
    tasks = [Task(query=i, id=str(i)) for i in range(20)]
    tasks[3] = Task(query=3, id="3", metadata={"do": "stray_cancel"})
    reports = await Agents(max_concurrent_tasks=4).run(tasks)
    assert len(reports) == 20
    stray = next(r for r in reports if r["task_id"] == "3")
    assert stray["status"] == "unknown_execution_error"
    assert stray["error"]["type"] == "CancelledError"
    assert sum(r["status"] == "success" for r in reports) == 19


async def test_an_agent_error_among_several_agents_is_agent_error_and_not_retried() -> None:
    task = Task(
        query="q", metadata={"do": "two_agents_one_fails"}, protocol=TaskProtocol(max_retries=3)
    )
    (report,) = await Agents().run([task])
    assert (report["status"], report["attempts"]) == ("agent_error", 1)


class _AppStop(BaseException):
    """An application's own BaseException."""


class Raises(Benchmark):
    """Task metadata "raise" names what the agent raises, at once."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        kinds = {"app": _AppStop, "generator_exit": GeneratorExit, "ctrl_c": KeyboardInterrupt}
        error = kinds.get(task.metadata.get("raise", ""))

        async def agent(query: Any) -> Any:
            await anyio.sleep(0.001)
            if error is not None:
                raise error("from the agent")
            return "ok"

        return [agent], {}


async def test_an_agents_own_base_exception_is_its_repetitions_status(tmp_path: Path) -> None:
    tasks = [
        Task(query="q", id=kind, metadata={"raise": kind}) for kind in ("app", "generator_exit")
    ]
    tasks.append(Task(query="q", id="fine"))
    reports = await Raises(max_concurrent_tasks=3).run(tasks, results_path=tmp_path / "r.jsonl")
    by_id = {r["task_id"]: r for r in reports}
    assert by_id["fine"]["status"] == "success"
    for kind, name in (("app", "_AppStop"), ("generator_exit", "GeneratorExit")):
        assert by_id[kind]["status"] == "unknown_execution_error"
        assert by_id[kind]["error"]["type"] == name


def test_ctrl_c_in_an_agent_ends_the_run_as_a_keyboard_interrupt(tmp_path: Path) -> None:
    """Not inside exception groups: `except KeyboardInterrupt` around the run catches it, and
    the repetitions finished before it are on disk."""
    tasks = [Task(query="q", id=str(i)) for i in range(5)]
    tasks.append(Task(query="q", id="ctrl_c", metadata={"raise": "ctrl_c"}))
    path = tmp_path / "r.jsonl"
    with pytest.raises(KeyboardInterrupt, match="from the agent"):
        Raises(max_concurrent_tasks=1).run_sync(tasks, results_path=path)
    assert successful_pairs(path) == {(str(i), 0) for i in range(5)}
