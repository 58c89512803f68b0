"""generate_sync: sync code in worker threads goes through the same controller as async code."""

from __future__ import annotations

import threading

import anyio
import anyio.to_thread
import pytest

from asynceval import OpenAIChatModel, Settings
from asynceval.limits import ConcurrencyController
from asynceval.llm import track_usage
from asynceval.sim import SimConfig

from ..conftest import EventLog


async def test_sync_and_async_callers_share_one_limit(event_log: EventLog) -> None:
    controller = ConcurrencyController(3)
    model = OpenAIChatModel(
        settings=Settings(), controller=controller, sim_config=SimConfig(latency=0.02)
    )
    answers: list[str] = []

    def sync_solver(index: int) -> None:
        for step in range(3):
            answers.append(model.generate_sync(f"What is {index} + {step}?", agent="sync").text)

    async def async_solver(index: int) -> None:
        for step in range(3):
            answers.append((await model.generate(f"What is {index} * {step}?", agent="async")).text)

    async with model:
        with track_usage() as usage:
            async with anyio.create_task_group() as tg:
                for index in range(6):
                    tg.start_soon(anyio.to_thread.run_sync, sync_solver, index)
                    tg.start_soon(async_solver, index)
        provider = model.sim.stats()  # type: ignore[union-attr]
    assert len(answers) == 36 and usage.llm_calls == 36  # the thread's calls count here too
    assert provider["max_in_flight"] == 3 and controller.statistics().max_active == 3
    assert event_log.max_in_flight() == 3
    agents = {e["agent"] for e in event_log.named("acquired")}
    assert agents == {"sync", "async"}


async def test_generate_sync_on_the_event_loop_thread_is_refused() -> None:
    async with OpenAIChatModel(sim_config=SimConfig(latency=0)) as model:
        with pytest.raises(RuntimeError, match=r"event loop thread.*await model.generate"):
            model.generate_sync("hi")


async def test_generate_sync_from_a_plain_thread_runs_on_the_background_loop() -> None:
    """A thread the user started has no loop to hop to: its call runs on the process's
    background loop, through the same limit."""
    answers: list[str] = []
    controller = ConcurrencyController(1)

    def plain() -> None:
        answers.append(model.generate_sync("What is 2 + 3?").text)

    async with OpenAIChatModel(controller=controller, sim_config=SimConfig(latency=0)) as model:
        threads = [threading.Thread(target=plain) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            await anyio.to_thread.run_sync(thread.join)
    assert answers == ["5", "5", "5"]
    assert controller.statistics().granted == 3 and controller.statistics().max_active == 1
