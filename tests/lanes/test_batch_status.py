"""A batch object without a known status is an error in one line, not a batch in progress: a
server that answers every path with a chat completion (or a look that stops being a batch
object) fails the batch's calls at once with HTTP 502 and a message naming the field and the base
URL, after a handful of requests (before: looked at every 60 s for ever, "ETA unknown")."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from asynceval import LLMCallFailed, OpenAIChatModel, Runtime, Settings

from ..conftest import EventLog

_COMPLETION = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


class NoBatches:
    """An OpenAI-shaped server that is no batch API: `everywhere`, a chat completion for every
    path; `look`, a file and a batch created as OpenAI does, then a chat completion for every
    look at it. `requests` logs (method, path)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests: list[tuple[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        method, path = scope["method"], scope["path"]
        self.requests.append((method, path))
        body: dict[str, Any] = _COMPLETION
        if self.mode == "look" and method == "POST" and path.endswith("/files"):
            body = {"id": "file-1", "object": "file", "purpose": "batch"}
        elif self.mode == "look" and method == "POST" and path.endswith("/batches"):
            body = {"id": "batch-1", "object": "batch", "status": "validating"}
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})


@pytest.mark.parametrize("mode", ["everywhere", "look"])
async def test_a_batch_object_without_a_known_status_fails_its_calls_at_once(
    mode: str, event_log: EventLog
) -> None:
    server = NoBatches(mode)
    settings = Settings(
        llm_lane="batch",
        llm_batch_linger=0.1,
        llm_batch_poll=0.05,
        retry_initial_delay=0.01,
        retry_max_delay=0.05,
    )
    failures: list[LLMCallFailed] = []
    async with Runtime(settings):
        model = OpenAIChatModel(
            "m",
            base_url="http://gateway.test/v1",
            api_key="sk-batch-0123456789",
            transport=httpx.ASGITransport(app=server),
        )

        async def one(index: int) -> None:
            try:
                await model.generate(f"What is {index} + 1?")
            except LLMCallFailed as exc:
                failures.append(exc)

        with anyio.fail_after(10):
            async with model, anyio.create_task_group() as tg:
                for index in range(2):
                    tg.start_soon(one, index)
    assert len(failures) == 2
    for failure in failures:
        assert failure.status_code == 502 and failure.attempts == 1
        assert "no openai batch object" in failure.message and "`status`" in failure.message
        assert "\n" not in failure.message
    looks = [r for r in server.requests if r[0] == "GET"]
    assert len(looks) <= (0 if mode == "everywhere" else 1), server.requests
    (completed,) = event_log.named("batch_completed") or [{"status": "failed"}]
    assert completed["status"] == "failed"
