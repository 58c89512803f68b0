"""What a repetition's code does to the rest of the run, seen from outside: calls cut short by a
timeout still count, tasks an agent leaves running are cancelled and counted, an agent that
blocks the event loop is named, and each error says whose it was (its kind)."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from asynceval import Benchmark, OpenAIChatModel, Settings, Task, TaskProtocol, configure_logging
from asynceval.sim import SimConfig, SimProvider

pytestmark = pytest.mark.anyio

Loopback = Callable[[SimConfig], tuple[str, SimProvider]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def warnings_out() -> io.StringIO:
    stream = io.StringIO()
    configure_logging(Settings(log_level="DEBUG"), stream=stream)
    return stream


def _events(stream: io.StringIO, name: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [line for line in lines if line.get("event") == name]


async def test_a_timed_out_repetition_counts_the_call_the_provider_received(
    loopback: Loopback,
) -> None:
    base_url, provider = loopback(SimConfig(latency=5.0))
    model = OpenAIChatModel(base_url=base_url, api_key="k", model="m")

    class Slow(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def solver(query: Any) -> Any:
                return (await model.generate(query, agent="solver")).text

            return [solver], {"solver": solver}

    async with model:
        (report,) = await Slow().run([Task(query="q", protocol=TaskProtocol(timeout_seconds=0.5))])
    assert report["status"] == "task_timeout"
    assert report["error"]["kind"] == "timeout"
    assert provider.stats()["requests"] == 1
    assert report["usage"]["llm_calls"] == 1  # was 0: the request had reached the provider


async def test_tasks_an_agent_leaves_running_are_cancelled_named_and_counted(
    loopback: Loopback, warnings_out: io.StringIO
) -> None:
    base_url, provider = loopback(SimConfig(latency=0.05))
    model = OpenAIChatModel(base_url=base_url, api_key="k", model="m")
    pollers: list[asyncio.Task[Any]] = []

    class Leaky(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def poll_forever() -> None:
                while True:
                    await model.generate("ping", agent="leaky")

            async def leaky(query: Any) -> Any:
                pollers.append(asyncio.create_task(poll_forever()))
                await asyncio.sleep(0.3)
                return "done"

            return [leaky], {"leaky": leaky}

    async with model:
        reports = await Leaky(n_task_repeats=3).run([Task(query="q")])
        await asyncio.sleep(0.3)  # a task left running would go on calling
    assert all(task.done() for task in pollers)
    made = provider.stats()["requests"]
    counted = sum(report["usage"]["llm_calls"] for report in reports)
    # Was 3 of 15 (the calls made after each repetition ended were lost); now every call, the
    # one each poller had in flight when cancelled included (a call cancelled after taking its
    # slot but before its bytes reached the provider counts too: at most one a repetition).
    assert made <= counted <= made + len(reports), (counted, made)
    (left,) = {line["agent"] for line in _events(warnings_out, "tasks_left_running")}
    assert left == "leaky"
    warnings = _events(warnings_out, "tasks_left_running")
    assert len(warnings) == 3 and all(w["count"] == 1 for w in warnings)
    assert "poll_forever" in warnings[0]["tasks"][0]


async def test_an_agent_blocking_the_loop_is_named_and_the_timeouts_it_caused_are_its(
    loopback: Loopback, warnings_out: io.StringIO
) -> None:
    # The caller's answer comes at 1.5 s; its deadline (1.1 s) passes while the loop is held
    # from 0.1 s to 1.3 s: on the loop's return the call has timed out, the loop's doing.
    base_url, _ = loopback(SimConfig(latency=1.5))
    settings = Settings(
        llm_base_url=base_url,
        llm_api_key="k",
        llm_call_timeout=1.1,
        retry_max_attempts=1,
        loop_block_warn_s=0.5,
    )
    model = OpenAIChatModel(base_url=base_url, api_key="k", model="m")

    class Mixed(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def sleeper(query: Any) -> Any:
                await asyncio.sleep(0.1)  # the caller's request is out by now
                time.sleep(1.2)  # noqa: ASYNC251 - blocks every other repetition, on purpose
                return "slept"

            async def caller(query: Any) -> Any:
                return (await model.generate(query, agent="caller")).text

            agent = sleeper if task.id == "sleepy" else caller
            return [agent], {agent.__name__: agent}

    async with model:
        reports = await Mixed(settings=settings).run(
            [Task(query="q", id="sleepy"), Task(query="q", id="calling")]
        )
    (blocked,) = _events(warnings_out, "loop_blocked")
    assert blocked["agent"] == "sleeper" and blocked["task_id"] == "sleepy"
    assert 0.9 < blocked["blocked_s"] < 2.0 and blocked["threshold_s"] == 0.5
    by_id = {report["task_id"]: report for report in reports}
    error = by_id["calling"]["error"]
    assert error["kind"] == "loop_blocked", error
    assert "not the provider" in error["message"] and "'sleeper'" in error["message"]


async def test_a_block_before_the_agents_first_await_is_named(warnings_out: io.StringIO) -> None:
    # The commonest way to block a loop: a sync call as an async agent's first line, in the run's
    # first repetition, before anything was awaited (the watch used to miss it: 0 events).
    settings = Settings(loop_block_warn_s=0.3)

    class Blocking(Benchmark):
        async def setup_agents(
            self, agent_data: Any, environment: Any, task: Task, user: Any
        ) -> Any:
            async def sync_first(query: Any) -> Any:
                time.sleep(0.8)  # noqa: ASYNC251 - blocks the loop, on purpose
                return "done"

            return [sync_first], {"sync_first": sync_first}

    (report,) = await Blocking(settings=settings).run([Task(query="q", id="first")])
    assert report["status"] == "success"
    (blocked,) = _events(warnings_out, "loop_blocked")
    assert blocked["agent"] == "sync_first" and blocked["task_id"] == "first"
    assert 0.5 < blocked["blocked_s"] < 2.0


class _Failing(Benchmark):
    """Each task fails its own way: its id says where."""

    def __init__(self, model: OpenAIChatModel, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model

    async def setup_environment(self, agent_data: Any, task: Task) -> Any:
        if task.id == "setup":
            raise KeyError("no such fixture")
        return None

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = self.model

        async def solver(query: Any) -> Any:
            if task.id == "bug":
                return query.no_such_attribute
            if task.id == "llm":
                return (await model.generate(query, agent="solver")).text
            return "fine"

        return [solver], {"solver": solver}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Any, user: Any
    ) -> Any:
        def judge(task: Task, answer: Any, traces: Any) -> Any:
            if task.id == "judge":
                raise ValueError("the judge broke")
            return {"passed": True}

        return [judge]


@pytest.mark.parametrize(
    ("task_id", "kind", "status"),
    [
        ("bug", "agent_raised", "unknown_execution_error"),
        ("setup", "setup_failed", "setup_failed"),
        ("judge", "evaluator_raised", "evaluation_failed"),
    ],
)
async def test_each_error_says_whose_it_was(task_id: str, kind: str, status: str) -> None:
    model = OpenAIChatModel(sim_config=SimConfig(latency=0))
    async with model:
        (report,) = await _Failing(model).run([Task(query="q", id=task_id)])
    assert (report["status"], report["error"]["kind"]) == (status, kind)


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "provider_refused"), (503, "provider_unreachable")]
)
async def test_a_provider_failure_is_the_providers(status: int, kind: str) -> None:
    model = OpenAIChatModel(
        sim_config=SimConfig(latency=0, fault_rates={status: 1.0}, retry_after=0)
    )
    settings = Settings(retry_max_attempts=1)
    async with model:
        (report,) = await _Failing(model, settings=settings).run([Task(query="q", id="llm")])
    assert report["error"]["kind"] == kind
