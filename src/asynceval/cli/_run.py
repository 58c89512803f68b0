"""`asynceval run TARGET`: run a benchmark from a shell, with live progress and a summary.

The run writes DIR/results.jsonl and DIR/events.jsonl; options beat `.env` and the environment.
Settings are read once, here, into the Runtime the run goes through, which is installed as the
process default before the target is imported, so models the target builds at import time use
it too. Ctrl-C stops the run cleanly: every finished report is already in DIR, and
`--resume DIR` finishes the rest. Sync threads abandoned by task timeouts do not keep the
process alive after the summary.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio

from .. import _event_output, events
from .._writer import AppendOnlyFile
from ..config import Settings
from ..engine import AdaptiveRepeats, Benchmark, Task, run_lock
from ..engine.backend import Backend
from ..engine.datasets import TaskStream, open_tasks, parse_field_options, tasks_source_info
from ..engine.results import read_header
from ..engine.run_lock import Holder, RunLock
from ..engine.scheduler import journal_path, new_run_id, task_set_of
from ..engine.task import as_task, duplicate_message
from ..errors import BackendLost, ConfigError, RunLocked, TaskSpecError
from ..runtime import Runtime, Store, set_process_default
from . import _manifest
from ._errors import CLIError, describe
from ._files import (
    config_error,
    failure_line,
    open_events_file,
    quiet_events_warning,
    stdout_failure_line,
    stop_when_broken,
    write_error,
)
from ._progress import Mode, Progress, already_done
from ._report import (
    add_fail_under,
    error_status,
    fail_under_status,
    load_summary,
    print_summary,
)
from ._target import load_benchmark

_E = TypeVar("_E", bound=BaseException)
_DEFAULT_MAX_REPEATS = 20

# option -> the setting it overrides
OVERRIDES = {
    "max_concurrent_llm_calls": "max_concurrent_llm_calls",
    "max_concurrent_tasks": "max_concurrent_tasks",
    "llm_call_timeout": "llm_call_timeout",
    "base_url": "llm_base_url",
    "model": "llm_model",
}


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run a benchmark",
        description="Run a benchmark: TARGET is path/file.py[:NAME] or module:NAME, naming a "
        "Benchmark class, instance or zero-argument factory. Options beat .env and the "
        "environment. `asynceval run --resume DIR` finishes an interrupted run with the target "
        "and options it was started with.",
    )
    run.add_argument(
        "target",
        nargs="?",
        help="path/file.py[:NAME] or module:NAME (with --resume: taken from DIR/run.json)",
    )
    _add_task_options(run)
    _add_place_options(run)
    _add_provider_options(run)
    _add_store_options(run)
    add_fail_under(run)
    run.set_defaults(handler=run_command)


def _add_task_options(run: argparse.ArgumentParser) -> None:
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


def _add_place_options(run: argparse.ArgumentParser) -> None:
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


def _add_provider_options(run: argparse.ArgumentParser) -> None:
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
        "--dask",
        metavar="ADDRESS|local[:N]",
        help="run the repetitions on a Dask cluster: a scheduler address (tcp://host:8786), or "
        "local[:N], a local cluster of N worker processes (N defaults to the core count); needs "
        "asynceval[dask] (default: no Dask, the repetitions run in this process)",
    )


def _add_store_options(run: argparse.ArgumentParser) -> None:
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


def run_command(args: argparse.Namespace) -> int:
    _parse_repeats(args)
    manifest = _resuming(args)
    rule = _adaptive_rule(args)
    options = {
        setting: getattr(args, option)
        for option, setting in OVERRIDES.items()
        if getattr(args, option) is not None
    }
    if manifest is not None:  # what the run computes comes from its manifest
        resolved = manifest["computes"].get("resolved", {})
        options["llm_model"] = resolved.get("model")
        options["llm_base_url"] = resolved.get("base_url")
    if args.cache is not None:
        options["llm_cache_dir"] = _cache_dir(args.cache)
    elif args.no_cache:
        options["llm_cache_dir"] = None
    backend = _backend(args.dask)
    runtime = _install_runtime(_settings(options))
    bench = load_benchmark(args.target)
    tasks = _tasks(args, bench)
    if bench.runtime is None:
        if bench.settings is not None:  # the target chose settings: the options still win
            runtime = _install_runtime(_settings({**bench.settings.model_dump(), **options}))
        bench.runtime = runtime
    runtime = bench.runtime
    if isinstance(args.repeats, int):
        bench.n_task_repeats = args.repeats
    if args.max_concurrent_tasks is not None:  # the option beats the benchmark's own too
        bench.max_concurrent_tasks = args.max_concurrent_tasks
    _check_cache(runtime)
    run_id = new_run_id()
    out = _output_dir(args, run_id)  # only once everything else is known to be right
    with contextlib.ExitStack() as holding:
        lock = _lock(holding, out)
        if manifest is None:
            if args.resume is not None:  # a run of an older asynceval: its results file first
                _check_results_file(out / "results.jsonl")
            manifest = _new_manifest(args, out, run_id, bench, tasks, runtime.settings)
        else:
            _manifest.check_tasks(out, manifest["computes"]["tasks"], _tasks_record(tasks))
        _check_journal(out, args, backend)  # before the manifest: a refusal leaves no run
        _manifest.add_segment(manifest, run_id=run_id, args=args, resumed=args.resume is not None)
        _write_manifest(out, manifest)
        events_file = _events_file(out, runtime.settings)
        if lock is not None and lock.taken_over is not None:
            _say_taken_over(out, lock.taken_over)
        return _run_and_summarise(args, bench, tasks, out, run_id, events_file, backend, rule)
    raise AssertionError("unreachable")  # pragma: no cover - the block returns or raises


def _run_and_summarise(
    args: argparse.Namespace,
    bench: Benchmark,
    tasks: Iterable[Any],
    out: Path,
    run_id: str,
    events_file: AppendOnlyFile,
    backend: Backend | None,
    rule: AdaptiveRepeats | None,
) -> int:
    assert bench.runtime is not None
    total = _total(tasks, bench) if rule is None else None  # adaptive: not known ahead
    results = out / "results.jsonl"
    most = bench.n_task_repeats if rule is None else rule.max_repeats
    done = already_done(results, tasks, most) if args.resume is not None else 0
    mode: Mode = "quiet" if args.quiet else ("live" if sys.stdout.isatty() else "plain")
    progress = Progress(
        bench.controller or bench.runtime.limiter, total, mode, sys.stdout, already_done=done
    )
    started = time.monotonic()
    if interrupted := _run(args, bench, tasks, out, run_id, progress, events_file, backend, rule):
        return interrupted
    try:
        if progress.stream_error is not None:
            raise progress.stream_error
        summary = load_summary(out / "results.jsonl", time.monotonic() - started)
        if not args.quiet:
            print_summary(summary, sys.stdout)
            if bench.adaptive_outcome is not None:
                print(adaptive_line(bench.adaptive_outcome))
            print(f"results: {out / 'results.jsonl'}\nevents:  {out / 'events.jsonl'}")
        else:
            print(f"results: {out}")
        sys.stdout.flush()  # here, where a refusal is one line, not at exit
        status = fail_under_status(summary, args.fail_under, quiet=args.quiet)
        sys.stdout.flush()
    except OSError as exc:
        raise CLIError(stdout_failure_line(exc, out)) from None
    errors = error_status(summary, allow_errors=args.allow_errors, stream=sys.stderr)
    _say_not_kept(progress.store_failures, bench.runtime, out)
    _say_abandoned(progress.threads_still_running)
    return status or errors


def _parse_repeats(args: argparse.Namespace) -> None:
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


def _adaptive_rule(args: argparse.Namespace) -> AdaptiveRepeats | None:
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


def _resuming(args: argparse.Namespace) -> dict[str, Any] | None:
    """For `--resume DIR`: its manifest, with `args` completed from it (None for a directory
    of an older asynceval, which needs the target given again); without --resume, None."""
    if args.resume is None:
        if args.target is None:
            raise CLIError(
                "run needs a TARGET (path/file.py[:NAME] or module:NAME), or --resume DIR"
            )
        return None
    out = Path(args.resume)
    if not out.is_dir():
        raise CLIError(f"--resume {args.resume}: no such run directory")
    manifest = _manifest.read(out)
    if manifest is not None:
        _manifest.apply(args, manifest, out)
        return manifest
    if not (out / "results.jsonl").is_file():
        raise CLIError(f"--resume {args.resume}: no run there (no run.json, no results.jsonl)")
    if args.target is None:
        raise CLIError(
            f"--resume {args.resume}: no run.json there (a run of an older asynceval): give the "
            "target and the options it was run with: asynceval run TARGET --resume DIR ..."
        )
    return None


def _new_manifest(
    args: argparse.Namespace,
    out: Path,
    run_id: str,
    bench: Benchmark,
    tasks: Iterable[Any],
    settings: Settings,
) -> dict[str, Any]:
    """A new run's manifest; a run directory that already holds a run is refused (resume it)."""
    if (args.resume is None and _holds_something(out / "results.jsonl")) or (
        out / _manifest.NAME
    ).exists():
        raise CLIError(
            f"{out} already holds a run: finish it with: asynceval run --resume {out}, or "
            "choose another --out"
        )
    return _manifest.new(
        run_id=run_id,
        args=args,
        benchmark=type(bench).__qualname__,
        tasks=_tasks_record(tasks),
        repeats="auto" if args.repeats == "auto" else bench.n_task_repeats,
        settings=settings.public(),
    )


