"""The run directory `asynceval run` writes into: where it is, what `--resume DIR` finds there,
its manifest (`run.json`), its lock, and the journal's file checked before the run starts.

Every problem is one `CLIError` line naming the directory: a directory that already holds a run
(resume it or choose another `--out`), one locked by a running run, one that cannot be written.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import events
from ..config import Settings
from ..engine import Benchmark, run_lock
from ..engine.backend import Backend
from ..engine.results import read_header
from ..engine.run_lock import Holder, RunLock
from ..engine.run_paths import journal_path
from ..errors import ConfigError, RunLocked
from ..runtime import Store
from . import _manifest
from ._errors import CLIError
from ._run_tasks import tasks_record


def resuming(args: argparse.Namespace) -> dict[str, Any] | None:
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
        _manifest.check_target(out, manifest, allow=args.allow_changed_target)
        if args.max_cost is None:  # the run's total goes on (what was spent counts against it)
            args.max_cost = _manifest.recorded_budget(manifest)
        return manifest
    if not (out / "results.jsonl").is_file():
        raise CLIError(f"--resume {args.resume}: no run there (no run.json, no results.jsonl)")
    if args.target is None:
        raise CLIError(
            f"--resume {args.resume}: no run.json there (a run of an older asynceval): give the "
            "target and the options it was run with: asynceval run TARGET --resume DIR ..."
        )
    return None


def new_manifest(
    args: argparse.Namespace,
    out: Path,
    run_id: str,
    bench: Benchmark,
    tasks: Iterable[Any],
    settings: Settings,
    target_sha256: Mapping[str, str],
) -> dict[str, Any]:
    """A new run's manifest (`target_sha256`: its target's source files' hashes); a run
    directory that already holds a run is refused (resume it)."""
    if (args.resume is None and holds_something(out / "results.jsonl")) or (
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
        tasks=tasks_record(tasks),
        repeats="auto" if args.repeats == "auto" else bench.n_task_repeats,
        settings=settings.public(),
        target_sha256=target_sha256,
    )


def check_results_file(path: Path) -> None:
    try:
        read_header(path)
    except ConfigError as exc:
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from None


def lock_dir(holding: contextlib.ExitStack, out: Path) -> RunLock | None:
    try:
        return holding.enter_context(run_lock.hold(out / "results.jsonl"))
    except RunLocked as exc:
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"cannot write to {out}: {exc.strerror or exc}") from None


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    try:
        _manifest.write(out, manifest)
    except OSError as exc:
        raise CLIError(f"cannot write {out / _manifest.NAME}: {exc.strerror or exc}") from None


def say_taken_over(out: Path, holder: Holder) -> None:
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


def check_journal(out: Path, args: argparse.Namespace, backend: Backend | None) -> None:
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


def output_dir(args: argparse.Namespace, run_id: str) -> Path:
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


def holds_something(path: Path) -> bool:
    """Whether `path` exists with content (an empty one, or a device, has no results to lose)."""
    try:
        return path.stat().st_size > 0
    except OSError:
        return False
