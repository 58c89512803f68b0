"""Structured events: the one place event names and their fields live.

Every state change of the call path and the engine is written as one JSON object per line by
asynceval's own writer (`asynceval._eventlog`: rendered directly, structlog's renderer for the
console format): `configure_logging` never calls `structlog.configure` nor touches the standard
`logging` tree, so the application's own logging stays as the application set it. Each event
carries `event`, `level` and an ISO 8601 UTC `timestamp`, plus whatever is bound with
`bind_context` (task_id, repeat_idx, agent, dimension) in the current context.

Secrets never reach a line (see `asynceval._redact`): a processor blanks values under
secret-looking keys (api_key, Authorization, ...), anything held by a `SecretStr`, values
registered with `register_secret`, and strings shaped like bearer tokens or API keys.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TextIO

from ._eventlog import LEVELS, EventLog
from ._redact import REDACTED, redact_secrets, register_secret, scrub_line
from ._writer import AppendOnlyFile
from .config import Settings

__all__ = [
    "REDACTED",
    "Observer",
    "add_observer",
    "bind_context",
    "configure_logging",
    "context_value",
    "emit",
    "redact_secrets",
    "register_secret",
    "remove_observer",
    "scrub_line",
    "write_failures",
]
"""What applications use; the named emitters below (one per event) are asynceval's own."""


# Event names (contract: DESIGN section 3).
RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"
TASK_STARTED = "task_started"
TASK_FINISHED = "task_finished"
TASK_RETRY = "task_retry"
QUEUEING = "queueing"
ACQUIRED = "acquired"
RELEASED = "released"
CANCELLED = "cancelled"
LIMIT_CHANGED = "limit_changed"
NO_LLM_CALLS = "no_llm_calls"
STREAM_ABANDONED = "stream_abandoned"
TOOL_WAVE = "tool_wave"
RETRY = "retry"
TIMEOUT = "timeout"
LLM_CALL_FAILED = "llm_call_failed"
QUEUE_FAILED = "queue_failed"
CALLBACK_FAILED = "callback_failed"
BATCH_ENTRY_MALFORMED = "batch_entry_malformed"
BATCH_ENTRIES_MISSING = "batch_entries_missing"
JUDGE_DIMENSION_FAILED = "judge_dimension_failed"
STRUCTURED_OUTPUT_FALLBACK = "structured_output_fallback"

_write_failures = 0
_lock = threading.Lock()
_log_out: EventLog | None = None
_owned = False  # whether _log_out's file was opened here (closed when replaced)
# What bind_context bound in this context: one variable holding a (never mutated) dict, so that
# an event reads it in one lookup.
_bound: ContextVar[dict[str, Any]] = ContextVar("asynceval_bound", default={})  # noqa: B039


def configure_logging(settings: Settings | None = None, *, stream: TextIO | None = None) -> None:
    """Set up asynceval's own event output: JSON (or console) lines at LOG_LEVEL.

    Lines go to `stream` if given (written and flushed per line), else appended to LOG_FILE
    (unbuffered; the lines of one event-loop turn in one write at its end, so a crash loses at
    most that turn's), else to stderr. `settings` defaults to the current Runtime's. Calling it
    again replaces the previous set-up (and closes a LOG_FILE it opened). Neither structlog's
    global configuration nor the standard `logging` tree is touched.
    """
    if settings is None:
        from .runtime import Runtime  # the runtime reads the settings once for the process

        settings = Runtime.current().settings
    if stream is None and settings.log_file:
        _configure(settings, AppendOnlyFile(settings.log_file), owned=True)
    else:
        _configure(settings, stream if stream is not None else sys.stderr, owned=False)


