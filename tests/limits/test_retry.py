from __future__ import annotations

import anyio
import pytest
from tenacity import RetryCallState

from asynceval.errors import ProviderError, RateLimited
from asynceval.limits import RetryPolicy


async def _delays(policy: RetryPolicy, errors: list[Exception]) -> tuple[list[float], int]:
    """Run a call that fails with `errors` in turn; return the delays slept and attempts made."""
    delays: list[float] = []
    attempts = 0

    def record(state: RetryCallState) -> None:
        delays.append(state.upcoming_sleep)

    try:
        async for attempt in policy.retrying(before_sleep=record):
            with attempt:
                attempts += 1
                raise errors[min(attempts - 1, len(errors) - 1)]
    except ProviderError as exc:
        raised: Exception | None = exc
    else:
        raised = None
    assert raised is errors[min(attempts - 1, len(errors) - 1)]  # the last error is re-raised
    return delays, attempts


def test_policy_refuses_bad_values() -> None:
    with pytest.raises(ValueError, match="RETRY_MAX_ATTEMPTS must be >= 1, got 0"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="RETRY_MAX_DELAY must be >= RETRY_INITIAL_DELAY"):
        RetryPolicy(initial_delay=2, max_delay=1)


async def test_delay_doubles_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(max_attempts=5, initial_delay=0.001, max_delay=0.006, jitter=0.0005)
    delays, attempts = await _delays(policy, [ProviderError("busy", status_code=503)])
    assert attempts == 5
    assert 0.001 <= delays[0] <= 0.0015
    assert 0.002 <= delays[1] <= 0.0025
    assert 0.004 <= delays[2] <= 0.0045
    assert delays[3] == pytest.approx(0.006)  # 0.008 + jitter, capped


async def test_retry_after_raises_the_delay_but_stays_capped() -> None:
    policy = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.05, jitter=0)
    errors: list[Exception] = [
        RateLimited("slow down", status_code=429, retry_after=0.03),
        RateLimited("slow down", status_code=429, retry_after=5.0),
    ]
    delays, _ = await _delays(policy, errors)
    assert delays == [pytest.approx(0.03), pytest.approx(0.05)]


@pytest.mark.parametrize("status", [400, 401, 404, 500])
async def test_non_retryable_status_fails_at_once(status: int) -> None:
    delays, attempts = await _delays(RetryPolicy(), [ProviderError("no", status_code=status)])
    assert (delays, attempts) == ([], 1)


@pytest.mark.parametrize("status", [408, 429, 502, 503])
def test_contract_statuses_are_retryable(status: int) -> None:
    assert ProviderError("x", status_code=status).retryable


async def test_cancellation_is_never_retried() -> None:
    attempts = 0
    with anyio.move_on_after(0.05) as scope:
        async for attempt in RetryPolicy(max_attempts=5, initial_delay=0.001).retrying():
            with attempt:
                attempts += 1
                await anyio.sleep(1)
    assert scope.cancelled_caught and attempts == 1
