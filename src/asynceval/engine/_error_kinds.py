"""Error kinds: why a repetition ended in an error, in words that say whose it was.

A report with an error carries `error["kind"]`, one of `ErrorKind`: the provider refused a call
(an HTTP 4xx such as 400, 401, 403, 404, a 429 that never cleared), the provider could not be
reached (connection refused, DNS, timeouts, 5xx after retries), the event loop was blocked by an
async agent so long that calls timed out (not the provider's doing), the run's budget refused a
call whose cost it cannot bound (a model without a price, a body without a model, server-side
context without a context window: asynceval's refusal, whoever raised it), the user's agent raised
(anything else during the execution loop), an evaluator raised, a setup hook raised, or the
repetition ran past its timeout. A bug in the user's own code is never put down to the
infrastructure.

Results files written before kinds existed are still read: `report_error_kind` derives the kind
from the report's status and error type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

from ..errors import AttemptTimeout, CostUnbounded, LLMCallFailed, TaskTimeoutError
from ._watch import recent_block
from .status import leaf_errors

_E = TypeVar("_E", bound=BaseException)


class ErrorKind(StrEnum):
    """Why a repetition ended in an error (`report["error"]["kind"]`)."""

    PROVIDER_REFUSED = "provider_refused"
    PROVIDER_UNREACHABLE = "provider_unreachable"
    LOOP_BLOCKED = "loop_blocked"
    AGENT_RAISED = "agent_raised"
    EVALUATOR_RAISED = "evaluator_raised"
    SETUP_FAILED = "setup_failed"
    TIMEOUT = "timeout"
    BUDGET_EXHAUSTED = "budget_exhausted"
    COST_UNBOUNDED = "cost_unbounded"


ERROR_KIND_LABELS: Mapping[str, str] = {
    ErrorKind.PROVIDER_REFUSED: "provider refused",
    ErrorKind.PROVIDER_UNREACHABLE: "provider unreachable",
    ErrorKind.LOOP_BLOCKED: "event loop blocked by an agent",
    ErrorKind.AGENT_RAISED: "your agent raised",
    ErrorKind.EVALUATOR_RAISED: "your evaluator raised",
    ErrorKind.SETUP_FAILED: "setup failed",
    ErrorKind.TIMEOUT: "timed out (task timeout)",
    ErrorKind.BUDGET_EXHAUSTED: "cost budget exhausted (--resume runs it again)",
    ErrorKind.COST_UNBOUNDED: "refused by the budget: its cost cannot be bounded",
}

_KINDS = frozenset(kind.value for kind in ErrorKind)


def provider_kind(status_code: int | None) -> ErrorKind:
    """A call that failed for good with `status_code`: a 4xx (408 aside) is the provider
    refusing it; no status (connection, DNS, timeout) or a 5xx is the provider out of reach."""
    if status_code is not None and 400 <= status_code < 500 and status_code != 408:
        return ErrorKind.PROVIDER_REFUSED
    return ErrorKind.PROVIDER_UNREACHABLE


def failed_call(error: BaseException) -> LLMCallFailed | None:
    """The `LLMCallFailed` behind `error` (itself, in an exception group, or a cause of one of
    those: an agent that wrapped it), if any."""
    return _behind(error, LLMCallFailed)


def _behind(error: BaseException, kind: type[_E]) -> _E | None:
    """The error of type `kind` behind `error` (itself, in an exception group, or a cause of one
    of those), if any."""
    for leaf in leaf_errors(error):
        cause: BaseException | None = leaf
        seen = 0
        while cause is not None and seen < 50:
            if isinstance(cause, kind):
                return cause
            cause = cause.__cause__ or cause.__context__
            seen += 1
    return None


def timed_out_waiting(call: LLMCallFailed) -> bool:
    """Whether the call's last attempt ran past LLM_CALL_TIMEOUT (its cause)."""
    return isinstance(call.__cause__, AttemptTimeout)


def error_kind(error: BaseException, phase: str) -> ErrorKind:
    """The kind of `error`, raised while the repetition was in `phase` ("setup", "execution",
    "evaluation"): a failed LLM call wherever it surfaced, then a timeout, then whose hook."""
    if any(isinstance(leaf, TaskTimeoutError) for leaf in leaf_errors(error)):
        return ErrorKind.TIMEOUT
    if _behind(error, CostUnbounded) is not None:
        return ErrorKind.COST_UNBOUNDED
    call = failed_call(error)
    if call is not None:
        return provider_kind(call.status_code)
    if phase == "setup":
        return ErrorKind.SETUP_FAILED
    if phase == "evaluation":
        return ErrorKind.EVALUATOR_RAISED
    return ErrorKind.AGENT_RAISED


_HTTP_STATUS = re.compile(r"HTTP (\d{3})\)")
_SETUP_STATUSES = ("setup_failed",)
_EVALUATION_STATUSES = ("evaluation_failed",)


def report_error_kind(report: Mapping[str, Any]) -> str | None:
    """The error kind of a report read back: its own `error.kind`, else (a file written before
    kinds) one derived from its status and error type; None for a repetition without error."""
    status = report.get("status")
    error = report.get("error")
    error = error if isinstance(error, Mapping) else {}
    kind = error.get("kind")
    if isinstance(kind, str) and kind in _KINDS:
        return kind
    if status == "success" and not error:
        return None
    if status == "task_timeout":
        return ErrorKind.TIMEOUT
    if error.get("type") == CostUnbounded.__name__:
        return ErrorKind.COST_UNBOUNDED
    for text in (f"{error.get('type')}: {error.get('message')}", str(error.get("traceback"))):
        if "LLMCallFailed" in text or "LLM call failed after" in text:
            found = _HTTP_STATUS.search(text)
            return provider_kind(int(found.group(1)) if found else None)
    if status in _SETUP_STATUSES:
        return ErrorKind.SETUP_FAILED
    if status in _EVALUATION_STATUSES:
        return ErrorKind.EVALUATOR_RAISED
    return ErrorKind.AGENT_RAISED


def with_kind(
    info: Mapping[str, Any], error: BaseException | None, phase: str, started: float
) -> dict[str, Any]:
    """A report's error entry with its `kind`: that of `error` raised in `phase` (an
    evaluator's entry without an exception: evaluator_raised). A call that timed out while an
    agent blocked the event loop (since the attempt `started`, monotonic) is put down to it,
    and its message says so."""
    entry = dict(info)
    if error is None:
        kind = ErrorKind.EVALUATOR_RAISED if phase == "evaluation" else ErrorKind.AGENT_RAISED
    else:
        kind = error_kind(error, phase)
    if kind is ErrorKind.PROVIDER_UNREACHABLE and error is not None:
        call = failed_call(error)
        block = recent_block(started) if call is not None and timed_out_waiting(call) else None
        if block is not None:
            kind = ErrorKind.LOOP_BLOCKED
            where = (
                f" in task {block.task_id} repeat {block.repeat_idx}"
                if block.task_id is not None
                else ""
            )
            entry["message"] = (
                f"{entry.get('message')} [not the provider: the event loop was blocked for "
                f"{block.blocked_s:.2f} s by agent {block.agent!r}{where}, so the answer could "
                "not be read in time]"
            )
    entry["kind"] = kind.value
    return entry