def _check_results_file(path: Path) -> None:
    try:
        read_header(path)
    except ConfigError as exc:
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from None


def _tasks_record(tasks: Iterable[Any]) -> dict[str, Any]:
    """What the manifest records of the run's tasks: a file's source, hash and mapping; the
    benchmark's own tasks by their count and ids."""
    if isinstance(tasks, TaskStream):
        try:
            return tasks_source_info(tasks)
        except OSError as exc:
            raise CLIError(f"--tasks {tasks.source}: {exc.strerror or exc}") from None
    return {"kind": "default", **(task_set_of(tasks) or {})}


def _lock(holding: contextlib.ExitStack, out: Path) -> RunLock | None:
    try:
        return holding.enter_context(run_lock.hold(out / "results.jsonl"))
    except RunLocked as exc:
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"cannot write to {out}: {exc.strerror or exc}") from None


def _write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    try:
        _manifest.write(out, manifest)
    except OSError as exc:
        raise CLIError(f"cannot write {out / _manifest.NAME}: {exc.strerror or exc}") from None


def _say_taken_over(out: Path, holder: Holder) -> None:
    print(
        f"asynceval: warning: {out} was left locked by {holder.describe()}, which is no longer "
        "running (killed?); this run takes it over",
        file=sys.stderr,
    )
    events.run_lock_taken_over(
        directory=str(out),
        pid=holder.pid or 0,
        host=holder.host or "",
        started_at=holder.started_at,
    )


