"""The process's background event loop, for sync callers outside any loop and any engine thread.

A sync HTTP client (`asynceval.sync_http_client`, an OpenAI SDK `OpenAI` on it) or
`generate_sync` called from a thread the user started has no loop to hop to. Its calls run on one
event loop that a daemon thread keeps for the process, started on first use, so they go through
the same funnel (the same limit, across every thread) as everything else. At interpreter exit
the loop closes the connections it opened, then stops.

Not `anyio.from_thread.start_blocking_portal()`: its loop runs in a ThreadPoolExecutor thread,
which is not a daemon, so a process that never closed the portal would wait for it at exit.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

T = TypeVar("T")

_lock = threading.Lock()
_portal: BlockingPortal | None = None
_thread = threading.Thread()  # the loop's thread once started (this one never is)


def _start() -> tuple[BlockingPortal, threading.Thread]:
    ready = threading.Event()
    holder: list[BlockingPortal] = []

    async def main() -> None:
        async with BlockingPortal() as portal:
            holder.append(portal)
            ready.set()
            await portal.sleep_until_stopped()

    thread = threading.Thread(target=anyio.run, args=(main,), name="asynceval-loop", daemon=True)
    thread.start()
    while not ready.wait(0.1):
        if not thread.is_alive():  # its loop never started: say so rather than wait forever
            raise RuntimeError("asynceval's background event loop could not start")
    atexit.register(_stop, holder[0], thread)
    return holder[0], thread


def _stop(portal: BlockingPortal, thread: threading.Thread) -> None:
    """At exit: let the loop end, which closes the pools it opened (no unclosed sockets)."""
    try:
        portal.call(portal.stop)
    except Exception:  # already stopped, or the loop died: nothing left to close
        return
    thread.join(5)


def run_in_background_loop(func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """`await func(*args)` on the process's background loop, from any thread but that loop's."""
    global _portal, _thread
    portal = _portal
    if portal is None or not _thread.is_alive():  # never started, or its thread has died
        with _lock:
            if _portal is None or not _thread.is_alive():
                _portal, _thread = _start()
            portal = _portal
    result: T = portal.call(func, *args)
    return result
