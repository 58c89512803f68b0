"""The funnel transports under the OpenAI SDK: the provider's own counters are the witness."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import openai
import pytest

from asynceval import Runtime, Settings, events, http_client, sync_http_client
from asynceval.interop import base_url, openai_client
from asynceval.llm import track_usage
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog

FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05, "max_concurrent_llm_calls": 5}


def sdk(sim: SimProvider | str, agent: str = "sdk-agent") -> openai.AsyncOpenAI:
    """The documented set-up: the SDK on asynceval's client, its own retries off; `sim` is a
    provider answered in-process, or a loopback server's base URL."""
    if isinstance(sim, str):
        client, url = http_client(agent=agent), sim
    else:
        client, url = (
            http_client(agent=agent, transport=httpx.ASGITransport(app=sim)),
            "http://sim/v1",
        )
    return openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0, http_client=client)


LoopBack = Callable[[SimConfig], tuple[str, SimProvider]]


async def ask_all(client: openai.AsyncOpenAI, n: int, **params: Any) -> list[Any]:
    answers: list[Any] = []

    async def one(index: int) -> None:
        answers.append(
            await client.chat.completions.create(
                model="asynceval-sim",
                messages=[{"role": "user", "content": f"What is {index} + 1?"}],
                **params,
            )
        )

    async with anyio.create_task_group() as tg:
        for index in range(n):
            tg.start_soon(one, index)
    return answers


async def test_twenty_sdk_calls_at_limit_five_reach_the_provider_five_at_a_time(
    event_log: EventLog,
) -> None:
    sim = SimProvider(SimConfig(latency=0.05))
    async with Runtime(Settings(**FAST)):
        with track_usage() as usage:
            answers = await ask_all(sdk(sim), 20)
    assert len(answers) == 20
    assert sim.stats()["max_in_flight"] == 5 and sim.stats()["requests"] == 20
    acquired = event_log.named("acquired")
    assert len(acquired) == 20 and {e["agent"] for e in acquired} == {"sdk-agent"}
    assert len(event_log.named("released")) == 20
    assert usage.llm_calls == 20
    assert usage.prompt_tokens == sum(a.usage.prompt_tokens for a in answers) > 0
    assert usage.completion_tokens == sum(a.usage.completion_tokens for a in answers) > 0


async def test_a_429_storm_ends_with_every_call_done_and_the_retries_in_our_events(
    event_log: EventLog,
) -> None:
    sim = SimProvider(SimConfig(latency=0.01, fault_rates={429: 0.3}, retry_after=0.01))
    async with Runtime(Settings(**FAST, retry_max_attempts=8)):
        answers = await ask_all(sdk(sim), 20)
    assert len(answers) == 20
    stats = sim.stats()
    assert stats["statuses"]["429"] > 0 and stats["max_in_flight"] <= 5
    retries = event_log.named("retry")
    assert retries and all(r["status_code"] == 429 for r in retries)
    # every 429 the provider sent was retried by the funnel, and nothing else was sent
    assert len(retries) == stats["statuses"]["429"]
    assert stats["requests"] == 20 + stats["statuses"]["429"]
    assert not event_log.named("llm_call_failed")


async def test_after_the_last_attempt_the_sdk_gets_the_providers_answer(
    event_log: EventLog,
) -> None:
    """A 400 is not retried and reaches the SDK as its own error; a 503 that never ends is
    retried RETRY_MAX_ATTEMPTS times, then reaches it too."""
    bad = SimProvider(SimConfig(latency=0, fault_rates={400: 1.0}))
    down = SimProvider(SimConfig(latency=0, fault_rates={503: 1.0}, retry_after=0.01))
    async with Runtime(Settings(**FAST, retry_max_attempts=3)):
        question = [{"role": "user", "content": "What is 1 + 1?"}]
        with pytest.raises(openai.BadRequestError):
            await sdk(bad).chat.completions.create(model="m", messages=question)  # type: ignore[arg-type]
        with pytest.raises(openai.InternalServerError) as caught:
            await sdk(down).chat.completions.create(model="m", messages=question)  # type: ignore[arg-type]
    assert caught.value.status_code == 503
    assert bad.stats()["requests"] == 1 and down.stats()["requests"] == 3
    failed = event_log.named("llm_call_failed")
    assert [(f["status_code"], f["attempts"]) for f in failed] == [(400, 1), (503, 3)]


