"""ResultsFile: the crash-safe JSONL record of a run.

One header line per run (or resumed run: `{"type": "header", ...}` with settings and versions, no
secrets), then one line per report, appended and flushed as each repetition completes. Writes run
in a worker thread, in batches, so the event loop never blocks on the disk; `write` returns once its
line is flushed, so whatever has finished is on disk when a run is interrupted or killed.
A line cut short by a kill is ignored (and the file mended) on resume.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from os import PathLike
from types import TracebackType
from typing import IO, Any

import anyio
import anyio.to_thread


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return repr(value)


def encode_line(record: Mapping[str, Any]) -> str:
    """One JSON line for `record`; values JSON cannot hold are written as their repr."""
    return json.dumps(record, default=_json_default, ensure_ascii=False) + "\n"


def read_records(path: str | PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """(every parseable line as a dict, number of damaged lines) of a results file."""
    records: list[dict[str, Any]] = []
    damaged = 0
    with open(path, encoding="utf-8") as file:
        for line in file:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                damaged += 1
                continue
            if isinstance(record, dict):
                records.append(record)
            else:
                damaged += 1
    return records, damaged


def successful_pairs(path: str | PathLike[str]) -> set[tuple[str, int]]:
    """(task_id, repeat_idx) of every successful report in a results file (empty if none)."""
    if not os.path.exists(path):
        return set()
    records, _ = read_records(path)
    return {
        (str(r["task_id"]), int(r["repeat_idx"]))
        for r in records
        if r.get("type") != "header" and r.get("status") == "success"
    }


class ResultsFile:
    """Append-only results of a run; use as `async with ResultsFile(path, header) as results:`.

    Writers commit in groups: whoever holds the write lock writes every report queued so far in one
    worker-thread call, and the writers queued behind it find their line already on disk.
    """

    def __init__(self, path: str | PathLike[str], header: Mapping[str, Any]) -> None:
        self.path = os.fspath(path)
        self.header = {"type": "header", **header}
        self.written = 0
        self._file: IO[str] | None = None
        self._queued: list[Mapping[str, Any]] = []
        self._next_seq = 0  # reports queued so far
        self._lock = anyio.Lock()

    async def __aenter__(self) -> ResultsFile:
        self._file = await anyio.to_thread.run_sync(self._open)
        return self

    def _open(self) -> IO[str]:
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        file = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 (closed in __aexit__)
        file.seek(0, os.SEEK_END)
        if file.tell() > 0:
            file.seek(file.tell() - 1)
            if file.read(1) != "\n":
                file.write("\n")  # a line cut short by a kill: end it, it stays unparseable
        file.write(encode_line(self.header))
        file.flush()
        return file

    async def write(self, report: Mapping[str, Any]) -> None:
        """Append one report; returns once its line is written and flushed."""
        if self._file is None:
            raise RuntimeError("ResultsFile is not open (use `async with`)")
        self._queued.append(report)
        self._next_seq += 1
        mine = self._next_seq
        async with self._lock:
            if self.written >= mine:
                return  # an earlier writer's batch carried this report
            await self._flush_queued()

    async def _flush_queued(self) -> None:
        batch, self._queued = self._queued, []
        if batch:
            # Not abandoned on cancel: a batch, once begun, is written whole.
            await anyio.to_thread.run_sync(self._write_batch, batch)
            self.written += len(batch)

    def _write_batch(self, reports: list[Mapping[str, Any]]) -> None:
        assert self._file is not None
        self._file.write("".join(encode_line(report) for report in reports))
        self._file.flush()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True):  # whatever was handed to write() reaches the disk
            async with self._lock:
                await self._flush_queued()
            if self._file is not None:
                await anyio.to_thread.run_sync(self._file.close)
                self._file = None
