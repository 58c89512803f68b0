"""RateLimiter: sliding windows over send times, FIFO, across threads and loops."""

from __future__ import annotations

import itertools
import threading
import time

import anyio
import pytest

from asynceval.limits import RateLimiter

MARGIN = 0.05  # short windows, short margins: these tests time our own grants, not arrivals


def most_in_a_window(
    times: list[float], window: float, weights: list[float] | None = None
) -> float:
    """The largest total weight of the times inside any half-open window [t, t + window)."""
    points = sorted(zip(times, weights or [1.0] * len(times), strict=True))
    best = total = 0.0
    start = 0
    for at, weight in points:
        total += weight
        while points[start][0] <= at - window:
            total -= points[start][1]
            start += 1
        best = max(best, total)
    return best


async def grant_times(limiter: RateLimiter, costs: list[int]) -> list[float]:
    """Start one acquire per cost, in order; return when each was granted."""
    times = [0.0] * len(costs)

    async def take(index: int, tokens: int) -> None:
        await limiter.acquire(tokens)
        times[index] = time.monotonic()

    async with anyio.create_task_group() as tg:
        for index, tokens in enumerate(costs):
            tg.start_soon(take, index, tokens)
            await anyio.lowlevel.checkpoint()  # arrive in this order
    return times


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="LLM_REQUESTS_PER_MINUTE must be >= 1, got 0"):
        RateLimiter(requests_per_minute=0)
    with pytest.raises(ValueError, match="window_s must be > 0"):
        RateLimiter(requests_per_minute=1, window_s=0)


async def test_the_first_minute_sees_no_more_than_the_limit() -> None:
    """LLM_REQUESTS_PER_MINUTE=60: 60 go at once, the 61st not within the first minute (a
    bucket that starts full lets a 61st through within a second)."""
    limiter = RateLimiter(requests_per_minute=60)
    granted = 0

    async def take() -> None:
        nonlocal granted
        await limiter.acquire()
        granted += 1

    with anyio.move_on_after(1.5):
        async with anyio.create_task_group() as tg:
            for _ in range(61):
                tg.start_soon(take)
    assert granted == 60


async def test_no_window_sees_more_requests_than_the_limit() -> None:
    limiter = RateLimiter(requests_per_minute=10, window_s=0.4, margin_s=MARGIN)
    started = time.monotonic()
    times = await grant_times(limiter, [0] * 35)
    assert most_in_a_window(times, 0.4) <= 10
    assert sum(t - started < 0.1 for t in times) == 10  # the budget starts full
    assert max(times) - started >= 3 * 0.4  # 35 requests need four windows


async def test_no_window_sees_more_tokens_than_the_limit() -> None:
    limiter = RateLimiter(tokens_per_minute=1_000, window_s=0.3, margin_s=MARGIN)
    costs = [150, 400, 50, 300, 700, 20, 500, 1_000, 90, 260, 310, 5]
    times = await grant_times(limiter, costs)
    assert most_in_a_window(times, 0.3, [float(c) for c in costs]) <= 1_000
    # FIFO: nobody is granted before an earlier arrival (those granted at one moment wake in
    # whatever order the loop runs them, hence the few milliseconds)
    assert all(later >= earlier - 0.005 for earlier, later in itertools.pairwise(times))


async def test_a_large_request_is_not_starved_by_small_ones() -> None:
    """Small requests that would fit at once still wait behind a large one that came first."""
    limiter = RateLimiter(tokens_per_minute=1_000, window_s=0.3, margin_s=MARGIN)
    await limiter.acquire(950)
    started = time.monotonic()
    times = await grant_times(limiter, [200, 10, 10, 10, 10, 10])
    assert all(t - started >= 0.3 for t in times)  # none went before the large one could
    assert max(times) - min(times) < 0.05  # and then all went together


async def test_settle_gives_back_what_the_estimate_overcharged() -> None:
    limiter = RateLimiter(tokens_per_minute=60_000)
    reservation = await limiter.acquire(60_000)
    limiter.settle(reservation, actual_tokens=1_000)  # 59,000 come back
    start = anyio.current_time()
    await limiter.acquire(50_000)
    assert anyio.current_time() - start < 0.1


async def test_settle_charges_what_the_estimate_missed() -> None:
    limiter = RateLimiter(tokens_per_minute=1_000, window_s=0.3, margin_s=MARGIN)
    reservation = await limiter.acquire(100)
    limiter.settle(reservation, actual_tokens=900)  # the answer was longer than estimated
    start = anyio.current_time()
    await limiter.acquire(200)  # 900 + 200 > 1,000: waits for the first to leave the window
    assert anyio.current_time() - start >= 0.3


async def test_a_request_larger_than_a_minute_is_charged_one_minute() -> None:
    limiter = RateLimiter(tokens_per_minute=60_000)
    with anyio.fail_after(1):
        reservation = await limiter.acquire(10**9)
    assert reservation.tokens == 60_000


async def test_cancelled_waiter_takes_nothing() -> None:
    limiter = RateLimiter(requests_per_minute=10, window_s=0.3, margin_s=MARGIN)
    for _ in range(10):
        await limiter.acquire()
    with anyio.move_on_after(0.02):
        await limiter.acquire()
    start = time.monotonic()
    times = await grant_times(limiter, [0] * 10)
    # all ten fit in the next window: the cancelled caller's request came back
    assert max(times) - start < 0.3 + MARGIN + 0.15


async def test_available_counts_what_the_window_holds() -> None:
    limiter = RateLimiter(requests_per_minute=100, tokens_per_minute=10_000)
    reservation = await limiter.acquire(3_000)
    limiter.settle(reservation, 1_000)
    refunded = await limiter.acquire(500)
    limiter.refund(refunded)
    assert limiter.available() == (99.0, 9_000.0)


def test_one_window_is_shared_by_event_loops_in_threads() -> None:
    """Two loops in two threads draw from one window: together they wait their turns."""
    limiter = RateLimiter(requests_per_minute=100, window_s=0.5, margin_s=MARGIN)
    times: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    async def draw(n: int) -> None:
        for _ in range(n):
            await limiter.acquire()
            with lock:
                times.append(time.monotonic())

    def in_thread() -> None:
        try:
            anyio.run(draw, 150)
        except BaseException as exc:
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=in_thread) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors
    assert len(times) == 300
    assert most_in_a_window(times, 0.5) <= 100
    assert 1.0 <= time.monotonic() - started < 2.5  # three windows' worth


async def test_a_caller_woken_late_counts_from_when_it_really_goes() -> None:
    """The loop stalls past two callers' booked moment: they give their booking back and go
    a window after the stall, never three requests in one window."""
    limiter = RateLimiter(requests_per_minute=2, window_s=0.5, margin_s=MARGIN)
    started = time.monotonic()
    sent: list[float] = []

    async def one() -> None:
        await limiter.acquire()
        sent.append(time.monotonic())

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
        await anyio.sleep(0.45)
        time.sleep(0.35)  # noqa: ASYNC251  (the stall is the point)
    assert most_in_a_window(sent, 0.5) <= 2
    assert max(sent) - started >= 0.8 + 0.5  # the last went a window after the late pair
