"""RateLimiter: token buckets for requests per minute and tokens per minute, served in FIFO order.

Each attempt takes one request and its estimated tokens (prompt size + max_tokens) before it queues
for a concurrency slot; once the provider reports the real usage, `settle` gives back the excess or
charges the shortfall. Waiters are served strictly in arrival order, so a large request is never
starved by a stream of small ones.

How the line works, across threads and event loops: an arrival takes its share at once, letting a
bucket go below zero, and sleeps until the bucket has refilled to zero again. The next arrival sees
the deficit and sleeps longer. So grants go in arrival order with no queue to manage, and the lock
guards only arithmetic, never an await. A caller cancelled while it sleeps gives its share back.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from ..config import Settings


class _Bucket:
    """Continuous-refill bucket holding at most one minute's budget; may run into deficit."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, per_minute: int, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.stamp = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, amount: float) -> float:
        """Take `amount` (possibly into deficit); seconds until the bucket is back at zero."""
        self.level -= amount
        return max(0.0, -self.level / self.rate)

    def give(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


@dataclass(frozen=True)
class Reservation:
    """What one attempt took from the buckets; hand it back to `RateLimiter.settle`."""

    tokens: int
    waited_s: float


class RateLimiter:
    """FIFO token buckets for LLM_REQUESTS_PER_MINUTE and LLM_TOKENS_PER_MINUTE (None = no limit).

    One limiter serves every thread and event loop of a process (the `Runtime` owns it). A request
    estimated above a whole minute's token budget is charged the full budget (it would otherwise
    never fit); the difference is settled when its usage is known.
    """

    def __init__(
        self,
        *,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
    ) -> None:
        for name, value in (
            ("LLM_REQUESTS_PER_MINUTE", requests_per_minute),
            ("LLM_TOKENS_PER_MINUTE", tokens_per_minute),
        ):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        now = time.monotonic()
        self._requests = _Bucket(requests_per_minute, now) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute, now) if tokens_per_minute else None
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

    def _take(self, tokens: int) -> tuple[float, float]:
        """(token charge, seconds to wait): this arrival's place in line."""
        now = time.monotonic()
        wait = 0.0
        charge = 0.0
        with self._lock:
            if self._requests is not None:
                self._requests.refill(now)
                wait = self._requests.take(1.0)
            if self._tokens is not None:
                self._tokens.refill(now)
                charge = float(min(max(tokens, 0), self._tokens.capacity))
                wait = max(wait, self._tokens.take(charge))
        return charge, wait

    def _give(self, requests: float, tokens: float) -> None:
        with self._lock:
            if self._requests is not None and requests:
                self._requests.give(requests)
            if self._tokens is not None and tokens:
                self._tokens.give(tokens)

    async def acquire(self, tokens: int = 0) -> Reservation:
        """Wait in line until one request and `tokens` fit, then take them."""
        started = time.monotonic()
        await anyio.lowlevel.checkpoint_if_cancelled()
        charge, wait = self._take(tokens)
        if wait > 0:
            try:
                await anyio.sleep(wait)
            except BaseException:
                self._give(1.0, charge)  # left the line: its share goes back
                raise
        return Reservation(tokens=int(charge), waited_s=time.monotonic() - started)

    def refund(self, reservation: Reservation) -> None:
        """Give back everything an attempt took that never reached the provider."""
        self._give(1.0, reservation.tokens)

    def available(self) -> tuple[float | None, float | None]:
        """(requests, tokens) the buckets hold now; None for a limit that is not set."""
        now = time.monotonic()
        with self._lock:
            levels: list[float | None] = []
            for bucket in (self._requests, self._tokens):
                if bucket is not None:
                    bucket.refill(now)
                levels.append(bucket.level if bucket is not None else None)
        return levels[0], levels[1]

    def settle(self, reservation: Reservation, actual_tokens: int) -> None:
        """Correct the token bucket once the provider has reported what the attempt really used."""
        if self._tokens is not None:
            self._give(0.0, reservation.tokens - actual_tokens)
