"""Cost of the LLM call path, measured side by side with bare clients in one run.

(a) CPU per call of the full path (rate limiter off, controller + retry + events to a file) over the
    in-process simulated provider at zero latency, as a ratio to a bare httpx call on the same
    transport.
(b) N calls, fixed latency, limit L, over real loopback HTTP against `asynceval sim serve` in a
    subprocess: efficiency = ideal / wall, ideal = N * latency / L, for the full path and for bare
    anyio loops on the fastest transport (httpx over aiohttp) and on stock httpx.

    python benchmarks/call_path.py            # defaults: N=5000, latency 0.05 s, limit 50
    python benchmarks/call_path.py --calls 2000 --rounds 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
from httpx_aiohttp import AiohttpTransport

from asynceval import Benchmark, OpenAIChatModel, Settings, Task, configure_logging
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig, SimProvider

BODY = {"model": "sim", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}


class OneCall(Benchmark):
    """W1's benchmark: the agent makes one LLM call; no evaluator."""

    def __init__(self, model: OpenAIChatModel, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        async def agent(query: Any) -> str:
            return (await self.model.generate(query, agent="solver")).text

        return [agent], {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def sim_server(latency: float) -> Iterator[str]:
    """`asynceval sim serve` (fixed latency) in a subprocess; yields its base URL (.../v1)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "asynceval", "sim", "serve", "--port", str(port),
         "--latency", str(latency), "--distribution", "fixed"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/stats", timeout=0.5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait()


async def run_workers(calls: int, workers: int, one_call: Callable[[], Awaitable[object]]) -> float:
    """`workers` tasks share `calls` requests; returns wall seconds."""
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await one_call()

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(worker)
    return time.perf_counter() - started


async def engine_calls(calls: int, limit: int, model: OpenAIChatModel) -> float:
    """All calls started at once, the controller doing the limiting (how users call it)."""

    async def one(index: int) -> None:
        await model.generate("What is 2 + 2?", agent="bench", dimension=f"d{index % 10}")

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(calls):
            tg.start_soon(one, index)
    return time.perf_counter() - started


async def cpu_per_call(calls: int, events_path: Path) -> dict[str, float]:
    """(a): process CPU seconds per call, bare httpx vs the full path, zero latency in process."""
    results: dict[str, float] = {}
    sim = SimProvider(SimConfig(latency=0))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=sim), base_url="http://sim/v1/"
    ) as client:

        async def bare() -> None:
            (await client.post("chat/completions", json=BODY)).raise_for_status()

        await run_workers(200, 50, bare)
        cpu = time.process_time()
        await run_workers(calls, 50, bare)
        results["bare_httpx_us"] = (time.process_time() - cpu) / calls * 1e6

    configure_logging(Settings(log_file=str(events_path)))
    model = OpenAIChatModel(
        controller=ConcurrencyController(50), sim_config=SimConfig(latency=0), settings=Settings()
    )
    async with model:

        async def full() -> None:
            await model.generate("What is 2 + 2?", agent="bench", dimension="d")

        await run_workers(200, 50, full)
        cpu = time.process_time()
        await run_workers(calls, 50, full)
        results["full_path_us"] = (time.process_time() - cpu) / calls * 1e6
        cpu = time.process_time()
        await engine_calls(calls, 50, model)
        results["full_path_all_at_once_us"] = (time.process_time() - cpu) / calls * 1e6
    results["ratio"] = results["full_path_us"] / results["bare_httpx_us"]
    return results


async def loopback(
    calls: int, stock_calls: int, limit: int, latency: float, base_url: str, events_path: Path
) -> dict[str, tuple[float, float]]:
    """(b): (efficiency, client CPU us per call) over real loopback HTTP for each client in turn.

    Stock httpx runs `stock_calls` (it is ~8x slower; efficiency is a rate, so fewer calls do)."""
    results: dict[str, tuple[float, float]] = {}

    async def measure(name: str, run: Callable[[int], Awaitable[float]]) -> None:
        n = stock_calls if "stock" in name else calls
        await run(limit * 2)  # warm the pool
        cpu = time.process_time()
        wall = await run(n)
        results[name] = (n * latency / limit / wall, (time.process_time() - cpu) / n * 1e6)

    for name, transport in (("bare aiohttp", "aiohttp"), ("bare stock httpx", "httpx")):
        limits = httpx.Limits(max_connections=limit, max_keepalive_connections=limit)
        async with httpx.AsyncClient(
            base_url=base_url + "/",
            limits=limits,
            timeout=None,
            transport=AiohttpTransport(limits=limits) if transport == "aiohttp" else None,
        ) as client:

            async def bare(client: httpx.AsyncClient = client) -> None:
                response = await client.post("chat/completions", json=BODY)
                response.raise_for_status()
                response.json()

            await measure(name, lambda n: run_workers(n, limit, bare))

    configure_logging(Settings(log_file=str(events_path)))
    for name, transport in (("asynceval aiohttp", "aiohttp"), ("asynceval stock httpx", "httpx")):
        model = OpenAIChatModel(
            "sim",
            base_url=base_url,
            controller=ConcurrencyController(limit),
            transport=transport,  # type: ignore[arg-type]
            settings=Settings(),
        )
        async with model:

            async def call(model: OpenAIChatModel = model) -> None:
                await model.generate("What is 2 + 2?", agent="bench", dimension="d")

            await measure(name + ", 50 workers", lambda n: run_workers(n, limit, call))
            if transport == "aiohttp":
                await measure(
                    name + ", all at once", lambda n, model=model: engine_calls(n, limit, model)
                )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--cpu-calls", type=int, default=3000)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--stock-calls", type=int, default=1000, help="calls for stock httpx")
    parser.add_argument("--rounds", type=int, default=3, help="repeat (b), report each round")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="asynceval-bench-"))
    cpu = anyio.run(cpu_per_call, args.cpu_calls, tmp / "events-cpu.jsonl")
    print(f"(a) CPU per call, in-process sim, zero latency, {args.cpu_calls} calls")
    print(f"    bare httpx, 50 workers           {cpu['bare_httpx_us']:7.1f} us")
    print(f"    full path, 50 workers            {cpu['full_path_us']:7.1f} us")
    print(f"    full path, all started at once   {cpu['full_path_all_at_once_us']:7.1f} us")
    print(f"    ratio full / bare (50 workers)   {cpu['ratio']:7.2f}")

    with sim_server(args.latency) as base_url:
        ideal = args.calls * args.latency / args.limit
        print(
            f"(b) {args.calls} calls, {args.latency * 1000:.0f} ms, limit {args.limit}, loopback "
            f"HTTP; ideal {ideal:.2f} s; efficiency = ideal / wall"
        )
        ratios: list[float] = []
        for round_no in range(1, args.rounds + 1):
            events_path = tmp / f"events-loopback-{round_no}.jsonl"
            res = anyio.run(
                loopback,
                args.calls,
                args.stock_calls,
                args.limit,
                args.latency,
                base_url,
                events_path,
            )
            ratios.append(res["asynceval aiohttp, 50 workers"][0] / res["bare aiohttp"][0])
            print(f"    round {round_no}:  efficiency  client CPU/call")
            for name, (efficiency, cpu_us) in res.items():
                print(f"      {name:<34} {efficiency:6.3f}  {cpu_us:8.1f} us")
            best = res["bare aiohttp"][0]
            print(
                f"      asynceval / best bare: 50 workers "
                f"{res['asynceval aiohttp, 50 workers'][0] / best:.3f}, all at once "
                f"{res['asynceval aiohttp, all at once'][0] / best:.3f}"
            )
        if ratios:
            median = statistics.median(ratios)
            print(f"    median asynceval / best bare (50 workers): {median:.3f}")
        stats = httpx.get(base_url.removesuffix("/v1") + "/stats").json()
        print(f"    provider: {json.dumps({k: stats[k] for k in ('requests', 'max_in_flight')})}")


if __name__ == "__main__":
    main()