def _configure(settings: Settings, output: TextIO | AppendOnlyFile, *, owned: bool) -> None:
    """`configure_logging` onto `output`; `owned`: close it when replaced or at exit (the CLI
    hands over its own AppendOnlyFile, whose `error` it watches)."""
    global _log_out, _owned
    register_secret(settings.llm_api_key)
    log = EventLog(
        output,
        settings.log_level,
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
_observers: tuple[Observer, ...] = ()


def add_observer(observer: Observer) -> None:
    """Call `observer(event, fields)` for every event from now on, whatever LOG_LEVEL filters
    (a progress display counts retries this way). It runs inline: keep it quick; errors in it
    are counted like write failures."""
    global _observers
    with _lock:
        _observers = (*_observers, observer)


def remove_observer(observer: Observer) -> None:
    global _observers
    with _lock:
        _observers = tuple(o for o in _observers if o is not observer)


def _write(level: str, event: str, fields: dict[str, Any]) -> None:
    """Write one event; a failure to write is counted, never raised into the call it describes."""
    try:
        for observer in _observers:
            observer(event, fields)
        log = _log_out or _log()
        if LEVELS[level] >= log.threshold:
            log.write(level, event, fields, _bound.get())  # write errors reach _lines_lost
    except Exception as exc:
        _count_failure(f"the {event!r} event", exc)


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


@contextlib.contextmanager
def bind_context(**values: Any) -> Iterator[None]:
    """Bind fields (task_id, repeat_idx, agent, dimension ...) to every event in this context."""
    token = _bound.set({**_bound.get(), **values})
    try:
        yield
    finally:
        _bound.reset(token)


def context_value(key: str) -> Any:
    """The value bound under `key` by `bind_context` in the current context, or None."""
    return _bound.get().get(key)


def forward(line: str) -> None:
    """Write an event line rendered in another process (a cluster worker's) as it is, and show
    it to the observers; a line that is not a JSON event is written all the same."""
    global _write_failures
    try:
        if _observers:
            with contextlib.suppress(ValueError):
                fields = json.loads(line)
                if isinstance(fields, dict):
                    event = str(fields.pop("event", ""))
                    for observer in _observers:
                        observer(event, fields)
        _log().write_line(line)
    except Exception:
        _write_failures += 1


_LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "msg": "info", "exception": "error"}


def emit(event: str, level: str = "info", **fields: Any) -> None:
    """Write an event of the application's own (asynceval's events each have a named emitter
    below, which fixes their fields). `level` is debug, info, warning, error or critical (or
    structlog's names: warn, fatal, msg, and exception, which adds the current traceback);
    another raises ValueError."""
    name = level.lower()
    if name == "exception":
        fields.setdefault("exc_info", True)
    name = _LEVEL_ALIASES.get(name, name)
    if name not in LEVELS:
        raise ValueError(f"unknown event level {level!r}: debug, info, warning, error, critical")
    _write(name, event, fields)


def queueing(*, agent: str | None, dimension: str | None, call_id: str, queue_depth: int) -> None:
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("info", QUEUEING, {**fields, "queue_depth": queue_depth})


def acquired(
    *, agent: str | None, dimension: str | None, call_id: str, active_slots: int, wait_s: float
) -> None:
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("info", ACQUIRED, {**fields, "active_slots": active_slots, "wait_s": round(wait_s, 6)})


def released(
    *, agent: str | None, dimension: str | None, call_id: str, active_slots: int, held_s: float
) -> None:
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("info", RELEASED, {**fields, "active_slots": active_slots, "held_s": round(held_s, 6)})


def cancelled(*, agent: str | None, dimension: str | None, call_id: str, wait_s: float) -> None:
    """A caller left the line without a slot (cancelled while queued): closes its `queueing`."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("info", CANCELLED, {**fields, "wait_s": round(wait_s, 6)})


def limit_changed(
    *, endpoint: str, limit: int, previous: int, cap: int, in_flight: int, reason: str
) -> None:
    """An endpoint's adaptive limit moved: down on an overload 429 (`reason` "429"), back up
    with successes ("success"); `cap` is the global limit it never exceeds."""
    fields = {"endpoint": endpoint, "limit": limit, "previous": previous, "cap": cap}
    _write("info", LIMIT_CHANGED, {**fields, "in_flight": in_flight, "reason": reason})


def retry(
    *,
    agent: str | None,
    dimension: str | None,
    call_id: str,
    attempt: int,
    status_code: int | None,
    delay_s: float,
    error: str,
) -> None:
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id, "attempt": attempt}
    extra = {"status_code": status_code, "delay_s": round(delay_s, 6), "error": error}
    _write("warning", RETRY, {**fields, **extra})


def timeout(*, agent: str | None, dimension: str | None, call_id: str, timeout_s: float) -> None:
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("warning", TIMEOUT, {**fields, "timeout_s": timeout_s})


def llm_call_failed(
    *,
    agent: str | None,
    dimension: str | None,
    call_id: str,
    status_code: int | None,
    attempts: int,
    elapsed_s: float,
    error: str,
) -> None:
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    extra = {"status_code": status_code, "attempts": attempts, "elapsed_s": round(elapsed_s, 6)}
    _write("error", LLM_CALL_FAILED, {**fields, **extra, "error": error})


def run_started(*, limits: Mapping[str, Any], n_tasks: int | None, **fields: Any) -> None:
    _write("info", RUN_STARTED, {**limits, "n_tasks": n_tasks, **fields})


def run_finished(*, counts: Mapping[str, int], duration_s: float, **fields: Any) -> None:
    _write(
        "info", RUN_FINISHED, {"counts": dict(counts), "duration_s": round(duration_s, 6), **fields}
    )


NO_LLM_CALLS_ADVICE = (
    "no LLM call went through asynceval's funnel in any successful repetition: if your agents "
    "call a model, they call it around the limit, retries, events and usage (an SDK or framework "
    "with its own HTTP client); give it asynceval.http_client() (or sync_http_client(), or "
    "asynceval.interop.openai_client())"
)


def no_llm_calls(*, successes: int) -> None:
    """The run's successful repetitions recorded no LLM call: likely calls outside the funnel."""
    _write("warning", NO_LLM_CALLS, {"successes": successes, "advice": NO_LLM_CALLS_ADVICE})


