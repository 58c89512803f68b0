"""On a Dask cluster the workers' spans join the caller's trace: each repetition carries the W3C
trace context of the run's span to its worker, whose repetition span is the run span's child and
whose calls' spans are the repetition's. Caller and workers export over OTLP/HTTP (set up from
OTEL_EXPORTER_OTLP_ENDPOINT, which the worker processes inherit) to one loopback collector."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ._collector import Collector

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SCRIPT = """
import asyncio
from distributed import LocalCluster
from asynceval import Benchmark, OpenAIChatModel, Task
from asynceval.distributed import DaskBackend

class Ask(Benchmark):
    async def setup_agents(self, agent_data, environment, task, user):
        model = OpenAIChatModel(model="sim-model")
        async def agent(query):
            return (await model.generate([{"role": "user", "content": query}])).text
        return [agent], {}

async def main():
    async with LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0",
        asynchronous=True,
    ) as cluster:
        tasks = [Task(id=f"t{i}", query=f"what is {i}+1?") for i in range(6)]
        reports = await Ask().run(tasks, backend=DaskBackend(cluster.scheduler_address))
        assert {r["status"] for r in reports} == {"success"}, reports

asyncio.run(main())
"""


def test_the_workers_repetition_and_call_spans_share_the_callers_trace() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with Collector() as collector:
        env = {**clean, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        env["OTEL_BSP_SCHEDULE_DELAY"] = "50"  # the workers export as their spans end
        subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True, timeout=180)
        [run] = collector.wait_for("asynceval.run", 1)
        repetitions = collector.wait_for("asynceval.repetition", 6)
        calls = collector.wait_for("chat sim-model", 6)
    assert len(repetitions) == 6 and len(calls) == 6
    assert {s.trace_id for s in repetitions + calls} == {run.trace_id}
    assert {s.parent_span_id for s in repetitions} == {run.span_id}
    assert {s.parent_span_id for s in calls} <= {s.span_id for s in repetitions}


def test_the_workers_spans_are_sent_by_the_runs_end_on_a_cluster_that_stays() -> None:
    """The workers' span processors hold their spans up to 30 s (OTEL_BSP_SCHEDULE_DELAY), and
    the cluster stays up after the run: the run's end sends the workers' spans all the same
    (each worker flushes as the caller takes its last events)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    stays = SCRIPT.replace(
        '        assert {r["status"] for r in reports} == {"success"}, reports\n',
        '        assert {r["status"] for r in reports} == {"success"}, reports\n'
        "        print('RUN_DONE', flush=True)\n"
        "        await asyncio.sleep(60)\n",
    )
    assert "RUN_DONE" in stays
    with Collector() as collector:
        env = {**clean, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint}
        env["OTEL_BSP_SCHEDULE_DELAY"] = "30000"
        script = subprocess.Popen(
            [sys.executable, "-c", stays], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert script.stdout is not None
            assert script.stdout.readline().strip() == "RUN_DONE"
            repetitions = collector.wait_for("asynceval.repetition", 6, timeout=5.0)
            calls = collector.wait_for("chat sim-model", 6, timeout=5.0)
        finally:
            script.kill()
            script.communicate(timeout=30)
    assert len(repetitions) == 6 and len(calls) == 6
