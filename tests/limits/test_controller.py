from __future__ import annotations

import random

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from anyio import wait_all_tasks_blocked

from asynceval.limits import ConcurrencyController

from ..conftest import EventLog


@pytest.mark.parametrize("bad", [0, -1])
def test_a_limit_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match=f"MAX_CONCURRENT_LLM_CALLS must be >= 1, got {bad}"):
        ConcurrencyController(bad)


def test_the_limit_cannot_be_changed() -> None:
    controller = ConcurrencyController(3)
    with pytest.raises(AttributeError):
        controller.limit = 4  # type: ignore[misc]


async def test_grants_are_first_in_first_out() -> None:
    controller = ConcurrencyController(1)
    order: list[int] = []
    gate = anyio.Event()

    async def caller(index: int) -> None:
        async with controller.slot(agent="a", dimension=str(index)):
            order.append(index)
            if index == 0:
                await gate.wait()

    async with anyio.create_task_group() as tg:
        for index in range(20):
            tg.start_soon(caller, index)
            await wait_all_tasks_blocked()  # each caller queues before the next one starts
        gate.set()
    assert order == list(range(20))


async def test_events_carry_depth_slots_and_times(event_log: EventLog) -> None:
    controller = ConcurrencyController(2)
    release = anyio.Event()

    async def hold(name: str) -> None:
        async with controller.slot(agent=name, dimension="dim", call_id=name):
            await release.wait()

    async with anyio.create_task_group() as tg:
        for name in ("a", "b", "c"):
            tg.start_soon(hold, name)
            await wait_all_tasks_blocked()
        assert controller.statistics().waiting == 1
        release.set()
    queueing = {e["call_id"]: e for e in event_log.named("queueing")}
    acquired = {e["call_id"]: e for e in event_log.named("acquired")}
    assert [queueing[n]["queue_depth"] for n in "abc"] == [1, 1, 1]
    assert [acquired[n]["active_slots"] for n in "ab"] == [1, 2]
    assert acquired["c"]["active_slots"] in (1, 2) and acquired["c"]["wait_s"] > 0
    assert all("held_s" in e and e["active_slots"] >= 0 for e in event_log.named("released"))
    assert event_log.max_in_flight() == 2
    stats = controller.statistics()
    assert (stats.active, stats.waiting, stats.max_active, stats.granted) == (0, 0, 2, 3)


async def test_queue_depth_counts_waiters_including_this_one(event_log: EventLog) -> None:
    controller = ConcurrencyController(1)
    release = anyio.Event()

    async def hold(name: str) -> None:
        async with controller.slot(call_id=name):
            await release.wait()

    async with anyio.create_task_group() as tg:
        for name in ("a", "b", "c"):
            tg.start_soon(hold, name)
            await wait_all_tasks_blocked()
        release.set()
    assert [e["queue_depth"] for e in event_log.named("queueing")] == [1, 1, 2]


async def test_random_cancellations_leave_no_slot_held(event_log: EventLog) -> None:
    """2,000 callers cancelled at random points (while queued or while holding)."""
    controller = ConcurrencyController(5)
    rng = random.Random(7)
    outcomes = {"held": 0, "cancelled": 0}

    async def caller(cancel_after: float, hold_for: float) -> None:
        with anyio.move_on_after(cancel_after) as scope:
            async with controller.slot(agent="a", dimension="d"):
                await anyio.sleep(hold_for)
                outcomes["held"] += 1
        if scope.cancelled_caught:
            outcomes["cancelled"] += 1

    async with anyio.create_task_group() as tg:
        for _ in range(2000):
            tg.start_soon(caller, rng.uniform(0, 0.3), rng.uniform(0, 0.002))
    stats = controller.statistics()
    assert (stats.active, stats.waiting) == (0, 0)
    assert outcomes["held"] > 100 and outcomes["cancelled"] > 100
    assert len(event_log.named("queueing")) == 2000
    assert len(event_log.named("acquired")) == len(event_log.named("released"))
    assert event_log.max_in_flight() <= 5
    # The limiter is whole again: all five slots can be held at once, with nobody waiting.
    release = anyio.Event()

    async def hold() -> None:
        async with controller.slot():
            await release.wait()

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(hold)
        await wait_all_tasks_blocked()
        assert (controller.statistics().active, controller.statistics().waiting) == (5, 0)
        release.set()


