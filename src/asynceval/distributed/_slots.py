"""The cluster-wide half of the LLM-call limit: one lease of a `distributed.Semaphore` per call.

Each worker process takes its own FIFO slot first (`ConcurrencyController`), then one lease of
the run's semaphore on the scheduler, so at most a worker's local share of callers waits at the
scheduler. Leases are Dask's: refreshed by the semaphore while held, and handed back by the
scheduler after the lease timeout when their worker dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import anyio

_POLL_S = 0.5
"""How long one acquire request waits at the scheduler before it asks again: the bound on how
late a cancelled waiter leaves (each request is shielded, so a grant is never lost)."""


class ClusterSlots:
    """`SharedLimit` over one `distributed.Semaphore` (see the module)."""

    def __init__(
        self,
        semaphore: Any,
        loop: asyncio.AbstractEventLoop,
        on_pause: Callable[[str, float], None] | None = None,
    ) -> None:
        self._semaphore = semaphore
        self._loop = loop
        self._on_pause = on_pause
        self._releasing: set[asyncio.Task[Any]] = set()

    def paused(self, endpoint: str, seconds: float) -> None:
        """A 429 paused `endpoint` here: `on_pause` passes it on to every worker of the run."""
        if self._on_pause is not None:
            self._on_pause(endpoint, seconds)

    async def acquire(self) -> None:
        semaphore = self._semaphore
        await semaphore  # registered once
        while True:
            lease_id = uuid.uuid4().hex
            # Shielded: a request cancelled on our side may still be granted on the scheduler's,
            # and a grant nobody records would stay out until the lease timeout.
            with anyio.CancelScope(shield=True):
                granted = await semaphore.scheduler.semaphore_acquire(
                    name=semaphore.name, timeout=_POLL_S, lease_id=lease_id
                )
            if granted:
                semaphore._leases.append(lease_id)  # refreshed by the semaphore from now on
                try:
                    await anyio.lowlevel.checkpoint_if_cancelled()
                except BaseException:
                    self.release()
                    raise
                return
            await anyio.lowlevel.checkpoint()

    def release(self) -> None:
        """Give one lease back (leases are interchangeable), from any thread, without waiting."""
        try:
            lease_id = self._semaphore._leases.popleft()
        except IndexError:  # nothing held: released already
            return
        with contextlib.suppress(RuntimeError):  # the worker's loop is closed: the lease times out
            self._loop.call_soon_threadsafe(self._send_release, lease_id)

    def _send_release(self, lease_id: str) -> None:
        task = self._loop.create_task(self._release(lease_id))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _release(self, lease_id: str) -> None:
        semaphore = self._semaphore
        with contextlib.suppress(Exception):  # the scheduler is gone: nothing holds the lease
            await semaphore.scheduler.semaphore_release(name=semaphore.name, lease_id=lease_id)
