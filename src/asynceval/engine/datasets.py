"""Task sources: JSONL, JSON, CSV/TSV files and Hugging Face datasets, with a column mapping.

`load_tasks(source, *, query=None, id=None, fields=None, split=None)` reads and checks every task
(ids unique, at least one task); `iter_tasks` takes the same arguments and reads lazily. Forms:

- `.json`: a list of row objects, or an object whose only list value is that list
  (`{"data": [...]}`, `{"version": 2, "data": [...]}`); read whole.
- `.csv` / `.tsv`: a header row, then a task per row; UTF-8, a BOM is fine, blank lines skipped,
  a row with more or fewer values than the header is an error. Values stay the strings written
  (no number guessing: id "007" stays "007"); an empty query cell is a missing query.
- `hf:NAME[:CONFIG][@SPLIT]`: `datasets.load_dataset(NAME, CONFIG, split=SPLIT)` (SPLIT may be a
  slice, `train[:100]`); or a directory written by `save_to_disk`, with `DIR@SPLIT` or `split=`
  to pick a split of a DatasetDict (needed when it holds several). `datasets` is imported only
  for these, and missing it is an error saying `pip install 'asynceval[hf]'`.
- anything else (`.jsonl`, `.ndjson`, no suffix, `/dev/stdin`): one JSON object per line.

With no `query`, `id` or `fields`, a JSON/JSONL row is a dict of Task fields, as it always was
(unknown keys refused). CSV and dataset rows, and JSON rows once a mapping is given, are read by
column: the query is column `query` or the one `query=` names (missing or empty: an error); the
id is column `id` if any, or the one `id=` names (integers become strings; empty: derived from
the content). `fields` maps environment_data / user_data / evaluation_data / metadata to a column
or a list of columns, and the field gets a dict of them: `fields={"evaluation_data": ["answer"]}`
gives `{"answer": ...}`. A column named after a Task field that the mapping leaves alone (say
`protocol` or `evaluation_data`, holding a JSON object) fills that field as is. Every column still
unused goes into `metadata` under its own name, so nothing is lost silently; unless `fields` names
metadata's columns itself: then only those (`{"metadata": []}` drops the rest).

Errors are `TaskSpecError`s naming source, row and field: `tasks.csv:4: query: missing (column
'question' is empty)` (CSV/JSONL: the line), `tasks.json: row 3: ...`, `hf:gsm8k: row 7: ...`. A
mapped column a CSV or dataset lacks is refused before any row is read, listing the columns.
`parse_field_options` turns the CLI's options into `load_tasks` keywords.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, TypedDict

from ..errors import TaskSpecError
from ._dataset_rows import Row, csv_rows, hf_rows, json_rows, jsonl_rows, resolve
from .task import Task, duplicate_message

__all__ = ["DATA_FIELDS", "FieldOptions", "iter_tasks", "load_tasks", "parse_field_options"]

DATA_FIELDS = ("environment_data", "user_data", "evaluation_data", "metadata")
_EMPTY = {
    "jsonl": "no tasks in the file (one JSON object per line)",
    "json": "no tasks in the file (a list of task objects)",
    **dict.fromkeys(("csv", "tsv"), "no tasks in the file (a header row, then one task per row)"),
    **dict.fromkeys(("hf", "hfdir"), "no rows in the dataset"),
}

Source = str | PathLike[str]


class FieldOptions(TypedDict):
    """`load_tasks`' mapping keywords, as `parse_field_options` builds them from CLI options."""

    query: str | None
    id: str | None
    fields: dict[str, list[str]] | None


