"""A million-line task file: time to the first task and peak memory, read whole or streamed.

Writes a JSONL file of N tasks (default 1,000,000, 168 MB) and a 10,000-line one, then, each in a
fresh process (peak RSS is per process): `load_tasks` (the whole list, what `asynceval run
--tasks` did), `open_tasks` to its first task, the stream read to its end, `count()` and
`tasks_source_info` (one pass: SHA-256 and rows), a pass that only parses each line's JSON (what
checking the whole file before a run would cost at least), and a run of the engine over the
stream (an agent that answers at once) until its first report.

    .venv/bin/python benchmarks/tasks_stream.py                # N=1,000,000
    .venv/bin/python benchmarks/tasks_stream.py --lines 200000 --skip-load
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

MEASURE = r"""
import json, resource, sys, time
started = time.perf_counter()
what, path = sys.argv[1], sys.argv[2]
out = {}
if what == "load":
    from asynceval.engine import load_tasks
    out["tasks"] = len(load_tasks(path))
elif what == "first":
    from asynceval.engine.datasets import open_tasks
    next(iter(open_tasks(path)))
elif what == "stream":
    from asynceval.engine.datasets import open_tasks
    stream = open_tasks(path)
    out["first_s"] = time.perf_counter() - started
    out["tasks"] = sum(1 for _ in stream)
elif what == "info":
    from asynceval.engine.datasets import open_tasks, tasks_source_info
    stream = open_tasks(path)
    opened = time.perf_counter()
    out["rows"] = stream.count()
    out["count_and_hash_s"] = time.perf_counter() - opened
    info = tasks_source_info(stream)
    out["info_after_count_s"] = time.perf_counter() - opened - out["count_and_hash_s"]
    out["sha256"] = info["sha256"][:12]
elif what == "json_only":
    with open(path, "rb") as file:
        out["rows"] = sum(1 for line in file if json.loads(line) is not None)
elif what == "run":
    import anyio
    from asynceval import Benchmark
    from asynceval.engine.datasets import open_tasks

    class Instant(Benchmark):
        async def setup_agents(self, agent_data, environment, task, user):
            async def agent(query):
                return query
            return [agent], {}

    async def main():
        with anyio.move_on_after(3) as scope:
            first = []
            bench = Instant(max_concurrent_tasks=8)

            class Stop:
                def __getattr__(self, name):
                    return lambda *args: None
                def on_task_repeat_end(self, bench, report):
                    if not first:
                        first.append(time.perf_counter() - started)

            bench.callbacks = (Stop(),)
            await bench.run(open_tasks(path), collect=False)
        out["first_report_s"] = first[0] if first else None
        out["stopped_after_3s"] = scope.cancelled_caught

    anyio.run(main)
out["wall_s"] = time.perf_counter() - started
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def write_tasks(path: Path, lines: int) -> None:
    with path.open("w") as file:
        for i in range(lines):
            row = {
                "id": f"t{i:07d}",
                "query": f"What is {i} * 7? Answer with the number only.",
                "evaluation_data": {"expected": str(i * 7)},
                "metadata": {"split": "test", "n": i},
            }
            file.write(json.dumps(row) + "\n")


def measure(what: str, path: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, what, str(path)], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(done.stderr)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--skip-load", action="store_true", help="no load_tasks of the big file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        small, big = Path(folder) / "small.jsonl", Path(folder) / "big.jsonl"
        write_tasks(small, 10_000)
        write_tasks(big, args.lines)
        print(f"files: 10,000 lines ({small.stat().st_size / 1e6:.1f} MB), "
              f"{args.lines:,} lines ({big.stat().st_size / 1e6:.1f} MB)")  # fmt: skip
        plan = [("load", small), ("load", big), ("first", small), ("first", big)]
        plan += [("stream", small), ("stream", big), ("info", big), ("json_only", big)]
        plan += [("run", big)]
        for what, path in plan:
            if what == "load" and path is big and args.skip_load:
                continue
            figures = measure(what, path)
            lines = 10_000 if path is small else args.lines
            shown = ", ".join(
                f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
            )
            print(f"{what:>9} {lines:>9,} lines: {shown}")


if __name__ == "__main__":
    main()
