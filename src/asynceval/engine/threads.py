"""Where sync code runs: the one place that decides it, for hooks, agents and tools alike.

Inside a run, sync code runs in the run's own daemon worker threads, at most `limit` at once. A
thread cannot be killed: when its repetition times out, the engine stops waiting for it and the
thread runs on until it returns, still counted against the limit (so timed-out sync code never
piles up more threads than the limit), and its calls back into the loop are refused
(`asynceval.runtime.Bridge`). The threads are daemon threads, so a thread that never returns
does not keep the process alive after the run. Sync code that dispatches more sync code (a sync
tool run by a sync agent) runs on its caller's token: no deadlock at any task count.

Sync code in these threads reaches the loop with anyio's own `anyio.from_thread.run`, `run_sync`
and `check_cancelled`, as in anyio's worker threads, with the bridge's guarantees: each thread is
marked the way anyio marks its own, pointing at `_EngineThreads` (the one touch of anyio's private
state is `_claim_for_anyio`).

Outside a run, `call_maybe_async` runs sync callables inline and `run_in_thread` uses anyio's
default thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar, cast

import anyio
import anyio.to_thread
from anyio.lowlevel import EventLoopToken

from ..runtime import current_bridge
from ._executors import executors_carry_context as executors_carry_context

T = TypeVar("T")

_IDLE_S = 10.0  # an idle worker thread ends after this long


class _Ticket:
    """Who gives the limiter token back: the caller, or the thread if the caller abandoned it."""

    __slots__ = ("_lock", "abandoned", "finished", "loop", "started", "withdrawn")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._lock = threading.Lock()
        self.loop = loop  # the caller's: where anyio.from_thread goes when there is no bridge
        self.started = self.finished = self.abandoned = self.withdrawn = False

    def start(self) -> bool:
        """Called by the thread first: False if the caller already gave up (do not run)."""
        with self._lock:
            self.started = not self.withdrawn
            return self.started

    def finish(self) -> bool:
        """Called by the thread last: True if it must give the token back itself."""
        with self._lock:
            self.finished = True
            return self.abandoned

    def leave(self) -> bool:
        """Called by the caller on any exit: True if it must give the token back now."""
        with self._lock:
            if self.started and not self.finished:
                self.abandoned = True  # the thread runs on and gives the token back at its end
                return False
            self.withdrawn = True
            return True


class _Workers:
    """Daemon threads that take jobs in turn; an idle one ends after `_IDLE_S`."""

    def __init__(self) -> None:
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            jobs = self._idle.pop() if self._idle else None
        if jobs is None:
            jobs = queue.SimpleQueue()
            threading.Thread(
                target=self._work, args=(jobs,), name="asynceval worker", daemon=True
            ).start()
        jobs.put(job)

    def _work(self, jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
        _claim_for_anyio()  # once per thread: no cost per job
        while True:
            try:
                job = jobs.get(timeout=_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if jobs in self._idle:  # else a job is on its way: take it
                        self._idle.remove(jobs)
                        return
                continue
            job()
            with self._lock:
                self._idle.append(jobs)


_job: ContextVar[_Ticket | None] = ContextVar("asynceval_job", default=None)
"""The ticket of the job this code runs in (in its thread, and in the loop tasks its calls
back start, whose context is a copy of the thread's): set means nested dispatch."""


class ThreadRunner:
    """Runs sync callables in daemon worker threads, at most `limit` at once, abandoned ones
    included; nested dispatch from one of its threads runs on the caller's token."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"thread limit must be >= 1, got {limit}")
        self.limiter = anyio.CapacityLimiter(limit)
        self._workers = _Workers()
        self._abandoned = 0
        self._lock = threading.Lock()

    async def run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`func(*args, **kwargs)` in a worker thread; cancelling the caller abandons the thread."""
        nested = _job.get() is not None
        loop = asyncio.get_running_loop()
        ticket = _Ticket(loop)
        if not nested:
            await self.limiter.acquire_on_behalf_of(ticket)
        done = anyio.Event()
        outcome: list[tuple[bool, Any]] = []
        context = contextvars.copy_context()

        def job() -> None:
            if not ticket.start():
                return  # the caller gave up before the thread began
            try:
                outcome.append((True, context.run(_in_thread, ticket, func, args, kwargs)))
            except BaseException as exc:  # handed to the caller, who re-raises it
                outcome.append((False, exc))
            abandoned = ticket.finish()
            with contextlib.suppress(RuntimeError):  # the loop has ended: nothing to tell
                loop.call_soon_threadsafe(done.set)
                if abandoned:
                    loop.call_soon_threadsafe(self._returned, ticket, nested)

        try:
            self._workers.submit(job)  # inside: a thread that cannot start gives its token back
            await done.wait()
        finally:
            if ticket.leave():
                if not nested:
                    self.limiter.release_on_behalf_of(ticket)
            else:
                with self._lock:
                    self._abandoned += 1
        ok, value = outcome[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    def _returned(self, ticket: _Ticket, nested: bool) -> None:
        """An abandoned thread has returned (on the loop thread): its token is free again."""
        with self._lock:
            self._abandoned -= 1
        if not nested:
            self.limiter.release_on_behalf_of(ticket)

    def abandoned(self) -> int:
        """Threads whose repetition stopped waiting for them and that have not returned yet."""
        with self._lock:
            return self._abandoned


def _in_thread(
    ticket: _Ticket, func: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> T:
    _job.set(ticket)  # in this thread's copy of the context: nested dispatch shares the token
    return func(*args, **kwargs)


class _EngineThreads:
    """What anyio's `from_thread` functions call in an engine worker thread, in place of the
    loop's anyio backend (they find it through the thread's mark, `_claim_for_anyio`).

    `run` and `run_sync` go through the repetition's bridge, with the guarantees of
    `asynceval.runtime.from_thread`: the call runs as a task of the run's portal, outside the
    repetition's cancel scope, is cancelled when the repetition ends and refused after
    (`RepetitionExpired` past its deadline, `RunFinished` once it or the run has ended); a call
    back that dispatches more sync code runs it on this thread's token. In a thread with no
    bridge (a `ThreadRunner` used outside a run's repetitions) they run on the caller's loop.
    `check_cancelled` raises the loop's cancellation exception, as in anyio's own workers, once
    the repetition has ended or the code that started this thread has stopped waiting for it.
    Explicit `token=` calls never come here: anyio sends them to the token's own backend.
    """

    @classmethod
    def run_async_from_thread(
        cls, func: Callable[..., Coroutine[Any, Any, T]], args: tuple[Any, ...], token: object
    ) -> T:
        bridge = current_bridge()
        if bridge is not None:
            return bridge.call(func, *args)
        ticket = _job.get()
        if ticket is None:  # code of ours in an empty context: no loop to go back to
            raise anyio.NoEventLoopError("this engine thread runs no job of any event loop")
        if ticket.loop.is_closed():
            raise anyio.RunFinishedError
        return asyncio.run_coroutine_threadsafe(func(*args), ticket.loop).result()

    @classmethod
    def run_sync_from_thread(
        cls, func: Callable[..., T], args: tuple[Any, ...], token: object
    ) -> T:
        result: T = cls.run_async_from_thread(_call_on_loop, (func, *args), token)
        return result

    @classmethod
    def check_cancelled(cls) -> None:
        bridge = current_bridge()
        refusal = bridge.refusal() if bridge is not None else None
        if refusal is not None:
            raise asyncio.CancelledError(str(refusal))
        ticket = _job.get()
        if ticket is not None and ticket.abandoned:  # its caller was cancelled (read unlocked:
            # a stale False only delays the answer to the next check)
            raise asyncio.CancelledError("the task that started this thread was cancelled")


async def _call_on_loop(func: Callable[..., T], *args: Any) -> T:
    return func(*args)


_ANYIO_MARK = EventLoopToken(cast(Any, _EngineThreads), None)


def _claim_for_anyio() -> None:
    """Mark the calling engine worker thread as anyio marks its own workers, so that
    `anyio.from_thread.run`, `run_sync` and `check_cancelled` work in it (through
    `_EngineThreads`) instead of raising NoEventLoopError.

    anyio has no public way to do this; this is the one place that touches its private state.
    Checked against anyio 4.11 to 4.16.0 (the `EventLoopToken` layout, pyproject asks for
    anyio >= 4.6): its `from_thread` functions read `anyio._core._eventloop.threadlocals
    .current_token` and call its `backend_class`'s `run_async_from_thread(func, args, token)`,
    `run_sync_from_thread(func, args, token)` and `check_cancelled()`.
    tests/engine/test_anyio_from_thread.py fails loudly if that changes; here a changed layout
    only leaves anyio's bridge unavailable (asynceval's own `from_thread` still works).
    """
    try:
        from anyio._core._eventloop import threadlocals
    except ImportError:
        return
    threadlocals.current_token = _ANYIO_MARK


_threads: ContextVar[ThreadRunner | None] = ContextVar("asynceval_threads", default=None)


@contextlib.contextmanager
def threads_scope(runner: ThreadRunner) -> Iterator[ThreadRunner]:
    """Make `runner` the one sync code started in this context runs on."""
    token = _threads.set(runner)
    try:
        yield runner
    finally:
        _threads.reset(token)


_async_methods: dict[Any, bool] = {}


def is_async(func: Callable[..., Any]) -> bool:
    """Whether calling `func` gives a coroutine (a coroutine function or an async __call__);
    cached for methods (asked per repetition)."""
    code = getattr(func, "__code__", None)  # a function's or a bound method's
    if code is not None and code.co_flags & inspect.CO_COROUTINE:
        return True  # an `async def`: the common case, in one attribute read
    key = getattr(func, "__func__", None)
    if key is not None and key in _async_methods:
        return _async_methods[key]
    answer = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 (an object with an async __call__)
    )
    if key is not None:
        _async_methods[key] = answer
    return answer


def call_maybe_async(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """What to await for `func(...)`: its own coroutine if it is async (no frame of ours between:
    every suspension of an agent resumes through each frame above it); otherwise a run of it in
    one of the run's worker threads (inline outside a run). An awaitable returned by sync code is
    awaited too."""
    if is_async(func):
        return cast(Awaitable[Any], func(*args, **kwargs))
    return _call_sync(func, *args, **kwargs)


async def _call_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    runner = _threads.get()
    if runner is None:
        result = func(*args, **kwargs)
    else:
        result = await runner.run(func, *args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


async def run_in_thread(func: Callable[[], T]) -> T:
    """Run blocking `func` in a worker thread: the run's (on the caller's token when nested),
    or anyio's default pool outside a run."""
    runner = _threads.get()
    if runner is not None:
        return await runner.run(func)
    return await anyio.to_thread.run_sync(func)