def load_tasks(
    source: Source,
    *,
    query: str | None = None,
    id: str | None = None,  # the Task field's name, like query
    fields: Mapping[str, str | Sequence[str]] | None = None,
    split: str | None = None,
) -> list[Task]:
    """All tasks of `source` (see the module doc for forms and mapping), checked before any is
    returned: a bad row, a repeated id or no task at all is a `TaskSpecError`."""
    kind, rows = _read(source, split, _Columns.of(query, id, fields))
    tasks = list(rows)
    if not tasks:
        raise TaskSpecError(f"{source}: {_EMPTY[kind]}")
    seen: dict[str, int] = {}
    for index, task in enumerate(tasks):
        if task.id in seen:
            raise TaskSpecError(
                duplicate_message(task.id, f"{source}: tasks {seen[task.id] + 1} and {index + 1}")
            )
        seen[task.id] = index
    return tasks


def iter_tasks(
    source: Source,
    *,
    query: str | None = None,
    id: str | None = None,
    fields: Mapping[str, str | Sequence[str]] | None = None,
    split: str | None = None,
) -> Iterator[Task]:
    """Tasks of `source` read lazily: a bad row (or a missing file) raises when it is reached;
    a bad mapping, or a directory that is no saved dataset, at once. A Hugging Face dataset is
    loaded here, at once (a download must not stall a run's event loop when the run reaches its
    first task); its rows are still read as they are needed. Ids are not checked for repeats
    here (the engine refuses a repeat when it meets one)."""
    return _read(source, split, _Columns.of(query, id, fields))[1]


def parse_field_options(
    query: str | None, id: str | None, field_specs: Sequence[str] = ()
) -> FieldOptions:
    """`--query-field COLUMN`, `--id-field COLUMN` and repeatable `--field FIELD=COLUMN[,COLUMN]`
    as `load_tasks` keywords: `load_tasks(path, **parse_field_options(...))`. Repeating a FIELD
    adds columns; `--field metadata=` (no column) drops unmapped columns. No option at all gives
    all-None keywords: the plain Task-field reading of JSON files."""
    mapped: dict[str, list[str]] = {}
    for spec in field_specs:
        name, equals, names = spec.partition("=")
        name = name.strip()
        if name in ("query", "id"):
            raise TaskSpecError(f"--field {spec}: name the {name} column with --{name}-field")
        if not equals or name not in DATA_FIELDS:
            raise TaskSpecError(
                f"--field {spec}: expected FIELD=COLUMN[,COLUMN...] with FIELD one of "
                + ", ".join(DATA_FIELDS)
            )
        mapped.setdefault(name, []).extend(c.strip() for c in names.split(",") if c.strip())
    return {"query": query, "id": id, "fields": mapped or None}


