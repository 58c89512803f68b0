"""The events output: renders one event to one line and writes it where configured, fast.

An event is a fixed head (`event`, `level`, `timestamp`), then its own fields, then the context
bound with `events.bind_context` (fields of the event win over bound ones of the same name). JSON
lines are rendered here directly with the standard library's C encoder: structlog's processor
chain cost about 17 us per event, several times the event's own work, and a repetition writes
five or more. The console format goes through structlog's `ConsoleRenderer`. Secrets are blanked
by the same processors as everywhere (`asynceval._redact`).

A LOG_FILE is an `AppendOnlyFile`: while a run is going, the lines of one event-loop turn are
written together, in one unbuffered write, when the turn ends (otherwise each line at once). So
a killed process loses at most the lines of the turn it was in, and a full disk never leaves
half a line. A stream given by the application is written and flushed per line, under a lock.
"""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from asyncio import _get_running_loop as _running_loop
from collections.abc import Callable, Mapping
from typing import Any, Self, TextIO

from ._clock import utc_timestamp
from ._jsonfast import encoder, scalar
from ._redact import may_hold_secret, redact_secrets, scrub_value, secret_key
from ._writer import AppendOnlyFile

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_NAMES = {name: name.upper() for name in LEVELS}

_MOST_WAITING = 256  # lines held for the end of a loop turn: a long turn still writes as it goes
_encode = encoder(default=repr)  # what structlog's JSONRenderer did: repr() else


def _no_loop() -> None:
    """`EventLog._last_flush_on` when no loop has a flush scheduled (a weak reference's call)."""
    return None


timestamp = utc_timestamp  # now as ISO 8601 UTC with microseconds and a Z


class EventLog:
    """Where events go and in which shape: `output` is a text stream or an AppendOnlyFile;
    events below `level` (a name of LEVELS) are not written; `console` renders for people.
    `on_error(exception, lines_lost)` hears of every line that could not be written (writes
    never raise: a batch written at the end of a loop turn has no caller to raise into).

    While `batching` is above 0 (a run is going: `events.batching()`), lines to a file wait for
    the end of their event-loop turn and go out together; otherwise each is written at once.
    """

    def __init__(
        self,
        output: TextIO | AppendOnlyFile,
        level: str,
        *,
        console: bool,
        on_error: Callable[[Exception, int], None],
    ) -> None:
        self.output = output
        self.threshold = LEVELS[level.lower()]
        self._render: Callable[[str, dict[str, Any]], str] = (
            _console_renderer(output) if console else _render_json
        )
        self._file = output if isinstance(output, AppendOnlyFile) else None
        self._on_error = on_error
        self.closed = False  # a run's events file after its run: late events skip it
        self._forked()

    def _forked(self) -> None:
        """Fresh bookkeeping: at start, and in a forked child (the parent writes its own lines;
        a lock held by another thread at the fork would never be released in the child)."""
        self._lock = threading.Lock()
        self._pending: list[str] = []  # lines of this loop turn, not yet written (in order)
        # Loops with a flush scheduled (weakly: a loop stopped before running it is not kept).
        self._flush_on: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        # The loop that last had one scheduled (a WeakSet look-up makes a weak reference).
        self._last_flush_on: Callable[[], asyncio.AbstractEventLoop | None] = _no_loop
        self.batching = 0

    def write(
        self, level: str, event: str, fields: Mapping[str, Any], bound: Mapping[str, Any]
    ) -> str | None:
        """Render and write one event (`level` already known to be enabled). Returns the JSON
        line written, so that another JSON output can take the same line without rendering
        it again (same timestamp, same bytes); None for the console format."""
        if self._render is _render_json:
            line = _plain_line(level, event, fields, bound)
            if line is None:
                line = _render_json(level, _record(level, event, fields, bound))
            self.write_line(line)
            return line
        self.write_line(self._render(level, _record(level, event, fields, bound)))
        return None

    def write_line(self, line: str) -> None:
        """Write one rendered line (a newline is added): to a stream, written and flushed at
        once; to a file, at once or, while batching in an event loop, with the rest of its
        turn's lines at the turn's end (at most `_MOST_WAITING` wait)."""
        if self._file is None:
            output = self.output
            assert not isinstance(output, AppendOnlyFile)
            try:
                with self._lock:
                    output.write(line + "\n")
                    output.flush()
            except Exception as exc:
                self._on_error(exc, 1)
            return
        loop = _running_loop() if self.batching else None
        failure, flush_on = None, None
        with self._lock:
            self._pending.append(line)
            if loop is None or len(self._pending) >= _MOST_WAITING:
                failure = self._write_pending()
            elif self._last_flush_on() is not loop and loop not in self._flush_on:
                self._flush_on.add(loop)
                self._last_flush_on = weakref.ref(loop)  # the next lines ask it in one call
                flush_on = loop
        if failure is not None:
            self._on_error(*failure)
        if flush_on is not None:
            flush_on.call_soon(self._flush_for, flush_on)

    def _flush_for(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._flush_on.discard(loop)
            if self._last_flush_on() is loop:
                self._last_flush_on = _no_loop
            failure = self._write_pending()
        if failure is not None:
            self._on_error(*failure)

    def flush(self) -> None:
        """Write the lines still waiting for their loop turn to end (a run's end, exit)."""
        with self._lock:
            failure = self._write_pending()
        if failure is not None:
            self._on_error(*failure)

    def _write_pending(self) -> tuple[Exception, int] | None:
        """Write every waiting line in one write (lock held); on failure they are all lost (a
        full disk takes none of them: an AppendOnlyFile writes whole or not at all): the error
        and their number are returned, for `on_error` once the lock is released (its warning
        may reach code that writes an event)."""
        lines, self._pending = self._pending, []
        if not lines or self._file is None:
            return None
        lost = len(lines)
        lines.append("")
        try:
            self._file.write("\n".join(lines).encode("utf-8", "replace"))
        except Exception as exc:
            return exc, lost
        return None

    def close(self) -> None:
        """Write what is waiting, then close a LOG_FILE this log opened (a stream is the
        application's to close)."""
        if self._file is not None:
            try:
                self.flush()
            finally:
                self.closed = True
                self._file.close()


class BoundFields(dict[str, Any]):
    """The fields bound with `bind_context` in a context, each also rendered once as it ends an
    event line (`, "key": value`), or `rendered` None when one of them must go the general way
    (a value other than a str, number, bool or None; a secret-looking or reserved name)."""

    __slots__ = ("rendered",)

    def __init__(self, outer: Mapping[str, Any], fields: Mapping[str, Any]) -> None:
        super().__init__(outer)
        dict.update(self, fields)
        rendered = getattr(outer, "rendered", None) if outer else {}
        if rendered is not None:
            rendered = dict(rendered)
            for key, value in fields.items():
                prefix, text = _key(key), scalar(value)
                if prefix is None or text is None:
                    rendered = None
                    break
                rendered[key] = f"{prefix}{text}"
        self.rendered: dict[str, str] | None = rendered

    def _changed(self) -> None:
        """The application changed the dict `bind_context` gave it: render from it from now on."""
        self.rendered = None

    def __setitem__(self, key: str, value: Any) -> None:
        self._changed()
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._changed()
        super().__delitem__(key)

    def __ior__(self, other: Any) -> Self:  # type: ignore[override,misc]
        self._changed()
        return super().__ior__(other)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().update(*args, **kwargs)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._changed()
        return super().setdefault(key, default)

    def pop(self, key: str, *default: Any) -> Any:
        self._changed()
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, Any]:
        self._changed()
        return super().popitem()

    def clear(self) -> None:
        self._changed()
        super().clear()


