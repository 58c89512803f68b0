"""Per-context usage counters: the call path counts, whoever opened `track_usage` reads.

The engine opens one counter per task repetition; every LLM call made inside that context (in
async code, or in a worker thread that hops back through `generate_sync`) adds to it. Nothing is
passed by hand.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from .._scoped import Scoped
from .types import Usage


@dataclass
class UsageCounter:
    """Calls, retries and tokens counted in one context. `cache_hits`: the calls (counted in
    `llm_calls`, their tokens too) answered from the model-call cache, without a request."""

    llm_calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    # Requests made so far, by cache key: the model-call cache tells the n-th identical one apart.
    requests_seen: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def add_tokens(self, usage: Usage) -> None:
        """Count the tokens an answer reports."""
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "llm_calls": self.llm_calls,
            "failed_calls": self.failed_calls,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cache_hits": self.cache_hits,
        }


_current: ContextVar[UsageCounter | None] = ContextVar("asynceval_usage", default=None)


def track_usage(counter: UsageCounter | None = None) -> Scoped[UsageCounter]:
    """Count every LLM call made in this `with` block into `counter` (a new one if not given),
    which entering it returns."""
    return Scoped(_current, counter if counter is not None else UsageCounter())


def current_usage() -> UsageCounter | None:
    """The counter of the innermost `track_usage` around this code, if any."""
    return _current.get()
