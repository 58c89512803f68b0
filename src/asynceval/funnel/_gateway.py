"""The gateway: one LLM call as a retry loop of attempts, each bounded by the limits.

Per attempt, in order: under a cost budget, the request's worst case reserved (before the slot:
a request the budget refuses takes no slot and is no LLM call), a concurrency slot (respecting
the endpoint's 429 pause and adaptive limit), the rate limiter's windows, then, once the
endpoint's provider has announced its rate limits, the budget it said is left and the windows of
what it announced (last, so the provider sees what they admitted), then the provider request
within LLM_CALL_TIMEOUT (an `anyio.move_on_after` deadline). Every answer's headers are read as
it comes, and a 429 is told apart as an overload or a rate refusal, by
`asynceval.funnel._signals`. The retry loop sits outside the slot, so backoff sleeps never hold
one; an attempt turned away by an overloaded provider comes back at the front of the line
instead (see `Gateway._attempt`). Every failed attempt that will be retried writes a `retry`
event; a call that fails for good writes `llm_call_failed` and raises `LLMCallFailed`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.lowlevel

from .. import events
from ..config import Lane
from ..errors import (
    AttemptTimeout,
    ProviderConnectionError,
    ProviderError,
    RateLimited,
)
from ..limits import ConcurrencyController, ProviderRates, RateLimiter, RetryPolicy, Slot
from ..telemetry import Telemetry, bound_or, start_call
from ._call import UNSET as UNSET
from ._call import Call, call_id, caller, traced
from ._call import Overrides as Overrides
from ._costing import Costing
from ._hedge import Hedger, hedger_for
from ._held import collect_if_dropped, scope_if_any
from ._lease import Lease, reserve_cost
from ._signals import Signals, flex_unavailable
from ._usage import Usage, current_usage

if TYPE_CHECKING:
    from ..runtime import Runtime

T = TypeVar("T")
Attempt = Callable[[Lease], Awaitable[T]]
"""One request: given the attempt's lease (for results that outlive it), returns the result."""


def _usage_attribute(result: object) -> Usage | None:
    usage = getattr(result, "usage", None)
    return usage if isinstance(usage, Usage) else None


_NOT_SENT = ("ConnectError", "ConnectTimeout")
"""How a connection failure that never reached the provider is named (`_replies`)."""

FLEX_CALL_TIMEOUT = 900.0
"""An attempt's deadline in the flex lane unless LLM_CALL_TIMEOUT is set: OpenAI's advice for
flex processing, which queues requests (15 minutes)."""

MAX_REQUEUES = 10
"""How many times one attempt may be turned away by an overloaded provider and sent again,
uncounted, before its 429 counts as a failed attempt."""


