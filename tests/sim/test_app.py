"""The ASGI app over HTTP in process: routes, answers, stats, caps, faults and determinism."""

from __future__ import annotations

import json
import time
from collections.abc import MutableMapping
from typing import Any

import anyio
import httpx
import pytest

from asynceval.sim import SimProvider

from ._app import CHAT, chat, client, sim

MESSAGES = "/v1/messages"


async def post_all(app: SimProvider, bodies: list[dict[str, Any]]) -> list[int]:
    """POST every body at once; the statuses in the order of `bodies`."""
    statuses = [0] * len(bodies)
    async with client(app) as c:

        async def one(i: int) -> None:
            statuses[i] = (await c.post(CHAT, json=bodies[i])).status_code

        async with anyio.create_task_group() as tg:
            for i in range(len(bodies)):
                tg.start_soon(one, i)
    return statuses


async def test_chat_completion_has_the_openai_shape() -> None:
    async with client(sim()) as c:
        response = await c.post(CHAT, json=chat("What is 2 + 3?"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert isinstance(body["created"], int)
    assert body["model"] == "sim-1"
    choice = body["choices"][0]
    assert choice["index"] == 0
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "5"
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_usage_is_estimated_from_characters() -> None:
    async with client(sim(tokens_per_char=1.0)) as c:
        body = (await c.post(CHAT, json=chat("abcd"))).json()
    assert body["usage"]["prompt_tokens"] == 4
    assert body["usage"]["completion_tokens"] == len(body["choices"][0]["message"]["content"])


async def test_tool_call_round_trip_ends_in_a_text_answer_using_the_result() -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find it"}]
    async with client(sim()) as c:
        first = (await c.post(CHAT, json={"messages": messages, "tools": [tool]})).json()
        message = first["choices"][0]["message"]
        assert first["choices"][0]["finish_reason"] == "tool_calls"
        assert message["content"] is None
        (call,) = message["tool_calls"]
        assert call["id"] == "call_0"
        assert call["function"]["name"] == "lookup"
        assert json.loads(call["function"]["arguments"]) == {}
        messages += [message, {"role": "tool", "tool_call_id": call["id"], "content": "found: 7"}]
        second = (await c.post(CHAT, json={"messages": messages, "tools": [tool]})).json()
    assert second["choices"][0]["finish_reason"] == "stop"
    assert "found: 7" in second["choices"][0]["message"]["content"]


async def test_anthropic_messages_route_answers_in_anthropic_shape() -> None:
    request = {
        "model": "claude-sim",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "What is 9 - 4?"}]}],
    }
    async with client(sim()) as c:
        body = (await c.post(MESSAGES, json=request)).json()
    assert body["id"].startswith("msg_")
    assert (body["type"], body["role"], body["model"]) == ("message", "assistant", "claude-sim")
    assert body["content"] == [{"type": "text", "text": "5"}]
    assert body["stop_reason"] == "end_turn"
    assert body["usage"]["input_tokens"] >= 1
    assert body["usage"]["output_tokens"] >= 1


async def test_anthropic_forced_tool_answers_with_a_tool_use_block() -> None:
    tool = {
        "name": "grade",
        "input_schema": {
            "type": "object",
            "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["score"],
        },
    }
    request = {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Grade this"}],
        "tools": [tool],
        "tool_choice": {"type": "tool", "name": "grade"},
    }
    async with client(sim()) as c:
        body = (await c.post(MESSAGES, json=request)).json()
    (block,) = body["content"]
    assert block["type"] == "tool_use"
    assert block["id"].startswith("toolu_")
    assert block["name"] == "grade"
    assert 1 <= block["input"]["score"] <= 5
    assert body["stop_reason"] == "tool_use"


