"""Runs as tables: one or more run directories read into Arrow tables, one row per run segment,
repetition, LLM call or event, with typed columns and keys that join. Needs the `analysis`
extra (`pip install 'asynceval[analysis]'`: pyarrow and DuckDB).

    from asynceval.analysis import frames

    reps = frames.repetitions("results/run-a", "results/run-b").to_pandas()
    calls = frames.calls("results/run-a")              # a pyarrow.Table
    polars.from_arrow(frames.events("results/run-a"))  # polars reads Arrow as it is
    con = frames.connect("results/run-a")              # DuckDB, views runs, repetitions, ...
    con.sql("SELECT status, count(*) FROM repetitions GROUP BY status").show()

The same tables are what `asynceval export RUN_DIR... --parquet OUT_DIR` writes (one Parquet
file each) and what `asynceval sql RUN_DIR... "SELECT ..."` queries.

**Keys.** `run_id` is on every table: a segment's id, the one its reports and events carry.
A run directory resumed twice holds three segments, so three `runs` rows, each with its own
`run_id`; `run_dir_id` (on `runs`) is the directory's own id, the manifest's `run_id`, which is
its first segment's (without a manifest, a library run: its earliest segment's), so
`GROUP BY run_dir_id` is "per run". `task_id` and `repeat_idx` are on repetitions, calls and
events; `call_id` on calls and events. A resumed run may hold two reports of one (task_id,
repeat_idx) (an error run again): both are rows; `latest` marks the last, the one `asynceval
report` counts.

**runs**: run_id, run_dir_id, run_dir (the path given), segment (0, 1, ... in the order they
ran), resumed, started_at, finished_at (null: killed before `run_finished`), duration_s,
interrupted, benchmark, target, repeats, n_tasks, lane, model, base_url,
max_concurrent_llm_calls, max_concurrent_tasks, repetitions (reports the segment wrote),
cost_usd, counts (JSON: statuses), asynceval_version, python_version, host, pid, argv,
settings (JSON, no secrets). From run.json, the results file's headers and the
run_started / run_finished events, whichever exist.

**repetitions** (results.jsonl, one row per report): run_id, seq (its line in the file),
task_id, repeat_idx, status, termination_reason, score (what the pass rate counts: 1/0 from
evaluators' `passed`, else the mean of their scores in [0, 1]; null when not scored),
latest, attempts, error_kind, error_type, error_message, started_at, finished_at,
duration_s, queued_s, the usage counts (llm_calls, failed_calls, retries, prompt_tokens,
completion_tokens, cached_tokens, cache_hits, journal_hits, hedges), cost_usd,
unpriced_calls, cost_by_model (JSON: {model: {calls, cost_usd}}), eval (JSON: the evaluator
entries, whose shape is the benchmark's). Traces and config are left out: free-form and
large, they stay in results.jsonl (`asynceval view` shows them).

**calls** (one row per call_id of a segment, from its events): run_id, call_id, task_id,
repeat_idx, agent, dimension, lane (the segment's lane, "batch" for a call sent in a provider
batch), outcome (answered, failed, cancelled, cache_hit, journal_hit, or unfinished: the run
ended during it), attempts (slots held), retries, timeouts, started_at, ended_at, elapsed_s,
wait_s and held_s (summed over attempts), cost_usd (summed over attempts; null for a call of
the batch lane: its batch's cost is on its batch_completed event), unpriced, cost_unknown,
status_code and error (of its last failed attempt), hedged, batch_id (the last batch that
carried it), batches. Per-call tokens and model are not in the events; a repetition's are in
`repetitions`. Calls of the batch lane are named by their batch's `batch_submitted`, written
outside any repetition: their task_id and repeat_idx are null.

**events** (events.jsonl, one row per line): run_id, seq, timestamp, event, level, task_id,
repeat_idx, call_id, agent, dimension, queue_depth, active_slots, wait_s, held_s, cost_usd,
attempt, attempts, status_code, delay_s, timeout_s, elapsed_s, error, status,
termination_reason, score, duration_s, batch_id (the fields of DESIGN section 3, typed), and
fields: every other field of the line as a JSON object (null when none), so that no field of
any event is lost: `fields ->> 'llm_lane'` in SQL, `json.loads` in pandas.

Types: timestamps are `timestamp[us, tz=UTC]`, durations and costs float64, counts int64,
statuses and names of few values Arrow dictionaries (pandas categoricals), nested values of
a shape that varies JSON text. Rows are in file order (events: each file's order; calls by
start).

**Bad input.** A path that is missing, a file, or a folder with neither results.jsonl nor
events.jsonl (nor run.json) raises `FramesError`. Inside the files reading is tolerant, as
`asynceval report` is: a line that is not JSON (the last line of a killed run, cut short) is
skipped; a value of the wrong type is null. A directory without an events file has no events
or calls rows.

**The reader, chosen by measurement** (benchmarks/frames.py --readers, on a 2-core machine
shared with other work; a run of 100,000 repetitions: 1.1 million event lines, 290 MB): reading
events.jsonl into an Arrow table of the events table's 26 typed columns took 0.94 s with
DuckDB's `read_json` (parallel), 2.60 s with `pyarrow.json.read_json` (an explicit schema) and
7.10 s with the standard library's json, line by line, into Arrow (asynceval's `_jsonfast` is an
encoder: there is no faster parser of ours); in a quieter moment 0.54, 1.52 and 7.95 s. DuckDB
also reads what pyarrow's reader cannot: a field whose shape varies as JSON text (`eval`,
`fields`), a line cut short as a skipped row rather than a failed file, and the SQL that builds
calls and runs from the events runs in the same engine as `asynceval sql`. So DuckDB reads and
pyarrow holds the tables and writes Parquet (polars would have been a third dependency, for
neither). A run of that size exports in 4.2 s; its events, the largest table, read back from
Parquet into pandas in 0.41 s, and straight from the run directory in about 3 s.
"""

