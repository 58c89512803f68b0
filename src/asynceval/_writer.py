"""The writer thread: one daemon thread that appends to the files a process writes as it runs.

Results files hand it bytes; it writes whatever has queued up in one go per file, flushes each
file once per batch, then tells each caller its bytes are on disk. So writers waiting at the same
time share one write and one flush (group commit), the event loop never blocks on the disk, and
the order of submission is the order on disk. At interpreter exit, whatever was handed over is
written before the process ends. `AppendOnlyFile` is the kind of file for records that must stay
whole lines when the disk fills up.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import os
import queue
import threading
from collections.abc import Callable
from os import PathLike
from typing import Any, Protocol

Done = Callable[[BaseException | None], None]


class Appendable(Protocol):
    """What the writer thread appends to: a binary file (`IO[bytes]`) or an AppendOnlyFile."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


class AppendOnlyFile:
    """A file that grows by whole writes only: each `write` lands entirely or not at all.

    For files whose every line must stay readable when the disk fills up (results, events). A
    write the OS refuses part-way (ENOSPC, EFBIG past RLIMIT_FSIZE, EIO) is cut back to where it
    began, so the file still ends with the last whole write. After one failure the file takes
    nothing more: every later write raises that first error again (a new instance each time),
    because a line after a gap, or after a piece the cut back could not remove, would be worse
    than stopping. Errors are OSErrors naming the file (`filename`). Unbuffered: a write that
    returns is in the kernel, so `flush` has nothing to do. Thread-safe.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.error: OSError | None = None
        self._lock = threading.RLock()
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            raise _naming(exc, self.path) from None

    def write(self, data: bytes, /) -> int:
        """Append all of `data`, or raise an OSError and leave the file as it was."""
        with self._lock:
            if self.error is not None:  # a fresh instance: re-raising one would grow its traceback
                raise OSError(self.error.errno, self.error.strerror, self.path)
            if self._fd < 0:
                raise ValueError(f"{self.path}: write to a closed file")
            done = 0
            try:
                done = os.write(self._fd, data)  # one system call in the common case
                while done < len(data):
                    written = os.write(self._fd, memoryview(data)[done:])
                    if written == 0:  # "no room" said without an error
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += written
            except OSError as exc:
                self.error = _naming(exc, self.path)
                if done:
                    # The piece written is the file's last `done` bytes (appends by this
                    # process hold the lock). A disk that fails even this keeps the piece; the
                    # sticky error then keeps any line from being glued to it, and a resume
                    # ends it first.
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, os.fstat(self._fd).st_size - done)
                raise self.error from None
            return done

    def append(self, data: bytes) -> int:
        """`write(data)`, returning the offset in the file where `data` begins (exact even when
        other processes append to the same file: it is where this write landed)."""
        with self._lock:
            self.write(data)  # the lock is reentrant: no other write of ours comes between
            return os.lseek(self._fd, 0, os.SEEK_CUR) - len(data)

    def flush(self) -> None:
        """Nothing to do (see the class docstring); here so the file can stand in for IO."""

    def close(self) -> None:
        """Close the file; closing twice is harmless."""
        with self._lock:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def _naming(exc: OSError, path: str) -> OSError:
    """`exc` as an OSError of the same errno whose `filename` is `path`."""
    if exc.filename is not None:
        return exc
    return OSError(exc.errno, exc.strerror or str(exc), path)


class _Job:
    __slots__ = ("data", "done", "file", "func")

    def __init__(
        self,
        file: Appendable | None,
        data: bytes,
        func: Callable[[], Any] | None,
        done: Done | None,
    ) -> None:
        self.file = file
        self.data = data
        self.func = func
        self.done = done


class Writer:
    """Appends to files from one daemon thread, started on first use (see the module docstring)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0

    def submit(self, file: Appendable, data: bytes, done: Done | None = None) -> None:
        """Append `data` to `file` soon; `done(None)` (or `done(error)`) in the writer thread
        once it is flushed. Never blocks."""
        self._put(_Job(file, data, None, done))

    def call(self, func: Callable[[], Any], done: Done | None = None) -> None:
        """Run `func` in the writer thread, in order with the writes (opening, closing files)."""
        self._put(_Job(None, b"", func, done))

    async def write(self, file: Appendable, data: bytes) -> None:
        """Append `data` to `file` and return once it is flushed (errors are raised here)."""
        await self._wait(lambda done: self.submit(file, data, done))

    async def run(self, func: Callable[[], Any]) -> Any:
        """`func()` in the writer thread, after everything submitted before it."""
        result: list[Any] = []
        await self._wait(lambda done: self.call(lambda: result.append(func()), done))
        return result[0]

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (blocking) until everything handed over so far is written; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    async def _wait(self, start: Callable[[Done], None]) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

        def done(error: BaseException | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has ended: nobody waits any more
                loop.call_soon_threadsafe(settle, error)

        start(done)
        await future

    def _put(self, job: _Job) -> None:
        with self._lock:
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="asynceval writer", daemon=True
                )
                self._thread.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            batch = [self._jobs.get()]
            while True:
                try:
                    batch.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            self._run_batch(batch)
            with self._idle:
                self._pending -= len(batch)
                if self._pending == 0:
                    self._idle.notify_all()

    def _run_batch(self, batch: list[_Job]) -> None:
        """Writes in order, grouped per file between calls; one flush per file; then `done`s."""
        errors: dict[int, BaseException | None] = {}
        group: list[_Job] = []
        for job in batch:
            if job.func is None:
                group.append(job)
                continue
            self._write_group(group, errors)
            group = []
            try:
                job.func()
                errors[id(job)] = None
            except BaseException as exc:  # handed to the waiting caller
                errors[id(job)] = exc
        self._write_group(group, errors)
        for job in batch:
            if job.done is not None:
                job.done(errors.get(id(job)))

    @staticmethod
    def _write_group(group: list[_Job], errors: dict[int, BaseException | None]) -> None:
        by_file: dict[int, list[_Job]] = {}
        for job in group:
            by_file.setdefault(id(job.file), []).append(job)
        for jobs in by_file.values():
            file = jobs[0].file
            assert file is not None
            try:
                file.write(b"".join(job.data for job in jobs))
                file.flush()
                error: BaseException | None = None
            except BaseException as exc:
                error = exc
            for job in jobs:
                errors[id(job)] = error


_writer: Writer | None = None
_writer_lock = threading.Lock()


def writer() -> Writer:
    """The process's writer thread (one for every runtime: files are process-wide)."""
    global _writer
    if _writer is None:
        with _writer_lock:
            if _writer is None:
                _writer = Writer()
                atexit.register(_writer.flush, 10.0)
    return _writer