def stream_abandoned(*, agent: str | None, dimension: str | None, call_id: str) -> None:
    """A streamed answer was neither read to its end nor closed when its repetition ended: its
    slot is released now (its `released` follows). Close streams you stop reading early."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("warning", STREAM_ABANDONED, fields)


def task_started(*, task_id: str, repeat_idx: int, **fields: Any) -> None:
    _write("info", TASK_STARTED, {"task_id": task_id, "repeat_idx": repeat_idx, **fields})


def task_retry(
    *,
    task_id: str,
    repeat_idx: int,
    attempt: int,
    status: str,
    reason: str,
    delay_s: float,
) -> None:
    """An attempt of a repetition failed and the repetition runs once more (timeout action or
    max_retries); the repetition's one task_finished comes after its last attempt."""
    fields = {"task_id": task_id, "repeat_idx": repeat_idx, "attempt": attempt, "status": status}
    _write("warning", TASK_RETRY, {**fields, "reason": reason, "delay_s": round(delay_s, 6)})


def task_finished(
    *,
    task_id: str,
    repeat_idx: int,
    status: str,
    termination_reason: str | None,
    duration_s: float,
    score: float | None = None,
    **fields: Any,
) -> None:
    """One repetition ended (after its last attempt). `score` is what the summary's pass rate
    counts for it (None: not scored), so a live view can show the same figure."""
    outcome = {"status": status, "termination_reason": termination_reason, "score": score}
    timing = {"duration_s": round(duration_s, 6)}
    _write(
        "info",
        TASK_FINISHED,
        {"task_id": task_id, "repeat_idx": repeat_idx, **outcome, **timing, **fields},
    )


def queue_failed(*, error: str) -> None:
    """The task queue raised: no new repetitions start; its error is raised after the run."""
    _write("error", QUEUE_FAILED, {"error": error})


def callback_failed(*, callback: str, hook: str, error: str) -> None:
    """A callback raised; the run goes on."""
    _write("warning", CALLBACK_FAILED, {"callback": callback, "hook": hook, "error": error})


def tool_wave(
    *,
    tools: list[str],
    concurrent: bool,
    reason: str,
    next_tool: str | None = None,
    resources: list[str] | None = None,
) -> None:
    """One wave of tool calls run together, and why it ended (exclusive, conflict or end)."""
    fields: dict[str, Any] = {"tools": tools, "concurrent": concurrent, "reason": reason}
    if next_tool is not None:
        fields["next_tool"] = next_tool
    if resources is not None:
        fields["resources"] = resources
    _write("debug", TOOL_WAVE, fields)


def batch_entry_malformed(*, agent: str, dimension: str | None, raw: Any, error: str) -> None:
    """A batched judge answer held an unusable entry; that dimension is asked again alone."""
    fields = {"agent": agent, "dimension": dimension, "raw": raw, "error": error}
    _write("warning", BATCH_ENTRY_MALFORMED, fields)


def batch_entries_missing(*, agent: str, dimensions: list[str]) -> None:
    """A batched judge answer left dimensions out; each is asked again alone."""
    _write("warning", BATCH_ENTRIES_MISSING, {"agent": agent, "dimensions": dimensions})


def judge_dimension_failed(
    *, agent: str, dimension: str, status_code: int | None, error: str
) -> None:
    """A judge gave no opinion on a dimension after every retry; its score is None."""
    fields = {"agent": agent, "dimension": dimension, "status_code": status_code}
    _write("error", JUDGE_DIMENSION_FAILED, {**fields, "error": error})


def structured_output_fallback(*, agent: str, status_code: int | None, error: str) -> None:
    """The provider refused JSON-schema output; the panel asks for JSON in the prompt instead."""
    fields = {"agent": agent, "status_code": status_code, "error": error}
    _write("warning", STRUCTURED_OUTPUT_FALLBACK, fields)