async def test_stats_count_requests_statuses_tokens_and_reset() -> None:
    app = sim(fail_first=1)
    async with client(app) as c:
        await c.post(CHAT, json=chat())
        await c.post(CHAT, json=chat())
        await c.post(MESSAGES, json=chat("other"))
        stats = (await c.get("/stats")).json()
        assert stats == app.stats()
        assert stats["requests"] == 3
        assert stats["statuses"] == {"200": 1, "429": 2}
        assert stats["in_flight"] == 0
        assert stats["max_in_flight"] == 1
        assert stats["tokens"]["prompt"] >= 1
        assert stats["tokens"]["completion"] >= 1
        reset = await c.post("/stats/reset")
        assert reset.status_code == 200
        after = (await c.get("/stats")).json()
    assert after == {
        "requests": 0,
        "statuses": {},
        "in_flight": 0,
        "max_in_flight": 0,
        "tokens": {"prompt": 0, "completion": 0},
        "window_max_requests": 0,
        "window_max_tokens": 0,
        "batches": {
            name: {
                **dict.fromkeys(
                    ("created", "lines", "succeeded", "errored", "expired", "canceled", "failed"),
                    0,
                ),
                "tokens": {"prompt": 0, "completion": 0},
            }
            for name in ("openai", "anthropic")
        },
    }


async def test_unknown_path_is_404_and_wrong_method_is_405() -> None:
    async with client(sim()) as c:
        missing = await c.get("/v1/nothing")
        wrong = await c.get(CHAT)
        wrong_stats = await c.post("/stats")
    assert missing.status_code == 404
    assert "message" in missing.json()["error"]
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "POST"
    assert wrong_stats.status_code == 405


async def test_body_that_is_not_json_is_400_in_the_route_error_format() -> None:
    async with client(sim()) as c:
        openai = await c.post(CHAT, content=b"{not json")
        anthropic = await c.post(MESSAGES, content=b"[1, 2]")
        no_messages = await c.post(CHAT, json={"model": "m"})
        streaming = await c.post(MESSAGES, json=chat(max_tokens=10, stream=True))
    assert openai.status_code == 400
    assert openai.json()["error"]["type"] == "invalid_request_error"
    assert anthropic.status_code == 400
    assert anthropic.json()["type"] == "error"
    assert anthropic.json()["error"]["type"] == "invalid_request_error"
    assert no_messages.status_code == 400
    assert "messages" in no_messages.json()["error"]["message"]
    assert streaming.status_code == 400  # the Anthropic route does not stream
    assert streaming.json()["type"] == "error"


async def test_fail_first_fails_the_first_attempt_of_each_distinct_request() -> None:
    async with client(sim(fail_first=1, retry_after=1.0)) as c:
        first = await c.post(CHAT, json=chat("a"))
        retried = await c.post(CHAT, json=chat("a"))
        other = await c.post(CHAT, json=chat("b"))
    assert first.status_code == 429
    assert first.headers["retry-after"] == "1"
    assert first.headers["retry-after-ms"] == "1000"
    assert first.json()["error"]["code"] == "rate_limit_exceeded"
    assert retried.status_code == 200
    assert other.status_code == 429


async def test_fail_first_status_503_carries_retry_after_and_500_does_not() -> None:
    async with client(sim(fail_first=1, fail_first_status=503, retry_after=0.25)) as c:
        unavailable = await c.post(CHAT, json=chat())
    async with client(sim(fail_first=1, fail_first_status=500)) as c:
        broken = await c.post(CHAT, json=chat())
    assert unavailable.status_code == 503
    assert unavailable.headers["retry-after"] == "0.25"
    assert unavailable.headers["retry-after-ms"] == "250"
    assert broken.status_code == 500
    assert "retry-after" not in broken.headers


async def test_fault_rate_of_one_fails_every_attempt() -> None:
    app = sim(fault_rates={503: 1.0})
    async with client(app) as c:
        responses = [await c.post(CHAT, json=chat()) for _ in range(3)]
        anthropic = await c.post(MESSAGES, json=chat())
    assert [r.status_code for r in responses] == [503, 503, 503]
    assert all(r.headers["retry-after"] == "1" for r in responses)
    assert responses[0].json()["error"]["type"] == "server_error"
    assert anthropic.json()["error"]["type"] == "overloaded_error"
    assert app.stats()["statuses"] == {"503": 4}


async def test_fault_rates_are_drawn_in_proportion() -> None:
    bodies = [chat(f"q{i}") for i in range(400)]
    statuses = await post_all(sim(fault_rates={500: 0.25, 408: 0.25}), bodies)
    assert 60 < statuses.count(500) < 140
    assert 60 < statuses.count(408) < 140
    assert statuses.count(200) + statuses.count(500) + statuses.count(408) == 400


