"""The results side of `asynceval view`: a results.jsonl as a table and its rows' details.

The file is read one line at a time. A line is a header (`"type": "header"`), a report (an
object with a `task_id` and no `event`: not an events file's line), or damaged (not JSON, cut
short by a kill, nested too deep to read, or an object that is neither); a file with no header
and no report is not a results file (`ViewError`). Of several reports of one (task_id,
repeat_idx), as after a resume, the last counts (as in `summarize`); the row keeps its first
place. Each row becomes one entry of a column-wise table (what the page filters, searches and
sorts over) and one JSON line of details (error, eval, traces, config) that the page parses only
when the row is opened; what the table has (usage counts, timing, attempts) is not repeated
there, and configs, often the same for every row, are kept once per run (`RunRows.configs`,
their `metadata` left out).

Details share one budget of characters of JSON per page (`DetailBudget`, shared by every run
on it), so that a page of 100,000-row runs stays loadable: each row may use its fair share of
what is left (remaining budget over remaining lines), a row that did not pass `FAILING_SHARE`
times that (what went wrong is what one opens a row for), never more than `row_cap` nor less
than `MIN_ROW_CAP`; what a row leaves unused goes to the rows after it. A value over its share
is shrunk (see `fit_text`) and the row says so, naming the line of results.jsonl that holds it
whole. What `summarize` and `compare_runs` need is kept apart, small (`light_record`), for
the last report of each pair, and for the reports a later one replaced (`RunRows.replaced`:
their cost still counts in the run's total).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.report import ERROR_KIND_LABELS, report_error_kind
from ..engine.results import json_lines
from ..errors import AsyncEvalError
from .cost import cost_usage
from .summary import BUDGET_EXHAUSTED, finite_number, mapping, report_score

ROW_CAP = 50_000  # characters of JSON of one row's details, at most
MIN_ROW_CAP = 600  # ... and at least, however many rows share the budget
BUDGET = 50_000_000  # characters of details' JSON per page, shared by every run's rows
FAILING_SHARE = 8
CONFIG_CAP = 8_000
MAX_CONFIGS = 1_000  # distinct configs kept per run; rows past it show none
MAX_DEPTH = 100  # of a header or config: deeper is no header or config (page JSON re-encodes it)
# (longest string, most items of a list or object) tried in turn until a value fits its cap.
_SHRINK_STEPS = ((4000, 200), (1000, 60), (300, 24), (100, 8), (40, 4))
COLUMNS = (
    "task_id", "repeat_idx", "status", "termination_reason", "score", "duration_s", "queued_s",
    "finished_at", "llm_calls", "retries", "prompt_tokens", "completion_tokens", "cost_usd",
    "attempts", "error", "line",
)  # fmt: skip
_IN_COLUMNS = {"llm_calls", "retries", "prompt_tokens", "completion_tokens", "cost_usd"}
_USAGE = (
    "llm_calls",
    "retries",
    "cache_hits",
    "journal_hits",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
)
_PASSED, _FAILED = [{"score": 1.0}], [{"score": 0.0}]  # light records' evals, shared

# Built once: json.dumps with options other than the defaults builds an encoder per call.
_encode = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False
).encode


class ViewError(AsyncEvalError, ValueError):
    """A run `asynceval view` cannot show (a file that is not a results file), or a page it will
    not write (one that would overwrite what it shows); the message names the file."""


def dumps(value: Any) -> str:
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


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` nests lists and objects more than `limit` deep (without recursing)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


@dataclass
class RunRows:
    """A results file read for the view (see the module docstring)."""

    headers: list[dict[str, Any]] = field(default_factory=list)
    columns: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in COLUMNS})
    details: list[str] = field(default_factory=list)  # one JSON text per row
    configs: list[Any] = field(default_factory=list)  # distinct configs, by index from details
    records: list[dict[str, Any]] = field(default_factory=list)  # light: for summarize/compare
    replaced: list[dict[str, Any]] = field(default_factory=list)  # light: reports re-run later
    damaged_lines: int = 0
    superseded: int = 0
    truncated: bytearray = field(default_factory=bytearray)  # per row: its details were cut
    last_end: float | None = None  # the latest timing.finished_at of any report, replaced too
    config_index: dict[str, int] = field(default_factory=dict)  # config JSON -> index
    place: dict[tuple[Any, Any], int] = field(default_factory=dict)  # pair -> row
    record_place: list[int] = field(default_factory=list)  # row -> index in `records`

    @property
    def truncated_rows(self) -> int:
        return sum(self.truncated)

    def wall_s(self) -> float | None:
        """The wall time `summarize` gives the whole file: first header's start to last end."""
        starts = [finite_number(h.get("started_at_unix")) for h in self.headers]
        start = next((s for s in starts if s is not None), None)
        if start is None or self.last_end is None:
            return None
        return max(0.0, self.last_end - start)