class Gateway:
    """Runs provider attempts through the rate limiter, the controller and the retry policy.

    Cheap to build (a few fields) and holding nothing of one event loop: each route builds one
    from its runtime's shared limiter, windows and policy (a model's route once per runtime).
    """

    __slots__ = (
        "call_timeout",
        "controller",
        "endpoint",
        "flex",
        "hedger",
        "rate_limiter",
        "retry_policy",
        "signals",
        "stream_idle_timeout",
        "telemetry",
    )

    def __init__(
        self,
        *,
        controller: ConcurrencyController,
        retry_policy: RetryPolicy,
        call_timeout: float,
        rate_limiter: RateLimiter | None = None,
        endpoint: str | None = None,
        stream_idle_timeout: float = 60.0,
        rates: ProviderRates | None = None,
        hedger: Hedger | None = None,
        flex: bool = False,
    ) -> None:
        if not call_timeout > 0:
            raise ValueError(f"LLM_CALL_TIMEOUT must be > 0, got {call_timeout}")
        if not stream_idle_timeout > 0:
            raise ValueError(f"LLM_STREAM_IDLE_TIMEOUT must be > 0, got {stream_idle_timeout}")
        self.controller = controller
        self.retry_policy = retry_policy
        self.call_timeout = call_timeout
        self.rate_limiter = rate_limiter
        self.endpoint = endpoint
        self.stream_idle_timeout = stream_idle_timeout  # a stream's longest wait for a chunk
        self.hedger = hedger  # LLM_HEDGE's: None when it is off (see `asynceval.funnel._hedge`)
        self.flex = flex  # the flex lane: its "resource unavailable" 429 is no overload
        # The route's telemetry for calls made outside a run (a run binds its own).
        self.telemetry: Telemetry | None = None
        # The endpoint's rate-limit headers and 429s (`rates`: the runtime's, shared).
        self.signals = (
            Signals(controller, endpoint, retry_policy.max_delay, rates, rate_limiter)
            if endpoint is not None
            else None
        )

    @classmethod
    def for_runtime(
        cls,
        runtime: Runtime,
        endpoint: str,
        own: Overrides | None = None,
        *,
        controller: ConcurrencyController | None = None,
        rate_limiter: RateLimiter | None = UNSET,
        retry_policy: RetryPolicy | None = None,
        call_timeout: float | None = None,
        lane: Lane = "live",
    ) -> Gateway:
        """A gateway on `runtime`'s shared limiter, windows, policy and timeout, each replaced
        by the caller's own where it has one (`own`; the keywords are the previous release's
        spelling of the same). In the flex `lane` an attempt's deadline is at least
        `FLEX_CALL_TIMEOUT` unless LLM_CALL_TIMEOUT (or the caller's own settings) says
        otherwise: flex answers are slow."""
        if own is None:
            own = Overrides(controller, rate_limiter, retry_policy, call_timeout)
        shared = own.controller is None and own.rate_limiter is UNSET  # the runtime's limits
        timeout = own.call_timeout or runtime.settings.llm_call_timeout
        if (
            lane == "flex"
            and own.call_timeout is None
            and "llm_call_timeout" not in runtime.settings.model_fields_set
        ):
            timeout = max(timeout, FLEX_CALL_TIMEOUT)
        return cls(
            controller=own.controller or runtime.limiter,
            retry_policy=own.retry_policy or runtime.retry_policy,
            call_timeout=timeout,
            rate_limiter=runtime.rate if own.rate_limiter is UNSET else own.rate_limiter,
            endpoint=endpoint,
            stream_idle_timeout=own.stream_idle_timeout or runtime.settings.llm_stream_idle_timeout,
            rates=runtime.provider_rates(endpoint) if shared else None,
            hedger=hedger_for(runtime, endpoint, own.hedge, own.hedge_budget),
            flex=lane == "flex",
        )

    def call(
        self,
        attempt: Attempt[T],
        *,
        agent: str | None = None,
        dimension: str | None = None,
        usage_of: Callable[[T], Usage | None] | None = None,
        estimated_tokens: int = 0,
        hedge: bool = True,
        costing: Costing | None = None,
        url: object = None,
        body: object = None,
    ) -> Awaitable[T]:
        """Make the call, retrying as the policy allows; raises `LLMCallFailed` when it gives up.

        `agent` and `dimension` default to the values bound with `events.bind_context`.
        `usage_of` reads the tokens a result reports (default: its `usage` attribute, if that
        is a `Usage`); a result whose attempt kept its lease (a stream) reports them when it
        releases it. `hedge=False` refuses LLM_HEDGE's second request for this call (a streamed
        answer: its body is never hedged). `costing` prices each request and reserves its worst
        case against the run's budget before it is sent (`BudgetExhausted` when it does not
        fit: never retried). `url` and `body` (the request's URL and JSON body, when the
        caller has them) describe an inference call to its OpenTelemetry span when telemetry
        is on (`asynceval.telemetry`; decided by the run, or by the route outside a run).
        What to await: with telemetry off, the call itself, no frame between.
        """
        if usage_of is None:
            usage_of = _usage_attribute
        call = Call(
            *caller(agent, dimension),
            call_id(),
            time.monotonic(),
            current_usage(),
            costing,
        )
        hedger = self.hedger if hedge else None
        if url is not None:
            telemetry = bound_or(self.telemetry)
            if telemetry is not None:
                lane = "flex" if self.flex else "live"
                span = start_call(
                    telemetry, url, body, call_id=call.call_id, agent=call.agent,
                    dimension=call.dimension, lane=lane,
                )  # fmt: skip
                if span is not None:
                    call.span = span
                    return traced(
                        span, self._call(attempt, call, estimated_tokens, usage_of, hedger), call
                    )
        return self._call(attempt, call, estimated_tokens, usage_of, hedger)

    async def _call(
        self,
        attempt: Attempt[T],
        call: Call,
        estimated_tokens: int,
        usage_of: Callable[[T], Usage | None],
        hedger: Hedger | None,
    ) -> T:
        try:
            failure: _TurnedAway | ProviderError | None = None
            try:
                # The first send with no frame between: most calls end here, and every frame
                # is resumed again at each of the call's suspensions.
                result = await self._send(attempt, call, estimated_tokens, usage_of, 0, hedger)
            except (_TurnedAway, ProviderError) as exc:
                failure = exc
            if failure is not None:  # outside the handler: later errors are not chained to it
                result = await self._after_first_send(
                    failure, call, attempt, estimated_tokens, usage_of, hedger
                )
        except ProviderError as exc:
            raise call.failed(exc) from exc
        if call.usage is not None:
            call.usage.llm_calls += 1
        if call.handed_on:
            # The freed slot went to a caller in line: it sends first, while what this caller
            # does with the answer (parse, evaluate, report) waits one turn of the loop. Else
            # the slot stays idle until this caller next suspends: fewer calls in flight.
            await anyio.lowlevel.checkpoint()
        return result

    async def _after_first_send(
        self,
        failure: _TurnedAway | ProviderError,
        call: Call,
        attempt: Attempt[T],
        estimated_tokens: int,
        usage_of: Callable[[T], Usage | None],
        hedger: Hedger | None,
    ) -> T:
        """The rest of a call whose first send failed: the first attempt's own sends again if
        it was turned away, then tenacity (a retryable failure is handed to it as attempt 1's
        outcome, so its stop, wait and before_sleep see exactly what happened)."""
        if isinstance(failure, _TurnedAway):
            try:
                return await self._attempt(
                    attempt, call, estimated_tokens, usage_of, hedger, failure
                )
            except ProviderError as exc:
                failure = exc
        if not failure.retryable:
            raise failure
        first: ProviderError | None = failure
        async for state in self.retry_policy.retrying(before_sleep=call.on_retry):
            with state:
                if first is not None:
                    failure, first = first, None
                    raise failure
                call.attempts += 1
                result = await self._attempt(attempt, call, estimated_tokens, usage_of, hedger)
        return result

    async def _attempt(
        self,
        attempt: Attempt[T],
        call: Call,
        estimated_tokens: int,
        usage_of: Callable[[T], Usage | None],
        hedger: Hedger | None,
        turned: _TurnedAway | None = None,
    ) -> T:
        """One attempt as the retry policy counts them (`turned`: its first send, already
        turned away). While an overloaded provider turns it away (a 429 as it serves our other
        calls), it is sent again from the front of the line, uncounted, after the Retry-After
        alone (no backoff, no endpoint pause), and ahead of later arrivals: it keeps its place
        rather than failing after RETRY_MAX_ATTEMPTS while the calls behind it succeed. At most
        `MAX_REQUEUES` times, so a request that the provider always refuses still ends."""
        for requeue in range(0 if turned is None else 1, MAX_REQUEUES + 1):
            if turned is not None:
                # The provider's Retry-After is honoured by this call alone: no endpoint
                # pause, since the provider is busy serving the others, not refusing everyone.
                delay = min(turned.error.retry_after or 0.0, self.retry_policy.max_delay)
                call.on_turned_away(turned.error, delay)
                if delay > 0:
                    await anyio.sleep(delay)
            try:
                return await self._send(attempt, call, estimated_tokens, usage_of, requeue, hedger)
            except _TurnedAway as exc:
                turned = exc
        raise AssertionError("unreachable: the last send raises the 429 itself")

    async def _send(
        self,
        attempt: Attempt[T],
        call: Call,
        estimated_tokens: int,
        usage_of: Callable[[T], Usage | None],
        requeue: int,
        hedger: Hedger | None = None,
    ) -> T:
        """One request: a slot (ahead of later arrivals when it comes back), its turn in the
        rate windows, then the provider within LLM_CALL_TIMEOUT; with a `hedger`, raced by a
        second one if it is slow (which comes back here without one)."""
        if hedger is not None:
            return await hedger.send(self, attempt, call, estimated_tokens, usage_of, requeue)
        controller, limiter, endpoint = self.controller, self.rate_limiter, self.endpoint
        # Before the slot: a request the budget refuses is no LLM call (no queueing, acquired
        # or released event; not in llm_calls) and waits for budget room holding none.
        costing, share = call.costing, None
        if costing is not None and costing.budget is not None:
            share = await reserve_cost(costing, call.usage)
        slot = self._new_slot(call, requeue)
        try:
            held = scope_if_any()
            if held:  # a stream this scope left unread must not block it: closed if no slot
                await collect_if_dropped(held, controller, endpoint)
            await slot.__aenter__()
        except BaseException:
            if share is not None and costing is not None:  # never sent: its reservation back
                costing.settle(share, Decimal(0))
            raise
        lease = Lease(slot, limiter, call.usage, costing, share)
        if call.span is not None:  # told each answer's usage and cost as its lease is released
            call.span.attempt_started(lease, slot.wait_s)
        signals = self.signals
        try:
            if limiter is not None:
                lease._reservation = await limiter.acquire(estimated_tokens)
            if signals is not None:
                lease.on_answer = signals.on_answer
                if signals.rates.active:  # the provider announced its limits: keep them
                    await signals.acquire(lease, estimated_tokens)
            result = await self._request(attempt, lease, requeue)
        except BaseException as exc:
            if isinstance(exc, ProviderConnectionError) and exc.message.startswith(_NOT_SENT):
                lease.sent_seq = 0  # it never reached the provider: nothing to bill
            lease.release()  # the request counted (if it went); its tokens were not used
            raise
        controller.succeeded(endpoint)
        if not lease.kept:
            try:
                usage = usage_of(result)
            except Exception:  # an odd usage field must not keep the slot
                usage = None
            call.handed_on = lease.release(usage)
        return result

    def _new_slot(self, call: Call, requeue: int) -> Slot:
        """A slot for one request of `call`, ahead of later arrivals when it comes back."""
        return self.controller.slot(
            agent=call.agent,
            dimension=call.dimension,
            call_id=call.call_id,
            endpoint=self.endpoint,
            front=requeue > 0,
        )

    async def _request(self, attempt: Attempt[T], lease: Lease, requeue: int) -> T:
        """The provider request under the per-attempt timeout; a 429 decides, while the slot is
        still held (so queued callers see it), between an overload and a rate refusal."""
        lease.sent_seq = self.controller.sending(self.endpoint, +1)
        # A streamed answer is still being served after this returns: its end says so.
        lease._unsend = functools.partial(self.controller.sending, self.endpoint, -1)
        try:
            # The deadline's cancel scope itself (fail_after is this plus two generator
            # context managers, about 3 us a call): a timeout ends the block without an error.
            with anyio.move_on_after(self.call_timeout) as scope:
                try:
                    return await attempt(lease)
                except TimeoutError:
                    if not scope.cancel_called:
                        raise  # the attempt's own, not our deadline's
                    # our deadline's cancellation, turned into a TimeoutError by the client
            events.timeout(
                agent=lease.agent,
                dimension=lease.dimension,
                call_id=lease.call_id,
                timeout_s=self.call_timeout,
            )
            raise AttemptTimeout(self.call_timeout) from None
        except RateLimited as exc:
            if self.flex and flex_unavailable(exc):
                raise  # flex capacity, not our concurrency: retried with backoff, nothing cut
            # An overload is sent again from the front; a rate refusal paused the endpoint.
            signals = self.signals
            if signals is not None and signals.refused(exc, lease) and requeue < MAX_REQUEUES:
                raise _TurnedAway(exc) from exc
            raise
        finally:
            if not lease.kept:
                lease._unsend = None
                self.controller.sending(self.endpoint, -1)


class _TurnedAway(Exception):
    """An attempt's 429 came from a provider busy with our other calls: send it again."""

    def __init__(self, error: RateLimited) -> None:
        super().__init__(str(error))
        self.error = error
