"""Pure async primitives that bound LLM calls: concurrency slots, rate buckets, retry policy.

Each is thread-safe and serves every event loop of a process; the process's `Runtime` owns the
ones its models share.
"""

from ._slot import Slot
from .controller import ConcurrencyController, ControllerStatistics, SharedLimit
from .rate import RateLimiter, Reservation
from .retry import RetryPolicy, is_retryable

__all__ = [
    "ConcurrencyController",
    "ControllerStatistics",
    "RateLimiter",
    "Reservation",
    "RetryPolicy",
    "SharedLimit",
    "Slot",
    "is_retryable",
]
