"""anyio's own bridge in the engine's threads: sync code the engine runs can call
`anyio.from_thread.run`, `run_sync` and `check_cancelled` as in anyio's worker threads, with the
guarantees of `asynceval.runtime.from_thread` (refused after the repetition's deadline, no
deadlock at any task count)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import anyio
import anyio.from_thread
import pytest

from asynceval import Benchmark, SyncAgent, Task, TaskProtocol, Tool, ToolExecutor
from asynceval.engine.threads import ThreadRunner, run_in_thread, threads_scope
from asynceval.errors import RepetitionExpired

LIMIT = 3  # the run's thread limit (max_concurrent_tasks)


class _Agents(Benchmark):
    """setup_agents wraps the sync object `make()` builds in a SyncAgent."""

    def __init__(self, make: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.make = make

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        agent = SyncAgent(self.make())
        return [agent], {"agent": agent}


class _WithPatient(Benchmark):
    """Task "patient" gets an async agent that sleeps `patient_s` (keeping the run going); any
    other task a SyncAgent of what `make()` builds."""

    def __init__(self, make: Any, patient_s: float) -> None:
        super().__init__()
        self.make = make
        self.patient_s = patient_s

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        if task.id == "patient":

            async def patient(query: str) -> str:
                await anyio.sleep(self.patient_s)
                return "done"

            return [patient], {}
        return [SyncAgent(self.make())], {}


def _timed(query: str, seconds: float) -> Task:
    return Task(query=query, id=query, protocol=TaskProtocol(timeout_seconds=seconds))


async def _on_the_loop(query: str) -> tuple[str, int]:
    await anyio.sleep(0.01)  # a real suspension on the loop, not only a call
    return query.upper(), threading.get_ident()


@pytest.mark.parametrize("tasks", [LIMIT, LIMIT * 3])
async def test_a_sync_agent_reaches_the_loop_through_anyio_at_and_above_the_thread_limit(
    tasks: int,
) -> None:
    """Every engine thread busy at once (a barrier holds them until all are), each calls
    anyio.from_thread.run and run_sync back into the loop and check_cancelled: every repetition
    succeeds, on the run's loop thread, with no deadlock."""
    loop_thread = threading.get_ident()
    barrier = threading.Barrier(LIMIT)

    class Caller:
        def run(self, query: str) -> str:
            barrier.wait(5)  # a BrokenBarrierError (agent_error) if the threads are not all busy
            anyio.from_thread.check_cancelled()
            text, ran_on = anyio.from_thread.run(_on_the_loop, query)
            on_loop = anyio.from_thread.run_sync(threading.get_ident)
            assert ran_on == on_loop == loop_thread
            return text

    with anyio.fail_after(20):
        reports = await _Agents(Caller, max_concurrent_tasks=LIMIT).run(
            [Task(query=f"q{i}", id=f"t{i}") for i in range(tasks)]
        )
    assert [r["status"] for r in reports] == ["success"] * tasks, reports[0]["error"]
    assert [r["traces"]["agents"]["agent"]["errors"] for r in reports] == [0] * tasks


async def test_a_call_through_anyio_after_the_deadline_is_refused_at_once() -> None:
    """After its repetition times out, an abandoned thread's anyio.from_thread.run and run_sync
    raise RepetitionExpired (a TaskTimeoutError, as asynceval.runtime.from_thread's) at once,
    while the run goes on, and what they would run never runs."""
    seen: list[tuple[BaseException, float]] = []
    ran: list[str] = []
    done = threading.Event()

    async def should_not_run() -> None:
        ran.append("run")

    def should_not_run_sync() -> None:
        ran.append("run_sync")

    class Late:
        def run(self, query: str) -> str:
            time.sleep(0.5)  # past the 0.2 s timeout: the repetition has given up on us
            for call in (
                lambda: anyio.from_thread.run(should_not_run),
                lambda: anyio.from_thread.run_sync(should_not_run_sync),
            ):
                started = time.monotonic()
                try:
                    call()
                except BaseException as exc:
                    seen.append((exc, time.monotonic() - started))
            done.set()
            return "late"

    reports = await _WithPatient(Late, 1.2).run([_timed("late", 0.2), _timed("patient", 5)])
    assert await anyio.to_thread.run_sync(done.wait, 5)
    assert {r["task_id"]: r["status"] for r in reports} == {
        "late": "task_timeout",
        "patient": "success",
    }
    assert [type(exc) for exc, _ in seen] == [RepetitionExpired, RepetitionExpired], seen
    assert all("timed out after 0.2 s" in str(exc) for exc, _ in seen)
    assert all(took < 0.1 for _, took in seen)
    assert ran == []


