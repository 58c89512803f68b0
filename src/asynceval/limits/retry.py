"""RetryPolicy: when and how long to wait before another attempt, driven by tenacity.

Delay before attempt n+1 = min(RETRY_INITIAL_DELAY * 2^(n-1) + U(0, 0.5), RETRY_MAX_DELAY), raised
to at least the provider's Retry-After when it sent one (still capped). Only errors whose
`retryable` attribute is true are retried; everything else, cancellation included, passes through
at once. The policy knows nothing of HTTP or slots: the caller sleeps outside any slot.

tenacity is imported with the first retry, not with asynceval: most calls never retry, and
tenacity brings tornado's modules along when tornado is installed (about 40 modules).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio

from ..config import Settings

if TYPE_CHECKING:
    from tenacity import AsyncRetrying, RetryCallState


def is_retryable(exc: BaseException) -> bool:
    """True for errors that declare themselves retryable (see `asynceval.errors.ProviderError`)."""
    return isinstance(exc, Exception) and bool(getattr(exc, "retryable", False))


class _Wait(Protocol):
    def __call__(self, retry_state: RetryCallState) -> float: ...


class wait_backoff_or_retry_after:
    """tenacity wait: the exponential-with-jitter delay, raised to the error's `retry_after`, capped."""

    def __init__(self, backoff: _Wait, max_delay: float) -> None:
        self.backoff = backoff
        self.max_delay = max_delay

    def __call__(self, retry_state: RetryCallState) -> float:
        delay = self.backoff(retry_state)
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > delay:
            delay = float(retry_after)
        return min(delay, self.max_delay)


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts in total (the first included) and the backoff between them."""

    max_attempts: int = 3
    initial_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"RETRY_MAX_ATTEMPTS must be >= 1, got {self.max_attempts}")
        if not self.initial_delay > 0:
            raise ValueError(f"RETRY_INITIAL_DELAY must be > 0, got {self.initial_delay}")
        if self.max_delay < self.initial_delay:
            raise ValueError(
                f"RETRY_MAX_DELAY must be >= RETRY_INITIAL_DELAY ({self.initial_delay}), "
                f"got {self.max_delay}"
            )
        if self.jitter < 0:
            raise ValueError(f"jitter must be >= 0, got {self.jitter}")

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(
            max_attempts=settings.retry_max_attempts,
            initial_delay=settings.retry_initial_delay,
            max_delay=settings.retry_max_delay,
        )

    def delay(self, attempt: int) -> float:
        """The delay after failed attempt `attempt` (1-based), from the same tenacity strategy
        the call path uses: for retries outside a tenacity loop (the engine re-running a
        repetition)."""
        from tenacity import RetryCallState

        state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        state.attempt_number = attempt
        return float(self.wait()(state))

    def wait(self) -> wait_backoff_or_retry_after:
        """The tenacity wait strategy implementing the delay formula."""
        from tenacity import wait_exponential, wait_random

        backoff = wait_exponential(multiplier=self.initial_delay, exp_base=2) + wait_random(
            0, self.jitter
        )
        return wait_backoff_or_retry_after(backoff, self.max_delay)

    def retrying(
        self, before_sleep: Callable[[RetryCallState], Awaitable[None] | None] | None = None
    ) -> AsyncRetrying:
        """A fresh tenacity loop for one call; `before_sleep` sees each failed attempt and its delay."""
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

        return AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self.wait(),
            retry=retry_if_exception(is_retryable),
            sleep=anyio.sleep,
            reraise=True,
            before_sleep=before_sleep,
        )
