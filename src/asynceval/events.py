"""Structured events: the one place event names and their fields live (layer 2 of DESIGN
section 1: it imports config, errors and the kernel; every layer above may import it).

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

from collections.abc import Mapping
from typing import Any

from . import _events_signals as _signals
from ._event_output import (
    Observer,
    add_observer,
    bind_context,
    configure_logging,
    context_value,
    emit,
    remove_observer,
    write_failures,
)
from ._event_output import batching as batching  # asynceval's own: a run, the cluster backend
from ._event_output import bound_fields as bound_fields
from ._event_output import ensure_logging as ensure_logging
from ._event_output import flush as flush
from ._event_output import forward as forward
from ._event_output import write as _write
from ._redact import REDACTED, redact_secrets, register_secret, scrub_line

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
NO_LLM_CALLS = "no_llm_calls"
CALLS_OUTSIDE_REPETITIONS = "calls_outside_repetitions"
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
CACHE_HIT = "cache_hit"
CACHE_STORE_FAILED = "cache_store_failed"
JOURNAL_HIT = "journal_hit"
LOOP_BLOCKED = "loop_blocked"
TASKS_LEFT_RUNNING = "tasks_left_running"
RUN_LOCK_TAKEN_OVER = "run_lock_taken_over"

# Provider signals, hedges and the batch lane have a room of their own (`_events_signals`).
BATCH_COMPLETED = _signals.BATCH_COMPLETED
BATCH_PROGRESS = _signals.BATCH_PROGRESS
BATCH_REATTACHED = _signals.BATCH_REATTACHED
BATCH_SUBMITTED = _signals.BATCH_SUBMITTED
ENDPOINT_PAUSED = _signals.ENDPOINT_PAUSED
FUNNEL_BYPASSED = _signals.FUNNEL_BYPASSED
HEDGE_SENT = _signals.HEDGE_SENT
HEDGE_WON = _signals.HEDGE_WON
LIMIT_CHANGED = _signals.LIMIT_CHANGED
RATE_LEARNED = _signals.RATE_LEARNED
SDK_RETRIES_STACKED = _signals.SDK_RETRIES_STACKED
STREAM_STALLED = _signals.STREAM_STALLED
batch_completed = _signals.batch_completed
batch_progress = _signals.batch_progress
batch_reattached = _signals.batch_reattached
batch_submitted = _signals.batch_submitted
endpoint_paused = _signals.endpoint_paused
funnel_bypassed = _signals.funnel_bypassed
hedge_sent = _signals.hedge_sent
hedge_won = _signals.hedge_won
limit_changed = _signals.limit_changed
rate_learned = _signals.rate_learned
sdk_retries_stacked = _signals.sdk_retries_stacked
stream_stalled = _signals.stream_stalled


# The three events of every call are one dict literal each: they are written per call.
def queueing(*, agent: str | None, dimension: str | None, call_id: str, queue_depth: int) -> None:
    """An attempt joined the line for a slot (every attempt does, waiting or not); `queue_depth`
    counts the callers waiting, this one included."""
    fields = {
        "agent": agent,
        "dimension": dimension,
        "call_id": call_id,
        "queue_depth": queue_depth,
    }
    _write("info", QUEUEING, fields)


def acquired(
    *, agent: str | None, dimension: str | None, call_id: str, active_slots: int, wait_s: float
) -> None:
    """An attempt took its slot after `wait_s` in line; `active_slots` counts the slots in use,
    this one included."""
    fields = {
        "agent": agent,
        "dimension": dimension,
        "call_id": call_id,
        "active_slots": active_slots,
        "wait_s": round(wait_s, 6),
    }
    _write("info", ACQUIRED, fields)


NO_COST: Any = object()
"""`released(cost_usd=NO_COST)`: a slot that held no LLM request of a model (no cost field)."""


def released(
    *,
    agent: str | None,
    dimension: str | None,
    call_id: str,
    active_slots: int,
    held_s: float,
    cost_usd: float | None = NO_COST,
    unpriced: bool = False,
    cost_unknown: bool = False,
) -> None:
    """An attempt gave its slot back after holding it `held_s` (written before the slot is
    free); `active_slots` counts the slots in use after the release. A model's request says
    what it cost: `cost_usd` in USD, unrounded (0 for an error answer), null with `unpriced:
    true` when its model has no price, its worst case with `cost_unknown: true` when it was sent
    and never answered (the provider may have billed it)."""
    fields = {
        "agent": agent,
        "dimension": dimension,
        "call_id": call_id,
        "active_slots": active_slots,
        "held_s": round(held_s, 6),
    }
    if cost_usd is not NO_COST:
        fields["cost_usd"] = cost_usd
        if unpriced:
            fields["unpriced"] = True
        if cost_unknown:
            fields["cost_unknown"] = True
    _write("info", RELEASED, fields)


def cancelled(*, agent: str | None, dimension: str | None, call_id: str, wait_s: float) -> None:
    """A caller left the line without a slot (cancelled while queued): closes its `queueing`."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("info", CANCELLED, {**fields, "wait_s": round(wait_s, 6)})


def cache_hit(
    *, agent: str | None, dimension: str | None, call_id: str, url: str, key: str
) -> None:
    """A call answered from the model-call cache: no slot taken, nothing sent; `key` is the
    entry's first 16 hex digits."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("info", CACHE_HIT, {**fields, "url": url, "key": key})


def journal_hit(
    *, agent: str | None, dimension: str | None, call_id: str, url: str, key: str
) -> None:
    """A call of a resumed repetition answered from the run's call journal (the answer it had
    before the run was interrupted): no slot taken, nothing sent; `key` as for `cache_hit`."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("info", JOURNAL_HIT, {**fields, "url": url, "key": key})


