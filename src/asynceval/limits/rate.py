"""RateLimiter: token buckets for requests per minute and tokens per minute, served in FIFO order.

Each attempt takes one request and its estimated tokens (prompt size + max_tokens) before it queues
for a concurrency slot; once the provider reports the real usage, `settle` gives back the excess or
charges the shortfall. Waiters are served strictly in arrival order, so a large request is never
starved by a stream of small ones: whoever is first waits for the buckets to refill, the rest wait
behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from anyio.lowlevel import RunVar

from ..config import Settings


class _Bucket:
    """Continuous-refill bucket holding at most one minute's budget."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, per_minute: int, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.stamp = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        return max(0.0, (amount - self.level) / self.rate)


@dataclass(frozen=True)
class Reservation:
    """What one attempt took from the buckets; hand it back to `RateLimiter.settle`."""

    tokens: int
    waited_s: float


class RateLimiter:
    """FIFO token buckets for LLM_REQUESTS_PER_MINUTE and LLM_TOKENS_PER_MINUTE (None = no limit).

    A request estimated above a whole minute's token budget is charged the full budget (it would
    otherwise never fit); the difference is settled when its usage is known.
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
        self._requests: _Bucket | None = None
        self._tokens: _Bucket | None = None
        self._lock = anyio.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> RateLimiter | None:
        """A limiter for the settings, or None when neither limit is set."""
        if settings.llm_requests_per_minute is None and settings.llm_tokens_per_minute is None:
            return None
        return cls(
            requests_per_minute=settings.llm_requests_per_minute,
            tokens_per_minute=settings.llm_tokens_per_minute,
        )

    def _buckets(self, now: float) -> tuple[_Bucket | None, _Bucket | None]:
        if self._requests is None and self.requests_per_minute is not None:
            self._requests = _Bucket(self.requests_per_minute, now)
        if self._tokens is None and self.tokens_per_minute is not None:
            self._tokens = _Bucket(self.tokens_per_minute, now)
        return self._requests, self._tokens

    async def acquire(self, tokens: int = 0) -> Reservation:
        """Wait in line until one request and `tokens` fit, then take them."""
        started = anyio.current_time()
        async with self._lock:
            while True:
                now = anyio.current_time()
                requests, token_bucket = self._buckets(now)
                charge = 0.0
                wait = 0.0
                if requests is not None:
                    requests.refill(now)
                    wait = requests.wait_for(1.0)
                if token_bucket is not None:
                    token_bucket.refill(now)
                    charge = float(min(max(tokens, 0), token_bucket.capacity))
                    wait = max(wait, token_bucket.wait_for(charge))
                if wait <= 0:
                    break
                await anyio.sleep(wait)
            if requests is not None:
                requests.level -= 1.0
            if token_bucket is not None:
                token_bucket.level -= charge
        return Reservation(tokens=int(charge), waited_s=anyio.current_time() - started)

    def refund(self, reservation: Reservation) -> None:
        """Give back everything an attempt took that never reached the provider."""
        if self._requests is not None:
            self._requests.level = min(self._requests.capacity, self._requests.level + 1.0)
        self.settle(reservation, 0)

    def available(self) -> tuple[float | None, float | None]:
        """(requests, tokens) the buckets hold now; None for a limit that is not set."""
        now = anyio.current_time()
        requests, tokens = self._buckets(now)
        for bucket in (requests, tokens):
            if bucket is not None:
                bucket.refill(now)
        return (
            requests.level if requests is not None else None,
            tokens.level if tokens is not None else None,
        )

    def settle(self, reservation: Reservation, actual_tokens: int) -> None:
        """Correct the token bucket once the provider has reported what the attempt really used."""
        if self._tokens is None:
            return
        self._tokens.level = min(
            self._tokens.capacity, self._tokens.level + reservation.tokens - actual_tokens
        )


_default_rate_limiter: RunVar[RateLimiter | None] = RunVar("asynceval_default_rate_limiter")


def default_rate_limiter(settings: Settings | None = None) -> RateLimiter | None:
    """The rate limiter every model shares in this event loop run, or None when no limit is set."""
    try:
        return _default_rate_limiter.get()
    except LookupError:
        limiter = RateLimiter.from_settings(settings or Settings())
        _default_rate_limiter.set(limiter)
        return limiter
