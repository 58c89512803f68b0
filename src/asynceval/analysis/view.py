"""`asynceval view`: one self-contained HTML page of one or more runs.

The page works from `file://` with no network and no server: its stylesheet and script
(`_view/`, hand-written, no library) are inlined, and its data is embedded as JSON in
`<script type="application/json">` elements, every `<`, `>` and `&` in it written as a JSON
escape so that no text from a run (a trace holding `</script>`) can end the element early. The
page builds everything with DOM calls that set text, never HTML, so nothing in a run is markup.

What is embedded is what the page needs, reduced here: per run its headers, its `summarize`
summary, a column-wise table of its repetitions, one JSON line of details per row (parsed only
when the row is opened; cut to fit a budget per run, see `_view_rows`), and its events reduced
to at most `max_buckets` time buckets per run in the log (see `_view_events`); never the raw
events. With several runs, each run after the first is compared with the first
(`compare_runs`).
"""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from .. import __version__
from ._view_events import read_events_view
from ._view_rows import BUDGET, ROW_CAP, RunRows, finite, read_rows
from .compare import compare_runs
from .summary import summarize

MAX_BUCKETS = 2000
LISTED_PAIRS = 500  # of each list of pairs in a comparison (flips, pairs in one run only)
_PAIR_LISTS: tuple[str, ...] = ("regressed", "improved", "only_in_a", "only_in_b")
_PAIR_LISTS += ("scored_in_a_only", "scored_in_b_only", "scored_in_neither")


def _asset(name: str) -> str:
    return resources.files("asynceval.analysis").joinpath("_view", name).read_text("utf-8")


def script_json(value: Any) -> str:
    """`value` as JSON that is safe inside a `<script>` element: `<`, `>` and `&` (which only
    occur inside JSON strings) are written as \\u escapes, so `</script>` or `<!--` in the data
    cannot end or change the element; the text parses back to the same value."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # NaN or infinity (a hand-edited file): JSON.parse would reject them
        text = json.dumps(finite(value), ensure_ascii=False, separators=(",", ":"))
    return escape_script_text(text)


def escape_script_text(text: str) -> str:
    """JSON text made safe inside a `<script>` element (see `script_json`)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def results_path(run: Path) -> Path:
    """The results file of a run given as its directory (its results.jsonl) or as the file."""
    return run if run.is_file() else run / "results.jsonl"


def _labels(runs: Sequence[Path]) -> list[str]:
    """Each run's name: its directory's name (a results file not named results.jsonl: the
    file's name), or the path as given where two names are the same."""
    names = []
    for run in runs:
        results = results_path(run).resolve()
        names.append(results.parent.name if results.name == "results.jsonl" else results.name)
    return [
        str(path) if names.count(name) > 1 else name for path, name in zip(runs, names, strict=True)
    ]


def _run_data(
    run_dir: Path, label: str, max_buckets: int, budget: int, row_cap: int
) -> tuple[dict[str, Any], RunRows]:
    """One run's part of the page's data, and its rows (their details go in their own element).
    Raises FileNotFoundError when `run_dir` holds no results.jsonl, OSError when unreadable."""
    results = results_path(run_dir)
    if not results.is_file():
        raise FileNotFoundError(f"{run_dir}: no results.jsonl there")
    run_dir = results.parent
    rows = read_rows(results, budget=budget, row_cap=row_cap)
    summary = summarize(rows.records)
    summary.damaged_lines = rows.damaged_lines
    limits = [h.get("max_concurrent_llm_calls") for h in rows.headers]
    header_limits = [v if isinstance(v, int) and not isinstance(v, bool) else None for v in limits]
    events = read_events_view(run_dir / "events.jsonl", header_limits, max_buckets)
    data = {
        "label": label,
        "path": str(run_dir),
        "results_path": str(results),
        "headers": rows.headers,
        "summary": summary.as_dict(),
        "columns": rows.columns,
        "configs": rows.configs,
        "n_rows": len(rows.details),
        "superseded": rows.superseded,
        "truncated_rows": rows.truncated_rows,
        "events": events.as_dict(),
    }
    return data, rows


def _comparison(first: RunRows, other: RunRows, label_a: str, label_b: str) -> dict[str, Any]:
    """`compare_runs` of two runs as JSON, each list of pairs cut to its first LISTED_PAIRS
    (its full length in `<name>_count`): the page lists flips, the file holds them all."""
    found = compare_runs(first.records, other.records, label_a=label_a, label_b=label_b).as_dict()
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
) -> tuple[dict[str, Any], list[list[str]]]:
    """(the page's data, each run's rows' details as JSON texts), see `build_view`."""
    if not run_dirs:
        raise ValueError("no run directory given")
    runs: list[dict[str, Any]] = []
    all_rows: list[RunRows] = []
    labels = _labels(run_dirs)
    for run_dir, label in zip(run_dirs, labels, strict=True):
        data, rows = _run_data(Path(run_dir), label, max_buckets, detail_budget, row_cap)
        runs.append(data)
        all_rows.append(rows)
    comparisons = [
        _comparison(all_rows[0], rows, labels[0], labels[index])
        for index, rows in enumerate(all_rows[1:], start=1)
    ]
    data = {
        "generator": f"asynceval {__version__}",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": runs,
        "comparisons": comparisons,
    }
    return data, [rows.details for rows in all_rows]


def page_parts(data: dict[str, Any], details: Sequence[Sequence[str]]) -> Iterator[str]:
    """The HTML page of `view_data`'s output, in pieces (a 100 MB page need not be one string)."""
    css, js = _asset("view.css"), _asset("view.js")
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
) -> str:
    """The HTML page showing the runs in `run_dirs`: each a directory holding results.jsonl and,
    if there is one, events.jsonl, or a results file (its events: the events.jsonl beside it).
    `max_buckets`: time buckets per run in an events file; `row_cap`: characters of JSON of
    one row's details at most, `detail_budget`: of all rows' details of a run (see
    `_view_rows`). A directory without results.jsonl raises FileNotFoundError; an unreadable
    file, OSError. A results file with no report gives a page saying so; a missing
    events.jsonl, a page without charts that says why."""
    data, details = view_data(
        run_dirs, max_buckets=max_buckets, detail_budget=detail_budget, row_cap=row_cap
    )
    return render_page(data, details)


def write_view(run_dirs: Sequence[Path], out: Path, **options: Any) -> tuple[int, float]:
    """Build the page of `run_dirs` (options as `build_view`'s) and write it to `out`, piece by
    piece; (bytes written, seconds taken). Text that UTF-8 cannot encode (a lone surrogate
    from a JSON escape in a run) is replaced. Raises OSError when `out` cannot be written."""
    start = time.perf_counter()
    data, details = view_data(run_dirs, **options)
    size = 0
    with open(out, "wb") as file:
        for part in page_parts(data, details):
            encoded = part.encode("utf-8", errors="replace")
            file.write(encoded)
            size += len(encoded)
    return size, time.perf_counter() - start
