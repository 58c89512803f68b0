"""Callbacks: hooks into a run's life, called one at a time by the engine.

Subclass `BenchmarkCallback` and override any of its eight methods, as `def` or `async def`. The
engine serializes every call (one at a time, in order), so a callback needs no lock of its own. A
sync callback runs on the event loop thread: keep it quick, or make it `async`. A callback that
raises is logged (`callback_failed`) and the run goes on.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from .. import events

if TYPE_CHECKING:
    from .benchmark import Benchmark
    from .queues import TaskQueue
    from .task import Task

Report = Mapping[str, Any]


class BenchmarkCallback:
    """No-op hooks; override the ones you need (sync or async)."""

    def on_run_start(self, benchmark: Benchmark) -> Any:
        """The run is starting (limits read, results file open)."""

    def on_task_selected(self, benchmark: Benchmark, task: Task, queue: TaskQueue) -> Any:
        """The queue chose `task` to run next."""

    def on_task_start(self, benchmark: Benchmark, task: Task) -> Any:
        """The first repetition of `task` is about to start."""

    def on_task_repeat_start(self, benchmark: Benchmark, task: Task, repeat_idx: int) -> Any:
        """One repetition of `task` is starting."""

    def on_task_repeat_end(self, benchmark: Benchmark, report: Report) -> Any:
        """One repetition finished with `report` (already written to the results file)."""

    def on_task_end(self, benchmark: Benchmark, task: Task, reports: Sequence[Report]) -> Any:
        """Every repetition of `task` finished; `reports` holds them all."""

    def on_queue_decision(
        self, benchmark: Benchmark, queue: TaskQueue, should_continue: bool
    ) -> Any:
        """The queue said whether new tasks may still start (after each repetition)."""

    def on_run_end(self, benchmark: Benchmark, reports: Sequence[Report]) -> Any:
        """The run ended; `reports` are the ones it kept (all of them unless collect=False)."""


class CallbackRunner:
    """Calls every callback's hook in turn, one hook call at a time across the whole run."""

    def __init__(self, callbacks: Sequence[BenchmarkCallback]) -> None:
        self.callbacks = tuple(callbacks)
        self._lock = anyio.Lock()

    async def fire(self, hook: str, *args: Any) -> None:
        if not self.callbacks:
            return
        async with self._lock:
            for callback in self.callbacks:
                try:
                    result = getattr(callback, hook)(*args)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    events.callback_failed(
                        callback=type(callback).__name__,
                        hook=hook,
                        error=f"{type(exc).__name__}: {exc}",
                    )