def _check_cache(runtime: Runtime) -> None:
    """A model-call cache that cannot be written is found now, before the run: one line."""
    if runtime.cache is None:
        return
    try:
        runtime.cache.check()
    except OSError as exc:
        raise CLIError(f"the model-call cache cannot be used: {exc}") from None


def _events_file(out: Path, settings: Settings) -> AppendOnlyFile:
    """DIR/events.jsonl, opened and made the destination of every event from now on (the file
    itself, so that the lines of a loop turn go in one write and its `error` is watched)."""
    file = open_events_file(out / "events.jsonl")
    quiet_events_warning(file)
    _event_output.configure_onto(_events_settings(settings, out / "events.jsonl"), file, owned=True)
    return file


# Signals that end a run as Ctrl-C does, and the exit status each gives (128 + its number).
_STOP_SIGNALS = {signal.SIGTERM: 143, signal.SIGHUP: 129} if hasattr(signal, "SIGHUP") else {}


def _run(
    args: argparse.Namespace,
    bench: Benchmark,
    tasks: Iterable[Any],
    out: Path,
    run_id: str,
    progress: Progress,
    events_file: AppendOnlyFile,
    backend: Backend | None,
    rule: AdaptiveRepeats | None = None,
) -> int:
    """Run the benchmark: 0 when it ran to the end, 130 when Ctrl-C stopped it, 143 or 129 when
    SIGTERM or SIGHUP did. A results or events file the disk refused (the run stops at once) is
    a CLIError: one line, exit 2."""
    hint = f"finish the rest with: asynceval run --resume {shlex.quote(str(out))}"
    options = _RunOptions(
        resume=args.resume is not None, run_id=run_id, journal=not args.no_journal, repeats=rule
    )
    try:
        stopped = anyio.run(_execute, bench, tasks, out, options, progress, events_file, backend)
    except KeyboardInterrupt:
        print(
            f"interrupted: {progress.done} repetitions finished and are in {out}; {hint}",
            file=sys.stderr,
        )
        return 130
    except Exception as exc:  # the results file's OSError comes wrapped in exception groups
        error = write_error(exc, {str(out / "results.jsonl"), str(out / "events.jsonl")})
        if error is not None:
            raise CLIError(_failure_line(error, True, out)) from None
        if (bad_row := _first(exc, TaskSpecError)) is not None:  # a task file's row, mid-run
            raise CLIError(
                f"{bad_row}; the run stopped there, {progress.done} repetitions finished and are "
                f"in {out}"
            ) from None
        refused = config_error(exc)  # e.g. a benchmark the Dask workers cannot be sent
        if isinstance(refused, BackendLost):
            raise CLIError(f"{refused}; the finished reports are in {out}; {hint}") from None
        if refused is not None:
            raise CLIError(str(refused)) from None
        if (disk := _first(exc, OSError)) is not None:  # the journal's store, say, refused
            raise CLIError(f"{disk}; the finished reports are in {out}; {hint}") from None
        raise
    if stopped in _STOP_SIGNALS:
        name = signal.Signals(stopped).name
        print(
            f"stopped by {name}: {progress.done} repetitions finished and are in {out}; {hint}",
            file=sys.stderr,
        )
        return _STOP_SIGNALS[signal.Signals(stopped)]
    if events_file.error is not None:
        raise CLIError(_failure_line(events_file.error, stopped is not None, out))
    return 0


