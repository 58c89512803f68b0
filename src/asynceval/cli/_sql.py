"""`asynceval sql RUN_DIR [RUN_DIR ...] "SELECT ..."`: DuckDB over the runs' tables.

The views runs, repetitions, calls and events are `asynceval.analysis.frames`' tables; only
the files a query names are read (a query of `repetitions` alone never reads events.jsonl).
Output: a table on the terminal (the first --max-rows rows, and how many more there were), or
every row as CSV or JSON (`--format`). A query DuckDB refuses (a syntax error, an unknown
column) is one line, exit 2, as every mistake a person can fix at the terminal is.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterator, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ._errors import CLIError
from ._export import frames_module

SHOWN = 50  # rows drawn in the terminal table by default
_BATCH = 10_000  # rows fetched at a time for CSV and JSON


def add_parser(commands: Any) -> None:
    sql = commands.add_parser(
        "sql",
        help="query runs with SQL (DuckDB): views runs, repetitions, calls, events",
        description="Run one SQL query (DuckDB's dialect) over run directories, read as the "
        "views runs, repetitions, calls and events (the tables of asynceval export, keys "
        "run_id; task_id and repeat_idx; call_id), and print its result. Needs "
        "asynceval[analysis].",
        epilog='example: asynceval sql results/run-a "SELECT status, count(*) AS n FROM '
        'repetitions WHERE latest GROUP BY status"',
    )
    sql.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a run directory")
    sql.add_argument("query", metavar="QUERY", help="the SQL query, one argument (quote it)")
    sql.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="table: drawn for the terminal, the first --max-rows rows; csv: every row, a "
        "header line first; json: every row, a JSON array of objects (default: table)",
    )
    sql.add_argument(
        "--max-rows",
        type=int,
        default=SHOWN,
        metavar="N",
        help=f"with --format table, the rows drawn (default: {SHOWN})",
    )
    sql.set_defaults(handler=sql_command)


def sql_command(args: argparse.Namespace) -> int:
    frames = frames_module()
    import duckdb

    if args.max_rows < 1:
        raise CLIError(f"--max-rows {args.max_rows}: give a number of rows, at least 1")
    try:
        result = frames.query(args.query, *args.runs)
    except frames.FramesError as exc:
        raise CLIError(str(exc)) from None
    except duckdb.Error as exc:
        raise CLIError(str(exc)) from None
    if result is None:  # a statement with no result (SET, CREATE): nothing to print
        return 0
    columns = list(result.columns)
    try:  # as Arrow: the query runs once, and rows are counted without becoming objects
        arrow = getattr(result, "to_arrow_table", None) or result.fetch_arrow_table
        table = arrow()
    except duckdb.Error as exc:  # raised while the rows are computed (a bad cast, say)
        raise CLIError(str(exc)) from None
    if args.format == "table":
        _table(list(_rows(table.slice(0, args.max_rows))), table.num_rows, columns, sys.stdout)
    elif args.format == "csv":
        _csv(_rows(table), columns, sys.stdout)
    else:
        _json(_rows(table), columns, sys.stdout)
    return 0


def _rows(table: Any) -> Iterator[tuple[Any, ...]]:
    """The rows of an Arrow table as tuples, a record batch at a time."""
    for batch in table.to_batches(max_chunksize=_BATCH):
        yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)


def _table(shown: Sequence[tuple[Any, ...]], count: int, columns: list[str], out: TextIO) -> None:
    table = Table(show_header=True, header_style="bold")
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in shown:
        table.add_row(*(Text(_cell(value)) for value in row))  # Text: values are not markup
    console = Console(file=out)
    console.print(table)
    rest = count - len(shown)
    more = f"; {rest} more not shown (--max-rows, or --format csv)" if rest else ""
    console.print(f"{count} row{'s' if count != 1 else ''}{more}", highlight=False)


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


def _csv(rows: Iterator[tuple[Any, ...]], columns: list[str], out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow("" if value is None else _plain(value) for value in row)


def _json(rows: Iterator[tuple[Any, ...]], columns: list[str], out: TextIO) -> None:
    out.write("[")
    for number, row in enumerate(rows):
        out.write(",\n" if number else "\n")
        out.write(json.dumps(dict(zip(columns, row, strict=True)), default=_plain))
    out.write("\n]\n")


def _plain(value: Any) -> Any:
    """A value JSON and CSV can hold: times as ISO 8601, decimals as numbers (a whole one as
    an int: DuckDB's sum of integers is a 128-bit integer, which Arrow holds as a decimal),
    else its text."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value if isinstance(value, str | int | float | bool) else str(value)
