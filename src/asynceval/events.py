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
CACHE_HIT = "cache_hit"
CACHE_STORE_FAILED = "cache_store_failed"
JOURNAL_HIT = "journal_hit"
LOOP_BLOCKED = "loop_blocked"
TASKS_LEFT_RUNNING = "tasks_left_running"
RUN_LOCK_TAKEN_OVER = "run_lock_taken_over"
RATE_LEARNED = "rate_learned"
ENDPOINT_PAUSED = "endpoint_paused"
STREAM_STALLED = "stream_stalled"
HEDGE_SENT = "hedge_sent"
HEDGE_WON = "hedge_won"
SDK_RETRIES_STACKED = "sdk_retries_stacked"
FUNNEL_BYPASSED = "funnel_bypassed"
BATCH_SUBMITTED = "batch_submitted"
BATCH_PROGRESS = "batch_progress"
BATCH_COMPLETED = "batch_completed"
BATCH_REATTACHED = "batch_reattached"


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


def limit_changed(
    *, endpoint: str, limit: int, previous: int, cap: int, in_flight: int, reason: str
) -> None:
    """An endpoint's adaptive limit moved to `limit`: down on an overload 429 (`reason` "429"),
    back up with successes ("success"); `cap` is MAX_CONCURRENT_LLM_CALLS, which it never
    exceeds and which never changes."""
    fields = {"endpoint": endpoint, "limit": limit, "previous": previous, "cap": cap}
    _write("info", LIMIT_CHANGED, {**fields, "in_flight": in_flight, "reason": reason})


def rate_learned(
    *,
    endpoint: str,
    requests_per_minute: int | None,
    tokens_per_minute: int | None,
    remaining_requests: int | None,
    remaining_tokens: int | None,
    dialect: str,
) -> None:
    """An endpoint's rate-limit headers (`dialect`: "openai" or "anthropic") announced limits
    that the endpoint's windows now keep (LLM_REQUESTS_PER_MINUTE / LLM_TOKENS_PER_MINUTE unset):
    written when a limit is first learned or changes, not per answer."""
    fields = {"endpoint": endpoint, "dialect": dialect}
    limits = {"requests_per_minute": requests_per_minute, "tokens_per_minute": tokens_per_minute}
    left = {"remaining_requests": remaining_requests, "remaining_tokens": remaining_tokens}
    _write("info", RATE_LEARNED, {**fields, **limits, **left})


def endpoint_paused(*, endpoint: str, seconds: float, reason: str) -> None:
    """No slot goes to `endpoint` for `seconds`: a rate refusal (`reason` "rate": a 429 whose
    headers show the budget empty, or the only call in flight; "announced": the headers of an
    answer say the budget is spent until its reset)."""
    fields = {"endpoint": endpoint, "seconds": round(seconds, 6), "reason": reason}
    _write("info", ENDPOINT_PAUSED, fields)


