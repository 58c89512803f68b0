"""How fast a run of 100,000 repetitions becomes tables: `asynceval export --parquet` and the
Parquet read back as a frame; with --readers, the JSON readers `asynceval.analysis.frames`
chose between, side by side on the same events.jsonl.

The run is made by `asynceval run` itself (run.json, results.jsonl, events.jsonl and the call
journal, as a user's run has them) with this file as its target: 10,000 tasks x 10 repeats, each
repetition three LLM calls (two turns of a solver, one judge) on the embedded simulated
provider (2 ms +- 1 ms, limit 20, 1% of attempts answered 503 and retried), an exact-match
evaluator, about 10% of the repetitions failing it. That is about 1.1 million event lines.

    python benchmarks/frames.py                          # make the run (a few minutes), measure
    python benchmarks/frames.py -n 10000 --keep /tmp/f    # smaller; keep the run
    python benchmarks/frames.py --reuse /tmp/f --readers  # measure an existing run; compare readers
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from asynceval import Benchmark, OpenAIChatModel, Task
from asynceval.sim import SimConfig

HERE = Path(__file__).resolve()
REPEATS = 10
TABLES = ("runs", "repetitions", "calls", "events")


class ThreeCalls(Benchmark):
    """Three LLM calls per repetition: a solver's two turns and a judge's verdict."""

    def __init__(self) -> None:
        super().__init__(max_concurrent_tasks=100)
        self.model: OpenAIChatModel | None = None

    async def setup_agents(self, agent_data: Any, environment: Any, task: Task, user: Any) -> Any:
        if self.model is None:
            sim = SimConfig(
                latency=0.002, latency_jitter=0.001, fault_rates={503: 0.01}, retry_after=0.0
            )
            self.model = OpenAIChatModel(sim_config=sim, settings=self.settings)
        model = self.model

        async def solver(query: str) -> str:
            messages = [{"role": "user", "content": query}]
            first = (await model.generate(messages, agent="solver", dimension="draft")).text
            messages += [
                {"role": "assistant", "content": first},
                {"role": "user", "content": query},
            ]
            return (await model.generate(messages, agent="solver", dimension="final")).text

        return [solver], {"solver": solver}

    async def setup_evaluators(
        self, environment: Any, task: Task, agents_by_name: Any, user: Any
    ) -> Any:
        model = self.model
        assert model is not None

        async def judge(task: Task, answer: Any, traces: Any) -> dict[str, Any]:
            query = f"What is {task.evaluation_data['a']} + {task.evaluation_data['a']}?"
            verdict = await model.generate(
                [{"role": "user", "content": query}], agent="judge", dimension="exact"
            )
            expected = task.evaluation_data["expected"]
            passed = str(answer).strip() == expected
            return {"passed": passed, "expected": expected, "judge": verdict.text}

        return [judge]


def write_tasks(path: Path, tasks: int) -> None:
    with path.open("w") as file:
        for index in range(tasks):
            wrong = index % 10 == 9  # expects a wrong sum: fails
            expected = str(2 * index + (1 if wrong else 0))
            row = {"id": f"q{index}", "query": f"What is {index} + {index}?", "a": index}
            file.write(json.dumps({**row, "expected": expected}) + "\n")


def make_run(repetitions: int, out: Path) -> None:
    """The run, by `asynceval run` in a subprocess (its own process, as a user's run)."""
    tasks = out.parent / f"{out.name}-tasks.jsonl"
    write_tasks(tasks, max(1, repetitions // REPEATS))
    env = {**os.environ, "RETRY_INITIAL_DELAY": "0.001", "RETRY_MAX_DELAY": "0.01"}
    command = [sys.executable, "-m", "asynceval", "run", f"{HERE}:ThreeCalls"]
    command += ["--tasks", str(tasks), "--field", "evaluation_data=a,expected"]
    command += ["--repeats", str(REPEATS), "--out", str(out), "--quiet", "--allow-errors"]
    command += ["--max-concurrent-llm-calls", "20"]
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    print(f"{repetitions} repetitions run in {time.perf_counter() - started:.1f} s")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def export_s(run_dir: Path, out: Path) -> float:
    """Wall seconds of `asynceval export RUN_DIR --parquet OUT` as a user runs it (a fresh
    process: the interpreter's start and the imports are in it)."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "asynceval", "export", str(run_dir), "--parquet", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def read_child(out: Path, run_dir: Path) -> None:
    """In a fresh process: each table read back from Parquet (as Arrow, then as a pandas
    frame), and each read straight from the run directory by asynceval.analysis.frames."""
    import pyarrow.parquet as pq

    from asynceval.analysis import frames

    figures: dict[str, Any] = {}
    for name in TABLES:
        started = time.perf_counter()
        table = pq.read_table(out / f"{name}.parquet")
        arrow = time.perf_counter() - started
        table.to_pandas()
        figures[name] = {"rows": table.num_rows, "arrow": arrow}
        figures[name]["pandas"] = time.perf_counter() - started
    for name in TABLES:
        started = time.perf_counter()
        getattr(frames, name)(run_dir).to_pandas()
        figures[name]["from_run"] = time.perf_counter() - started
    print(json.dumps(figures))


def readers(events: Path) -> None:
    """The candidate readers of events.jsonl into an Arrow table of the typed columns the
    events table starts from, each timed once in this process."""
    import duckdb
    import pyarrow as pa
    import pyarrow.json as pj

    kinds = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "DOUBLE": pa.float64()}
    from asynceval.analysis._frames_files import EVENT_COLUMNS  # the columns, as frames has them

    columns = {name: kinds[kind] for name, kind in EVENT_COLUMNS}

    def with_duckdb() -> Any:
        spec = ", ".join(f"'{name}': '{kind}'" for name, kind in EVENT_COLUMNS)
        sql = f"SELECT * FROM read_json('{events}', format = 'newline_delimited', "
        sql += f"columns = {{{spec}}}, ignore_errors = true)"
        return duckdb.connect().sql(sql).to_arrow_table()

    def with_pyarrow() -> Any:
        options = pj.ParseOptions(
            explicit_schema=pa.schema(columns), unexpected_field_behavior="ignore"
        )
        return pj.read_json(events, parse_options=options)

    def with_json() -> Any:
        found: dict[str, list[Any]] = {name: [] for name in columns}
        with events.open("rb") as file:
            for line in file:
                record = json.loads(line)
                for name, values in found.items():
                    values.append(record.get(name))
        return pa.table({name: pa.array(found[name], columns[name]) for name in columns})

    for label, read in [
        ("DuckDB read_json", with_duckdb),
        ("pyarrow.json.read_json", with_pyarrow),
        ("json.loads per line, into Arrow", with_json),
    ]:
        started = time.perf_counter()
        table = read()
        took = time.perf_counter() - started
        print(f"  {label:<34} {took:6.2f} s  ({table.num_rows} rows, {table.num_columns} columns)")


def measure(run_dir: Path, rounds: int, compare: bool) -> None:
    events, results = run_dir / "events.jsonl", run_dir / "results.jsonl"
    with events.open("rb") as file:
        lines = sum(1 for _ in file)
    size = events.stat().st_size / 1e6
    print(f"events.jsonl {lines} lines, {size:.0f} MB; results.jsonl ", end="")
    print(f"{results.stat().st_size / 1e6:.0f} MB")
    if compare:
        print("readers of events.jsonl (the typed columns of the events table):")
        readers(events)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "tables"
        exports = [export_s(run_dir, out) for _ in range(rounds)]
        shown = ", ".join(f"{s:.2f}" for s in exports)
        print(f"asynceval export --parquet: {shown} s (median {_median(exports):.2f} s)")
        for name in TABLES:
            print(f"  {name}.parquet {(out / f'{name}.parquet').stat().st_size / 1e6:.1f} MB")
        child = [sys.executable, str(HERE), "--read-child", str(out), str(run_dir)]
        reads = [
            json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout)
            for _ in range(rounds)
        ]
    print("read back, fresh process, median of rounds (s):")
    print(
        f"  {'table':<12} {'rows':>9} {'Parquet->Arrow':>15} {'->pandas':>9} {'frames.X(run)':>14}"
    )
    for name in TABLES:
        arrow = _median([r[name]["arrow"] for r in reads])
        pandas = _median([r[name]["pandas"] for r in reads])
        direct = _median([r[name]["from_run"] for r in reads])
        rows = reads[0][name]["rows"]
        print(f"  {name:<12} {rows:>9} {arrow:>15.2f} {pandas:>9.2f} {direct:>14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=100_000, help="repetitions")
    parser.add_argument("--keep", type=Path, help="make the run in this directory and keep it")
    parser.add_argument("--reuse", type=Path, help="measure this run directory, make none")
    parser.add_argument("--rounds", type=int, default=3, help="exports and reads, each")
    parser.add_argument("--readers", action="store_true", help="compare the JSON readers too")
    parser.add_argument("--make", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--read-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:
        make_run(int(args.make[0]), Path(args.make[1]))
    elif args.read_child:
        read_child(Path(args.read_child[0]), Path(args.read_child[1]))
    elif args.reuse:
        measure(args.reuse, args.rounds, args.readers)
    else:
        with tempfile.TemporaryDirectory() as scratch:
            run_dir = args.keep or Path(scratch) / "run"
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            make_run(args.n, run_dir)
            measure(run_dir, args.rounds, args.readers)


if __name__ == "__main__":
    main()
