"""`asynceval view`: one self-contained HTML page of one or more runs.

The page works from `file://` with no network and no server: its stylesheet and scripts
(`_view/`, hand-written, no library; the scripts are one function's body cut into files by
concern, joined here) are inlined, and its data is embedded as JSON in `<script
type="application/json">` elements, every `<`, `>` and `&` in it written as a JSON escape so
that no text from a run (a trace holding `</script>`) can end the element early. The page
builds everything with DOM calls that set text, never HTML, so nothing in a run is markup.

What is embedded is what the page needs, reduced here: per run its headers, its `summarize`
summary and its cost in the words `asynceval report` has, a column-wise table of its
repetitions, one JSON line of details per row (parsed only when the row is opened; cut to fit a
budget per page, see `_view_rows`), and its events reduced to at most `max_buckets` time buckets
per run in the log with what `asynceval logs check` says of them (see `_view_events`); never the
raw events. With several runs, each run after the first is compared with the first
(`compare_runs`, its cost comparison included). The page is written to a file beside the one
asked for and then moved over it: a failed write leaves no half page, and a page never
overwrites a file it shows.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import secrets
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import IO, Any

from .._version import __version__
from ..events import NO_LLM_CALLS_ADVICE
from ._view_events import read_events_view
from ._view_rows import BUDGET, ROW_CAP, DetailBudget, ViewError, count_lines, dumps, read_rows
from .compare import compare_runs
from .cost import billed_records, budget_rows, comparison_rows, cost_rows, money, read_billed
from .run_info import describe, read_manifest
from .summary import summarize

__all__ = ["ViewError", "build_view", "view_data", "write_view"]

MAX_BUCKETS = 2000
LISTED_PAIRS = 500  # of each list of pairs in a comparison (flips, pairs in one run only)
_PAIR_LISTS: tuple[str, ...] = ("regressed", "improved", "only_in_a", "only_in_b")
_PAIR_LISTS += ("scored_in_a_only", "scored_in_b_only", "scored_in_neither")
# The page's script: one function's body, in these files (by concern), in this order.
SCRIPTS = ("view_base.js", "view_charts.js", "view_details.js", "view_table.js", "view_main.js")


def _asset(name: str) -> str:
    return resources.files("asynceval.analysis").joinpath("_view", name).read_text("utf-8")


def script_json(value: Any) -> str:
    """`value` as JSON that is safe inside a `<script>` element: `<`, `>` and `&` (which only
    occur inside JSON strings) are written as \\u escapes, so `</script>` or `<!--` in the data
    cannot end or change the element; the text parses back to the same value."""
    return escape_script_text(dumps(value))


def escape_script_text(text: str) -> str:
    """JSON text made safe inside a `<script>` element (see `script_json`)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def results_path(run: Path) -> Path:
    """The results file of a run given as its directory (its results.jsonl) or as the file."""
    return run if run.is_file() else run / "results.jsonl"


def _labels(runs: Sequence[Path]) -> list[str]:
    """Each run's name, every one different: its directory's name (a results file not named
    results.jsonl: the file's name), the path as given where two names are the same, and a
    number after a path given twice."""
    names = []
    for run in runs:
        results = results_path(run).resolve()
        names.append(results.parent.name if results.name == "results.jsonl" else results.name)
    labels = [
        str(run) if names.count(name) > 1 else name for run, name in zip(runs, names, strict=True)
    ]
    seen: Counter[str] = Counter()
    numbered = []
    for label in labels:
        seen[label] += 1
        numbered.append(f"{label} ({seen[label]})" if labels.count(label) > 1 else label)
    return numbered