@pytest.mark.parametrize("in_line", [0, 3])
async def test_a_caller_already_cancelled_never_holds_a_slot(in_line: int) -> None:
    """Cancelled before it asks: with a slot free it does not take it, and behind a line it
    leaves the line without a grant, which goes to the next caller instead."""
    controller = ConcurrencyController(1)
    held: list[str] = []
    release = anyio.Event()

    async def caller(name: str) -> None:
        async with controller.slot():
            held.append(name)
            await release.wait()

    async with anyio.create_task_group() as tg:
        if in_line:
            tg.start_soon(caller, "holder")
            await wait_all_tasks_blocked()
            for index in range(in_line - 1):
                tg.start_soon(caller, f"queued-{index}")
            await wait_all_tasks_blocked()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await caller("cancelled")
        assert scope.cancelled_caught
        release.set()
    assert "cancelled" not in held
    assert held == (["holder"] + [f"queued-{i}" for i in range(in_line - 1)] if in_line else [])
    assert (controller.statistics().active, controller.statistics().waiting) == (0, 0)


async def test_a_caller_already_cancelled_takes_no_free_slot_behind_a_paused_line() -> None:
    """The line holds only callers of a paused endpoint, so a caller of another endpoint is
    granted a free slot without waiting: already cancelled, it must not take it."""
    controller = ConcurrencyController(2)
    controller.pause("http://a", 30)
    held: list[str] = []

    async def caller(endpoint: str, name: str) -> None:
        async with controller.slot(endpoint=endpoint):
            held.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(caller, "http://a", "paused")
        await wait_all_tasks_blocked()
        assert controller.statistics().waiting == 1
        with anyio.CancelScope() as scope:
            scope.cancel()
            await caller("http://b", "cancelled")
        assert scope.cancelled_caught and held == []
        assert (controller.statistics().active, controller.statistics().waiting) == (0, 1)
        await caller("http://b", "next")  # the slot went back: another caller takes it
        tg.cancel_scope.cancel()
    assert held == ["next"]


async def test_pause_holds_back_one_endpoint_only() -> None:
    controller = ConcurrencyController(2)
    controller.pause("http://a", 0.2)
    start = anyio.current_time()
    async with controller.slot(endpoint="http://b"):
        assert anyio.current_time() - start < 0.1
    async with controller.slot(endpoint="http://a"):
        assert anyio.current_time() - start >= 0.2
    assert controller.cooldown_remaining("http://a") == 0.0


async def test_pause_begun_while_queued_is_honoured_and_merges() -> None:
    """One cooldown for the endpoint, not one per caller: overlapping pauses merge."""
    controller = ConcurrencyController(1)
    times: list[float] = []
    release = anyio.Event()
    start = anyio.current_time()

    async def holder() -> None:
        async with controller.slot(endpoint="http://a"):
            await release.wait()

    async def caller() -> None:
        async with controller.slot(endpoint="http://a"):
            times.append(anyio.current_time() - start)

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await wait_all_tasks_blocked()
        for _ in range(3):
            tg.start_soon(caller)
        await wait_all_tasks_blocked()
        controller.pause("http://a", 0.2)
        controller.pause("http://a", 0.1)  # shorter: does not shorten the pause
        release.set()
    assert len(times) == 3 and min(times) >= 0.2 and max(times) < 0.5
    assert controller.statistics().active == 0


async def test_grants_stay_first_in_first_out_across_a_pause() -> None:
    """Callers held by a pause keep their place; those arriving during it queue behind them."""
    controller = ConcurrencyController(1)
    order: list[int] = []
    release = anyio.Event()

    async def holder() -> None:
        async with controller.slot(endpoint="e"):
            await release.wait()

    async def caller(index: int) -> None:
        async with controller.slot(endpoint="e"):
            order.append(index)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await wait_all_tasks_blocked()
        for index in range(10):
            tg.start_soon(caller, index)
            await wait_all_tasks_blocked()
        controller.pause("e", 0.1)
        release.set()
        await wait_all_tasks_blocked()
        for index in range(10, 20):
            tg.start_soon(caller, index)
            await wait_all_tasks_blocked()
    assert order == list(range(20))


async def test_a_paused_endpoint_does_not_hold_back_others() -> None:
    controller = ConcurrencyController(1)
    order: list[str] = []
    release = anyio.Event()

    async def holder() -> None:
        async with controller.slot(endpoint="a"):
            await release.wait()

    async def caller(name: str, endpoint: str) -> None:
        async with controller.slot(endpoint=endpoint):
            order.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await wait_all_tasks_blocked()
        tg.start_soon(caller, "a1", "a")
        await wait_all_tasks_blocked()
        tg.start_soon(caller, "b1", "b")
        await wait_all_tasks_blocked()
        controller.pause("a", 0.2)
        release.set()
    assert order == ["b1", "a1"]  # b1 came later but its endpoint was not paused


