"""LLM_STREAM_IDLE_TIMEOUT: a stream that stalls before its first content is sent again within
the idle timeout plus one attempt; one that stalls after content reached the caller ends as a
timeout error, its slot already free. The provider is this test's own, on a real socket (an
in-process ASGI transport buffers whole answers): its counters are the witness."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import openai
import pytest

from asynceval import Runtime, Settings, http_client
from asynceval.funnel._readahead import FirstContent
from asynceval.interop import openai_client
from asynceval.llm import track_usage

from ..conftest import EventLog

IDLE = 0.3
SETTINGS: dict[str, Any] = {
    "retry_initial_delay": 0.01,
    "retry_max_delay": 0.05,
    "max_concurrent_llm_calls": 1,
    "llm_stream_idle_timeout": IDLE,
}


def chat_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return b"data: " + json.dumps({**chunk, "choices": [choice], **extra}).encode() + b"\n\n"


def event(name: str, **fields: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **fields})}\n\n".encode()


ROLE = chat_chunk({"role": "assistant", "content": "", "refusal": None})
CHAT = [
    chat_chunk({"content": "Hello"}),
    chat_chunk({"content": " world"}),
    chat_chunk({}, "stop"),
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}\n\n',
    b"data: [DONE]\n\n",
]
MESSAGE_START = event(
    "message_start",
    message={"id": "m", "role": "assistant", "usage": {"input_tokens": 7, "output_tokens": 1}},
)
ANTHROPIC_PRELUDE = [
    MESSAGE_START,
    event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    event("ping"),
]
ANTHROPIC = [
    event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hello"}),
    event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 2}),
    event("message_stop"),
]
RESPONSES_PRELUDE = [event("response.created"), event("response.in_progress")]
RESPONSES = [event("response.output_text.delta", delta="Hello"), event("response.completed")]


class StallingProvider:
    """Streams `prelude` then `rest` for every request, except that its first `stall_first`
    requests stop after the prelude (and, with `stall_after_content`, after the first frame of
    `rest` too) and hang until the client leaves (counted in `disconnected`)."""

    def __init__(
        self,
        prelude: list[bytes],
        rest: list[bytes],
        *,
        stall_first: int = 1,
        stall_after_content: bool = False,
    ) -> None:
        self.prelude, self.rest = prelude, rest
        self.stall_first = stall_first
        self.stall_after_content = stall_after_content
        self.requests = 0
        self.disconnected = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        self.requests += 1
        stalls = self.requests <= self.stall_first
        frames = self.prelude + self.rest
        if stalls:
            frames = self.prelude + self.rest[:1] if self.stall_after_content else self.prelude
        headers = [(b"content-type", b"text/event-stream; charset=utf-8")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        if stalls:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnected += 1
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


Serve = Callable[[Any], int]


def serve(asgi_server: Serve, provider: StallingProvider) -> str:
    return f"http://127.0.0.1:{asgi_server(provider)}/v1"


async def test_a_stream_stalled_after_its_role_chunk_is_sent_again_within_the_idle_timeout(
    asgi_server: Serve, event_log: EventLog
) -> None:
    """The OpenAI SDK on asynceval.interop: the first attempt sends its headers and a role-only
    chunk, then hangs. The call finishes through a retry within the idle timeout plus one
    attempt, the SDK never sees the stalled attempt, and its usage is counted."""
    provider = StallingProvider([ROLE], CHAT)
    async with Runtime(Settings(**SETTINGS)) as runtime:
        client = openai_client(base_url=serve(asgi_server, provider), agent="streamer")
        with track_usage() as usage, anyio.fail_after(5):
            started = time.monotonic()
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Hi"}], stream=True
            )
            roles, text = [], ""
            async for chunk in stream:
                if chunk.choices:
                    roles.append(chunk.choices[0].delta.role)
                    text += chunk.choices[0].delta.content or ""
            elapsed = time.monotonic() - started
        assert runtime.limiter.statistics().active == 0
    assert text == "Hello world" and roles[0] == "assistant"
    assert IDLE <= elapsed < IDLE + 0.5, elapsed
    assert provider.requests == 2 and provider.disconnected == 1
    assert (usage.llm_calls, usage.prompt_tokens, usage.completion_tokens) == (1, 7, 2)
    (stalled,) = event_log.named("stream_stalled")
    assert stalled["level"] == "WARNING" and stalled["delivered"] is False
    assert stalled["idle_s"] == IDLE and stalled["agent"] == "streamer"
    (retry,) = event_log.named("retry")
    assert retry["call_id"] == stalled["call_id"]
    assert len(event_log.named("released")) == 2 and not event_log.named("timeout")


@pytest.mark.parametrize(
    ("path", "prelude", "rest", "expected"),
    [
        ("/chat/completions", [b": keep-alive\n\n", ROLE, b": ping\n\n"], CHAT, b"Hello"),
        ("/messages", ANTHROPIC_PRELUDE, ANTHROPIC, b"message_stop"),
        ("/responses", RESPONSES_PRELUDE, RESPONSES, b"response.completed"),
    ],
    ids=["keep-alive-comments", "anthropic", "responses"],
)
async def test_events_that_carry_no_content_are_read_ahead_and_retried(
    asgi_server: Serve,
    event_log: EventLog,
    path: str,
    prelude: list[bytes],
    rest: list[bytes],
    expected: bytes,
) -> None:
    """Keep-alive comments, Anthropic's message_start / content_block_start / ping, the
    Responses API's response.created / response.in_progress: a stall after them is a stall
    before any content, sent again; the caller reads the second answer whole, unchanged."""
    provider = StallingProvider(prelude, rest)
    url = serve(asgi_server, provider) + path
    async with Runtime(Settings(**SETTINGS)) as runtime, http_client() as client:
        with anyio.fail_after(5):
            # Asking for the usage, as a chat caller that sees the usage chunk unchanged.
            ask = {"stream": True, "stream_options": {"include_usage": True}}
            async with client.stream("POST", url, json=ask) as response:
                body = b"".join([chunk async for chunk in response.aiter_bytes()])
        assert runtime.limiter.statistics().active == 0
    assert body == b"".join(prelude + rest) and expected in body
    assert provider.requests == 2 and provider.disconnected == 1
    assert [e["delivered"] for e in event_log.named("stream_stalled")] == [False]


async def test_a_stream_stalled_after_content_gives_the_sdk_a_timeout_with_its_slot_free(
    asgi_server: Serve, event_log: EventLog
) -> None:
    """Content reached the caller, then nothing: after the idle timeout the reader gets
    `httpx.ReadTimeout`, which the SDK raises as its APITimeoutError (not sent again: part of
    the answer was used), and the slot is free by the time it does."""
    provider = StallingProvider([ROLE], CHAT, stall_first=10, stall_after_content=True)
    async with Runtime(Settings(**SETTINGS)) as runtime:
        client = openai_client(base_url=serve(asgi_server, provider))
        with anyio.fail_after(5):
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Hi"}], stream=True
            )
            pieces: list[str] = []
            free_at_error: list[bool] = []

            async def read() -> None:
                try:
                    async for chunk in stream:
                        pieces.append(chunk.choices[0].delta.content or "")
                except openai.APITimeoutError:
                    free_at_error.append(runtime.limiter.statistics().active == 0)
                    raise

            started = time.monotonic()
            with pytest.raises(openai.APITimeoutError) as caught:
                await read()
            waited = time.monotonic() - started
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert "".join(pieces) == "Hello" and free_at_error == [True]
    assert IDLE <= waited < IDLE + 0.5, waited
    assert provider.requests == 1
    (stalled,) = event_log.named("stream_stalled")
    assert stalled["delivered"] is True and stalled["level"] == "WARNING"
    assert len(event_log.named("released")) == 1 and not event_log.named("retry")


async def test_a_stream_that_always_stalls_before_content_fails_as_the_sdks_timeout(
    asgi_server: Serve, event_log: EventLog
) -> None:
    """Every attempt stalls after its role chunk: after RETRY_MAX_ATTEMPTS the SDK raises its
    APITimeoutError from `create` (the caller never got a byte of a stalled attempt)."""
    provider = StallingProvider([ROLE], CHAT, stall_first=10)
    async with Runtime(Settings(**SETTINGS, retry_max_attempts=3)) as runtime:
        client = openai_client(base_url=serve(asgi_server, provider))
        with anyio.fail_after(5), pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Hi"}], stream=True
            )
        assert runtime.limiter.statistics().active == 0
    assert provider.requests == 3
    assert [e["delivered"] for e in event_log.named("stream_stalled")] == [False] * 3
    (failed,) = event_log.named("llm_call_failed")
    assert failed["attempts"] == 3 and "LLM_STREAM_IDLE_TIMEOUT" in failed["error"]


TOOL_CALL = {"tool_calls": [{"index": 0, "id": "t", "function": {"name": "f", "arguments": ""}}]}


@pytest.mark.parametrize(
    ("chunks", "content"),
    [
        ([ROLE], False),
        ([ROLE[:30], ROLE[30:]], False),  # an event split across chunks
        ([ROLE.replace(b"\n", b"\r\n")], False),
        ([b": keep-alive\n\n", b"id: 1\nretry: 100\n\n"], False),
        ([ROLE[:-1]], False),  # not whole yet
        ([chat_chunk({"role": "assistant"}), chat_chunk({"content": "Hi"})], True),
        ([ROLE[:-1], b"\n"], False),
        ([chat_chunk(TOOL_CALL)], True),  # a tool call's name is generated
        ([chat_chunk({}, "stop")], True),
        ([CHAT[3]], True),  # the usage chunk
        ([b"data: [DONE]\n\n"], True),
        ([b'event: error\ndata: {"type":"error","error":{"message":"x"}}\n\n'], True),
        ([b'data: {"error":{"message":"overloaded"}}\n\n'], True),
        ([b"data: not json\n\n"], True),
        (ANTHROPIC_PRELUDE, False),
        (ANTHROPIC_PRELUDE + ANTHROPIC[:1], True),
        (RESPONSES_PRELUDE, False),
        (RESPONSES_PRELUDE + RESPONSES[:1], True),
    ],
)
def test_what_counts_as_content_when_reading_ahead(chunks: list[bytes], content: bool) -> None:
    """Only events known to carry nothing generated are read past; anything else (errors,
    the end, a body that is not JSON) is handed on at once."""
    scan = FirstContent()
    assert any([scan.feed(chunk) for chunk in chunks]) is content
