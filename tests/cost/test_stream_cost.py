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
import pytest

from asynceval import Runtime, Settings
from asynceval.interop import anthropic_client

from ..conftest import EventLog
from ._support import price_file, token_cost

anthropic = pytest.importorskip("anthropic")

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
