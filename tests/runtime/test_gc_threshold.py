"""RUN_GC_THRESHOLD: the collector's young threshold is raised while runs go and put back when
the last one ends; the application's own choices are never lowered nor overwritten."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asynceval import Benchmark, Runtime, Settings, Task
from asynceval.errors import ConfigError
from asynceval.runtime import RunGcThreshold


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, ...]]:
    """Each test starts from CPython's default thresholds and leaves them as it found them."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


class Seen(Benchmark):
    """Its agent records the thresholds in force while it runs."""

    def __init__(self, seen: list[tuple[int, ...]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen = seen

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> str:
            self.seen.append(gc.get_threshold())
            await anyio.lowlevel.checkpoint()
            return "ok"

        return [agent], {}


async def test_a_run_raises_the_young_threshold_and_puts_it_back() -> None:
    seen: list[tuple[int, ...]] = []
    async with Runtime(Settings(run_gc_threshold=12345)):
        await Seen(seen).run([Task(query="q")])
    assert seen == [(12345, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)


async def test_zero_leaves_the_collector_alone() -> None:
    seen: list[tuple[int, ...]] = []
    async with Runtime(Settings(run_gc_threshold=0)):
        await Seen(seen).run([Task(query="q")])
    assert seen == [(700, 10, 10)]


async def test_a_higher_threshold_of_the_application_is_never_lowered() -> None:
    gc.set_threshold(50_000, 20, 5)
    seen: list[tuple[int, ...]] = []
    async with Runtime(Settings(run_gc_threshold=10_000)):
        await Seen(seen).run([Task(query="q")])
    assert seen == [(50_000, 20, 5)]
    assert gc.get_threshold() == (50_000, 20, 5)


def test_thresholds_the_application_sets_during_a_run_are_kept() -> None:
    with RunGcThreshold(9000):
        assert gc.get_threshold() == (9000, 10, 10)
        gc.set_threshold(3000, 10, 10)  # the application's own choice, mid-run
    assert gc.get_threshold() == (3000, 10, 10)


def test_overlapping_runs_share_one_raise_and_the_last_to_end_puts_it_back() -> None:
    first, second = RunGcThreshold(0), RunGcThreshold(8000)  # the first asks for nothing
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold() == (8000, 10, 10)
    first.__exit__(None, None, None)
    assert gc.get_threshold() == (8000, 10, 10)  # the second still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_runs_in_several_threads_at_once_put_the_thresholds_back() -> None:
    inside = threading.Barrier(4)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            with RunGcThreshold(10_000):
                inside.wait(timeout=10)
                assert gc.get_threshold()[0] == 10_000
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert errors == []
    assert gc.get_threshold() == (700, 10, 10)


def test_a_negative_threshold_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="RUN_GC_THRESHOLD must be >= 0"):
        Settings(run_gc_threshold=-1)


def test_a_run_starting_while_the_last_one_puts_the_thresholds_back_still_gets_its_raise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thread A's run ends (the count falls to 0, the old thresholds are being put back) while
    thread B's run starts: B must not take A's raise as still in force and run at 700."""
    from asynceval.runtime import _gc

    restoring, entered, a_done = threading.Event(), threading.Event(), threading.Event()
    real_set = gc.set_threshold

    class SlowRestore:
        get_threshold = staticmethod(gc.get_threshold)

        @staticmethod
        def set_threshold(*values: int) -> None:
            if values[0] == 700 and threading.current_thread().name == "a":
                restoring.set()
                entered.wait(0.3)  # B's start lands in the middle of the restore
            real_set(*values)

    monkeypatch.setattr(_gc, "gc", SlowRestore)
    seen: list[int] = []

    def a() -> None:
        with RunGcThreshold(10000):
            pass
        a_done.set()

    def b() -> None:
        restoring.wait(5)
        run = RunGcThreshold(10000)
        run.__enter__()
        entered.set()
        try:
            a_done.wait(5)
            seen.append(gc.get_threshold()[0])  # in B's run, once A's has ended
        finally:
            run.__exit__(None, None, None)

    threads = [threading.Thread(target=a, name="a"), threading.Thread(target=b, name="b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [10000] and gc.get_threshold() == (700, 10, 10)