class DetailBudget:
    """Characters of JSON left for the rows' details of a page, shared as the module docstring
    says: `lines` is how many lines of results.jsonl are still to be read."""

    def __init__(self, total: int, lines: int, row_cap: int = ROW_CAP) -> None:
        self.left, self.lines, self.row_cap = total, lines, row_cap

    def share(self, failing: bool) -> int:
        fair = self.left / max(1, self.lines) * (FAILING_SHARE if failing else 1)
        return int(min(self.row_cap, max(MIN_ROW_CAP, fair)))

    def spend(self, used: int) -> None:
        self.left = max(0, self.left - used)
        self.lines = max(0, self.lines - 1)


def count_lines(path: Path) -> int:
    """The lines of the file at `path` (at least 1), counted without parsing them."""
    lines, last = 0, b"\n"
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return max(1, lines + (last != b"\n"))


def read_rows(
    path: Path, budget: int = BUDGET, row_cap: int = ROW_CAP, share: DetailBudget | None = None
) -> RunRows:
    """The table and details of the results file at `path`, its details' characters drawn from
    `share` (default: a budget of `budget` for this file alone). Raises OSError if unreadable,
    ViewError when it holds neither a header nor a report."""
    rows = RunRows()
    share = share or DetailBudget(budget, count_lines(path), row_cap)
    for number, _, record in json_lines(path):
        if isinstance(record, dict) and record.get("type") == "header" and not too_deep(record):
            rows.headers.append(record)
            rows.records.append(record)
            share.spend(0)
        elif not (
            isinstance(record, dict)
            and "task_id" in record
            and "event" not in record
            and _add_report(rows, record, number, share)
        ):
            rows.damaged_lines += 1  # e.g. a line cut short by a kill
            share.spend(0)
    if not rows.headers and not rows.details:
        raise ViewError(f"{path}: not a results file (no header line and no report line)")
    return rows


def pair_key(value: Any) -> Any:
    """A task_id or repeat_idx as a dict key: itself, or for a list or object its JSON text."""
    return dumps(value) if isinstance(value, list | dict) else value


def _add_report(rows: RunRows, record: dict[str, Any], number: int, share: DetailBudget) -> bool:
    """Add one report (a later report of a pair replaces the earlier); False, adding nothing,
    when it nests too deep to handle (a damaged line)."""
    try:
        cells = _cells(record, number)
        cap = share.share(failing=cells["score"] != 1.0)
        detail, cut = _detail(rows, record, number, cap)
        light = light_record(record, cells["score"])
    except RecursionError:
        return False
    share.spend(len(detail))
    end = cells["finished_at"]
    if end is not None:
        rows.last_end = end if rows.last_end is None else max(rows.last_end, end)
    pair = (light["task_id"], light["repeat_idx"])
    index = rows.place.get(pair)
    if index is None:
        rows.place[pair] = len(rows.details)
        for name in COLUMNS:
            rows.columns[name].append(cells[name])
        rows.details.append(detail)
        rows.truncated.append(cut)
        rows.record_place.append(len(rows.records))
        rows.records.append(light)
        return True
    rows.superseded += 1  # a resumed run's re-run: the later report counts, in the first's place
    for name in COLUMNS:
        rows.columns[name][index] = cells[name]
    rows.details[index] = detail
    rows.truncated[index] = cut
    rows.replaced.append(rows.records[rows.record_place[index]])
    rows.records[rows.record_place[index]] = light
    return True


def light_record(record: Mapping[str, Any], score: float | None) -> dict[str, Any]:
    """What `summarize` and `compare_runs` read of a report, its `report_score` given, and
    nothing more: they give the same figures of these as of the whole reports (the wall time
    aside: see `RunRows.wall_s`). Values they could not read (text for a count, a list for an
    id) are left out or made readable, as the table shows them."""
    status, reason = record.get("status"), record.get("termination_reason")
    usage, timing = mapping(record.get("usage")), mapping(record.get("timing"))
    light: dict[str, Any] = {
        "task_id": pair_key(record.get("task_id")),
        "repeat_idx": pair_key(record.get("repeat_idx")),
        "status": status if status is None or isinstance(status, str) else dumps(status),
        "termination_reason": _text(reason) if reason else None,
        "usage": {k: v for k in _USAGE if (v := finite_number(usage.get(k))) is not None},
    }
    light["usage"].update(cost_usage(usage))
    if score is not None:  # the same report_score: one score in [0, 1]
        light["eval"] = _PASSED if score == 1.0 else _FAILED if score == 0.0 else [{"score": score}]
    duration = finite_number(timing.get("duration_s"))
    if duration is not None:
        light["timing"] = {"duration_s": duration}
    return light


