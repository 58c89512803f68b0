"""`asynceval run`'s options: the parser's groups, and what they turn into (repeats, the
adaptive rule, the Dask backend, settings, the cache folder), each a one-line CLIError when wrong."""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import Settings
from ..engine import AdaptiveRepeats
from ..engine.backend import Backend
from ..errors import ConfigError
from ._errors import CLIError

_DEFAULT_MAX_REPEATS = 20


def add_task_options(run: argparse.ArgumentParser) -> None:
    """What the run computes: its tasks, their columns, the repeats."""
    run.add_argument(
        "--tasks",
        metavar="SOURCE",
        help="tasks: FILE.jsonl, .json, .csv or .tsv, a saved Hugging Face dataset DIR[@SPLIT], "
        "or hf:NAME[:CONFIG][@SPLIT] (needs asynceval[hf]) (default: the benchmark's "
        "default_tasks())",
    )
    run.add_argument(
        "--query-field",
        metavar="COLUMN",
        help="the column holding each query (default: column query)",
    )
    run.add_argument(
        "--id-field",
        metavar="COLUMN",
        help="the column holding each task's id (default: column id if any, else one derived "
        "from the task's content)",
    )
    run.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="FIELD=COLUMN[,COLUMN]",
        help="put these columns in a task field (evaluation_data, environment_data, user_data, "
        "metadata); repeatable; other columns go to metadata",
    )
    run.add_argument(
        "--repeats",
        metavar="N|auto",
        help="repetitions per task, at least 1 (default: the benchmark's n_task_repeats, 1 "
        "unless it sets one); auto: one per task, then more where results vary, until the "
        "pass rate's 95%% half-width over the task set is <= --ci-width or every task has "
        "--max-repeats",
    )
    run.add_argument(
        "--ci-width",
        metavar="W",
        help="with --repeats auto: the half-width to reach, in (0, 0.5] (no default: required "
        "with --repeats auto)",
    )
    run.add_argument(
        "--max-repeats",
        metavar="N",
        help=f"with --repeats auto: at most N repetitions per task, N >= 2 (default: "
        f"{_DEFAULT_MAX_REPEATS})",
    )


def add_place_options(run: argparse.ArgumentParser) -> None:
    """Where the run is written: a new directory, or the one of a run to finish."""
    where = run.add_mutually_exclusive_group()
    where.add_argument(
        "--out", metavar="DIR", help="the run directory to write (default: results/NAME-RUN_ID)"
    )
    where.add_argument(
        "--resume",
        metavar="DIR",
        help="finish the run in DIR: only what is missing runs, with its target and options from "
        "DIR/run.json (default: a new run)",
    )
    run.add_argument(
        "--allow-changed-target",
        action="store_true",
        help="with --resume: go on although the target's source file changed since the run "
        "started (its SHA-256 is in DIR/run.json); the results then mix both versions, and "
        "the segment's header records the choice (default: such a resume exits 2)",
    )


def add_provider_options(run: argparse.ArgumentParser) -> None:
    """How the run calls the provider: limits, timeout, provider, model, cluster."""
    run.add_argument(
        "--max-concurrent-llm-calls",
        type=int,
        metavar="N",
        help="LLM call attempts in flight at once, 1-50 (default: MAX_CONCURRENT_LLM_CALLS, 5)",
    )
    run.add_argument(
        "--max-concurrent-tasks",
        type=int,
        metavar="N",
        help="repetitions alive at once (default: the benchmark's max_concurrent_tasks, else "
        "MAX_CONCURRENT_TASKS, 32)",
    )
    run.add_argument(
        "--llm-call-timeout",
        type=float,
        metavar="SECONDS",
        help="seconds, > 0, per LLM call attempt (default: LLM_CALL_TIMEOUT, 120)",
    )
    run.add_argument(
        "--base-url",
        metavar="URL",
        help="provider base URL ending in /v1, no query string, e.g. http://host/v1 (default: "
        "LLM_BASE_URL, else the embedded simulated provider)",
    )
    run.add_argument(
        "--model", metavar="NAME", help="model name sent with each request (default: LLM_MODEL)"
    )
    run.add_argument(
        "--lane",
        choices=("live", "flex", "batch"),
        help="how calls go: live, flex (OpenAI's service_tier flex: half price, slower) or batch "
        "(provider batches: half price, answers within 24 h) (default: LLM_LANE, live)",
    )
    run.add_argument(
        "--keep-batches",
        action="store_true",
        help="with --lane batch: leave open batches running when the run is stopped (Ctrl-C, "
        "SIGTERM), for --resume to collect (default: cancel them)",
    )
    run.add_argument(
        "--dask",
        metavar="ADDRESS|local[:N]",
        help="run the repetitions on a Dask cluster: a scheduler address (tcp://host:8786), or "
        "local[:N], a local cluster of N worker processes (N defaults to the core count); needs "
        "asynceval[dask] (default: no Dask, the repetitions run in this process)",
    )


