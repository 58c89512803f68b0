"""A rate 429 on one Dask worker pauses the endpoint on every worker before the refused worker's
lease goes back: proved by the arrival times a loopback provider of the test's own records."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import anyio
import pytest
from distributed import LocalCluster

from asynceval import Benchmark, OpenAIChatModel, Settings, Task
from asynceval.distributed import DaskBackend

from ..conftest import EventLog

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RETRY_AFTER_S = 2.0
SLACK_S = 0.02  # the provider's clock is the test's; the slack is for a request that left
# at the pause's end and was logged a moment before the refused worker's own clock said so


class RefusesOnce:
    """An OpenAI-compatible provider (ASGI) that answers its `refuse_at`-th request (1-based;
    0: none) with a 429 and `Retry-After`, every other after `latency_s`, and logs each
    request's arrival (`time.monotonic()`, the test process's clock) and answer."""

    def __init__(self, refuse_at: int = 0, latency_s: float = 0.02) -> None:
        self.refuse_at = refuse_at
        self.latency_s = latency_s
        self.log: list[tuple[float, int]] = []  # (arrival, status), in arrival order
        self.refused_wall = 0.0  # the 429's arrival by the wall clock (the events' clock)
        self._lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        arrived, wall = time.monotonic(), time.time()
        while (await receive()).get("more_body"):
            pass
        with self._lock:
            refused = len(self.log) + 1 == self.refuse_at
            self.log.append((arrived, 429 if refused else 200))
            if refused:
                self.refused_wall = wall
        if refused:
            await _answer(send, 429, {"error": {"message": "rate limited"}}, RETRY_AFTER_S)
            return
        await asyncio.sleep(self.latency_s)
        body = {
            "id": "c1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "4"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
        await _answer(send, 200, body)


async def _answer(send: Any, status: int, body: dict[str, Any], retry_after: float = 0) -> None:
    headers = [(b"content-type", b"application/json")]
    if retry_after:
        headers.append((b"retry-after", str(int(retry_after)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


class OneCall(Benchmark):
    """Each repetition asks a provider once: the first, or for task ids in `second_for` the
    second (another endpoint)."""

    def __init__(
        self, base_url: str, second: str = "", second_for: frozenset[str] = frozenset(), **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.base_url = base_url
        self.second = second
        self.second_for = second_for

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        url = self.second if task.id in self.second_for else self.base_url
        model = OpenAIChatModel(model="m", base_url=url, api_key="k")

        async def agent(query: str) -> str:
            return (await model.generate([{"role": "user", "content": query}])).text

        return [agent], {}


async def test_a_rate_429_pauses_every_worker_before_its_lease_goes_back(
    cluster: LocalCluster, asgi_server: Callable[[Any], int]
) -> None:
    """Limit 1 across two workers, both with callers waiting for the one lease; the 4th request
    gets a 429 with Retry-After 2. The refused worker gives its lease back at once, yet no
    request from any worker reaches the provider during the pause; the run completes."""
    provider = RefusesOnce(refuse_at=4)
    url = f"http://127.0.0.1:{asgi_server(provider)}/v1"
    settings = Settings(
        max_concurrent_llm_calls=1,
        max_concurrent_tasks=8,
        retry_initial_delay=0.01,
        retry_max_attempts=3,
    )
    tasks = [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(16)]
    with anyio.fail_after(60):
        reports = await OneCall(url, settings=settings).run(
            tasks, backend=DaskBackend(cluster.scheduler_address)
        )
    assert {r["status"] for r in reports} == {"success"}, reports
    log = provider.log
    assert len(log) == 17 and [status for _, status in log].count(429) == 1, log
    refused_at = next(at for at, status in log if status == 429)
    during = [
        round(at - refused_at, 3) for at, _ in log if 0 < at - refused_at < RETRY_AFTER_S - SLACK_S
    ]
    assert not during, f"requests {during} s into the {RETRY_AFTER_S} s pause"


async def test_a_pause_on_one_endpoint_leaves_the_others_calls_going(
    cluster: LocalCluster, asgi_server: Callable[[Any], int], event_log: EventLog
) -> None:
    """Limit 1 across two workers, half the tasks for endpoint P, half for Q; P's 3rd request
    gets a 429 with Retry-After 2. No request reaches P during its pause, while Q's calls go on
    through it on both workers: neither the cluster's one lease nor a worker's own slot is held
    back from them by a call waiting for P."""
    paused, other = RefusesOnce(refuse_at=3), RefusesOnce()
    p_url = f"http://127.0.0.1:{asgi_server(paused)}/v1"
    q_url = f"http://127.0.0.1:{asgi_server(other)}/v1"
    settings = Settings(
        max_concurrent_llm_calls=1,
        max_concurrent_tasks=8,
        retry_initial_delay=0.01,
        retry_max_attempts=3,
    )
    tasks = [Task(query=f"What is {i} + 2?", id=f"t{i}") for i in range(48)]
    second_for = frozenset(t.id for t in tasks[1::2])
    bench = OneCall(p_url, second=q_url, second_for=second_for, settings=settings)
    with anyio.fail_after(60):
        reports = await bench.run(tasks, backend=DaskBackend(cluster.scheduler_address))
    assert {r["status"] for r in reports} == {"success"}, reports
    assert len(paused.log) == 25 and len(other.log) == 24
    refused_at = next(at for at, status in paused.log if status == 429)
    window = refused_at, refused_at + RETRY_AFTER_S - SLACK_S
    p_during = [round(at - refused_at, 3) for at, _ in paused.log if window[0] < at < window[1]]
    q_during = [round(at - refused_at, 3) for at, _ in other.log if window[0] < at < window[1]]
    assert not p_during, f"requests to P {p_during} s into its {RETRY_AFTER_S} s pause"
    assert q_during, f"no request to Q during P's pause: {other.log}"
    start, end = paused.refused_wall, paused.refused_wall + RETRY_AFTER_S - SLACK_S
    q_workers = {
        e["worker"]
        for e in event_log.named("acquired")
        if e["task_id"] in second_for and start < _wall(e["timestamp"]) < end
    }
    assert len(q_workers) == 2, q_workers


def _wall(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
