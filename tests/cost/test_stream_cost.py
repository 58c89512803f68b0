"""What a streamed answer costs: priced from the usage its provider reports, else at its worst
case, never at a part of its usage taken for the whole. An Anthropic stream closed before its
`message_delta` (which says what it generated) counts at its worst case, as a chat completion
stream closed before its usage chunk does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from asynceval import Benchmark, OpenAIChatModel, Runtime, Settings, Task
from asynceval.cli import main
from asynceval.interop import anthropic_client, openai_client
from asynceval.llm import track_usage
from asynceval.sim import SimConfig, SimProvider

from ..conftest import EventLog
from ._support import MODEL, PRICE, QUESTION, price_file, tasks, token_cost

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

CLAUDE = "claude-cost-test"
CLAUDE_PRICE = {"input_mtok": 3.0, "output_mtok": 15.0}
PROMPT_TOKENS, DELTAS = 20, 30


def anthropic_stream(delay: float) -> Callable[..., Any]:
    """A raw ASGI provider answering every request with Anthropic's server-sent events:
    `message_start` (input tokens PROMPT_TOKENS, output 1), a content block of DELTAS text
    deltas `delay` apart, `message_delta` (output DELTAS), `message_stop`."""

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    start = {
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": CLAUDE,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1},
        }
    }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        frames = [
            event("message_start", start),
            event(
                "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
            ),
        ]
        frames += [
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "x"}})
            for _ in range(DELTAS)
        ]
        frames += [
            event("content_block_stop", {"index": 0}),
            event(
                "message_delta",
                {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": DELTAS}},
            ),
            event("message_stop", {}),
        ]
        try:
            for frame in frames:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                await anyio.sleep(delay)
            await send({"type": "http.response.body", "body": b""})
        except OSError:  # the client went away
            return

    return app


async def _claude_stream(url: str, settings: Settings, *, whole: bool) -> int:
    """One streamed `messages.create` (max_tokens 4000) through `anthropic_client()`: read to
    its end, or closed after its first text delta; the text deltas read."""
    async with Runtime(settings):
        client = anthropic_client(base_url=url, api_key="k")
        stream = await client.messages.create(
            model=CLAUDE,
            max_tokens=4000,
            messages=[{"role": "user", "content": "Count."}],
            stream=True,
        )
        deltas = 0
        async for item in stream:
            if item.type == "content_block_delta":
                deltas += 1
                if not whole:
                    break
        await stream.close()
    return deltas


async def test_an_anthropic_stream_closed_before_message_delta_counts_at_its_worst_case(
    tmp_path: Path, event_log: EventLog, asgi_server: Callable[[Any], int]
) -> None:
    """Closed after its first text delta: the provider billed what it generated, which the
    stream never said, so its `released` event carries its worst case (at least max_tokens of
    output at the model's price) and `cost_unknown`, not its input tokens alone."""
    url = f"http://127.0.0.1:{asgi_server(anthropic_stream(0.01))}"
    prices = price_file(tmp_path / "prices.json", {CLAUDE: CLAUDE_PRICE})
    assert await _claude_stream(url, Settings(llm_prices_file=str(prices)), whole=False) == 1
    (released,) = event_log.named("released")
    assert released["cost_unknown"] is True
    assert released["cost_usd"] >= token_cost(CLAUDE_PRICE, PROMPT_TOKENS, 4000)


async def test_an_anthropic_stream_read_to_its_end_is_priced_from_its_usage(
    tmp_path: Path, event_log: EventLog, asgi_server: Callable[[Any], int]
) -> None:
    """The control: read to `message_stop`, it costs its input tokens (from `message_start`)
    and its output tokens (from `message_delta`), a known cost."""
    url = f"http://127.0.0.1:{asgi_server(anthropic_stream(0.001))}"
    prices = price_file(tmp_path / "prices.json", {CLAUDE: CLAUDE_PRICE})
    assert await _claude_stream(url, Settings(llm_prices_file=str(prices)), whole=True) == DELTAS
    (released,) = event_log.named("released")
    assert "cost_unknown" not in released
    assert released["cost_usd"] == token_cost(CLAUDE_PRICE, PROMPT_TOKENS, DELTAS)


def priced(tmp_path: Path, **extra: Any) -> Settings:
    """Settings with the tests' model priced at PRICE (and `extra`)."""
    prices = price_file(tmp_path / "prices.json", {MODEL: PRICE})
    return Settings(llm_prices_file=str(prices), **extra)


async def _openai_streams(
    url: str | None, settings: Settings, *, calls: int = 3, **ask: Any
) -> tuple[list[Any], list[Any]]:
    """`calls` streamed chat completions through `openai_client()` (on `url`, else the embedded
    simulator), each read to its end; (every chunk the SDK gave, the runtime's usage)."""
    chunks: list[Any] = []
    async with Runtime(settings):
        with track_usage() as usage:
            for i in range(calls):
                client = openai_client(**({"base_url": url} if url else {}))  # one each
                stream = await client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": QUESTION.format(i=i)}],
                    max_tokens=16,
                    stream=True,
                    **ask,
                )
                chunks += [chunk async for chunk in stream]
    return chunks, [usage]


