"""The engine against a bare loop, measured side by side in one run.

W1: N tasks, each one 50 ms LLM call, limit 50, over real loopback HTTP against `asynceval sim
serve` in a subprocess, with the event log and the results file on. Efficiency = ideal / wall,
ideal = N x latency / limit. The bare loop is 50 anyio workers sharing the N calls on one
`httpx.AsyncClient` over the httpx-aiohttp transport (the fastest client measured). Then the peak
RSS of whole engine runs at N=10,000 and N=100,000 in fresh subprocesses (tasks generated lazily,
reports written to the results file and not kept), to show memory stays flat as N grows.

    python benchmarks/engine.py                 # W1 with N=10,000, 2 rounds, then RSS
    python benchmarks/engine.py --tasks 2000 --rounds 1 --rss-tasks 10000
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
from httpx_aiohttp import AiohttpTransport

from asynceval import Benchmark, OpenAIChatModel, Settings, Task, configure_logging
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig

sys.path.insert(0, str(Path(__file__).parent))
from call_path import BODY, run_workers, sim_server


class OneCall(Benchmark):
    """W1's benchmark: the agent makes one LLM call; no evaluator."""

    def __init__(self, model: OpenAIChatModel, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> str:
            return (await self.model.generate(query, agent="solver")).text

        return [agent], {}


def tasks(n: int) -> Iterator[Task]:
    for index in range(n):
        yield Task(query=f"What is {index} + {index}?", id=f"w1-{index}")


async def w1_round(
    n: int, limit: int, latency: float, base_url: str, out: Path
) -> dict[str, float]:
    ideal = n * latency / limit
    results: dict[str, float] = {}
    limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
    async with httpx.AsyncClient(
        base_url=base_url + "/",
        limits=limits,
        timeout=None,
        transport=AiohttpTransport(limits=limits),
    ) as client:

        async def bare() -> None:
            response = await client.post("chat/completions", json=BODY)
            response.raise_for_status()
            response.json()

        await run_workers(limit * 2, limit, bare)
        cpu = time.process_time()
        results["bare"] = ideal / await run_workers(n, limit, bare)
        results["bare_cpu_us"] = (time.process_time() - cpu) / n * 1e6

    configure_logging(Settings(log_file=str(out / "events.jsonl")))
    model = OpenAIChatModel("sim", base_url=base_url, controller=ConcurrencyController(limit))
    async with model:
        bench = OneCall(model, max_concurrent_tasks=2 * limit)
        await bench.run(tasks(limit * 2), collect=False)  # warm the pool
        cpu = time.process_time()
        started = time.perf_counter()
        await bench.run(tasks(n), results_path=out / "results.jsonl", collect=False)
        results["engine"] = ideal / (time.perf_counter() - started)
        results["engine_cpu_us"] = (time.process_time() - cpu) / n * 1e6
    return results


async def rss_child(n: int, out: Path) -> None:
    """One whole engine run in this (fresh) process; prints the peak RSS in MB."""
    configure_logging(Settings(log_file=str(out / "events.jsonl")))
    sim = SimConfig(latency=0.0)
    async with OpenAIChatModel(controller=ConcurrencyController(50), sim_config=sim) as model:
        bench = OneCall(model, max_concurrent_tasks=100)
        await bench.run(tasks(n), results_path=out / "results.jsonl", collect=False)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rss-tasks", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="asynceval-engine-"))
    if args.rss_child:
        anyio.run(rss_child, args.rss_child, out)
        return

    with sim_server(args.latency) as base_url:
        ideal = args.tasks * args.latency / args.limit
        print(
            f"W1: {args.tasks} tasks x one {args.latency * 1000:.0f} ms call, limit {args.limit}, "
            f"loopback HTTP, events + results file on; ideal {ideal:.1f} s"
        )
        ratios = []
        for round_no in range(1, args.rounds + 1):
            res = anyio.run(w1_round, args.tasks, args.limit, args.latency, base_url, out)
            ratios.append(res["engine"] / res["bare"])
            print(
                f"  round {round_no}: bare {res['bare']:.3f} ({res['bare_cpu_us']:.0f} us CPU/call)"
                f"  engine {res['engine']:.3f} ({res['engine_cpu_us']:.0f} us CPU/task)"
                f"  engine/bare {ratios[-1]:.3f}"
            )
        print(f"  median engine/bare: {statistics.median(ratios):.3f}")

    for n in args.rss_tasks:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(n)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        print(
            f"peak RSS, whole run of {n} tasks (in-process sim, 0 ms): "
            f"{float(done.stdout.strip()):.1f} MB ({time.perf_counter() - started:.0f} s)"
        )


if __name__ == "__main__":
    main()
