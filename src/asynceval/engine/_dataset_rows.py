"""Where tasks' rows come from: a source's kind from its form, and its rows read lazily.

Rows are `(where, row)`: `where` names the file and line (or row) for messages. The JSONL, JSON,
CSV/TSV readers open nothing until iterated; a Hugging Face source imports `datasets` and loads
the dataset when its reader is made (`hf_rows`), so that no download waits in a run's event loop.
`json_list` and `load_hf` load a .json file's list or a dataset whole, for a reader that keeps it
(`numbered` then gives its rows); a `BytesRead` passed to the JSONL and CSV readers counts the
bytes they have consumed, so that a check at the start can stop after so many.
"""

from __future__ import annotations

import csv
import importlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import IO, Any

from ..errors import TaskSpecError

Row = tuple[str, Any]
Check = Callable[[str, Sequence[str]], None]
"""Refuses a table's columns when a mapping names one it lacks (`where`, the column names)."""

_MOST_CSV_FIELD = 2**31 - 1  # the csv module takes a C long; this fits on every platform


class BytesRead:
    """The bytes of its file a JSONL or CSV reader has consumed so far (`count`)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


@dataclass(frozen=True)
class Origin:
    """Where rows come from: `kind` is jsonl, json, csv, tsv, hf (hub) or hfdir (local)."""

    kind: str
    where: str  # the source as the user gave it, for messages
    name: str  # the path, or the dataset name of an hf source
    config: str | None = None
    split: str | None = None


def resolve(source: str | PathLike[str], split: str | None) -> Origin:
    """The source's kind from its form (module doc); no file is opened here."""
    where = os.fspath(source)
    if isinstance(source, str) and source.startswith("hf:") and not os.path.exists(source):
        name, _, wanted = source[3:].partition("@")
        name, _, config = name.partition(":")
        if not name or (wanted == "" and "@" in source) or "@" in wanted:
            # A second @ is no split, nor a revision (this form has none: a dataset at a
            # revision is loaded with `datasets.load_dataset`, saved with `save_to_disk`, and
            # its folder given instead).
            raise TaskSpecError(f"{source}: expected hf:NAME[:CONFIG][@SPLIT]")
        return Origin("hf", where, name, config or None, _one_split(where, wanted, split))
    if os.path.isdir(source):
        if _saved_dataset(source):
            return Origin("hfdir", where, where, split=split)
        raise TaskSpecError(
            f"{source}: a directory, not a task file (nor a dataset saved with save_to_disk)"
        )
    head, at, wanted = where.rpartition("@")
    if at and not os.path.exists(source) and _saved_dataset(head):
        return Origin("hfdir", where, head, split=_one_split(where, wanted, split))
    if split is not None:
        raise TaskSpecError(f"{source}: split= is for Hugging Face datasets, not files")
    suffix = os.path.splitext(where)[1].lower()
    kind = {".json": "json", ".csv": "csv", ".tsv": "tsv"}.get(suffix, "jsonl")
    return Origin(kind, where, where)


def _one_split(where: str, in_source: str, keyword: str | None) -> str | None:
    if in_source and keyword is not None and keyword != in_source:
        raise TaskSpecError(f"{where}: split {keyword!r} given too, pick one")
    return in_source or keyword


def _saved_dataset(path: str | PathLike[str]) -> bool:
    # the files save_to_disk writes, so telling a dataset from any folder imports nothing
    return any(os.path.isfile(os.path.join(path, f)) for f in ("dataset_dict.json", "state.json"))


def jsonl_rows(path: str, read: BytesRead | None = None) -> Iterator[Row]:
    with open(path, "rb") as file:
        hint = " (a task file holds one JSON object per line)"
        for number, line in enumerate(text_lines(path, file, hint, read), start=1):
            if not line.strip():
                continue
            try:
                yield f"{path}:{number}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskSpecError(f"{path}:{number}: not valid JSON ({exc.msg})") from None


def json_rows(path: str, query: str) -> Iterator[Row]:
    """The rows of a .json file, read (whole) when the first one is asked for."""
    yield from numbered(f"{path}: row", json_list(path, query))


def json_list(path: str, query: str) -> list[Any]:
    """The list of rows a .json file holds (module doc of `datasets`), read now."""
    try:
        with open(path, encoding="utf-8-sig") as file:
            data = json.load(file)
    except UnicodeDecodeError:
        raise TaskSpecError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        hint = "; one task per line is a .jsonl file" if exc.msg == "Extra data" else ""
        raise TaskSpecError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}){hint}") from None
    if isinstance(data, dict):
        lists = [value for value in data.values() if isinstance(value, list)]
        if query in data or len(lists) != 1:
            raise TaskSpecError(
                f"{path}: expected a list of tasks, or an object holding one list of them "
                f"(found keys: {', '.join(data) or 'none'})"
            )
        data = lists[0]
    if not isinstance(data, list):
        raise TaskSpecError(f"{path}: expected a list of tasks, got {type(data).__name__}")
    return data


