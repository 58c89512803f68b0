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
from .usage import current_usage

Attempt = Callable[[], Awaitable[Completion]]


class Gateway:
    """Runs provider attempts through the rate limiter, the controller and the retry policy."""

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
        if agent is None:
            agent = events.context_value("agent")
        if dimension is None:
            dimension = events.context_value("dimension")
        call_id = uuid.uuid4().hex[:16]
        started = anyio.current_time()
        usage = current_usage()

        def on_retry(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            if usage is not None:
                usage.retries += 1
            events.retry(
                agent=agent,
                dimension=dimension,
                call_id=call_id,
                attempt=state.attempt_number,
                status_code=getattr(error, "status_code", None),
                delay_s=state.upcoming_sleep,
                error=str(error),
            )

        # The first attempt runs outside tenacity: most calls succeed at once and need none of
        # its machinery. A retryable failure is handed to tenacity as attempt 1's outcome, so its
        # stop, wait and before_sleep see exactly what happened.
        attempts = 1
        first_failure: list[ProviderError] = []
        try:
            try:
                completion = await self._attempt(
                    attempt, agent, dimension, call_id, estimated_tokens
                )
            except ProviderError as exc:
                if not exc.retryable:
                    raise
                first_failure.append(exc)
            if first_failure:
                async for state in self.retry_policy.retrying(before_sleep=on_retry):
                    with state:
                        if first_failure:
                            raise first_failure.pop()
                        attempts += 1
                        completion = await self._attempt(
                            attempt, agent, dimension, call_id, estimated_tokens
                        )
        except ProviderError as exc:
            elapsed = anyio.current_time() - started
            if usage is not None:
                usage.llm_calls += 1
                usage.failed_calls += 1
            events.llm_call_failed(
                agent=agent,
                dimension=dimension,
                call_id=call_id,
                status_code=exc.status_code,
                attempts=attempts,
                elapsed_s=elapsed,
                error=str(exc),
            )
            raise LLMCallFailed(
                agent=agent,
                dimension=dimension,
                status_code=exc.status_code,
                attempts=attempts,
                elapsed_s=elapsed,
                message=exc.message,
                retryable=exc.retryable,
            ) from exc
        if usage is not None:
            usage.llm_calls += 1
            usage.prompt_tokens += completion.usage.prompt_tokens
            usage.completion_tokens += completion.usage.completion_tokens
        return completion

    async def _attempt(
        self,
        attempt: Attempt,
        agent: str | None,
        dimension: str | None,
        call_id: str,
        estimated_tokens: int,
    ) -> Completion:
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