@dataclass(frozen=True)
class _Columns:
    """A checked column mapping: which column fills which Task field (module doc)."""

    query: str
    id: str | None  # None: column "id" when a row has one
    fields: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(
        cls, query: str | None, id: str | None, fields: Mapping[str, str | Sequence[str]] | None
    ) -> _Columns | None:
        """The mapping given, or None when nothing was (rows are Task-field dicts)."""
        if query is None and id is None and fields is None:
            return None
        for name, value in (("query", query), ("id", id)):
            if value is not None and (not isinstance(value, str) or not value):
                raise TaskSpecError(f"{name}= must be a column name, got {value!r}")
        if not isinstance(fields, Mapping | None):
            raise TaskSpecError(f"fields= must map Task fields to columns, got {fields!r}")
        checked: dict[str, tuple[str, ...]] = {}
        for name, names in (fields or {}).items():
            if name not in DATA_FIELDS:
                hint = f"; name the {name} column with {name}=" if name in ("query", "id") else ""
                raise TaskSpecError(
                    f"fields: {name!r} is not one of {', '.join(DATA_FIELDS)}{hint}"
                )
            names = (names,) if isinstance(names, str) else tuple(names)
            if not all(isinstance(n, str) and n for n in names):
                raise TaskSpecError(f"fields: {name}: column names must be strings, got {names!r}")
            checked[name] = names
        return cls(query or "query", id, checked)

    def named(self) -> dict[str, str]:
        """Every column the mapping names -> the Task field it is for."""
        named = {column: field for field, cols in self.fields.items() for column in cols}
        named[self.query] = "query"
        if self.id is not None:
            named[self.id] = "id"
        return named

    def check(self, where: str, columns: Sequence[str]) -> None:
        """Refuse, before any row is read, a mapped column a table does not have."""
        for column, field in self.named().items():
            if column not in columns:
                hint = (
                    "; name the query's column (query= / --query-field)" if field == "query" else ""
                )
                raise TaskSpecError(
                    f"{where}: {field}: no column {column!r} (columns: {', '.join(columns)}){hint}"
                )

    def task(self, row: Any) -> Task:
        """The Task of one row; a `TaskSpecError("field: problem")` when it has none."""
        if not isinstance(row, Mapping):
            raise TaskSpecError(f"a task must be an object, got {type(row).__name__}")
        have = ", ".join(map(str, row)) or "nothing"
        named = self.named()
        for column, field in named.items():
            if column not in row:
                raise TaskSpecError(f"{field}: missing (no column {column!r}; the row has {have})")
        if row[self.query] is None or row[self.query] == "":
            raise TaskSpecError(f"query: missing (column {self.query!r} is empty)")
        values: dict[str, Any] = {"query": row[self.query]}
        values.update({f: {c: row[c] for c in cols} for f, cols in self.fields.items()})
        id_column = self.id or ("id" if "id" in row and "id" not in named else None)
        if id_column is not None:
            values["id"] = _id_of(row[id_column], id_column)
        used = {*named, *([id_column] if id_column else [])}
        # a column named after a Task field the mapping left alone fills that field as is
        for field in ("protocol", *DATA_FIELDS):
            if field not in values and field in row and field not in used:
                used.add(field)
                if row[field] is not None and row[field] != "":
                    values[field] = _object_of(row[field], field)
        rest = {key: value for key, value in row.items() if key not in used}
        if rest and "metadata" not in self.fields:
            own = values.get("metadata", {})
            if not isinstance(own, Mapping):
                raise TaskSpecError(f"metadata must be an object, got {own!r}")
            if clash := sorted(set(own) & set(rest)):
                raise TaskSpecError(
                    f"metadata: column {clash[0]!r} is also a key of the row's metadata; "
                    "map one of them with fields="
                )
            values["metadata"] = {**own, **rest}
        return Task(**values)


# a table's mapping when none is given: columns query and id, the rest into metadata
_TABLE = _Columns("query", None, {})


def _object_of(value: Any, field: str) -> Any:
    """A Task field's column as the object it holds: a table's cells are text, so a CSV's
    `metadata` column holds its object as JSON."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise TaskSpecError(f"{field}: must hold a JSON object, got {value[:80]!r}") from None


def _id_of(value: Any, column: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # ids in JSON files and datasets are often numbers
    if value is None:
        return ""  # derived from the content, as for a task given none
    if not isinstance(value, str):
        raise TaskSpecError(f"id: must be a string or an integer, got {value!r} ({column!r})")
    return value


def _read(
    source: Source, split: str | None, columns: _Columns | None
) -> tuple[str, Iterator[Task]]:
    """The source's kind, and its tasks read lazily."""
    src = resolve(source, split)
    rows: Iterator[Row]
    if src.kind == "jsonl":
        rows = jsonl_rows(src.name)
    elif src.kind == "json":
        rows = json_rows(src.name, columns.query if columns else "query")
    else:
        columns = columns or _TABLE  # a table has columns, not Task-field objects
        tsv = src.kind == "tsv"
        check = columns.check
        rows = hf_rows(src, check) if src.kind.startswith("hf") else csv_rows(src, tsv, check)
    return src.kind, (_task(where, row, columns) for where, row in rows)


def _task(where: str, row: Any, columns: _Columns | None) -> Task:
    try:
        return Task.from_dict(row) if columns is None else columns.task(row)
    except (TaskSpecError, TypeError) as exc:
        raise TaskSpecError(f"{where}: {exc}") from None
