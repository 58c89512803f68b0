"""The frames' reading of one run's JSON-lines files, as DuckDB SQL: each file becomes a typed
relation in one scan (DuckDB's parallel JSON reader; see `frames` for why this reader).

Reading is tolerant, as `asynceval report` and `view` are: a line that is not JSON (cut short by
a kill, not UTF-8) is skipped, not an error; a value of the wrong type becomes null (a
`repeat_idx` of "x" in a hand-edited file); every line keeps its place (`seq`, its 1-based
position in the file: the line number for a file without blank lines).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._frames_sources import RunDir

# The typed columns of an event line: the fields of the call path and of the repetitions
# (DESIGN section 3); any other field of an event is kept in its `fields` JSON.
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("timestamp", "VARCHAR"),
    ("event", "VARCHAR"),
    ("level", "VARCHAR"),
    ("run_id", "VARCHAR"),
    ("task_id", "VARCHAR"),
    ("repeat_idx", "BIGINT"),
    ("call_id", "VARCHAR"),
    ("agent", "VARCHAR"),
    ("dimension", "VARCHAR"),
    ("queue_depth", "BIGINT"),
    ("active_slots", "BIGINT"),
    ("wait_s", "DOUBLE"),
    ("held_s", "DOUBLE"),
    ("cost_usd", "DOUBLE"),
    ("attempt", "BIGINT"),
    ("attempts", "BIGINT"),
    ("status_code", "BIGINT"),
    ("delay_s", "DOUBLE"),
    ("timeout_s", "DOUBLE"),
    ("elapsed_s", "DOUBLE"),
    ("error", "VARCHAR"),
    ("status", "VARCHAR"),
    ("termination_reason", "VARCHAR"),
    ("score", "DOUBLE"),
    ("duration_s", "DOUBLE"),
    ("batch_id", "VARCHAR"),
)

# The typed parts of a results file's line: a report's, and a header's (`type` "header").
RESULT_SHAPE: dict[str, object] = {
    "type": "VARCHAR",
    "run_id": "VARCHAR",
    "task_id": "VARCHAR",
    "repeat_idx": "BIGINT",
    "status": "VARCHAR",
    "termination_reason": "VARCHAR",
    "attempts": "BIGINT",
    "error": {"type": "VARCHAR", "message": "VARCHAR", "kind": "VARCHAR"},
    "usage": {
        "llm_calls": "BIGINT",
        "failed_calls": "BIGINT",
        "retries": "BIGINT",
        "prompt_tokens": "BIGINT",
        "completion_tokens": "BIGINT",
        "cached_tokens": "BIGINT",
        "cache_hits": "BIGINT",
        "journal_hits": "BIGINT",
        "hedges": "BIGINT",
        "cost_usd": "DOUBLE",
        "unpriced_calls": "BIGINT",
        "by_model": "JSON",
    },
    "timing": {"queued_s": "DOUBLE", "duration_s": "DOUBLE", "finished_at": "DOUBLE"},
    "eval": "JSON",
    # header lines
    "started_at": "VARCHAR",
    "benchmark": "VARCHAR",
    "asynceval_version": "VARCHAR",
    "python": "VARCHAR",
    "max_concurrent_llm_calls": "BIGINT",
    "max_concurrent_tasks": "BIGINT",
    "resumed": "BOOLEAN",
    "settings": "JSON",
}


def literal(text: str) -> str:
    """`text` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _shape(shape: object) -> str:
    """A json_transform structure (JSON text) for `shape`."""
    if isinstance(shape, dict):
        return "{" + ", ".join(f'"{key}": {_shape(value)}' for key, value in shape.items()) + "}"
    return f'"{shape}"'


def events_select(run: RunDir, index: int) -> str | None:
    """The events of `run` as one SELECT (columns: run_id, seq, timestamp typed, the other
    EVENT_COLUMNS, `fields`, and _dir = `index`), or None when it has no events file."""
    if run.events is None:
        return None
    structure = _shape(dict(EVENT_COLUMNS))
    typed = ", ".join(name for name, _ in EVENT_COLUMNS if name not in ("timestamp", "run_id"))
    dropped = "{" + ", ".join(f'"{name}": null' for name, _ in EVENT_COLUMNS) + "}"
    return f"""
        SELECT run_id, seq, TRY_CAST(e.timestamp AS TIMESTAMPTZ) AS timestamp, {typed},
            NULLIF(json_merge_patch(line, {literal(dropped)}), '{{}}')::VARCHAR AS fields,
            {index} AS _dir
        FROM (
            SELECT ordinality AS seq, json AS line,
                unnest(json_transform(json, {literal(structure)}))
            FROM read_ndjson_objects({literal(str(run.events))}, ignore_errors = true)
                WITH ORDINALITY
        ) AS e
        WHERE e.event IS NOT NULL"""


def empty_events() -> str:
    """A SELECT of no rows with the columns of `events_select`."""
    typed = ", ".join(
        f"NULL::{kind} AS {name}"
        for name, kind in EVENT_COLUMNS
        if name not in ("timestamp", "run_id")
    )
    return f"""
        SELECT NULL::VARCHAR AS run_id, NULL::BIGINT AS seq, NULL::TIMESTAMPTZ AS timestamp,
            {typed}, NULL::VARCHAR AS fields, NULL::INTEGER AS _dir
        WHERE false"""


def results_select(run: RunDir, index: int) -> str | None:
    """The lines of `run`'s results file (headers and reports) as one SELECT of the typed
    RESULT_SHAPE columns plus _dir and seq, or None when it has no results file."""
    if run.results is None:
        return None
    return f"""
        SELECT {index} AS _dir, ordinality AS seq, * EXCLUDE (ordinality)
        FROM (
            SELECT * FROM read_json({literal(str(run.results))}, format = 'newline_delimited',
                ignore_errors = true, columns = {{{_columns(RESULT_SHAPE)}}}) WITH ORDINALITY
        )"""


def empty_results() -> str:
    """A SELECT of no rows with the columns of `results_select`."""
    typed = ", ".join(f"NULL::{_sql_type(value)} AS {key}" for key, value in RESULT_SHAPE.items())
    return f"SELECT NULL::INTEGER AS _dir, NULL::BIGINT AS seq, {typed} WHERE false"


def _sql_type(shape: object) -> str:
    if isinstance(shape, dict):
        return "STRUCT(" + ", ".join(f"{k} {_sql_type(v)}" for k, v in shape.items()) + ")"
    return str(shape)


def _columns(shape: Mapping[str, object]) -> str:
    return ", ".join(f"{literal(key)}: {literal(_sql_type(value))}" for key, value in shape.items())


def union(selects: Sequence[str | None], empty: str) -> str:
    """The SELECTs that exist, one after the other (UNION ALL), or `empty` when none does."""
    found = [select for select in selects if select is not None]
    return "\nUNION ALL\n".join(found) if found else empty
