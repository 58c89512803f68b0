"""RateLimiter: requests per minute and tokens per minute as sliding windows over send times.

LLM_REQUESTS_PER_MINUTE=N means: no window of 60 s, the first one included, sees more than N
requests sent. The budget starts full (N requests may go at once) and each request's share comes
back 60 s after it was sent, plus a margin (0.25 s by default) for what separates our count
from the provider's: it counts arrivals, which lag the moment we stamp a send by the network's
delay, and by the event loop's and the OS's scheduling when the machine is busy. Tokens work
the same way: an attempt is charged its estimate (prompt size + max_tokens) when it is sent,
corrected to what the provider reports once the answer is in (`settle`). A token bucket
cannot promise this: whatever it holds after an idle minute is a burst on top of the next
minute's refill.

The gateway takes its turn here after its concurrency slot is granted, just before the request
leaves, so the order of grants is the slots' FIFO order and what the provider sees is what this
window admitted, even when slot waits bunch sends together.

How the line works, across threads and event loops: an arrival computes the first moment both
windows have room for it (never before the previous grant: FIFO), records its share at that moment
and sleeps until then; the lock guards only that arithmetic, never an await. A caller cancelled while
it sleeps gives its share back (later arrivals, who planned around it, just go a little later than
they could have). Each arrival costs O(1) amortized: shares that can no longer count are dropped
from the front of the window once, and never looked at again.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

from ..config import Settings

MARGIN_S = 0.25
"""Added to the window before a share comes back (the default of `RateLimiter(margin_s=...)`):
covers the spread of delays between our stamp of a send and the provider's count of its arrival
(0.4% of a 60 s window)."""


_LATE_S = 0.005
"""A wake this late (or the margin, if larger) is on time: below it, a new booking gains nothing."""


class _Share:
    """One attempt's share of one window: when it was sent and what it costs there."""

    __slots__ = ("at", "cost", "counted")

    def __init__(self, at: float, cost: float) -> None:
        self.at = at
        self.cost = cost
        self.counted = True  # still in the window's tail (its cost in `total`)


class _Window:
    """The shares that may still count against one limit, oldest first.

    `free_at` is when every share already dropped from the tail is out of the window: no grant
    is placed before it, which is what lets a dropped share be forgotten.
    """

    __slots__ = ("free_at", "last", "limit", "period", "tail", "total")

    def __init__(self, limit: int, period: float) -> None:
        self.limit = float(limit)
        self.period = period
        self.tail: deque[_Share] = deque()
        self.total = 0.0
        self.free_at = float("-inf")
        self.last = float("-inf")

    def earliest(self, now: float, cost: float) -> float:
        """The first moment from `now` at which `cost` fits (dropping what never counts again)."""
        tail, period = self.tail, self.period
        while tail and tail[0].at <= now - period:
            self._drop(tail.popleft())
        while tail and self.total + cost > self.limit:
            share = tail.popleft()
            self._drop(share)
            self.free_at = max(self.free_at, share.at + period)
        return max(now, self.last, self.free_at)

    def _drop(self, share: _Share) -> None:
        self.total -= share.cost
        share.counted = False

    def add(self, at: float, cost: float) -> _Share:
        share = _Share(at, cost)
        self.tail.append(share)
        self.total += cost
        self.last = at
        return share

    def adjust(self, share: _Share, cost: float) -> None:
        """Change what a share costs (settled usage, or 0 for a request never sent)."""
        if share.counted:
            self.total += cost - share.cost
        share.cost = cost

    def used(self, now: float) -> float:
        """What the window holds at `now`, shares planned for later included."""
        return sum(s.cost for s in self.tail if s.at > now - self.period)


@dataclass(frozen=True)
class Reservation:
    """What one attempt took from the windows; hand it back to `RateLimiter.settle`."""

    tokens: int
    waited_s: float
    _request: _Share | None = field(default=None, repr=False, compare=False)
    _tokens: _Share | None = field(default=None, repr=False, compare=False)


