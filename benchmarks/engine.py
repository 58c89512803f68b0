"""The engine against a bare loop, measured side by side in one run.

In process (DESIGN section 12): W1 = N repetitions, each one LLM call of fixed latency, through
the whole engine (hooks, events file, results file), limit C = 50, against the embedded simulated
provider. The bare loop is 50 anyio workers sharing the N calls, each call the same simulator
answering the same kind of request (`SimProvider.respond` and `json.loads` of the answer): what is
left of the engine's CPU per repetition after the bare loop's per call is the engine's own cost.
Then the ceiling (0 ms latency: repetitions per second), then W1 over real loopback HTTP against
`asynceval sim serve`, then the peak RSS of whole runs in fresh subprocesses (default options,
and `collect=False`).

    python benchmarks/engine.py                  # everything (about 10 minutes)
    python benchmarks/engine.py --tasks 2000 --rounds 1 --sizes 10000 --rss 10000
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
from httpx_aiohttp import AiohttpTransport

from asynceval import OpenAIChatModel, Settings, Task, configure_logging
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig, SimProvider

sys.path.insert(0, str(Path(__file__).parent))
from call_path import BODY, OneCall, run_workers, sim_server


def tasks(n: int) -> Iterator[Task]:
    for index in range(n):
        yield Task(query=f"What is {index} + {index}?", id=f"w1-{index}")


async def w1_round(
    n: int, limit: int, latency: float, base_url: str, out: Path, at_once: int
) -> dict[str, float]:
    out = fresh(out)
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
        bench = OneCall(model, max_concurrent_tasks=at_once)
        await bench.run(tasks(limit * 2), collect=False)  # warm the pool
        cpu = time.process_time()
        started = time.perf_counter()
        await bench.run(tasks(n), results_path=out / "results.jsonl", collect=False)
        results["engine"] = ideal / (time.perf_counter() - started)
        results["engine_cpu_us"] = (time.process_time() - cpu) / n * 1e6
    return results


def fresh(out: Path) -> Path:
    """A new folder in `out` for one round: a round's run into the results file of an earlier
    round would be a resume of it, every repetition skipped as done (before this, the ceiling
    and every round after the first measured that)."""
    return Path(tempfile.mkdtemp(prefix="round-", dir=out))


LOG_APART = False  # --log-file-apart: LOG_FILE outside the run's folder (see main)


def log_file_of(out: Path) -> Path:
    """LOG_FILE for a run whose results file is `out`/results.jsonl: the run's own events file
    (`out`/events.jsonl, so that each event is written once), or with --log-file-apart a file
    in a folder of its own, so that each event goes to LOG_FILE and to the run's events file
    (versions before the run's own events file write LOG_FILE only)."""
    if not LOG_APART:
        return out / "events.jsonl"
    apart = out / "log"
    apart.mkdir(exist_ok=True)
    return apart / "asynceval.jsonl"


async def inprocess_round(
    n: int, limit: int, latency: float, out: Path, at_once: int
) -> dict[str, float]:
    """W1 in process: the bare loop on the simulator, then the engine on a simulator of its own
    with the same configuration; efficiency (0 ms: repetitions per second) and CPU per call."""
    out = fresh(out)
    config = SimConfig(latency=latency, latency_distribution="fixed")
    sim = SimProvider(config)
    counter = 0

    async def bare() -> None:
        nonlocal counter
        counter += 1  # a new question each time, as the engine's tasks ask
        message = {"role": "user", "content": f"What is {counter} + {counter}?"}
        body = json.dumps({"model": "sim", "messages": [message]}).encode()
        reply = await sim.respond("/v1/chat/completions", body)
        json.loads(reply.content)["choices"][0]["message"]

    ideal = n * latency / limit

    def rate(wall: float) -> float:
        return ideal / wall if latency else n / wall

    results: dict[str, float] = {}
    await run_workers(limit * 2, limit, bare)
    cpu = time.process_time()
    results["bare"] = rate(await run_workers(n, limit, bare))
    results["bare_cpu_us"] = (time.process_time() - cpu) / n * 1e6

    configure_logging(Settings(log_file=str(log_file_of(out))))
    async with OpenAIChatModel(controller=ConcurrencyController(limit), sim_config=config) as model:
        bench = OneCall(model, max_concurrent_tasks=at_once)
        await bench.run(tasks(limit * 2), collect=False)
        cpu, started = time.process_time(), time.perf_counter()
        await bench.run(tasks(n), results_path=out / "results.jsonl", collect=False)
        results["engine"] = rate(time.perf_counter() - started)
        results["engine_cpu_us"] = (time.process_time() - cpu) / n * 1e6
    return results


async def rss_child(n: int, collect: bool, out: Path) -> None:
    """One whole engine run in this (fresh) process; prints the peak RSS in MB. `collect`: the
    default options (reports returned; a results file of the run's own), else collect=False
    with a results file."""
    configure_logging(Settings(log_file=str(out / "events.jsonl")))
    sim = SimConfig(latency=0.0)
    async with OpenAIChatModel(controller=ConcurrencyController(50), sim_config=sim) as model:
        bench = OneCall(model, max_concurrent_tasks=100)
        if collect:
            reports = await bench.run(tasks(n))
            assert len(reports) == n
        else:
            await bench.run(tasks(n), results_path=out / "results.jsonl", collect=False)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _in_process(args: argparse.Namespace, out: Path) -> None:
    for n in args.sizes:
        ideal = n * args.latency / args.limit
        print(
            f"W1 in process: {n} repetitions x one {args.latency * 1000:.0f} ms call, limit "
            f"{args.limit}, {args.tasks_at_once} repetitions at once, events + results file on"
            f"{' (LOG_FILE apart)' if LOG_APART else ''}; "
            f"ideal {ideal:.1f} s"
        )
        ratios, extra = [], []
        for round_no in range(1, args.rounds + 1):
            res = anyio.run(inprocess_round, n, args.limit, args.latency, out, args.tasks_at_once)
            ratios.append(res["engine"] / res["bare"])
            extra.append(res["engine_cpu_us"] - res["bare_cpu_us"])
            print(
                f"  round {round_no}: bare {res['bare']:.3f} ({res['bare_cpu_us']:.0f} us CPU/call)"
                f"  engine {res['engine']:.3f} ({res['engine_cpu_us']:.0f} us CPU/rep)"
                f"  engine/bare {ratios[-1]:.3f}  engine CPU - bare {extra[-1]:.0f} us"
            )
        print(
            f"  median engine/bare {statistics.median(ratios):.3f}, "
            f"median engine CPU per repetition less the bare loop's {statistics.median(extra):.0f} us"
        )
    if not args.sizes:  # `--sizes` with none: the RSS figures alone, say
        return
    n = args.sizes[0]
    print(f"ceiling: W1 in process at 0 ms, limit {args.limit}, {n} repetitions")
    for round_no in range(1, args.rounds + 1):
        res = anyio.run(inprocess_round, n, args.limit, 0.0, out, args.tasks_at_once)
        print(
            f"  round {round_no}: bare {res['bare']:.0f} calls/s ({res['bare_cpu_us']:.0f} us CPU)"
            f"  engine {res['engine']:.0f} repetitions/s ({res['engine_cpu_us']:.0f} us CPU)"
        )


def _loopback(args: argparse.Namespace, out: Path) -> None:
    with sim_server(args.latency) as base_url:
        ideal = args.tasks * args.latency / args.limit
        print(
            f"W1 over loopback HTTP: {args.tasks} tasks x one {args.latency * 1000:.0f} ms call, "
            f"limit {args.limit}, events + results file on; ideal {ideal:.1f} s"
        )
        ratios = []
        for round_no in range(1, args.rounds + 1):
            res = anyio.run(
                w1_round, args.tasks, args.limit, args.latency, base_url, out, args.tasks_at_once
            )
            ratios.append(res["engine"] / res["bare"])
            print(
                f"  round {round_no}: bare {res['bare']:.3f} ({res['bare_cpu_us']:.0f} us CPU/call)"
                f"  engine {res['engine']:.3f} ({res['engine_cpu_us']:.0f} us CPU/task)"
                f"  engine/bare {ratios[-1]:.3f}"
            )
        print(f"  median engine/bare: {statistics.median(ratios):.3f}")


def _rss(args: argparse.Namespace) -> None:
    runs = [(n, True) for n in args.rss] + [(n, False) for n in args.rss_uncollected]
    for n, collect in runs:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(n), *(["--collect"] if collect else [])],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        how = "default options (reports returned)" if collect else "collect=False"
        print(
            f"peak RSS, whole run of {n} repetitions, {how} (in-process sim, 0 ms): "
            f"{float(done.stdout.strip()):.1f} MB ({time.perf_counter() - started:.0f} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--tasks", type=int, default=10_000, help="loopback W1 size")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--tasks-at-once",
        type=int,
        help="the engine's MAX_CONCURRENT_TASKS (default: twice the limit, so that a repetition "
        "always waits for each freed slot; the limit itself: none queue for a slot)",
    )
    parser.add_argument("--rss", type=int, nargs="*", default=[100_000])
    parser.add_argument("--rss-uncollected", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--skip-loopback", action="store_true")
    parser.add_argument(
        "--log-file-apart",
        action="store_true",
        help="in process: LOG_FILE in a folder apart from the results file, so that every event "
        "is written to LOG_FILE and to the run's own events file (W1 as an application sets it)",
    )
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--collect", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.tasks_at_once = args.tasks_at_once or 2 * args.limit
    global LOG_APART
    LOG_APART = args.log_file_apart
    out = Path(tempfile.mkdtemp(prefix="asynceval-engine-"))
    if args.rss_child:
        anyio.run(rss_child, args.rss_child, args.collect, out)
        return
    _in_process(args, out)
    if not args.skip_loopback:
        _loopback(args, out)
    _rss(args)


if __name__ == "__main__":
    main()
