"""The sync bridge: sync code in the engine's threads reaches the loop through the run's portal,
never inside its repetition's cancel scope; an abandoned thread's calls are cancelled at the
deadline and refused afterwards, with no busy loop."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from asynceval import (
    Benchmark,
    OpenAIChatModel,
    Runtime,
    Settings,
    SyncAgent,
    Task,
    TaskProtocol,
    Tool,
    ToolExecutor,
)
from asynceval.errors import RepetitionExpired, RunFinished
from asynceval.sim import SimConfig

from ..conftest import EventLog


class _Agents(Benchmark):
    """setup_agents wraps the sync object `make()` builds in a SyncAgent."""

    def __init__(self, make: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.make = make

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        agent = SyncAgent(self.make())
        return [agent], {"agent": agent}


def _timed(query: str, seconds: float) -> Task:
    return Task(query=query, id=query, protocol=TaskProtocol(timeout_seconds=seconds))


async def test_an_abandoned_threads_later_call_is_refused_at_once_and_the_loop_stays_idle() -> None:
    """After its repetition times out, a thread's call raises RepetitionExpired at once (while
    the run goes on) and the process uses next to no CPU meanwhile."""
    model = OpenAIChatModel(sim_config=SimConfig(latency=0))
    seen: list[tuple[str, float]] = []
    done = threading.Event()

    class Late:
        def run(self, query: str) -> str:
            time.sleep(0.5)  # past the 0.2 s timeout: the repetition has given up on us
            started = time.monotonic()
            try:
                model.generate_sync("hi")
            except BaseException as exc:
                seen.append((type(exc).__name__, time.monotonic() - started))
            done.set()
            return "late"

    class Patient:
        async def run(self, query: str) -> str:
            await anyio.sleep(1.5)  # keeps the run going while the other thread calls
            return "done"

    class Bench(Benchmark):
        async def setup_agents(self, agent_data: Any, env: Any, task: Task, user: Any) -> Any:
            agent = SyncAgent(Late()) if task.id == "late" else Patient().run
            return [agent], {}

    cpu: list[float] = []

    async def watch() -> None:
        await anyio.sleep(0.25)  # the deadline has passed
        before = time.process_time()
        await anyio.sleep(1.0)
        cpu.append(time.process_time() - before)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        reports = await Bench().run([_timed("late", 0.2), _timed("patient", 5)])
    assert done.wait(5)
    assert {r["task_id"]: r["status"] for r in reports} == {
        "late": "task_timeout",
        "patient": "success",
    }
    ((name, took),) = seen
    assert name == "RepetitionExpired" and took < 0.1
    assert cpu[0] < 0.3  # idle: no thread spinning on a cancelled scope


async def test_a_bridged_calls_slot_is_freed_at_the_deadline(event_log: EventLog) -> None:
    """A sync agent's call to a slow provider is cancelled when its repetition times out: the
    slot is free while the run is still going (not only when the run ends and the portal
    closes) and while the thread is still blocked in the call."""
    rt = Runtime(Settings())
    model = OpenAIChatModel(sim_config=SimConfig(latency=3.0), runtime=rt)
    outcome: list[BaseException] = []
    returned = threading.Event()
    active_mid_run: list[int] = []

    class Caller:
        def run(self, query: str) -> str:
            try:
                model.generate_sync("hi")
            except BaseException as exc:
                outcome.append(exc)
            returned.set()
            return "x"

    class Patient:
        async def run(self, query: str) -> str:
            await anyio.sleep(0.6)  # past the other's deadline: the run is still going
            active_mid_run.append(rt.limiter.statistics().active)
            return "done"

    class Bench(Benchmark):
        async def setup_agents(self, agent_data: Any, env: Any, task: Task, user: Any) -> Any:
            agent = SyncAgent(Caller()) if task.id == "slow" else Patient().run
            return [agent], {}

    reports = await Bench(runtime=rt).run([_timed("slow", 0.3), _timed("patient", 5)])
    assert {r["task_id"]: r["status"] for r in reports} == {
        "slow": "task_timeout",
        "patient": "success",
    }
    assert active_mid_run == [0]  # the 3 s call held no slot 0.3 s after its deadline
    assert await anyio.to_thread.run_sync(returned.wait, 2)
    assert isinstance(outcome[0], RepetitionExpired)
    acquired = {e["call_id"] for e in event_log.named("acquired")}
    released = {e["call_id"] for e in event_log.named("released")}
    assert acquired and acquired == released


async def test_a_thread_calling_after_its_run_ended_gets_run_finished() -> None:
    model = OpenAIChatModel(sim_config=SimConfig(latency=0))
    outcome: list[BaseException] = []
    done = threading.Event()

    class Lingering:
        def run(self, query: str) -> str:
            time.sleep(0.4)  # the run ends (timeout 0.1) while we sleep
            try:
                model.generate_sync("hi")
            except BaseException as exc:
                outcome.append(exc)
            done.set()
            return "x"

    reports = await _Agents(Lingering).run([_timed("lingering", 0.1)])
    assert reports[0]["status"] == "task_timeout"
    assert await anyio.to_thread.run_sync(done.wait, 3)
    assert isinstance(outcome[0], RunFinished)
    assert "has ended" in str(outcome[0])


@pytest.mark.parametrize("tasks", [1, 2, 4])
async def test_a_sync_tool_run_by_a_sync_agent_never_deadlocks(tasks: int) -> None:
    """Sync agents fill every engine thread; their sync tools run on the agents' own tokens."""
    ran: list[str] = []

    def lookup(city: str) -> str:
        ran.append(threading.current_thread().name)
        return f"sunny in {city}"

    executor = ToolExecutor([Tool("lookup", lookup, read_only=True)])

    class ToolUser:
        def run(self, query: str) -> str:
            results = executor.run_sync(
                [{"id": "1", "name": "lookup", "arguments": {"city": query}}]
            )
            return str(results[0]["content"])

    with anyio.fail_after(10):
        reports = await _Agents(ToolUser, max_concurrent_tasks=tasks).run(
            [Task(query=f"city{i}", id=f"t{i}") for i in range(tasks * 2)]
        )
    assert [r["status"] for r in reports] == ["success"] * (tasks * 2)
    assert len(ran) == tasks * 2
    assert all(name == "asynceval worker" for name in ran)
