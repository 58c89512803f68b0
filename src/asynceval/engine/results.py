"""ResultsFile: the crash-safe JSONL record of a run.

One header line per run (or resumed run: `{"type": "header", ...}` with settings and versions, no
secrets), then one line per report, appended as each repetition completes: a line up to 64 KiB
in one unbuffered write in place, a longer one through the writer thread (so the event loop never
waits on a big write), in order; `write` returns once its line is in the kernel, so whatever has
finished is on disk when a run is interrupted or killed.
A line cut short by a kill is ignored (and the file mended) on resume. A write the disk refuses
(full, over a size limit, failing) leaves no part of its lines behind: `write` raises an OSError
naming the file, and the file takes no more lines (see `AppendOnlyFile`).
"""

from __future__ import annotations

import json
import math
import os
import stat
from array import array
from collections.abc import Callable, Iterator, Mapping
from os import PathLike
from types import TracebackType
from typing import Any

import anyio

from .._jsonfast import encoder
from .._redact import may_hold_secret, scrub_value
from .._writer import AppendOnlyFile, Writer
from .._writer import writer as process_writer
from ..errors import ConfigError


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return repr(value)


# Built once: json.dumps with options other than the defaults builds an encoder per call.
_encode = encoder(default=_json_default, ensure_ascii=False, allow_nan=False)


_DEEPEST = 200  # containers nested deeper are written as a note: JSON readers recurse too


