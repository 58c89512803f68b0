"""Reports: one dict per task repetition, with the same keys whatever the outcome.

    task_id, repeat_idx, status, termination_reason, eval, error, traces, config, usage, timing,
    attempts

`error` is None or {type, message, traceback, elapsed_s, timeout_s, kind} (kind: see
`ErrorKind`: provider_refused, provider_unreachable, loop_blocked, agent_raised,
evaluator_raised, setup_failed, timeout); `usage` counts the LLM calls (those a timeout or a
cancellation cut short included), retries and tokens of the repetition (gathered by the call
path, never passed by hand); `timing` holds queued_s (from its task being chosen to this
repetition's start), duration_s, and finished_at (Unix time).
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Mapping
from typing import Any

from ..errors import LLMCallFailed, TaskTimeoutError
from ._error_kinds import ERROR_KIND_LABELS, ErrorKind, report_error_kind
from .status import TaskExecutionStatus, TerminationReason, leaf_errors

__all__ = [
    "ERROR_KIND_LABELS",
    "REPORT_KEYS",
    "ErrorKind",
    "build_report",
    "error_entry",
    "eval_score",
    "report_error_kind",
    "worth_running_again",
]

REPORT_KEYS = (
    "run_id",
    "task_id",
    "repeat_idx",
    "status",
    "termination_reason",
    "eval",
    "error",
    "traces",
    "config",
    "usage",
    "timing",
    "attempts",
)


def eval_score(entries: Any) -> float | None:
    """The score in [0, 1] that evaluator entries give a repetition, or None if they give none.

    Entries with a boolean "passed" decide (1.0 if all passed, else 0.0); otherwise the mean of
    numeric "score" values in [0, 1] (others, such as a 1-10 rating, are ignored).
    """
    if not isinstance(entries, list | tuple):
        return None
    mappings = [entry for entry in entries if isinstance(entry, Mapping)]
    passed = [entry["passed"] for entry in mappings if isinstance(entry.get("passed"), bool)]
    if passed:
        return 1.0 if all(passed) else 0.0
    scores = [
        float(entry["score"])
        for entry in mappings
        if isinstance(entry.get("score"), int | float)
        and not isinstance(entry.get("score"), bool)
        and 0.0 <= entry["score"] <= 1.0  # NaN and infinities fail it; a huge int is no float
    ]
    return math.fsum(scores) / len(scores) if scores else None


def error_entry(
    error: BaseException, *, elapsed_s: float | None = None, timeout_s: float | None = None
) -> dict[str, Any]:
    """A JSON-ready description of `error` for a report or an evaluator's entry."""
    if isinstance(error, TaskTimeoutError):
        elapsed_s = error.elapsed_s if elapsed_s is None else elapsed_s
        timeout_s = error.timeout_s if timeout_s is None else timeout_s
    return {
        "type": type(error).__name__,
        "message": str(error),
        "traceback": "".join(traceback.format_exception(error)),
        "elapsed_s": None if elapsed_s is None else round(elapsed_s, 6),
        "timeout_s": timeout_s,
    }


_MAY_BE_INFRASTRUCTURE = (
    TaskExecutionStatus.UNKNOWN_EXECUTION_ERROR,
    TaskExecutionStatus.SETUP_FAILED,
    TaskExecutionStatus.EVALUATION_FAILED,
)


def worth_running_again(status: str, error: BaseException | None) -> bool:
    """Whether `TaskProtocol.max_retries` runs a failed repetition again: an LLM call that failed
    for good but could succeed later (in setup, execution or evaluation), or an error of no
    status of its own (unknown_execution_error: flaky code may pass the next time). A status the
    benchmark chose (agent_error, environment_error, user_error, task_timeout) is never run
    again; neither is a refused request (HTTP 400). What the error *was* is its kind
    (`report["error"]["kind"]`, see `_error_kinds`), not this."""
    if status not in _MAY_BE_INFRASTRUCTURE:
        return False
    for leaf in leaf_errors(error) if error is not None else []:
        cause: BaseException | None = leaf
        while cause is not None:
            if isinstance(cause, LLMCallFailed):
                return cause.retryable  # a refused request (HTTP 400) fails the same way again
            cause = cause.__cause__ or cause.__context__
    return status == TaskExecutionStatus.UNKNOWN_EXECUTION_ERROR


def build_report(
    *,
    run_id: str | None,
    task_id: str,
    repeat_idx: int,
    status: TaskExecutionStatus,
    termination_reason: TerminationReason | None,
    eval_results: list[Any] | None,
    error: Mapping[str, Any] | None,
    traces: Mapping[str, Any],
    config: Mapping[str, Any],
    usage: Mapping[str, int],
    queued_s: float,
    duration_s: float,
    attempts: int,
) -> dict[str, Any]:
    """A report with exactly `REPORT_KEYS`; termination_reason is kept only for runs whose loop
    ended (success and evaluation_failed)."""
    keep_reason = status in (TaskExecutionStatus.SUCCESS, TaskExecutionStatus.EVALUATION_FAILED)
    return {
        "run_id": run_id,
        "task_id": task_id,
        "repeat_idx": repeat_idx,
        "status": status.value,
        "termination_reason": termination_reason.value
        if keep_reason and termination_reason is not None
        else None,
        "eval": eval_results,
        "error": dict(error) if error is not None else None,
        "traces": dict(traces),
        "config": dict(config),
        "usage": dict(usage),
        "timing": {
            "queued_s": round(queued_s, 6),
            "duration_s": round(duration_s, 6),
            "finished_at": round(time.time(), 3),
        },
        "attempts": attempts,
    }