def _run_data(
    results: Path,
    label: str,
    max_buckets: int,
    share: DetailBudget,
    reducers: Sequence[str] | None = None,
) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """One run's part of the page's data, its rows' details (they go in their own element) and
    its light records (for the comparison). Raises OSError when a file cannot be read,
    ViewError when `results` is not a results file."""
    rows = read_rows(results, share=share)
    manifest = read_manifest(results)
    # A resumed run costs what every segment was billed (as `asynceval report` and `compare`
    # count it): its events say what each repetition's calls cost, replays and kills included.
    records = billed_records(rows.records, read_billed(results.parent / "events.jsonl"))
    summary = summarize(records, wall_s=rows.wall_s(), reducers=reducers, replaced=rows.replaced)
    summary.damaged_lines = rows.damaged_lines
    events = read_events_view(results.parent / "events.jsonl", rows.headers, max_buckets)
    # As `asynceval report` warns (its text is the run's own `no_llm_calls` event's advice).
    no_calls = bool(summary.statuses.get("success")) and not summary.llm_calls
    data = {
        "label": label,
        "results_path": str(results),
        "headers": rows.headers,
        "manifest": [list(line) for line in describe(manifest)] if manifest else None,
        "summary": summary.as_dict(),
        # The cost in the words `asynceval report` has (money is formatted in one place).
        "cost": {
            "total": "-" if summary.cost_usd is None else money(summary.cost_usd),
            "rows": [list(row) for row in cost_rows(summary) + budget_rows(summary)],
        },
        "warnings": [NO_LLM_CALLS_ADVICE] if no_calls else [],
        "columns": rows.columns,
        "configs": rows.configs,
        "n_rows": len(rows.details),
        "superseded": rows.superseded,
        "truncated_rows": rows.truncated_rows,
        "events": events.as_dict(),
    }
    return data, rows.details, records


def _comparison(
    first: list[dict[str, Any]],
    other: list[dict[str, Any]],
    label_a: str,
    label_b: str,
    reducers: Sequence[str] | None = None,
) -> dict[str, Any]:
    """`compare_runs` of two runs as JSON without the runs' summaries (the page has them),
    each list of pairs cut to its first LISTED_PAIRS (its full length in `<name>_count`): the
    page lists flips, the file holds them all; with the cost comparison and its lines."""
    comparison = compare_runs(first, other, label_a=label_a, label_b=label_b, reducers=reducers)
    found = comparison.as_dict()
    del found["a"], found["b"]
    found["cost"] = comparison.cost
    found["cost_rows"] = [list(row) for row in comparison_rows(comparison.cost)]
    for name in _PAIR_LISTS:
        pairs = found.get(name) or []
        found[f"{name}_count"] = len(pairs)
        found[name] = pairs[:LISTED_PAIRS]
    return found


def view_data(
    run_dirs: Sequence[Path],
    *,
    max_buckets: int = MAX_BUCKETS,
    detail_budget: int = BUDGET,
    row_cap: int = ROW_CAP,
    reducers: Sequence[str] | None = None,
) -> tuple[dict[str, Any], list[list[str]]]:
    """(the page's data, each run's rows' details as JSON texts), see `build_view`."""
    if not run_dirs:
        raise ValueError("no run directory given")
    paths = [results_path(Path(run)) for run in run_dirs]
    for run, path in zip(run_dirs, paths, strict=True):
        if not path.is_file():
            raise FileNotFoundError(f"{run}: no results.jsonl there")
    share = DetailBudget(detail_budget, sum(count_lines(path) for path in paths), row_cap)
    runs: list[dict[str, Any]] = []
    details: list[list[str]] = []
    records: list[list[dict[str, Any]]] = []
    labels = _labels([Path(run) for run in run_dirs])
    for path, label in zip(paths, labels, strict=True):
        data, lines, light = _run_data(path, label, max_buckets, share, reducers)
        runs.append(data)
        details.append(lines)
        records.append(light)
    comparisons = [
        _comparison(records[0], light, labels[0], labels[index], reducers)
        for index, light in enumerate(records[1:], start=1)
    ]
    data = {
        "generator": f"asynceval {__version__}",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": runs,
        "comparisons": comparisons,
    }
    return data, details


def page_parts(data: dict[str, Any], details: Sequence[Sequence[str]]) -> Iterator[str]:
    """The HTML page of `view_data`'s output, in pieces (a 100 MB page need not be one string)."""
    css, js = _asset("view.css"), "\n".join(_asset(name) for name in SCRIPTS)
    # Our own assets are inlined as they are: nothing in them may end or escape their element.
    assert "</style" not in css.lower()
    assert not any(text in js.lower() for text in ("</script", "<script", "<!--"))
    runs = data["runs"]
    title = runs[0]["label"] if len(runs) == 1 else f"{len(runs)} runs"
    values = {"TITLE": html.escape(f"asynceval view: {title}"), "CSS": css, "JS": js}
    # re.split with a group: literal text at even places, a {{NAME}} marker's name at odd ones.
    for place, piece in enumerate(re.split(r"\{\{([A-Z]+)\}\}", _asset("page.html"))):
        if place % 2 == 0:
            yield piece
        elif piece == "DATA":
            yield script_json(data)
        elif piece == "DETAILS":
            yield from _details_blocks(details)
        else:
            yield values[piece]


