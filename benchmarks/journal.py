"""The call journal and the store under it, measured side by side in one run.

W1 (DESIGN section 12: N repetitions of one LLM call of fixed latency through the whole engine,
events and results files on, limit 50, against the embedded simulated provider) with the call
journal off and on, in interleaved rounds (off, on, off, on ...), so both see the machine as it
is at that moment; each round prints both efficiencies (ideal / wall) and on/off, then the median
ratio. Target: on/off >= 0.98.

Then the store: 100,000 small answers (chat completions of 600-800 bytes) written and read back
through the SQLite store (`asynceval.runtime.Store`), next to the one-file-per-entry cache it
replaced (that cache's own code, read from git at `--old-rev`): writes/s, reads/s, the bytes of
answers, and the bytes on disk (`du`: allocated blocks).

    python benchmarks/journal.py                          # W1 10k x 3 rounds, store 100k
    python benchmarks/journal.py --part w1 --n 10000 --rounds 3
    python benchmarks/journal.py --part store --answers 100000
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asynceval import OpenAIChatModel, Settings, Task, configure_logging
from asynceval.funnel import CallJournal
from asynceval.limits import ConcurrencyController
from asynceval.runtime import Store
from asynceval.sim import SimConfig

sys.path.insert(0, str(Path(__file__).parent))
from call_path import OneCall

ROOT = Path(__file__).resolve().parent.parent


def tasks(n: int, salt: str) -> Iterator[Task]:
    for index in range(n):
        yield Task(query=f"What is {index} + {index}? ({salt})", id=f"w1-{index}")


async def w1(
    n: int, limit: int, latency: float, out: Path, journal: bool, round_no: int
) -> tuple[float, float]:
    """One W1 run with the engine's own call journal on or off (`Benchmark.run(journal=...)`):
    its efficiency (ideal / wall) and the process's CPU per repetition (`time.process_time`:
    every thread, the store's too), in seconds."""
    config = SimConfig(latency=latency, latency_distribution="fixed")
    ideal = n * latency / limit
    configure_logging(Settings(log_file=str(out / "events.jsonl")))
    async with OpenAIChatModel(controller=ConcurrencyController(limit), sim_config=config) as model:
        bench = OneCall(model, max_concurrent_tasks=limit * 2)
        await bench.run(tasks(limit * 2, "warm"), collect=False)
        cpu = time.process_time()
        started = time.perf_counter()
        await bench.run(
            tasks(n, f"round {round_no}"),
            results_path=out / "results.jsonl",
            collect=False,
            journal=journal,
        )
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
    if journal:
        kept = CallJournal(out / "journal.sqlite", "count").open()
        try:
            stored = len(kept.db.keys())
        finally:
            kept.close()
        assert stored == n, (stored, n)
    return ideal / wall, cpu / n


def part_w1(args: argparse.Namespace) -> None:
    print(
        f"W1 in process: {args.n} repetitions x one {args.latency * 1000:.0f} ms call, limit "
        f"{args.limit}, {args.limit * 2} at once, events + results file on; the engine's call "
        "journal off vs on (a call returns once its answer is committed)"
    )
    ratios, cpu_off, cpu_on = [], [], []
    with tempfile.TemporaryDirectory(prefix="asynceval-journal-") as tmp:
        for round_no in range(1, args.rounds + 1):
            figures = {}
            order = (False, True) if round_no % 2 else (True, False)
            for journal in order:
                out = Path(tmp) / f"r{round_no}-{journal}"
                out.mkdir()
                figures[journal] = asyncio.run(
                    w1(args.n, args.limit, args.latency, out, journal, round_no)
                )
            (eff_off, off), (eff_on, on) = figures[False], figures[True]
            ratios.append(eff_on / eff_off)
            cpu_off.append(off)
            cpu_on.append(on)
            print(
                f"  round {round_no}: efficiency off {eff_off:.3f}  on {eff_on:.3f}  "
                f"on/off {eff_on / eff_off:.3f}   CPU/rep off {off * 1e6:6.0f} us  "
                f"on {on * 1e6:6.0f} us  on-off {(on - off) * 1e6:+5.0f} us",
                flush=True,
            )
    off, on = statistics.median(cpu_off), statistics.median(cpu_on)
    print(
        f"  median on/off {statistics.median(ratios):.3f} (target >= 0.98); CPU/rep off "
        f"{off * 1e6:.0f} us, on {on * 1e6:.0f} us, on-off {(on - off) * 1e6:+.0f} us "
        "(target <= 40 us)"
    )