async def test_a_stream_holds_its_slot_until_read_and_counts_its_usage(loopback: LoopBack) -> None:
    url, _ = loopback(SimConfig(latency=0, stream_chunk_delay=0.02))
    async with Runtime(Settings(**FAST)) as runtime:
        client = sdk(url)
        with track_usage() as usage:
            stream = await client.chat.completions.create(
                model="asynceval-sim",
                messages=[{"role": "user", "content": "What is 20 + 22?"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            assert runtime.limiter.statistics().active == 1  # headers in, body not read
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            assert runtime.limiter.statistics().active == 0
    assert text == "42"
    assert usage.llm_calls == 1 and usage.completion_tokens > 0 and usage.prompt_tokens > 0


async def test_a_stream_left_half_way_frees_its_slot_at_once(loopback: LoopBack) -> None:
    """Closed after a break (`async with stream`, or `close()`), or its reading task
    cancelled: the slot is free at that moment, not when the provider finishes."""
    url, sim = loopback(SimConfig(latency=0, stream_chunk_delay=0.05))
    messages: Any = [{"role": "user", "content": "Say something long please."}]
    async with Runtime(Settings(**FAST)) as runtime:
        client = sdk(url)
        stream = await client.chat.completions.create(
            model="asynceval-sim", messages=messages, stream=True
        )
        async with stream:
            async for _ in stream:
                break
        assert runtime.limiter.statistics().active == 0
        stream = await client.chat.completions.create(
            model="asynceval-sim", messages=messages, stream=True
        )
        with anyio.move_on_after(0.03):  # the task reading it is cancelled
            async for _ in stream:
                pass
        assert runtime.limiter.statistics().active == 0
    assert sim.stats()["requests"] == 2


async def test_a_stream_left_by_break_without_close_does_not_block_the_next_call(
    loopback: LoopBack,
) -> None:
    """`async for ...: break` and nothing else (the stream dropped unclosed): at limit 1 the
    same task's next call still goes, since a slot wait first closes the streams nobody reads
    that its own scope holds (with the collector off, so it is not what frees it)."""
    url, sim = loopback(SimConfig(latency=0, stream_chunk_delay=0.05))
    messages: Any = [{"role": "user", "content": "Say something long please."}]
    gc.disable()  # the automatic collector must not be what frees it
    try:
        async with Runtime(Settings(**{**FAST, "max_concurrent_llm_calls": 1})) as runtime:
            client = sdk(url)

            async def first_chunk() -> None:
                stream = await client.chat.completions.create(
                    model="asynceval-sim", messages=messages, stream=True
                )
                async for _ in stream:
                    break

            await first_chunk()
            with anyio.fail_after(5):
                answer = await client.chat.completions.create(
                    model="asynceval-sim", messages=[{"role": "user", "content": "What is 2 + 2?"}]
                )
            assert answer.choices[0].message.content == "4"
            assert runtime.limiter.statistics().active == 0
    finally:
        gc.enable()
    assert sim.stats()["requests"] == 2


async def test_a_stream_that_stalls_before_its_content_fails_as_the_sdks_timeout(
    event_log: EventLog, loopback: LoopBack
) -> None:
    """Every attempt's stream brings its role chunk, then nothing for longer than
    LLM_STREAM_IDLE_TIMEOUT: each attempt is abandoned and sent again, and after the last the
    SDK raises its own timeout error from `create` (no stalled stream ever reaches it)."""
    url, sim = loopback(SimConfig(latency=0, stream_chunk_delay=0.5))
    settings = Settings(**FAST, llm_stream_idle_timeout=0.2, retry_max_attempts=2)
    async with Runtime(settings) as runtime:
        with pytest.raises(openai.APITimeoutError):
            await sdk(url).chat.completions.create(
                model="asynceval-sim",
                messages=[{"role": "user", "content": "What is 1 + 1?"}],
                stream=True,
            )
        assert runtime.limiter.statistics().active == 0
    assert sim.stats()["requests"] == 2
    assert [e["delivered"] for e in event_log.named("stream_stalled")] == [False, False]


def test_sync_clients_in_threads_share_the_process_limit() -> None:
    """Eight threads of the user's own, each with a sync SDK client: the provider sees at most
    the limit, since every thread's calls go through the one controller."""
    sim = SimProvider(SimConfig(latency=0.05))
    runtime = Runtime(Settings(**FAST))
    errors: list[BaseException] = []

    def worker() -> None:
        client = openai.OpenAI(
            base_url="http://sim/v1",
            api_key="k",
            max_retries=0,
            http_client=sync_http_client(
                agent="threaded", runtime=runtime, transport=httpx.ASGITransport(app=sim)
            ),
        )
        try:
            for index in range(3):
                client.chat.completions.create(
                    model="asynceval-sim",
                    messages=[{"role": "user", "content": f"What is {index} + 5?"}],
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert sim.stats()["requests"] == 24 and sim.stats()["max_in_flight"] <= 5
    assert runtime.limiter.statistics().max_active == 5


async def test_openai_client_talks_to_the_embedded_simulator_with_no_server() -> None:
    async with Runtime(Settings(**FAST)) as runtime:
        client = openai_client(agent="default")
        answer = await client.chat.completions.create(
            model="asynceval-sim", messages=[{"role": "user", "content": "What is 6 * 7?"}]
        )
        assert base_url() == "http://asynceval-sim/v1" and client.max_retries == 0
        assert answer.choices[0].message.content == "42"
        assert runtime.sim.stats()["requests"] == 1


async def test_the_limit_holds_even_when_the_sdk_retries_on_top(event_log: EventLog) -> None:
    """An SDK left with its own retries (max_retries=2) over the funnel's: attempts multiply,
    the limit does not."""
    sim = SimProvider(SimConfig(latency=0.02, fault_rates={503: 0.5}, retry_after=0.01))
    async with Runtime(Settings(**FAST, retry_max_attempts=2)):
        client = openai.AsyncOpenAI(
            base_url="http://sim/v1",
            api_key="k",
            max_retries=2,
            http_client=http_client(agent="retrying", transport=httpx.ASGITransport(app=sim)),
        )
        failures: list[BaseException] = []

        async def one(index: int) -> None:
            try:
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": f"What is {index} + 1?"}]
                )
            except openai.APIStatusError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            for index in range(20):
                tg.start_soon(one, index)
    stats = sim.stats()
    assert stats["max_in_flight"] <= 5 and event_log.max_in_flight() <= 5
    assert stats["requests"] == len(event_log.named("acquired")) > 20  # retried, all counted


def test_a_sync_stream_left_by_break_without_close_does_not_block_the_next_call(
    loopback: LoopBack,
) -> None:
    url, sim = loopback(SimConfig(latency=0, stream_chunk_delay=0.05))
    runtime = Runtime(Settings(**{**FAST, "max_concurrent_llm_calls": 1, "llm_call_timeout": 5}))
    client = openai.OpenAI(
        base_url=url, api_key="k", max_retries=0, http_client=sync_http_client(runtime=runtime)
    )

    def first_chunk() -> None:
        stream = client.chat.completions.create(
            model="asynceval-sim",
            messages=[{"role": "user", "content": "Say something long please."}],
            stream=True,
        )
        for _ in stream:
            break

    def both() -> Any:
        first_chunk()
        return client.chat.completions.create(
            model="asynceval-sim", messages=[{"role": "user", "content": "What is 2 + 2?"}]
        )

    answers: list[Any] = []
    gc.disable()
    try:  # in a daemon thread, so that a regression fails here instead of hanging the suite
        thread = threading.Thread(target=lambda: answers.append(both()), daemon=True)
        thread.start()
        thread.join(10)
    finally:
        gc.enable()
    assert answers, "the second call did not get a slot within 10 s"
    assert answers[0].choices[0].message.content == "4"
    assert sim.stats()["requests"] == 2 and runtime.limiter.statistics().active == 0


def test_a_runtime_dropped_unclosed_closes_its_pools(loopback: LoopBack) -> None:
    """A sync client on a runtime the program drops without closing: when the collector frees
    the runtime its connection pools close on their loop, instead of being collected open (one
    `Unclosed client session` warning per pool)."""
    url, _ = loopback(SimConfig(latency=0))
    script = f"""
import gc, time, openai
from asynceval import Runtime, Settings, sync_http_client
def ask():
    client = openai.OpenAI(base_url={url!r}, api_key="k", max_retries=0,
                           http_client=sync_http_client(runtime=Runtime(Settings())))
    msg = [{{"role": "user", "content": "What is 2 + 2?"}}]
    print(client.chat.completions.create(model="asynceval-sim", messages=msg)
          .choices[0].message.content)
ask()
gc.collect()
time.sleep(0.3)
"""
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "4"
    assert "Unclosed" not in done.stderr, done.stderr


async def test_a_task_does_not_pay_a_collection_for_another_tasks_open_stream(
    loopback: LoopBack,
) -> None:
    """Only the task that holds an unread stream collects before its slot wait: task B, waiting
    at limit 1 behind task A's open stream, runs no garbage collection (though both inherit the
    context of a parent task that streamed too)."""
    url, _ = loopback(SimConfig(latency=0, stream_chunk_delay=0.05))
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.disable()
    gc.callbacks.append(count)
    try:
        async with Runtime(Settings(**{**FAST, "max_concurrent_llm_calls": 1})):
            client = sdk(url)
            opened, answered = anyio.Event(), []
            # a stream in the parent task first: the tasks below inherit its context
            warm_up = await client.chat.completions.create(
                model="asynceval-sim",
                messages=[{"role": "user", "content": "What is 1 + 1?"}],
                stream=True,
            )
            async with warm_up:
                async for _ in warm_up:
                    pass

            async def task_a() -> None:
                stream = await client.chat.completions.create(
                    model="asynceval-sim",
                    messages=[{"role": "user", "content": "Say something long please."}],
                    stream=True,
                )
                async with stream:
                    async for _ in stream:
                        break
                    opened.set()
                    await anyio.sleep(0.2)  # B waits meanwhile, for the slot this holds

            async def task_b() -> None:
                await opened.wait()
                answer = await client.chat.completions.create(
                    model="asynceval-sim", messages=[{"role": "user", "content": "What is 2 + 2?"}]
                )
                answered.append(answer.choices[0].message.content)

            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(task_a)
                    tg.start_soon(task_b)
    finally:
        gc.callbacks.remove(count)
        gc.enable()
    assert answered == ["4"] and collections == []


async def test_streams_being_served_count_as_out_at_the_provider(
    event_log: EventLog, loopback: LoopBack
) -> None:
    """A provider serving 2 at once, our limit 4: two streams are being read when a third call
    gets a 429. That is the provider's capacity, taken by those streams (the endpoint's limit
    drops to 2), not a rate refusal that would pause the endpoint for everyone."""
    url, sim = loopback(
        SimConfig(latency=0, stream_chunk_delay=0.05, max_concurrency=2, retry_after=0.05)
    )
    messages: Any = [{"role": "user", "content": "Say something long please."}]
    async with Runtime(Settings(**{**FAST, "max_concurrent_llm_calls": 4})):
        client = sdk(url)
        reading = anyio.Semaphore(0)

        async def stream_one() -> None:
            stream = await client.chat.completions.create(
                model="asynceval-sim", messages=messages, stream=True
            )
            async with stream:
                async for _ in stream:
                    reading.release()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(stream_one)
                tg.start_soon(stream_one)
                for _ in range(2):
                    await reading.acquire()  # both streams have their headers and a chunk
                answer = await client.chat.completions.create(
                    model="asynceval-sim", messages=[{"role": "user", "content": "What is 2 + 2?"}]
                )
    assert answer.choices[0].message.content == "4"
    assert sim.stats()["statuses"].get("429", 0) > 0
    changes = event_log.named("limit_changed")
    assert changes and changes[0]["reason"] == "429" and changes[0]["limit"] == 2, changes


async def test_a_model_and_an_sdk_client_on_one_provider_meet_the_same_pause(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """A provider's 429 pause belongs to its endpoint (the API's base URL), whoever calls it: a
    rate refusal met by one of our models holds back an SDK client's request to the same API
    (another path, another client) until the Retry-After has passed."""
    from asynceval import OpenAIChatModel

    url, sim = loopback(SimConfig(latency=0, fail_first=1, fail_first_status=429, retry_after=1.0))
    retried = anyio.Event()

    def on_event(event: str, fields: Any) -> None:
        if event == "retry":
            retried.set()

    events.add_observer(on_event)
    try:
        async with Runtime(Settings(**FAST | {"retry_max_delay": 2.0})) as runtime:
            model = OpenAIChatModel("sim", base_url=url)
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: model.generate("What is 1 + 1?", agent="model"))
                with anyio.fail_after(5):
                    await retried.wait()  # the model met the 429
                assert runtime.limiter.cooldown_remaining(url) > 0.5  # the endpoint: .../v1
                async with http_client(agent="sdk") as client:
                    listed = await client.get(f"{url}/models")
            await model.aclose()
    finally:
        events.remove_observer(on_event)
    assert listed.status_code == 200
    (waited,) = [e["wait_s"] for e in event_log.named("acquired") if e["agent"] == "sdk"]
    assert waited > 0.5  # it waited out the model's pause before it was sent
    assert sim.stats()["requests"] == 2  # completions: the model's 429 and its retry
