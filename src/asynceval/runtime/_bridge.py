"""The sync bridge: how sync code in an engine worker thread calls async code on the run's loop.

Each attempt of a repetition gets a `Bridge` over the run's `BlockingPortal`, reachable from its
worker threads through a context variable. A bridged call runs as a task of the portal, never
inside the cancel scope of the repetition that started the thread, so a timed-out repetition
leaves no thread spinning on a cancelled scope. When the attempt ends, `close` cancels the calls
its threads still have in flight (their slots are freed then, not when the thread returns) and
refuses later ones at once: `RepetitionExpired` after a timeout, `RunFinished` otherwise or once
the run has ended. anyio's own `anyio.from_thread.run` and `run_sync` come here too in those
threads (`asynceval.engine.threads` marks them for anyio), and `check_cancelled` asks `refusal`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

import anyio
import anyio.from_thread
from anyio.from_thread import BlockingPortal

from .._scoped import Scoped
from ..errors import RepetitionExpired, RunFinished
from ._loop_thread import run_in_background_loop
from ._runs import run_for_thread

T = TypeVar("T")


class Bridge:
    """One attempt's way back to the loop for its worker threads (see the module docstring)."""

    __slots__ = (
        "_closed",
        "_portal",
        "_run_over",
        "_scopes",
        "_started",
        "repeat_idx",
        "task_id",
        "timeout_s",
    )

    def __init__(
        self,
        portal: BlockingPortal,
        task_id: str,
        repeat_idx: int,
        timeout_s: float | None,
        run_over: threading.Event | None = None,
    ) -> None:
        self._portal = portal
        self._run_over = run_over if run_over is not None else threading.Event()
        self.task_id = task_id
        self.repeat_idx = repeat_idx
        self.timeout_s = timeout_s
        self._started = time.monotonic()
        self._scopes: set[anyio.CancelScope] | None = None  # made by the first bridged call
        self._closed: BaseException | None = None

    def call(self, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """Run `await func(*args)` on the loop from a worker thread and return its result."""
        if self._closed is not None or self._run_over.is_set():
            raise self._refusal()
        try:
            result: T = self._portal.call(self._guarded, func, *args)
            return result
        except concurrent.futures.CancelledError:
            raise self._refusal() from None  # the run was cancelled under the call
        except RuntimeError as exc:
            if isinstance(exc, anyio.RunFinishedError) or "portal is not running" in str(exc):
                raise RunFinished(
                    "the run this worker thread belonged to has ended; its call is refused"
                ) from None
            raise

    async def _guarded(self, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        if self._closed is not None:
            raise self._refusal()
        scopes = self._scopes
        if scopes is None:
            scopes = self._scopes = set()
        with anyio.CancelScope() as scope:
            scopes.add(scope)
            try:
                return await func(*args)
            finally:
                scopes.discard(scope)
        raise self._refusal()  # cancelled by `close`: the attempt has ended

    def close(self, *, timed_out: bool) -> None:
        """The attempt has ended (on the loop thread): cancel bridged calls, refuse later ones."""
        if timed_out and self.timeout_s is not None:
            self._closed = RepetitionExpired(
                self.task_id,
                self.repeat_idx,
                self.timeout_s,
                elapsed_s=time.monotonic() - self._started,
            )
        else:
            self._closed = RunFinished(
                f"task {self.task_id} repeat {self.repeat_idx} has ended; "
                "this leftover thread's call is refused"
            )
        for scope in list(self._scopes or ()):
            scope.cancel()

    def refusal(self) -> BaseException | None:
        """What a call would be refused with now (the attempt or the run has ended), else None:
        for worker-thread code that asks whether to stop (`anyio.from_thread.check_cancelled`)."""
        if self._closed is None and not self._run_over.is_set():
            return None
        return self._refusal()

    def _refusal(self) -> BaseException:
        closed = self._closed
        if self._run_over.is_set():
            return RunFinished(
                f"the run of task {self.task_id} repeat {self.repeat_idx} has ended; "
                "this leftover thread's call is refused"
            )
        if isinstance(closed, RepetitionExpired):
            return RepetitionExpired(
                closed.task_id, closed.repeat_idx, closed.timeout_s, closed.elapsed_s
            )
        return RunFinished(str(closed) if closed is not None else "the run has ended")


_current: ContextVar[Bridge | None] = ContextVar("asynceval_bridge", default=None)


def current_bridge() -> Bridge | None:
    """The bridge of the attempt this (worker-thread) code belongs to, or None."""
    return _current.get()


def bridge_scope(bridge: Bridge) -> Scoped[Bridge]:
    """Make `bridge` the current one for code started in this context (its worker threads)."""
    return Scoped(_current, bridge)


def from_thread(func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """Run `await func(*args)` on an event loop from sync code and return the result: through
    the repetition's bridge in the engine's threads, through anyio in anyio's worker threads
    (`anyio.to_thread.run_sync`), and on the process's background loop from any other thread
    (one the user started, or `asyncio.to_thread`'s): one that carries no run's context while
    a run is in progress makes it as a call of that run (`asynceval.runtime._runs`). Raises
    RuntimeError on a loop's thread, where a blocking call would stall that loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # no loop runs in this thread: good
    else:
        raise RuntimeError(
            "a blocking call (generate_sync, run_sync, a sync HTTP client) was made on the event "
            "loop thread, where it would block the loop; await the async form there "
            "(e.g. `await model.generate(...)`, `asynceval.http_client()`)"
        )
    bridge = _current.get()
    if bridge is not None:
        return bridge.call(func, *args)
    try:
        return anyio.from_thread.run(func, *args)
    except anyio.NoEventLoopError:
        pass
    run = run_for_thread()  # a thread without its run's context: the run's, if one can be told
    if run is not None:
        result: T = run.call(run_in_background_loop, func, *args)
        return result
    return run_in_background_loop(func, *args)