def _first(exc: BaseException, kind: type[_E]) -> _E | None:
    """The first `kind` error in `exc` or in the exception groups (nested or not) it is."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _first(inner, kind)) is not None:
                return found
    return None


def _check_journal(out: Path, args: argparse.Namespace, backend: Backend | None) -> None:
    """A call journal that cannot be written is found now, before the run: one line."""
    if args.no_journal or backend is not None:
        return
    path = journal_path(out / "results.jsonl")
    try:
        Store(path).check()
    except OSError as exc:
        raise CLIError(
            f"cannot write the call journal {path}: {exc}; --no-journal runs without it"
        ) from None


def _failure_line(error: OSError, stopped: bool, out: Path) -> str:
    """The one line a refused write becomes, with the short resume command."""
    line = failure_line(error, stopped, "", out)
    if not stopped:
        return line
    head = line.split("; once there is room")[0]
    return f"{head}; once there is room, finish it with: asynceval run --resume {shlex.quote(str(out))}"


def _backend(spec: str | None) -> Backend | None:
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


def _settings(values: Mapping[str, Any]) -> Settings:
    """The run's settings: `values` over the environment and `.env`, with no log file of the
    environment's (the run's events go to DIR/events.jsonl)."""
    try:
        return Settings(**{**values, "log_file": None})
    except ConfigError as exc:
        raise CLIError(str(exc)) from None


def _cache_dir(text: str) -> str:
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


def _install_runtime(settings: Settings) -> Runtime:
    """A Runtime over `settings`, made the process default (for what the target builds)."""
    runtime = Runtime(settings)
    set_process_default(runtime)
    return runtime


def _events_settings(settings: Settings, path: Path) -> Settings:
    """The run's events file: always JSON lines with every call event (`asynceval logs check`
    reads it), whatever LOG_FORMAT says and at DEBUG when LOG_LEVEL asks for it, else INFO."""
    level = "DEBUG" if settings.log_level == "DEBUG" else "INFO"
    return settings.model_copy(
        update={"log_file": str(path), "log_format": "json", "log_level": level}
    )


def _say_not_kept(failures: Mapping[str, int], runtime: Runtime, out: Path) -> None:
    """Answers the disk refused to the cache or the journal: the run is whole, but a second
    run or a resume pays for them again."""
    where = {
        "cache": f"the model-call cache ({runtime.cache.directory if runtime.cache else '?'})",
        "journal": f"the call journal ({journal_path(out / 'results.jsonl')})",
    }
    for store, count in failures.items():
        print(
            f"asynceval: warning: {count} answer{'s' if count != 1 else ''} could not be kept in "
            f"{where.get(store, store)}: the disk refused them; the run's results are whole",
            file=sys.stderr,
        )


def _say_abandoned(count: int) -> None:
    if count:
        print(
            f"{count} sync thread{'s' if count != 1 else ''} abandoned by task timeouts "
            f"{'are' if count != 1 else 'is'} still running; exiting without waiting for "
            f"{'them' if count != 1 else 'it'}",
            file=sys.stderr,
        )
        sys.stderr.flush()


@dataclass(frozen=True)
class _RunOptions:
    resume: bool
    run_id: str
    journal: bool
    repeats: AdaptiveRepeats | None = None


async def _execute(
    bench: Benchmark,
    tasks: Iterable[Any],
    out: Path,
    options: _RunOptions,
    progress: Progress,
    events_file: AppendOnlyFile,
    backend: Backend | None = None,
) -> int | None:
    """The run with its progress display. None when it ran to its end; the signal number
    when SIGTERM or SIGHUP stopped it; 0 when the events file failed (`stop_when_broken`)."""
    events.add_observer(progress.observe)
    stopped_by: list[int] = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(progress.show)
            try:
                with anyio.CancelScope() as run_scope:
                    tg.start_soon(stop_when_broken, events_file, run_scope)
                    if _STOP_SIGNALS:
                        tg.start_soon(_stop_on_signals, run_scope, stopped_by)
                    await bench.run(
                        tasks,
                        results_path=out / "results.jsonl",
                        resume=options.resume,
                        collect=False,
                        backend=backend,
                        run_id=options.run_id,
                        journal=options.journal,
                        repeats=options.repeats,
                    )
            finally:  # outside run_scope, or that scope would not be the one catching its cancel
                tg.cancel_scope.cancel()
        if stopped_by:
            return stopped_by[0]
        return 0 if run_scope.cancelled_caught else None
    finally:
        events.remove_observer(progress.observe)


async def _stop_on_signals(scope: anyio.CancelScope, stopped_by: list[int]) -> None:
    """SIGTERM and SIGHUP stop the run as Ctrl-C does: the repetitions in flight are cancelled,
    every finished report is on disk, `run_finished` says interrupted."""
    with anyio.open_signal_receiver(*_STOP_SIGNALS) as signals:
        async for signum in signals:
            stopped_by.append(int(signum))
            scope.cancel()
            return


def _output_dir(args: argparse.Namespace, run_id: str) -> Path:
    """The run directory: --resume's, --out's (made if missing), or a new one named after the
    target and the run id (unique: two runs started in the same second never share it)."""
    if args.resume is not None:
        return Path(args.resume)
    if args.out is not None:
        out = Path(args.out)
        exist_ok = True
    else:
        name = Path(args.target.partition(":")[0]).stem or "run"
        out = Path("results") / f"{name}-{run_id}"
        exist_ok = False
    try:
        out.mkdir(parents=True, exist_ok=exist_ok)
    except OSError as exc:
        raise CLIError(f"cannot write to {out}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise CLIError(f"cannot write to {out}: Permission denied")
    return out


def _holds_something(path: Path) -> bool:
    """Whether `path` exists with content (an empty one, or a device, has no results to lose)."""
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _tasks(args: argparse.Namespace, bench: Benchmark) -> Iterable[Task | Mapping[str, Any]]:
    """The run's tasks: a stream of --tasks SOURCE (its first rows checked now), else the
    benchmark's own, every one checked now (a repeated id or a task with no query is one line,
    before anything is written)."""
    if args.tasks is None and (args.query_field or args.id_field or args.field):
        raise CLIError("--query-field, --id-field and --field map the columns of --tasks SOURCE")
    if args.tasks is not None:
        try:
            mapping = parse_field_options(args.query_field, args.id_field, args.field)
            return open_tasks(args.tasks, **mapping)
        except FileNotFoundError:
            raise CLIError(f"--tasks {args.tasks}: no such file") from None
        except TaskSpecError as exc:
            raise CLIError(str(exc)) from None
        except OSError as exc:
            raise CLIError(f"--tasks {args.tasks}: {exc.strerror or exc}") from None
    try:
        tasks = bench.default_tasks()
    except Exception as exc:  # the target's own code: one line, like an error at import
        raise CLIError(f"{args.target}: default_tasks() failed: {describe(exc)}") from None
    if tasks is None:
        raise CLIError(
            f"{args.target}: the benchmark has no tasks of its own; pass --tasks SOURCE "
            "(or define default_tasks() on it)"
        )
    if isinstance(tasks, str | bytes | Mapping) or not isinstance(tasks, Iterable):
        raise CLIError(
            f"{args.target}: default_tasks() returned {type(tasks).__name__}, not a list of "
            "tasks (Task objects or dicts of Task fields)"
        )
    try:
        built = _checked(tasks)
    except TaskSpecError as exc:
        raise CLIError(f"{args.target}: default_tasks(): {exc}") from None
    except Exception as exc:  # a generator of the target's raising as it is read
        raise CLIError(f"{args.target}: default_tasks() failed: {describe(exc)}") from None
    if not built:
        raise CLIError(f"{args.target}: default_tasks() returned no task; pass --tasks SOURCE")
    return built


def _checked(tasks: Iterable[Any]) -> list[Task]:
    """Every task built and its id checked (a repeated id names both places)."""
    built: list[Task] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(tasks):
        try:
            task = as_task(item)
        except TaskSpecError as exc:
            raise TaskSpecError(f"task {index}: {exc}") from None
        if task.id in seen:
            raise TaskSpecError(duplicate_message(task.id, f"tasks {seen[task.id]} and {index}"))
        seen[task.id] = index
        built.append(task)
    return built


def _total(tasks: Iterable[Any], bench: Benchmark) -> int | None:
    """The pairs (task, repeat) of the run's tasks, for the progress display; None if unknown."""
    if isinstance(tasks, TaskStream):
        count = tasks.count()
        return None if count is None else count * bench.n_task_repeats
    return len(tasks) * bench.n_task_repeats if hasattr(tasks, "__len__") else None  # type: ignore[arg-type]
