"""The cluster-wide half of the LLM-call limit: leases of one `distributed.Semaphore` per run.

Each worker process takes its own FIFO slot first (`ConcurrencyController`), then a lease of
the run's semaphore, so at most a worker's local share of callers waits on the cluster. Leases
are Dask's: refreshed by the semaphore while held, handed back by the scheduler after the lease
timeout when their worker dies.

A round trip to the scheduler per call would cost both sides more CPU than the call itself, so
a worker keeps the leases it has while its own callers wait for them: a lease given back here
goes straight to the next local waiter. So that a busy worker cannot keep a share forever from
the others, a lease held longer than `ROTATE_S` goes back to the scheduler when it is given
back, and a free lease nobody here wants goes back after `LINGER_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from ..errors import RunFinished

_POLL_S = 0.5
"""How long one acquire request waits at the scheduler before it asks again."""
ROTATE_S = 1.0
LINGER_S = 0.05
MAX_ASKING = 4
CLOSE_WAIT_S = 2.0


class ClusterSlots:
    """`SharedLimit` over one `distributed.Semaphore` (see the module). Its state lives on the
    worker's loop; `release` may come from any thread."""

    def __init__(
        self,
        semaphore: Any,
        loop: asyncio.AbstractEventLoop,
        on_pause: Callable[[str, float], None] | None = None,
    ) -> None:
        self._semaphore = semaphore
        self._loop = loop
        self._on_pause = on_pause
        self._held: deque[tuple[str, float]] = deque()  # every lease here, oldest first
        self._free = 0  # of those, how many no call is using
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._getting = 0  # requests out at the scheduler
        self._trim: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._thread = threading.get_ident()
        self._closed = False
        self._settled: anyio.Event | None = None  # set at each change, once closing

    def paused(self, endpoint: str, seconds: float) -> None:
        """A 429 paused `endpoint` here: `on_pause` passes it on to every worker of the run."""
        if self._on_pause is not None:
            self._on_pause(endpoint, seconds)

    @property
    def holding(self) -> bool:
        """Whether any lease is still held here (in use or free)."""
        return bool(self._held)

    async def acquire(self) -> None:
        if self._closed:
            raise RunFinished("the run has ended on this worker: no more LLM calls")
        if self._free and not self._waiters:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append(waiter)
        self._get_more()
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._given_back()  # handed a lease, then cancelled: it is free again
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """A call is done with its lease; from any thread, without waiting."""
        if threading.get_ident() == self._thread:
            self._given_back()
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the lease times out
                self._loop.call_soon_threadsafe(self._given_back)

    def _given_back(self) -> None:
        if self._closed and self._held:
            self._return(self._held.popleft()[0])
            return
        if self._held and time.monotonic() - self._held[0][1] > ROTATE_S:
            self._return(self._held.popleft()[0])  # the others' turn; our waiters ask again
            self._get_more()
            return
        self._hand_on()

    def _hand_on(self) -> None:
        """One more lease is free here: to the first local waiter, else kept for `LINGER_S`."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1
        if self._trim is None:
            self._trim = self._loop.call_later(LINGER_S, self._give_back_free)

    def _give_back_free(self) -> None:
        self._trim = None
        while self._free and self._held:
            self._free -= 1
            self._return(self._held.pop()[0])  # the newest: the oldest rotate out anyway

    def _get_more(self) -> None:
        """A scheduler request out per caller here waiting for a lease, at most `MAX_ASKING`:
        each grant wakes every pending request on the scheduler, so more would only load it."""
        while self._getting < min(len(self._waiters), MAX_ASKING):
            self._getting += 1
            self._spawn(self._get())

    async def _get(self) -> None:
        semaphore = self._semaphore
        try:
            await semaphore  # registered once
            lease_id = uuid.uuid4().hex
            while self._waiters and not self._closed:  # someone here still waits
                try:
                    # Shielded (at most _POLL_S): a grant must never be lost on our side.
                    with anyio.CancelScope(shield=True):
                        granted = await semaphore.scheduler.semaphore_acquire(
                            name=semaphore.name, timeout=_POLL_S, lease_id=lease_id
                        )
                except Exception:  # no answer: ask again shortly, with the same lease id (a grant
                    await asyncio.sleep(_POLL_S)  # whose reply was lost is then ours again);
                    continue  # if the scheduler is gone for good, the caller ends the run
                if granted:
                    semaphore._leases.append(lease_id)  # refreshed by the semaphore from now on
                    self._held.append((lease_id, time.monotonic()))
                    self._given_back() if self._closed else self._hand_on()
                    return
        finally:
            self._getting -= 1
            self._changed()

    def _changed(self) -> None:
        if self._settled is not None:
            self._settled.set()

    def _return(self, lease_id: str) -> None:
        self._changed()
        semaphore = self._semaphore
        with contextlib.suppress(ValueError):
            semaphore._leases.remove(lease_id)
        self._spawn(self._send_release(lease_id))

    async def _send_release(self, lease_id: str) -> None:
        semaphore = self._semaphore
        with contextlib.suppress(Exception):  # the scheduler is gone: nothing holds the lease
            await semaphore.scheduler.semaphore_release(name=semaphore.name, lease_id=lease_id)

    def _spawn(self, work: Any) -> None:
        task = self._loop.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def refuse(self) -> None:
        """From now on a call asking for a lease gets `RunFinished`, and so do the callers
        waiting for one; calls holding one finish (the provider is serving them)."""
        self._closed = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(RunFinished("the run has ended on this worker"))

    async def aclose(self) -> None:
        """The run is over here: stop asking, give back the free leases, and wait a moment
        (`CLOSE_WAIT_S`) for those in use to come back as their calls end (cancelled with the
        run); a lease whose call runs on longer (one a killed caller left running) goes back when
        it ends, and counts against the limit until then."""
        self.refuse()
        with anyio.move_on_after(CLOSE_WAIT_S):
            while True:
                while self._free and self._held:
                    self._free -= 1
                    self._return(self._held.pop()[0])
                if not (self._getting or self._held):
                    break  # requests end within a poll, calls as they can
                self._settled = anyio.Event()
                await self._settled.wait()
        with anyio.move_on_after(CLOSE_WAIT_S):  # the releases reach the scheduler
            for task in list(self._background):
                with contextlib.suppress(BaseException):
                    await task
