"""`asynceval view RUN_DIR [RUN_DIR ...] [--out FILE.html] [--open]`: one HTML page of the runs.

The page is one self-contained file (no network, no server: it opens from `file://`). Default
--out: RUN_DIR/view.html for one run (next to what it shows; for a results file of another name,
FILE.html beside it), ./asynceval-view.html for several (no one run directory owns a
comparison). Prints the path written.
"""

from __future__ import annotations

import argparse
import os
import sys
import webbrowser
from pathlib import Path
from typing import Any

from ..analysis.view import ViewError, write_view
from ._errors import CLIError
from ._files import events_file_error
from ._report import add_reducer, results_file

DEFAULT_COMPARISON = "asynceval-view.html"


def add_parser(commands: Any) -> None:
    view = commands.add_parser(
        "view",
        help="write one HTML page showing a run, or several side by side",
        description="Write one self-contained HTML page (works offline from file://) of the "
        "runs: settings, pass rate with its 95% interval (clustered by task), each reducer "
        "over tasks, status counts, every repetition "
        "(filter, search, sort; a row opens its error, eval and traces), calls in flight "
        "against the limit, queue waits and retries. With several runs, their comparison "
        "(each against the first, paired by task and repeat).",
    )
    view.add_argument(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="a run directory holding results.jsonl (and events.jsonl for the charts), or a "
        "results file (its events: the events.jsonl beside it)",
    )
    view.add_argument(
        "--out",
        metavar="FILE.html",
        default=None,
        help=f"where to write the page (default: RUN_DIR/view.html for one run, "
        f"./{DEFAULT_COMPARISON} for several)",
    )
    view.add_argument(
        "--open", action="store_true", help="open the page in the default web browser"
    )
    add_reducer(view)
    view.set_defaults(handler=view_command)


def runs(paths: list[str]) -> list[Path]:
    """Each argument's results file (a run directory's results.jsonl, or the file given); a
    missing path or a directory without results.jsonl is a CLIError."""
    found = []
    for text in paths:
        if not os.path.lexists(text):
            raise CLIError(f"{text}: no such file or directory")
        path = results_file(text)  # CLIError when there is no results file
        events = events_file_error(path)
        if events is not None:  # said as what it is, before the page reads it
            raise events
        found.append(path)
    return found


def default_out(results: list[Path]) -> Path:
    """view.html beside one run's results.jsonl (NAME.html beside another results file), or
    ./asynceval-view.html for several runs."""
    if len(results) > 1:
        return Path(DEFAULT_COMPARISON)
    (one,) = results
    return one.parent / "view.html" if one.name == "results.jsonl" else one.with_suffix(".html")


def out_path(text: str | None, results: list[Path]) -> Path:
    """Where the page goes: --out, or the default; an empty --out or a directory is a CLIError."""
    if text is None:
        return default_out(results)
    if not text.strip():
        raise CLIError("--out: empty; give a file name such as view.html")
    out = Path(text)
    if out.is_dir():
        raise CLIError(
            f"--out {text}: is a directory; give a file name such as {out / 'view.html'}"
        )
    return out


def view_command(args: argparse.Namespace) -> int:
    results = runs(args.runs)
    out = out_path(args.out, results)
    try:
        write_view(results, out, reducers=args.reducer)
    except ViewError as exc:  # not a results file; a page that would overwrite its input
        raise CLIError(str(exc)) from exc
    except OSError as exc:  # a run that cannot be read, or --out that cannot be written
        message = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else exc
        raise CLIError(str(message)) from exc
    print(out)
    if args.open and not webbrowser.open(out.resolve().as_uri()):
        print(f"asynceval view: no web browser to open; open {out} yourself", file=sys.stderr)
    return 0