from __future__ import annotations

import os
from os import PathLike
from pathlib import Path

try:
    import duckdb
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]
except ImportError as exc:  # the base install has neither
    raise ImportError(
        "asynceval.analysis.frames needs pyarrow and DuckDB: pip install 'asynceval[analysis]'"
    ) from exc

from ._frames_catalog import TABLES, Catalog
from ._frames_sources import FramesError

__all__ = [
    "TABLES",
    "FramesError",
    "calls",
    "connect",
    "events",
    "query",
    "repetitions",
    "runs",
    "tables",
    "write_parquet",
]

RunPath = str | PathLike[str]


def runs(*dirs: RunPath) -> pa.Table:
    """One row per segment of each run directory in `dirs` (see the module docstring)."""
    return Catalog(dirs).arrow("runs")


def repetitions(*dirs: RunPath) -> pa.Table:
    """One row per report in the results files of `dirs`."""
    return Catalog(dirs).arrow("repetitions")


def calls(*dirs: RunPath) -> pa.Table:
    """One row per LLM call in the events files of `dirs`."""
    return Catalog(dirs).arrow("calls")


def events(*dirs: RunPath) -> pa.Table:
    """One row per line of the events files of `dirs`."""
    return Catalog(dirs).arrow("events")


def tables(*dirs: RunPath) -> dict[str, pa.Table]:
    """The four tables of `dirs` by name (runs, repetitions, calls, events), each file read
    once (cheaper than calling the four functions)."""
    catalog = Catalog(dirs)
    return {name: catalog.arrow(name) for name in TABLES}


def connect(
    *dirs: RunPath, connection: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (a new in-memory one, or `connection`) with the views runs,
    repetitions, calls and events over `dirs`, for SQL: `con.sql("SELECT ...")`. The files
    are read now, into memory; the connection holds them until it is closed."""
    catalog = Catalog(dirs, connection)
    catalog.require(TABLES)
    return catalog.connection


def query(sql: str, *dirs: RunPath) -> duckdb.DuckDBPyRelation | None:
    """`sql` run by DuckDB over the views runs, repetitions, calls and events of `dirs`,
    reading only the files the views it names need (a query of `repetitions` alone never reads
    events.jsonl): its result as a relation (`.show()`, `.fetchall()`, `.df()`), or None for a
    statement without one. DuckDB's own errors (`duckdb.Error`) reach the caller as they are."""
    catalog = Catalog(dirs)
    try:
        named = catalog.connection.get_table_names(sql, qualified=False)
    except duckdb.Error:  # a query DuckDB must bind to name its tables (a JOIN ... USING)
        named = set(TABLES)
    catalog.require(name for name in TABLES if name in named)
    return catalog.connection.sql(sql)


def write_parquet(*dirs: RunPath, out: RunPath) -> dict[str, Path]:
    """Write the four tables of `dirs` to `out`/runs.parquet, repetitions.parquet,
    calls.parquet and events.parquet (zstd), creating `out` if need be; returns the paths by
    table. Each file is written beside its final name and renamed over it, so that an
    interrupted export leaves no half file under a table's name. FramesError when `out` is a
    file; OSError when it cannot be written."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise FramesError(f"{os.fspath(out)}: a file, not a directory (give a directory)")
    catalog = Catalog(dirs)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in TABLES:
        path = folder / f"{name}.parquet"
        partial = folder / f".{name}.parquet.partial"
        pq.write_table(catalog.arrow(name), partial, compression="zstd")
        os.replace(partial, path)
        written[name] = path
    return written
