"""One W1 run in this process, for counts that a busy machine does not move.

W1 as issue 37 measured it: N repetitions of one call of fixed latency (1 ms), limit 50, 100
repetitions at once, LOG_FILE in a folder of its own and a results file given (each event goes
to LOG_FILE and to the run's own events file), default options; a warm-up run of 100 first.
Prints the run's CPU per repetition (user and system, and the event loop's thread alone).

    python benchmarks/w1_once.py 10000
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python benchmarks/w1_once.py 1300     # less the count of `... 300`, / 1000: per repetition
    python benchmarks/w1_once.py 10000 --profile    # cProfile: Python calls per repetition
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

import anyio

from asynceval import OpenAIChatModel, Settings, configure_logging
from asynceval.limits import ConcurrencyController
from asynceval.sim import SimConfig

sys.path.insert(0, str(Path(__file__).parent))
from call_path import OneCall

from engine import tasks


async def w1(n: int, latency: float, journal: bool, profile: bool) -> None:
    out = Path(tempfile.mkdtemp(prefix="asynceval-w1-"))
    (out / "run").mkdir()
    configure_logging(Settings(log_file=str(out / "log.jsonl")))
    config = SimConfig(latency=latency, latency_distribution="fixed")
    options = {} if journal else {"journal": False}
    async with OpenAIChatModel(controller=ConcurrencyController(50), sim_config=config) as model:
        bench = OneCall(model, max_concurrent_tasks=100)
        await bench.run(tasks(100), collect=False)
        profiler = cProfile.Profile() if profile else None
        before, thread = os.times(), time.thread_time()
        if profiler is not None:
            profiler.enable()
        results = out / "run" / "results.jsonl"
        await bench.run(tasks(n), results_path=results, collect=False, **options)
        if profiler is not None:
            profiler.disable()
        after, thread = os.times(), time.thread_time() - thread
    user, system = (after.user - before.user) / n * 1e6, (after.system - before.system) / n * 1e6
    print(
        f"{n} repetitions: CPU {user + system:.0f} us a repetition (user {user:.0f}, "
        f"system {system:.0f}; the loop's thread {thread / n * 1e6:.0f})"
    )
    if profiler is not None:
        stats = pstats.Stats(profiler)
        print(f"Python function calls per repetition: {stats.total_calls / n:.1f}")  # type: ignore[attr-defined]
        stats.sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, nargs="?", default=10_000)
    parser.add_argument("--latency", type=float, default=0.001)
    parser.add_argument("--no-journal", action="store_true", help="journal=False")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    anyio.run(w1, args.n, args.latency, not args.no_journal, args.profile)


if __name__ == "__main__":
    main()
