"""Sync user code in worker threads, bounded by the engine's own thread limiter.

A thread cannot be killed: when a repetition times out, the engine stops waiting for it
(`abandon_on_cancel`), and the thread runs on until it returns. Unlike anyio's own accounting,
such an abandoned thread keeps its place in the limiter until it really ends, so timed-out sync code
can never pile up more threads than the limit. Sync code can stop early at checkpoints with
`current_context().check_timeout()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

T = TypeVar("T")


class _Ticket:
    """Who gives the limiter token back: the caller, or the thread if the caller abandoned it."""

    __slots__ = ("_lock", "abandoned", "finished", "started", "withdrawn")

    def __init__(self) -> None:
        self._lock = threading.Lock()
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


class ThreadRunner:
    """Runs sync callables in worker threads, at most `limit` at once, abandoned ones included."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"thread limit must be >= 1, got {limit}")
        self.limiter = anyio.CapacityLimiter(limit)
        # The engine's limiter does the bounding; anyio's pool must not add its default of 40.
        self._pool = anyio.CapacityLimiter(math.inf)

    async def run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`func(*args, **kwargs)` in a worker thread; cancelling the caller abandons the thread."""
        ticket = _Ticket()
        limiter = self.limiter
        await limiter.acquire_on_behalf_of(ticket)
        call = functools.partial(func, *args, **kwargs)
        give_back = _hand_back(limiter, ticket)

        def in_thread() -> T:
            if not ticket.start():
                raise anyio.get_cancelled_exc_class()()  # the caller gave up before we began
            try:
                return call()
            finally:
                if ticket.finish():
                    give_back()

        try:
            return await anyio.to_thread.run_sync(
                in_thread, abandon_on_cancel=True, limiter=self._pool
            )
        finally:
            if ticket.leave():
                limiter.release_on_behalf_of(ticket)

    def busy(self) -> int:
        """Threads counted against the limit now, abandoned ones included."""
        return int(self.limiter.borrowed_tokens)


def _hand_back(limiter: anyio.CapacityLimiter, ticket: _Ticket) -> Callable[[], None]:
    """How an abandoned thread gives its token back, without ever waiting for the event loop.

    On asyncio the release is posted to the loop (`call_soon_threadsafe`): a thread that ends after
    the loop stopped must not block the interpreter's exit waiting for it. Elsewhere it falls back
    to `anyio.from_thread.run_sync`.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None

    def give_back() -> None:
        # RuntimeError: the event loop has ended, nothing left to account for.
        with contextlib.suppress(RuntimeError):
            if loop is not None:
                loop.call_soon_threadsafe(limiter.release_on_behalf_of, ticket)
            else:
                anyio.from_thread.run_sync(limiter.release_on_behalf_of, ticket)

    return give_back
