"""ConcurrencyController: the global FIFO slots every LLM call attempt goes through.

Slots are granted strictly in arrival order (anyio's CapacityLimiter hands a freed token to the
oldest waiter). Each attempt writes `queueing`, `acquired` and `released` events in the order the
state changed, so replaying +1/-1 over the log gives the true number of calls in flight.
A caller cancelled while waiting takes no slot; a holder is released on every exit path.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

import anyio
from anyio.lowlevel import RunVar

from .. import events
from ..config import Settings


@dataclass(frozen=True)
class ControllerStatistics:
    """A snapshot of the controller: slots in use, callers waiting, and the peak so far."""

    limit: int
    active: int
    waiting: int
    max_active: int
    granted: int


class ConcurrencyController:
    """Global FIFO limit on LLM call attempts in flight; the limit is fixed for its whole life.

    `async with controller.slot(agent=..., dimension=...)` waits for a slot, holds it for the block
    and frees it on exit, cancellation included. `pause(endpoint, seconds)` stops new grants for one
    endpoint (a 429's Retry-After) without holding any slot while it waits. Each attempt waits out
    at most one pause: the callers a pause held back then go together, instead of one at a time
    while each of their 429s starts the next pause (their own retries already wait Retry-After).
    """

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, got {limit!r}")
        if limit < 1:
            raise ValueError(f"MAX_CONCURRENT_LLM_CALLS must be >= 1, got {limit}")
        self._limit = limit
        self._limiter = anyio.CapacityLimiter(limit)
        self._active = 0
        self._waiting = 0
        self._max_active = 0
        self._granted = 0
        self._cooldown_until: dict[str, float] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> ConcurrencyController:
        return cls(settings.max_concurrent_llm_calls)

    @property
    def limit(self) -> int:
        """Slots in all; read-only, so the limit cannot change while a run uses it (FR-009)."""
        return self._limit

    def statistics(self) -> ControllerStatistics:
        return ControllerStatistics(
            limit=self._limit,
            active=self._active,
            waiting=self._waiting,
            max_active=self._max_active,
            granted=self._granted,
        )

    def slot(
        self,
        *,
        agent: str | None = None,
        dimension: str | None = None,
        call_id: str | None = None,
        endpoint: str | None = None,
    ) -> Slot:
        """An async context manager holding one slot; `endpoint` makes it respect that cooldown."""
        return Slot(self, agent, dimension, call_id, endpoint)

    def pause(self, endpoint: str, seconds: float) -> None:
        """Grant no slot for `endpoint` for `seconds` from now; overlapping pauses merge into one."""
        until = anyio.current_time() + max(0.0, seconds)
        if until > self._cooldown_until.get(endpoint, 0.0):
            self._cooldown_until[endpoint] = until

    def cooldown_remaining(self, endpoint: str | None) -> float:
        """Seconds left in `endpoint`'s pause, 0.0 when there is none."""
        if endpoint is None or not self._cooldown_until:
            return 0.0
        until = self._cooldown_until.get(endpoint)
        if until is None:
            return 0.0
        remaining = until - anyio.current_time()
        if remaining <= 0:
            del self._cooldown_until[endpoint]
            return 0.0
        return remaining


class Slot:
    """One attempt's hold on a controller slot (see `ConcurrencyController.slot`)."""

    __slots__ = (
        "_acquired_at",
        "_controller",
        "agent",
        "call_id",
        "dimension",
        "endpoint",
        "wait_s",
    )

    def __init__(
        self,
        controller: ConcurrencyController,
        agent: str | None,
        dimension: str | None,
        call_id: str | None,
        endpoint: str | None,
    ) -> None:
        self._controller = controller
        self.agent = agent
        self.dimension = dimension
        self.call_id = call_id if call_id is not None else f"slot-{id(self):x}"
        self.endpoint = endpoint
        self.wait_s = 0.0
        self._acquired_at = 0.0

    async def __aenter__(self) -> Slot:
        c = self._controller
        c._waiting += 1
        started = anyio.current_time()
        try:
            events.queueing(
                agent=self.agent,
                dimension=self.dimension,
                call_id=self.call_id,
                queue_depth=c._waiting,
            )
            waited_out_a_pause = False
            while True:
                if (remaining := c.cooldown_remaining(self.endpoint)) > 0:
                    await anyio.sleep(remaining)
                    waited_out_a_pause = True
                await c._limiter.acquire_on_behalf_of(self)
                if waited_out_a_pause or c.cooldown_remaining(self.endpoint) <= 0:
                    break
                # A pause began while this caller queued: hand the slot on and wait it out.
                c._limiter.release_on_behalf_of(self)
        finally:
            c._waiting -= 1
        c._active += 1
        c._granted += 1
        if c._active > c._max_active:
            c._max_active = c._active
        self._acquired_at = now = anyio.current_time()
        self.wait_s = now - started
        try:
            events.acquired(
                agent=self.agent,
                dimension=self.dimension,
                call_id=self.call_id,
                active_slots=c._active,
                wait_s=self.wait_s,
            )
        except BaseException:
            self._release()
            raise
        return self

    def _release(self) -> None:
        c = self._controller
        c._active -= 1
        c._limiter.release_on_behalf_of(self)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release()
        events.released(
            agent=self.agent,
            dimension=self.dimension,
            call_id=self.call_id,
            active_slots=self._controller._active,
            held_s=anyio.current_time() - self._acquired_at,
        )


_default_controller: RunVar[ConcurrencyController] = RunVar("asynceval_default_controller")


def default_controller(settings: Settings | None = None) -> ConcurrencyController:
    """The controller every model shares unless given its own: one per event loop run.

    The first call in a run builds it from `settings` (or `Settings()`); later calls return the same
    one whatever they pass, so the limit stays fixed for the run. Must be called inside a running loop.
    """
    try:
        return _default_controller.get()
    except LookupError:
        controller = ConcurrencyController.from_settings(settings or Settings())
        _default_controller.set(controller)
        return controller