def _plain(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """A copy JSON can always hold: string keys, finite numbers, no cycles, at most `_DEEPEST`
    levels, reprs for the rest (a repr that fails, or an int too long for text, is noted)."""
    if isinstance(value, str | bool) or value is None:
        return value
    if isinstance(value, int):
        try:
            int.__repr__(value)  # above sys.get_int_max_str_digits it raises ValueError
        except ValueError:
            return f"<int of {value.bit_length()} bits>"
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if id(value) in seen:
        return f"<cycle {type(value).__name__}>"
    if len(seen) >= _DEEPEST:
        return f"<{type(value).__name__} nested deeper than {_DEEPEST}>"
    inner = seen | {id(value)}
    try:
        if isinstance(value, Mapping):
            return {_text(key, str): _plain(item, inner) for key, item in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [_plain(item, inner) for item in value]
        if hasattr(value, "model_dump"):
            return _plain(value.model_dump(mode="json"), inner)
    except Exception as exc:  # a mapping or model that breaks while read
        return f"<{type(value).__name__} unreadable: {type(exc).__name__}>"
    return _text(value)


def _text(value: Any, how: Callable[[Any], str] = repr) -> str:
    if isinstance(value, str):
        return value
    try:
        return how(value)
    except Exception as exc:
        return f"<{type(value).__name__} whose {how.__name__} raised {type(exc).__name__}>"


def encode_line(record: Mapping[str, Any]) -> bytes:
    """One UTF-8 JSON line for `record`. Never fails: values JSON cannot hold (non-string keys,
    NaN, cycles, arbitrary objects) are written as their string form. Registered secrets and
    key-shaped strings are blanked in its string values (never in the encoded text)."""
    try:
        text = _encode(record)
    except Exception:  # TypeError, ValueError, RecursionError, or an object's own repr raising
        record = _plain(record)
        text = _encode(record)  # plain now: the same encoder cannot fail on it
    if may_hold_secret(text):  # e.g. a provider's error body echoing the API key
        text = _encode(scrub_value(_plain(record)))
    return text.encode("utf-8", errors="replace") + b"\n"


def json_lines(
    path: str | PathLike[str], start: int = 0, stop: int | None = None
) -> Iterator[tuple[int, int, Any]]:
    """(line number, byte offset, value) of each non-blank line of the file at `path` from byte
    `start` (line numbers counted from there) to `stop`, read one line at a time; the value is
    None for a line that is not JSON (cut short by a kill, even inside a multi-byte character;
    not UTF-8; nested too deep to read). Raises OSError when the file cannot be read."""
    offset = start
    with open(path, "rb") as file:
        file.seek(start)
        for number, line in enumerate(file, start=1):
            here, offset = offset, offset + len(line)
            if stop is not None and here >= stop:
                return
            if not line.strip():
                continue
            try:  # as text: json.loads would first work out the bytes' encoding, line by line
                value = json.loads(line.decode("utf-8-sig"))
            except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError
                value = None
            yield number, here, value


def iter_records(path: str | PathLike[str]) -> Iterator[dict[str, Any] | None]:
    """Each line of a results file as a dict, or None for a damaged one (see `json_lines`, or
    not an object); read one line at a time."""
    for _, _, record in json_lines(path):
        yield record if isinstance(record, dict) else None


def read_records(path: str | PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """(every parseable line as a dict, number of damaged lines) of a results file."""
    return _read(path, None)


def read_summaries(path: str | PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """`read_records` for readers that count and score (a run's summary, `report`, `compare`):
    each report without what none of them reads (traces, config, an error's traceback, an
    evaluator entry's text and nested values past `_SHORT` characters), read one line at a time,
    so a file whose bulk is in any of those costs one line's worth of memory, not the file's.
    Scores (`passed`, `score`) and every other scalar are kept as written."""
    return _read(path, _slim)


def _read(
    path: str | PathLike[str], keep: Callable[[dict[str, Any]], dict[str, Any]] | None
) -> tuple[list[dict[str, Any]], int]:
    records: list[dict[str, Any]] = []
    damaged = 0
    for record in iter_records(path):
        if record is None:
            damaged += 1
        else:
            records.append(record if keep is None else keep(record))
    return records, damaged


_UNREAD = frozenset({"traces", "config"})
_SHORT = 256  # an evaluator's text kept up to this length (a label, a short reason)


def _slim(record: dict[str, Any]) -> dict[str, Any]:
    slim = {key: value for key, value in record.items() if key not in _UNREAD}
    error = slim.get("error")
    if isinstance(error, dict) and "traceback" in error:
        slim["error"] = {key: value for key, value in error.items() if key != "traceback"}
    entries = slim.get("eval")
    if isinstance(entries, list):
        slim["eval"] = [
            {key: value for key, value in entry.items() if _is_small(value)}
            if isinstance(entry, dict)
            else entry
            for entry in entries
        ]
    return slim


def _is_small(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= _SHORT
    return value is None or isinstance(value, bool | int | float)


def read_header(path: str | PathLike[str]) -> dict[str, Any] | None:
    """The first header of the results file at `path`: None when there is no file or it holds
    nothing yet. A file whose first line is not a run header is not a results file: ConfigError
    (a run never appends to it)."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(mode):
            return None  # a device or a pipe (/dev/null, /dev/full): nothing to read back
        for number, _, value in json_lines(path):
            if isinstance(value, dict) and value.get("type") == "header":
                return value
            raise ConfigError(
                f"{os.fspath(path)} is not an asynceval results file (line {number} is not a "
                "run header); nothing was written to it"
            )
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ConfigError(f"{os.fspath(path)} is a folder, not a results file") from None
    return None


def successful_pairs(path: str | PathLike[str]) -> set[tuple[str, int]]:
    """(task_id, repeat_idx) of every successful report in a results file (empty if none)."""
    return set(successful_reports(path))


# The heavy parts of a report, which a resumed run does not need of its earlier successes; every
# other key (ids, run_id, status, termination reason, eval, attempts) is kept, the evaluators'
# entries with their scalars and short text only (see `read_summaries`).
_DROPPED_ON_RESUME = frozenset({"error", "traces", "config", "usage", "timing"})


def successful_reports(path: str | PathLike[str]) -> dict[tuple[str, int], dict[str, Any]]:
    """The successful reports of a results file by (task_id, repeat_idx), each cut down to what a
    resumed run needs of it (ids, status, the evaluators' scores, scalars and short text: the
    queue and `on_task_end` see these; the whole report stays in the file), read one line at a
    time: resuming costs one line's worth of memory whatever field of the reports is large."""
    if not os.path.exists(path):
        return {}
    reports: dict[tuple[str, int], dict[str, Any]] = {}
    for record in iter_records(path):
        if record is None or record.get("status") != "success":  # headers have none
            continue
        task_id, repeat_idx = record.get("task_id"), record.get("repeat_idx")
        # A line the engine never wrote (edited by hand: no id, a repeat of 1.7 or "x") pairs
        # with no repetition: that repetition runs again rather than the resume failing.
        if type(task_id) is str and type(repeat_idx) is int:
            pair = (task_id, repeat_idx)
            kept = {k: v for k, v in record.items() if k not in _DROPPED_ON_RESUME}
            reports[pair] = _slim(kept)
    return reports


def _ends_with_newline(path: str) -> bool:
    """Whether the file at `path` is missing, empty, not a regular file (nothing to mend), or
    ends with a newline."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return True
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return True
    with open(path, "rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"


IN_PLACE_BYTES = 64 * 1024


class ResultsFile:
    """Append-only results of a run; use as `async with ResultsFile(path, header) as results:`.

    Each `write` returns once its line is in the kernel (a killed process loses none). A line of
    at most IN_PLACE_BYTES is one unbuffered write on the caller's thread; a larger one (long
    traces) goes through the runtime's writer thread, which commits in groups, so the event loop
    never waits on a big write.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        header: Mapping[str, Any],
        writer: Writer | None = None,
        *,
        keep_offsets: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.header = {"type": "header", **header}
        self.written = 0
        # Where each report line of this run begins (`keep_offsets`): what RunReports reads.
        self.offsets: array[int] | None = array("q") if keep_offsets else None
        self._file: AppendOnlyFile | None = None
        self._in_thread = 0  # lines handed to the writer thread and not yet written
        self._writer = writer if writer is not None else process_writer()

    async def __aenter__(self) -> ResultsFile:
        self._file = await self._writer.run(self._open)
        return self

    def _open(self) -> AppendOnlyFile:
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        # A line cut short by a kill is ended here, so it stays one unparseable line of its own.
        mend = b"\n" if not _ends_with_newline(self.path) else b""
        file = AppendOnlyFile(self.path)
        try:
            file.write(mend + encode_line(self.header))  # one write: both land or neither
        except OSError:
            file.close()
            raise
        return file

    async def write(self, report: Mapping[str, Any]) -> None:
        """Append one report; returns once its line is written and flushed. An OSError (naming
        the file) when the disk refuses it: nothing of the line is left in the file then, and
        every later write raises the same error again."""
        if self._file is None:
            raise RuntimeError("ResultsFile is not open (use `async with`)")
        line = encode_line(report)  # here, so one bad report spoils no batch
        file, offsets = self._file, self.offsets
        if len(line) <= IN_PLACE_BYTES and not self._in_thread:
            # A small line is one unbuffered write, here: cheaper than waking the writer
            # thread (and sharing the interpreter with it) for each report.
            if offsets is None:
                file.write(line)
            else:
                offsets.append(file.append(line))
            self.written += 1
            return
        # Shielded: a line handed over is written whole and counted, cancelled or not.
        with anyio.CancelScope(shield=True):
            self._in_thread += 1  # later small lines queue behind it: the order stays
            try:
                if offsets is None:
                    await self._writer.write(file, line)
                else:
                    offsets.append(await self._writer.run(lambda: file.append(line)))
            finally:
                self._in_thread -= 1
            self.written += 1

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        file, self._file = self._file, None
        if file is not None:
            with anyio.CancelScope(shield=True):  # after every line handed over before it
                await self._writer.run(file.close)
