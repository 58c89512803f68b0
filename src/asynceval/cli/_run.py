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
from ..engine import AdaptiveRepeats, Benchmark
from ..engine.backend import Backend
from ..engine.run_paths import new_run_id
from ..errors import BackendLost, ConfigError, TaskSpecError
from ..funnel import BatchLane
from ..runtime import Runtime, set_process_default
from . import _manifest
from ._errors import CLIError
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
from ._run_cost import add_cost_options, budget_status, check_prices, parse_max_cost
from ._run_dir import (
    check_journal,
    check_results_file,
    lock_dir,
    new_manifest,
    output_dir,
    resuming,
    say_taken_over,
    write_manifest,
)
from ._run_end import say_abandoned, say_not_kept, say_outside
from ._run_options import (
    adaptive_line,
    adaptive_rule,
    add_place_options,
    add_provider_options,
    add_store_options,
    add_task_options,
    backend_of,
    cache_dir,
    parse_repeats,
    settings_of,
)
from ._run_tasks import tasks_of, tasks_record, total_of
from ._target import load_benchmark, source_files

_E = TypeVar("_E", bound=BaseException)

# option -> the setting it overrides
OVERRIDES = {
    "max_concurrent_llm_calls": "max_concurrent_llm_calls",
    "max_concurrent_tasks": "max_concurrent_tasks",
    "llm_call_timeout": "llm_call_timeout",
    "base_url": "llm_base_url",
    "model": "llm_model",
    "max_cost": "max_cost_usd",
    "lane": "llm_lane",
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
    add_task_options(run)
    add_place_options(run)
    add_provider_options(run)
    add_store_options(run)
    add_cost_options(run, resumable=True)
    add_fail_under(run)
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    parse_repeats(args)
    parse_max_cost(args)
    manifest = resuming(args)
    rule = adaptive_rule(args)
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
        options["llm_cache_dir"] = cache_dir(args.cache)
    elif args.no_cache:
        options["llm_cache_dir"] = None
    backend = backend_of(args.dask)
    bench, tasks = build_benchmark(args, options)
    runtime = bench.runtime
    assert runtime is not None
    _check_cache(runtime)
    check_prices(runtime)
    if args.max_cost is None:  # MAX_COST_USD: the segment's header records the total in force
        args.max_cost = runtime.settings.max_cost_usd
    hashes = _manifest.file_hashes(source_files(args.target))
    # Batches left open when the run stops are cancelled at the provider, unless kept for
    # a resume to collect (--keep-batches).
    BatchLane.of(runtime).keep_batches = bool(args.keep_batches)
    run_id = new_run_id()
    out = output_dir(args, run_id)  # only once everything else is known to be right
    with contextlib.ExitStack() as holding:
        lock = lock_dir(holding, out)
        if manifest is None:
            if args.resume is not None:  # a run of an older asynceval: its results file first
                check_results_file(out / "results.jsonl")
            manifest = new_manifest(args, out, run_id, bench, tasks, runtime.settings, hashes)
        else:
            _manifest.check_tasks(out, manifest["computes"]["tasks"], tasks_record(tasks))
        check_journal(out, args, backend)  # before the manifest: a refusal leaves no run
        _manifest.add_segment(
            manifest,
            run_id=run_id,
            args=args,
            resumed=args.resume is not None,
            target_sha256=hashes,
        )
        write_manifest(out, manifest)
        events_file = _events_file(out, runtime.settings)
        if lock is not None and lock.taken_over is not None:
            say_taken_over(out, lock.taken_over)
        return _run_and_summarise(args, bench, tasks, out, run_id, events_file, backend, rule)
    raise AssertionError("unreachable")  # pragma: no cover - the block returns or raises


def build_benchmark(
    args: argparse.Namespace, options: Mapping[str, Any]
) -> tuple[Benchmark, Iterable[Any]]:
    """The benchmark and tasks that `args` name, with `options` (settings) over the environment:
    the settings are installed as the process default before the target is imported, so the
    models it builds at import use them; a target that chose its own settings gets the options
    over them; --repeats and --max-concurrent-tasks beat the benchmark's own."""
    runtime = _install_runtime(settings_of(dict(options)))
    bench = load_benchmark(args.target)
    tasks = tasks_of(args, bench)
    if bench.runtime is None:
        if bench.settings is not None:  # the target chose settings: the options still win
            runtime = _install_runtime(settings_of({**bench.settings.model_dump(), **options}))
        bench.runtime = runtime
    if isinstance(args.repeats, int):
        bench.n_task_repeats = args.repeats
    if args.max_concurrent_tasks is not None:  # the option beats the benchmark's own too
        bench.max_concurrent_tasks = args.max_concurrent_tasks
    return bench, tasks


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
    total = total_of(tasks, bench) if rule is None else None  # adaptive: not known ahead
    results = out / "results.jsonl"
    most = bench.n_task_repeats if rule is None else rule.max_repeats
    done = already_done(results, tasks, most) if args.resume is not None else 0
    mode: Mode = "quiet" if args.quiet else ("live" if sys.stdout.isatty() else "plain")
    progress = Progress(
        bench.controller or bench.runtime.limiter,
        total,
        mode,
        sys.stdout,
        already_done=done,
        over_tasks=rule is not None,  # adaptive: the summary's rate is the mean over tasks
    )
    started = time.monotonic()
    if interrupted := _run(args, bench, tasks, out, run_id, progress, events_file, backend, rule):
        return interrupted
    try:
        if progress.stream_error is not None:
            raise progress.stream_error
        loaded = load_summary(out / "results.jsonl", time.monotonic() - started)
        summary = loaded.summary
        if not args.quiet:
            print_summary(summary, sys.stdout, loaded.bill_rows)
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
    finished = already_done(results, tasks, most) if total is not None else None
    left = None if total is None or finished is None else total - finished
    stopped = budget_status(bench, out, left, sys.stderr)  # its line, not one per repetition
    errors = error_status(summary, allow_errors=args.allow_errors, stream=sys.stderr)
    say_not_kept(progress.store_failures, bench.runtime, out)
    say_abandoned(progress.threads_still_running)
    say_outside(progress.outside)
    return stopped or status or errors


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
        resume=args.resume is not None,
        run_id=run_id,
        journal=not args.no_journal,
        repeats=rule,
        max_cost=args.max_cost,
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


def _failure_line(error: OSError, stopped: bool, out: Path) -> str:
    """The one line a refused write becomes, with the short resume command."""
    line = failure_line(error, stopped, "", out)
    if not stopped:
        return line
    head = line.split("; once there is room")[0]
    return f"{head}; once there is room, finish it with: asynceval run --resume {shlex.quote(str(out))}"


def _install_runtime(settings: Settings) -> Runtime:
    """A Runtime over `settings`, made the process default (for what the target builds); a
    setting it cannot use (a bad LLM_PRICES_FILE) is one line."""
    try:
        runtime = Runtime(settings)
    except ConfigError as exc:
        raise CLIError(str(exc)) from None
    set_process_default(runtime)
    return runtime


def _events_settings(settings: Settings, path: Path) -> Settings:
    """The run's events file: always JSON lines with every call event (`asynceval logs check`
    reads it), whatever LOG_FORMAT says and at DEBUG when LOG_LEVEL asks for it, else INFO."""
    level = "DEBUG" if settings.log_level == "DEBUG" else "INFO"
    return settings.model_copy(
        update={"log_file": str(path), "log_format": "json", "log_level": level}
    )


@dataclass(frozen=True)
class _RunOptions:
    resume: bool
    run_id: str
    journal: bool
    repeats: AdaptiveRepeats | None = None
    max_cost: float | None = None  # the run's total (a resume's earlier segments' spend counts)


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
                        max_cost_usd=options.max_cost,
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
