"""The cost of an uncontended slot: acquire + release of the process-wide limiter.

The limiter serves every thread and event loop of a process, so its bookkeeping takes a lock;
this prints what one uncontended `acquire` + `release` costs, bare (`_acquire`/`_give_back`, no
events) and through `controller.slot()` with its three events written to a JSONL file, and the
same under contention from a second event loop in another thread taking slots at the same time.

    python benchmarks/limits.py              # 200,000 bare pairs, 50,000 slots
    python benchmarks/limits.py --pairs 50000 --slots 10000
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import anyio

from asynceval import Settings, configure_logging
from asynceval.limits import ConcurrencyController


async def bare_pairs(controller: ConcurrencyController, n: int) -> float:
    """Seconds per uncontended acquire + release, no events."""
    started = time.perf_counter()
    for _ in range(n):
        await controller._acquire(None)
        controller._give_back(None)
    return (time.perf_counter() - started) / n


async def slots(controller: ConcurrencyController, n: int) -> float:
    """Seconds per `async with controller.slot()` (queueing, acquired, released events)."""
    started = time.perf_counter()
    for _ in range(n):
        async with controller.slot(agent="a", dimension="d"):
            pass
    return (time.perf_counter() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200_000)
    parser.add_argument("--slots", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        configure_logging(Settings(log_file=str(Path(scratch) / "events.jsonl")))
        controller = ConcurrencyController(50)
        bare = anyio.run(bare_pairs, controller, args.pairs)
        with_events = anyio.run(slots, controller, args.slots)
        other = threading.Thread(target=anyio.run, args=(bare_pairs, controller, args.pairs))
        other.start()
        contended = anyio.run(bare_pairs, controller, args.pairs)
        other.join()
    print(f"uncontended acquire + release, no events      {bare * 1e6:7.2f} us")
    print(f"slot() with its three events to a file         {with_events * 1e6:7.2f} us")
    print(f"acquire + release, a second loop in a thread   {contended * 1e6:7.2f} us")
    print(f"max active {controller.statistics().max_active} of limit {controller.limit}")


if __name__ == "__main__":
    main()
