"""Store: answers kept in one SQLite file, for the model-call cache and the call journal.

One file (`cache.sqlite` in LLM_CACHE_DIR, `journal.sqlite` in a run directory) in SQLite's WAL
mode: readers never wait for the writer, every write is one transaction, and a process killed in
the middle of one (kill -9, a full disk) leaves the last committed state, which the next opening
recovers from SQLite's own `-wal` file. Several threads, processes and runs may use one file at
once (each waits up to BUSY_TIMEOUT_S for the write lock); not over a network filesystem, where
SQLite's WAL mode cannot work (its readers and writer share memory).

A read checks an entry's length and digest before it serves the body: a damaged entry (a torn
page, a disk error, a row edited by hand) is a miss, and the next store of that key replaces it.
The rows, the bound (`max_bytes`) and every transaction are `asynceval.runtime._store_sql`'s;
the shared pool and the settling of writers' futures, `asynceval.runtime._store_pool`'s.

Writes are group commits on the store's own writer thread (one per store, started by the first
write and ended after a few idle seconds or by `close`): `put` queues the entry and wakes the
writer if it is idle; the writer writes everything queued by then in one transaction, and while
answers come fast (`LINGER_WORTH` more in `LINGER_S`) it lingers `LINGER_S` first so that each
transaction carries many (a thousand answers a second cost ~50 transactions, not a thousand). A
commit settles its writers at once: `put`'s futures in the writer thread, `put_async`'s with one
callback per event loop and transaction (not one wake-up of the loop per answer).

A hit's last use is noted in memory and written with the next flush (at the latest a second
later, or at `close` and at the process's exit): a hit is never a write transaction of its own,
and a process killed loses at most its last second of those.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, NamedTuple

from ._store_pool import Waiter, renew_pool, settle_all
from ._store_pool import submit as submit
from ._store_sql import (
    GET,
    as_os_error,
    digest,
    mark_checked,
    now_ms,
    open_connection,
    prune,
    segment_id,
    write,
)

TOUCH_FLUSH_S = 1.0
TOUCH_FLUSH_COUNT = 512
LINGER_S = 0.005
"""While answers keep coming, the writer waits this long before a transaction, to carry more."""
LINGER_WORTH = 3.0
"""The writer lingers only if, at the rate answers came in lately, that brings this many more."""
_WRITER_IDLE_S = 5.0  # a writer thread with nothing to write for this long ends


class Entry(NamedTuple):
    """A verified entry: what the provider answered, and the segment that stored it."""

    url: str
    status_code: int
    content_type: str
    content: bytes
    segment: int | None


class Stats(NamedTuple):
    """What a store holds (`Store.stats`)."""

    entries: int
    bytes: int  # bodies, what `max_bytes` bounds
    disk_bytes: int  # the file and SQLite's -wal and -shm beside it
    oldest: float | None  # when stored, seconds since the epoch (kept in milliseconds)
    newest: float | None
    hits: int  # answers served from entries that are still there
    last_used: float | None


class Store:
    """Answers in the SQLite file `path` (see the module); the file and its folder are made by the
    first write (or `check`), never by a read."""

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending: list[tuple[tuple[Any, ...], Waiter]] = []
        self._touched: dict[bytes, tuple[int, int]] = {}  # key: (uses, last use in ms)
        self._flushing = False  # a flush is under way (the writer's or `flush`'s)
        self._requested = False  # the writer is asked to flush
        self._writer: threading.Thread | None = None
        self._last_flush = time.monotonic()
        self._taken_at = 0.0  # when the last entries were taken to be written (monotonic)
        self._rate = 0.0  # entries a second queued, as the last transaction found them
        self.on_commit: Callable[[int, OSError | None], None] | None = None
        """Called on the writing thread after each transaction of entries: how many, and the
        error that refused them (None: committed)."""
        _stores.add(self)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, max_bytes={self.max_bytes})"

    def __del__(self) -> None:
        # A store dropped (with its runtime) writes the uses it noted and closes its file.
        with contextlib.suppress(Exception):
            self.close()

    # connections -----------------------------------------------------------------------------

    def _connection(self, create: bool) -> sqlite3.Connection | None:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            if not create and not self.path.exists():
                return None
            connection = open_connection(self.path, self.max_bytes)
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def close(self) -> None:
        """Write what is queued (uses, entries), then close every connection; a later use opens
        new ones."""
        self.flush()
        with self._lock:
            connections, self._connections = self._connections, []
            self._local = threading.local()
            self._writer = None  # the writer thread ends (a later write starts another)
            self._wake.notify_all()
        for connection in connections:
            with contextlib.suppress(sqlite3.Error):
                connection.close()

    # reads -----------------------------------------------------------------------------------

    def get(self, key: bytes, url: str | None = None) -> Entry | None:
        """The entry of `key` if there is a whole one (for `url`, when given); else None. Counts
        as a use of the entry."""
        try:
            connection = self._connection(create=False)
            if connection is None:
                return None
            row = connection.execute(GET, (key,)).fetchone()
        except (sqlite3.Error, OSError):
            return None  # a store that cannot be read is a miss, as a missing entry is
        if row is None:
            return None
        stored_url, status, content_type, length, stored_digest, segment, body = row
        if not (
            isinstance(body, bytes)
            and len(body) == length
            and digest(body) == stored_digest
            and isinstance(status, int)
            and isinstance(content_type, str)
            and (url is None or stored_url == url)
        ):
            return None  # damaged (or another request's): a miss, replaced by the next store
        self._touch(key)
        return Entry(stored_url, status, content_type, body, segment)

    def _touch(self, key: bytes) -> None:
        now = now_ms()
        with self._lock:
            uses, _ = self._touched.get(key, (0, 0))
            self._touched[key] = (uses + 1, now)
            if not (self._flushing or self._requested) and (
                len(self._touched) >= TOUCH_FLUSH_COUNT
                or time.monotonic() - self._last_flush > TOUCH_FLUSH_S
            ):
                self._request()

    def keys(self, *, not_segment: int | None = None) -> list[bytes]:
        """Every entry's key (with `not_segment`: those another segment wrote)."""
        connection = self._connection(create=False)
        if connection is None:
            return []
        if not_segment is None:
            rows = connection.execute("SELECT key FROM entries")
        else:
            rows = connection.execute(
                "SELECT key FROM entries WHERE segment IS NULL OR segment != ?", (not_segment,)
            )
        return [key for (key,) in rows]

    def stats(self) -> Stats:
        """Entries, bytes, disk use, oldest and newest, hits (after writing the queued uses)."""
        self.flush()
        connection = self._connection(create=False)
        if connection is None:
            return Stats(0, 0, 0, None, None, 0, None)
        row = connection.execute(
            "SELECT count(*), total(length), min(stored_at), max(stored_at), total(hits),"
            " max(used_at) FROM entries"
        ).fetchone()
        count, size, oldest, newest, hits, last_used = row
        seconds = [None if ms is None else ms / 1000 for ms in (oldest, newest, last_used)]
        return Stats(
            count, int(size), self.disk_bytes(), seconds[0], seconds[1], int(hits), seconds[2]
        )

    def disk_bytes(self) -> int:
        """The bytes the store takes on disk: its file, and SQLite's -wal and -shm beside it."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                total += os.stat(f"{self.path}{suffix}").st_size
        return total

    # writes ----------------------------------------------------------------------------------

    def put(
        self,
        key: bytes,
        url: str,
        status_code: int,
        content_type: str,
        content: bytes,
        *,
        segment: int | None = None,
    ) -> Future[None]:
        """Queue an entry (replacing any of `key`); the future is done once it is committed, or
        holds the OSError of a store that refused it."""
        future: Future[None] = Future()
        self._queue((key, url, status_code, content_type, content, segment, now_ms()), future)
        return future

    def put_async(
        self,
        key: bytes,
        url: str,
        status_code: int,
        content_type: str,
        content: bytes,
        *,
        segment: int | None = None,
    ) -> asyncio.Future[None]:
        """`put` from a coroutine: the future is the running loop's, settled with the others of
        its transaction by one callback on that loop."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue((key, url, status_code, content_type, content, segment, now_ms()), future)
        return future

    def put_nowait(
        self,
        key: bytes,
        url: str,
        status_code: int,
        content_type: str,
        content: bytes,
        *,
        segment: int | None = None,
    ) -> None:
        """`put` that nobody waits for (`on_commit` still counts it)."""
        self._queue((key, url, status_code, content_type, content, segment, now_ms()), None)

    def _queue(self, row: tuple[Any, ...], waiter: Waiter) -> None:
        with self._lock:
            self._pending.append((row, waiter))
            if not (self._flushing or self._requested):
                self._request()

    def _request(self) -> None:
        """Ask the writer thread to flush (started if there is none); under the lock."""
        self._requested = True
        if self._writer is None:
            self._writer = threading.Thread(
                target=self._serve, name="asynceval-store-writer", daemon=True
            )
            self._writer.start()
        else:
            self._wake.notify()

    def _serve(self) -> None:
        """The writer thread: flushes when asked, until idle for a while or the store closes."""
        me = threading.current_thread()
        while True:
            with self._lock:
                while True:
                    if self._writer is not me:
                        return  # the store closed (another writer may have the requests)
                    if self._requested:
                        break
                    idle = not self._wake.wait(_WRITER_IDLE_S)
                    if idle and not self._requested and self._writer is me:
                        self._writer = None
                        return
                self._requested = False
                if self._flushing:
                    continue  # a `flush` under way writes what is queued
                self._flushing = True
            if self._rate * LINGER_S >= LINGER_WORTH:
                time.sleep(LINGER_S)  # answers are coming: let this transaction carry more
            with contextlib.suppress(Exception):  # a failed write is the writers' error
                self._flush()

    def flush(self) -> None:
        """Write what is queued now, in this thread (waiting for a flush already under way)."""
        while True:
            with self._lock:
                idle = not self._flushing
                if idle and (self._pending or self._touched):
                    self._flushing = True
                    break
            if idle:
                return
            time.sleep(0.002)  # another thread's flush: its transaction takes milliseconds
        self._flush()

    def _flush(self) -> None:
        while True:
            with self._lock:
                batch, self._pending = self._pending, []
                touched, self._touched = self._touched, {}
                now = self._last_flush = time.monotonic()
                if not batch and not touched:
                    self._flushing = False
                    return
                if batch:
                    self._rate = len(batch) / max(now - self._taken_at, 0.001)
                    self._taken_at = now
            error: OSError | None = None
            try:
                self._write([row for row, _ in batch], touched)
            except (sqlite3.Error, OSError) as exc:
                error = as_os_error(exc, self.path)
            except BaseException:
                with self._lock:
                    self._flushing = False
                raise
            if batch:
                if self.on_commit is not None:  # counted before anyone waiting goes on
                    with contextlib.suppress(Exception):
                        self.on_commit(len(batch), error)
                settle_all(batch, error)

    def _write(self, rows: list[tuple[Any, ...]], touched: dict[bytes, tuple[int, int]]) -> None:
        connection = self._connection(create=True)
        assert connection is not None
        write(connection, rows, touched, self.max_bytes)

    def prune(
        self,
        *,
        max_bytes: int | None = None,
        older_than_s: float | None = None,
        everything: bool = False,
    ) -> tuple[int, int]:
        """Delete every entry (`everything`), those last used more than `older_than_s` ago, and
        then the least recently used beyond `max_bytes`; give the freed pages back to the disk.
        Returns (entries, bytes) deleted."""
        self.flush()
        connection = self._connection(create=False)
        if connection is None:
            return 0, 0
        return prune(
            connection, max_bytes=max_bytes, older_than_s=older_than_s, everything=everything
        )

    def check(self) -> None:
        """Raise OSError (one line) unless an entry could be written now: the folder and file
        are made, and a transaction is committed."""
        try:
            connection = self._connection(create=True)
            assert connection is not None
            mark_checked(connection)
        except (sqlite3.Error, OSError) as exc:
            raise as_os_error(exc, self.path) from exc

    def segment(self, name: str) -> int:
        """The number of the segment called `name` (a new one for a name not seen)."""
        connection = self._connection(create=True)
        assert connection is not None
        return segment_id(connection, name)


# Every store of the process, so that a forked child drops (without closing: the parent still
# uses them) the connections it inherited.
_stores: weakref.WeakSet[Store] = weakref.WeakSet()
_inherited: list[Any] = []


def _after_fork_in_child() -> None:
    renew_pool()
    for store in list(_stores):
        _inherited.append((store._local, store._connections))  # kept open: the parent's
        store._local, store._connections = threading.local(), []
        store._lock = threading.Lock()
        store._wake = threading.Condition(store._lock)
        store._pending, store._flushing, store._requested = [], False, False
        store._writer = None  # the parent's writer thread does not run here


def _close_all() -> None:
    """At exit: write every store's noted uses and close its file (SQLite folds its -wal file
    into the store and removes it)."""
    for store in list(_stores):
        with contextlib.suppress(Exception):
            store.close()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all)
