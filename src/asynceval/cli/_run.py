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
import logging
import sys
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from .. import _event_output, events
from .._writer import AppendOnlyFile
from ..config import Settings
from ..engine import Benchmark, Task, load_tasks
from ..engine.backend import Backend
from ..engine.datasets import parse_field_options
from ..errors import BackendLost, ConfigError, TaskSpecError
from ..runtime import Runtime, set_process_default
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
from ._progress import Mode, Progress
from ._report import add_fail_under, fail_under_status, load_summary, print_summary
from ._target import load_benchmark

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
        "Benchmark class, instance or zero-argument factory.",
    )
    run.add_argument("target", help="path/file.py[:NAME] or module:NAME")
    run.add_argument(
        "--tasks",
        metavar="SOURCE",
        help="tasks: FILE.jsonl, .json, .csv or .tsv, a saved Hugging Face dataset DIR[@SPLIT], "
        "or hf:NAME[:CONFIG][@SPLIT] (needs asynceval[hf])",
    )
    run.add_argument("--query-field", metavar="COLUMN", help="the column holding each query")
    run.add_argument("--id-field", metavar="COLUMN", help="the column holding each task's id")
    run.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="FIELD=COLUMN[,COLUMN]",
        help="put these columns in a task field (evaluation_data, environment_data, user_data, "
        "metadata); repeatable; other columns go to metadata",
    )
    where = run.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="DIR", help="where to write (default results/NAME-TIME)")
    where.add_argument("--resume", metavar="DIR", help="continue the run whose files are in DIR")
    run.add_argument("--repeats", type=int, metavar="N", help="repetitions per task")
    run.add_argument("--max-concurrent-llm-calls", type=int, metavar="N")
    run.add_argument("--max-concurrent-tasks", type=int, metavar="N")
    run.add_argument("--llm-call-timeout", type=float, metavar="SECONDS")
    run.add_argument("--base-url", metavar="URL", help="provider base URL, e.g. http://host/v1")
    run.add_argument("--model", metavar="NAME", help="model name")
    run.add_argument(
        "--dask",
        metavar="ADDRESS|local[:N]",
        help="run the repetitions on a Dask cluster: a scheduler address, or a local cluster of "
        "N worker processes (default: the core count); needs asynceval[dask]",
    )
    cache = run.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache",
        metavar="DIR",
        help="answer identical LLM calls from DIR and keep new answers there (LLM_CACHE_DIR)",
    )
    cache.add_argument(
        "--no-cache", action="store_true", help="no model-call cache, whatever LLM_CACHE_DIR says"
    )
    run.add_argument("--quiet", action="store_true", help="no progress display, no summary")
    add_fail_under(run)
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    if args.repeats is not None and args.repeats < 1:
        raise CLIError(f"--repeats must be >= 1, got {args.repeats}")
    options = {
        setting: getattr(args, option)
        for option, setting in OVERRIDES.items()
        if getattr(args, option) is not None
    }
    if args.cache is not None:
        options["llm_cache_dir"] = _cache_dir(args.cache)
    elif args.no_cache:
        options["llm_cache_dir"] = None
    backend = _backend(args.dask)
    runtime = _install_runtime(_settings(options))
    bench = load_benchmark(args.target)
    tasks = _tasks(args, bench)
    out = _output_dir(args)  # only once everything else is known to be right
    if bench.runtime is None:
        if bench.settings is not None:  # the target chose settings: the options still win
            runtime = _install_runtime(_settings({**bench.settings.model_dump(), **options}))
        bench.runtime = runtime
    runtime = bench.runtime
    if args.repeats is not None:
        bench.n_task_repeats = args.repeats
    events_file = _events_file(out, runtime.settings)
    total = _total(tasks, bench)
    mode: Mode = "quiet" if args.quiet else ("live" if sys.stdout.isatty() else "plain")
    progress = Progress(bench.controller or runtime.limiter, total, mode, sys.stdout)
    started = time.monotonic()
    if interrupted := _run(args, bench, tasks, out, progress, events_file, backend):
        return interrupted
    try:
        if progress.stream_error is not None:
            raise progress.stream_error
        status = 0
        if not args.quiet or args.fail_under is not None:
            summary = load_summary(out / "results.jsonl", time.monotonic() - started)
            if not args.quiet:
                print_summary(summary, sys.stdout)
                print(f"results: {out / 'results.jsonl'}\nevents:  {out / 'events.jsonl'}")
            status = fail_under_status(summary, args.fail_under, quiet=args.quiet)
            sys.stdout.flush()  # here, where a refusal is one line, not at exit
    except OSError as exc:
        raise CLIError(stdout_failure_line(exc, out)) from None
    _say_abandoned(progress.threads_still_running)
    return status


