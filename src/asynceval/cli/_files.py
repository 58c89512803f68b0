"""A run's files when the disk refuses them: a full disk, a size limit, a failing device.

The results file keeps whole lines by itself (`ResultsFile` writes through an `AppendOnlyFile`
and raises an OSError naming the file). The events file is written by `events`, which counts a
failed write and never raises it into the call it describes; so the CLI opens the events file
itself as an `AppendOnlyFile`, which keeps its lines whole and remembers the error,
and `stop_when_broken` ends the run once it has one: tasks whose record cannot be kept are not
worth running. Either failure becomes one line on stderr (`failure_line`) and exit status 2.
Standard output refusing the progress display or the summary does not stop the run; it is one
line at the end (`stdout_failure_line`), exit status 2 as well.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from .._writer import AppendOnlyFile
from ..errors import BackendLost, ConfigError
from ._errors import CLIError, handle_warnings

_EVENTS_WARNING = "asynceval could not write"  # how events.py's RuntimeWarning starts


def open_events_file(path: Path) -> AppendOnlyFile:
    """The events file of a run (an AppendOnlyFile: whole lines, and `error` once the disk
    refused one); a file that cannot be opened is one line."""
    try:
        return AppendOnlyFile(path)
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {_os_error(exc)}") from None


def quiet_events_warning(file: AppendOnlyFile) -> None:
    """Drop the events module's "could not write" RuntimeWarning (several lines with a source
    line) once `file` has failed: the run reports that failure itself, in one line. Warnings
    for any other reason (say, a progress observer that raised) still show."""

    def quiet(message: Warning | str, category: type[Warning]) -> bool:
        ours = issubclass(category, RuntimeWarning) and str(message).startswith(_EVENTS_WARNING)
        return ours and file.error is not None

    handle_warnings("events file", quiet)


async def stop_when_broken(
    file: AppendOnlyFile, scope: anyio.CancelScope, every: float = 0.05
) -> None:
    """Cancel `scope` (the run) once the events file has failed, within `every` seconds."""
    # Polled rather than an anyio.Event: the failure happens inside `events` in any thread,
    # with no hook to set an Event from, and 20 looks a second cost nothing.
    while file.error is None:  # noqa: ASYNC110
        await anyio.sleep(every)
    scope.cancel()


def write_error(exc: BaseException, paths: Collection[str]) -> OSError | None:
    """The first OSError naming one of `paths` in `exc`, or in the exception groups (nested or
    not) that `exc` is; None if there is none (then `exc` is someone else's to report)."""
    if isinstance(exc, OSError) and exc.filename in paths:
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = write_error(inner, paths)
            if found is not None:
                return found
    return None


def config_error(exc: BaseException) -> ConfigError | BackendLost | None:
    """The first ConfigError (or BackendLost) in `exc` or in the exception groups it is in."""
    if isinstance(exc, ConfigError | BackendLost):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = config_error(inner)
            if found is not None:
                return found
    return None


def failure_line(error: OSError, stopped: bool, target: str, out: Path) -> str:
    """The one line a refused write becomes: the file, the OS error, what is kept, what next.
    `stopped` tells whether the run was cut short (else every repetition had finished and only
    events were lost)."""
    head = f"cannot write {error.filename}: {_os_error(error)}"
    if not stopped:
        return f"{head}; the run finished and its results are complete, but events are missing"
    return (
        f"{head}; the run stopped, the reports written so far are intact; once there is room, "
        f"finish it with: asynceval run {shlex.quote(target)} --resume {shlex.quote(str(out))}"
    )


def stdout_failure_line(error: OSError, out: Path) -> str:
    """The one line for a standard output that refused the progress display or the summary.
    The run itself went on (its files are the record); stdout is silenced so that Python's own
    flush at exit does not add an "Exception ignored" report of its own."""
    with contextlib.suppress(OSError, ValueError):  # no fd to replace: nothing buffered either
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return (
        f"cannot write standard output: {_os_error(error)}; the run went on without it: "
        f"results in {out / 'results.jsonl'}, events in {out / 'events.jsonl'}"
    )


def _os_error(exc: OSError) -> str:
    return f"[Errno {exc.errno}] {exc.strerror}" if exc.errno is not None else str(exc)


def is_header(record: Mapping[str, Any]) -> bool:
    """Whether a results file's record is a run's header line."""
    return record.get("type") == "header"


def is_report(record: Mapping[str, Any]) -> bool:
    """Whether a results file's record is a repetition's report (an event line is not)."""
    return "task_id" in record and "event" not in record and not is_header(record)


def events_file_error(path: Path) -> CLIError | None:
    """The one-line error for an events file given where a results file belongs, judged by its
    first line (an event line, not a header or a report); None for anything else."""
    try:
        with path.open("rb") as file:
            first = json.loads(file.readline(1 << 20))
    except (OSError, ValueError):
        return None
    if isinstance(first, dict) and "event" in first and not is_report(first):
        return CLIError(_events_file(path))
    return None


def _events_file(path: Path) -> str:
    return (
        f"{path}: an events file, not a results file (asynceval logs check reads it; "
        "report, compare and view read a run's results.jsonl)"
    )


def check_results(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """A CLIError (one line) unless the records read from `path` are a results file's: at least
    one run header or report. An events file is named as one, with the command that reads it."""
    if any(is_header(record) or is_report(record) for record in records):
        return
    if any("event" in record for record in records):
        raise CLIError(_events_file(path))
    raise CLIError(f"{path}: not an asynceval results file (no run header and no report line)")