async def test_fault_pattern_does_not_depend_on_arrival_order() -> None:
    config = {"fault_rates": {429: 0.2, 500: 0.1, 502: 0.1}, "seed": 7}
    bodies = [chat(f"question {i}") for i in range(60)]
    forward = await post_all(sim(**config), bodies)
    backward = await post_all(sim(**config), bodies[::-1])
    other_seed = await post_all(sim(**{**config, "seed": 8}), bodies)
    assert forward == backward[::-1]
    assert forward != other_seed


async def test_same_seed_gives_the_same_answers_and_another_seed_other_numbers() -> None:
    schema = {"type": "object", "properties": {f"x{i}": {"type": "number"} for i in range(5)}}
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    request = chat("Rate it", response_format=fmt)

    async def content(seed: int) -> str:
        async with client(sim(seed=seed)) as c:
            body = (await c.post(CHAT, json=request)).json()
        return str(body["choices"][0]["message"]["content"])

    assert await content(1) == await content(1)
    assert await content(1) != await content(2)


async def test_malformed_rate_sends_a_200_that_is_not_json() -> None:
    async with client(sim(malformed_rate=1.0)) as c:
        response = await c.post(CHAT, json=chat())
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.content)


async def test_truncated_rate_sends_half_a_json_body_with_a_matching_content_length() -> None:
    async with client(sim(truncated_rate=1.0)) as c:
        cut = await c.post(CHAT, json=chat())
    async with client(sim()) as c:
        whole = await c.post(CHAT, json=chat())
    assert cut.status_code == 200
    assert int(cut.headers["content-length"]) == len(cut.content)
    assert len(cut.content) == len(whole.content) // 2
    assert cut.content.startswith(b'{"id":"chatcmpl-')
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.content)


async def test_hanging_request_never_answers_and_leaves_in_flight_when_cancelled() -> None:
    app = sim(hang_rate=1.0)
    async with client(app) as c:
        with pytest.raises(TimeoutError):
            with anyio.fail_after(0.2):
                await c.post(CHAT, json=chat())
        assert app.stats()["in_flight"] == 0
    stats = app.stats()
    assert stats["max_in_flight"] == 1
    assert stats["requests"] == 1
    assert stats["statuses"] == {}


async def test_concurrency_cap_answers_429_with_retry_after_at_once() -> None:
    app = sim(latency=0.2, latency_distribution="fixed", max_concurrency=2, retry_after=3.0)
    rejected: list[httpx.Response] = []
    served: list[httpx.Response] = []
    async with client(app) as c:

        async def one(i: int) -> None:
            started = time.monotonic()
            response = await c.post(CHAT, json=chat(f"q{i}"))
            if response.status_code == 429:
                assert time.monotonic() - started < 0.1
                rejected.append(response)
            else:
                served.append(response)

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(one, i)
    assert len(served) == 2
    assert len(rejected) == 3
    assert all(r.headers["retry-after"] == "3" for r in rejected)
    stats = app.stats()
    assert stats["max_in_flight"] == 2
    assert stats["statuses"] == {"200": 2, "429": 3}


async def test_rpm_cap_answers_429_with_seconds_until_a_slot_frees() -> None:
    async with client(sim(rpm=3)) as c:
        statuses = [(await c.post(CHAT, json=chat(f"q{i}"))).status_code for i in range(3)]
        over = await c.post(CHAT, json=chat("one too many"))
    assert statuses == [200, 200, 200]
    assert over.status_code == 429
    assert 59 <= int(over.headers["retry-after"]) <= 60
    assert "per minute" in over.json()["error"]["message"]


async def test_fixed_latency_delays_every_answer() -> None:
    async with client(sim(latency=0.1, latency_distribution="fixed")) as c:
        started = time.monotonic()
        await c.post(CHAT, json=chat())
    assert time.monotonic() - started >= 0.1


async def test_lifespan_startup_and_shutdown_are_acknowledged() -> None:
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await SimProvider()({"type": "lifespan"}, receive, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_reset_forgets_attempts_so_fail_first_applies_again() -> None:
    app = sim(fail_first=1)
    async with client(app) as c:
        assert (await c.post(CHAT, json=chat())).status_code == 429
        app.reset_stats()
        assert (await c.post(CHAT, json=chat())).status_code == 200
        app.reset()
        assert (await c.post(CHAT, json=chat())).status_code == 429
