"""RunLock: one writer per results file, so one run writes a run directory at a time.

The lock is `RESULTS.lock` beside the results file (`DIR/results.jsonl.lock` in a run directory),
held with an exclusive `flock` for as long as the run writes, and holding the holder's pid, host
and start time; a run that ends removes it. The operating system releases a `flock` when its
process dies, however it dies (kill -9 included), so a crashed run never leaves the directory
locked: the next run takes the lock and, finding the dead holder's note still there, says so
with a WARNING. A lock held
by a live process (this one included: two runs of one process on one file) is refused at once
with `RunLocked`, naming the holder.

Within one context the lock is re-entrant: the CLI takes it before writing anything in the
directory, and the run it starts finds it held by its own caller and goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from os import PathLike
from typing import Any

from ..errors import RunLocked

if sys.platform == "win32":  # pragma: no cover - msvcrt's byte-range lock instead of flock
    import msvcrt
else:
    import fcntl

LOCK_SUFFIX = ".lock"

# The results files this context holds the lock of (absolute paths): re-entry goes on.
_held: ContextVar[frozenset[str]] = ContextVar("asynceval_run_locks", default=frozenset())


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a run's lock, as written in the lock file."""

    pid: int | None
    host: str | None
    started_at: str | None

    def describe(self) -> str:
        where = f"pid {self.pid}" if self.pid is not None else "an unknown process"
        if self.host:
            where += f" on {self.host}"
        if self.started_at:
            where += f", started {self.started_at}"
        return where


class RunLock:
    """The lock of the results file at `results_path`; `acquire()` once, `release()` once."""

    def __init__(self, results_path: str | PathLike[str]) -> None:
        self.results_path = os.path.abspath(os.fspath(results_path))
        self.path = self.results_path + LOCK_SUFFIX
        self.taken_over: Holder | None = None
        """The holder a dead process left in the lock file, when this lock took it over."""
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise `RunLocked` naming its holder (OSError: the folder refused
        the lock file). Fast: one open and one non-blocking `flock`."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                locked = _try_lock(fd)
                if locked and not _still_named(fd, self.path):
                    # released (and its file removed) between our open and our lock: the
                    # lock we hold is on a file nobody else will open; take the new one
                    os.close(fd)
                    continue
            except BaseException:
                os.close(fd)
                raise
            break
        try:
            if not locked:
                holder = _read_holder(fd)
                raise RunLocked(
                    f"{os.path.dirname(self.results_path)} is being written by another run "
                    f"({holder.describe()}); wait for it to end, or write elsewhere",
                    pid=holder.pid,
                    host=holder.host,
                )
            left = _read_holder(fd)
            if left.pid is not None or left.host is not None:  # its holder died holding it
                self.taken_over = left
            note = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "started_at_unix": round(time.time(), 3),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(note).encode() + b"\n", 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Give the lock back and remove its file (a file left behind says its holder died)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):  # removed while held: the next run's own file
                os.unlink(self.path)
            with contextlib.suppress(OSError):  # a full disk cannot refuse a truncation to 0
                os.ftruncate(fd, 0)
            _unlock(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def hold(results_path: str | PathLike[str]) -> Iterator[RunLock | None]:
    """Hold the lock of `results_path` for the block: the RunLock taken, or None when this
    context already holds it (re-entry, e.g. a run started by the CLI that locked first)."""
    lock = RunLock(results_path)
    held = _held.get()
    if lock.results_path in held:
        yield None
        return
    lock.acquire()
    token = _held.set(held | {lock.results_path})
    try:
        yield lock
    finally:
        _held.reset(token)
        lock.release()


def holder_of(results_path: str | PathLike[str]) -> Holder | None:
    """Who holds the lock of `results_path` now, or None when no live process does."""
    path = os.path.abspath(os.fspath(results_path)) + LOCK_SUFFIX
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if _try_lock(fd, shared=True):
            _unlock(fd)
            return None
        return _read_holder(fd)
    finally:
        os.close(fd)


def _still_named(fd: int, path: str) -> bool:
    """Whether `path` still names the file open as `fd` (a released lock's file is removed)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _read_holder(fd: int) -> Holder:
    try:
        note: Any = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        note = {}
    if not isinstance(note, dict):
        note = {}
    pid, host, started = note.get("pid"), note.get("host"), note.get("started_at")
    return Holder(
        pid if type(pid) is int else None,
        host if isinstance(host, str) else None,
        started if isinstance(started, str) else None,
    )


def _try_lock(fd: int, *, shared: bool = False) -> bool:
    if sys.platform == "win32":  # pragma: no cover
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":  # pragma: no cover
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
