"""A rate-limit reset far in the future is capped at a minute, and a success that carries no
rate headers ends the pause and drops the budget kept: one 429 saying `remaining 0` with a reset
a year away no longer throttles the endpoint for the rest of the run (before: 4 of 40 calls done
in 40 s). The provider is the test's own raw ASGI app over loopback: its first request gets the
429 with those headers, every other request a plain 200 without rate headers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from asynceval import LLMCallFailed, OpenAIChatModel, Runtime, Settings
from asynceval.limits import read_rate_headers

from ..conftest import EventLog

_COMPLETION = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()
_REFUSAL = json.dumps({"error": {"message": "Rate limit reached", "type": "requests"}}).encode()

OPENAI_YEAR = {
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "8760h",
}
ANTHROPIC_9999 = {
    "anthropic-ratelimit-requests-limit": "100",
    "anthropic-ratelimit-requests-remaining": "0",
    "anthropic-ratelimit-requests-reset": "9999-12-31T00:00:00Z",
}


class FirstRefused:
    """Answers its first request 429 with `headers`, the rest 200 after `latency` with `then`
    (none: a gateway that adds rate headers only to its own 429s); logs (time, status)."""

    def __init__(
        self, headers: dict[str, str], latency: float = 0.02, then: dict[str, str] | None = None
    ) -> None:
        self.headers = [(k.encode(), v.encode()) for k, v in headers.items()]
        self.then = [(k.encode(), v.encode()) for k, v in (then or {}).items()]
        self.latency = latency
        self.arrivals: list[tuple[float, int]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        first = not self.arrivals
        self.arrivals.append((time.monotonic(), 429 if first else 200))
        headers = [(b"content-type", b"application/json")]
        if first:
            status, body, headers = 429, _REFUSAL, [*headers, *self.headers]
        else:
            await anyio.sleep(self.latency)
            status, body, headers = 200, _COMPLETION, [*headers, *self.then]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def count(self, status: int) -> int:
        return sum(1 for _, s in self.arrivals if s == status)


@pytest.mark.parametrize("headers", [OPENAI_YEAR, ANTHROPIC_9999], ids=["openai", "anthropic"])
def test_an_announced_reset_is_read_as_at_most_a_minute(headers: dict[str, str]) -> None:
    said = read_rate_headers(headers)
    assert said is not None
    assert said.requests.reset == 60.0 and said.refill == 60.0


OPENAI_PLENTY = {
    "x-ratelimit-limit-requests": "100",
    "x-ratelimit-remaining-requests": "99",
    "x-ratelimit-reset-requests": "1s",
}


@pytest.mark.parametrize(
    ("headers", "then"),
    [(OPENAI_YEAR, None), (ANTHROPIC_9999, None), (OPENAI_YEAR, OPENAI_PLENTY)],
    ids=["openai", "anthropic", "openai-then-headers"],
)
async def test_one_far_reset_429_does_not_throttle_the_rest_of_the_run(
    asgi_server: Callable[[Any], int],
    event_log: EventLog,
    headers: dict[str, str],
    then: dict[str, str] | None,
) -> None:
    """40 calls at the default RETRY_MAX_DELAY (60 s): all done within a few seconds (each
    takes 20 ms; before: about 4 in 40 s), the refused one sent again. The successes after the
    429 carry no rate headers, or say that 99 requests are left: either way the pause ends."""
    provider = FirstRefused(headers, then=then)
    base_url = f"http://127.0.0.1:{asgi_server(provider)}/v1"
    settings = Settings(max_concurrent_llm_calls=10, retry_initial_delay=0.01)
    failures: list[LLMCallFailed] = []
    started = time.monotonic()
    async with Runtime(settings), OpenAIChatModel("m", base_url=base_url, api_key="k") as model:

        async def one(index: int) -> None:
            try:
                await model.generate(f"question {index}")
            except LLMCallFailed as exc:
                failures.append(exc)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for index in range(40):
                    tg.start_soon(one, index)
    elapsed = time.monotonic() - started
    assert failures == []
    assert provider.count(429) == 1 and provider.count(200) == 40
    assert elapsed < 5.0, elapsed
    paused = event_log.named("endpoint_paused")
    assert all(e["seconds"] <= 60.0 for e in paused), paused
