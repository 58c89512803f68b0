"""Rate witnesses at the provider: the most requests and tokens within any `rate_window`."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import httpx
import pytest

from asynceval.cli import main

from ._app import CHAT, chat, client, sim


async def burst(c: httpx.AsyncClient, texts: list[str]) -> list[httpx.Response]:
    """POST one request per text, all at once; the responses in the order of `texts`."""
    responses: list[httpx.Response | None] = [None] * len(texts)

    async def one(i: int) -> None:
        responses[i] = await c.post(CHAT, json=chat(texts[i]))

    async with anyio.create_task_group() as tg:
        for i in range(len(texts)):
            tg.start_soon(one, i)
    return [r for r in responses if r is not None]


def tokens(responses: list[httpx.Response]) -> int:
    """Prompt + completion tokens of the 200 answers, as their usage reports them."""
    return sum(r.json()["usage"]["total_tokens"] for r in responses if r.status_code == 200)


async def test_two_bursts_a_window_apart_peak_at_one_burst() -> None:
    app = sim(rate_window=0.3)
    async with client(app) as c:
        first = await burst(c, [f"first {i}" for i in range(5)])
        await anyio.sleep(0.35)  # every answer of the first burst has left the window
        second = await burst(c, [f"second {i} with a longer prompt" for i in range(5)])
    stats = app.stats()
    assert stats["requests"] == 10
    assert stats["window_max_requests"] == 5
    assert stats["window_max_tokens"] == max(tokens(first), tokens(second))
    assert tokens(first) != tokens(second)  # the peak says which burst it was
    assert stats["window_max_tokens"] < stats["tokens"]["prompt"] + stats["tokens"]["completion"]


async def test_requests_within_one_window_all_count_rejected_ones_included() -> None:
    app = sim(rpm=2)  # the default window: 60 s
    async with client(app) as c:
        responses = await burst(c, [f"q{i}" for i in range(5)])
        bad = await c.post(CHAT, content=b"{not json")
    assert sorted(r.status_code for r in responses) == [200, 200, 429, 429, 429]
    assert bad.status_code == 400
    stats = app.stats()
    assert stats["window_max_requests"] == 6  # what the provider saw, not what it admitted
    assert stats["window_max_tokens"] == tokens(responses)  # only the two answers carry tokens


async def test_the_rate_witnesses_restart_after_a_stats_reset() -> None:
    app = sim()
    async with client(app) as c:
        await burst(c, [f"q{i}" for i in range(4)])
        assert app.stats()["window_max_requests"] == 4
        reset = (await c.post("/stats/reset")).json()
        assert (reset["window_max_requests"], reset["window_max_tokens"]) == (0, 0)
        after = await burst(c, ["again"])
    stats = app.stats()
    assert stats["window_max_requests"] == 1  # earlier arrivals no longer count
    assert stats["window_max_tokens"] == tokens(after)


async def test_truncated_answers_carry_no_tokens_into_the_witness() -> None:
    app = sim(truncated_rate=1.0)
    async with client(app) as c:
        await burst(c, ["a", "b"])
    stats = app.stats()
    assert (stats["window_max_requests"], stats["window_max_tokens"]) == (2, 0)


async def test_rpm_cap_uses_the_rate_window() -> None:
    app = sim(rpm=3, rate_window=0.5)
    async with client(app) as c:
        admitted = [(await c.post(CHAT, json=chat(f"q{i}"))).status_code for i in range(3)]
        over = await c.post(CHAT, json=chat("one too many"))
        wait = float(over.headers["retry-after"])
        await anyio.sleep(wait + 0.02)
        later = await c.post(CHAT, json=chat("after the window"))
    assert admitted == [200, 200, 200]
    assert over.status_code == 429
    # Sub-second window: Retry-After to the millisecond, not a whole second.
    assert 0 < wait <= 0.5
    assert int(over.headers["retry-after-ms"]) == round(wait * 1000)
    assert "3 requests per 0.5 s" in over.json()["error"]["message"]
    assert later.status_code == 200
    assert app.stats()["statuses"] == {"200": 4, "429": 1}


def test_sim_serve_takes_the_rate_window_and_attempt_memory(
    sim_server: Callable[..., str],
) -> None:
    # 5 s: short enough to tell from a minute, long enough for a slow machine's 4 requests.
    base_url = sim_server(
        "--latency", "0", "--rpm", "2", "--rate-window", "5", "--attempt-memory", "1"
    )
    root = base_url.removesuffix("/v1")
    with httpx.Client(base_url=root, timeout=5) as c:
        statuses = [c.post(CHAT, json=chat(f"q{i}")).status_code for i in range(3)]
        over = c.post(CHAT, json=chat("q3"))
        stats = c.get("/stats").json()
    assert statuses == [200, 200, 429]
    assert 1 <= int(over.headers["retry-after"]) <= 5  # a 5 s window, not a minute
    assert "2 requests per 5 s" in over.json()["error"]["message"]
    assert stats["window_max_requests"] == 4


def test_sim_serve_refuses_a_rate_window_or_attempt_memory_out_of_range(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sim", "serve", "--rate-window", "0"]) == 2
    assert "rate_window" in capsys.readouterr().err
    assert main(["sim", "serve", "--attempt-memory", "0"]) == 2
    assert "attempt_memory" in capsys.readouterr().err