def loop_blocked(*, agent: str | None, blocked_s: float, threshold_s: float) -> None:
    """The event loop did not run for `blocked_s` (more than LOOP_BLOCK_WARN_S) while `agent`
    (an async agent) had it: a blocking call (`time.sleep`, a sync client) stalls every other
    repetition and makes their calls time out."""
    fields = {"agent": agent, "blocked_s": round(blocked_s, 6), "threshold_s": threshold_s}
    _write("warning", LOOP_BLOCKED, fields)


def tasks_left_running(*, agent: str | None, count: int, tasks: list[str]) -> None:
    """An agent started `count` asyncio tasks and left them running when its repetition ended:
    they are cancelled now; `tasks` names them."""
    _write("warning", TASKS_LEFT_RUNNING, {"agent": agent, "count": count, "tasks": tasks})


def run_lock_taken_over(*, directory: str, pid: int, host: str, started_at: str | None) -> None:
    """A run directory's lock was left by a process that is no longer running (killed): this
    run takes it over."""
    fields = {"directory": directory, "pid": pid, "host": host, "started_at": started_at}
    _write("warning", RUN_LOCK_TAKEN_OVER, fields)


def cache_store_failed(*, directory: str, error: str) -> None:
    """An answer could not be kept in the model-call cache (a full or read-only disk): the call
    itself succeeded."""
    _write("warning", CACHE_STORE_FAILED, {"directory": directory, "error": error})


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
    """An attempt failed and the call goes again after `delay_s`; `attempt` is the one that
    failed, `status_code` is null for timeouts and connection errors."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id, "attempt": attempt}
    extra = {"status_code": status_code, "delay_s": round(delay_s, 6), "error": error}
    _write("warning", RETRY, {**fields, **extra})


def timeout(*, agent: str | None, dimension: str | None, call_id: str, timeout_s: float) -> None:
    """An attempt ran past LLM_CALL_TIMEOUT, or past the caller's own shorter timeout (its SDK
    client's or request's read timeout: then the call is not retried) (`timeout_s`); its slot is
    released."""
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
    """A call failed for good (its attempts spent, or an error not worth retrying); our models
    raise `LLMCallFailed` with the same figures, an SDK gets the provider's last answer."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    extra = {"status_code": status_code, "attempts": attempts, "elapsed_s": round(elapsed_s, 6)}
    _write("error", LLM_CALL_FAILED, {**fields, **extra, "error": error})


def run_started(*, limits: Mapping[str, Any], n_tasks: int | None, **fields: Any) -> None:
    """A run began: the limits in force (max_concurrent_llm_calls, max_concurrent_tasks, the
    retry settings, llm_call_timeout, the rate limits), n_tasks (when known), benchmark,
    n_task_repeats, resumed_pairs; on a cluster also backend and workers."""
    _write("info", RUN_STARTED, {**limits, "n_tasks": n_tasks, **fields})


def run_finished(*, counts: Mapping[str, int], duration_s: float, **fields: Any) -> None:
    """A run ended: `counts` per status, and interrupted, written (lines in the results file),
    skipped_as_done, threads_still_running and store_failures (answers the disk refused to the
    model-call cache and to the call journal)."""
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
    """The run's successful repetitions recorded no LLM call: likely calls made around the
    funnel; `advice` says how to send them through it."""
    _write("warning", NO_LLM_CALLS, {"successes": successes, "advice": NO_LLM_CALLS_ADVICE})


OUTSIDE_REPETITIONS_ADVICE = (
    "start such threads with the run's context (asyncio.to_thread, "
    "or threading.Thread(target=contextvars.copy_context().run, args=(work,)))"
)


def calls_outside_repetitions(*, calls: int, cost_usd: float | None) -> None:
    """LLM calls of the run came from threads that carry no repetition's context (a
    `threading.Thread` started by hand, an executor that does not copy the context): each was
    budgeted against the run's budget and counted at the run level (`calls`: the run's calls
    no repetition counted, and their `cost_usd`, in `run_finished`'s cost too), in no
    repetition's usage; `advice` says how to tie them to
    their repetitions. Written once, at the run's end, before `run_finished`."""
    fields = {"calls": calls, "cost_usd": cost_usd, "advice": OUTSIDE_REPETITIONS_ADVICE}
    _write("warning", CALLS_OUTSIDE_REPETITIONS, fields)


def stream_abandoned(*, agent: str | None, dimension: str | None, call_id: str) -> None:
    """A streamed answer nobody was reading was closed by the funnel: its task or repetition
    waited for a slot while holding it (left by `break`, referenced or not), or its repetition
    ended with it neither read to its end nor closed. Its slot is released now (its `released`
    follows), with the tokens it had read. Close streams you stop reading early."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("warning", STREAM_ABANDONED, fields)


def task_started(*, task_id: str, repeat_idx: int, **fields: Any) -> None:
    """A repetition began (once per repetition, however many attempts it takes)."""
    record = {"task_id": task_id, "repeat_idx": repeat_idx}
    _write("info", TASK_STARTED, {**record, **fields} if fields else record)


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
    """A repetition ended, after its last attempt (once per repetition; also `attempts`).
    `score` is what the summary's pass rate counts for it (null: not scored)."""
    record = {
        "task_id": task_id,
        "repeat_idx": repeat_idx,
        "status": status,
        "termination_reason": termination_reason,
        "score": score,
        "duration_s": round(duration_s, 6),
    }
    _write("info", TASK_FINISHED, {**record, **fields} if fields else record)


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
