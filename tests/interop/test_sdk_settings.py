"""The SDK's own settings through the funnel: its timeout is a timeout at that time, and its own
retries stacked on ours are warned about once per run and counted. The provider's counters are
the witness."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest

from asynceval import Benchmark, Runtime, Settings, Task, http_client
from asynceval.analysis import check_events
from asynceval.interop import openai_client
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog

LoopBack = Callable[[SimConfig], tuple[str, SimProvider]]
FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05, "max_concurrent_llm_calls": 1}
ASK: dict[str, Any] = {"model": "asynceval-sim", "messages": [{"role": "user", "content": "hi"}]}


async def test_an_sdk_timeout_of_one_second_against_a_5_s_provider_is_a_timeout_after_1_s(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """`AsyncOpenAI(timeout=1.0)` on the funnel's client: APITimeoutError after about 1 s, one
    request sent, a `timeout` event, the slot released (not our retried connection error)."""
    url, sim = loopback(SimConfig(latency=5.0))
    async with Runtime(Settings(**FAST)) as runtime:
        client = openai.AsyncOpenAI(
            base_url=url, api_key="k", timeout=1.0, max_retries=0, http_client=http_client()
        )
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(**ASK)
        elapsed = time.monotonic() - started
        assert runtime.limiter.statistics().active == 0  # the slot is free again
    assert 0.95 <= elapsed < 1.5, elapsed
    assert sim.stats()["requests"] == 1
    assert [e["timeout_s"] for e in event_log.named("timeout")] == [1.0]
    assert not event_log.named("retry")
    assert len(event_log.named("acquired")) == len(event_log.named("released")) == 1


async def test_a_request_timeout_bounds_the_request_not_its_wait_for_a_slot(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """A per-request `timeout=1.0` (openai_client(): the SDK's own default is 600 s) ends the
    request 1 s after it was sent; the 0.8 s it waited for the one slot does not count."""
    slow_url, slow = loopback(SimConfig(latency=5.0))
    quick_url, quick = loopback(SimConfig(latency=0.8))
    ended: dict[str, float] = {}
    async with Runtime(Settings(**FAST, llm_call_timeout=3.0)):
        started = time.monotonic()

        async def holder() -> None:
            await openai_client(base_url=quick_url).chat.completions.create(**ASK)
            ended["holder"] = time.monotonic() - started

        async def timed() -> None:
            await anyio.sleep(0.05)  # the holder takes the slot first
            with pytest.raises(openai.APITimeoutError):
                await openai_client(base_url=slow_url).chat.completions.create(**ASK, timeout=1.0)
            ended["timed"] = time.monotonic() - started

        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            tg.start_soon(timed)
    assert 0.75 <= ended["holder"] < 1.2, ended
    assert ended["holder"] + 0.95 <= ended["timed"] < ended["holder"] + 1.5, ended
    assert quick.stats()["requests"] == slow.stats()["requests"] == 1
    assert [e["timeout_s"] for e in event_log.named("timeout")] == [1.0]


def test_a_sync_sdk_clients_timeout_from_a_thread_of_the_users_is_a_timeout_too(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """The sync client (`openai_client(sync=True)`: the funnel on the process's background
    loop) with `timeout=1.0` against a 5 s provider: APITimeoutError after about 1 s."""
    url, sim = loopback(SimConfig(latency=5.0))
    quick_url, _ = loopback(SimConfig(latency=0.01))
    openai_client(sync=True, base_url=quick_url).chat.completions.create(**ASK)  # loop started
    client = openai_client(sync=True, base_url=url, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(**ASK)
    elapsed = time.monotonic() - started
    assert 0.95 <= elapsed < 1.5, elapsed
    assert sim.stats()["requests"] == 1
    assert [e["timeout_s"] for e in event_log.named("timeout")] == [1.0]


class StackedBench(Benchmark):
    """Each task's agent makes one call with the SDK's default retries (2) on the funnel's client
    against a provider that answers 503 to everything."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client = openai.AsyncOpenAI(
            base_url=self.url, api_key="k", max_retries=2, http_client=http_client()
        )

        async def solver(query: str) -> str:
            try:
                await client.chat.completions.create(**ASK)
            except openai.InternalServerError:
                return "failed"
            return "answered"

        return [solver], {}


def run_events(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


async def test_sdk_retries_stacked_on_ours_warn_once_per_run_and_are_counted(
    loopback: LoopBack, tmp_path: Path
) -> None:
    """max_retries=2 on the funnel's client against a provider answering 503: every SDK retry
    goes through our whole retry loop (3 x 3 requests a call); the run warns once, and the
    requests the SDK retried are counted (in the events, and by `logs check`)."""
    url, sim = loopback(SimConfig(latency=0.01, fault_rates={503: 1.0}, retry_after=0.01))
    bench = StackedBench(url, settings=Settings(**FAST), max_concurrent_tasks=2)
    tasks = [Task(query=f"q{i}", id=f"t{i}") for i in range(2)]
    await bench.run(tasks, results_path=tmp_path / "results.jsonl")
    assert sim.stats()["requests"] == 2 * 3 * 3  # tasks x SDK attempts x our attempts
    events = run_events(tmp_path)
    warnings = [e for e in events if e["event"] == "sdk_retries_stacked"]
    assert len(warnings) == 1, warnings
    assert warnings[0]["level"] == "WARNING" and warnings[0]["sdk"] == "AsyncOpenAI"
    assert warnings[0]["requests"] == 1
    check = check_events(events)
    assert check.sdk_retry_calls == 2 * 2  # each task's two SDK retries, each a whole call
    assert check.calls == 2 * 3


async def test_a_second_run_warns_again(loopback: LoopBack, tmp_path: Path) -> None:
    """Once per run, not once per process: a second run of the same benchmark warns again."""
    url, _ = loopback(SimConfig(latency=0.01, fault_rates={503: 1.0}, retry_after=0.01))
    bench = StackedBench(url, settings=Settings(**FAST, retry_max_attempts=1))
    for name in ("first", "second"):
        folder = tmp_path / name
        await bench.run([Task(query="q", id="t")], results_path=folder / "results.jsonl")
        stacked = [e for e in run_events(folder) if e["event"] == "sdk_retries_stacked"]
        assert len(stacked) == 1, (name, stacked)