async def test_check_cancelled_raises_once_the_repetition_has_timed_out() -> None:
    """A sync agent polling anyio.from_thread.check_cancelled is told nothing before its
    deadline and gets the loop's cancellation exception, naming the timeout, right after it."""
    raised: list[tuple[BaseException, float]] = []
    done = threading.Event()

    class Poller:
        def run(self, query: str) -> str:
            started = time.monotonic()
            try:
                while time.monotonic() - started < 5:
                    anyio.from_thread.check_cancelled()
                    time.sleep(0.01)
            except BaseException as exc:
                raised.append((exc, time.monotonic() - started))
            done.set()
            return "polled"

    reports = await _WithPatient(Poller, 1.5).run([_timed("poller", 0.3), _timed("patient", 5)])
    assert await anyio.to_thread.run_sync(done.wait, 6)
    assert reports[0]["status"] == "task_timeout"
    ((error, after),) = raised
    assert isinstance(error, asyncio.CancelledError), repr(error)
    assert "timed out after 0.3 s" in str(error)
    assert 0.1 < after < 1.0  # not at once: at the deadline (0.3 s after the attempt began)


async def test_a_sync_tool_run_by_a_sync_agent_both_using_anyio_never_deadlocks() -> None:
    """Sync agents fill every engine thread and call their tools through anyio.from_thread.run;
    the sync tools (run on the agents' own tokens) call back through anyio too."""
    loop_thread = threading.get_ident()
    barrier = threading.Barrier(LIMIT)
    ran: list[str] = []

    def lookup(city: str) -> str:
        anyio.from_thread.check_cancelled()
        assert anyio.from_thread.run_sync(threading.get_ident) == loop_thread
        text, _ = anyio.from_thread.run(_on_the_loop, city)
        ran.append(threading.current_thread().name)
        return f"sunny in {text}"

    executor = ToolExecutor([Tool("lookup", lookup, read_only=True)])

    class ToolUser:
        def run(self, query: str) -> str:
            barrier.wait(5)  # every engine thread is an agent's before any tool runs
            calls = [{"id": "1", "name": "lookup", "arguments": {"city": query}}]
            results = anyio.from_thread.run(executor.run, calls)
            return str(results[0]["content"])

    with anyio.fail_after(20):
        reports = await _Agents(ToolUser, max_concurrent_tasks=LIMIT).run(
            [Task(query=f"city{i}", id=f"t{i}") for i in range(LIMIT * 2)]
        )
    assert [r["status"] for r in reports] == ["success"] * (LIMIT * 2), reports[0]["error"]
    assert [r["traces"]["agents"]["agent"]["last_error"] for r in reports] == [None] * (LIMIT * 2)
    assert len(ran) == LIMIT * 2
    assert all(name == "asynceval worker" for name in ran)


async def test_anyio_finds_the_engine_threads_mark_outside_a_repetition() -> None:
    """anyio's from_thread functions still find the mark the engine puts on its threads (the
    one use of anyio's private state, checked against anyio 4.11-4.16: see
    `asynceval.engine.threads._claim_for_anyio`); with no repetition's bridge they run on the
    loop that started the thread."""
    loop_thread = threading.get_ident()

    def sync() -> tuple[str, int]:
        anyio.from_thread.check_cancelled()
        text, _ = anyio.from_thread.run(_on_the_loop, "x")
        return text, anyio.from_thread.run_sync(threading.get_ident)

    with threads_scope(ThreadRunner(1)):
        try:
            result = await run_in_thread(sync)
        except anyio.NoEventLoopError as exc:
            pytest.fail(
                "anyio.from_thread no longer finds the engine threads' mark: anyio's private "
                f"thread-local layout changed (see _claim_for_anyio): {exc}"
            )
    assert result == ("X", loop_thread)
