"""Adaptive per-endpoint limits: down to what an overloaded provider serves, back up with
successes, never above the global limit; turned-away callers keep their place."""

from __future__ import annotations

import anyio
import anyio.abc
from anyio import wait_all_tasks_blocked

from asynceval.limits import ConcurrencyController
from asynceval.limits._adaptive import AdaptiveLimits, Change

from ..conftest import EventLog


async def hold(
    controller: ConcurrencyController,
    endpoint: str,
    release: anyio.Event,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    async with controller.slot(endpoint=endpoint):
        controller.sending(endpoint, +1)  # its request is out at the provider
        task_status.started()
        await release.wait()
        controller.sending(endpoint, -1)


async def test_an_overload_429_lowers_the_endpoint_limit_to_the_calls_in_flight(
    event_log: EventLog,
) -> None:
    controller = ConcurrencyController(10)
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        for _ in range(8):
            await tg.start(hold, controller, "https://a/v1", release)
        async with controller.slot(endpoint="https://a/v1"):
            controller.sending("https://a/v1", +1)
            assert controller.overloaded("https://a/v1") is True  # 8 others in flight
        assert controller.endpoint_limit("https://a/v1") == 8
        assert controller.endpoint_limit("https://b/v1") == 10  # other endpoints untouched
        got: list[str] = []

        async def take(endpoint: str) -> None:
            async with controller.slot(endpoint=endpoint):
                got.append(endpoint)

        tg.start_soon(take, "https://a/v1")
        await wait_all_tasks_blocked()
        assert got == []  # a's 8 slots are in use, although 2 of the 10 are free
        tg.start_soon(take, "https://b/v1")
        await wait_all_tasks_blocked()
        assert got == ["https://b/v1"]  # b does not wait behind a's queued caller
        release.set()
    assert got == ["https://b/v1", "https://a/v1"]
    (changed,) = event_log.named("limit_changed")
    assert changed["endpoint"] == "https://a/v1"
    assert (changed["limit"], changed["previous"], changed["cap"]) == (8, 10, 10)
    assert changed["reason"] == "429" and changed["in_flight"] == 9
    assert controller.statistics().endpoint_limits == {"https://a/v1": 8}


async def test_a_lone_429_is_not_overload() -> None:
    controller = ConcurrencyController(10)
    async with controller.slot(endpoint="e"):
        controller.sending("e", +1)
        assert controller.overloaded("e") is False  # nothing else was being served
    assert controller.endpoint_limit("e") == 10


async def test_successes_grow_the_limit_back_one_slot_per_round_never_above_the_cap(
    event_log: EventLog,
) -> None:
    controller = ConcurrencyController(4)
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        await tg.start(hold, controller, "e", release)
        async with controller.slot(endpoint="e"):
            controller.sending("e", +1)
            assert controller.overloaded("e")
        release.set()
    assert controller.endpoint_limit("e") == 1
    seen = []
    for _ in range(12):
        controller.succeeded("e")
        seen.append(controller.endpoint_limit("e"))
    # +1/limit per success: 1, 2, 2.5, 2.9, 3.24, 3.55, 3.84, then the cap
    assert seen == [2, 2, 2, 3, 3, 3, 4, 4, 4, 4, 4, 4]
    ups = [(e["previous"], e["limit"]) for e in event_log.named("limit_changed")[1:]]
    assert ups == [(1, 2), (2, 3), (3, 4)]
    assert all(e["reason"] == "success" for e in event_log.named("limit_changed")[1:])
    assert controller.statistics().endpoint_limits == {}


async def test_holders_still_waiting_for_their_rate_turn_are_not_served_by_the_provider() -> None:
    """Slot holders whose requests have not left (waiting for a rate window) do not make a
    429 look like overload: the provider served nobody else."""
    controller = ConcurrencyController(10)
    release = anyio.Event()

    async def waiting_for_rate(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with controller.slot(endpoint="e"):
            task_status.started()
            await release.wait()

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            await tg.start(waiting_for_rate)
        async with controller.slot(endpoint="e"):
            controller.sending("e", +1)
            assert controller.overloaded("e") is False
            controller.sending("e", -1)
        release.set()
    assert controller.endpoint_limit("e") == 10


async def test_growing_the_limit_grants_a_waiting_caller() -> None:
    controller = ConcurrencyController(4)
    release = anyio.Event()
    got: list[int] = []

    async def take() -> None:
        async with controller.slot(endpoint="e"):
            got.append(1)
            await release.wait()

    async with anyio.create_task_group() as tg:
        await tg.start(hold, controller, "e", release)
        async with controller.slot(endpoint="e"):
            controller.sending("e", +1)
            assert controller.overloaded("e")
        tg.start_soon(take)  # the limit is 1 and 1 is held: it waits
        await wait_all_tasks_blocked()
        assert got == []
        controller.succeeded("e")  # limit 2: room for it now
        await wait_all_tasks_blocked()
        assert got == [1]
        release.set()


async def test_a_caller_coming_back_goes_before_later_arrivals() -> None:
    controller = ConcurrencyController(1)
    order: list[str] = []
    release = anyio.Event()

    async def take(name: str, front: bool) -> None:
        async with controller.slot(front=front):
            order.append(name)

    async with anyio.create_task_group() as tg:
        await tg.start(hold, controller, "e", release)
        tg.start_soon(take, "early", False)
        await wait_all_tasks_blocked()
        tg.start_soon(take, "back", True)
        await wait_all_tasks_blocked()
        release.set()
    assert order == ["back", "early"]


def test_a_cap_that_refuses_probes_again_is_probed_ever_more_rarely() -> None:
    """The hold after an overload is the Retry-After, doubled each time a probe above the cap
    already learnt is refused again, and back to normal once the limit climbs past it."""
    limits = AdaptiveLimits(40)
    assert limits.overload("e", others=30, hold=1.0, now=0.0) == Change(40, 30)
    assert limits.success("e", now=0.5) is None  # held: the provider said 1 s
    now = 1.0
    while limits.limit("e") == 30:
        limits.success("e", now=now)
    assert limits.limit("e") == 31  # probing above the cap again
    holds = []
    for _ in range(7):
        assert limits.overload("e", others=30, hold=1.0, now=now) == Change(31, 30)
        until = limits.reduced["e"].until
        holds.append(until - now)
        now = until
        while limits.limit("e") == 30:
            limits.success("e", now=now)
    assert holds == [2.0, 4.0, 8.0, 16.0, 32.0, 32.0, 32.0]
    while limits.limit("e") < 33:  # the provider grew: no 429 at 31 nor 32, on to 33
        limits.success("e", now=now)
    assert limits.overload("e", others=32, hold=1.0, now=now) == Change(33, 32)
    assert limits.reduced["e"].until - now == 1.0  # the streak started over


def test_an_overload_cuts_once_per_round_trip_and_again_in_the_next() -> None:
    """429s of requests sent before the last cut are the same round: no second cut; a request
    sent after the cut that is refused is news, and cuts again."""
    limits = AdaptiveLimits(20)
    # Sends 1..20 went out; the 429 of send 6 (5 others served, sent before it, and the 14
    # sent after it still out) cuts at send 20, to the 5.
    assert limits.overload("e", 5 + 14, 0.0, 0.0, sent=6, sends=20) == Change(20, 5)
    for sent in (7, 12, 20):  # more 429s of that round, fewer others still out each time
        assert limits.overload("e", 18 - sent // 2, 0.0, 0.0, sent=sent, sends=20) is None
    assert limits.limit("e") == 5
    # A request sent after the cut (send 25) is refused with 4 others out, 2 of them sent
    # after it: a new round, down to the 2 sent before.
    assert limits.overload("e", 4, 0.0, 0.0, sent=25, sends=27) == Change(5, 2)
