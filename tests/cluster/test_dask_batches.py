"""The batch lane on Dask (DESIGN sections 10 and 16): the workers' calls join the caller's
batches, so a run on two workers makes the batches one process would (one per turn of its
agents), the provider sees each call's line once, the answers are the live endpoint's, the
calls are priced at the batch price, and a cancelled run cancels its open batch."""

from __future__ import annotations

import gc
import json
from collections import Counter
from typing import Any

import anyio
import httpx
import pytest
from distributed import Client, LocalCluster

from asynceval import Benchmark, OpenAIChatModel, Settings, Task
from asynceval.distributed import DaskBackend

from ..conftest import EventLog, start_sim_server, stop_sim_server

N_TASKS = 24


class TwoTurns(Benchmark):
    """Each repetition asks the provider twice, the second turn built on the first answer."""

    def __init__(self, base_url: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.base_url = base_url

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel(model="asynceval-sim", base_url=self.base_url, api_key="k")

        async def agent(query: str) -> str:
            messages = [{"role": "user", "content": query}]
            first = await model.generate(messages, max_tokens=16)
            messages += [
                {"role": "assistant", "content": first.text},
                {"role": "user", "content": "Are you sure?"},
            ]
            second = await model.generate(messages, max_tokens=16)
            return f"{first.text} | {second.text}"

        return [agent], {}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Any, user: Any
    ) -> Any:
        return [lambda task, answer, traces: {"answer": answer}]


def tasks() -> list[Task]:
    return [Task(query=f"What is {i} + 2?", id=f"t{i:02d}") for i in range(N_TASKS)]


def _stats(base_url: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(base_url.removesuffix("/v1") + "/stats").json()
    return stats


def _batches(base_url: str) -> list[dict[str, Any]]:
    listed = httpx.get(f"{base_url}/batches", headers={"authorization": "Bearer k"}).json()
    batches: list[dict[str, Any]] = listed["data"]
    return batches


def _settings(lane: str) -> Settings:
    return Settings(
        llm_lane=lane,
        llm_batch_linger=2.0,
        llm_batch_poll=0.1,
        max_concurrent_llm_calls=4,
        max_concurrent_tasks=N_TASKS,
    )


@pytest.fixture
def sim() -> Any:
    url, process = start_sim_server("--batch-delay", "0.3")
    yield url
    stop_sim_server(process)


@pytest.mark.cluster
@pytest.mark.slow
async def test_workers_calls_join_the_callers_batches(
    cluster: LocalCluster, sim: str, event_log: EventLog
) -> None:
    """24 two-turn repetitions on two workers: two batches (one per turn, each holding both
    workers' lines), made by the caller; 48 lines, each once; every answer the live run's;
    each repetition's cost half of its live cost."""
    backend = DaskBackend(cluster.scheduler_address)
    with anyio.fail_after(120):
        batched = await TwoTurns(sim, settings=_settings("batch")).run(tasks(), backend=backend)
    counts = _stats(sim)["batches"]["openai"]
    assert counts["lines"] == 2 * N_TASKS, counts  # no line submitted twice
    assert counts["succeeded"] == 2 * N_TASKS, counts
    assert counts["created"] == 2, counts  # one per turn: the workers' lines went together

    events = event_log.all()
    submitted = [e for e in events if e["event"] == "batch_submitted"]
    assert len(submitted) == 2 and sum(e["requests"] for e in submitted) == 2 * N_TASKS, submitted
    assert all("worker" not in e for e in submitted)  # the caller made them
    finished = [e for e in events if e["event"] == "task_finished"]
    assert len({e["worker"] for e in finished}) == 2  # both workers ran repetitions
    # A batch's creation held a lease of the run's semaphore: the caller's slot, released.
    creations = [e for e in events if e["event"] == "released" and e.get("agent") == "batch"]
    assert len(creations) >= 2 and all("worker" not in e for e in creations), creations

    live_stats_before = _stats(sim)["requests"]
    with anyio.fail_after(120):
        live = await TwoTurns(sim, settings=_settings("live")).run(tasks(), backend=backend)
    assert _stats(sim)["requests"] > live_stats_before
    by_task = {r["task_id"]: r for r in live}
    assert sorted(by_task) == sorted(r["task_id"] for r in batched)
    for report in batched:
        twin = by_task[report["task_id"]]
        assert report["status"] == twin["status"] == "success", (report, twin)
        assert (
            report["eval"][0]["answer"] == twin["eval"][0]["answer"]
        )  # the simulator is deterministic
        assert report["usage"]["llm_calls"] == twin["usage"]["llm_calls"] == 2
        assert report["usage"]["cost_usd"] == pytest.approx(twin["usage"]["cost_usd"] / 2)


@pytest.mark.cluster
@pytest.mark.slow
async def test_a_cancelled_run_cancels_the_batch_its_workers_joined(
    cluster: LocalCluster, event_log: EventLog
) -> None:
    """A run cancelled while its workers' calls wait on a batch: the caller cancels the batch
    at the provider (no call waits for it any more), and the run ends."""
    url, process = start_sim_server("--batch-delay", "60")
    try:
        backend = DaskBackend(cluster.scheduler_address)
        bench = TwoTurns(url, settings=_settings("batch"))
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    await bench.run(tasks(), backend=backend)

                tg.start_soon(run)
                for _ in range(1200):  # until the workers' first calls wait on a batch
                    if any(e["event"] == "batch_submitted" for e in event_log.all()):
                        break
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
        # The cancelled run closed its client (its close is shielded): none is left open to
        # close itself at garbage collection, on a loop gone by then.
        gc.collect()
        # (type(), not isinstance: the openai module's lazy proxies answer __class__ by
        # making the module's client, which later tests would see as a bypass)
        left = [c for c in gc.get_objects() if type(c) is Client and c.status != "closed"]
        assert not left, left
        statuses = Counter(batch["status"] for batch in _batches(url))
        assert set(statuses) <= {"cancelling", "cancelled"} and statuses.total() == 1, statuses
        lines = [json.dumps(e) for e in event_log.all() if e["event"].startswith("batch_")]
        assert any('"batch_completed"' in line for line in lines), lines
        # the caller's batch, cancelled by the caller (a worker's own would carry `worker`)
        made = [e for e in event_log.all() if e["event"].startswith("batch_")]
        assert made and all("worker" not in e for e in made), made
    finally:
        stop_sim_server(process)
