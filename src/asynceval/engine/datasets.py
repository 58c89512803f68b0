"""Task sources: JSONL, JSON, CSV/TSV files and Hugging Face datasets, with a column mapping.

`load_tasks(source, *, query=None, id=None, fields=None, split=None)` reads and checks every task
(ids unique, at least one task); `iter_tasks` takes the same arguments and reads lazily;
`open_tasks` too, as a `TaskStream` (what `asynceval run --tasks` runs): JSONL and CSV/TSV read
row by row, the first `CHECKED_AT_OPEN_ROWS` rows checked at open and the rest as they are
reached, ids checked for repeats as they come (8 bytes each), `count()` and `tasks_source_info`
from one pass over the file's bytes (no parsing). Forms:

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

import os
from collections.abc import Iterator, Mapping, Sequence
from os import PathLike
from typing import Any, TypedDict

from ..errors import TaskSpecError
from ._dataset_columns import DATA_FIELDS, TABLE, Columns
from ._dataset_rows import (
    BytesRead,
    Origin,
    Row,
    csv_rows,
    json_list,
    json_rows,
    jsonl_rows,
    load_hf,
    numbered,
    resolve,
)
from ._source_scan import Scan, hash_dir, scan_file
from .seen_ids import SeenIds
from .task import Task, duplicate_message

__all__ = [
    "CHECKED_AT_OPEN_BYTES",
    "CHECKED_AT_OPEN_ROWS",
    "DATA_FIELDS",
    "FieldOptions",
    "TaskStream",
    "iter_tasks",
    "load_tasks",
    "open_tasks",
    "parse_field_options",
    "tasks_source_info",
]

CHECKED_AT_OPEN_ROWS = 10_000
"""`open_tasks` reads and checks this many rows of a source at once (fewer if they are large)."""
CHECKED_AT_OPEN_BYTES = 4 * 2**20
"""... or as many as this many bytes of a JSONL or CSV file hold, if fewer."""
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
    columns = Columns.of(query, id, fields)
    src = resolve(source, split)
    tasks = [task for _, task in _read(src, columns)[0]]
    if not tasks:
        raise TaskSpecError(f"{source}: {_EMPTY[src.kind]}")
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
    columns = Columns.of(query, id, fields)
    return (task for _, task in _read(resolve(source, split), columns)[0])


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


def open_tasks(
    source: Source,
    *,
    query: str | None = None,
    id: str | None = None,
    fields: Mapping[str, str | Sequence[str]] | None = None,
    split: str | None = None,
) -> TaskStream:
    """The tasks of `source` as a `TaskStream`: its first rows (up to `CHECKED_AT_OPEN_ROWS`
    rows or `CHECKED_AT_OPEN_BYTES` bytes of the file) read and checked now, the rest as the
    stream is iterated. A bad mapping, a source with no task, a bad row or a repeated id among
    the first rows is a `TaskSpecError` here; so a file that small is checked whole before
    anything runs, as `load_tasks` checks it."""
    return TaskStream(source, Columns.of(query, id, fields), split)


class TaskStream:
    """Tasks read from a source as they are needed: what `asynceval run --tasks` runs.

    JSONL, CSV and TSV files are read row by row: memory holds the rows being read and the ids
    met (about 8 bytes each, `SeenIds`), whatever the file's length. A `.json` file's list and a
    Hugging Face dataset are loaded whole when the stream is opened (their Tasks are still built
    one at a time). Iterating gives the tasks in order; a bad row or a repeated id is a
    `TaskSpecError` naming the file and the line (and the first line of a repeated id when it
    was among the rows checked at open) when the iteration reaches it, after every task before
    it. A stream can be iterated again (the file is read again) unless it reads a pipe.

    There is no `__len__` on purpose: the engine treats the stream as lazy, and nothing counts
    its rows unless asked. `count()` tells the rows without parsing them; `tasks_source_info`
    describes the source for a run's manifest.
    """

    def __init__(self, source: Source, columns: Columns | None, split: str | None) -> None:
        self.source = os.fspath(source)
        self._origin = resolve(source, split)
        self.kind = self._origin.kind
        self._columns = columns
        self._scanned: Scan | None = None
        self._dir_hash: str | None = None
        read = BytesRead()
        tasks, self._held = _read(self._origin, columns, whole=True, read=read)
        ids = _Ids(self._prefix)
        head: list[Task] = []
        self._rows_at_open: int | None = None  # every row, when the check at open read them all
        for where, task in tasks:
            ids.check(where, task)
            head.append(task)
            if len(head) >= CHECKED_AT_OPEN_ROWS or read.count >= CHECKED_AT_OPEN_BYTES:
                break
        else:
            self._rows_at_open = len(head)
        if not head:
            raise TaskSpecError(f"{self.source}: {_EMPTY[self.kind]}")
        head.reverse()  # handed out from the end, so that each is let go once it is taken
        self._opened: tuple[list[Task], Iterator[tuple[str, Task]], _Ids] | None = (
            head,
            tasks,
            ids,
        )
        streamed = self.kind in ("jsonl", "csv", "tsv")
        self._again = not streamed or os.path.isfile(self._origin.name)

    def __repr__(self) -> str:
        return f"TaskStream({self.source!r}, kind={self.kind!r})"

    @property
    def checked_whole(self) -> bool:
        """Whether every row was read and checked when the stream was opened."""
        return self._rows_at_open is not None

    def __iter__(self) -> Iterator[Task]:
        if self._opened is not None:
            head, rest, ids = self._opened
            self._opened = None
        elif self._again:
            head, ids = [], _Ids(self._prefix)
            rest = _read(self._origin, self._columns, whole=True, held=self._held)[0]
        else:
            raise TaskSpecError(f"{self.source}: already read (a pipe cannot be read again)")
        return self._tasks(head, rest, ids)

    @staticmethod
    def _tasks(head: list[Task], rest: Iterator[tuple[str, Task]], ids: _Ids) -> Iterator[Task]:
        while head:
            yield head.pop()
        for where, task in rest:
            ids.check(where, task)
            yield task

    def count(self) -> int | None:
        """The number of tasks, without parsing them: exact when the check at open read them
        all, for a .json list and a dataset; else the rows of the file counted on its bytes
        (`_source_scan`: 0.08 s for a million lines, once, shared with `tasks_source_info`'s
        hash), an estimate only for a CSV with stray quotes; None for a pipe."""
        if self._rows_at_open is not None:
            return self._rows_at_open
        if self._held is not None:
            return len(self._held)
        scanned = self._scan()
        return None if scanned is None else scanned.rows

    @property
    def _prefix(self) -> str:
        """What `where` starts with in this source's messages."""
        return self._origin.where if self.kind.startswith("hf") else self._origin.name

    def _scan(self) -> Scan | None:
        if self._scanned is None and os.path.isfile(self._origin.name):
            self._scanned = scan_file(self._origin.name, self.kind)
        return self._scanned

    def _info(self) -> dict[str, Any]:
        origin, columns = self._origin, self._columns
        if columns is None and self.kind not in ("jsonl", "json"):
            columns = TABLE
        info: dict[str, Any] = {
            "source": self.source,
            "kind": self.kind,
            "path": None if self.kind == "hf" else os.path.abspath(origin.name),
            "name": origin.name if self.kind == "hf" else None,
            "config": origin.config,
            "split": origin.split,
            "sha256": None,
            "sha256_missing": None,
            "fingerprint": None,
            "rows": None,
            "mapping": None if columns is None else columns.as_dict(),
        }
        if self.kind == "hf":
            info["sha256_missing"] = (
                "a dataset of the hub: its files are in the datasets cache; see fingerprint"
            )
        elif self.kind == "hfdir":
            if self._dir_hash is None:
                self._dir_hash = hash_dir(origin.name)
            info["sha256"] = self._dir_hash
        elif (scanned := self._scan()) is not None:
            info["sha256"] = scanned.sha256
        else:
            info["sha256_missing"] = "not a regular file (a pipe or a device is read once)"
        if self.kind.startswith("hf"):
            info["fingerprint"] = getattr(self._held, "_fingerprint", None)
        info["rows"] = self.count()
        return info


