"""Edge cases found in review: stray cancellations, unencodable reports, cut lines, errors from
several agents at once, broken queues, resumed adaptive runs, and more."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asynceval import (
    AdaptiveQueue,
    Benchmark,
    BenchmarkCallback,
    OpenAIChatModel,
    PriorityQueue,
    SequentialQueue,
    Settings,
    Task,
    TaskProtocol,
)
from asynceval.engine import read_records, successful_pairs
from asynceval.errors import AgentError, TaskSpecError
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig


class Agents(Benchmark):
    """Each task's metadata names what its agents do."""

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        do = task.metadata.get("do", "answer")

        async def agent(query: Any) -> Any:
            if do == "stray_cancel":
                inner = asyncio_task_cancelled_by_itself()
                await inner  # raises CancelledError: the code's own mistake, not ours
            if do == "unencodable":
                cycle: list[Any] = []
                cycle.append(cycle)
                return {("tuple", "key"): math.nan, "cycle": cycle, "object": object()}
            await anyio.sleep(0.01)
            return f"ok {query}"

        async def failing(query: Any) -> Any:
            await anyio.lowlevel.checkpoint()
            raise AgentError("one of two agents failed")

        if do == "two_agents_one_fails":
            return [agent, failing], {}
        return [agent], {}

    async def setup_evaluators(self, environment: Any, task: Task, agents: Any, user: Any) -> Any:
        async def keep(task: Task, answer: Any, traces: Any) -> Any:
            return {"answer": answer, "passed": True}

        return [keep]


def asyncio_task_cancelled_by_itself() -> Any:
    import asyncio

    task = asyncio.get_running_loop().create_task(asyncio.sleep(10))
    task.cancel()
    return task


async def test_a_stray_cancellation_fails_that_repetition_only() -> None:
    tasks = [Task(query=i, id=str(i)) for i in range(20)]
    tasks[3] = Task(query=3, id="3", metadata={"do": "stray_cancel"})
    reports = await Agents(max_concurrent_tasks=4).run(tasks)
    assert len(reports) == 20
    stray = next(r for r in reports if r["task_id"] == "3")
    assert stray["status"] == "unknown_execution_error"
    assert stray["error"]["type"] == "CancelledError"
    assert sum(r["status"] == "success" for r in reports) == 19


