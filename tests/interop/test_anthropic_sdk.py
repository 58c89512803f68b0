"""The official Anthropic SDK (2.x, on httpx2) through the funnel: `anthropic_client()` and an
httpx2 client on `Httpx2FunnelTransport`. The provider's own counters are the witness: the
global limit holds across the SDK's calls, the funnel retries what the provider refuses, the
SDK's timeout is a timeout, and an error answer is the SDK's own error."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from asynceval import Runtime, Settings
from asynceval.interop import anthropic_client
from asynceval.llm import track_usage
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog

anthropic = pytest.importorskip("anthropic")
httpx2 = pytest.importorskip("httpx2")

LoopBack = Callable[[SimConfig], tuple[str, SimProvider]]
FAST = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}
ASK: dict[str, Any] = {
    "model": "claude-sim",
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "What is 2 + 2?"}],
}


async def test_the_sdks_calls_meet_the_global_limit(loopback: LoopBack) -> None:
    """20 concurrent `messages.create` under MAX_CONCURRENT_LLM_CALLS=3: the provider never
    had more than 3 in flight, every call answered, each counted in the usage."""
    url, sim = loopback(SimConfig(latency=0.05))
    async with Runtime(Settings(**FAST, max_concurrent_llm_calls=3)):
        client = anthropic_client(base_url=url.removesuffix("/v1"), api_key="k")
        texts: list[str] = []
        with track_usage() as usage:
            async with anyio.create_task_group() as tg:
                for _ in range(20):

                    async def ask() -> None:
                        message = await client.messages.create(**ASK)
                        texts.append(message.content[0].text)

                    tg.start_soon(ask)
    stats = sim.stats()
    assert stats["requests"] == 20 and stats["max_in_flight"] == 3, stats
    assert len(texts) == 20 and all(texts)
    assert usage.llm_calls == 20 and usage.prompt_tokens > 0


async def test_the_funnel_retries_what_the_sdk_would_not(
    loopback: LoopBack, event_log: EventLog
) -> None:
    """The provider refuses the first two requests (503): `max_retries=0` on the SDK, the funnel
    sends again and the SDK gets the answer; `retry` events say so."""
    url, sim = loopback(SimConfig(fail_first=2, fail_first_status=503))
    async with Runtime(Settings(**FAST)):
        client = anthropic_client(base_url=url.removesuffix("/v1"), api_key="k")
        message = await client.messages.create(**ASK)
    assert message.content[0].text
    assert sim.stats()["requests"] == 3
    assert [e["status_code"] for e in event_log.named("retry")] == [503, 503]


async def test_an_error_answer_is_the_sdks_own_error(loopback: LoopBack) -> None:
    url, sim = loopback(SimConfig())
    async with Runtime(Settings(**FAST)):
        client = anthropic_client(base_url=url.removesuffix("/v1"), api_key="k")
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.create(**{**ASK, "stream": True})  # the simulator refuses
    assert sim.stats()["requests"] == 1  # a 400 is not sent again


async def test_the_sdks_timeout_is_a_timeout(loopback: LoopBack, event_log: EventLog) -> None:
    """`timeout=1.0` against a provider taking 5 s: the SDK's APITimeoutError after about 1 s
    (httpx's ReadTimeout as httpx2's), one request, the slot released."""
    url, sim = loopback(SimConfig(latency=5.0))
    async with Runtime(Settings(**FAST, max_concurrent_llm_calls=1)) as runtime:
        client = anthropic_client(base_url=url.removesuffix("/v1"), api_key="k", timeout=1.0)
        started = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            await client.messages.create(**ASK)
        elapsed = time.monotonic() - started
        assert runtime.limiter.statistics().active == 0
    assert 0.9 <= elapsed < 2.0, elapsed
    assert sim.stats()["requests"] == 1
    assert [e["timeout_s"] for e in event_log.named("timeout")] == [1.0]


async def test_the_sync_client_from_threads_shares_the_limit(loopback: LoopBack) -> None:
    """`anthropic_client(sync=True)` from 8 threads at once under a limit of 2."""
    url, sim = loopback(SimConfig(latency=0.05))
    async with Runtime(Settings(**FAST, max_concurrent_llm_calls=2)):
        client = anthropic_client(sync=True, base_url=url.removesuffix("/v1"), api_key="k")

        def ask() -> str:
            text: str = client.messages.create(**ASK).content[0].text
            return text

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(anyio.to_thread.run_sync, ask)
    stats = sim.stats()
    assert stats["requests"] == 8 and stats["max_in_flight"] == 2, stats


def test_the_default_client_goes_to_the_embedded_simulator() -> None:
    """With no LLM_BASE_URL, the SDK's calls are answered in process (nothing listens there)."""

    async def main() -> str:
        async with Runtime(Settings()):
            client = anthropic_client()
            assert isinstance(client._client, httpx2.AsyncClient)
            message = await client.messages.create(**ASK)
            text: str = message.content[0].text
            return text

    assert anyio.run(main)


async def test_a_client_on_the_funnel_is_not_a_bypass_one_around_it_is() -> None:
    """The run-end check names the Anthropic client that sends on its own httpx2 client, not
    the one on the funnel's."""
    from asynceval.interop import check_clients

    async with Runtime(Settings(**FAST)):
        ours = anthropic_client(api_key="k")
        theirs = anthropic.AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:9")
        named = check_clients()
    assert len(named) == 1 and "AsyncAnthropic" in named[0], named
    assert ours is not theirs  # both alive through the check


async def test_the_sdks_calls_in_the_batch_lane_go_in_one_message_batch(
    event_log: EventLog,
) -> None:
    """LLM_LANE=batch: five `messages.create` at once become one Anthropic Message Batch, each
    call getting the answer the live endpoint gives."""

    async def ask_five(lane: str) -> list[str]:
        settings = Settings(**FAST, llm_lane=lane, llm_batch_linger=0.2, llm_batch_poll=0.05)
        answers: dict[int, str] = {}
        async with Runtime(settings):
            client = anthropic_client(api_key="k")
            async with anyio.create_task_group() as tg:
                for i in range(5):

                    async def ask(i: int = i) -> None:
                        question = {"role": "user", "content": f"What is {i} + 1?"}
                        message = await client.messages.create(**{**ASK, "messages": [question]})
                        answers[i] = message.content[0].text

                    tg.start_soon(ask)
        return [answers[i] for i in range(5)]

    assert await ask_five("batch") == await ask_five("live")
    (submitted,) = event_log.named("batch_submitted")
    assert submitted["provider"] == "anthropic" and submitted["requests"] == 5
