"""The process's event output: where asynceval's events go, what is bound to them, what failed.

`configure_logging` chooses the output (an `EventLog`: a LOG_FILE, a stream, stderr) once for the
process; `bind_context` binds fields to every event in a context (one ContextVar holding a dict, read
in one lookup per event); `batching` (a run) lets lines to a file wait for the end of their loop
turn; observers see every event whatever the level; write failures are counted, never raised into
the call an event describes. The public names are re-exported by `asynceval.events`, next to the
named events themselves.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TextIO

from ._eventlog import LEVELS, BoundFields, EventLog
from ._redact import register_secret
from ._scoped import Scoped
from ._writer import AppendOnlyFile
from .config import Settings

_write_failures = 0
_lock = threading.Lock()
_log_out: EventLog | None = None
_owned = False  # whether _log_out's file was opened here (closed when replaced)
# What bind_context bound in this context: one variable holding a (never mutated) dict, so that
# an event reads it in one lookup.
_settings_source: Callable[[], Settings] | None = None  # see settings_from
_bound: ContextVar[dict[str, Any]] = ContextVar("asynceval_bound", default={})  # noqa: B039
# The events file of the run this code belongs to (`run_events_file`): a context variable, so
# that several runs at once in one process each write their own file, their tasks and worker
# threads included (they inherit the context).
_run_log: ContextVar[EventLog | None] = ContextVar("asynceval_run_log", default=None)


def configure_logging(settings: Settings | None = None, *, stream: TextIO | None = None) -> None:
    """Set up asynceval's own event output: JSON (or console) lines at LOG_LEVEL (unset: INFO
    to a stream or LOG_FILE, WARNING to stderr).

    Lines go to `stream` if given (written and flushed per line), else appended to LOG_FILE
    (unbuffered; the lines of one event-loop turn in one write at its end, so a crash loses at
    most that turn's), else to stderr. `settings` defaults to the current Runtime's. Calling it
    again replaces the previous set-up (and closes a LOG_FILE it opened). Neither structlog's
    global configuration nor the standard `logging` tree is touched.
    """
    if settings is None:
        settings = _settings_in_force()
    if stream is None and settings.log_file:
        configure_onto(settings, AppendOnlyFile(settings.log_file), owned=True)
    elif stream is None:  # stderr: an unset LOG_LEVEL means WARNING and up
        configure_onto(settings, sys.stderr, owned=False, unset_level="WARNING")
    else:
        configure_onto(settings, stream, owned=False)


def settings_from(source: Callable[[], Settings]) -> None:
    """Where `configure_logging()` finds the settings in force when it is given none: the
    runtime module installs `Runtime.current().settings` when it is imported (event output sits
    below the runtime and never imports it). Until then, `Settings()` from the environment."""
    global _settings_source
    _settings_source = source


def _settings_in_force() -> Settings:
    return _settings_source() if _settings_source is not None else Settings()


def configure_onto(
    settings: Settings,
    output: TextIO | AppendOnlyFile,
    *,
    owned: bool,
    unset_level: str = "INFO",
) -> None:
    """`configure_logging` onto `output` (the CLI hands over its own AppendOnlyFile, whose
    `error` it watches); `owned`: close it when replaced or at exit; `unset_level`: the level
    when LOG_LEVEL is unset (INFO to a file or a stream given, WARNING to stderr)."""
    global _log_out, _owned
    register_secret(settings.llm_api_key)
    log = EventLog(
        output,
        settings.log_level or unset_level,
        console=settings.log_format == "console",
        on_error=_lines_lost,
    )
    with _lock:
        previous, previous_owned = _log_out, _owned
        _log_out, _owned = log, owned
    if previous is not None:
        with contextlib.suppress(Exception):
            if previous_owned and previous.output is not output:
                previous.close()
            else:
                previous.flush()


def flush() -> None:
    """Write the event lines still waiting for their event-loop turn to end."""
    log = _log_out
    if log is not None:
        log.flush()


@contextlib.contextmanager
def batching() -> Iterator[None]:
    """While in it (a run), lines to LOG_FILE wait for the end of their event-loop turn and go
    out in one write; at its end, what waits is written."""
    log = _log()
    with _lock:
        log.batching += 1
    try:
        yield
    finally:
        with _lock:
            log.batching -= 1
        log.flush()


def _lines_lost(exc: Exception, lines: int) -> None:
    _count_failure("event lines" if lines > 1 else "an event line", exc, lines)


def _after_fork() -> None:
    log = _log_out
    if log is not None:
        log._forked()


os.register_at_fork(after_in_child=_after_fork)


def _close_at_exit() -> None:
    """At interpreter exit: waiting lines are written and the events file closed."""
    log = _log_out
    if log is not None:
        with contextlib.suppress(Exception):
            if _owned:
                log.close()
            else:
                log.flush()


atexit.register(_close_at_exit)


def ensure_logging(settings: Settings) -> None:
    """`configure_logging(settings)` unless the application (or an earlier call) already did."""
    if _log_out is None:
        configure_logging(settings)


def write_failures() -> int:
    """How many events could not be written (the first one also raised a RuntimeWarning)."""
    return _write_failures


def _log() -> EventLog:
    if _log_out is None:
        try:
            configure_logging()
        except ValueError:  # a bad setting in the environment: still write the events somewhere
            configure_logging(Settings.model_construct())  # defaults, not the environment
    assert _log_out is not None
    return _log_out


Observer = Callable[[str, Mapping[str, Any]], None]
_observers: list[tuple[Observer, frozenset[str] | None]] = []  # (observer, its events or None)
# Per event name, the observers it is shown to: built on an event's first write after each
# change, so that an event nobody observes costs one look-up.
_watching: dict[str, tuple[Observer, ...]] = {}


def add_observer(observer: Observer, *, only: Iterable[str] | None = None) -> None:
    """Call `observer(event, fields)` for every event from now on (or for the events named in
    `only`), whatever LOG_LEVEL filters (a progress display counts retries this way). It runs
    inline: keep it quick, and name the events it wants when it wants few (the others then
    cost it nothing); errors in it are counted like write failures."""
    global _watching
    names = None if only is None else frozenset(only)
    with _lock:
        _observers.append((observer, names))
        _watching = {}


def remove_observer(observer: Observer) -> None:
    """Stop calling `observer` (every registration of it); unknown observers are ignored."""
    global _watching
    with _lock:
        _observers[:] = [entry for entry in _observers if entry[0] is not observer]
        _watching = {}


def _watchers(event: str) -> tuple[Observer, ...]:
    """The observers `event` is shown to (remembered until the observers change)."""
    with _lock:
        found = tuple(o for o, names in _observers if names is None or event in names)
        if len(_watching) < 4096:  # an application inventing event names: no growth past it
            _watching[event] = found
    return found


def write(level: str, event: str, fields: dict[str, Any]) -> None:
    """Write one event (to the process's output, and to its run's events file if it has one);
    a failure to write is counted, never raised into the call it describes. An event bound for
    both a JSON output and the run's events file is rendered once: both get the same line."""
    try:
        watchers = _watching.get(event)
        for observer in watchers if watchers is not None else _watchers(event):
            observer(event, fields)
        log = _log_out or _log()
        number = LEVELS[level]
        bound = _bound.get()
        line = None
        if number >= log.threshold:
            line = log.write(level, event, fields, bound)  # write errors reach _lines_lost
        run_log = _run_log.get()
        if run_log is not None and number >= run_log.threshold and not run_log.closed:
            if line is None:  # not written above, or rendered for the console
                run_log.write(level, event, fields, bound)
            else:
                run_log.write_line(line)
    except Exception as exc:
        _count_failure(f"the {event!r} event", exc)


@contextlib.contextmanager
def run_events_file(
    path: str | os.PathLike[str], settings: Settings | None = None
) -> Iterator[EventLog | None]:
    """While in it, the events written in this context (a run: its tasks and worker threads
    inherit it) are also appended to the events file at `path`, as JSON lines at INFO (DEBUG
    when LOG_LEVEL=DEBUG), whatever the process's output is (stderr at WARNING by default,
    LOG_FILE, or what the application set up with `configure_logging`): a run directory always
    holds its run's events, and the application's own output keeps its own level. Several runs
    at once each write their own file. When the process's output already is that file (the
    command line's `configure_onto`), nothing more is opened. Lines of one event-loop turn go
    out together at its end; the file is flushed and closed when the block ends. Yields the
    file's EventLog, None when none was opened."""
    settings = settings if settings is not None else _settings_in_force()
    current = _log_out
    target = os.path.abspath(os.fspath(path))
    if current is not None and _same_file(current, target):
        yield None
        return
    register_secret(settings.llm_api_key)
    level = "DEBUG" if settings.log_level == "DEBUG" else "INFO"
    log = EventLog(AppendOnlyFile(target), level, console=False, on_error=_lines_lost)
    log.batching = 1  # a run is going: the lines of a loop turn wait for its end
    token = _run_log.set(log)
    try:
        yield log
    finally:
        _run_log.reset(token)
        with contextlib.suppress(Exception):
            log.close()


def _same_file(log: EventLog, target: str) -> bool:
    output = log.output
    return isinstance(output, AppendOnlyFile) and os.path.abspath(output.path) == target


def events_path_for(results_path: str | os.PathLike[str]) -> str:
    """Where a run's events go next to its results file: `DIR/events.jsonl` beside
    `DIR/results.jsonl`, else `DIR/NAME.events.jsonl` beside `DIR/NAME.jsonl` (so that two
    results files in one folder keep their events apart)."""
    results = os.fspath(results_path)
    folder, name = os.path.split(results)
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    return os.path.join(folder, "events.jsonl" if stem == "results" else f"{stem}.events.jsonl")


def _count_failure(what: str, exc: Exception, lines: int = 1) -> None:
    global _write_failures
    first = _write_failures == 0
    _write_failures += lines
    if first:
        warnings.warn(
            f"asynceval could not write {what} ({exc!r}); "
            "events.write_failures() counts the ones lost",
            RuntimeWarning,
            stacklevel=4,
        )


def bind_context(**values: Any) -> Scoped[dict[str, Any]]:
    """A `with` block binding fields (task_id, repeat_idx, agent, dimension ...) to every event
    written inside it, on top of those bound where it is entered."""
    return _Binding(_bound, values)


class _Binding(Scoped[dict[str, Any]]):
    """`bind_context`'s block: the fields bound around it are read when it is entered."""

    __slots__ = ()

    def __enter__(self) -> dict[str, Any]:
        self._value = BoundFields(_bound.get(), self._value)
        return super().__enter__()


def bound_fields() -> dict[str, Any]:
    """A copy of the fields bound in the current context (a cluster run binds them again on its
    workers, so their events carry the run's run_id and the application's own fields)."""
    return dict(_bound.get())


def context_value(key: str) -> Any:
    """The value bound under `key` by `bind_context` in the current context, or None."""
    return _bound.get().get(key)


def forward(line: str) -> None:
    """Write an event line rendered in another process (a cluster worker's) as it is, to the
    outputs whose level it reaches (the process's, its run's events file), and show it to the
    observers; a line that is not a JSON event is written all the same."""
    try:
        number = LEVELS["critical"]  # a line without a level is written everywhere
        with contextlib.suppress(ValueError):
            fields = json.loads(line)
            if isinstance(fields, dict):
                number = LEVELS.get(str(fields.get("level", "")).lower(), number)
                if _observers:
                    event = str(fields.pop("event", ""))
                    watchers = _watching.get(event)
                    for observer in watchers if watchers is not None else _watchers(event):
                        observer(event, fields)
        log = _log()
        if number >= log.threshold:
            log.write_line(line)
        run_log = _run_log.get()
        if run_log is not None and number >= run_log.threshold and not run_log.closed:
            run_log.write_line(line)
    except Exception as exc:
        _count_failure("a forwarded event line", exc)


_LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "msg": "info", "exception": "error"}


def emit(event: str, level: str = "info", **fields: Any) -> None:
    """Write an event of the application's own (asynceval's events each have a named emitter
    in `asynceval.events`, which fixes their fields). `level` is debug, info, warning, error or critical (or
    structlog's names: warn, fatal, msg, and exception, which adds the current traceback);
    another raises ValueError."""
    name = level.lower()
    if name == "exception":
        fields.setdefault("exc_info", True)
    name = _LEVEL_ALIASES.get(name, name)
    if name not in LEVELS:
        raise ValueError(f"unknown event level {level!r}: debug, info, warning, error, critical")
    write(name, event, fields)
