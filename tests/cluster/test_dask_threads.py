"""On a Dask cluster too, a sync agent's own thread pool carries its repetition's context on the
worker: its calls are budgeted by the cluster's one ledger and counted in the repetition's
usage (checked against the provider's count of requests and the released events' cost)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import anyio
import httpx
import pytest
from distributed import LocalCluster

from asynceval import Settings
from asynceval.distributed import DaskBackend

from ..conftest import EventLog, start_sim_server, stop_sim_server
from ..cost._support import released_cost
from ..cost.threads_bench import FAN_OUT, Pool


@pytest.fixture
def sim() -> Iterator[str]:
    url, process = start_sim_server("--latency", "0.01")
    yield url
    stop_sim_server(process)


@pytest.mark.cluster
@pytest.mark.slow
async def test_a_thread_pool_on_the_workers_is_budgeted_and_counted(
    cluster: LocalCluster, sim: str, tmp_path: Path, event_log: EventLog
) -> None:
    settings = Settings(llm_base_url=sim, llm_model="asynceval-sim", max_concurrent_tasks=4)
    bench = Pool(settings=settings)
    budget = Decimal("0.002")  # about 40 of the 80 calls' cost, a few of their worst cases
    with anyio.fail_after(120):
        reports = await bench.run(
            bench.default_tasks(),
            backend=DaskBackend(cluster.scheduler_address),
            results_path=tmp_path / "results.jsonl",
            max_cost_usd=budget,
        )
    async with httpx.AsyncClient() as client:
        sent = (await client.get(sim.removesuffix("/v1") + "/stats")).json()["requests"]
    statuses = Counter(r["status"] for r in reports)
    assert statuses["success"] >= 1 and statuses["budget_exhausted"] >= 1, statuses
    assert 0 < released_cost(event_log.all()) <= budget
    assert sum(r["usage"]["llm_calls"] for r in reports) == sent
    assert all(r["usage"]["llm_calls"] == FAN_OUT for r in reports if r["status"] == "success")
