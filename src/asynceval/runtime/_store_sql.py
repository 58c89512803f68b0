"""The SQL of a `Store` (`asynceval.runtime._store`): its file's schema and settings, one
transaction of writes, eviction of the least recently used entries, and pruning.

Functions of a connection, no state: the store decides which thread runs them and when (its
writer thread, `flush`, `prune`). Every transaction is `BEGIN IMMEDIATE` ... `COMMIT`, rolled back
whole on any error, so a process killed in one leaves the last committed state.

An entry is a row: its key (32 bytes), the URL it answers (without credentials), status, content
type, the body's length and BLAKE2b digest, when it was stored and last used, how often it was
used, the segment of the run that wrote it (the journal), and the body as received.
With `max_bytes`, the store takes at most that many bytes on disk: its file, SQLite's log
(`-wal`) and its index (`-shm`) together, within a tenth for bounds of a megabyte or more (below
`_SMALLEST_DISK_BOUND`, SQLite's own few pages dominate, and only the bodies are bounded). The
log is kept to a twentieth of the bound (checkpointed and cut back as it passes it, `wal_limit`);
the file holds the rest: a write that passes either the bodies' bound or the file's share of the
disk evicts the least recently used entries down to nine tenths of it (one scan of the table, so
once per tenth of the bound written) and gives the freed pages back to the disk. The bodies'
running total is kept in the file, in the same transactions, so every process sharing the file
sees the same one; the file's size is SQLite's own count of its pages in use. A store without a
bound keeps no total (its writes look up nothing): each of its transactions drops the one in the
file, which the next bounded write counts again from the table; `stats` always counts the table.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Any

FORMAT = 2
"""The store's format (the one-file-per-entry cache before it was 1)."""
BUSY_TIMEOUT_S = 30.0
"""How long a write waits for another connection's write transaction before it fails."""
PAGE_SIZE = 8192
"""SQLite's page for new files: small answers pack with little slack (measured)."""
EVICT_TO = 0.9
"""An eviction goes down to this share of `max_bytes`, so it happens once per tenth written."""
_WAL_LIMIT = 16 * 1024 * 1024  # the -wal file is cut back to this after a checkpoint (above
# the ~8 MB of an automatic checkpoint: a -wal file cut at every checkpoint costs a third more CPU)
_SHM_BYTES = 32 * 1024  # SQLite's -shm file beside a store in WAL mode (its smallest, and usual)
_SMALLEST_DISK_BOUND = 1024 * 1024
"""Bounds below this bound the bodies only: an SQLite file of a few entries is tens of KB."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    key BLOB NOT NULL UNIQUE,
    url TEXT NOT NULL,
    status INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    length INTEGER NOT NULL,
    digest BLOB NOT NULL,
    stored_at INTEGER NOT NULL,
    used_at INTEGER NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0,
    segment INTEGER,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS segments (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
"""
_PUT = (
    "INSERT OR REPLACE INTO entries (key, url, status, content_type, length, digest, stored_at,"
    " used_at, segment, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_LENGTHS = "SELECT total(length) FROM entries WHERE key IN "
_CHUNK = 64  # keys per look-up of the lengths a transaction's rows replace
_NO_TOTAL = "DELETE FROM meta WHERE name = 'bytes'"
GET = "SELECT url, status, content_type, length, digest, segment, body FROM entries WHERE key = ?"


def digest(body: bytes) -> bytes:
    """The digest kept with a body and checked before it is served."""
    return hashlib.blake2b(body, digest_size=16).digest()


def wal_limit(max_bytes: int | None) -> int:
    """The bytes SQLite's log may keep on disk after a checkpoint, for a store bounded at
    `max_bytes` (None: no bound)."""
    if max_bytes is None or max_bytes < _SMALLEST_DISK_BOUND:
        return _WAL_LIMIT
    return max(min(max_bytes // 20, _WAL_LIMIT), 4 * PAGE_SIZE)


def _file_bound(max_bytes: int) -> int | None:
    """The share of `max_bytes` the store's file may take (None: too small a bound to keep)."""
    if max_bytes < _SMALLEST_DISK_BOUND:
        return None
    return max_bytes - wal_limit(max_bytes) - _SHM_BYTES


def open_connection(path: Path, max_bytes: int | None = None) -> sqlite3.Connection:
    """A connection to the store file `path` in WAL mode, its folder, file and schema made if
    missing, its log kept within `wal_limit(max_bytes)`; raises sqlite3.DatabaseError for a file
    of another format."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        connection.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # new files only
        connection.execute("PRAGMA auto_vacuum = INCREMENTAL")  # likewise: prune gives back
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")  # a commit survives kill -9
        limit = wal_limit(max_bytes)
        connection.execute(f"PRAGMA journal_size_limit = {limit}")
        if limit < _WAL_LIMIT:  # a bounded store: checkpoint as the log reaches its share
            connection.execute(f"PRAGMA wal_autocheckpoint = {max(limit // PAGE_SIZE, 4)}")
        if not _has_schema(connection):
            connection.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        connection.execute(statement)
                connection.execute(
                    "INSERT OR IGNORE INTO meta (name, value) VALUES ('format', ?)", (FORMAT,)
                )
                connection.execute("COMMIT")
            except BaseException:
                _rollback(connection)
                raise
        found = connection.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
        if found is None or found[0] != FORMAT:
            raise sqlite3.DatabaseError(f"not a store of format {FORMAT}: {found}")
    except BaseException:
        connection.close()
        raise
    return connection


def write(
    connection: sqlite3.Connection,
    rows: list[tuple[Any, ...]],
    touched: dict[bytes, tuple[int, int]],
    max_bytes: int | None,
) -> None:
    """One transaction: the queued `rows` (key, url, status, content type, body, segment, time),
    the noted uses, and, past `max_bytes`, the eviction; rolled back whole on any error."""
    connection.execute("BEGIN IMMEDIATE")
    evicted = False
    try:
        added = 0
        if rows:
            bounded = max_bytes is not None
            replaced = 0  # bytes of the entries these rows replace (a bounded store's)
            if bounded:
                for start in range(0, len(rows), _CHUNK):
                    keys = [row[0] for row in rows[start : start + _CHUNK]]
                    found = connection.execute(_lengths_sql(len(keys)), keys).fetchone()
                    replaced += int(found[0])
            prepared = [
                (key, url, status, ctype, len(body), digest(body), at, at, segment, body)
                for key, url, status, ctype, body, segment, at in rows
            ]
            connection.executemany(_PUT, prepared)
            if bounded:
                added = sum(len(row[4]) for row in rows) - replaced
            else:  # no total kept (see the module): the next bounded write counts it
                connection.execute(_NO_TOTAL)
        if touched:
            connection.executemany(
                "UPDATE entries SET used_at = max(used_at, ?), hits = hits + ? WHERE key = ?",
                [(at, uses, key) for key, (uses, at) in touched.items()],
            )
        if added:
            total = _add_total(connection, added)
            if max_bytes is not None and total > max_bytes:
                evict(connection, total, int(max_bytes * EVICT_TO))
                total, evicted = _total(connection), True
            file_bound = None if max_bytes is None else _file_bound(max_bytes)
            if file_bound is not None:
                used = _file_bytes(connection)
                if used > file_bound and total > 0:
                    # Pages per byte of body (the rows' other columns, the key's index, the
                    # pages' slack), as this file has them: evict bodies in that proportion.
                    evict(connection, total, int(total * file_bound * EVICT_TO / used))
                    evicted = True
        connection.execute("COMMIT")
    except BaseException:
        _rollback(connection)
        raise
    if evicted and _file_bound(max_bytes or 0) is not None:
        with contextlib.suppress(sqlite3.Error):
            give_back(connection)


def give_back(connection: sqlite3.Connection) -> None:
    """Outside a transaction: give the file's free pages back to the disk, and cut SQLite's log
    back (an eviction rewrote many pages; when a reader holds the log, the next checkpoint
    does). `executescript`, as `execute` steps `incremental_vacuum` once: one page."""
    connection.executescript("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")


def _add_total(connection: sqlite3.Connection, added: int) -> int:
    found = connection.execute("SELECT value FROM meta WHERE name = 'bytes'").fetchone()
    if found is None:  # first counted: the whole table (these rows included)
        total = int(connection.execute("SELECT total(length) FROM entries").fetchone()[0])
    else:
        total = int(found[0]) + added
    connection.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('bytes', ?)", (total,))
    return total


def _total(connection: sqlite3.Connection) -> int:
    found = connection.execute("SELECT value FROM meta WHERE name = 'bytes'").fetchone()
    return 0 if found is None else int(found[0])


def _file_bytes(connection: sqlite3.Connection) -> int:
    """The bytes of the file's pages in use (its free pages are given back by a vacuum)."""
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    size = connection.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def evict(connection: sqlite3.Connection, total: int, target: int) -> tuple[int, int]:
    """Delete the least recently used entries until at most `target` bytes are left."""
    victims: list[tuple[int]] = []
    freed = 0
    for rowid, length in connection.execute("SELECT id, length FROM entries ORDER BY used_at, id"):
        if total - freed <= target:
            break
        victims.append((rowid,))
        freed += length
    connection.executemany("DELETE FROM entries WHERE id = ?", victims)
    connection.execute(
        "INSERT OR REPLACE INTO meta (name, value) VALUES ('bytes', ?)", (total - freed,)
    )
    return len(victims), freed


def prune(
    connection: sqlite3.Connection,
    *,
    max_bytes: int | None = None,
    older_than_s: float | None = None,
    everything: bool = False,
) -> tuple[int, int]:
    """Delete every entry (`everything`), those last used more than `older_than_s` ago, and
    then the least recently used beyond `max_bytes` (of bodies, and on disk as a bounded store
    counts it: see the module); give the freed pages back to the disk. Returns (entries, bytes
    of bodies) deleted."""
    removed = freed = 0
    connection.execute("BEGIN IMMEDIATE")
    try:
        if everything or older_than_s is not None:
            where: str = ""
            args: tuple[float, ...] = ()
            if not everything:
                where, args = (
                    " WHERE used_at < ?",
                    (now_ms() - int((older_than_s or 0) * 1000),),
                )
            count, size = connection.execute(
                f"SELECT count(*), total(length) FROM entries{where}", args
            ).fetchone()
            connection.execute(f"DELETE FROM entries{where}", args)
            removed, freed = count, int(size)
        total = int(connection.execute("SELECT total(length) FROM entries").fetchone()[0])
        connection.execute(
            "INSERT OR REPLACE INTO meta (name, value) VALUES ('bytes', ?)", (total,)
        )
        if max_bytes is not None and total > max_bytes:
            count, size = evict(connection, total, max_bytes)
            removed, freed = removed + count, freed + size
            total -= size
        file_bound = None if max_bytes is None else _file_bound(max_bytes)
        used = _file_bytes(connection)
        if file_bound is not None and used > file_bound and total > 0:
            count, size = evict(connection, total, int(total * file_bound / used))
            removed, freed = removed + count, freed + size
        connection.execute("COMMIT")
    except BaseException:
        _rollback(connection)
        raise
    give_back(connection)
    return removed, freed


def mark_checked(connection: sqlite3.Connection) -> None:
    """Commit a transaction of one row: proves the file can be written now."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(
            "INSERT OR REPLACE INTO meta (name, value) VALUES ('checked_at', ?)", (now_ms(),)
        )
        connection.execute("COMMIT")
    except BaseException:
        _rollback(connection)
        raise


def segment_id(connection: sqlite3.Connection, name: str) -> int:
    """The number of the segment called `name` (a new one for a name not seen)."""
    connection.execute("INSERT OR IGNORE INTO segments (name) VALUES (?)", (name,))
    found = connection.execute("SELECT id FROM segments WHERE name = ?", (name,)).fetchone()
    return int(found[0])


@functools.lru_cache(maxsize=_CHUNK)
def _lengths_sql(keys: int) -> str:
    return f"{_LENGTHS}({', '.join(['?'] * keys)})"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def as_os_error(exc: BaseException, path: Path) -> OSError:
    """An SQLite or disk error as one OSError naming the store."""
    message = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    return OSError(f"{path}: {message}")


def _has_schema(connection: sqlite3.Connection) -> bool:
    found = connection.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN"
        " ('entries', 'meta', 'segments')"
    ).fetchone()
    return bool(found[0] == 3)


def _rollback(connection: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        connection.execute("ROLLBACK")