_UNKNOWN = "?"  # not a key's prefix: those end in ": "
_keys: dict[str, str | None] = dict.fromkeys(("event", "level", "timestamp", "exc_info"))
_heads: dict[tuple[str, str], str] = {}
_ascii = json.encoder.encode_basestring_ascii


def _key(name: str) -> str | None:
    """`, "name": ` for a field rendered as it is (what goes before its value in a line); None
    for one that needs the general way (a reserved or secret-looking name, a name that is not a
    string)."""
    prefix = _keys.get(name, _UNKNOWN)
    if prefix is _UNKNOWN:
        plain = type(name) is str
        prefix = f", {_ascii(name)}: " if plain else None
        if plain and secret_key(name):
            prefix = None
        # Not for a str subclass: equal to the plain name, it would answer for it from then on.
        if plain and len(_keys) < 4096:  # an application inventing names: no cache growth
            _keys[name] = prefix
    return prefix


def _plain_line(
    level: str, event: str, fields: Mapping[str, Any], bound: Mapping[str, Any]
) -> str | None:
    """The event's JSON line assembled from pre-rendered pieces, exactly as `_render_json`
    would render its record, when every field is a plain value under a plain name and the
    line holds nothing secret-looking; else None (the general way then)."""
    rendered = getattr(bound, "rendered", None) if bound else {}
    if rendered is None or type(event) is not str:
        return None
    head = _heads.get((event, level))
    if head is None:
        name = json.encoder.encode_basestring_ascii(event)
        head = f'{{"event": {name}, "level": "{_NAMES[level]}", "timestamp": "'
        if len(_heads) < 1024:
            _heads[event, level] = head
    parts = [head, timestamp(), '"']
    for key, value in fields.items():
        prefix = _keys.get(key, _UNKNOWN)
        if prefix is _UNKNOWN:
            prefix = _key(key)
        # The commonest values (str, None) here; the rest as `scalar` renders them.
        kind = type(value)
        text = _ascii(value) if kind is str else "null" if value is None else scalar(value)
        if prefix is None or text is None:
            return None
        parts += (prefix, text)
    for key, text in rendered.items():
        if key not in fields:
            parts.append(text)
    parts.append("}")
    line = "".join(parts)
    return None if may_hold_secret(line) else line


def _record(
    level: str, event: str, fields: Mapping[str, Any], bound: Mapping[str, Any]
) -> dict[str, Any]:
    """The event as one dict for the general way: head, fields, bound fields under names the
    event does not use, an application's traceback formatted, secrets blanked."""
    record = {"event": event, "level": _NAMES[level], "timestamp": timestamp(), **fields}
    for key, value in bound.items():
        record.setdefault(key, value)
    if "exc_info" in record:  # an application's emit(..., exc_info=True): the traceback
        from structlog.processors import format_exc_info

        record = dict(format_exc_info(None, level, record))
    redact_secrets(None, level, record)  # in place
    return record


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
