"""Connection pools per event loop: what a Runtime's calls send through, opened and closed for them.

An HTTP connection belongs to the event loop that opened it, so a runtime keeps one
`httpx.AsyncClient` per (event loop, endpoint). They close:
- when a run that opened them ends, if no other run in that loop is going and no call is in flight;
- when a model or the runtime is closed (`aclose()`), for the loop it is closed in;
- at the end of their event loop (`asyncio.run`, `anyio.run`, pytest), through an async generator
  the loop finalizes on shutdown, so a script that never closes anything leaks nothing either.

What a client is (its transport, its connection cap) is the funnel's choice: a pool is given
the function that builds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio

if TYPE_CHECKING:
    import httpx


class EndpointKey(NamedTuple):
    """What makes two callers share a pool: the origin they send to, the transport, and the
    limiter whose slots bound their calls, with its limit as the pool's connection cap. Callers
    under different limiters keep apart: together they could have more calls in flight than
    either's connections, and the extra ones would wait for a connection while holding a slot."""

    origin: str
    transport: str  # "aiohttp", "httpx", "sim:ID" or "object:ID" (a transport object)
    limiter: int  # the id of the ConcurrencyController
    connections: int


class _Entry:
    """One loop's client for one endpoint, and how many calls are using it."""

    __slots__ = ("client", "in_flight", "opened_in_run")

    def __init__(self, client: httpx.AsyncClient, opened_in_run: bool) -> None:
        self.client = client
        self.in_flight = 0
        self.opened_in_run = opened_in_run

    def leave(self) -> None:
        self.in_flight -= 1


class _LoopPools:
    """The clients of one event loop; touched only from that loop's thread."""

    def __init__(self) -> None:
        self.entries: dict[EndpointKey, _Entry] = {}
        self.runs = 0
        self.finalizer: AsyncGenerator[None] | None = None

    async def close(self, keys: Callable[[EndpointKey, _Entry], bool]) -> None:
        chosen = [key for key, entry in self.entries.items() if keys(key, entry)]
        # Shielded: a run cancelled at its end (Ctrl-C) still closes what it took out of the map.
        with anyio.CancelScope(shield=True):
            for key in chosen:
                entry = self.entries.pop(key)
                with contextlib.suppress(Exception):
                    await entry.client.aclose()


async def _close_at_loop_end(pools: _LoopPools) -> AsyncGenerator[None]:
    """Suspended for the loop's whole life; the loop's shutdown (`shutdown_asyncgens`) closes it,
    and with it every client still open in that loop."""
    try:
        yield
    finally:
        await pools.close(lambda key, entry: True)


_spawned: set[asyncio.Task[Any]] = set()  # a loop keeps only weak references to its tasks


def spawn(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, Any]) -> None:
    """Run `work` as a task of `loop` (from its own thread), kept alive until it ends: closing
    clients or responses that nobody awaits."""
    task = loop.create_task(work)
    _spawned.add(task)
    task.add_done_callback(_spawned.discard)


def _close_later(loop: asyncio.AbstractEventLoop, pools: _LoopPools) -> None:
    spawn(loop, pools.close(lambda key, entry: True))


class Pools:
    """Every event loop's clients of one runtime."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPools] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # the mapping is shared; each _LoopPools is not

    async def _here(self) -> _LoopPools:
        loop = asyncio.get_running_loop()
        pools = self._loops.get(loop)
        if pools is None:
            with self._lock:
                pools = self._loops.setdefault(loop, _LoopPools())
            if pools.finalizer is None:
                pools.finalizer = finalizer = _close_at_loop_end(pools)
                await finalizer.asend(None)  # the loop now tracks it, and closes it at its end
        return pools

    async def enter(self, key: EndpointKey, build: Callable[[], httpx.AsyncClient]) -> _Entry:
        """This loop's pool for `key` (built on first use), held open until `entry.leave()`:
        `entry = await pools.enter(...)`, then `try: ... entry.client ... finally: entry.leave()`
        (a plain pair rather than a context manager: it runs once per call)."""
        pools = self._loops.get(asyncio.get_running_loop()) or await self._here()
        entry = pools.entries.get(key)
        if entry is None:
            entry = pools.entries[key] = _Entry(build(), opened_in_run=pools.runs > 0)
        entry.in_flight += 1
        return entry

    @contextlib.asynccontextmanager
    async def run_scope(self) -> AsyncIterator[None]:
        """Around a run: at its end, the idle clients it opened close (unless another run in this
        loop is still going)."""
        pools = await self._here()
        pools.runs += 1
        try:
            yield
        finally:
            pools.runs -= 1
            if pools.runs == 0:
                await pools.close(lambda key, entry: entry.opened_in_run and not entry.in_flight)

    def close_soon(self) -> None:
        """Close every loop's clients on that loop, without waiting: for a runtime the garbage
        collector frees while its loops still run (else the clients would be collected in the
        same pass, unclosed, each with its own warning). Safe from any thread."""
        for loop, pools in list(self._loops.items()):
            with contextlib.suppress(RuntimeError):  # that loop is closed: nothing runs there
                loop.call_soon_threadsafe(_close_later, loop, pools)

    async def aclose(self, key: EndpointKey | None = None) -> None:
        """Close this loop's idle clients (those for `key` only, if given); later calls reopen."""
        pools = self._loops.get(asyncio.get_running_loop())
        if pools is not None:
            await pools.close(lambda k, entry: (key is None or k == key) and not entry.in_flight)
