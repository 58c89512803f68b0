"""A run's names and places: its id, the files kept beside its results file, and what
identifies its task set (a resume checks them)."""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
import time
from collections.abc import Sequence
from os import PathLike
from typing import Any

from ..errors import ConfigError
from ._run_inputs import TaskSource
from .task import as_task


def new_run_id() -> str:
    """A run's id: its UTC start second and 32 random bits (sortable by time; two runs started
    in the same second differ with odds of 1 in 4 billion)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)


def journal_path(results_path: str | PathLike[str]) -> str:
    """Where the call journal of the results file at `results_path` is kept: `journal.sqlite`
    beside `results.jsonl` (a run directory), `NAME.journal.sqlite` beside any other NAME.jsonl
    (several results files in one folder keep apart)."""
    return _beside(results_path, "journal.sqlite")


def _beside(results_path: str | PathLike[str], name: str) -> str:
    folder, file = os.path.split(os.fspath(results_path))
    stem = os.path.splitext(file)[0]
    return os.path.join(folder, name if stem == "results" else f"{stem}.{name}")


def checked_run_id(run_id: str) -> str:
    """A run id given by the caller: printable, no path separators (it names a directory)."""
    if (
        not isinstance(run_id, str)
        or not run_id
        or not run_id.isprintable()
        or any(c in run_id for c in "/\\")
        or run_id in (".", "..")
    ):
        raise ConfigError(f"run_id must be a non-empty name without / or \\, got {run_id!r}")
    return run_id


def task_set_of(tasks: TaskSource | None) -> dict[str, Any] | None:
    """What identifies a task set given as a list: its size and a SHA-256 over its ids in
    order (None for a lazy source, which is not read ahead to be identified)."""
    if not isinstance(tasks, Sequence):
        return None
    digest = hashlib.sha256()
    for task in tasks:
        digest.update(as_task(task).id.encode("utf-8", "surrogatepass") + b"\0")
    return {"count": len(tasks), "ids_sha256": digest.hexdigest()}


def temporary_results() -> str:
    """A new empty file for the reports of a run given no results_path (its RunReports owns
    it and deletes it)."""
    descriptor, path = tempfile.mkstemp(prefix="asynceval-reports-", suffix=".jsonl")
    os.close(descriptor)
    return path
