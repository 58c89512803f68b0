"""`asynceval export RUN_DIR [RUN_DIR ...] --parquet OUT_DIR`: the runs as four Parquet files.

The tables are `asynceval.analysis.frames`' (runs, repetitions, calls, events: their columns
are documented there), one file each in OUT_DIR (created if missing; files of the same names
replaced). Needs the `analysis` extra; without it, one line saying how to install it, exit 2,
as for a missing run directory or an OUT_DIR that is a file.
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import Any

from ._errors import CLIError


def add_parser(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="write runs as Parquet tables (runs, repetitions, calls, events)",
        description="Read run directories into four tables, one row per run segment, "
        "repetition, LLM call and event, with typed columns and keys that join (run_id; "
        "task_id and repeat_idx; call_id), and write each as a Parquet file in OUT_DIR: "
        "runs.parquet, repetitions.parquet, calls.parquet, events.parquet. Pandas, polars "
        "and DuckDB read them as they are. Needs asynceval[analysis].",
    )
    export.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="a run directory (several: one table each)"
    )
    export.add_argument(
        "--parquet",
        metavar="OUT_DIR",
        required=True,
        help="the directory to write the Parquet files in (created if missing)",
    )
    export.set_defaults(handler=export_command)


def frames_module() -> ModuleType:
    """`asynceval.analysis.frames`, or a CLIError saying how to install what it needs."""
    try:
        from ..analysis import frames
    except ImportError as exc:
        raise CLIError(str(exc)) from None
    return frames


def export_command(args: argparse.Namespace) -> int:
    frames = frames_module()
    import duckdb
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        written = frames.write_parquet(*args.runs, out=args.parquet)
    except frames.FramesError as exc:
        raise CLIError(str(exc)) from None
    except duckdb.Error as exc:  # a file DuckDB cannot open (permissions, a device)
        raise CLIError(f"cannot read the runs: {exc}") from None
    except OSError as exc:  # OUT_DIR cannot be made or written
        where = exc.filename or args.parquet
        raise CLIError(f"cannot write {where}: {exc.strerror or exc}") from None
    for path in written.values():
        rows = pq.read_metadata(path).num_rows
        print(f"{path}  {rows} row{'s' if rows != 1 else ''}")
    return 0