def stream_stalled(
    *, agent: str | None, dimension: str | None, call_id: str, idle_s: float, delivered: bool
) -> None:
    """A streamed answer brought no chunk for LLM_STREAM_IDLE_TIMEOUT (`idle_s`): it is abandoned
    and its slot released; sent again when nothing of it was `delivered` to the caller, else the
    caller gets a timeout error."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("warning", STREAM_STALLED, {**fields, "idle_s": idle_s, "delivered": delivered})


def hedge_sent(
    *, agent: str | None, dimension: str | None, call_id: str, hedge_call_id: str, after_s: float
) -> None:
    """Call `call_id` was still out after `after_s` (its endpoint's p95, or LLM_HEDGE): the same
    request went again as `hedge_call_id` (its slot events carry that id)."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id}
    _write("info", HEDGE_SENT, {**fields, "hedge_call_id": hedge_call_id, "after_s": after_s})


def hedge_won(
    *, agent: str | None, dimension: str | None, call_id: str, winner: str, saved_s: float | None
) -> None:
    """A hedged call's first answer came from `winner` ("hedge" or "first"); the other request
    was cancelled. `saved_s`: how much sooner the hedge answered than the first could have
    (null when the first won, or the first never answered)."""
    fields = {"agent": agent, "dimension": dimension, "call_id": call_id, "winner": winner}
    _write("info", HEDGE_WON, {**fields, "saved_s": saved_s})


def batch_submitted(
    *, provider: str, endpoint: str, batch_id: str, requests: int, call_ids: list[str]
) -> None:
    """A provider batch (LLM_LANE=batch) was created: `provider` ("openai" or "anthropic"),
    the API base `endpoint`, its `batch_id`, and the `call_ids` of its `requests` lines."""
    fields = {"provider": provider, "endpoint": endpoint, "batch_id": batch_id}
    _write("info", BATCH_SUBMITTED, {**fields, "requests": requests, "call_ids": call_ids})


def batch_progress(
    *, batch_id: str, status: str, completed: int, failed: int, total: int, elapsed_s: float
) -> None:
    """A look at a batch in progress: the provider's `status` and its line counts."""
    fields = {"batch_id": batch_id, "status": status, "completed": completed, "failed": failed}
    _write("info", BATCH_PROGRESS, {**fields, "total": total, "elapsed_s": round(elapsed_s, 6)})


def batch_completed(
    *,
    batch_id: str,
    status: str,
    succeeded: int,
    errored: int,
    expired: int,
    elapsed_s: float,
    cost_usd: float | None = None,
) -> None:
    """A batch ended (`status`: completed, failed, expired, cancelled) and its results were
    collected: `succeeded` lines answered their calls, `errored` and `expired` ones went back to
    their calls (sent again in a later batch while RETRY_MAX_ATTEMPTS allows). `cost_usd`: what
    its succeeded lines cost at the batch price (null when none was priced)."""
    fields = {"batch_id": batch_id, "status": status, "succeeded": succeeded}
    counts = {"errored": errored, "expired": expired, "elapsed_s": round(elapsed_s, 6)}
    _write("info", BATCH_COMPLETED, {**fields, **counts, "cost_usd": cost_usd})


def batch_reattached(
    *,
    provider: str,
    endpoint: str,
    batch_key: str,
    batch_id: str | None,
    requests: int,
    found: str,
) -> None:
    """A resumed run (`--resume`) took over a batch an earlier segment left open: its
    `requests` lines are collected, not sent again, and each answers the resumed call with the
    same call-journal key. `found`: "journal" (its id was journaled), "metadata" (killed before
    its id was: found in OpenAI's list by `asynceval_batch_key`), "matched" (the same at
    Anthropic: the only batch of its time and size), or "not_found" (no batch at the provider
    can be told to be its, or a matched batch's answers were another's: a WARNING, its lines
    are sent again)."""
    fields = {"provider": provider, "endpoint": endpoint, "batch_key": batch_key}
    counts = {"batch_id": batch_id, "requests": requests, "found": found}
    if found != "not_found":
        _write("info", BATCH_REATTACHED, {**fields, **counts})
    else:  # its lines go again and may be billed twice: said above INFO
        _write("warning", BATCH_REATTACHED, {**fields, **counts})


def sdk_retries_stacked(*, sdk: str, max_retries: int | None, requests: int) -> None:
    """An SDK client's own retries (`max_retries`, when known) stack on asynceval's: each of its
    attempts is a whole call through the funnel (with RETRY_MAX_ATTEMPTS of its own). Written once
    per run; `requests` counts the SDK's retried requests seen so far. Give the SDK
    `max_retries=0` (`asynceval.interop.openai_client()` does)."""
    fields = {
        "sdk": sdk,
        "max_retries": max_retries,
        "requests": requests,
        "fix": "give the SDK client max_retries=0 (asynceval.interop.openai_client() does)",
    }
    _write("warning", SDK_RETRIES_STACKED, fields)


def funnel_bypassed(*, clients: list[str], count: int) -> None:
    """SDK clients alive in the run (`clients`, `count` of them) send around the funnel (their
    HTTP transport is not asynceval's): their calls meet no limit, retry, event or usage, and
    `logs check` can vouch only for the calls that went through the funnel."""
    _write("warning", FUNNEL_BYPASSED, {"clients": clients, "count": count})


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
