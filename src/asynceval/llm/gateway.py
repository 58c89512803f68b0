"""The gateway: one LLM call = a tenacity retry loop of attempts, each bounded by the limits.

Per attempt, in order: the rate limiter's buckets, a concurrency slot (respecting a 429 cooldown of
the endpoint), then the provider request under `anyio.fail_after(LLM_CALL_TIMEOUT)`. The retry loop
sits outside the slot, so backoff sleeps never hold one. Every failed attempt that will be retried
writes a `retry` event; a call that fails for good writes `llm_call_failed` and raises
`LLMCallFailed`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import anyio
from tenacity import RetryCallState

from .. import events
from ..errors import AttemptTimeout, LLMCallFailed, ProviderError, RateLimited
from ..limits import ConcurrencyController, RateLimiter, RetryPolicy
from .types import Completion
from .usage import UsageCounter, current_usage

Attempt = Callable[[], Awaitable[Completion]]


class _Call:
    """One call's identity and counters, shared by its attempts."""

    __slots__ = ("agent", "attempts", "call_id", "dimension", "started", "usage")

    def __init__(
        self,
        agent: str | None,
        dimension: str | None,
        call_id: str,
        started: float,
        usage: UsageCounter | None,
    ) -> None:
        self.agent = agent
        self.dimension = dimension
        self.call_id = call_id
        self.started = started
        self.usage = usage
        self.attempts = 1

    def on_retry(self, state: RetryCallState) -> None:
        """tenacity's before_sleep: count the retry and write its event."""
        error = state.outcome.exception() if state.outcome is not None else None
        if self.usage is not None:
            self.usage.retries += 1
        events.retry(
            agent=self.agent,
            dimension=self.dimension,
            call_id=self.call_id,
            attempt=state.attempt_number,
            status_code=getattr(error, "status_code", None),
            delay_s=state.upcoming_sleep,
            error=str(error),
        )


class Gateway:
    """Runs provider attempts through the rate limiter, the controller and the retry policy.

    Cheap to build (a few fields): a model builds one per call from its runtime's shared limiter,
    buckets and policy, so nothing in it belongs to one event loop.
    """

    __slots__ = ("call_timeout", "controller", "endpoint", "rate_limiter", "retry_policy")

    def __init__(
        self,
        *,
        controller: ConcurrencyController,
        retry_policy: RetryPolicy,
        call_timeout: float,
        rate_limiter: RateLimiter | None = None,
        endpoint: str | None = None,
    ) -> None:
        if not call_timeout > 0:
            raise ValueError(f"LLM_CALL_TIMEOUT must be > 0, got {call_timeout}")
        self.controller = controller
        self.retry_policy = retry_policy
        self.call_timeout = call_timeout
        self.rate_limiter = rate_limiter
        self.endpoint = endpoint

    async def call(
        self,
        attempt: Attempt,
        *,
        agent: str | None = None,
        dimension: str | None = None,
        estimated_tokens: int = 0,
    ) -> Completion:
        """Make the call, retrying as the policy allows; raises `LLMCallFailed` when it gives up.

        `agent` and `dimension` default to the values bound with `events.bind_context`.
        """
        call = _Call(
            agent if agent is not None else events.context_value("agent"),
            dimension if dimension is not None else events.context_value("dimension"),
            uuid.uuid4().hex[:16],
            anyio.current_time(),
            current_usage(),
        )
        try:
            completion = await self._attempts(call, attempt, estimated_tokens)
        except ProviderError as exc:
            raise self._failed(call, exc) from exc
        if call.usage is not None:
            call.usage.llm_calls += 1
            call.usage.prompt_tokens += completion.usage.prompt_tokens
            call.usage.completion_tokens += completion.usage.completion_tokens
        return completion

    async def _attempts(self, call: _Call, attempt: Attempt, estimated_tokens: int) -> Completion:
        """The first attempt outside tenacity (most calls succeed at once and need none of its
        machinery); a retryable failure is handed to tenacity as attempt 1's outcome, so its
        stop, wait and before_sleep see exactly what happened."""
        try:
            return await self._attempt(attempt, call, estimated_tokens)
        except ProviderError as exc:
            if not exc.retryable:
                raise
            first: ProviderError | None = exc
        async for state in self.retry_policy.retrying(before_sleep=call.on_retry):
            with state:
                if first is not None:
                    failure, first = first, None
                    raise failure
                call.attempts += 1
                completion = await self._attempt(attempt, call, estimated_tokens)
        return completion

    def _failed(self, call: _Call, exc: ProviderError) -> LLMCallFailed:
        elapsed = anyio.current_time() - call.started
        if call.usage is not None:
            call.usage.llm_calls += 1
            call.usage.failed_calls += 1
        events.llm_call_failed(
            agent=call.agent,
            dimension=call.dimension,
            call_id=call.call_id,
            status_code=exc.status_code,
            attempts=call.attempts,
            elapsed_s=elapsed,
            error=str(exc),
        )
        return LLMCallFailed(
            agent=call.agent,
            dimension=call.dimension,
            status_code=exc.status_code,
            attempts=call.attempts,
            elapsed_s=elapsed,
            message=exc.message,
            retryable=exc.retryable,
        )

    async def _attempt(
        self,
        attempt: Attempt,
        call: _Call,
        estimated_tokens: int,
    ) -> Completion:
        agent, dimension, call_id = call.agent, call.dimension, call.call_id
        limiter = self.rate_limiter
        reservation = await limiter.acquire(estimated_tokens) if limiter is not None else None
        sent = False
        try:
            async with self.controller.slot(
                agent=agent, dimension=dimension, call_id=call_id, endpoint=self.endpoint
            ):
                sent = True
                try:
                    with anyio.fail_after(self.call_timeout) as scope:
                        completion = await attempt()
                except TimeoutError:
                    if not scope.cancel_called:
                        raise
                    events.timeout(
                        agent=agent,
                        dimension=dimension,
                        call_id=call_id,
                        timeout_s=self.call_timeout,
                    )
                    raise AttemptTimeout(self.call_timeout) from None
                except RateLimited as exc:
                    if exc.retry_after and self.endpoint is not None:
                        # Pause the endpoint before this slot frees, so queued callers see it;
                        # capped like the retry delay, so a wild Retry-After cannot stall a run.
                        pause = min(exc.retry_after, self.retry_policy.max_delay)
                        self.controller.pause(self.endpoint, pause)
                    raise
        except BaseException:
            if limiter is not None and reservation is not None:
                if sent:
                    limiter.settle(reservation, 0)  # the request counted; its tokens were not used
                else:
                    limiter.refund(reservation)  # nothing reached the provider
            raise
        if limiter is not None and reservation is not None:
            limiter.settle(reservation, completion.usage.total_tokens)
        return completion
