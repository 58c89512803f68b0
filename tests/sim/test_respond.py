"""SimProvider.respond: one completion answered in process, without HTTP emulation, with the same
admission, caps, faults, answers and counters as over ASGI; the embedded model goes through it."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from asynceval import OpenAIChatModel
from asynceval.sim import SimConfig, SimProvider
from asynceval.sim._app import SimReply

from ._app import CHAT, chat, client, sim


def body(text: str = "What is 2 + 3?", **extra: Any) -> bytes:
    return json.dumps(chat(text, **extra)).encode()


async def test_a_chat_completion_is_answered_with_choices() -> None:
    provider = sim()
    reply = await provider.respond(CHAT, body("What is 2 + 3?"))
    assert isinstance(reply, SimReply)
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    document = json.loads(reply.content)
    assert document["object"] == "chat.completion"
    assert document["choices"][0]["message"]["role"] == "assistant"
    assert document["choices"][0]["message"]["content"] == "5"
    assert document["usage"]["total_tokens"] > 0


async def test_respond_answers_as_the_asgi_app_does() -> None:
    request = chat("Name a colour.", n=2)
    in_process = await sim(seed=7).respond(CHAT, json.dumps(request).encode())
    async with client(sim(seed=7)) as c:
        over_asgi = await c.post(CHAT, content=json.dumps(request).encode())
    assert in_process.status_code == over_asgi.status_code == 200
    mine, theirs = json.loads(in_process.content), over_asgi.json()
    mine.pop("created"), theirs.pop("created")
    assert len(mine["choices"]) == 2
    assert mine == theirs


async def test_an_unknown_path_is_a_404() -> None:
    provider = sim()
    reply = await provider.respond("/v1/nowhere", body())
    assert reply.status_code == 404
    assert "/v1/nowhere" in json.loads(reply.content)["error"]["message"]


@pytest.mark.parametrize("content", [b"this is not json", b"[1, 2]", b""])
async def test_a_body_that_is_not_a_json_object_is_a_400(content: bytes) -> None:
    provider = sim()
    reply = await provider.respond(CHAT, content)
    assert reply.status_code == 400
    assert "error" in json.loads(reply.content)
    assert provider.stats()["statuses"] == {"400": 1}


async def test_fail_first_answers_429_with_retry_after_then_200() -> None:
    provider = sim(fail_first=1, retry_after=0.25)
    request = body("Hello?")
    first = await provider.respond(CHAT, request)
    assert first.status_code == 429
    assert first.headers["retry-after"] == "0.25"
    assert first.headers["retry-after-ms"] == "250"
    second = await provider.respond(CHAT, request)
    assert second.status_code == 200
    assert json.loads(second.content)["choices"]
    # Another body is a distinct request: it meets fail_first again.
    assert (await provider.respond(CHAT, body("Other?"))).status_code == 429


async def test_the_concurrency_cap_answers_429_to_the_second_of_two_at_once() -> None:
    provider = sim(max_concurrency=1, latency=0.1)
    statuses: list[int] = []

    async def one(text: str) -> None:
        statuses.append((await provider.respond(CHAT, body(text))).status_code)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "first?")
        tg.start_soon(one, "second?")
    assert sorted(statuses) == [200, 429]
    stats = provider.stats()
    assert stats["requests"] == 2
    assert stats["max_in_flight"] == 1
    assert stats["in_flight"] == 0


async def test_stats_count_every_request() -> None:
    provider = sim()
    assert provider.stats()["requests"] == 0
    for i in range(3):
        await provider.respond(CHAT, body(f"question {i}?"))
    await provider.respond(CHAT, b"not json")
    stats = provider.stats()
    assert stats["requests"] == 4
    assert stats["statuses"] == {"200": 3, "400": 1}
    assert stats["in_flight"] == 0
    assert stats["tokens"]["prompt"] > 0 and stats["tokens"]["completion"] > 0


async def test_a_hang_lasts_until_the_caller_is_cancelled() -> None:
    provider = sim(hang_rate=1.0)
    seen_in_flight: list[int] = []
    reply: list[SimReply] = []

    async def call() -> None:
        reply.append(await provider.respond(CHAT, body()))

    start = anyio.current_time()
    with anyio.move_on_after(0.1) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.05)
            seen_in_flight.append(provider.stats()["in_flight"])
    assert scope.cancelled_caught
    assert anyio.current_time() - start < 1
    assert reply == []  # it never answered
    assert seen_in_flight == [1]
    stats = provider.stats()
    assert stats["in_flight"] == 0
    assert stats["requests"] == 1


async def test_the_embedded_model_goes_through_respond_not_the_asgi_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the embedded simulator must not go through httpx's ASGI transport")

    monkeypatch.setattr(httpx.ASGITransport, "handle_async_request", refuse)
    monkeypatch.setattr(httpx.ASGITransport, "__init__", refuse)
    calls: list[str] = []
    original = SimProvider.respond

    async def spy(self: SimProvider, path: str, content: bytes) -> SimReply:
        calls.append(path)
        return await original(self, path, content)

    monkeypatch.setattr(SimProvider, "respond", spy)

    model = OpenAIChatModel(sim_config=SimConfig(latency=0))
    provider = model.sim
    assert provider is not None
    assert provider.stats()["requests"] == 0
    completion = await model.generate("What is 2 + 3?")
    assert completion.text == "5"
    assert provider.stats()["requests"] == 1
    await model.generate("What is 4 + 4?")
    assert provider.stats()["requests"] == 2
    assert calls == [CHAT, CHAT]


async def test_the_embedded_model_retries_a_simulated_429_through_respond() -> None:
    model = OpenAIChatModel(sim_config=SimConfig(latency=0, fail_first=1, retry_after=0))
    completion = await model.generate("What is 2 + 3?")
    assert completion.text == "5"
    assert model.sim is not None
    stats = model.sim.stats()
    assert stats["requests"] == 2
    assert stats["statuses"] == {"200": 1, "429": 1}
