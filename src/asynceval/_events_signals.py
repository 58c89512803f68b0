"""The events of provider signals (adaptive limits, rate headers, pauses, stalls), hedges and
the batch lane (DESIGN sections 16 and 17): a room of `asynceval.events`, which re-exports
every name here (import them from there).
"""

from __future__ import annotations

from ._event_output import write as _write

LIMIT_CHANGED = "limit_changed"
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
    cancelled: int = 0,
) -> None:
    """A batch ended (`status`: completed, failed, expired, cancelled) and its results were
    collected: `succeeded` lines answered their calls, `errored` and `expired` ones went back to
    their calls (sent again in a later batch while RETRY_MAX_ATTEMPTS allows), and `cancelled`
    ones were not done because the batch was cancelled (a stopped run cancels its open batches:
    their calls are gone; a batch cancelled elsewhere: its undone lines are sent again, as
    expired ones are). `cost_usd`: what its succeeded lines cost at the batch price (null when
    none was priced)."""
    fields = {"batch_id": batch_id, "status": status, "succeeded": succeeded}
    counts = {"errored": errored, "expired": expired, "cancelled": cancelled}
    _write(
        "info",
        BATCH_COMPLETED,
        {**fields, **counts, "elapsed_s": round(elapsed_s, 6), "cost_usd": cost_usd},
    )


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
