"""BatchJournal: what a run's provider batches are, kept before they exist (DESIGN section 16).

A batch is billed once the provider has it, and its answers can be collected for 24 hours or
more, so a run killed with batches open must find them again: the batcher tells the journal a
batch's intent (its key, provider, endpoint, the custom_ids of its lines and each line's key in
the call journal with its URL) BEFORE it asks the provider to create it, the batch's id as soon
as the provider returns it, and when it is done with it (its answers collected and kept in the
call journal, or the batch cancelled). A run resumed on the same directory can then re-attach
to every batch whose intent has an id and no end, and knows which intents may have become
batches it never heard of (an intent with no id: an OpenAI batch is looked up by the key in its
metadata before its lines are sent again). A resumed call gets
a new call id, so a line is matched to it by its call-journal key (`CacheUse.key`: the request,
its repetition and how many identical requests that repetition made before it); see
`asynceval.funnel._batch_resume`. `FileBatchJournal.claim` hands the batches an earlier segment
left open (read when the journal is first used) to the batcher of their endpoint.

`FileBatchJournal` appends one JSON object per record to `batches.jsonl` beside the run's call
journal (`journal.sqlite`), each flushed and fsynced before the batcher goes on. Without a call
journal (a library run with no run directory), `NO_BATCH_JOURNAL` keeps nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ._journal import CallJournal

FILE_NAME = "batches.jsonl"
"""The batch journal's file in a run directory (beside `journal.sqlite`)."""


@dataclass
class OpenBatch:
    """A batch an earlier segment of the run left open: its intent, with the provider's id if
    it was journaled (else None: killed between the intent and the id), and its lines by
    custom_id: (call-journal key as hex, URL)."""

    batch_key: str
    provider: str
    endpoint: str
    batch_id: str | None
    time: float
    lines: dict[str, tuple[str, str]] = field(default_factory=dict)


class BatchJournal(Protocol):
    """Where the batcher records a run's batches (see the module). Sync, called off the event
    loop; each record must be on disk when the call returns."""

    def intent(
        self,
        batch_key: str,
        provider: str,
        endpoint: str,
        custom_ids: Sequence[str],
        keys: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        """A batch of these lines is about to be created (nothing was sent yet); `keys`: each
        line's call-journal key (hex) and URL by custom_id (lines without one left out)."""

    def created(self, batch_key: str, batch_id: str) -> None:
        """The provider created the batch `batch_key` as `batch_id`."""

    def ended(self, batch_id: str) -> None:
        """The run is done with `batch_id`: its answers were collected, or it was cancelled."""

    def claim(self, provider: str, endpoint: str) -> list[OpenBatch]:
        """The batches an earlier segment left open at this provider's API base `endpoint`
        (each handed out once)."""

    def known_ids(self) -> set[str]:
        """The ids of every batch the journal held when it was first used (its run's own)."""


class NoBatchJournal:
    """A batch journal that keeps nothing (no run directory)."""

    def intent(
        self,
        batch_key: str,
        provider: str,
        endpoint: str,
        custom_ids: Sequence[str],
        keys: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        pass

    def created(self, batch_key: str, batch_id: str) -> None:
        pass

    def ended(self, batch_id: str) -> None:
        pass

    def claim(self, provider: str, endpoint: str) -> list[OpenBatch]:
        return []

    def known_ids(self) -> set[str]:
        return set()

    def __repr__(self) -> str:
        return "NO_BATCH_JOURNAL"


NO_BATCH_JOURNAL = NoBatchJournal()


class FileBatchJournal:
    """`batches.jsonl` at `path`: one JSON line per record (`{"record": "intent" | "created" |
    "ended", "time": ..., ...}`), appended, flushed and fsynced; safe from any thread. The
    batches left open by earlier segments are read when it is made (`claim` hands them out)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        records = self.records()
        self._open = open_batches(records)
        self._known = {str(r.get("batch_id")) for r in records if r.get("record") == "created"}

    def __repr__(self) -> str:
        return f"FileBatchJournal({str(self.path)!r})"

    def intent(
        self,
        batch_key: str,
        provider: str,
        endpoint: str,
        custom_ids: Sequence[str],
        keys: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self._append(
            {
                "record": "intent",
                "batch_key": batch_key,
                "provider": provider,
                "endpoint": endpoint,
                "custom_ids": list(custom_ids),
                "keys": {cid: list(pair) for cid, pair in (keys or {}).items()},
            }
        )

    def created(self, batch_key: str, batch_id: str) -> None:
        self._append({"record": "created", "batch_key": batch_key, "batch_id": batch_id})

    def ended(self, batch_id: str) -> None:
        self._append({"record": "ended", "batch_id": batch_id})

    def claim(self, provider: str, endpoint: str) -> list[OpenBatch]:
        with self._lock:
            mine = [b for b in self._open if (b.provider, b.endpoint) == (provider, endpoint)]
            self._open = [b for b in self._open if b not in mine]
        return mine

    def known_ids(self) -> set[str]:
        return set(self._known)

    def records(self) -> list[dict[str, object]]:
        """Every record, in order (a line cut short by a kill is skipped)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        found = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                found.append(record)
        return found

    def _append(self, record: dict[str, object]) -> None:
        line = json.dumps({**record, "time": time.time()}, separators=(",", ":")) + "\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                data = memoryview(line.encode())
                while data:
                    data = data[os.write(fd, data) :]
                os.fsync(fd)
            finally:
                os.close(fd)


def open_batches(records: Sequence[Mapping[str, object]]) -> list[OpenBatch]:
    """The batches `records` leave open: an intent with no `ended` for its id (with or without
    an id), whose lines have call-journal keys (an intent without them cannot be matched to a
    resumed call: left alone)."""
    found: dict[str, OpenBatch] = {}
    ended: set[str] = set()
    for record in records:
        kind, key = record.get("record"), str(record.get("batch_key"))
        if kind == "intent":
            keys = record.get("keys")
            lines = {
                str(cid): (str(pair[0]), str(pair[1]))
                for cid, pair in (keys.items() if isinstance(keys, dict) else ())
                if isinstance(pair, list) and len(pair) == 2
            }
            moment = record.get("time")
            found[key] = OpenBatch(
                key,
                str(record.get("provider")),
                str(record.get("endpoint")),
                None,
                float(moment) if isinstance(moment, int | float) else 0.0,
                lines,
            )
        elif kind == "created" and key in found:
            found[key].batch_id = str(record.get("batch_id"))
        elif kind == "ended":
            ended.add(str(record.get("batch_id")))
    return [b for b in found.values() if b.lines and b.batch_id not in ended]


def batch_journal_path(journal: CallJournal) -> Path:
    """Where the batch journal of the run whose call journal is `journal` goes: `batches.jsonl`
    beside `journal.sqlite`, `NAME.batches.jsonl` beside `NAME.journal.sqlite`."""
    name = journal.path.name
    stem = name.removesuffix("journal.sqlite") if name.endswith("journal.sqlite") else name + "."
    return journal.path.with_name(stem + FILE_NAME)