def _details_blocks(details: Sequence[Sequence[str]]) -> Iterator[str]:
    """Each run's rows' details: one element per run, one JSON text per line, in row order."""
    for index, lines in enumerate(details):
        yield f'<script type="application/json" id="details-{index}">'
        for start in range(0, len(lines), 2000):
            chunk = "\n".join(escape_script_text(line) for line in lines[start : start + 2000])
            yield chunk if start + 2000 >= len(lines) else chunk + "\n"
        yield "</script>\n"


def render_page(data: dict[str, Any], details: Sequence[Sequence[str]]) -> str:
    """The HTML page of `view_data`'s output."""
    return "".join(page_parts(data, details))


def build_view(
    run_dirs: Sequence[Path],
    *,
    max_buckets: int = MAX_BUCKETS,
    detail_budget: int = BUDGET,
    row_cap: int = ROW_CAP,
    reducers: Sequence[str] | None = None,
) -> str:
    """The HTML page showing the runs in `run_dirs`: each a directory holding results.jsonl and,
    if there is one, events.jsonl, or a results file (its events: the events.jsonl beside it).
    `max_buckets`: time buckets per run in an events file; `row_cap`: characters of JSON of
    one row's details at most, `detail_budget`: of all rows' details of the page (see
    `_view_rows`); `reducers`: names of the reducers to show (default: each run's own, else
    mean; a bad name raises ConfigError). A directory without results.jsonl raises
    FileNotFoundError; an unreadable file, OSError; a file that is not a results file (no
    header, no report), ViewError. A results file with only headers gives a page saying so; a
    missing events.jsonl, a page without charts that says why."""
    data, details = view_data(
        run_dirs,
        max_buckets=max_buckets,
        detail_budget=detail_budget,
        row_cap=row_cap,
        reducers=reducers,
    )
    return render_page(data, details)


def write_view(run_dirs: Sequence[Path], out: Path, **options: Any) -> tuple[int, float]:
    """Build the page of `run_dirs` (options as `build_view`'s) and write it to `out`; (bytes
    written, seconds taken). Text that UTF-8 cannot encode (a lone surrogate from a JSON escape
    in a run) is replaced. Raises ViewError when `out` is a file the page shows (a results file
    or its events.jsonl), OSError naming `out` when it cannot be written: then `out` is as it
    was (a regular file is replaced whole, once the page is written beside it)."""
    start = time.perf_counter()
    data, details = view_data(run_dirs, **options)
    for run in data["runs"]:
        for shown in (run["results_path"], run["events"]["path"]):
            if _same_file(out, Path(shown)):
                raise ViewError(f"{out}: the page would overwrite {shown}, which it shows")
    try:
        size = _write_page(Path(out), page_parts(data, details))
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(out)) from exc
    return size, time.perf_counter() - start


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one is missing: the same path once links are followed
        return os.path.realpath(a) == os.path.realpath(b)


def _write_page(out: Path, parts: Iterable[str]) -> int:
    """Write `parts` to a new file beside `out` and move it over `out`; bytes written. What is
    not a regular file (a device such as /dev/stdout, a pipe) is written in place."""
    target = Path(os.path.realpath(out))
    if target.exists() and not target.is_file():
        with open(target, "wb") as file:
            return _write_parts(file, parts)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # as umask allows
    try:
        with os.fdopen(descriptor, "wb") as file:
            size = _write_parts(file, parts)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return size


def _write_parts(file: IO[bytes], parts: Iterable[str]) -> int:
    size = 0
    for part in parts:
        encoded = part.encode("utf-8", errors="replace")
        file.write(encoded)
        size += len(encoded)
    return size
