"""The simulated provider announces its RPM/TPM caps in rate-limit headers, in the dialect of
each route, as the funnel reads them; its concurrency 429s say no budget is spent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import anyio
import httpx
import pytest

from asynceval.limits import read_rate_headers

from ._app import CHAT, chat, client, sim

MESSAGES = {"model": "sim-1", "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]}


@pytest.mark.parametrize(
    ("path", "body"),
    [(CHAT, chat()), ("/v1/responses", {"model": "sim-1", "input": "Hello?"})],
)
async def test_openai_routes_announce_the_rpm_cap_and_refuse_with_it_spent(
    path: str, body: dict[str, object]
) -> None:
    app = sim(rpm=2)
    async with client(app) as c:
        answers = [await c.post(path, json=body) for _ in range(3)]
    first, second, refused = answers
    assert first.status_code == second.status_code == 200 and refused.status_code == 429
    assert first.headers["x-ratelimit-limit-requests"] == "2"
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert second.headers["x-ratelimit-remaining-requests"] == "0"
    said = read_rate_headers(first.headers)
    assert said is not None and said.dialect == "openai"
    assert said.requests.reset == pytest.approx(60, abs=0.5)  # the window whole again
    refusal = read_rate_headers(refused.headers)
    assert refusal is not None and refusal.requests.remaining == 0 and refusal.empty
    assert int(refused.headers["retry-after-ms"]) >= 1000
    assert "x-ratelimit-limit-tokens" not in first.headers  # no TPM cap, none announced


async def test_the_messages_route_announces_in_anthropic_headers_per_minute() -> None:
    """`rpm=300, rate_window=5` is 3600 a minute, and the reset is an RFC 3339 time."""
    app = sim(rpm=300, rate_window=5)
    async with client(app) as c:
        answer = await c.post("/v1/messages", json=MESSAGES)
    assert answer.status_code == 200
    assert answer.headers["anthropic-ratelimit-requests-limit"] == "3600"
    assert answer.headers["anthropic-ratelimit-requests-remaining"] == "299"
    assert not any(name.startswith("x-ratelimit-") for name in answer.headers)
    datetime.fromisoformat(answer.headers["anthropic-ratelimit-requests-reset"])
    said = read_rate_headers(answer.headers)
    assert said is not None and said.dialect == "anthropic"
    assert said.requests.limit == 3600 and said.requests.reset == pytest.approx(5, abs=0.5)


async def test_the_tpm_cap_is_announced_and_refuses_with_tokens_spent() -> None:
    app = sim(tpm=30)
    async with client(app) as c:
        answers = []
        for i in range(10):
            answers.append(await c.post(CHAT, json=chat(f"question number {i}")))
            if answers[-1].status_code == 429:
                break
    used = sum(a.json()["usage"]["total_tokens"] for a in answers if a.status_code == 200)
    assert answers[-1].status_code == 429 and used >= 30
    first = answers[0].headers
    assert first["x-ratelimit-limit-tokens"] == "30"
    assert int(first["x-ratelimit-remaining-tokens"]) == 30  # counted when answered
    refused = read_rate_headers(answers[-1].headers)
    assert refused is not None and refused.tokens.remaining == 0 and refused.empty


async def test_a_concurrency_429_does_not_say_the_budget_is_spent() -> None:
    app = sim(rpm=100, max_concurrency=1, latency=0.2)
    async with client(app) as c:
        answers: list[httpx.Response] = []

        async def one() -> None:
            answers.append(await c.post(CHAT, json=chat()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            await anyio.sleep(0.05)
            tg.start_soon(one)
    busy = next(a for a in answers if a.status_code == 429)
    said = read_rate_headers(busy.headers)
    assert said is not None and said.requests.remaining == 99 and not said.empty
    async with client(sim(max_concurrency=5)) as c:  # no rate cap: nothing announced
        assert read_rate_headers((await c.post(CHAT, json=chat())).headers) is None


def test_sim_serve_takes_tpm_and_announces_over_a_socket(
    sim_server: Callable[..., str],
) -> None:
    base_url = sim_server("--rpm", "300", "--rate-window", "5", "--tpm", "100000", "--latency", "0")
    answer = httpx.post(f"{base_url}/chat/completions", json=chat())
    assert answer.status_code == 200
    assert answer.headers["x-ratelimit-limit-requests"] == "3600"
    assert answer.headers["x-ratelimit-limit-tokens"] == "1200000"
