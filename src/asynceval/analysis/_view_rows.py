"""The results side of `asynceval view`: a results.jsonl as a table and its rows' details.

The file is read one line at a time. Of several reports of one (task_id, repeat_idx), as after a
resume, the last counts (as in `summarize`); the row keeps its first place. Each row becomes one
entry of a column-wise table (what the page filters, searches and sorts over) and one JSON line
of details (error, eval, traces, config) that the page parses only when the row is opened;
what the table has (usage counts, timing, attempts) is not repeated there, and configs, often
the same for every row, are kept once per run (`RunRows.configs`, their `metadata` left out).

Details share one budget of characters of JSON per run, so that a 100,000-row run keeps its
page loadable: each row may use its fair share of what is left (remaining budget over
remaining lines), a row that did not pass `FAILING_SHARE` times that (what went wrong is what
people open), never more than `row_cap` nor less than `MIN_ROW_CAP`; what a row leaves unused
goes to the rows after it. A value over its share is shrunk (see `fit`) and the row says so,
naming the line of results.jsonl that holds it whole. What `summarize` and `compare_runs` need
is kept apart, without traces or config.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .summary import report_score

ROW_CAP = 50_000  # characters of JSON of one row's details, at most
MIN_ROW_CAP = 600  # ... and at least, however many rows share the budget
BUDGET = 50_000_000  # characters of details' JSON per run, shared by its rows
FAILING_SHARE = 8
CONFIG_CAP = 8_000
MAX_CONFIGS = 1_000  # distinct configs kept per run; rows past it show none
# (longest string, most items of a list or object) tried in turn until a value fits its cap.
_SHRINK_STEPS = ((4000, 200), (1000, 60), (300, 24), (100, 8), (40, 4))
COLUMNS = (
    "task_id",
    "repeat_idx",
    "status",
    "termination_reason",
    "score",
    "duration_s",
    "queued_s",
    "finished_at",
    "llm_calls",
    "retries",
    "prompt_tokens",
    "completion_tokens",
    "attempts",
    "error",
    "line",
)
_IN_COLUMNS = {"llm_calls", "retries", "prompt_tokens", "completion_tokens"}
_LIGHT_KEYS: tuple[str, ...] = ("type", "task_id", "repeat_idx", "status", "termination_reason")
_LIGHT_KEYS += ("eval", "usage", "timing", "started_at_unix")

# Built once: json.dumps with options other than the defaults builds an encoder per call.
_encode = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False
).encode


def _dumps(value: Any) -> str:
    """Compact JSON that the page's JSON.parse accepts: NaN and infinities (which Python's json
    reads from a hand-edited file) become strings."""
    try:
        return _encode(value)
    except ValueError:
        return _encode(finite(value))


def finite(value: Any) -> Any:
    """A copy of `value` with every float that is not finite as its string form."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


@dataclass
class RunRows:
    """A results file read for the view (see the module docstring)."""

    headers: list[dict[str, Any]] = field(default_factory=list)
    columns: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in COLUMNS})
    details: list[str] = field(default_factory=list)  # one JSON text per row
    configs: list[Any] = field(default_factory=list)  # distinct configs, by index from details
    records: list[dict[str, Any]] = field(default_factory=list)  # light: for summarize/compare
    damaged_lines: int = 0
    superseded: int = 0
    truncated_rows: int = 0
    config_index: dict[str, int] = field(default_factory=dict)  # config JSON -> index


class _Budget:
    """Characters of JSON left for the rows' details, shared as the module docstring says."""

    def __init__(self, total: int, lines: int, row_cap: int) -> None:
        self.left, self.lines, self.row_cap = total, lines, row_cap

    def share(self, failing: bool) -> int:
        fair = self.left / max(1, self.lines) * (FAILING_SHARE if failing else 1)
        return int(min(self.row_cap, max(MIN_ROW_CAP, fair)))

    def spend(self, used: int) -> None:
        self.left = max(0, self.left - used)
        self.lines = max(0, self.lines - 1)


def _count_lines(path: Path) -> int:
    """The lines of the file at `path` (at least 1), counted without parsing them."""
    lines, last = 0, b"\n"
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return max(1, lines + (last != b"\n"))


def read_rows(path: Path, budget: int = BUDGET, row_cap: int = ROW_CAP) -> RunRows:
    """The table and details of the results file at `path` (raises OSError if unreadable)."""
    rows = RunRows()
    share = _Budget(budget, _count_lines(path), row_cap)
    place: dict[tuple[Any, Any], int] = {}
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                record = None
            if not isinstance(record, dict):
                rows.damaged_lines += 1  # e.g. a line cut short by a kill
                share.spend(0)
            elif record.get("type") == "header":
                rows.headers.append(record)
                rows.records.append(record)
                share.spend(0)
            else:
                _add_report(rows, place, record, number, share)
    return rows


def _add_report(
    rows: RunRows,
    place: dict[tuple[Any, Any], int],
    record: dict[str, Any],
    number: int,
    share: _Budget,
) -> None:
    cells = _cells(record, number)
    cap = share.share(failing=cells["score"] != 1.0)
    detail, cut = _detail(rows, record, number, cap)
    share.spend(len(detail))
    rows.records.append({key: record[key] for key in _LIGHT_KEYS if key in record})
    rows.truncated_rows += cut
    pair = (record.get("task_id"), record.get("repeat_idx"))
    index = place.get(pair)
    if index is None:
        place[pair] = len(rows.details)
        for name in COLUMNS:
            rows.columns[name].append(cells[name])
        rows.details.append(detail)
        return
    rows.superseded += 1  # a resumed run's re-run: the later report counts
    for name in COLUMNS:
        rows.columns[name][index] = cells[name]
    rows.details[index] = detail