def answers(count: int) -> Iterator[tuple[bytes, bytes]]:
    """(key, body): chat completions of 600-800 bytes, as a simulated provider answers."""
    import hashlib

    for i in range(count):
        text = f"The answer is {i}. " * (20 + i % 12)
        body = (
            b'{"id":"chatcmpl-%08d","object":"chat.completion","created":1764000000,'
            b'"model":"sim","choices":[{"index":0,"message":{"role":"assistant","content":"'
            % i
            + text.encode()
            + b'"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,'
            b'"completion_tokens":%d,"total_tokens":%d}}' % (40 + i % 12, 52 + i % 12)
        )
        yield hashlib.sha256(b"%d" % i).digest(), body


def du(path: Path) -> int:
    """Bytes allocated on disk under `path` (what `du` counts)."""
    done = subprocess.run(["du", "-sb", "--apparent-size", str(path)], capture_output=True)
    apparent = int(done.stdout.split()[0]) if done.returncode == 0 else 0
    blocks = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True)
    return int(blocks.stdout.split()[0]) * 1024 if blocks.returncode == 0 else apparent


def old_cache(rev: str) -> Any:
    """The one-file-per-entry CallCache as it was at `rev`."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:src/asynceval/runtime/cache.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="asynceval-oldcache-")) / "old_cache.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_cache", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def part_store(args: argparse.Namespace) -> None:
    count = args.answers
    data = list(answers(count))
    body_bytes = sum(len(body) for _, body in data)
    url = "http://127.0.0.1:8000/v1/chat/completions"
    print(
        f"store: {count} answers of {min(len(b) for _, b in data)}-"
        f"{max(len(b) for _, b in data)} bytes, {body_bytes / 1e6:.1f} MB of answers"
    )
    with tempfile.TemporaryDirectory(prefix="asynceval-store-", dir=args.dir) as tmp:
        # the SQLite store, as the cache and the journal write it (group commits)
        path = Path(tmp) / "new" / "cache.sqlite"
        store = Store(path)
        started = time.perf_counter()
        futures = []
        for i, (key, body) in enumerate(data):
            futures.append(store.put(key, url, 200, "application/json", body))
            if i % 1000 == 999:  # a thousand calls in flight at most, as a busy run has
                futures.pop(0).result()
        for future in futures:
            future.result()
        written = time.perf_counter() - started
        started = time.perf_counter()
        for key, _ in data[: count // 2]:
            assert store.get(key, url) is not None
        read = time.perf_counter() - started
        stats = store.stats()
        store.close()  # SQLite folds its -wal file into the store and removes it
        new_disk = du(path.parent)
        print(
            f"  SQLite store   write {count / written:8.0f}/s  read {count // 2 / read:8.0f}/s  "
            f"answers {stats.bytes / 1e6:6.1f} MB  on disk {new_disk / 1e6:6.1f} MB "
            f"({new_disk / stats.bytes:.2f}x)  files {len(list(path.parent.iterdir()))}"
        )
        # the one-file-per-entry cache before
        old = old_cache(args.old_rev)
        cache = old.CallCache(Path(tmp) / "old")
        started = time.perf_counter()
        for key, body in data:
            cache._store(key.hex(), "POST", url, old.CachedAnswer(200, "application/json", body))
        written = time.perf_counter() - started
        started = time.perf_counter()
        for key, _ in data[: count // 2]:
            assert cache._load(key.hex(), "POST", url) is not None
        read = time.perf_counter() - started
        old_disk = du(Path(tmp) / "old")
        files = sum(len(files) for _, _, files in os.walk(Path(tmp) / "old"))
        print(
            f"  file per entry write {count / written:8.0f}/s  read {count // 2 / read:8.0f}/s  "
            f"answers {body_bytes / 1e6:6.1f} MB  on disk {old_disk / 1e6:6.1f} MB "
            f"({old_disk / body_bytes:.2f}x)  files {files}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("w1", "store", "all"), default="all")
    parser.add_argument("--n", type=int, default=10_000, help="W1 repetitions per run")
    parser.add_argument("--rounds", type=int, default=3, help="W1 rounds (each: off and on)")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--answers", type=int, default=100_000, help="answers in the store part")
    parser.add_argument("--old-rev", default="58688b0", help="a revision with the file cache")
    parser.add_argument("--dir", default=None, help="where the store part writes (a disk)")
    args = parser.parse_args()
    if args.part in ("w1", "all"):
        part_w1(args)
    if args.part in ("store", "all"):
        part_store(args)


if __name__ == "__main__":
    main()
