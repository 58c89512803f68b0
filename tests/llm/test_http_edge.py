"""The HTTP edge: Retry-After parsing, error mapping, URL checks, and what reaches the log."""

from __future__ import annotations

import asyncio
import email.utils
import time
import traceback
import warnings
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest

from asynceval import LLMCallFailed, OpenAIChatModel, Settings, configure_logging, events
from asynceval.errors import ConfigError, ProviderConnectionError
from asynceval.funnel import parse_retry_after
from asynceval.limits import ConcurrencyController, RateLimiter
from asynceval.sim import SimConfig

from ..conftest import EventLog

FAST: dict[str, Any] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.05}


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after-ms": "nan"}, None),
        ({}, None),
    ],
)
def test_retry_after_forms(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_retry_after_as_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    seconds = parse_retry_after({"retry-after": when})
    assert seconds is not None and 28 <= seconds <= 31


@pytest.mark.parametrize(
    "url", ["ftp://host/v1", "localhost:8000/v1", "http:///v1", "https://user:pw@host/v1"]
)
def test_unusable_or_credential_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigError, match="LLM_BASE_URL"):
        OpenAIChatModel("m", base_url=url)


def mock_model(handler: Any, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "m",
        base_url="http://provider.test/v1?key=query-secret-value-1234",
        settings=Settings(**FAST),
        controller=ConcurrencyController(2),
        transport=httpx.MockTransport(handler),
        **kwargs,
    )


async def test_a_key_echoed_by_the_provider_never_reaches_the_log(event_log: EventLog) -> None:
    """A provider that echoes the request's credentials in its error body."""

    def echo(request: httpx.Request) -> httpx.Response:
        body = f"bad key {request.headers['authorization']} for {request.url}"
        return httpx.Response(401, json={"error": {"message": body}})

    async with mock_model(echo, api_key="sk-echoed-secret-abcdef123") as model:
        with pytest.raises(LLMCallFailed) as info:
            await model.generate("hi")
    assert (
        "sk-echoed-secret-abcdef123" in info.value.message
    )  # the caller sees the provider's words
    text = event_log.stream.getvalue()
    assert event_log.named("llm_call_failed")
    assert "sk-echoed-secret-abcdef123" not in text and "query-secret-value-1234" not in text
    with pytest.raises(ConfigError) as refused:  # a key in the base URL is refused outright
        Settings(llm_base_url=str(model.base_url))
    shown = "".join(traceback.format_exception(refused.value))
    assert "query-secret" not in shown and "LLM_BASE_URL must have no query string" in shown


async def test_an_undecodable_body_is_retried_as_malformed() -> None:
    calls = 0

    def gzip_lie(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip")

    async with mock_model(gzip_lie) as model:
        with pytest.raises(LLMCallFailed) as info:
            await model.generate("hi")
    assert calls == 3 and info.value.retryable


async def test_a_garbled_response_on_the_aiohttp_transport_is_retried() -> None:
    """aiohttp errors the httpx-aiohttp transport leaves untranslated still become retries."""
    hits = 0

    async def garbage(stream: anyio.abc.SocketStream) -> None:
        nonlocal hits
        hits += 1
        async with stream:
            await stream.receive()
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n{}")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, garbage)
        model = OpenAIChatModel(
            "m",
            base_url=f"http://127.0.0.1:{port}/v1",
            settings=Settings(**FAST),
            controller=ConcurrencyController(1),
            transport="aiohttp",
        )
        async with model:
            with pytest.raises(LLMCallFailed) as info:
                await model.generate("hi")
        tg.cancel_scope.cancel()
    assert hits == 3 and isinstance(info.value.__cause__, ProviderConnectionError)


async def test_one_attempt_allowed_means_one_request() -> None:
    model = OpenAIChatModel(
        settings=Settings(retry_max_attempts=1),
        controller=ConcurrencyController(1),
        sim_config=SimConfig(latency=0, fault_rates={503: 1.0}),
    )
    async with model:
        with pytest.raises(LLMCallFailed) as info:
            await model.generate("hi")
        assert model.sim.stats()["requests"] == 1  # type: ignore[union-attr]
    assert info.value.attempts == 1 and info.value.retryable


async def test_a_429_pause_holds_back_the_other_calls(event_log: EventLog) -> None:
    """One call's 429 + Retry-After: 0.3 keeps the endpoint's other calls from being sent."""
    model = OpenAIChatModel(
        settings=Settings(retry_initial_delay=0.01, retry_max_delay=5.0),
        controller=ConcurrencyController(1),
        sim_config=SimConfig(latency=0.02, fail_first=1, retry_after=0.3),
    )
    async with model:
        start = anyio.current_time()
        async with anyio.create_task_group() as tg:
            tg.start_soon(model.generate, "first")
            await anyio.sleep(0.005)
            tg.start_soon(model.generate, "second")
        elapsed = anyio.current_time() - start
    acquired = event_log.named("acquired")
    assert [a["wait_s"] >= 0.25 for a in acquired[1:]].count(True) >= 1
    assert elapsed >= 0.6  # each request's first attempt earns its own pause


async def test_a_wild_retry_after_pauses_no_longer_than_the_max_delay() -> None:
    model = OpenAIChatModel(
        settings=Settings(retry_initial_delay=0.01, retry_max_delay=0.2),
        controller=ConcurrencyController(1),
        sim_config=SimConfig(latency=0, fail_first=1, retry_after=3600),
    )
    async with model:
        with anyio.fail_after(2):
            completion = await model.generate("hi")
    assert completion.text


async def test_rate_limiter_is_refunded_or_settled_whatever_happens() -> None:
    limiter = RateLimiter(requests_per_minute=100, tokens_per_minute=100_000)
    model = OpenAIChatModel(
        settings=Settings(**FAST),
        controller=ConcurrencyController(1),
        rate_limiter=limiter,
        sim_config=SimConfig(latency=0.2),
    )
    async with model:
        async with anyio.create_task_group() as tg:
            tg.start_soon(model.generate, "holds the only slot")
            await anyio.sleep(0.05)
            with anyio.move_on_after(0.05):  # queued behind it, cancelled: nothing was sent
                await model.generate("never sent", max_tokens=5_000)
        requests, tokens = limiter.available()
    assert requests is not None and tokens is not None
    assert 98.5 <= requests <= 99.5  # only the call that was sent used a request
    assert tokens > 99_900  # its estimate was corrected to the small usage reported


async def test_a_model_outlives_its_event_loop_run() -> None:
    model = OpenAIChatModel(controller=ConcurrencyController(2), sim_config=SimConfig(latency=0))

    async def ask() -> str:
        return (await model.generate("What is 1 + 1?")).text

    answers = [await anyio.to_thread.run_sync(anyio.run, ask) for _ in range(2)]
    await model.aclose()
    assert answers == ["2", "2"]


async def test_generate_sync_in_an_asyncio_worker_thread_works() -> None:
    async with OpenAIChatModel(sim_config=SimConfig(latency=0)) as model:
        completion = await asyncio.to_thread(model.generate_sync, "What is 4 + 4?")
    assert completion.text == "8"


def test_an_event_that_cannot_be_written_is_counted_not_raised() -> None:
    import io

    stream = io.StringIO()
    configure_logging(Settings(), stream=stream)
    stream.close()
    before = events.write_failures()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        events.acquired(agent="a", dimension="d", call_id="c", active_slots=1, wait_s=0)
    assert events.write_failures() == before + 1
