"""One call in the batch lane: its line queued, its answer read as the live endpoint's.

A call made in the batch lane (`asynceval.funnel._batch_lane`) puts one line (custom_id: its
call id) into its batcher and waits for the answer, which it reads as if the live endpoint had
answered: a model's reader gets a reply with the line's status and body (so `LLMCallFailed` as
on the live path when the provider refuses it), an SDK gets an `httpx.Response` with them (so it
raises its own error). A line that errored retryably (408, 429, 5xx), expired, or came back
unreadable goes into a later batch while the call has attempts left (RETRY_MAX_ATTEMPTS in all,
each a `retry` event); a line whose batch could not be made fails at once (the creation was
retried already).

Under a run's budget the call reserves its worst case (at the batch price: the route's pricing
knows the lane) when its line is queued, held over its attempts, and settles it to what the
answer cost. A succeeded answer counts into the repetition's usage: one LLM call, the tokens
its body reports, its cost. The call takes no slot: the batch's creation does. Neither
LLM_CALL_TIMEOUT nor an SDK's own timeout bounds the wait for a batch (up to 24 hours): a
repetition's TASK_TIMEOUT does, as any cancellation of the call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..errors import AttemptTimeout, BudgetExhausted, LLMCallFailed, ProviderError
from ..telemetry import bound_or, start_call
from ._batch_line import BatchLine, State
from ._call import Call, call_id, caller
from ._replies import check_response, provider_error
from ._usage import current_usage

if TYPE_CHECKING:
    import httpx

    from ._batch_relay import RelayedBatcher
    from ._batch_wire import LineResult
    from ._batcher import Batcher
    from ._cache import CacheUse
    from ._costing import Costing
    from ._replies import Reply
    from ._route import Route

T = TypeVar("T")

_PER_REQUEST = frozenset(
    {
        "accept", "accept-encoding", "connection", "content-length", "content-type", "host",
        "idempotency-key", "transfer-encoding",
    }
)  # fmt: skip
"""Headers that describe one request, not who asks: not carried to a batch's requests."""

_JSON = {"content-type": "application/json"}


def batch_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """What of a call's headers its batch's requests carry: who asks (credentials, API version,
    organisation, project, the caller's own default headers), not what describes one request
    (its body's type and length, an SDK's per-request `x-stainless-*`)."""
    kept = {}
    for name, value in headers:
        low = name.lower()
        if low not in _PER_REQUEST and not low.startswith("x-stainless-"):
            kept[low] = value
    return kept


class _LineReply(NamedTuple):
    """A line's answer as a model's reader reads a live one (`Reply`)."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes


def _reply(result: LineResult) -> _LineReply:
    return _LineReply(result.status_code or 200, _JSON, result.body)


async def post_in_batches(
    batcher: Batcher | RelayedBatcher,
    route: Route,
    url: str,
    content: bytes,
    body: Mapping[str, Any],
    read: Callable[[Reply], T],
    agent: str | None,
    dimension: str | None,
    use: CacheUse | None = None,
) -> T:
    """A model's call (`Route.post`) in the batch lane: what `read` makes of its answer;
    `LLMCallFailed` when it fails for good. `use`: its place in the call journal (its line is
    journaled with that key, and a resumed run matches it by it)."""
    costing = route.pricing.costing(content, body)
    return await _in_batches(
        batcher,
        _Sent(route, url, body, content, costing),
        agent,
        dimension,
        lambda result: read(_reply(result)),
        None,
        use,
    )


async def send_in_batches(
    batcher: Batcher | RelayedBatcher,
    route: Route,
    request: httpx.Request,
    body: dict[str, Any],
    agent: str | None,
    use: CacheUse | None = None,
) -> httpx.Response:
    """A transport's request (`Route.send`) in the batch lane: the line's answer as an
    `httpx.Response`; once the funnel gives up, the last error answer (the SDK raises its own
    error), else `httpx.ReadTimeout` (the line was never done)."""
    import httpx

    costing = route.pricing.costing(request.content, body)
    last: list[LineResult] = []

    def accept(result: LineResult) -> httpx.Response:
        response = _response(result, request)
        check_response(response)  # a 2xx whose JSON is broken: malformed, sent again
        return response

    try:
        sent = _Sent(route, str(request.url), body, request.content, costing)
        return await _in_batches(batcher, sent, agent, None, accept, last, use)
    except LLMCallFailed as exc:
        result = last[-1] if last else None
        if result is not None and result.status_code is not None and not result.succeeded:
            return _response(result, request)
        if isinstance(exc.__cause__, AttemptTimeout):
            raise httpx.ReadTimeout(str(exc), request=request) from exc
        raise httpx.ConnectError(str(exc), request=request) from exc


def _response(result: LineResult, request: httpx.Request) -> httpx.Response:
    import httpx

    status = result.status_code or 200
    return httpx.Response(status, headers=_JSON, content=result.body, request=request)


class _Sent(NamedTuple):
    """What a call in the batch lane sends: its route, URL, JSON body and its bytes, its price."""

    route: Route
    url: str
    body: Mapping[str, Any]
    content: bytes
    costing: Costing | None


async def _in_batches(
    batcher: Batcher | RelayedBatcher,
    sent: _Sent,
    agent: str | None,
    dimension: str | None,
    accept: Callable[[LineResult], T],
    last: list[LineResult] | None,
    use: CacheUse | None,
) -> T:
    """The call (see the module): `accept` makes the caller's result of a succeeded line
    (raising `ProviderError` for one it cannot read). With telemetry on, its span (lane
    `batch`) says its retries, its answer's tokens and cost, and its outcome."""
    costing = sent.costing
    call = Call(*caller(agent, dimension), call_id(), time.monotonic(), current_usage(), costing)
    telemetry = bound_or(sent.route.gateway.telemetry)
    if telemetry is not None:
        call.span = start_call(
            telemetry, sent.url, sent.body, call_id=call.call_id, agent=call.agent,
            dimension=call.dimension, lane="batch",
        )  # fmt: skip
    try:
        value = await _answered(batcher, sent.content, call, accept, last, use)
    except BaseException as exc:
        if call.span is not None:
            call.span.failed(exc, call.attempts)
        raise
    if call.span is not None:
        call.span.succeeded(value, call.attempts)
    return value


