from __future__ import annotations

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from asynceval.limits import RateLimiter


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="LLM_REQUESTS_PER_MINUTE must be >= 1, got 0"):
        RateLimiter(requests_per_minute=0)


async def test_requests_per_minute_bucket_makes_the_next_request_wait() -> None:
    limiter = RateLimiter(requests_per_minute=600)  # 10 per second, burst of 600
    for _ in range(600):
        assert (await limiter.acquire()).waited_s < 0.05
    start = anyio.current_time()
    await limiter.acquire()
    assert 0.08 <= anyio.current_time() - start < 0.4


async def test_a_large_request_is_not_starved_by_small_ones() -> None:
    limiter = RateLimiter(tokens_per_minute=60_000)  # 1,000 tokens per second
    await limiter.acquire(60_000)  # drain the bucket
    order: list[str] = []

    async def take(name: str, tokens: int) -> None:
        await limiter.acquire(tokens)
        order.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, "large", 200)
        await wait_all_tasks_blocked()
        for index in range(5):
            tg.start_soon(take, f"small{index}", 10)
    assert order == ["large", "small0", "small1", "small2", "small3", "small4"]


async def test_settle_gives_back_what_the_estimate_overcharged() -> None:
    limiter = RateLimiter(tokens_per_minute=60_000)
    reservation = await limiter.acquire(60_000)
    limiter.settle(reservation, actual_tokens=1_000)  # 59,000 come back
    start = anyio.current_time()
    await limiter.acquire(50_000)
    assert anyio.current_time() - start < 0.1


async def test_a_request_larger_than_a_minute_is_charged_one_minute() -> None:
    limiter = RateLimiter(tokens_per_minute=60_000)
    with anyio.fail_after(1):
        reservation = await limiter.acquire(10**9)
    assert reservation.tokens == 60_000


async def test_cancelled_waiter_takes_nothing() -> None:
    limiter = RateLimiter(requests_per_minute=600)
    for _ in range(600):
        await limiter.acquire()
    with anyio.move_on_after(0.02):
        await limiter.acquire()
    start = anyio.current_time()
    await limiter.acquire()  # the cancelled one took no request from the bucket
    assert anyio.current_time() - start < 0.1


def test_one_bucket_is_shared_by_event_loops_in_threads() -> None:
    """Two loops in two threads draw from one bucket: together they wait for the overdraft."""
    import threading
    import time

    limiter = RateLimiter(requests_per_minute=6_000)  # 100 per second, burst of 6,000
    errors: list[BaseException] = []

    async def draw(n: int) -> None:
        for _ in range(n):
            await limiter.acquire()

    def in_thread() -> None:
        try:
            anyio.run(draw, 3_050)
        except BaseException as exc:
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=in_thread) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    elapsed = time.monotonic() - started
    assert not errors
    assert 0.9 <= elapsed < 2.0  # 100 requests over the burst, at 100 per second
