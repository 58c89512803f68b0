"""The provider keeps nothing per request: attempt indexes in a bounded LRU, windows pruned."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import httpx
import pytest

import asynceval.sim
from asynceval.sim import SimProvider
from asynceval.sim._memory import AttemptMemory, Window

from ._app import CHAT, chat, client, sim

SIM_FILES = str(Path(asynceval.sim.__file__).parent / "*")


async def serve_distinct(c: httpx.AsyncClient, start: int, stop: int) -> None:
    """POST one distinct request body per index in [start, stop), one after another."""
    for i in range(start, stop):
        assert (await c.post(CHAT, json=chat(f"distinct {i}"))).status_code == 200


async def retained_bytes(app: SimProvider, warm_up: int, measured: int) -> int:
    """Bytes the simulator's own code allocated for `measured` distinct requests and still holds.

    Serves `warm_up` distinct requests first (so a bounded memory is already full), then traces
    only the measured phase (tracing is slow) and counts what is still allocated at the end by
    a line of `asynceval/sim`: httpx's and the standard library's warm-up caches are not ours.
    An already running tracemalloc is left running (the count is then a difference).
    """
    async with client(app) as c:
        await serve_distinct(c, 0, warm_up)
        started_here = not tracemalloc.is_tracing()
        if started_here:
            tracemalloc.start()
        try:
            before = sim_bytes()
            await serve_distinct(c, warm_up, warm_up + measured)
            after = sim_bytes()
        finally:
            if started_here:
                tracemalloc.stop()
    return after - before


def sim_bytes() -> int:
    """Traced bytes still allocated by a line in the `asynceval/sim` package."""
    gc.collect()
    ours = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, SIM_FILES)])
    return sum(stat.size for stat in ours.statistics("filename"))


async def test_memory_does_not_grow_with_the_number_of_distinct_requests() -> None:
    # A short rate window: the rate witnesses keep one window's arrivals by design, and this
    # test measures what is kept per request beyond that.
    app = sim(attempt_memory=100, rate_window=0.05)
    kept = await retained_bytes(app, warm_up=300, measured=1500)
    # Remembering a request costs about 200 bytes (digest, LRU node), so 1,500 remembered ones
    # would keep ~300 kB; capped at 100, they keep ~20 kB however many requests are served.
    assert kept < 40 * 1500, f"{kept} bytes kept for 1,500 requests"


async def test_fail_first_still_lets_a_recent_request_through_on_its_retry() -> None:
    app = sim(fail_first=1, attempt_memory=100)
    async with client(app) as c:
        first = await c.post(CHAT, json=chat("a"))
        others = [(await c.post(CHAT, json=chat(f"other {i}"))).status_code for i in range(98)]
        retried = await c.post(CHAT, json=chat("a"))  # 99 distinct since: still remembered
    assert first.status_code == 429
    assert set(others) == {429}
    assert retried.status_code == 200


async def test_a_request_forgotten_by_the_memory_starts_again_at_attempt_zero() -> None:
    app = sim(fail_first=1, attempt_memory=3)
    async with client(app) as c:

        async def status(text: str) -> int:
            return (await c.post(CHAT, json=chat(text))).status_code

        assert [await status(t) for t in ("a", "a", "b", "c", "d")] == [429, 200, 429, 429, 429]
        # b, c, d came after a: a is the least recently used and was evicted by d.
        assert await status("a") == 429
        assert await status("a") == 200


async def test_the_memory_evicts_the_least_recently_used_request_not_the_oldest() -> None:
    app = sim(fail_first=1, attempt_memory=3)
    async with client(app) as c:

        async def status(text: str) -> int:
            return (await c.post(CHAT, json=chat(text))).status_code

        assert [await status(t) for t in ("a", "b", "c")] == [429, 429, 429]
        assert await status("a") == 200  # a is now the most recent; b the least
        assert await status("d") == 429  # evicts b
        assert await status("a") == 200  # remembered (attempt 2)
        assert await status("b") == 429  # forgotten: attempt 0 again


async def test_reset_stats_keeps_the_attempt_memory_and_reset_clears_it() -> None:
    app = sim(fail_first=1, attempt_memory=2)
    async with client(app) as c:
        assert (await c.post(CHAT, json=chat("a"))).status_code == 429
        await c.post("/stats/reset")
        assert (await c.post(CHAT, json=chat("a"))).status_code == 200
        app.reset()
        assert (await c.post(CHAT, json=chat("a"))).status_code == 429


def test_attempt_memory_counts_attempts_and_never_holds_more_than_its_capacity() -> None:
    memory = AttemptMemory(5)
    assert [memory.next(b"k") for _ in range(3)] == [0, 1, 2]
    for i in range(1000):
        memory.next(b"%d" % i)
        assert len(memory) <= 5
    assert memory.next(b"k") == 0  # evicted long ago
    memory.clear()
    assert len(memory) == 0
    with pytest.raises(ValueError, match="capacity"):
        AttemptMemory(0)


def test_window_sums_the_last_span_seconds_and_keeps_the_peak() -> None:
    window = Window(3.0)
    for t in (0.0, 1.0, 2.0):
        window.add(t)
    assert (window.total(2.0), window.peak) == (3, 3)
    window.add(3.0)  # the entry at 0 is exactly one span old: out of [t, t + span)
    assert (window.total(3.0), window.peak, window.oldest()) == (3, 3, 1.0)
    window.add(3.5, 4)
    assert (window.total(3.5), window.peak) == (7, 7)
    assert window.total(100.0) == 0 and len(window) == 0  # nothing kept beyond one span
    assert window.oldest() is None and window.peak == 7
    window.clear()
    assert window.peak == 0
    with pytest.raises(ValueError, match="span"):
        Window(0.0)


def test_window_memory_is_bounded_by_one_span_of_entries() -> None:
    window = Window(1.0)
    for i in range(10_000):
        window.add(i * 0.25)
        assert len(window) <= 4
        # the arrays behind it too: entries that left are dropped once they are the most
        assert len(window._times) == len(window._amounts) <= 1024 + 4
    assert window.peak == 4
    assert window.total(10_000 * 0.25) == 3  # what was dropped was only what had left


def test_window_refuses_an_amount_that_is_not_an_int_and_stays_whole() -> None:
    window = Window(10.0)
    window.add(0.0, 2)
    with pytest.raises(TypeError):
        window.add(1.0, 1.5)  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        window.add(1.0, 2**63)
    window.add(2.0, 3)
    assert (len(window), window.total(2.0), window.total(10.5)) == (2, 5, 3)
