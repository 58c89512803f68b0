"""A table's column mapping (`load_tasks(query=, id=, fields=)`): which column fills which Task
field, checked once, and the Task of one row (the rules are in `asynceval.engine.datasets`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import TaskSpecError
from .task import Task

DATA_FIELDS = ("environment_data", "user_data", "evaluation_data", "metadata")


@dataclass(frozen=True)
class Columns:
    """A checked column mapping: which column fills which Task field (module doc)."""

    query: str
    id: str | None  # None: column "id" when a row has one
    fields: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(
        cls, query: str | None, id: str | None, fields: Mapping[str, str | Sequence[str]] | None
    ) -> Columns | None:
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

    def as_dict(self) -> dict[str, Any]:
        """The mapping as `load_tasks` keywords: `query`, `id` and `fields` (lists)."""
        return {
            "query": self.query,
            "id": self.id,
            "fields": {name: list(cols) for name, cols in self.fields.items()},
        }

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
TABLE = Columns("query", None, {})


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