async def test_an_unencodable_report_is_written_and_spoils_no_other(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    tasks = [Task(query=i, id=str(i)) for i in range(6)]
    tasks.insert(2, Task(query="x", id="bad", metadata={"do": "unencodable"}))
    await Agents().run(tasks, results_path=path)
    records, damaged = read_records(path)
    assert damaged == 0 and len(records) == 1 + 7
    bad = next(r for r in records if r.get("task_id") == "bad")
    answer = bad["eval"][0]["answer"]
    assert answer["('tuple', 'key')"] == "nan" and answer["cycle"] == ["<cycle list>"]
    assert "object object" in answer["object"]


async def test_a_line_cut_inside_a_character_is_damaged_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    tasks = [Task(query="héllo wörld ✓", id=str(i)) for i in range(4)]
    await Agents().run(tasks[:2], results_path=path)
    with path.open("ab") as file:
        file.write('{"task_id": "2", "eval": "✓'.encode()[:-1])  # cut inside the ✓
    assert successful_pairs(path) == {("0", 0), ("1", 0)}
    reports = await Agents().run(tasks, results_path=path, resume=True)
    assert sorted(r["task_id"] for r in reports) == ["2", "3"]
    _, damaged = read_records(path)
    assert damaged == 1


async def test_an_agent_error_among_several_agents_is_agent_error_and_not_retried() -> None:
    task = Task(
        query="q", metadata={"do": "two_agents_one_fails"}, protocol=TaskProtocol(max_retries=3)
    )
    (report,) = await Agents().run([task])
    assert (report["status"], report["attempts"]) == ("agent_error", 1)


async def test_a_refused_request_is_not_retried_by_the_engine() -> None:
    model = OpenAIChatModel(
        controller=ConcurrencyController(1),
        sim_config=SimConfig(latency=0, fault_rates={400: 1.0}),
    )

    class Asks(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def agent(query: Any) -> Any:
                return (await model.generate(query)).text

            return [agent], {}

    async with model:
        (report,) = await Asks().run([Task(query="q", protocol=TaskProtocol(max_retries=3))])
    assert (report["status"], report["attempts"]) == ("unknown_execution_error", 1)
    assert report["error"]["type"] == "LLMCallFailed"


async def test_infrastructure_retries_back_off() -> None:
    class Flaky(Benchmark):
        attempts = 0

        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def agent(query: Any) -> Any:
                Flaky.attempts += 1
                if Flaky.attempts < 3:
                    raise RuntimeError("transient")
                return "fine"

            return [agent], {}

    settings = Settings(retry_initial_delay=0.1, retry_max_delay=1.0)
    started = anyio.current_time()
    (report,) = await Flaky(settings=settings).run(
        [Task(query="q", protocol=TaskProtocol(max_retries=2))]
    )
    assert (report["status"], report["attempts"]) == ("success", 3)
    assert anyio.current_time() - started >= 0.1 + 0.2  # 0.1 s, then 0.2 s (plus jitter)


class ScoreBomb(SequentialQueue):
    def on_task_complete(self, task: Task, report: Any) -> None:
        if task.id == "2":
            raise ValueError("the queue's own bug")


async def test_a_broken_queue_stops_new_starts_lets_in_flight_finish_then_raises(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    queue = ScoreBomb(Task(query=i, id=str(i)) for i in range(50))
    with pytest.raises(ValueError, match="the queue's own bug"):
        await Agents(max_concurrent_tasks=4).run(queue=queue, results_path=path)
    records, damaged = read_records(path)
    finished = [r for r in records if r.get("type") != "header"]
    assert damaged == 0 and 3 <= len(finished) < 50  # in-flight ones finished and are on disk


async def test_a_duplicate_task_id_in_a_list_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    tasks = [Task(query=0, id="a"), Task(query=1, id="b"), Task(query=2, id="a")]
    with pytest.raises(TaskSpecError, match="tasks 0 and 2: task id 'a' appears twice"):
        await Agents(max_concurrent_tasks=4).run(tasks, results_path=path)
    assert not path.exists()  # nothing ran, not even the header


async def test_a_duplicate_id_from_a_lazy_source_is_raised_after_in_flight_work_is_recorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    tasks = iter([Task(query=0, id="a"), Task(query=1, id="b"), Task(query=2, id="a")])
    with pytest.raises(TaskSpecError, match="task id 'a' appears twice"):
        await Agents(max_concurrent_tasks=4).run(tasks, results_path=path)
    assert successful_pairs(path) == {("a", 0), ("b", 0)}


async def test_priority_queue_runs_the_highest_priority_first() -> None:
    order: list[str] = []

    class Order(BenchmarkCallback):
        def on_task_start(self, benchmark: Benchmark, task: Task) -> None:
            order.append(task.id)

    tasks = [
        Task(query=i, id=name, protocol=TaskProtocol(priority=priority))
        for i, (name, priority) in enumerate([("low", 0), ("high", 9), ("mid", 5), ("mid2", 5)])
    ]
    await Agents(max_concurrent_tasks=1, callbacks=[Order()]).run(tasks, queue=PriorityQueue)
    assert order == ["high", "mid", "mid2", "low"]


async def test_agent_data_per_task_reaches_its_own_task() -> None:
    seen: dict[str, str] = {}

    class Echo(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            seen[task.id] = agent_data["name"]
            return [lambda query: query], {}

    tasks = [Task(query=1, id="x"), Task(query=2, id="y")]
    await Echo(max_concurrent_tasks=2).run(
        tasks, agent_data=[{"name": "first"}, {"name": "second"}]
    )
    assert seen == {"x": "first", "y": "second"}
    await Echo().run(tasks, agent_data={"name": "same"})
    assert seen == {"x": "same", "y": "same"}


async def test_gather_config_may_use_attributes_set_after_init() -> None:
    class WithModel(Agents):
        def __init__(self) -> None:
            super().__init__()
            self.model_name = "judge-7b"

        def gather_config(self) -> dict[str, Any]:
            return {**super().gather_config(), "model": self.model_name}

    (report,) = await WithModel().run([Task(query="q")])
    assert report["config"]["benchmark"]["model"] == "judge-7b"


async def test_generate_sync_calls_from_a_sync_agent_are_in_the_report_usage() -> None:
    model = OpenAIChatModel(controller=ConcurrencyController(2), sim_config=SimConfig(latency=0))

    class SyncAgent(Benchmark):
        def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:  # type: ignore[override]
            def agent(query: Any) -> Any:  # runs in a worker thread
                return [model.generate_sync(f"What is {n} + 1?").text for n in range(3)]

            return [agent], {}

    async with model:
        (report,) = await SyncAgent().run([Task(query="q")])
    assert report["status"] == "success" and report["usage"]["llm_calls"] == 3


async def test_a_benchmark_controller_bounds_the_calls_of_models_without_their_own() -> None:
    """Benchmark(controller=...) replaces the runtime's limiter for that run's models."""
    controller = ConcurrencyController(3)
    model = OpenAIChatModel(sim_config=SimConfig(latency=0))

    class Calls(Benchmark):
        async def setup_agents(self, agent_data: Any, env: Any, task: Task, user: Any) -> Any:
            async def agent(query: Any) -> str:
                return (await model.generate(str(query))).text

            return [agent], {}

    reports = await Calls(controller=controller).run(
        [Task(query="q", id=f"t{i}") for i in range(4)]
    )
    assert all(r["status"] == "success" for r in reports)
    assert controller.statistics().granted == 4


async def test_a_resumed_adaptive_run_learns_from_the_earlier_reports(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    bank = [Task(query=i, id=f"i{i}", metadata={"difficulty": i / 10 - 1}) for i in range(20)]
    first = AdaptiveQueue(bank, budget=5)
    await Agents(max_concurrent_tasks=1).run(queue=first, results_path=path)
    second = AdaptiveQueue(bank, budget=10)
    reports = await Agents(max_concurrent_tasks=1).run(queue=second, results_path=path, resume=True)
    assert second.n_observations == first.n_observations + len(reports)
    assert {r["task_id"] for r in reports}.isdisjoint(set(h[0] for h in first.summary()["history"]))


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "4", float("inf")])
def test_max_concurrent_tasks_must_be_a_whole_number_of_at_least_one(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"max_concurrent_tasks must be an integer >= 1, got "):
        Agents(max_concurrent_tasks=bad)


class CountsTasks(Agents):
    """Its agent counts the event loop's tasks while it runs."""

    alive: list[int]

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        import asyncio

        async def agent(query: Any) -> Any:
            self.alive.append(len(asyncio.all_tasks()))
            await anyio.lowlevel.checkpoint()
            return "ok"

        return [agent], {}


async def test_a_huge_max_concurrent_tasks_starts_no_more_workers_than_repetitions() -> None:
    """A million allowed at once for six repetitions: six workers, not a million (which took
    most of a minute and gigabytes before any repetition started)."""
    bench = CountsTasks(max_concurrent_tasks=1_000_000, n_task_repeats=2)
    bench.alive = []
    with anyio.fail_after(60):  # a safety net only: the count below is the check
        reports = await bench.run([Task(query=i, id=str(i)) for i in range(3)])
    assert max(bench.alive) < 20  # six workers, the test's own task and a few of the run's
    assert sorted((r["task_id"], r["repeat_idx"]) for r in reports) == [
        (str(i), r) for i in range(3) for r in range(2)
    ]


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
