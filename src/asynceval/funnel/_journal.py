"""CallJournal: every successful LLM call of a run, kept in its run directory for resume.

The journal is a store of the same kind as the model-call cache (`asynceval.runtime.Store`: one
SQLite file, WAL, verified reads), keyed exactly as the cache keys a call: the request as sent
(with what scopes its answer), the repetition it is made in (task_id, repeat_idx) and how many
identical requests that repetition made before it. Each entry records the segment of the run
(one process's part of it: the first run, then each resume) that wrote it.

A call made while a journal is bound (`journal_scope`) is first looked up there: an answer that
an EARLIER segment wrote is replayed (a `journal_hit` event, `usage.journal_hits`, counted as an
LLM call with the stored answer's tokens, no slot, nothing sent); then the model-call cache is
asked; then the provider. So a repetition that was interrupted replays the calls it had finished
and goes on live from the first it had not, and a repetition retried within one segment goes
live, as without a journal. Every successful call (a cache hit too) is written to the journal.

A call returns to the agent once its answer is committed (with `durable`, the default): the
write joins the next group commit on the store's thread, after the slot was released, so it
holds no slot and the calls waiting for one do not wait for it; an agent killed at any point
re-sends nothing it had been answered. Committed means in SQLite's WAL file (synchronous=NORMAL):
it survives the process being killed, not the machine losing power. With `durable=False` the
call returns as soon as the answer is queued, and an answer lost with a process killed in the
few milliseconds before its commit is asked again on resume (paid twice, never wrong). Keys of
earlier segments
are read once when the journal opens and kept in memory (8 bytes each), so a call that has
nothing to replay costs no disk read; a fresh run's journal costs no read at all.
"""

from __future__ import annotations

import array
import asyncio
import bisect
import os
from contextvars import ContextVar
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio

from .._scoped import Scoped
from ..runtime import CachedAnswer, Store, submit

FILE_NAME = "journal.sqlite"
"""The journal's file in a run directory."""


class CallJournal:
    """The call journal at `path` (a file, e.g. `RUN_DIR / "journal.sqlite"`), written by the
    segment `segment` (a name unique to this process's part of the run, e.g. its run id).
    `durable`: a call returns once its answer is committed (the default; see the module), else
    as soon as it is queued.

    `open()` / `close()` (sync, off the event loop) or `async with` (which runs them on the
    store's threads); bind it to the calls of a context with `journal_scope(journal)`.
    Counters: `hits` (calls replayed), `stored` and `store_failures` (answers the disk refused).
    """

    def __init__(self, path: str | os.PathLike[str], segment: str, *, durable: bool = True) -> None:
        self.path = Path(path)
        self.segment = segment
        self.durable = durable
        self.hits = 0
        self.stored = 0
        self.store_failures = 0
        self.db = Store(self.path)
        self.db.on_commit = self._committed
        self._number: int | None = None
        self._earlier: array.array[int] = array.array("q")

    def __repr__(self) -> str:
        return f"CallJournal({str(self.path)!r}, segment={self.segment!r})"

    def open(self) -> Self:
        """Make the file if needed, number this segment, and read the keys that earlier
        segments wrote (what this one may replay); raises OSError (one line) if the journal
        cannot be written."""
        self.db.check()
        try:
            self._number = self.db.segment(self.segment)
            earlier = sorted(_prefix(key) for key in self.db.keys(not_segment=self._number))
        except Exception as exc:  # sqlite3.Error: a damaged file
            raise OSError(f"{self.path}: {exc}") from exc
        self._earlier = array.array("q", earlier)
        return self

    def close(self) -> None:
        """Commit every queued answer and close the file."""
        self.db.close()

    async def aopen(self) -> Self:
        """`open()` on the store's threads."""
        await asyncio.wrap_future(submit(self.open))
        return self

    async def aclose(self) -> None:
        """`close()` on the store's threads."""
        await asyncio.wrap_future(submit(self.close))

    async def __aenter__(self) -> Self:
        return await self.aopen()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Shielded: a run cancelled (Ctrl-C, SIGTERM) still commits what its calls were answered.
        with anyio.CancelScope(shield=True):
            await self.aclose()

    @property
    def replayable(self) -> int:
        """How many answers earlier segments left to replay (read at `open`)."""
        return len(self._earlier)

    def may_replay(self, key: bytes) -> bool:
        """Whether an earlier segment may have written `key` (no false negatives)."""
        earlier = self._earlier
        if not earlier:
            return False
        prefix = _prefix(key)
        at = bisect.bisect_left(earlier, prefix)
        return at < len(earlier) and earlier[at] == prefix

    async def load(self, key: bytes, url: str) -> CachedAnswer | None:
        """The answer an earlier segment wrote for `key`, if a whole one is there."""
        entry = await asyncio.wrap_future(submit(self.db.get, key, url))
        if entry is None or entry.segment == self._number:
            return None  # this segment's own answer: a retried repetition goes live
        return CachedAnswer(entry.status_code, entry.content_type, entry.content)

    def keep(
        self, key: bytes, url: str, answer: CachedAnswer, *, wait: bool | None = None
    ) -> asyncio.Future[None] | None:
        """Queue `answer` for `key`. With `wait` (default: `durable`), on an event loop: a future
        of that loop, done once the answer is committed (see the module); else None."""
        if self._number is None:
            raise RuntimeError(f"{self!r} is not open")
        row = (key, url, answer.status_code, answer.content_type, answer.content)
        if self.durable if wait is None else wait:
            return self.db.put_async(*row, segment=self._number)
        self.db.put_nowait(*row, segment=self._number)
        return None

    def _committed(self, count: int, error: OSError | None) -> None:
        # On the store's writing thread, once per transaction.
        if error is None:
            self.stored += count
        else:
            self.store_failures += count


def _prefix(key: bytes) -> int:
    return int.from_bytes(key[:8], "big", signed=True)


_current: ContextVar[CallJournal | None] = ContextVar("asynceval_journal", default=None)


def journal_scope(journal: CallJournal | None) -> Scoped[CallJournal | None]:
    """Make `journal` the journal of every LLM call made in this `with` block (worker threads
    that copy the context included); None: no journal."""
    return Scoped(_current, journal)


def current_journal() -> CallJournal | None:
    """The journal of the innermost `journal_scope` around this code, if any."""
    return _current.get()
