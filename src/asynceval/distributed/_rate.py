"""LLM_REQUESTS_PER_MINUTE and LLM_TOKENS_PER_MINUTE for a whole cluster: one `RateLimiter`
on the scheduler per run, asked by every worker before each request.

A worker's `ClusterRate` books its request's moment on the scheduler (one round trip), sleeps
until then and sends; the answer's real token count settles the booking later, without waiting.
The windows are the ones a single process uses (`limits.rate`), so the guarantee is the same:
no window of the run's length sees more than the limit sent, across every worker. Bookings a
dead worker never settles keep their estimate, which errs on the safe side.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
from distributed.diagnostics.plugin import SchedulerPlugin

from ..limits.rate import RateLimiter, Reservation

TAKE, SETTLE = "asynceval_rate_take", "asynceval_rate_settle"
_limiters: dict[str, RateLimiter] = {}  # on the scheduler: run id -> its windows
_bookings: dict[str, dict[str, Reservation]] = {}  # run id -> booking id -> its shares


class RatePlugin(SchedulerPlugin):
    """Installs the run's windows on the scheduler (and the two handlers, once)."""

    def __init__(self, run_id: str, requests: int | None, tokens: int | None) -> None:
        self.run_id = run_id
        self.requests = requests
        self.tokens = tokens

    async def start(self, scheduler: Any) -> None:
        scheduler.handlers.setdefault(TAKE, _take)
        scheduler.handlers.setdefault(SETTLE, _settle)
        # A resumed run (same id) keeps the windows its killed caller's calls filled.
        _limiters.setdefault(
            self.run_id,
            RateLimiter(requests_per_minute=self.requests, tokens_per_minute=self.tokens),
        )
        _bookings.setdefault(self.run_id, {})

    async def close(self) -> None:
        forget_run(self.run_id)


def forget_run(run_id: str, dask_scheduler: Any = None) -> None:
    """The run is over: its windows and bookings leave the scheduler (`client.run_on_scheduler`;
    unregistering a scheduler plugin does not close it)."""
    _limiters.pop(run_id, None)
    _bookings.pop(run_id, None)


def _take(run: str, tokens: int) -> tuple[float, str | None, int]:
    """(seconds to wait, booking id, tokens charged): the request's place in the run's windows,
    taken now; (0, None, 0) for a run the scheduler does not know (it has ended)."""
    limiter = _limiters.get(run)
    if limiter is None:
        return 0.0, None, 0
    now = time.monotonic()
    at, request, share = limiter._take(tokens, now)
    booking = uuid.uuid4().hex
    charged = int(share.cost) if share is not None else 0
    book = _bookings[run]
    book[booking] = Reservation(tokens=charged, waited_s=0.0, _request=request, _tokens=share)
    if len(book) > 100_000:  # settles a dead worker never sent: the oldest are long past use
        for stale in list(book)[:50_000]:
            del book[stale]
    return max(at - now, 0.0), booking, charged


def _settle(run: str, booking: str, tokens: int | None) -> None:
    """The answer's real tokens (None: the request never went, give its shares back)."""
    limiter, reservation = _limiters.get(run), _bookings.get(run, {}).pop(booking, None)
    if limiter is None or reservation is None:
        return
    if tokens is None:
        limiter.refund(reservation)
    else:
        limiter.settle(reservation, tokens)


@dataclass(frozen=True)
class _Booked(Reservation):
    booking: str | None = field(default=None, compare=False)


class ClusterRate(RateLimiter):
    """A worker's view of the run's windows on the scheduler (what the gateway calls)."""

    def __init__(
        self,
        run_id: str,
        scheduler: Any,
        loop: asyncio.AbstractEventLoop,
        requests: int | None,
        tokens: int | None,
    ) -> None:
        super().__init__(requests_per_minute=requests, tokens_per_minute=tokens)
        self._run = run_id
        self._scheduler = scheduler
        self._loop = loop
        self._pending: set[asyncio.Task[None]] = set()
        self._open: set[str] = set()  # bookings not settled yet
        self._lock = threading.Lock()

    async def acquire(self, tokens: int = 0) -> Reservation:
        await anyio.lowlevel.checkpoint_if_cancelled()
        # Shielded: a booking made on the scheduler must come back to be settled or refunded.
        with anyio.CancelScope(shield=True):
            wait, booking, charged = await getattr(self._scheduler, TAKE)(
                run=self._run, tokens=tokens
            )
        booked = _Booked(tokens=charged, waited_s=wait, booking=booking)
        if booking is not None:
            with self._lock:
                self._open.add(booking)
        try:
            if wait > 0:
                await anyio.sleep(wait)
            else:
                await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            self.refund(booked)
            raise
        return booked

    def refund(self, reservation: Reservation) -> None:
        self._send(reservation, None)

    def settle(self, reservation: Reservation, actual_tokens: int) -> None:
        self._send(reservation, actual_tokens)

    def _send(self, reservation: Reservation, tokens: int | None) -> None:
        """From any thread (a lease may be released anywhere): the settle goes out on the
        worker's loop, without waiting for it."""
        booking = reservation.booking if isinstance(reservation, _Booked) else None
        with self._lock:
            if booking is None or booking not in self._open:
                return  # settled already: once only
            self._open.discard(booking)
        with contextlib.suppress(RuntimeError):  # the loop is closed: the estimate stays
            self._loop.call_soon_threadsafe(self._spawn, booking, tokens)

    def _spawn(self, booking: str, tokens: int | None) -> None:
        task = self._loop.create_task(self._settle(booking, tokens))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _settle(self, booking: str, tokens: int | None) -> None:
        with contextlib.suppress(Exception):  # lost: the booking keeps its estimate
            await getattr(self._scheduler, SETTLE)(run=self._run, booking=booking, tokens=tokens)
