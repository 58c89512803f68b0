"""asynceval next to a bare anyio loop and Inspect AI on the same workload, in one run.

W1 over loopback HTTP: N samples, each one chat completion of fixed latency from `asynceval sim
serve` (a subprocess), at most C = 50 requests at once. Each contender runs in a fresh
subprocess, one after the other, against the same server:

- bare: 50 anyio workers sharing the N requests on one httpx client (httpx-aiohttp transport);
- asynceval: the whole engine (`Benchmark.run`, events file, results file), limit 50;
- inspect: Inspect AI's `eval()` (openai provider pointed at the simulator, max_connections 50),
  when `inspect_ai` is installed (`pip install -e '.[bench]'`), else skipped with a message.

Printed per contender: efficiency (ideal / wall, ideal = N x latency / C), CPU per sample (the
child's process time over the run only), peak RSS of the child process. With matplotlib (also in
the bench extra) a PNG chart of the three figures is written.

    python benchmarks/peers.py                        # N=2000, 50 ms
    python benchmarks/peers.py --samples 10000 --chart benchmarks/peers.png
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

LIMIT = 50


def _child_bare(n: int, base_url: str) -> tuple[float, float]:
    import anyio
    import httpx
    from call_path import BODY, run_workers
    from httpx_aiohttp import AiohttpTransport

    async def main() -> float:
        limits = httpx.Limits(max_connections=LIMIT, max_keepalive_connections=LIMIT)
        transport = AiohttpTransport(limits=limits)
        async with httpx.AsyncClient(
            base_url=base_url + "/", limits=limits, timeout=None, transport=transport
        ) as client:

            async def one() -> None:
                response = await client.post("chat/completions", json=BODY)
                response.raise_for_status()
                response.json()

            await run_workers(LIMIT, LIMIT, one)  # connections opened before timing
            cpu, wall = time.process_time(), time.perf_counter()
            await run_workers(n, LIMIT, one)
            return time.process_time() - cpu, time.perf_counter() - wall

    return anyio.run(main)


def _child_asynceval(n: int, base_url: str) -> tuple[float, float]:
    import anyio

    from asynceval import OpenAIChatModel, Runtime, Settings
    from engine import OneCall, tasks

    out = Path(tempfile.mkdtemp(prefix="peers-asynceval-"))
    settings = Settings(
        max_concurrent_llm_calls=LIMIT,
        max_concurrent_tasks=2 * LIMIT,
        log_file=str(out / "events.jsonl"),
    )

    async def main() -> float:
        async with Runtime(settings):
            model = OpenAIChatModel("sim", base_url=base_url)
            bench = OneCall(model)
            await bench.run(tasks(LIMIT), collect=False)  # connections opened before timing
            cpu, wall = time.process_time(), time.perf_counter()
            await bench.run(tasks(n), results_path=out / "results.jsonl")
            return time.process_time() - cpu, time.perf_counter() - wall

    return anyio.run(main)


def _child_inspect(n: int, base_url: str) -> tuple[float, float]:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate

    os.environ.setdefault("OPENAI_API_KEY", "sk-simulated-key-not-secret")
    log_dir = tempfile.mkdtemp(prefix="peers-inspect-")
    samples = [Sample(input=f"What is {i} + {i}?", target=str(2 * i)) for i in range(n)]
    cpu, wall = time.process_time(), time.perf_counter()
    logs = eval(
        Task(dataset=samples, solver=generate()),
        model="openai/sim",
        model_base_url=base_url,
        max_connections=LIMIT,
        max_samples=2 * LIMIT,
        log_dir=log_dir,
        display="none",
    )
    spent = time.process_time() - cpu, time.perf_counter() - wall
    if logs[0].status != "success":
        raise RuntimeError(f"Inspect AI's eval ended with status {logs[0].status}")
    return spent


_CHILDREN = {"bare": _child_bare, "asynceval": _child_asynceval, "inspect": _child_inspect}


def _run_child(name: str, n: int, base_url: str) -> dict[str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, "--samples", str(n), "--base-url", base_url],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["process_wall_s"] = time.perf_counter() - started
    return figures


def _chart(rows: dict[str, dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    panels = (
        ("efficiency (ideal / wall)", "efficiency"),
        ("CPU per sample (ms)", "cpu_ms"),
        ("peak RSS (MB)", "rss_mb"),
    )
    figure, axes = plt.subplots(1, 3, figsize=(12, 4))
    for axis, (label, key) in zip(axes, panels, strict=True):
        values = [rows[name][key] for name in names]
        bars = axis.bar(names, values, color=["#888888", "#2a7ab0", "#d9822b"][: len(names)])
        axis.set_title(label)
        axis.bar_label(bars, fmt="%.3g")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--chart", type=Path, default=Path(__file__).with_name("peers.png"))
    parser.add_argument("--child", choices=sorted(_CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        cpu, wall = _CHILDREN[args.child](args.samples, args.base_url)
        figures = {
            "cpu_s": cpu,
            "wall_s": wall,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
        print(json.dumps(figures))
        return

    from call_path import sim_server

    contenders = ["bare", "asynceval"]
    if importlib.util.find_spec("inspect_ai") is not None:
        contenders.append("inspect")
    else:
        print("inspect_ai is not installed (pip install -e '.[bench]'): Inspect AI skipped")
    ideal = args.samples * args.latency / LIMIT
    title = (
        f"W1: {args.samples} samples x one {args.latency * 1000:.0f} ms call, "
        f"{LIMIT} at once, loopback HTTP; ideal {ideal:.1f} s"
    )
    print(title)
    rows: dict[str, dict[str, Any]] = {}
    with sim_server(args.latency) as base_url:
        for name in contenders:
            figures = _run_child(name, args.samples, base_url)
            rows[name] = {  # the timed part only: not the child's imports and warm-up
                "efficiency": ideal / figures["wall_s"],
                "cpu_ms": figures["cpu_s"] / args.samples * 1000,
                "rss_mb": figures["rss_mb"],
            }
            row = rows[name]
            print(
                f"  {name:10s} efficiency {row['efficiency']:.3f}   "
                f"CPU/sample {row['cpu_ms']:.3f} ms   peak RSS {row['rss_mb']:.0f} MB"
            )
    if importlib.util.find_spec("matplotlib") is not None:
        _chart(rows, args.chart, title)
        print(f"chart: {args.chart}")
    else:
        print("matplotlib is not installed (pip install -e '.[bench]'): no chart")


if __name__ == "__main__":
    main()