def _text(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


def _cells(record: Mapping[str, Any], number: int) -> dict[str, Any]:
    """One row of the table: short values only (the error as one line of at most 200 chars);
    the status as `summarize` counts it ("None" when there is none)."""
    usage, timing = mapping(record.get("usage")), mapping(record.get("timing"))
    task_id, reason = record.get("task_id"), record.get("termination_reason")
    status = record.get("status")
    return {
        "task_id": None if task_id is None else _text(task_id),
        "repeat_idx": finite_number(record.get("repeat_idx")),
        "status": str(status) if status is None or isinstance(status, str) else dumps(status),
        "termination_reason": _text(reason) if reason else None,
        "score": report_score(record),
        "duration_s": finite_number(timing.get("duration_s")),
        "queued_s": finite_number(timing.get("queued_s")),
        "finished_at": finite_number(timing.get("finished_at")),
        "llm_calls": finite_number(usage.get("llm_calls")),
        "retries": finite_number(usage.get("retries")),
        "prompt_tokens": finite_number(usage.get("prompt_tokens")),
        "completion_tokens": finite_number(usage.get("completion_tokens")),
        "cost_usd": finite_number(usage.get("cost_usd")),
        "attempts": finite_number(record.get("attempts")),
        "error": _error_line(record.get("error"), _error_kind(record)),
        "line": number,
    }


def _error_kind(record: Mapping[str, Any]) -> str | None:
    """The kind of a report's error, a repetition the cost budget stopped being its own kind
    (not "your agent raised")."""
    return (
        BUDGET_EXHAUSTED if record.get("status") == BUDGET_EXHAUSTED else report_error_kind(record)
    )


def _error_line(error: Any, kind: str | None) -> str | None:
    """The error on one line, led by what kind it was ("your agent raised: AttributeError: ...")."""
    if error is None:
        return None
    if isinstance(error, Mapping):
        type_, message = error.get("type"), error.get("message")
        text = f"{type_}: {message}" if type_ and message else str(message or type_ or error)
    else:
        text = str(error)
    if kind is not None:
        text = f"{ERROR_KIND_LABELS.get(kind, kind.replace('_', ' '))}: {text}"
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
    usage = {k: v for k, v in mapping(record.get("usage")).items() if k not in _IN_COLUMNS}
    if usage:
        parts.append(f'"usage":{dumps(usage)}')
    if truncated:
        parts.append(f'"truncated":{dumps(truncated)},"cap":{cap}')
    return "{" + ",".join(parts) + "}", bool(truncated)


def _config(rows: RunRows, config: Any) -> str:
    """The index in `rows.configs` of a row's config, kept once per distinct value, without its
    `metadata` (when it was gathered, how many components): "null" when there is none, the
    run already has MAX_CONFIGS distinct ones, or it nests deeper than MAX_DEPTH."""
    if isinstance(config, Mapping):
        config = {key: value for key, value in config.items() if key != "metadata"}
    if not config:
        return "null"
    text, _ = fit_text(config, CONFIG_CAP)
    index = rows.config_index.get(text)
    if index is None:
        value = json.loads(text)
        if len(rows.configs) >= MAX_CONFIGS or too_deep(value):
            return "null"
        index = rows.config_index[text] = len(rows.configs)
        rows.configs.append(value)
    return str(index)


def fit_text(value: Any, cap: int) -> tuple[str, bool]:
    """The JSON of `value`, or of a shrunk copy at most `cap` characters long (for a `cap` of
    at least 4), and whether it was shrunk. Shrinking keeps the shape: long strings keep their
    head, long lists their first and last items (an agent's last messages are often what went
    wrong), with markers saying what was left out; as a last resort the value becomes the head
    of its JSON text (cut so that its own JSON, escapes and all, fits), or null."""
    text = dumps(value)
    if len(text) <= cap:
        return text, False
    try:
        for longest, most in _SHRINK_STEPS:
            small = dumps(shrink(value, longest, most))
            if len(small) <= cap:
                return small, True
    except RecursionError:  # too deep to shrink: its head, below
        pass
    head = text[: max(0, cap - 22)]  # 22: the length of {"_truncated_json":""}
    while head:
        small = dumps({"_truncated_json": head})
        if len(small) <= cap:
            return small, True
        # Escapes made it longer: cut the head in proportion (it shrinks on every turn).
        head = head[: len(head) * (cap - 22) // (len(small) - 22)]
    return ('{"_truncated_json":""}' if cap >= 22 else "null"), True


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
