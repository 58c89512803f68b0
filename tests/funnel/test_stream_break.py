"""A stream left by `break` while a variable still refers to it: the garbage collector cannot
free it, so a slot wait of its own scope closes it (`stream_abandoned`) rather than wait for the
slot it holds. A stream being read is never closed. The OpenAI SDK on asynceval.interop against
the simulated provider on a real socket (an in-process transport buffers whole answers)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest

from asynceval import Benchmark, Runtime, Settings, SyncAgent, Task
from asynceval.funnel import reclaiming_leases
from asynceval.interop import openai_client
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog

LoopBack = Callable[[SimConfig], tuple[str, SimProvider]]
FAST: dict[str, Any] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
LONG: Any = [{"role": "user", "content": "Say something long please."}]
SHORT: Any = [{"role": "user", "content": "What is 2 + 2?"}]


async def drain(stream: Any) -> None:
    async for _ in stream:
        pass


async def test_a_stream_left_by_break_and_still_referenced_does_not_block_the_next_call(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """At limit 1: `stream = await create(stream=True)`, `async for chunk in stream: break`,
    then another call while `stream` is still referenced. The call is answered at once (the
    stream is closed, with a `stream_abandoned` warning); reading the stream on fails, saying
    why."""
    url, sim = loopback(SimConfig(latency=0, stream_chunk_delay=0.05))
    async with Runtime(Settings(**FAST, max_concurrent_llm_calls=1)) as runtime:
        client = openai_client(base_url=url, agent="breaker")
        stream = await client.chat.completions.create(model="m", messages=LONG, stream=True)
        async for _ in stream:
            break
        started = time.monotonic()
        with anyio.fail_after(5):
            answer = await client.chat.completions.create(model="m", messages=SHORT)
        waited = time.monotonic() - started
        assert runtime.limiter.statistics().active == 0
        with pytest.raises(openai.APIConnectionError) as caught:
            await drain(stream)
    assert isinstance(caught.value.__cause__, httpx.ReadError)
    assert "stream_abandoned" in str(caught.value.__cause__)
    assert answer.choices[0].message.content == "4" and waited < 1.0, waited
    (abandoned,) = event_log.named("stream_abandoned")
    first = event_log.named("acquired")[0]
    assert abandoned["call_id"] == first["call_id"] and abandoned["level"] == "WARNING"
    assert abandoned["agent"] == "breaker" and sim.stats()["requests"] == 2
    assert len(event_log.named("released")) == 2


async def test_a_call_in_a_child_task_gets_the_slot_of_a_stream_its_parent_left(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """At limit 1 the task that left a stream by `break` makes its next call in a task of its
    own (`asyncio.wait_for` on Python 3.11, a task group): that call gets the stream's slot at
    once too. A sibling's call would not (covered above: it waits for the reader)."""
    url, _ = loopback(SimConfig(latency=0, stream_chunk_delay=0.05))
    async with Runtime(Settings(**FAST, max_concurrent_llm_calls=1)):
        client = openai_client(base_url=url)
        stream = await client.chat.completions.create(model="m", messages=LONG, stream=True)
        async for _ in stream:
            break
        answers: list[str] = []

        async def ask() -> None:
            answer = await client.chat.completions.create(model="m", messages=SHORT)
            answers.append(answer.choices[0].message.content or "")

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                tg.start_soon(ask)
        await stream.close()
    assert answers == ["4", "4"]
    assert len(event_log.named("stream_abandoned")) == 1


