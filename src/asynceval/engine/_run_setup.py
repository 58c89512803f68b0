"""What a run is built from and checked against, out of the scheduler's way: its runtime, its
adaptive schedule, the results file's header, and the check that a resumed file is this run's."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from os import PathLike
from typing import TYPE_CHECKING, Any

from .. import _event_output, events
from .._version import __version__
from ..config import Settings
from ..errors import ConfigError
from ..limits import ConcurrencyController
from ..runtime import Runtime
from ._adaptive_repeats import AdaptiveRepeats
from ._adaptive_schedule import AdaptiveSchedule
from .run_lock import hold

if TYPE_CHECKING:
    from .benchmark import Benchmark
    from .scheduler import Run


def adaptive_schedule(repeats: AdaptiveRepeats | None) -> AdaptiveSchedule | None:
    """The adaptive rule's schedule, or None for fixed repeats; anything else is refused."""
    if repeats is None:
        return None
    if not isinstance(repeats, AdaptiveRepeats):
        raise ConfigError(
            f"repeats must be an AdaptiveRepeats (fixed repeats are the benchmark's "
            f"n_task_repeats), got {repeats!r}"
        )
    return AdaptiveSchedule(repeats)


def runtime_for(bench: Benchmark) -> Runtime:
    """The runtime a run goes through: the benchmark's, else one of its own when it was given
    settings, else the current one; a benchmark's own controller replaces the limiter."""
    runtime = bench.runtime
    if runtime is None:
        if bench.settings is not None:
            return Runtime(bench.settings, limiter=bench.controller)
        runtime = Runtime.current()
    if bench.controller is not None and bench.controller is not runtime.limiter:
        return Runtime(runtime.settings, limiter=bench.controller, rate=runtime.rate)
    return runtime


def run_header(run: Run, controller: ConcurrencyController) -> dict[str, Any]:
    """The results file's header line: what ran, with which settings and limits."""
    return {
        "run_id": run.run_id,
        "asynceval_version": __version__,
        "python": platform.python_version(),
        "started_at": datetime.now(UTC).isoformat(),
        "started_at_unix": round(time.time(), 3),
        "benchmark": type(run.bench).__qualname__,
        "benchmark_config": run.bench.gather_config(),
        "settings": run.settings.public(),
        "max_concurrent_llm_calls": controller.limit,
        "max_concurrent_tasks": run.max_tasks,
        "resumed": run.resume,
        "task_set": run.task_set,
        "journal": run.journal and run.backend is None,
        **({"adaptive_repeats": run.adaptive.rule.describe()} if run.adaptive else {}),
        **(dict(run.session.description) if run.session is not None else {}),
    }


def check_paths(results_path: object, resume: bool, journal: bool | None) -> None:
    """Refuse a resume or a journal without a results file to keep them by."""
    if resume and results_path is None:
        raise ConfigError("resume=True needs a results_path to resume from")
    if journal and results_path is None:
        raise ConfigError("journal=True needs a results_path (the journal is kept beside it)")


def check_resumable(run: Run, header: Mapping[str, Any] | None) -> None:
    """Refuse to resume a results file of another benchmark or another task set (a file that
    is not a results file was refused by `read_header`)."""
    if header is None:
        return  # nothing written yet: there is nothing to mix up
    path = os.fspath(run.results_path or "")
    ours = type(run.bench).__qualname__
    theirs = header.get("benchmark")
    if isinstance(theirs, str) and theirs != ours:
        raise ConfigError(
            f"{path} holds a run of benchmark {theirs}, not {ours}: resume it with the "
            "benchmark that wrote it, or write this run elsewhere"
        )
    recorded = header.get("task_set")
    if (
        isinstance(recorded, Mapping)
        and run.task_set is not None
        and recorded.get("ids_sha256") != run.task_set["ids_sha256"]
    ):
        raise ConfigError(
            f"{path} holds a run of another task set ({recorded.get('count')} tasks, ids "
            f"{str(recorded.get('ids_sha256'))[:12]}...; these are {run.task_set['count']}, "
            f"{run.task_set['ids_sha256'][:12]}...): resume it with the tasks it was run "
            "with, or write this run elsewhere"
        )


def run_attributes(run: Run) -> dict[str, Any]:
    """The run span's attributes (`asynceval.telemetry`): what runs, how wide, where."""
    return {
        "benchmark": type(run.bench).__qualname__,
        "n_tasks": run.n_tasks,
        "n_task_repeats": run.bench.n_task_repeats,
        "max_concurrent_tasks": run.max_tasks,
        "max_concurrent_llm_calls": run.runtime.limiter.limit,
        "backend": type(run.backend).__name__ if run.backend is not None else "local",
    }


def store_failures(run: Run) -> dict[str, int]:
    """Answers the disk refused to the model-call cache and to the call journal (the calls
    themselves succeeded; a resume or a second run pays for them again)."""
    cache = run.runtime.cache
    return {
        "cache": cache.store_failures if cache is not None else 0,
        "journal": run.journal_failures,
    }


def run_key(run: Run) -> str | None:
    """The run's key on a backend: its results file's absolute path, if it has one."""
    if run.results_path is None:
        return None
    return os.path.abspath(os.fspath(run.results_path))


@contextmanager
def results_held(results_path: str | PathLike[str], settings: Settings) -> Iterator[None]:
    """A run's results file held (`RunLocked` when another run writes it; a lock left by a dead
    run is taken over, with a `run_lock_taken_over` event) and its events file open beside it."""
    with (
        hold(results_path) as lock,
        _event_output.run_events_file(_event_output.events_path_for(results_path), settings),
    ):
        if lock is not None and lock.taken_over is not None:
            left = lock.taken_over
            events.ensure_logging(settings)
            events.run_lock_taken_over(
                directory=os.path.dirname(lock.results_path),
                pid=left.pid or 0,
                host=left.host or "",
                started_at=left.started_at,
            )
        yield