def _priced_from_usage(event_log: EventLog, calls: int) -> None:
    """Each `released` event is a known cost: what the call's usage costs at PRICE (16 tokens
    out, as the simulator answers max_tokens=16 to QUESTION), never the worst case."""
    released = event_log.named("released")
    assert len(released) == calls
    for event in released:
        assert "cost_unknown" not in event, event
        assert event["cost_usd"] < token_cost(PRICE, 400, 16)  # the worst case is > 4x this
        assert event["cost_usd"] > token_cost(PRICE, 0, 16)


@pytest.mark.parametrize("where", ["loopback", "in-process"])
async def test_an_sdk_stream_without_include_usage_is_priced_from_its_real_usage(
    where: str, tmp_path: Path, event_log: EventLog, loopback: Any
) -> None:
    """The OpenAI SDK's default (`stream=True`, no `stream_options`), read to the end: the funnel
    asks for the usage, so each call costs what it used (no `cost_unknown`), its tokens are
    counted, and the caller never sees the usage-only chunk (every chunk has `choices[0]`)."""
    url = (
        loopback(SimConfig(latency=0.002, stream_chunk_delay=0.001))[0]
        if where == "loopback"
        else None
    )
    chunks, (usage,) = await _openai_streams(url, priced(tmp_path))
    assert chunks and all(chunk.choices and chunk.usage is None for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks)
    assert usage.completion_tokens == 3 * 16 and usage.prompt_tokens > 0
    _priced_from_usage(event_log, 3)
    assert float(usage.cost) == pytest.approx(
        sum(e["cost_usd"] for e in event_log.named("released"))
    )


async def test_a_sync_sdk_stream_from_a_thread_is_priced_and_hides_the_usage_chunk(
    tmp_path: Path, event_log: EventLog, loopback: Any
) -> None:
    """`openai_client(sync=True)` read from a worker thread: the same stream, the same price."""
    url, _ = loopback(SimConfig(latency=0.002, stream_chunk_delay=0.001))
    async with Runtime(priced(tmp_path)):
        client = openai_client(sync=True, base_url=url)

        def read() -> list[Any]:
            ask = [{"role": "user", "content": QUESTION.format(i=0)}]
            stream = client.chat.completions.create(
                model=MODEL, messages=ask, max_tokens=16, stream=True
            )
            return list(stream)

        with track_usage() as usage:
            chunks = await anyio.to_thread.run_sync(read)
    assert chunks and all(chunk.choices for chunk in chunks)
    assert usage.completion_tokens == 16
    _priced_from_usage(event_log, 1)


async def test_a_caller_that_asked_for_include_usage_still_gets_its_usage_chunk(
    tmp_path: Path, event_log: EventLog, loopback: Any
) -> None:
    url, _ = loopback(SimConfig(latency=0.002, stream_chunk_delay=0.001))
    chunks, _ = await _openai_streams(url, priced(tmp_path), stream_options={"include_usage": True})
    reported = [chunk.usage for chunk in chunks if not chunk.choices]
    assert len(reported) == 3 and all(u.completion_tokens == 16 for u in reported)
    _priced_from_usage(event_log, 3)


async def test_a_stream_answered_from_the_cache_hides_the_usage_chunk_too(
    tmp_path: Path, event_log: EventLog, loopback: Any
) -> None:
    """The model-call cache keeps the provider's whole stream (its usage included, counted on a
    hit); a caller that did not ask for the usage does not get it from the cache either."""
    url, sim = loopback(SimConfig(latency=0.002, stream_chunk_delay=0.001))
    settings = priced(tmp_path, llm_cache_dir=str(tmp_path / "cache"))
    await _openai_streams(url, settings, calls=1)
    chunks, (usage,) = await _openai_streams(url, settings, calls=1)
    assert sim.stats()["requests"] == 1  # the second came from the cache
    assert chunks and all(chunk.choices for chunk in chunks)
    assert usage.cache_hits == 1 and usage.completion_tokens == 16