class RateLimiter:
    """Sliding windows for LLM_REQUESTS_PER_MINUTE and LLM_TOKENS_PER_MINUTE (None = no limit).

    One limiter serves every thread and event loop of a process (the `Runtime` owns it). A request
    estimated above a whole minute's token budget is charged the full budget (it would otherwise
    never fit). `window_s` is the window's length (60 s: "per minute"); a provider that counts
    per second, or a test, may want another. `margin_s` is added before a share comes back.
    """

    def __init__(
        self,
        *,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        window_s: float = 60.0,
        margin_s: float = MARGIN_S,
    ) -> None:
        for name, value in (
            ("LLM_REQUESTS_PER_MINUTE", requests_per_minute),
            ("LLM_TOKENS_PER_MINUTE", tokens_per_minute),
        ):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        if not margin_s >= 0:
            raise ValueError(f"margin_s must be >= 0, got {margin_s}")
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.window_s = window_s
        self._margin = margin_s
        period = window_s + margin_s
        self._requests = _Window(requests_per_minute, period) if requests_per_minute else None
        self._tokens = _Window(tokens_per_minute, period) if tokens_per_minute else None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> RateLimiter | None:
        """A limiter for the settings, or None when neither limit is set."""
        if settings.llm_requests_per_minute is None and settings.llm_tokens_per_minute is None:
            return None
        return cls(
            requests_per_minute=settings.llm_requests_per_minute,
            tokens_per_minute=settings.llm_tokens_per_minute,
        )

    def relimit(self, *, requests_per_minute: int | None, tokens_per_minute: int | None) -> None:
        """Change the limits in place (a provider announced others); a window already counting
        keeps its shares, a limit given for the first time starts an empty window, and None
        leaves that limit as it is."""
        with self._lock:
            period = self.window_s + self._margin
            if requests_per_minute is not None and requests_per_minute >= 1:
                self.requests_per_minute = requests_per_minute
                if self._requests is None:
                    self._requests = _Window(requests_per_minute, period)
                self._requests.limit = float(requests_per_minute)
            if tokens_per_minute is not None and tokens_per_minute >= 1:
                self.tokens_per_minute = tokens_per_minute
                if self._tokens is None:
                    self._tokens = _Window(tokens_per_minute, period)
                self._tokens.limit = float(tokens_per_minute)

    def _take(self, tokens: int, now: float) -> tuple[float, _Share | None, _Share | None]:
        """(grant time, request share, token share): this arrival's place in line."""
        with self._lock:
            requests, window = self._requests, self._tokens
            at = now
            charge = 0.0
            if requests is not None:
                at = requests.earliest(now, 1.0)
            if window is not None:
                charge = float(min(max(tokens, 0), window.limit))
                at = max(at, window.earliest(now, charge))
            # Both windows record the same moment, so each stays in grant order.
            request = requests.add(at, 1.0) if requests is not None else None
            share = window.add(at, charge) if window is not None else None
        return at, request, share

    async def acquire(self, tokens: int = 0) -> Reservation:
        """Wait in line until one request and `tokens` fit in the windows, then take them.

        A caller woken later than its booked moment by more than the margin (a stalled loop or
        a descheduled process) gives its booking back and takes a new one from now: its share
        must count from when it really goes."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        started = now = time.monotonic()
        late_ok = max(self._margin, _LATE_S)  # timers always fire a little late
        for retake in range(2):
            at, request, share = self._take(tokens, now)
            reservation = Reservation(
                tokens=int(share.cost) if share is not None else 0,
                waited_s=now - started,
                _request=request,
                _tokens=share,
            )
            if at <= now:
                return reservation
            try:
                await anyio.sleep_until(at)  # asyncio's clock is time.monotonic()
            except BaseException:
                self.refund(reservation)  # left the line: its share goes back
                raise
            now = time.monotonic()
            if now - at <= late_ok or retake:  # a second late wake: take it as it is
                return Reservation(
                    tokens=reservation.tokens,
                    waited_s=now - started,
                    _request=request,
                    _tokens=share,
                )
            self.refund(reservation)
        raise AssertionError("unreachable: the second pass returns")

    def refund(self, reservation: Reservation) -> None:
        """Give back everything an attempt took that never reached the provider."""
        with self._lock:
            if self._requests is not None and reservation._request is not None:
                self._requests.adjust(reservation._request, 0.0)
            if self._tokens is not None and reservation._tokens is not None:
                self._tokens.adjust(reservation._tokens, 0.0)

    def settle(self, reservation: Reservation, actual_tokens: int) -> None:
        """Correct the attempt's token share once the provider has reported what it used."""
        window, share = self._tokens, reservation._tokens
        if window is not None and share is not None:
            with self._lock:
                window.adjust(share, float(min(max(actual_tokens, 0), window.limit)))

    def available(self) -> tuple[float | None, float | None]:
        """(requests, tokens) the windows could still take now; None for a limit not set."""
        now = time.monotonic()
        with self._lock:
            levels = [
                w.limit - w.used(now) if w is not None else None
                for w in (self._requests, self._tokens)
            ]
        return levels[0], levels[1]
