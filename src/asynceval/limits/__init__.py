"""Pure async primitives that bound LLM calls (layer 3 of DESIGN section 1): concurrency slots
(`ConcurrencyController`, FIFO, with per-endpoint pauses and adaptive limits), rate windows
(`RateLimiter`, RPM/TPM), the retry policy (`RetryPolicy`, tenacity's strategies) and a run's
cost budget (`CostBudget`, with `budget_scope` / `current_budget` binding it to a run).

Each is thread-safe and serves every event loop of a process; the process's `Runtime` owns the
ones its models share. Imports config, errors, the kernel and events, no HTTP; the runtime, the
funnel and the layers above import it. Also importable from here for asynceval's own layers, not
a public API: `SharedLimit` (a cluster's shared slots), `is_retryable`, `ProviderRates` (an
endpoint's announced rate limits), `read_rate_headers` (what an answer's headers announce) and
`finite_number` (a number in a header).
"""

from .._moved import moved_names
from ._announced import ProviderRates as ProviderRates
from ._rate_headers import Announcement as Announcement
from ._rate_headers import finite_number as finite_number
from ._rate_headers import read_rate_headers as read_rate_headers
from ._slot import Slot
from .budget import CostBudget
from .budget import budget_scope as budget_scope
from .budget import current_budget as current_budget
from .controller import ConcurrencyController, ControllerStatistics
from .controller import SharedLimit as SharedLimit
from .rate import RateLimiter
from .retry import RetryPolicy
from .retry import is_retryable as is_retryable

__all__ = [
    "ConcurrencyController",
    "ControllerStatistics",
    "CostBudget",
    "RateLimiter",
    "RetryPolicy",
    "Slot",
]

_MOVED = {"Reservation": "asynceval.limits.rate"}
"""Plumbing that left this package's surface (one release, with a warning)."""
__getattr__ = moved_names(__name__, _MOVED, globals())