def _number(value: Any) -> float | int | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _cells(record: Mapping[str, Any], number: int) -> dict[str, Any]:
    """One row of the table: short values only (the error as one line of at most 200 chars)."""
    usage, timing = _mapping(record.get("usage")), _mapping(record.get("timing"))
    task_id = record.get("task_id")
    status, reason = record.get("status"), record.get("termination_reason")
    return {
        "task_id": None if task_id is None else str(task_id),
        "repeat_idx": _number(record.get("repeat_idx")),
        "status": None if status is None else str(status),
        "termination_reason": None if reason is None else str(reason),
        "score": report_score(record),
        "duration_s": _number(timing.get("duration_s")),
        "queued_s": _number(timing.get("queued_s")),
        "finished_at": _number(timing.get("finished_at")),
        "llm_calls": _number(usage.get("llm_calls")),
        "retries": _number(usage.get("retries")),
        "prompt_tokens": _number(usage.get("prompt_tokens")),
        "completion_tokens": _number(usage.get("completion_tokens")),
        "attempts": _number(record.get("attempts")),
        "error": _error_line(record.get("error")),
        "line": number,
    }


def _error_line(error: Any) -> str | None:
    if error is None:
        return None
    if isinstance(error, Mapping):
        kind, message = error.get("type"), error.get("message")
        text = f"{kind}: {message}" if kind and message else str(message or kind or error)
    else:
        text = str(error)
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:199] + "…"


def _detail(rows: RunRows, record: Mapping[str, Any], number: int, cap: int) -> tuple[str, bool]:
    """A row's details as one JSON text of about `cap` characters at most, and whether any of
    it was cut to fit: the error and the eval may take a quarter each, the traces the rest."""
    parts = [f'"line":{number}']
    truncated: list[str] = []
    room = cap
    for key, limit in (("error", cap // 4), ("eval", cap // 4), ("traces", None)):
        text, cut = fit_text(record.get(key), room if limit is None else limit)
        parts.append(f'"{key}":{text}')
        room = max(MIN_ROW_CAP // 2, room - len(text))
        if cut:
            truncated.append(key)
    parts.append(f'"config":{_config(rows, record.get("config"))}')
    usage = {k: v for k, v in _mapping(record.get("usage")).items() if k not in _IN_COLUMNS}
    if usage:
        parts.append(f'"usage":{_dumps(usage)}')
    if truncated:
        parts.append(f'"truncated":{_dumps(truncated)},"cap":{cap}')
    return "{" + ",".join(parts) + "}", bool(truncated)


def _config(rows: RunRows, config: Any) -> str:
    """The index in `rows.configs` of a row's config, kept once per distinct value, without its
    `metadata` (when it was gathered, how many components): "null" when there is none or the
    run already has MAX_CONFIGS distinct ones."""
    if isinstance(config, Mapping):
        config = {key: value for key, value in config.items() if key != "metadata"}
    if not config:
        return "null"
    text, _ = fit_text(config, CONFIG_CAP)
    index = rows.config_index.get(text)
    if index is None:
        if len(rows.configs) >= MAX_CONFIGS:
            return "null"
        index = rows.config_index[text] = len(rows.configs)
        rows.configs.append(json.loads(text))
    return str(index)


def fit_text(value: Any, cap: int) -> tuple[str, bool]:
    """The JSON of `value`, or of a shrunk copy at most about `cap` characters long, and whether
    it was shrunk. Shrinking keeps the shape: long strings keep their head, long lists their
    first and last items (an agent's last messages are often what went wrong), with markers
    saying what was left out; as a last resort the value becomes the head of its JSON text."""
    text = _dumps(value)
    if len(text) <= cap:
        return text, False
    for longest, most in _SHRINK_STEPS:
        small = _dumps(shrink(value, longest, most))
        if len(small) <= cap:
            return small, True
    return _dumps({"_truncated_json": text[: max(0, cap - 40)]}), True


def shrink(value: Any, longest: int, most: int) -> Any:
    """A copy of `value` with strings cut to `longest` characters and lists and objects to
    `most` items (see `fit_text`)."""
    if isinstance(value, str):
        if len(value) <= longest:
            return value
        return value[:longest] + f"… [{len(value) - longest:,} more characters]"
    if isinstance(value, list):
        if len(value) <= most:
            return [shrink(item, longest, most) for item in value]
        head, tail = value[: most - most // 2], value[len(value) - most // 2 :]
        marker = f"… [{len(value) - most:,} more items]"
        return [*(shrink(v, longest, most) for v in head), marker] + [
            shrink(v, longest, most) for v in tail
        ]
    if isinstance(value, dict):
        items = list(value.items())
        kept = {str(k): shrink(v, longest, most) for k, v in items[:most]}
        if len(items) > most:
            kept["…"] = f"[{len(items) - most:,} more keys]"
        return kept
    return value
