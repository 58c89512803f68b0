"""Dask scale-out (`DaskBackend`) against one process, measured side by side in one run.

(a) CPU-bound scoring: N repetitions, each one 50 ms LLM call (the embedded simulated provider,
answered in-process wherever the repetition runs) and 20 ms of pure-Python work in its
evaluator, limit 50. Once in this process, once on a LocalCluster of 2 worker processes (started
before the clock starts, as a cluster is before a run). Throughput ratio cluster / one process;
the goal is >= 1.7 on 2 cores.

(b) W1 through the cluster: N tasks, each one 50 ms call, limit 50, over loopback HTTP against
`asynceval sim serve` in a subprocess, results file on. Efficiency = ideal / wall, ideal = N x
latency / limit, for the in-process engine and for the cluster in the same run (goal >= 0.8).

    python benchmarks/scale_out.py                      # (a) N=400, (b) N=2000
    python benchmarks/scale_out.py --scoring 200 --w1 1000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import dask.config
from distributed import LocalCluster

from asynceval import Benchmark, OpenAIChatModel, Settings, Task, configure_logging
from asynceval.distributed import DaskBackend
from asynceval.engine import read_records
from asynceval.sim import SimConfig

sys.path.insert(0, str(Path(__file__).parent))
from call_path import sim_server

WORKERS = 2


def burn(seconds: float) -> int:
    """Pure-Python work for about `seconds` of one core (a scoring metric's parsing, say)."""
    end, count = time.thread_time() + seconds, 0
    while time.thread_time() < end:
        count += sum(i * i for i in range(200))
    return count


class Scored(Benchmark):
    """One LLM call per repetition, then `score_cpu_s` of CPU in its evaluator. The model is
    built where the repetition runs: `base_url` None means the embedded simulated provider."""

    def __init__(self, base_url: str | None, latency: float, score_cpu_s: float, **kw: Any):
        super().__init__(**kw)
        self.base_url = base_url
        self.latency = latency
        self.score_cpu_s = score_cpu_s

    def model(self) -> OpenAIChatModel:
        if self.base_url is None:
            return OpenAIChatModel(sim_config=SimConfig(latency=self.latency))
        return OpenAIChatModel("sim", base_url=self.base_url)

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = self.model()

        async def agent(query: Any) -> str:
            return (await model.generate(query, agent="solver")).text

        return [agent], {}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Mapping[str, Any], user: Any
    ) -> list[Any]:
        cpu = self.score_cpu_s

        async def score(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            return {"passed": bool(answer), "work": burn(cpu) if cpu else 0}

        return [score]


def tasks(n: int, prefix: str) -> Iterator[Task]:
    for index in range(n):
        yield Task(query=f"What is {index} + {index}?", id=f"{prefix}-{index}")


async def timed(bench: Benchmark, n: int, prefix: str, out: Path, backend: Any = None) -> float:
    """Wall seconds of one run of `n` tasks, results file on."""
    results = out / f"{prefix}-{time.monotonic_ns()}.jsonl"
    started = time.perf_counter()
    await bench.run(tasks(n, prefix), results_path=results, collect=False, backend=backend)
    wall = time.perf_counter() - started
    records, _ = read_records(results)
    statuses = Counter(r["status"] for r in records if r.get("type") != "header")
    if statuses != Counter(success=n):  # a figure over failed repetitions means nothing
        raise SystemExit(f"{prefix}: not every repetition succeeded: {dict(statuses)}")
    return wall


async def scoring(n: int, address: str, out: Path) -> None:
    settings = Settings(max_concurrent_llm_calls=50, max_concurrent_tasks=50)
    bench = Scored(None, 0.05, 0.02, settings=settings)
    await timed(bench, 20, "warm", out)
    await timed(bench, 20, "warm", out, DaskBackend(address))
    local = await timed(bench, n, "a-local", out)
    cluster = await timed(bench, n, "a-cluster", out, DaskBackend(address))
    floor = n * 0.02
    print(
        f"(a) {n} repetitions x (one 50 ms call + 20 ms CPU scoring), limit 50; "
        f"one core's CPU floor {floor:.1f} s"
    )
    print(f"    one process        {local:6.2f} s  {n / local:6.1f} rep/s")
    print(f"    {WORKERS} Dask workers     {cluster:6.2f} s  {n / cluster:6.1f} rep/s")
    print(f"    throughput ratio cluster / one process: {local / cluster:.2f}")


async def w1(n: int, address: str, base_url: str, out: Path) -> None:
    settings = Settings(max_concurrent_llm_calls=50, max_concurrent_tasks=100)
    bench = Scored(base_url, 0.05, 0.0, settings=settings)
    ideal = n * 0.05 / 50
    await timed(bench, 100, "warm", out)
    await timed(bench, 100, "warm", out, DaskBackend(address))
    local = await timed(bench, n, "w1-local", out)
    cluster = await timed(bench, n, "w1-cluster", out, DaskBackend(address))
    print(f"(b) W1: {n} tasks x one 50 ms call, limit 50, loopback HTTP; ideal {ideal:.2f} s")
    print(f"    in-process engine  {local:6.2f} s  efficiency {ideal / local:.3f}")
    print(f"    {WORKERS} Dask workers     {cluster:6.2f} s  efficiency {ideal / cluster:.3f}")
    print(f"    cluster / in-process: {local / cluster:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scoring", type=int, default=400, help="repetitions in (a)")
    parser.add_argument("--w1", type=int, default=2000, help="tasks in (b)")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="asynceval-dask-"))
    configure_logging(Settings(log_file=str(out / "events.jsonl")))
    with (
        dask.config.set({"distributed.worker.daemon": True}),
        LocalCluster(
            n_workers=WORKERS,
            threads_per_worker=100,
            processes=True,
            dashboard_address=":0",
        ) as cluster,
    ):
        address = cluster.scheduler_address
        anyio.run(scoring, args.scoring, address, out)
        with sim_server(0.05) as base_url:
            anyio.run(w1, args.w1, address, base_url, out)


if __name__ == "__main__":
    main()
