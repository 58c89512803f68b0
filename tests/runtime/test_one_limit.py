"""One limit per process: threads and event loops share MAX_CONCURRENT_LLM_CALLS, as the
provider's own count of requests in flight shows."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from asynceval import OpenAIChatModel

from ._benches import OneCall, tasks


def _stats(base_url: str) -> dict[str, Any]:
    return httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=5).json()  # type: ignore[no-any-return]


def _in_threads(*targets: Callable[[], Any]) -> list[Any]:
    results: list[Any] = [None] * len(targets)
    errors: list[BaseException] = []

    def call(index: int, target: Callable[[], Any]) -> None:
        try:
            results[index] = target()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i, t)) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)
    return results


def test_two_threads_running_benchmarks_share_one_limit(
    sim_server: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `run_sync` calls in two threads at MAX_CONCURRENT_LLM_CALLS=5: the provider sees 5."""
    base_url = sim_server("--latency", "0.05")
    monkeypatch.setenv("LLM_BASE_URL", base_url)
    monkeypatch.setenv("LLM_MODEL", "sim")
    monkeypatch.setenv("MAX_CONCURRENT_LLM_CALLS", "5")
    first, second = _in_threads(
        lambda: OneCall().run_sync(tasks("a", 30)), lambda: OneCall().run_sync(tasks("b", 30))
    )
    assert [r["status"] for r in first + second] == ["success"] * 60
    stats = _stats(base_url)
    assert stats["requests"] == 60
    assert stats["max_in_flight"] == 5


def test_one_model_in_two_loops_at_once_shares_the_limit_and_works(
    sim_server: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One model object used by two event loops in two threads at once: every call succeeds and
    the provider never sees more than the limit."""
    base_url = sim_server("--latency", "0.05")
    monkeypatch.setenv("MAX_CONCURRENT_LLM_CALLS", "5")
    model = OpenAIChatModel("sim", base_url=base_url)

    async def many(n: int) -> list[str]:
        answers: list[str] = []

        async def one(i: int) -> None:
            answers.append((await model.generate(f"What is {i} + 2?")).text)

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        return answers

    first, second = _in_threads(lambda: anyio.run(many, 20), lambda: anyio.run(many, 20))
    assert len(first) == len(second) == 20
    stats = _stats(base_url)
    assert stats["statuses"] == {"200": 40} and stats["max_in_flight"] == 5
