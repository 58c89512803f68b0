"""`Call`: one LLM call's identity (agent, dimension, call id) and counters, shared by its
attempts and written into their `retry` events, and its OpenTelemetry span (`traced`); call ids
unique across processes. `Overrides`: the limits a caller brings to its calls in place of its
runtime's."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .. import events
from ..config import Hedge, Settings
from ..errors import LLMCallFailed, ProviderError, RateLimited
from ..limits import ConcurrencyController, RateLimiter, RetryPolicy
from ..telemetry import CallSpan
from ._costing import Costing
from ._usage import UsageCounter

if TYPE_CHECKING:
    from tenacity import RetryCallState

T = TypeVar("T")
UNSET: Any = object()
"""`rate_limiter=UNSET`: the runtime's rate windows (None is a choice: no rate limit)."""


class Overrides(NamedTuple):
    """A caller's own limits in place of its runtime's: a model's or a transport's `controller=`,
    `rate_limiter=` and `settings=` (which fixes its retry policy, LLM_CALL_TIMEOUT,
    LLM_STREAM_IDLE_TIMEOUT, LLM_HEDGE and LLM_HEDGE_BUDGET). None, or UNSET for the rate windows,
    keeps the runtime's."""

    controller: ConcurrencyController | None = None
    rate_limiter: RateLimiter | None = UNSET
    retry_policy: RetryPolicy | None = None
    call_timeout: float | None = None
    stream_idle_timeout: float | None = None
    hedge: Hedge | None = None
    hedge_budget: float | None = None

    @classmethod
    def of(
        cls,
        *,
        controller: ConcurrencyController | None = None,
        rate_limiter: RateLimiter | None = UNSET,
        settings: Settings | None = None,
    ) -> Overrides:
        if settings is None:
            return cls(controller, rate_limiter)
        policy = RetryPolicy.from_settings(settings)
        return cls(
            controller,
            rate_limiter,
            policy,
            settings.llm_call_timeout,
            settings.llm_stream_idle_timeout,
            settings.llm_hedge,
            settings.llm_hedge_budget,
        )


class Call:
    """One call's identity and counters, shared by its attempts."""

    __slots__ = (
        "agent",
        "attempts",
        "call_id",
        "costing",
        "dimension",
        "handed_on",
        "span",
        "started",
        "usage",
    )

    def __init__(
        self,
        agent: str | None,
        dimension: str | None,
        call_id: str,
        started: float,
        usage: UsageCounter | None,
        costing: Costing | None = None,
    ) -> None:
        self.agent = agent
        self.dimension = dimension
        self.call_id = call_id
        self.started = started
        self.usage = usage
        self.costing = costing  # its price and budget: each of its requests is priced
        self.attempts = 1
        self.handed_on = False  # its last attempt's slot went straight to a caller in line
        self.span: CallSpan | None = None  # its OpenTelemetry span, when telemetry is on

    def on_retry(self, state: RetryCallState) -> None:
        """tenacity's before_sleep: count the retry and write its event."""
        error = state.outcome.exception() if state.outcome is not None else None
        self.retried(getattr(error, "status_code", None), state.upcoming_sleep, str(error))

    def on_turned_away(self, error: RateLimited, delay: float) -> None:
        """An overload 429: count the retry and write its event; the call goes again."""
        self.retried(
            error.status_code,
            delay,
            f"{error} (the provider is serving our other calls: this call goes again at the "
            "front of the line, not counted as an attempt)",
        )
        self.attempts += 1

    def failed(self, exc: ProviderError) -> LLMCallFailed:
        """The call has failed for good with `exc`: count it, write `llm_call_failed`, and the
        error to raise."""
        elapsed = time.monotonic() - self.started
        if self.usage is not None:
            self.usage.llm_calls += 1
            self.usage.failed_calls += 1
        events.llm_call_failed(
            agent=self.agent,
            dimension=self.dimension,
            call_id=self.call_id,
            status_code=exc.status_code,
            attempts=self.attempts,
            elapsed_s=elapsed,
            error=str(exc),
        )
        return LLMCallFailed(
            agent=self.agent,
            dimension=self.dimension,
            status_code=exc.status_code,
            attempts=self.attempts,
            elapsed_s=elapsed,
            message=exc.message,
            retryable=exc.retryable,
        )

    def retried(self, status_code: int | None, delay: float, error: str) -> None:
        """Count one retry of this call and write its `retry` event (the next attempt follows
        after `delay` seconds)."""
        if self.usage is not None:
            self.usage.retries += 1
        if self.span is not None:
            self.span.retried(self.attempts, status_code, delay, error)
        events.retry(
            agent=self.agent,
            dimension=self.dimension,
            call_id=self.call_id,
            attempt=self.attempts,
            status_code=status_code,
            delay_s=delay,
            error=error,
        )


_call_ids = itertools.count()
_process_tag = os.urandom(4).hex()  # ids stay unique across processes (a cluster's workers)


def _new_process_tag() -> None:
    global _process_tag
    _process_tag = os.urandom(4).hex()


os.register_at_fork(after_in_child=_new_process_tag)  # a forked worker is another process


def call_id() -> str:
    """A call's id: unique in the process and across processes, without a system call."""
    return f"{_process_tag}{next(_call_ids):08x}"


HEDGE_SUFFIX = "-h"
"""A hedge's call id is its call's with this suffix (`hedge_id`, `call_of`)."""


def hedge_id(call_id: str) -> str:
    """The call id of a hedge of call `call_id` (DESIGN section 17)."""
    return call_id + HEDGE_SUFFIX


def call_of(call_id: str) -> str:
    """The call a request's id belongs to: itself, or for a hedge, the call it hedges."""
    return call_id.removesuffix(HEDGE_SUFFIX)


def caller(agent: str | None, dimension: str | None) -> tuple[str | None, str | None]:
    """The (agent, dimension) a call is made for: those given, else those bound to the events
    of this context (`events.bind_context`, as the engine and `SyncAgent` do)."""
    return (
        agent if agent is not None else events.context_value("agent"),
        dimension if dimension is not None else events.context_value("dimension"),
    )


async def traced(span: CallSpan, made: Awaitable[T], call: Call) -> T:
    """`made` (a call's attempts) with its span told the outcome; a streamed answer's span ends
    with its stream, once its lease is released."""
    try:
        result = await made
    except BaseException as exc:
        span.failed(exc, call.attempts)
        raise
    span.succeeded(result, call.attempts)
    return result
