"""A DuckDB connection holding the frames' tables of some run directories: the files are read
once each, when a table first needs them (the events file for events, calls and runs; the
results file for repetitions and runs), into temporary tables; the four public names (events,
repetitions, calls, runs) are views over those, made as they are asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike
from typing import Any

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from ._frames_files import (
    empty_events,
    empty_results,
    events_select,
    results_select,
    union,
)
from ._frames_sources import RunDir, run_dirs, segment_rows
from ._frames_views import CALLS, EVENTS, REPETITIONS, REPORTS, RUNS, SCORE_MACRO

TABLES = ("runs", "repetitions", "calls", "events")
"""The tables of the frames, in the order `asynceval export` writes them."""

# What each table is built from: the events lines, the results lines, or both.
_NEEDS = {
    "events": ("events",),
    "calls": ("events",),
    "repetitions": ("results",),
    "runs": ("events", "results"),
}
_VIEWS = {"events": EVENTS, "calls": CALLS, "repetitions": REPETITIONS, "runs": RUNS}

# Columns of few distinct values, kept as Arrow dictionaries (pandas categoricals): a frame
# of a million events converts to pandas in half the time, and its Parquet file is smaller.
_CATEGORIES = {
    "events": ("run_id", "event", "level", "agent", "dimension", "status", "termination_reason"),
    "calls": ("run_id", "agent", "dimension", "lane", "outcome"),
    "repetitions": ("run_id", "status", "termination_reason", "error_kind", "error_type"),
    "runs": (),
}

_SEGMENT_COLUMNS = (
    ("_dir", "INTEGER"),
    ("run_id", "VARCHAR"),
    ("segment", "BIGINT"),
    ("manifest_started_at", "VARCHAR"),
    ("resumed", "BOOLEAN"),
    ("target", "VARCHAR"),
    ("benchmark", "VARCHAR"),
    ("repeats", "VARCHAR"),
    ("model", "VARCHAR"),
    ("base_url", "VARCHAR"),
    ("lane", "VARCHAR"),
    ("host", "VARCHAR"),
    ("pid", "BIGINT"),
    ("argv", "VARCHAR"),
    ("asynceval_version", "VARCHAR"),
)


class Catalog:
    """The frames' tables of the run directories at `paths` (FramesError for a path that is
    not one), in a DuckDB connection of their own (or `connection`, which gets the tables)."""

    def __init__(
        self,
        paths: Sequence[str | PathLike[str]],
        connection: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        self.dirs: list[RunDir] = run_dirs(paths)
        self.connection = connection if connection is not None else duckdb.connect()
        self._bases: dict[str, pa.Table] = {}
        self._made: set[str] = set()
        con = self.connection
        # Timestamps in UTC, as the files write them (Arrow gets timestamp[us, tz=UTC]).
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_progress_bar = false")  # it would draw on the user's terminal
        # A table the SQL names and the catalog lacks is an error, not a Python variable of
        # that name found in the caller's frame (DuckDB's replacement scans).
        con.execute("SET python_enable_replacements = false")
        con.execute(SCORE_MACRO)
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _dirs (_dir INTEGER, run_dir VARCHAR, run_dir_id VARCHAR)"
        )
        rows: list[list[Any]] = [
            [index, str(run.path), run.run_dir_id] for index, run in enumerate(self.dirs)
        ]
        con.executemany("INSERT INTO _dirs VALUES (?, ?, ?)", rows)
        columns = ", ".join(f"{name} {kind}" for name, kind in _SEGMENT_COLUMNS)
        con.execute(f"CREATE OR REPLACE TEMP TABLE _segments ({columns})")
        segments = [
            [index, *(row[name] for name, _ in _SEGMENT_COLUMNS[1:])]
            for index, run in enumerate(self.dirs)
            for row in segment_rows(run)
        ]
        if segments:
            marks = ", ".join("?" for _ in _SEGMENT_COLUMNS)
            con.executemany(f"INSERT INTO _segments VALUES ({marks})", segments)

    def require(self, names: Iterable[str]) -> None:
        """Make the views `names` (of TABLES; others are ignored), reading the files they need
        that were not read yet."""
        chosen = set(names)
        wanted = [name for name in TABLES if name in chosen]
        for name in wanted:
            for source in _NEEDS[name]:
                self._load(source)
        for name in wanted:
            if name not in self._made:
                self.connection.execute(_VIEWS[name])
                self._made.add(name)

    def relation(self, name: str) -> duckdb.DuckDBPyRelation:
        """The table `name` (one of TABLES) as a DuckDB relation."""
        if name not in TABLES:
            raise ValueError(f"no table {name!r}: the tables are {', '.join(TABLES)}")
        self.require([name])
        return self.connection.table(name)

    def arrow(self, name: str) -> pa.Table:
        """The table `name` (one of TABLES) as an Arrow table, its columns of few values as
        dictionaries."""
        if name == "events":  # the lines as read: no second pass through DuckDB
            self.require([name])
            table = self._bases["events"].drop_columns(["_dir"])
        else:
            table = to_arrow(self.relation(name))
        for column in _CATEGORIES[name]:
            index = table.schema.get_field_index(column)
            table = table.set_column(index, column, pc.dictionary_encode(table.column(index)))
        return table

    def _load(self, source: str) -> None:
        """Read every directory's `source` file ("events" or "results") into an Arrow table,
        which the views read as the table _events_all or _results_all (DuckDB scans Arrow in
        place: reading the lines into a DuckDB table instead cost a second more for a million
        events)."""
        if source in self._bases:
            return
        if source == "events":
            selects = [events_select(run, index) for index, run in enumerate(self.dirs)]
            sql, name = union(selects, empty_events()), "_events_all"
        else:
            selects = [results_select(run, index) for index, run in enumerate(self.dirs)]
            sql, name = union(selects, empty_results()), "_results_all"
        table = to_arrow(self.connection.sql(sql))
        self.connection.register(name, table)
        self._bases[source] = table
        if source == "results":
            self.connection.execute(REPORTS)


def to_arrow(relation: duckdb.DuckDBPyRelation) -> pa.Table:
    """`relation`'s rows as an Arrow table (`to_arrow_table` since DuckDB 1.4; before it,
    `fetch_arrow_table`, which later versions deprecate)."""
    method = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
    return method()
