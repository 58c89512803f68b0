"""The threads a `Store`'s callers meet: the one small pool that reads and flushes for every
store of the process (`submit`), and the settling of the futures that writers wait on once their
transaction is committed (`settle_all`: `put`'s in the writing thread, `put_async`'s with one
callback per event loop and transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
_THREADS = 4  # reads and flushes: a few threads keep up with thousands of calls a second

Waiter = Future[None] | asyncio.Future[None] | None
"""Who waits for a queued entry: `put`'s future, `put_async`'s, or nobody."""


def settle_all(batch: list[tuple[tuple[Any, ...], Waiter]], error: OSError | None) -> None:
    """Settle the waiters of a transaction: `put`'s here, `put_async`'s with one callback on
    each of their loops."""
    loops: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for _, waiter in batch:
        if waiter is None:
            continue
        if isinstance(waiter, Future):
            if waiter.set_running_or_notify_cancel():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(OSError(*error.args))
        else:
            loops.setdefault(waiter.get_loop(), []).append(waiter)
    for loop, futures in loops.items():
        with contextlib.suppress(RuntimeError):  # a loop closed: nobody waits there any more
            loop.call_soon_threadsafe(_settle, futures, error)


def _settle(futures: list[asyncio.Future[None]], error: OSError | None) -> None:
    for future in futures:
        if not future.done():  # a waiter cancelled
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(OSError(*error.args))


# One small pool for every store of the process (made on first use, renewed in a forked child,
# whose copy of the parent's threads does not run). Never anyio's default pool: sync code waiting
# in it for an answer may fill it.
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def submit(function: Callable[..., T], *args: Any) -> Future[T]:
    """Run `function(*args)` on the stores' own threads."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(_THREADS, thread_name_prefix="asynceval-store")
        return _executor.submit(function, *args)


def renew_pool() -> None:
    """In a forked child: a new pool on first use (the parent's threads do not run here)."""
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()
