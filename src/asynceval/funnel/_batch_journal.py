"""BatchJournal: what a run's provider batches are, kept before they exist (DESIGN section 16).

A batch is billed once the provider has it, and its answers can be collected for 24 hours or
more, so a run killed with batches open must find them again: the batcher tells the journal a
batch's intent (its key, provider, endpoint and the custom_ids of its lines) BEFORE it asks the
provider to create it, the batch's id as soon as the provider returns it, and when it is done
with it (its answers collected, or the batch cancelled). A run resumed on the same directory
can then re-attach to every batch whose intent has an id and no end, and knows which intents
may have become batches it never heard of (an intent with no id: look the provider's list of
batches up for one holding those custom_ids before sending the lines again).

`FileBatchJournal` appends one JSON object per record to `batches.jsonl` beside the run's call
journal (`journal.sqlite`), each flushed and fsynced before the batcher goes on. Without a call
journal (a library run with no run directory), `NO_BATCH_JOURNAL` keeps nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ._journal import CallJournal

FILE_NAME = "batches.jsonl"
"""The batch journal's file in a run directory (beside `journal.sqlite`)."""


class BatchJournal(Protocol):
    """Where the batcher records a run's batches (see the module). Sync, called off the event
    loop; each record must be on disk when the call returns."""

    def intent(
        self, batch_key: str, provider: str, endpoint: str, custom_ids: Sequence[str]
    ) -> None:
        """A batch of these lines is about to be created (nothing was sent yet)."""

    def created(self, batch_key: str, batch_id: str) -> None:
        """The provider created the batch `batch_key` as `batch_id`."""

    def ended(self, batch_id: str) -> None:
        """The run is done with `batch_id`: its answers were collected, or it was cancelled."""


class NoBatchJournal:
    """A batch journal that keeps nothing (no run directory)."""

    def intent(
        self, batch_key: str, provider: str, endpoint: str, custom_ids: Sequence[str]
    ) -> None:
        pass

    def created(self, batch_key: str, batch_id: str) -> None:
        pass

    def ended(self, batch_id: str) -> None:
        pass

    def __repr__(self) -> str:
        return "NO_BATCH_JOURNAL"


NO_BATCH_JOURNAL = NoBatchJournal()


class FileBatchJournal:
    """`batches.jsonl` at `path`: one JSON line per record (`{"record": "intent" | "created" |
    "ended", "time": ..., ...}`), appended, flushed and fsynced; safe from any thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileBatchJournal({str(self.path)!r})"

    def intent(
        self, batch_key: str, provider: str, endpoint: str, custom_ids: Sequence[str]
    ) -> None:
        self._append(
            {
                "record": "intent",
                "batch_key": batch_key,
                "provider": provider,
                "endpoint": endpoint,
                "custom_ids": list(custom_ids),
            }
        )

    def created(self, batch_key: str, batch_id: str) -> None:
        self._append({"record": "created", "batch_key": batch_key, "batch_id": batch_id})

    def ended(self, batch_id: str) -> None:
        self._append({"record": "ended", "batch_id": batch_id})

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


def batch_journal_path(journal: CallJournal) -> Path:
    """Where the batch journal of the run whose call journal is `journal` goes: `batches.jsonl`
    beside `journal.sqlite`, `NAME.batches.jsonl` beside `NAME.journal.sqlite`."""
    name = journal.path.name
    stem = name.removesuffix("journal.sqlite") if name.endswith("journal.sqlite") else name + "."
    return journal.path.with_name(stem + FILE_NAME)