def _events_file(out: Path, settings: Settings) -> AppendOnlyFile:
    """DIR/events.jsonl, opened and made the destination of every event from now on (the file
    itself, so that the lines of a loop turn go in one write and its `error` is watched)."""
    file = open_events_file(out / "events.jsonl")
    quiet_events_warning(file)
    _event_output.configure_onto(_events_settings(settings, out / "events.jsonl"), file, owned=True)
    return file


def _run(
    args: argparse.Namespace,
    bench: Benchmark,
    tasks: Iterable[Any],
    out: Path,
    progress: Progress,
    events_file: AppendOnlyFile,
    backend: Backend | None,
) -> int:
    """Run the benchmark: 0 when it ran to the end, 130 when Ctrl-C stopped it. A results or
    events file the disk refused (the run stops at once) is a CLIError: one line, exit 2."""
    try:
        resume = args.resume is not None
        stopped = anyio.run(_execute, bench, tasks, out, resume, progress, events_file, backend)
    except KeyboardInterrupt:
        print(
            f"interrupted: {progress.done} repetitions finished and are in {out}; "
            f"finish the rest with: asynceval run {args.target} --resume {out}",
            file=sys.stderr,
        )
        return 130
    except Exception as exc:  # the results file's OSError comes wrapped in exception groups
        error = write_error(exc, {str(out / "results.jsonl"), str(out / "events.jsonl")})
        if error is None:
            refused = config_error(exc)  # e.g. a benchmark the Dask workers cannot be sent
            if refused is None:
                raise
            if isinstance(refused, BackendLost):
                raise CLIError(
                    f"{refused}; the finished reports are in {out}; finish the rest with: "
                    f"asynceval run {args.target} --resume {out} --dask ..."
                ) from None
            raise CLIError(str(refused)) from None
        raise CLIError(failure_line(error, True, args.target, out)) from None
    if events_file.error is not None:
        raise CLIError(failure_line(events_file.error, stopped, args.target, out))
    return 0


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
    return DaskBackend(spec)


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


def _say_abandoned(count: int) -> None:
    if count:
        print(
            f"{count} sync thread{'s' if count != 1 else ''} abandoned by task timeouts "
            f"{'are' if count != 1 else 'is'} still running; exiting without waiting for "
            f"{'them' if count != 1 else 'it'}",
            file=sys.stderr,
        )
        sys.stderr.flush()


async def _execute(
    bench: Benchmark,
    tasks: Iterable[Any],
    out: Path,
    resume: bool,
    progress: Progress,
    events_file: AppendOnlyFile,
    backend: Backend | None = None,
) -> bool:
    """The run with its progress display; True if it was stopped because the events file
    failed (`stop_when_broken`)."""
    events.add_observer(progress.observe)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(progress.show)
            try:
                with anyio.CancelScope() as run_scope:
                    tg.start_soon(stop_when_broken, events_file, run_scope)
                    await bench.run(
                        tasks,
                        results_path=out / "results.jsonl",
                        resume=resume,
                        collect=False,
                        backend=backend,
                    )
            finally:  # outside run_scope, or that scope would not be the one catching its cancel
                tg.cancel_scope.cancel()
        return run_scope.cancelled_caught
    finally:
        events.remove_observer(progress.observe)


def _output_dir(args: argparse.Namespace) -> Path:
    if args.resume is not None:
        out = Path(args.resume)
        results = out / "results.jsonl"
        if not results.is_file():  # empty is fine: a run the disk refused even a header
            raise CLIError(f"--resume {args.resume}: no results.jsonl there to resume")
        return out
    if args.out is not None:
        out = Path(args.out)
    else:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        name = Path(args.target.partition(":")[0]).stem or "run"
        out = Path("results") / f"{name}-{stamp}"
    if _holds_something(out / "results.jsonl"):
        raise CLIError(
            f"{out} already holds results: continue them with --resume {out}, or choose --out"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".asynceval-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise CLIError(f"cannot write to {out}: {exc.strerror or exc}") from None
    return out


def _holds_something(path: Path) -> bool:
    """Whether `path` exists with content (an empty one, or a device, has no results to lose)."""
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _tasks(args: argparse.Namespace, bench: Benchmark) -> Iterable[Task | Mapping[str, Any]]:
    if args.tasks is None and (args.query_field or args.id_field or args.field):
        raise CLIError("--query-field, --id-field and --field map the columns of --tasks SOURCE")
    if args.tasks is not None:
        try:
            mapping = parse_field_options(args.query_field, args.id_field, args.field)
            return load_tasks(args.tasks, **mapping)
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
    return tasks


def _total(tasks: Iterable[Any], bench: Benchmark) -> int | None:
    return len(tasks) * bench.n_task_repeats if hasattr(tasks, "__len__") else None  # type: ignore[arg-type]
