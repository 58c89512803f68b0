"""Slot: one attempt's hold on a `ConcurrencyController` slot, with its three events.

`queueing` on entry, `acquired` once the slot is taken (written after it is taken) and `released`
on exit (written before it is freed), or `cancelled` for a caller that leaves the line without a
slot: across threads and loops, replaying +1 per `acquired` and -1 per `released` never counts
more calls in flight than were held.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

from .. import events

if TYPE_CHECKING:
    from .controller import ConcurrencyController


class Slot:
    """One attempt's hold on a controller slot (see `ConcurrencyController.slot`)."""

    __slots__ = (
        "_acquired_at",
        "_controller",
        "agent",
        "call_id",
        "dimension",
        "endpoint",
        "front",
        "wait_s",
    )

    def __init__(
        self,
        controller: ConcurrencyController,
        agent: str | None,
        dimension: str | None,
        call_id: str | None,
        endpoint: str | None,
        front: bool = False,
    ) -> None:
        self._controller = controller
        self.front = front
        self.agent = agent
        self.dimension = dimension
        self.call_id = call_id if call_id is not None else f"slot-{id(self):x}"
        self.endpoint = endpoint
        self.wait_s = 0.0
        self._acquired_at = 0.0

    async def __aenter__(self) -> Slot:
        c = self._controller
        started = time.monotonic()
        events.queueing(
            agent=self.agent,
            dimension=self.dimension,
            call_id=self.call_id,
            queue_depth=len(c._waiters) + len(c._front) + 1,
        )
        try:
            await c._acquire(self.endpoint, self.front)
            if c.shared is not None:  # this process's slot first, so few wait on the cluster
                try:
                    await c.shared.acquire()
                except BaseException:
                    c._give_back(self.endpoint)
                    raise
        except BaseException:
            events.cancelled(
                agent=self.agent,
                dimension=self.dimension,
                call_id=self.call_id,
                wait_s=time.monotonic() - started,
            )
            raise
        self._acquired_at = time.monotonic()
        self.wait_s = self._acquired_at - started
        events.acquired(
            agent=self.agent,
            dimension=self.dimension,
            call_id=self.call_id,
            active_slots=c._active,
            wait_s=self.wait_s,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def release(
        self,
        *,
        cost_usd: float | None = events.NO_COST,
        unpriced: bool = False,
        cost_unknown: bool = False,
    ) -> bool:
        """Free the slot (what leaving the `async with` does); for a holder that outlives the
        block, such as a response stream that keeps its slot until it is read. Call it once.
        Returns whether the slot went straight to a caller waiting in line. An LLM request's
        holder says what it cost (`events.released`)."""
        # Written before the slot is free: whoever takes it next (in any thread) writes its
        # `acquired` after this line, so replaying the log never counts more than were held.
        controller = self._controller
        try:
            events.released(
                agent=self.agent,
                dimension=self.dimension,
                call_id=self.call_id,
                active_slots=controller._active - 1,
                held_s=time.monotonic() - self._acquired_at,
                cost_usd=cost_usd,
                unpriced=unpriced,
                cost_unknown=cost_unknown,
            )
        finally:
            try:
                handed = controller._give_back(self.endpoint)
            finally:
                if controller.shared is not None:
                    controller.shared.release()
        return handed
