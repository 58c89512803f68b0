"""A provider cap below the limit (seed 004's SC-004 case), measured side by side in one run.

The simulated provider serves at most CAP calls at once (`asynceval sim serve --max-concurrency`)
and answers the excess with 429 + Retry-After at once. The same benchmark (N tasks, one LLM call
each, through the whole engine with the event log and the results file on) runs with
MAX_CONCURRENT_LLM_CALLS = CAP and with a limit above it, each in a fresh Runtime, over real
loopback HTTP. Printed: throughput of each, their ratio, tasks failed, the provider's own
max in flight and 429 count, and the adaptive limit's moves (`limit_changed` events).

    python benchmarks/provider_cap.py                     # 800 tasks, 200 ms, cap 30 vs 40
    python benchmarks/provider_cap.py --tasks 400 --latency 0.1 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from asynceval import Benchmark, OpenAIChatModel, Runtime, Settings, Task, configure_logging

sys.path.insert(0, str(Path(__file__).parent))
from call_path import free_port


class OneCall(Benchmark):
    """The agent makes one LLM call; no evaluator."""

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = base_url

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        model = OpenAIChatModel("asynceval-sim", base_url=self.base_url, api_key="none")

        async def agent(query: Any) -> str:
            return (await model.generate(query, agent="solver")).text

        return [agent], {}


def start_server(args: argparse.Namespace) -> tuple[str, Any]:
    import subprocess

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "asynceval", "sim", "serve", "--port", str(port),
         "--latency", str(args.latency), "--distribution", "fixed",
         "--max-concurrency", str(args.cap), "--retry-after", str(args.retry_after)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        try:
            httpx.get(f"http://127.0.0.1:{port}/stats", timeout=0.5)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    return f"http://127.0.0.1:{port}", server


async def one_run(args: argparse.Namespace, root: str, limit: int, out: Path) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        await client.post(f"{root}/stats/reset")
    events_file = out / f"events-{limit}.jsonl"
    settings = Settings(
        max_concurrent_llm_calls=limit,
        max_concurrent_tasks=args.tasks_at_once,
        retry_max_attempts=3,
        log_file=str(events_file),
    )
    configure_logging(settings)
    tasks = [Task(query=f"What is {i} + {i}?", id=f"cap-{i}") for i in range(args.tasks)]
    async with Runtime(settings) as runtime:
        bench = OneCall(f"{root}/v1", runtime=runtime)
        started = time.perf_counter()
        reports = await bench.run(tasks, results_path=out / f"results-{limit}.jsonl")
        wall = time.perf_counter() - started
    async with httpx.AsyncClient() as client:
        stats = (await client.get(f"{root}/stats")).json()
    lines = [json.loads(line) for line in events_file.read_text().splitlines()]
    moves = [e["limit"] for e in lines if e["event"] == "limit_changed"]
    return {
        "limit": limit,
        "wall": wall,
        "throughput": len(reports) / wall,
        "failed": sum(r["status"] != "success" for r in reports),
        "max_in_flight": stats["max_in_flight"],
        "429s": stats["statuses"].get("429", 0),
        "moves": len(moves),
        "lowest": min(moves, default=limit),
        "last": moves[-1] if moves else limit,
    }


def show(row: dict[str, Any]) -> str:
    return (
        f"  limit {row['limit']:>3}: {row['throughput']:7.1f} tasks/s  wall {row['wall']:6.2f} s"
        f"  failed {row['failed']:>3}  provider max in flight {row['max_in_flight']:>3}"
        f"  429s {row['429s']:>4}  limit_changed {row['moves']:>3}"
        f" (lowest {row['lowest']}, last {row['last']})"
    )


async def main(args: argparse.Namespace) -> None:
    root, server = start_server(args)
    ideal = args.tasks * args.latency / args.cap
    print(
        f"{args.tasks} tasks x one {args.latency * 1000:.0f} ms call, provider cap {args.cap}, "
        f"Retry-After {args.retry_after} s; ideal at the cap {ideal:.2f} s"
    )
    ratios = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for round_no in range(1, args.rounds + 1):
                at_cap = await one_run(args, root, args.cap, Path(tmp))
                above = await one_run(args, root, args.limit, Path(tmp))
                ratio = above["throughput"] / at_cap["throughput"]
                ratios.append(ratio)
                print(f"round {round_no}:")
                print(show(at_cap))
                print(show(above))
                print(f"  throughput limit {args.limit} / limit {args.cap}: {ratio:.3f}")
    finally:
        server.terminate()
        server.wait()
    print(f"median ratio over {len(ratios)} round(s): {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=800)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--cap", type=int, default=30)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--retry-after", type=float, default=1.0)
    parser.add_argument("--tasks-at-once", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    anyio.run(main, parser.parse_args())