async def test_only_the_stream_nobody_reads_is_closed(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """One scope (a repetition's), limit 2: task A reads a slow stream to its end while task B
    leaves its own by `break`, keeps it, and calls again. B is answered at once, from the slot
    of its own stream; A's stream, being read, is left alone and read whole."""
    url, _ = loopback(SimConfig(latency=0, stream_chunk_delay=0.2))
    async with Runtime(Settings(**FAST, max_concurrent_llm_calls=2)):
        client = openai_client(base_url=url)
        texts: list[str] = []
        kept: list[Any] = []
        b_waited: list[float] = []

        async def reader() -> None:
            stream = await client.chat.completions.create(model="m", messages=LONG, stream=True)
            pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
            texts.append("".join(pieces))

        async def breaker() -> None:
            stream = await client.chat.completions.create(model="m", messages=LONG, stream=True)
            kept.append(stream)
            async for _ in stream:
                break
            started = time.monotonic()
            answer = await client.chat.completions.create(model="m", messages=SHORT)
            b_waited.append(time.monotonic() - started)
            texts.append(answer.choices[0].message.content or "")

        with reclaiming_leases(), anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                tg.start_soon(breaker)
    assert texts[0] == "4" and len(texts[1]) > 20, texts  # B first, then A's whole answer
    assert b_waited[0] < 0.5, b_waited  # A's stream still had about a second to go
    assert len(event_log.named("stream_abandoned")) == 1


def test_a_sync_stream_left_by_break_and_still_referenced_does_not_block_the_next_call(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """The same through `openai_client(sync=True)` from a thread of the program's own."""
    url, sim = loopback(SimConfig(latency=0, stream_chunk_delay=0.05))
    runtime = Runtime(Settings(**FAST, max_concurrent_llm_calls=1))
    client = openai_client(sync=True, base_url=url, runtime=runtime)
    answers: list[str] = []

    def both() -> None:
        stream = client.chat.completions.create(model="m", messages=LONG, stream=True)
        for _ in stream:
            break
        answer = client.chat.completions.create(model="m", messages=SHORT)
        answers.append(answer.choices[0].message.content or "")
        stream.close()  # still referenced until here

    thread = threading.Thread(target=both, daemon=True)  # a regression fails, not hangs
    thread.start()
    thread.join(5)
    assert answers == ["4"], "the second call did not get a slot within 5 s"
    assert sim.stats()["requests"] == 2 and runtime.limiter.statistics().active == 0
    assert len(event_log.named("stream_abandoned")) == 1


class BreakThenAsk(Benchmark):
    """Each agent reads one chunk of a streamed answer, keeps the stream (no collector can
    free it), then makes another call: with the async SDK, or the sync one in the engine's
    threads (`SyncAgent`)."""

    def __init__(self, sync: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sync = sync
        self.kept: list[Any] = []

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        if self.sync:
            agent = SyncAgent(_SyncBreaker(openai_client(sync=True), self.kept), name="breaker")
            return [agent], {"breaker": agent}
        client: openai.AsyncOpenAI = openai_client(agent="breaker")

        async def solver(query: str) -> str:
            messages: Any = [{"role": "user", "content": query}]
            stream = await client.chat.completions.create(
                model="asynceval-sim", messages=messages, stream=True
            )
            self.kept.append(stream)
            async for _ in stream:
                break
            answer = await client.chat.completions.create(model="asynceval-sim", messages=messages)
            return answer.choices[0].message.content or ""

        return [solver], {}


class _SyncBreaker:
    def __init__(self, client: openai.OpenAI, kept: list[Any]) -> None:
        self.client, self.kept = client, kept

    def run(self, query: str) -> str:
        messages: Any = [{"role": "user", "content": query}]
        stream = self.client.chat.completions.create(
            model="asynceval-sim", messages=messages, stream=True
        )
        self.kept.append(stream)
        for _ in stream:
            break
        answer = self.client.chat.completions.create(model="asynceval-sim", messages=messages)
        return answer.choices[0].message.content or ""


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync-agent"])
async def test_forty_repetitions_that_break_and_ask_again_all_finish(
    tmp_path: Path, event_log: EventLog, sync: bool
) -> None:
    """The issue's run: 40 such tasks with default settings (limit 5) finish (before: none
    finished in 60 s), never more than the limit in flight."""
    bench = BreakThenAsk(sync)
    tasks = [Task(query=f"What is {i} + 3?", id=f"t{i}") for i in range(40)]
    with anyio.fail_after(20):
        reports = await bench.run(tasks, results_path=tmp_path / "results.jsonl")
    assert [r["status"] for r in reports] == ["success"] * 40
    assert {r["usage"]["llm_calls"] for r in reports} == {2}
    assert len(bench.kept) == 40 and event_log.max_in_flight() <= 5
    assert len(event_log.named("released")) == 80
    assert 0 < len(event_log.named("stream_abandoned")) <= 40