async def test_every_queueing_ends_in_acquired_or_cancelled(event_log: EventLog) -> None:
    controller = ConcurrencyController(1)
    release = anyio.Event()

    async def holder() -> None:
        async with controller.slot(call_id="holder"):
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await wait_all_tasks_blocked()
        with anyio.move_on_after(0.05):
            async with controller.slot(agent="judge", dimension="d", call_id="impatient"):
                pass
        release.set()
    (cancelled,) = event_log.named("cancelled")
    assert cancelled["call_id"] == "impatient" and cancelled["wait_s"] >= 0.04
    assert "impatient" not in {e["call_id"] for e in event_log.named("acquired")}
    assert controller.statistics().waiting == 0


def test_grants_are_first_in_first_out_across_event_loops_in_threads() -> None:
    """One controller serves loops in several threads; grants follow arrival order across them."""
    import threading
    import time

    controller = ConcurrencyController(1)
    order: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    async def holder() -> None:
        async with controller.slot(call_id="holder"):
            holding.set()
            await anyio.to_thread.run_sync(release.wait)

    async def caller(name: str) -> None:
        async with controller.slot(call_id=name):
            order.append(name)

    first = threading.Thread(target=anyio.run, args=(holder,))
    first.start()
    assert holding.wait(5)
    threads = []
    for index in range(8):  # alternate between two new loops' threads, each queued in turn
        thread = threading.Thread(target=anyio.run, args=(caller, f"c{index}"))
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 5
        while controller.statistics().waiting < index + 1 and time.monotonic() < deadline:
            time.sleep(0.001)
    release.set()
    for thread in [first, *threads]:
        thread.join(5)
    assert order == [f"c{index}" for index in range(8)]
    stats = controller.statistics()
    assert (stats.active, stats.waiting, stats.max_active) == (0, 0, 1)


def test_many_threads_hammering_one_controller_never_exceed_the_limit() -> None:
    """Four event loops in four threads, 200 slots each at limit 3: at most 3 held, none lost."""
    import threading

    controller = ConcurrencyController(3)
    peak = 0
    held = 0
    lock = threading.Lock()

    async def hammer() -> None:
        nonlocal peak, held

        async def one() -> None:
            nonlocal peak, held
            async with controller.slot():
                with lock:
                    held += 1
                    peak = max(peak, held)
                await anyio.sleep(0.0005)
                with lock:
                    held -= 1

        async with anyio.create_task_group() as tg:
            for _ in range(200):
                tg.start_soon(one)

    threads = [threading.Thread(target=anyio.run, args=(hammer,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    stats = controller.statistics()
    assert peak == 3 and stats.max_active == 3
    assert (stats.active, stats.waiting, stats.granted) == (0, 0, 800)


async def test_a_grant_to_a_waiter_whose_loop_closed_is_taken_back_once() -> None:
    """A waiter left in line when its loop (in another thread) closed: the grant meant for it
    goes back, and collecting the abandoned caller later does not give the slot back again."""
    import asyncio
    import gc
    import threading

    controller = ConcurrencyController(2)
    abandoned: list[asyncio.Task[None]] = []

    async def wait_for_slot() -> None:
        async with controller.slot(endpoint="ep"):
            pass

    def abandoned_loop() -> None:
        loop = asyncio.new_event_loop()
        abandoned.append(loop.create_task(wait_for_slot()))
        loop.run_until_complete(asyncio.sleep(0.05))
        loop.close()  # the task is neither finished nor cancelled

    first, second = controller.slot(endpoint="ep"), controller.slot(endpoint="ep")
    await first.__aenter__()
    await second.__aenter__()
    thread = threading.Thread(target=abandoned_loop)
    thread.start()
    await anyio.to_thread.run_sync(thread.join)
    assert controller.statistics().waiting == 1
    await first.__aexit__(None, None, None)  # the grant to the dead waiter comes back
    abandoned.clear()
    gc.collect()  # the abandoned caller's exit path runs now
    assert controller.statistics().active == 1
    await second.__aexit__(None, None, None)
    stats = controller.statistics()
    assert (stats.active, stats.waiting) == (0, 0)
