"""ConcurrencyController: the global FIFO slots every LLM call attempt goes through.

Slots are granted in arrival order. A rate or quota 429's Retry-After pauses one endpoint
(`asynceval.limits._pauses`): its waiters keep their place in line but are skipped until the
pause ends, while waiters for other endpoints go on.

Adaptive limits per endpoint (`asynceval.limits._adaptive`): a provider that serves fewer calls at
once than the limit answers the excess with 429s while it serves the rest. Such a 429
(`overloaded`: other calls to the endpoint are in flight) lowers that endpoint's limit to the calls
still in flight there; successes raise it again (`succeeded`), never above the global limit, which
itself never changes (FR-009). Each change is a `limit_changed` event. A caller whose attempt was
turned away comes back with `slot(front=True)`, ahead of everyone who arrived after it.

Each attempt holds its slot through a `Slot` (`asynceval.limits._slot`), which writes the
queueing / acquired / released (or cancelled) events. A caller cancelled while waiting takes no
slot; a holder is released on every exit path.

anyio's CapacityLimiter is FIFO but cannot skip a paused or full endpoint's waiters, hence this
queue.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

from .. import events
from ..config import Settings
from ._adaptive import AdaptiveLimits, Change
from ._pauses import Pauses
from ._shared import SharedLimit as SharedLimit
from ._slot import Slot


@dataclass(frozen=True)
class ControllerStatistics:
    """A snapshot of the controller: slots in use, callers waiting, the peak so far, and the
    endpoints whose adaptive limit is below `limit` (endpoint -> slots it may use now)."""

    limit: int
    active: int
    waiting: int
    max_active: int
    granted: int
    endpoint_limits: dict[str, int] = field(default_factory=dict)


class _Waiter:
    """A caller in line. `event` (a future of its loop) is done to grant it a slot, or to make
    it look at a new pause; a plain future, not an anyio.Event: one per waiting caller, and
    cancellation reaches it the same way (the controller runs on asyncio only).

    `wake` completes it from whichever thread grants: directly on the waiter's own loop thread,
    through `call_soon_threadsafe` from any other thread (another event loop's caller releasing).
    """

    __slots__ = ("endpoint", "event", "front", "granted", "loop", "queued_at", "thread", "timed")

    def __init__(self, endpoint: str | None, queued_at: float, front: bool) -> None:
        self.endpoint = endpoint
        self.front = front
        self.queued_at = queued_at
        self.loop = asyncio.get_running_loop()
        self.event: asyncio.Future[None] = self.loop.create_future()
        self.granted = False
        self.timed = False  # asleep until a pause ends, so it wakes by itself
        self.thread = threading.get_ident()

    def wake(self) -> bool:
        """Complete the future from any thread; False when the waiter's loop has closed."""
        if self.loop.is_closed():
            return False  # nobody will ever take this grant (a later loop in the same thread)
        try:
            if threading.get_ident() == self.thread:
                _set(self.event)
            else:
                self.loop.call_soon_threadsafe(_set, self.event)
        except RuntimeError:  # that loop closed meanwhile
            return False
        return True


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ConcurrencyController:
    """Global FIFO limit on LLM call attempts in flight; the limit is fixed for its whole life.

    `async with controller.slot(agent=..., dimension=...)` waits for a slot, holds it for the block
    and frees it on exit, cancellation included. `pause(endpoint, seconds)` stops new grants for one
    endpoint (a 429's Retry-After); nobody holds a slot while waiting for a pause to end.

    One controller serves every thread and event loop of a process (the `Runtime` owns it): its
    state is guarded by a lock held only for bookkeeping, never across an await, and FIFO order
    holds across loops. Times are `time.monotonic()`, the clock every asyncio loop shares.
    """

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, got {limit!r}")
        if limit < 1:
            raise ValueError(f"MAX_CONCURRENT_LLM_CALLS must be >= 1, got {limit}")
        self._limit = limit
        self._waiters: dict[_Waiter, None] = {}  # insertion-ordered, O(1) removal
        self._front: dict[_Waiter, None] = {}  # callers coming back: served before `_waiters`
        self._waiting_at: dict[str | None, int] = {}  # callers in line, per endpoint
        self._active = 0
        self._active_at: dict[str | None, int] = {}  # slots held per endpoint
        self._sending_at: dict[str, int] = {}  # requests out at the provider, per endpoint
        self._sent_at: dict[str, int] = {}  # requests ever sent, per endpoint: their order
        self._adaptive = AdaptiveLimits(limit)  # endpoints whose limit is below `_limit`
        self._max_active = 0
        self._granted = 0
        self._pauses = Pauses()
        self._lock = threading.Lock()
        self.shared: SharedLimit | None = None  # set by a cluster backend on its workers

    @classmethod
    def from_settings(cls, settings: Settings) -> ConcurrencyController:
        return cls(settings.max_concurrent_llm_calls)

    @property
    def limit(self) -> int:
        """Slots in all; read-only, so the limit cannot change while a run uses it (FR-009)."""
        return self._limit

    def statistics(self) -> ControllerStatistics:
        with self._lock:
            return ControllerStatistics(
                limit=self._limit,
                active=self._active,
                waiting=len(self._waiters) + len(self._front),
                max_active=self._max_active,
                granted=self._granted,
                endpoint_limits={e: self._adaptive.limit(e) for e in self._adaptive.reduced},
            )

    def slot(
        self,
        *,
        agent: str | None = None,
        dimension: str | None = None,
        call_id: str | None = None,
        endpoint: str | None = None,
        front: bool = False,
    ) -> Slot:
        """An async context manager holding one slot; `endpoint` makes it respect that
        endpoint's pause and adaptive limit; `front` puts a caller that already waited its turn
        (an attempt turned away by an overloaded provider) ahead of later arrivals."""
        return Slot(self, agent, dimension, call_id, endpoint, front)

    def endpoint_limit(self, endpoint: str | None) -> int:
        """The slots `endpoint` may hold at once now: its adaptive limit, else the limit."""
        return self._adaptive.limit(endpoint)

    def overloaded(self, endpoint: str, hold: float = 0.0, sent: int | None = None) -> bool:
        """Called by a holder of a slot for `endpoint` whose attempt got a 429: True when other
        calls to `endpoint` are in flight, so the provider is serving them and turned this one
        away for capacity. The endpoint's limit then drops to those calls (a `limit_changed`
        event) and does not grow for `hold` seconds (the 429's Retry-After), longer when the
        same cap refuses a probe again (see `asynceval.limits._adaptive`). False when this was
        the only call: a rate or quota 429, which the caller handles with a pause and backoff.

        `sent` is the refused request's place among the endpoint's sends (what `sending`
        returned for it): a request sent before the limit's last drop is of the same round
        trip, and its 429 does not drop the limit again (None: no such check)."""
        with self._lock:
            # Requests really out at the provider: not holders still waiting for their rate
            # turn, which the provider has not seen (their count would make a rate 429 look
            # like overload).
            others = self._sending_at.get(endpoint, 0) - 1
            if others < 1:
                return False
            sends = self._sent_at.get(endpoint, 0)
            change = self._adaptive.overload(endpoint, others, hold, time.monotonic(), sent, sends)
        if change is not None:
            self._limit_changed(endpoint, change, others + 1, "429")
        return True

    def succeeded(self, endpoint: str | None) -> None:
        """An attempt at `endpoint` succeeded: its adaptive limit grows by 1/limit (about one
        slot per round of calls), up to the limit, once the last overload's hold is over."""
        if endpoint is None or endpoint not in self._adaptive.reduced:
            return  # the common case: nothing reduced, nothing to do (no lock)
        with self._lock:
            change = self._adaptive.success(endpoint, time.monotonic())
            chosen = self._dispatch() if change is not None else []
        if change is not None:
            self._limit_changed(endpoint, change, self._active_at.get(endpoint, 0), "success")
            self._wake(chosen)

    def sending(self, endpoint: str | None, delta: int) -> int:
        """A slot holder's request for `endpoint` left (+1) or ended (-1): what `overloaded`
        counts as served by the provider. Returns, for a request that left, its place among
        the endpoint's sends (1, 2, ...: see `sends`), else 0."""
        if endpoint is None:
            return 0
        with self._lock:
            self._sending_at[endpoint] = self._sending_at.get(endpoint, 0) + delta
            if delta <= 0:
                return 0
            sent = self._sent_at[endpoint] = self._sent_at.get(endpoint, 0) + 1
        return sent

    def sends(self, endpoint: str) -> int:
        """How many requests for `endpoint` have left so far (read without the lock: a count
        that may be one behind a send racing it from another thread)."""
        return self._sent_at.get(endpoint, 0)

    def _limit_changed(self, endpoint: str, change: Change, in_flight: int, reason: str) -> None:
        events.limit_changed(
            endpoint=endpoint,
            limit=change.limit,
            previous=change.previous,
            cap=self._limit,
            in_flight=in_flight,
            reason=reason,
        )

    def _room(self, endpoint: str | None) -> bool:
        """Whether `endpoint`'s adaptive limit lets one more slot go to it (lock held)."""
        return self._adaptive.room(endpoint, self._active_at.get(endpoint, 0))

    def pause(self, endpoint: str, seconds: float, *, share: bool = True) -> None:
        """Grant no slot for `endpoint` for `seconds` from now; overlapping pauses merge into one.
        With a shared limit, the other processes sharing it pause too (`share=False`: this is
        one of theirs, arriving here)."""
        if share and self.shared is not None:
            self.shared.paused(endpoint, seconds)
        with self._lock:
            self._pauses.pause(endpoint, seconds, time.monotonic())
            to_wake = [
                w for w in (*self._front, *self._waiters) if w.endpoint == endpoint and not w.timed
            ]  # not grants: they wake, see the pause, sleep it out
        for waiter in to_wake:
            waiter.wake()

    def resume(self, endpoint: str) -> bool:
        """End `endpoint`'s pause now, if one is running (in this process only): a call to it
        succeeded since the pause began, so the provider is answering. Whether one was."""
        if not self._pauses:
            return False
        with self._lock:
            ended = self._pauses.end(endpoint, time.monotonic())
            to_wake = [
                w for w in (*self._front, *self._waiters) if w.endpoint == endpoint and w.timed
            ]  # asleep for the pause: they wake and take their turn
        for waiter in to_wake:
            waiter.wake()
        return ended

    def cooldown_remaining(self, endpoint: str | None) -> float:
        """Seconds left in `endpoint`'s pause, 0.0 when there is none."""
        if endpoint is None or not self._pauses:
            return 0.0
        with self._lock:
            return self._pauses.remaining(endpoint, time.monotonic())

    def _dispatch(self) -> list[_Waiter]:
        """Grant free slots to the earliest waiters whose endpoint is not paused (lock held);
        returns them, to be woken once the lock is released."""
        free = self._limit - self._active
        if free <= 0 or not (self._waiters or self._front):
            return []
        now = time.monotonic() if self._pauses else 0.0
        chosen: list[_Waiter] = []
        full: set[str | None] = set()  # endpoints at their adaptive limit: skip their waiters
        for waiter in itertools.chain(self._front, self._waiters):
            endpoint = waiter.endpoint
            if endpoint in full:
                continue
            if self._pauses and self._pauses.hold(endpoint, waiter.queued_at, now) > 0:
                continue
            if self._adaptive.reduced and not self._room(endpoint):
                full.add(endpoint)
                if len(full) == len(self._waiting_at):
                    break  # every endpoint anyone waits for is full: a long line, one look
                continue
            self._take(endpoint)  # now, so `_room` counts it for the next waiter
            waiter.granted = True
            chosen.append(waiter)
            if len(chosen) == free:
                break
        for waiter in chosen:
            self._leave_line(waiter)
        return chosen

    def _join_line(self, waiter: _Waiter) -> None:
        (self._front if waiter.front else self._waiters)[waiter] = None
        at = self._waiting_at
        at[waiter.endpoint] = at.get(waiter.endpoint, 0) + 1

    def _leave_line(self, waiter: _Waiter) -> None:
        if (self._front if waiter.front else self._waiters).pop(waiter, False) is None:
            at = self._waiting_at
            if at[waiter.endpoint] == 1:
                del at[waiter.endpoint]
            else:
                at[waiter.endpoint] -= 1

    def _wake(self, chosen: list[_Waiter]) -> None:
        """Wake granted waiters; a grant to a waiter whose loop has closed is given back."""
        for waiter in chosen:
            if not waiter.wake():
                with self._lock:
                    # Taken back here, once: when the abandoned caller is finally collected,
                    # its exit path must not give the slot back a second time.
                    waiter.granted = False
                    self._granted -= 1
                    self._untake(waiter.endpoint)
                    more = self._dispatch()
                self._wake(more)

    def _take(self, endpoint: str | None) -> None:
        self._active += 1
        self._granted += 1
        if self._active > self._max_active:
            self._max_active = self._active
        at = self._active_at
        at[endpoint] = at.get(endpoint, 0) + 1

    def _untake(self, endpoint: str | None) -> None:
        self._active -= 1
        self._active_at[endpoint] -= 1

    def _give_back(self, endpoint: str | None) -> bool:
        """Free one slot and hand it on; returns whether a waiter was granted one."""
        with self._lock:
            self._untake(endpoint)
            chosen = self._dispatch()
        if chosen:
            self._wake(chosen)
            return True
        return False

    def _try_take(self, endpoint: str | None, now: float, front: bool) -> _Waiter | None:
        """Take a slot at once if nobody waits and none is paused; else join the line."""
        with self._lock:
            if (
                not self._waiters
                and not self._front
                and self._active < self._limit
                and not self._pauses.hold(endpoint, now, now)
                and (not self._adaptive.reduced or self._room(endpoint))
            ):
                self._take(endpoint)
                return None
            waiter = _Waiter(endpoint, now, front)
            self._join_line(waiter)
            return waiter

    async def _acquire(self, endpoint: str | None, front: bool = False) -> None:
        """Wait for a slot in FIFO order; on any exit without one, leave nothing behind."""
        if not (self._waiters or self._front):
            # Likely to take one at once: a caller already cancelled must not. Else it waits
            # in line, and that wait is where a cancellation reaches it.
            await anyio.lowlevel.checkpoint_if_cancelled()
        waiter = self._try_take(endpoint, time.monotonic(), front)
        if waiter is None:
            return
        try:
            await self._wait_for_grant(waiter, endpoint)
        except BaseException:
            with self._lock:
                granted = waiter.granted
                if granted:
                    self._granted -= 1  # handed over but never used: not a grant after all
                else:
                    self._leave_line(waiter)
            if granted:
                self._give_back(endpoint)  # granted, then cancelled before it could resume
            raise

    async def _wait_for_grant(self, waiter: _Waiter, endpoint: str | None) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                hold = 0.0 if waiter.granted else self._pauses.hold(endpoint, waiter.queued_at, now)
                if hold > 0:
                    waiter.timed = True
                    chosen: list[_Waiter] = []
                else:
                    chosen = self._dispatch()
            self._wake(chosen)
            if hold > 0:
                with anyio.move_on_after(hold):
                    await waiter.event  # cancelled by the timeout: a later grant sees it done
                with self._lock:
                    waiter.timed = False
                    chosen = [] if waiter.granted else self._dispatch()  # pause over: hand out
                self._wake(chosen)
            elif waiter.granted:
                # Granted without a wait (the callers ahead are for a paused or full endpoint):
                # a caller already cancelled must not take the slot (it is given back).
                await anyio.lowlevel.checkpoint_if_cancelled()
            else:
                await waiter.event
            with self._lock:  # a grant from another thread lands on the new event, not lost
                if waiter.granted:
                    return
                waiter.event = waiter.loop.create_future()  # woken to look at a pause, not granted
