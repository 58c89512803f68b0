"""Pure async primitives that bound LLM calls: concurrency slots, rate buckets, retry policy."""

from .controller import ConcurrencyController, ControllerStatistics, Slot, default_controller
from .rate import RateLimiter, Reservation, default_rate_limiter
from .retry import RetryPolicy, is_retryable

__all__ = [
    "ConcurrencyController",
    "ControllerStatistics",
    "RateLimiter",
    "Reservation",
    "RetryPolicy",
    "Slot",
    "default_controller",
    "default_rate_limiter",
    "is_retryable",
]