def refusing_stream_options(sim: SimProvider, log: list[dict[str, Any]]) -> Callable[..., Any]:
    """A raw ASGI provider in front of `sim` that answers 400 naming the parameter to any body
    with `stream_options` (as some OpenAI-compatible servers do) and passes the rest to `sim`;
    every request body is appended to `log`."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = json.loads(b"".join(parts))
        log.append(body)
        if "stream_options" in body:
            error = (
                b'{"error": {"message": "Unrecognized request argument supplied: stream_options"}}'
            )
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": error})
            return
        replay = iter([{"type": "http.request", "body": b"".join(parts), "more_body": False}])

        async def again() -> dict[str, Any]:
            message = next(replay, None)
            return message if message is not None else await receive()  # its disconnect

        await sim(scope, again, send)

    return app


async def test_a_provider_that_refuses_stream_options_gets_the_request_as_written(
    tmp_path: Path, event_log: EventLog, asgi_server: Callable[[Any], int]
) -> None:
    """The first stream is refused with the option and sent again as written; later streams to
    that endpoint (from other clients too) go as written at once. The caller gets its answers;
    their usage unknown, each counts at its worst case with `cost_unknown` (shown apart), never
    as a silent known cost."""
    log: list[dict[str, Any]] = []
    sim = SimProvider(SimConfig(latency=0.002, stream_chunk_delay=0.001))
    url = f"http://127.0.0.1:{asgi_server(refusing_stream_options(sim, log))}/v1"
    chunks, _ = await _openai_streams(url, priced(tmp_path), calls=3)
    assert ["stream_options" in body for body in log] == [True, False, False, False]
    assert all(chunk.choices for chunk in chunks)
    streamed = [e for e in event_log.named("released") if e.get("cost_usd")]
    assert len(streamed) == 3 and all(e["cost_unknown"] is True for e in streamed)


def test_the_usage_chunk_filter_reads_events_split_anywhere() -> None:
    """Fed one byte at a time, with CRLF line ends too, the filter hands on every event but the
    usage-only chunk, byte for byte."""
    from asynceval.funnel._usage_chunk import UsageChunkFilter  # (here: the old code has none)

    for end in (b"\n", b"\r\n"):
        events = [
            b'data: {"choices": [{"index": 0, "delta": {"content": "usage"}}], "usage": null}',
            b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}',
            b"data: [DONE]",
        ]
        stream = b"".join(event + end + end for event in events)
        hide = UsageChunkFilter()
        out = b"".join(hide.feed(stream[i : i + 1]) for i in range(len(stream))) + hide.flush()
        assert out == events[0] + end + end + events[2] + end + end


class PlainStreams(Benchmark):
    """Each repetition streams one chat completion from `url` with the SDK's defaults (no
    `stream_options`) and reads it to its end."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        client = openai_client(base_url=self.url)

        async def solver(query: str) -> str:
            stream = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": query}],
                max_tokens=16,
                stream=True,
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream])

        return [solver], {}


@pytest.mark.parametrize("refusing", [False, True], ids=["usage-asked", "option-refused"])
async def test_the_report_shows_calls_priced_at_their_worst_case_apart(
    refusing: bool,
    tmp_path: Path,
    asgi_server: Callable[[Any], int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run whose streams reported their usage (the funnel asked for it) has its tokens and a
    cost with no caveat; one whose provider refused the option (no usage reported) says how many of its
    calls are priced at their worst case, in the report's cost line."""
    sim = SimProvider(SimConfig(latency=0.002, stream_chunk_delay=0.001))
    log: list[dict[str, Any]] = []
    app = refusing_stream_options(sim, log) if refusing else sim
    url = f"http://127.0.0.1:{asgi_server(app)}/v1"
    results = tmp_path / "results.jsonl"
    bench = PlainStreams(url, settings=priced(tmp_path), max_concurrent_tasks=1)  # in turn
    reports = await bench.run(tasks(3), results_path=results)
    assert {r["status"] for r in reports} == {"success"}
    assert ["stream_options" in body for body in log] == ([True] + [False] * 3 if refusing else [])
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "250")  # a table row on one line
    assert main(["report", str(results)]) == 0
    rows = [
        [cell.strip() for cell in row.split("│")] for row in capsys.readouterr().out.splitlines()
    ]
    (line,) = [" ".join(row).strip() for row in rows if "cost" in row]
    (tokens,) = [" ".join(row).strip() for row in rows if "tokens in / out" in row]
    assert tokens.endswith(" / 0" if refusing else " / 48"), tokens  # 16 a stream
    worst = "3 calls priced at their worst case (no usage reported)"
    assert (worst in line) is refusing, line


async def test_a_batch_line_given_up_after_it_was_sent_is_counted_at_its_worst_case() -> None:
    """The batch lane: a call that stops waiting once its line went in a batch may still be
    billed, so its worst case is counted, and counted as such (`worst_case_calls`)."""
    sim = SimProvider(SimConfig(batch_delay=30))
    settings = Settings(llm_lane="batch", llm_batch_linger=0.1, llm_batch_poll=0.02)
    async with Runtime(settings):
        model = OpenAIChatModel(
            "asynceval-sim", base_url="http://sim.test/v1", transport=httpx.ASGITransport(app=sim)
        )
        with track_usage() as usage:
            with anyio.move_on_after(1.0):
                await model.generate("What is 2 + 2?", max_tokens=16)
    assert sim.stats()["batches"]["openai"]["created"] == 1  # it was sent
    assert usage.cost is not None and usage.worst_case_calls == 1