def tasks_source_info(tasks: TaskStream) -> dict[str, Any]:
    """What a run's manifest records of its tasks' source (JSON-ready): `source` as given,
    `kind` (jsonl, json, csv, tsv, hfdir, hf), `path` (absolute; the folder of a saved dataset;
    None for the hub), `name`/`config`/`split` of a dataset, `sha256` of the file's bytes (of a
    saved dataset's files), or None with `sha256_missing` saying why (the hub, a pipe),
    `fingerprint` (a dataset's, as `datasets` computes it), `rows` (`TaskStream.count()`), and
    `mapping`: None when rows are dicts of Task fields, else `{"query": column, "id": column
    or None (column "id" if any), "fields": {field: [columns]}}`, such that
    `open_tasks(path, split=split, **mapping)` reads the same tasks again. Hashing a 168 MB
    file takes about 0.1 s; it is done once per stream, in the same pass as `count()`."""
    return tasks._info()


class _Ids:
    """A stream's ids met so far (`SeenIds`, 8 bytes each) and where each of the first
    `CHECKED_AT_OPEN_ROWS` was met, to name both rows of a repeat."""

    def __init__(self, prefix: str) -> None:
        self._seen = SeenIds()
        self._first: dict[str, str] = {}
        self._prefix = prefix

    def check(self, where: str, task: Task) -> None:
        if self._seen.add(task.id):
            if len(self._first) < CHECKED_AT_OPEN_ROWS:
                self._first[task.id] = where
            return
        first = self._first.get(task.id)
        if first is None:
            raise TaskSpecError(duplicate_message(task.id, where))
        place = first.removeprefix(self._prefix)
        place = f"line {place[1:]}" if place.startswith(":") else place.removeprefix(": ")
        raise TaskSpecError(f"{duplicate_message(task.id, where)} (first at {place})")


def _read(
    src: Origin,
    columns: Columns | None,
    *,
    whole: bool = False,
    read: BytesRead | None = None,
    held: Any = None,
) -> tuple[Iterator[tuple[str, Task]], Any]:
    """The source's tasks read lazily, each with where it was read; and, `whole`, the rows a
    .json file or a dataset holds, loaded now (`held`: those loaded before, read again)."""
    rows: Iterator[Row]
    if src.kind == "jsonl":
        rows = jsonl_rows(src.name, read)
    elif src.kind == "json":
        query = columns.query if columns else "query"
        if whole:
            held = json_list(src.name, query) if held is None else held
            rows = numbered(f"{src.name}: row", held)
        else:
            rows = json_rows(src.name, query)
    else:
        columns = columns or TABLE  # a table has columns, not Task-field objects
        if src.kind.startswith("hf"):
            held = load_hf(src, columns.check) if held is None else held
            rows = numbered(f"{src.where}: row", held)
        else:
            rows = csv_rows(src, src.kind == "tsv", columns.check, read)
    return ((where, _task(where, row, columns)) for where, row in rows), held


def _task(where: str, row: Any, columns: Columns | None) -> Task:
    try:
        return Task.from_dict(row) if columns is None else columns.task(row)
    except (TaskSpecError, TypeError) as exc:
        raise TaskSpecError(f"{where}: {exc}") from None