def numbered(prefix: str, rows: Iterable[Any]) -> Iterator[Row]:
    """Rows held whole, each named `PREFIX N` (N from 1)."""
    return ((f"{prefix} {number}", row) for number, row in enumerate(rows, start=1))


def csv_rows(
    source: Origin, tsv: bool, check: Check, read: BytesRead | None = None
) -> Iterator[Row]:
    """Rows of a CSV/TSV file as dicts, each named by the line it starts on."""
    path = source.name
    with open(path, "rb") as file:
        lines = text_lines(path, file, read=read)
        reader = csv.reader(lines, delimiter="\t" if tsv else ",")
        header: list[str] | None = None
        try:
            while True:
                start = reader.line_num + 1  # a quoted value may span lines: name the first
                values = _next_row(reader)
                if values is None:
                    return
                if not values:
                    continue  # a blank line
                if header is None:
                    values = [value.strip() for value in values]  # "id, query" names query
                    if repeated := sorted({v for v in values if values.count(v) > 1}):
                        raise TaskSpecError(f"{path}:{start}: column {repeated[0]!r} appears twice")
                    header = values
                    check(path, header)
                elif len(values) != len(header):
                    raise TaskSpecError(
                        f"{path}:{start}: {len(values)} values for {len(header)} columns"
                    )
                else:
                    yield f"{path}:{start}", dict(zip(header, values, strict=True))
        except csv.Error as exc:
            raise TaskSpecError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None


def _next_row(reader: Iterator[list[str]]) -> list[str] | None:
    """The reader's next row. The csv module's field size limit is process-wide: it is raised
    for this one read only (long-context rows hold values far above its 128 KiB default), so a
    paused generator never leaves it changed for the rest of the process."""
    limit = csv.field_size_limit(_MOST_CSV_FIELD)
    try:
        return next(reader, None)
    finally:
        csv.field_size_limit(limit)


def text_lines(
    path: str, file: IO[bytes], hint: str = "", read: BytesRead | None = None
) -> Iterator[str]:
    # decoded a line at a time so a bad byte is reported on its own line (a text file decodes
    # in blocks); a byte-order mark, as spreadsheets write, is dropped
    for number, raw in enumerate(file, start=1):
        if read is not None:
            read.count += len(raw)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TaskSpecError(f"{path}:{number}: not UTF-8 text{hint}") from None
        yield line.removeprefix("\ufeff") if number == 1 else line


def hf_rows(source: Origin, check: Check) -> Iterator[Row]:
    """The dataset's rows. It is loaded (from the hub, a cache or a folder) and its columns
    checked here, before this returns: a run that reads tasks lazily must not wait on a
    download in the middle of its event loop, with calls in flight."""
    return numbered(f"{source.where}: row", load_hf(source, check))


def load_hf(source: Origin, check: Check) -> Any:
    """The dataset (a `datasets.Dataset`) of an hf or hfdir source, its columns checked."""
    where = source.where
    try:
        # imported here: the hf extra is optional and `datasets` is slow to import
        hf = importlib.import_module("datasets")
    except ImportError:
        raise TaskSpecError(
            f"{where}: reading a Hugging Face dataset needs pip install 'asynceval[hf]'"
        ) from None
    try:
        if source.kind == "hf":
            data = hf.load_dataset(source.name, source.config, split=source.split)
        else:
            data = hf.load_from_disk(source.name)
    except Exception as exc:  # hub, network and format errors alike: one line naming the source
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise TaskSpecError(f"{where}: cannot load the dataset ({detail})") from None
    data = _pick_split(source, data)
    check(where, list(data.column_names))
    return data


def _pick_split(source: Origin, data: Any) -> Any:
    """The one split of a DatasetDict (a Mapping of split -> Dataset) the source means."""
    wanted, where = source.split, source.where
    if isinstance(data, Mapping):
        splits = ", ".join(data) or "none"
        if wanted is None and len(data) == 1:
            return next(iter(data.values()))
        if wanted is None:
            raise TaskSpecError(f"{where}: holds splits {splits}; pick one with {where}@SPLIT")
        if wanted not in data:
            raise TaskSpecError(f"{where}: no split {wanted!r} (splits: {splits})")
        return data[wanted]
    own = getattr(data, "split", None)
    if source.kind == "hfdir" and wanted is not None and str(own or "") != wanted:
        raise TaskSpecError(f"{where}: a single dataset with no split {wanted!r}; drop the split")
    return data
