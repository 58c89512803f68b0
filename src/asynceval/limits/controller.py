"""ConcurrencyController: the global FIFO slots every LLM call attempt goes through.

Slots are granted in arrival order. A 429's Retry-After pauses one endpoint: its waiters keep
their place in line but are skipped until the pause ends, while waiters for other endpoints go on.
Each attempt waits out at most one pause: callers that sat through a pause go together when it
ends, instead of one at a time while each of their 429s starts the next pause (their own retries
already wait the Retry-After).

Each attempt writes `queueing`, then `acquired` and `released` (or `cancelled` when it leaves the
line without a slot), in the order the state changed, so replaying +1 per `acquired` and -1 per
`released` gives the true number of calls in flight. A caller cancelled while waiting takes no slot;
a holder is released on every exit path.

anyio's CapacityLimiter is FIFO but cannot skip a paused endpoint's waiters, hence this queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

import anyio
import anyio.lowlevel
from anyio.lowlevel import RunVar

from .. import events
from ..config import Settings
from ..errors import ConfigError


@dataclass(frozen=True)
class ControllerStatistics:
    """A snapshot of the controller: slots in use, callers waiting, and the peak so far."""

    limit: int
    active: int
    waiting: int
    max_active: int
    granted: int


class _Pause:
    """One endpoint's pause: the current one's end, and when the last finished pause ended."""

    __slots__ = ("ended_at", "until")

    def __init__(self) -> None:
        self.until = 0.0
        self.ended_at = float("-inf")


class _Waiter:
    """A caller in line. `event` is set to grant it a slot, or to make it look at a new pause."""

    __slots__ = ("endpoint", "event", "granted", "queued_at", "timed")

    def __init__(self, endpoint: str | None, queued_at: float) -> None:
        self.endpoint = endpoint
        self.queued_at = queued_at
        self.event = anyio.Event()
        self.granted = False
        self.timed = False  # asleep until a pause ends, so it wakes by itself


class ConcurrencyController:
    """Global FIFO limit on LLM call attempts in flight; the limit is fixed for its whole life.

    `async with controller.slot(agent=..., dimension=...)` waits for a slot, holds it for the block
    and frees it on exit, cancellation included. `pause(endpoint, seconds)` stops new grants for one
    endpoint (a 429's Retry-After); nobody holds a slot while waiting for a pause to end.
    """

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, got {limit!r}")
        if limit < 1:
            raise ValueError(f"MAX_CONCURRENT_LLM_CALLS must be >= 1, got {limit}")
        self._limit = limit
        self._waiters: dict[_Waiter, None] = {}  # insertion-ordered, O(1) removal
        self._active = 0
        self._max_active = 0
        self._granted = 0
        self._pauses: dict[str, _Pause] = {}

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
            waiting=len(self._waiters),
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
        """An async context manager holding one slot; `endpoint` makes it respect that pause."""
        return Slot(self, agent, dimension, call_id, endpoint)

    def pause(self, endpoint: str, seconds: float) -> None:
        """Grant no slot for `endpoint` for `seconds` from now; overlapping pauses merge into one."""
        now = anyio.current_time()
        self._pause_state(endpoint, now)
        pause = self._pauses.setdefault(endpoint, _Pause())
        pause.until = max(pause.until, now + max(0.0, seconds))
        for waiter in self._waiters:
            if waiter.endpoint == endpoint and not waiter.timed:
                waiter.event.set()  # not a grant: it wakes, sees the pause, sleeps it out

    def cooldown_remaining(self, endpoint: str | None) -> float:
        """Seconds left in `endpoint`'s pause, 0.0 when there is none."""
        if endpoint is None or endpoint not in self._pauses:
            return 0.0
        now = anyio.current_time()
        pause = self._pause_state(endpoint, now)
        return max(0.0, pause.until - now) if pause is not None else 0.0

    def _pause_state(self, endpoint: str, now: float) -> _Pause | None:
        pause = self._pauses.get(endpoint)
        if pause is not None and pause.until and pause.until <= now:
            pause.ended_at = pause.until  # that pause is over: remember when, for `_hold`
            pause.until = 0.0
        return pause

    def _hold(self, endpoint: str | None, queued_at: float, now: float) -> float:
        """Seconds a waiter queued at `queued_at` must still wait for its endpoint's pause."""
        if endpoint is None or not self._pauses:
            return 0.0
        pause = self._pause_state(endpoint, now)
        if pause is None or not pause.until or queued_at < pause.ended_at:
            return 0.0  # no pause, or this waiter already sat through the previous one
        return pause.until - now

    def _dispatch(self) -> None:
        """Grant free slots to the earliest waiters whose endpoint is not paused."""
        free = self._limit - self._active
        if free <= 0 or not self._waiters:
            return
        now = anyio.current_time() if self._pauses else 0.0
        chosen: list[_Waiter] = []
        for waiter in self._waiters:
            if self._pauses and self._hold(waiter.endpoint, waiter.queued_at, now) > 0:
                continue
            chosen.append(waiter)
            if len(chosen) == free:
                break
        for waiter in chosen:
            del self._waiters[waiter]
            self._take()
            waiter.granted = True
            waiter.event.set()

    def _take(self) -> None:
        self._active += 1
        self._granted += 1
        if self._active > self._max_active:
            self._max_active = self._active

    def _give_back(self) -> None:
        self._active -= 1
        self._dispatch()

    async def _acquire(self, endpoint: str | None) -> None:
        """Wait for a slot in FIFO order; on any exit without one, leave nothing behind."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        now = anyio.current_time()
        if not self._waiters and self._active < self._limit and not self._hold(endpoint, now, now):
            self._take()
            return
        waiter = _Waiter(endpoint, now)
        self._waiters[waiter] = None
        try:
            while True:
                hold = self._hold(endpoint, waiter.queued_at, anyio.current_time())
                if hold > 0:
                    waiter.timed = True
                    with anyio.move_on_after(hold):
                        await waiter.event.wait()
                    waiter.timed = False
                    if not waiter.granted:
                        self._dispatch()  # the pause is over: hand out what is free
                else:
                    self._dispatch()
                    if not waiter.granted:
                        await waiter.event.wait()
                if waiter.granted:
                    return
                waiter.event = anyio.Event()  # woken to look at a pause, not granted
        except BaseException:
            if waiter.granted:
                self._granted -= 1  # handed over but never used: not a grant after all
                self._give_back()  # granted, then cancelled before it could resume
            else:
                self._waiters.pop(waiter, None)
            raise


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
        started = anyio.current_time()
        events.queueing(
            agent=self.agent,
            dimension=self.dimension,
            call_id=self.call_id,
            queue_depth=len(c._waiters) + 1,
        )
        try:
            await c._acquire(self.endpoint)
        except BaseException:
            events.cancelled(
                agent=self.agent,
                dimension=self.dimension,
                call_id=self.call_id,
                wait_s=anyio.current_time() - started,
            )
            raise
        self._acquired_at = now = anyio.current_time()
        self.wait_s = now - started
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
        c = self._controller
        c._give_back()
        events.released(
            agent=self.agent,
            dimension=self.dimension,
            call_id=self.call_id,
            active_slots=c._active,
            held_s=anyio.current_time() - self._acquired_at,
        )


_default_controller: RunVar[ConcurrencyController] = RunVar("asynceval_default_controller")


def install_default_controller(
    controller: ConcurrencyController | None, settings: Settings
) -> ConcurrencyController:
    """Make `controller` this run's default (the one models without their own use).

    With None, the run's existing default (or one built from `settings`) is kept. Installing a
    different controller once models in this run already use another is a ConfigError: two
    funnels would break the global limit.
    """
    if controller is None:
        return default_controller(settings)
    try:
        current = _default_controller.get()
    except LookupError:
        _default_controller.set(controller)
        return controller
    if current is not controller:
        raise ConfigError(
            "this event loop run already has a different default ConcurrencyController; "
            "pass the same controller to every Benchmark and model in one run"
        )
    return controller


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
