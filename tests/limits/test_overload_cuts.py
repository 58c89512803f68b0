"""An overload cuts an endpoint's limit at most once per round trip, to what the provider serves,
and a cap that refuses its probes again is probed ever more rarely, Retry-After or not: the
simulated provider serving 3 at once (100 ms a call, `Retry-After: 0`) against a limit of 10.
Before: 7 cuts within 31 ms (10 -> 9 -> ... -> 3), then the limit oscillated 3 <-> 4 with a 429
at each probe (50 429s in 170 requests). Counted by the provider and the `limit_changed` events."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime

import anyio

from asynceval import OpenAIChatModel, Runtime, Settings
from asynceval.limits._adaptive import AdaptiveLimits, Change
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog

LATENCY = 0.1


def _at(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["timestamp"])).timestamp()


async def test_an_overload_cuts_once_per_round_trip_and_probes_ever_more_rarely(
    loopback: Callable[[SimConfig], tuple[str, SimProvider]], event_log: EventLog
) -> None:
    base_url, sim = loopback(SimConfig(latency=LATENCY, max_concurrency=3, retry_after=0.0))
    settings = Settings(max_concurrent_llm_calls=10, retry_initial_delay=0.01)
    calls = 90
    async with Runtime(settings), OpenAIChatModel("m", base_url=base_url, api_key="k") as model:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for index in range(calls):
                    tg.start_soon(model.generate, f"question {index}")
    statuses = sim.stats()["statuses"]
    assert statuses["200"] == calls
    cuts = [e for e in event_log.named("limit_changed") if e["reason"] == "429"]
    assert cuts[0]["previous"] == 10 and cuts[0]["limit"] == 3, cuts[0]
    times = [_at(e) for e in cuts]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert all(gap >= LATENCY * 0.9 for gap in gaps), gaps  # one cut per round trip at most
    # 7 refused in the first burst, then a few probes, each rarer than the one before.
    assert statuses.get("429", 0) <= 7 + 5, statuses


def test_the_first_429_of_a_burst_cuts_to_the_calls_sent_before_it() -> None:
    """Sends 1..10 went out together; the provider serves 3: the 429 of send 4 comes with 9
    others out, 6 of them sent after it (refused too, their 429s not in yet): the cut is to 3."""
    limits = AdaptiveLimits(10)
    assert limits.overload("e", 9, 0.0, 0.0, sent=4, sends=10) == Change(10, 3)
    for sent in range(5, 11):  # the rest of that burst's 429s: the same round
        assert limits.overload("e", 9 - (sent - 4), 0.0, 0.0, sent=sent, sends=10) is None
    assert limits.limit("e") == 3


def test_a_probe_refused_again_halves_the_growth_without_a_retry_after() -> None:
    limits = AdaptiveLimits(10)
    limits.overload("e", 3, 0.0, 0.0, sent=11, sends=11)  # cut to 3, no Retry-After
    successes = []
    for _ in range(4):
        count = 0
        while limits.limit("e") == 3:
            limits.success("e", now=0.0)
            count += 1
        successes.append(count)
        assert limits.overload(
            "e", 3, 0.0, 0.0, sent=100 + len(successes), sends=100 + len(successes)
        ) == Change(4, 3)
    # 1/3 a success at first (3 or 4 of them, float sums), then half that after each refusal
    assert successes[0] <= 4
    assert all(b >= 1.7 * a for a, b in itertools.pairwise(successes)), successes