def add_store_options(run: argparse.ArgumentParser) -> None:
    """What the run keeps and says: cache, journal, errors, display."""
    cache = run.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache",
        metavar="DIR",
        help="answer identical LLM calls from DIR and keep new answers there (default: "
        "LLM_CACHE_DIR, else none)",
    )
    cache.add_argument(
        "--no-cache",
        action="store_true",
        help="no model-call cache, whatever LLM_CACHE_DIR says (default: LLM_CACHE_DIR decides)",
    )
    run.add_argument(
        "--no-journal",
        action="store_true",
        help="keep no call journal in DIR (default: kept, so that a resumed repetition replays "
        "the calls it had finished instead of paying for them again)",
    )
    run.add_argument(
        "--allow-errors",
        action="store_true",
        help="exit 0 even when repetitions ended in an error (default: exit 1, errors on stderr)",
    )
    run.add_argument(
        "--quiet",
        action="store_true",
        help="no progress display and no summary: only where the results are (default: both)",
    )


def parse_repeats(args: argparse.Namespace) -> None:
    """--repeats N or auto, --ci-width W, --max-repeats N as values (one line for a bad one);
    which go together is checked once a resume has filled them in (`_adaptive_rule`)."""
    if args.repeats is not None and args.repeats != "auto":
        try:
            args.repeats = int(args.repeats)
        except ValueError:
            raise CLIError(
                f"--repeats must be a whole number >= 1 or auto, got {args.repeats}"
            ) from None
        if args.repeats < 1:
            raise CLIError(f"--repeats must be >= 1, got {args.repeats}")
    if args.ci_width is not None:
        width = args.ci_width
        try:
            args.ci_width = float(width)
        except ValueError:
            args.ci_width = math.nan
        if not 0.0 < args.ci_width <= 0.5:  # NaN fails it too
            raise CLIError(f"--ci-width must be a number in (0, 0.5], got {width}")
    if args.max_repeats is not None:
        text = args.max_repeats
        try:
            args.max_repeats = int(text)
        except ValueError:
            args.max_repeats = 0
        if args.max_repeats < 2:
            raise CLIError(f"--max-repeats must be a whole number >= 2, got {text}")


def adaptive_rule(args: argparse.Namespace) -> AdaptiveRepeats | None:
    """The adaptive rule of --repeats auto (its --max-repeats default filled in, for the
    manifest), or None; --ci-width or --max-repeats without it is one line."""
    if args.repeats != "auto":
        if args.ci_width is not None or args.max_repeats is not None:
            given = "--ci-width" if args.ci_width is not None else "--max-repeats"
            raise CLIError(f"{given} goes with --repeats auto only")
        return None
    if args.ci_width is None:
        raise CLIError("--repeats auto needs --ci-width W (the half-width to reach, e.g. 0.05)")
    if args.max_repeats is None:
        args.max_repeats = _DEFAULT_MAX_REPEATS
    return AdaptiveRepeats(ci_width=args.ci_width, max_repeats=args.max_repeats)


def adaptive_line(outcome: Mapping[str, Any]) -> str:
    """The summary's line on adaptive repeats: why they stopped, at what half-width."""
    width = outcome.get("half_width")
    shown = "unknown" if width is None else f"{width:.4f}"
    reason = {
        "ci_width_reached": f"half-width {shown} <= {outcome.get('ci_width')}",
        "max_repeats": f"every task has {outcome.get('max_repeats')} repeats; half-width "
        f"{shown} > {outcome.get('ci_width')}",
        "queue_stopped": f"the queue stopped the run; half-width {shown}",
    }.get(str(outcome.get("stopped")), f"{outcome.get('stopped')}; half-width {shown}")
    return (
        f"adaptive repeats: stopped ({outcome.get('stopped')}): {reason}; "
        f"{outcome.get('repetitions')} repetitions over {outcome.get('tasks')} tasks"
    )


def backend_of(spec: str | None) -> Backend | None:
    """`--dask ADDRESS`, `--dask local` or `--dask local:N`; distributed is imported only here."""
    if spec is None:
        return None
    try:
        from ..distributed import DaskBackend
    except ImportError as exc:
        raise CLIError(
            f"--dask needs Dask distributed ({exc}); install it with: pip install 'asynceval[dask]'"
        ) from None
    # Its client logs a lost scheduler as tracebacks; the run says it in one line instead.
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    if spec == "local" or spec.startswith("local:"):
        count = spec.removeprefix("local").removeprefix(":")
        if not count:
            return DaskBackend()
        if not count.isdigit() or int(count) < 1:
            raise CLIError(f"--dask local:N needs a number of workers >= 1, got {spec!r}")
        return DaskBackend(n_workers=int(count))
    if not spec.strip():
        raise CLIError("--dask needs a scheduler address (tcp://host:8786) or local[:N]")
    backend = DaskBackend(spec)
    try:
        backend.check()  # an address Dask cannot use: one line, before anything is written
    except ConfigError as exc:
        raise CLIError(str(exc)) from None
    return backend


def settings_of(values: Mapping[str, Any]) -> Settings:
    """The run's settings: `values` over the environment and `.env`, with no log file of the
    environment's (the run's events go to DIR/events.jsonl)."""
    try:
        return Settings(**{**values, "log_file": None})
    except ConfigError as exc:
        raise CLIError(str(exc)) from None


def cache_dir(text: str) -> str:
    """--cache DIR as an absolute path, made if missing; a path that is a file or cannot be made
    is a mistake, and so is an empty one."""
    if not text.strip():
        raise CLIError("--cache needs a folder (--no-cache for none)")
    path = Path(text).expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(
            f"--cache {text}: cannot be used as a cache folder ({exc.strerror})"
        ) from None
    return str(path)
