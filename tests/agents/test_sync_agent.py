"""SyncAgent: sync agent objects run in the engine's worker threads, their calls through the limit."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest

from asynceval import Benchmark, OpenAIChatModel, Settings, Task
from asynceval.agents import SyncAgent
from asynceval.errors import AgentError
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig

from ..conftest import EventLog


class SyncSolver:
    """A blocking agent: `calls` model calls per query via generate_sync, no agent= of its own."""

    def __init__(self, model: OpenAIChatModel, calls: int = 3, fail_with: Exception | None = None):
        self.model = model
        self.calls = calls
        self.fail_with = fail_with
        self.threads: set[int] = set()

    def run(self, query: str) -> str:
        self.threads.add(threading.get_ident())
        answers = [self.model.generate_sync(f"{query} (step {i})").text for i in range(self.calls)]
        if self.fail_with is not None:
            raise self.fail_with
        return answers[-1]


class SyncBench(Benchmark):
    def __init__(self, model: OpenAIChatModel, **solver: Any) -> None:
        super().__init__(max_concurrent_tasks=4)
        self.model = model
        self.solver = solver
        self.solvers: list[SyncSolver] = []

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        solver = SyncSolver(self.model, **self.solver)
        self.solvers.append(solver)
        agent = SyncAgent(solver, name="sync-solver")
        return [agent], {"solver": agent}


def _tasks(n: int) -> list[Task]:
    return [Task(query=f"What is {i} + 1?", id=f"t{i}") for i in range(n)]


async def test_a_sync_agent_runs_in_worker_threads_and_its_calls_are_counted(
    event_log: EventLog,
) -> None:
    async with OpenAIChatModel(settings=Settings(), sim_config=SimConfig(latency=0.01)) as model:
        bench = SyncBench(model, calls=3)
        reports = await bench.run(_tasks(4))
    assert len(reports) == 4
    by_id = {r["task_id"]: r for r in reports}
    for i in range(4):
        report = by_id[f"t{i}"]
        assert report["status"] == "success"
        assert report["termination_reason"] == "agent_stop"
        assert report["usage"]["llm_calls"] == 3  # the thread's generate_sync calls count
        assert report["traces"]["agents"]["solver"] == {
            "name": "sync-solver", "calls": 1, "errors": 0, "last_error": None,
        }  # fmt: skip
        assert report["config"]["agents"]["solver"] == {
            "name": "sync-solver",
            "type": f"{SyncSolver.__module__}.SyncSolver",
            "method": "run",
        }
    loop_thread = threading.get_ident()
    assert all(s.threads and loop_thread not in s.threads for s in bench.solvers)
    acquired = event_log.named("acquired")
    assert len(acquired) == 12 and {e["agent"] for e in acquired} == {"sync-solver"}
    assert {e["task_id"] for e in acquired} == {f"t{i}" for i in range(4)}


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (AgentError("the solver gave up"), "agent_error"),
        (KeyError("missing"), "unknown_execution_error"),
    ],
)
async def test_an_error_inside_the_sync_agent_becomes_the_repetition_status(
    error: Exception, status: str
) -> None:
    async with OpenAIChatModel(settings=Settings(), sim_config=SimConfig(latency=0)) as model:
        (report,) = await SyncBench(model, calls=1, fail_with=error).run(_tasks(1))
    assert report["status"] == status
    assert report["error"]["type"] == type(error).__name__
    assert report["usage"]["llm_calls"] == 1  # the call before the error still counts
    traces = report["traces"]["agents"]["solver"]
    assert traces["calls"] == 1 and traces["errors"] == 1
    assert traces["last_error"] == f"{type(error).__name__}: {error}"


class MixedBench(Benchmark):
    """Even tasks: a SyncAgent (thread, generate_sync); odd tasks: an async agent (generate)."""

    def __init__(self, model: OpenAIChatModel, controller: ConcurrencyController) -> None:
        super().__init__(max_concurrent_tasks=8, controller=controller)
        self.model = model

    async def setup_agents(
        self, agent_data: Mapping[str, Any], environment: Any, task: Task, user: Any
    ) -> Any:
        if int(task.id[1:]) % 2 == 0:
            agent: Callable[[str], Any] = SyncAgent(SyncSolver(self.model), name="sync-solver")
        else:

            async def agent(query: str) -> str:
                text = ""
                for i in range(3):
                    step = f"{query} (step {i})"
                    text = (await self.model.generate(step, agent="async-solver")).text
                return text

        return [agent], {"solver": agent}


def _peak_of_both(events: list[dict[str, Any]]) -> bool:
    """Whether a sync and an async call were ever in flight at the same moment (log order)."""
    in_flight: dict[str, str] = {}
    for event in events:
        if event["event"] == "acquired":
            in_flight[event["call_id"]] = event["agent"]
            if set(in_flight.values()) == {"sync-solver", "async-solver"}:
                return True
        elif event["event"] == "released":
            in_flight.pop(event["call_id"], None)
    return False


async def test_sync_and_async_agents_never_exceed_the_limit_together(
    sim_server: Callable[..., str], event_log: EventLog
) -> None:
    base_url = sim_server("--latency", "0.02")
    controller = ConcurrencyController(3)
    settings = Settings(llm_base_url=base_url, llm_model="sim")
    async with OpenAIChatModel(settings=settings, controller=controller) as model:
        reports = await MixedBench(model, controller).run(_tasks(16))
    async with httpx.AsyncClient() as client:
        stats = (await client.get(base_url.removesuffix("/v1") + "/stats")).json()
    assert [r["status"] for r in reports] == ["success"] * 16
    assert sum(r["usage"]["llm_calls"] for r in reports) == 48
    assert stats["requests"] == 48
    assert stats["max_in_flight"] == 3  # provider-observed: the limit held for both kinds
    assert event_log.max_in_flight() == 3
    assert controller.statistics().max_active == 3
    acquired = event_log.named("acquired")
    assert {e["agent"] for e in acquired} == {"sync-solver", "async-solver"}
    assert _peak_of_both(event_log.all())


def test_sync_agent_names_and_refuses_objects_without_the_method() -> None:
    class Named:
        name = "named-agent"

        def run(self, query: str) -> str:
            return query

        def answer(self, query: str) -> str:
            return query.upper()

    assert SyncAgent(Named()).name == "named-agent"
    assert SyncAgent(Named(), name="other").name == "other"
    assert SyncAgent(Named(), method="answer", name=None).name == "named-agent"

    class Unnamed:
        name = None  # e.g. a smolagents agent that is not a managed agent

        def run(self, query: str) -> str:
            return query

    assert SyncAgent(Unnamed()).name == "Unnamed"
    agent = SyncAgent(Named(), method="answer")
    assert agent.gather_config()["method"] == "answer"
    with pytest.raises(TypeError, match=r"no callable go\(\) method"):
        SyncAgent(Named(), method="go")


async def test_sync_agent_outside_an_engine_run_calls_the_method_inline() -> None:
    class Echo:
        def run(self, query: str) -> str:
            return f"echo {query}"

    agent = SyncAgent(Echo())
    assert await agent("hi") == "echo hi"
    assert agent.gather_traces() == {"name": "Echo", "calls": 1, "errors": 0, "last_error": None}
