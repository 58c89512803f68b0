"""The events output: renders one event to one line and writes it where configured, fast.

An event is a fixed head (`event`, `level`, `timestamp`), then its own fields, then the context
bound with `events.bind_context` (fields of the event win over bound ones of the same name). JSON
lines are rendered here directly with the standard library's C encoder: structlog's processor
chain cost about 17 us per event, several times the event's own work, and a repetition writes
five or more. The console format goes through structlog's `ConsoleRenderer`. Secrets are blanked
by the same processors as everywhere (`asynceval._redact`).

A LOG_FILE is an `AppendOnlyFile`: each line is one unbuffered write, so a line written is in the
kernel (a killed process loses none) and a full disk never leaves half a line. A stream given by
the application is written and flushed per line, under a lock.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from ._redact import may_hold_secret, redact_secrets, scrub_value
from ._writer import AppendOnlyFile

LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}
_NAMES = {"debug": "DEBUG", "info": "INFO", "warning": "WARNING", "warn": "WARNING"}
_NAMES |= {"error": "ERROR", "critical": "CRITICAL"}

_encode = json.JSONEncoder(default=repr).encode  # what structlog's JSONRenderer did: repr() else
_stamp_cache: tuple[int, str] = (-1, "")


def timestamp() -> str:
    """Now as ISO 8601 UTC with microseconds (the date part formatted once per second)."""
    global _stamp_cache
    now = time.time()
    second = int(now)
    cache = _stamp_cache  # read once: another thread may replace it
    if cache[0] != second:
        cache = _stamp_cache = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cache[1]}.{int((now - second) * 1e6):06d}Z"


class EventLog:
    """Where events go and in which shape: `output` is a text stream or an AppendOnlyFile;
    events below `level` (a name of LEVELS) are not written; `console` renders for people."""

    def __init__(self, output: TextIO | AppendOnlyFile, level: str, *, console: bool) -> None:
        self.output = output
        self.threshold = LEVELS[level.lower()]
        self._render: Callable[[str, dict[str, Any]], str] = (
            _console_renderer(output) if console else _render_json
        )
        self._file = output if isinstance(output, AppendOnlyFile) else None
        self._lock = threading.Lock()

    def enabled(self, level: str) -> bool:
        return LEVELS[level] >= self.threshold

    def write(
        self, level: str, event: str, fields: Mapping[str, Any], bound: Mapping[str, Any]
    ) -> None:
        """Render and write one event (`level` already known to be enabled); raises what the
        output raises."""
        record = {"event": event, "level": _NAMES[level], "timestamp": timestamp(), **fields}
        for key, value in bound.items():
            record.setdefault(key, value)
        if "exc_info" in record:  # an application's emit(..., exc_info=True): the traceback
            from structlog.processors import format_exc_info

            record = dict(format_exc_info(None, level, record))
        redact_secrets(None, level, record)  # in place
        self.write_line(self._render(level, record))

    def write_line(self, line: str) -> None:
        """Write one rendered line as it is (a newline is added)."""
        if self._file is not None:
            self._file.write((line + "\n").encode("utf-8", "replace"))
            return
        output = self.output
        assert not isinstance(output, AppendOnlyFile)
        with self._lock:
            output.write(line + "\n")
            output.flush()

    def close(self) -> None:
        """Close a LOG_FILE this log opened (a stream is the application's to close)."""
        if self._file is not None:
            self._file.close()


def _render_json(level: str, record: dict[str, Any]) -> str:
    line = _encode(record)
    if may_hold_secret(line):  # rendered again from scrubbed values, never cut out of the text
        line = _encode(scrub_value(record))
    return line


def _console_renderer(output: TextIO | AppendOnlyFile) -> Callable[[str, dict[str, Any]], str]:
    from structlog.dev import ConsoleRenderer  # only for the console format (it brings rich)

    from ._redact import ScrubbingRenderer

    isatty = getattr(output, "isatty", None)
    scrubbing = ScrubbingRenderer(ConsoleRenderer(colors=bool(isatty and isatty())))

    def render(level: str, record: dict[str, Any]) -> str:
        return scrubbing(None, level, record)

    return render