async def _answered(
    batcher: Batcher | RelayedBatcher,
    content: bytes,
    call: Call,
    accept: Callable[[LineResult], T],
    last: list[LineResult] | None,
    use: CacheUse | None,
) -> T:
    """The call's attempts, each a line in a batch, until one is accepted or it fails."""
    costing = call.costing
    data = batcher.wire.line(call.call_id, content)
    key, url = (None, "") if use is None or use.journal is None else (use.key, use.url)
    line = BatchLine(call.call_id, data, costing, call.usage, key, url)
    try:
        while True:
            try:
                await line.reserve()
            except BudgetExhausted as exc:
                if call.usage is not None:
                    call.usage.budget_refusal = exc
                raise
            try:
                result = await batcher.request(line)
            except BaseException:
                if line.state is State.ANSWERED and line.result is not None:
                    _count(call, line)  # answered as it was cancelled: billed all the same
                raise
            if last is not None:
                last[:] = [result]
            failure: ProviderError
            if result.succeeded:
                _count(call, line)
                if call.span is not None:
                    call.span.answered(line.tokens, line.cost)
                try:
                    value = accept(result)
                except ProviderError as exc:
                    failure = exc
                else:
                    if call.usage is not None:
                        call.usage.llm_calls += 1
                    return value
            else:
                failure = _error(result)
            if result.final or not _retryable(failure) or call.attempts >= batcher.max_attempts:
                raise call.failed(failure) from failure
            _again(call, failure)
            line.again()
    finally:
        if line.state is not State.WITHDRAWN:
            line.settle(Decimal(0))  # what it still holds was not billed (its answer failed)


def _count(call: Call, line: BatchLine) -> None:
    """A succeeded line's tokens and cost, into the call's repetition."""
    counter = call.usage
    if counter is None or line.result is None or not line.result.succeeded:
        return
    if line.tokens is not None:
        counter.add_tokens(line.tokens)
    if line.costing is not None:  # an answer without usage costs its worst case
        counter.add_cost(line.costing.model, line.cost, worst_case=line.tokens is None)


def _error(result: LineResult) -> ProviderError:
    """A line's failure as the funnel's error: the live endpoint's for its status, or for a
    line not done, an `AttemptTimeout` (retried)."""
    if result.kind == "expired":
        said = provider_error(_LineReply(500, _JSON, result.body)).message if result.body else ""
        message = "the batch ended before this request was answered"
        return AttemptTimeout(0.0, f"{message} ({said})" if said else message)
    return provider_error(_reply(result))


def _retryable(error: ProviderError) -> bool:
    """Whether a line's failure may go into a later batch: what the live path retries, and any
    5xx (the batch's own server errors)."""
    status = error.status_code
    return error.retryable or (status is not None and status >= 500)


def _again(call: Call, error: ProviderError) -> None:
    """The line goes into a later batch: a `retry` event, one more attempt."""
    call.retried(error.status_code, 0.0, f"{error} (sent again in a later batch)")
    call.attempts += 1
