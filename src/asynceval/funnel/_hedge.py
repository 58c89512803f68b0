"""Hedging the slow tail (LLM_HEDGE, DESIGN section 17): a request still out past its endpoint's
learned p95 latency (`p95`) or a given delay (seconds) is sent once more; the first answer wins.

The second request (the hedge) is a request of its own through the gateway's one-request path:
its own slot, whose queueing / acquired / released events carry its `hedge_call_id` (so
`asynceval logs check` counts it as a call and the limit proof holds), its own turn in the rate
windows, its own LLM_CALL_TIMEOUT. The first answer wins; the other request is cancelled (its
slot released at once, its connection closed: the provider sees it go), or, had it answered in the
same moment, its answer is counted and closed. `hedge_sent` / `hedge_won` events say what happened.

When a hedge goes, looked at once when the delay passes (a call that finds no room then is not
hedged, and never waits for room):

- a slot is free now and nobody waits in line: a hedge never goes ahead of a caller in line;
- the endpoint is neither paused nor below its limit (an overloaded provider gets no more load),
  the rate windows have a request to spare, and this is no cluster worker (the cluster's line
  cannot be seen from here, so a hedge could go ahead of another worker's callers);
- the budget: per runtime (the CLI builds one per run, a benchmark given settings one per run; the
  process default runtime spans its process), hedges <= LLM_HEDGE_BUDGET x the requests sent
  through hedging gateways (each attempt's first request, retries included; hedges excluded).

`p95` is learned per endpoint (per runtime) from the latencies of successful requests (from the
request leaving, after its slot and rate turn, to its answer: waiting in line is not the
provider's slowness): the last `WINDOW`, the quantile recomputed every `REFRESH` samples, so the
cost per call is an append; no hedge before `MIN_SAMPLES`. A first request cancelled because its
hedge won counts as a sample of its time so far: its true latency is at least that (beyond the
p95), and leaving the tail out would pull the estimate down with every hedge.

Failures: a request that fails while the other is still out waits for the other; when both fail,
the first request's error is the attempt's outcome, and the retry policy decides as for any
attempt (a hedge never counts as an attempt). The call is counted once in `llm_calls`; a hedge adds
one to `usage.hedges`, and every request that answered counts its tokens (both, when both did).
Cancelling the call cancels both requests.

With LLM_HEDGE=off (the default) the gateway holds no `Hedger` and a call costs one check.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio

from .. import events
from ._call import Call, call_id
from ._usage import Usage

if TYPE_CHECKING:
    from ..config import Hedge
    from ..runtime import Runtime
    from ._gateway import Attempt, Gateway
    from ._lease import Lease

T = TypeVar("T")

MIN_SAMPLES = 20
"""Successful requests an endpoint must have answered before `p95` hedges any of its calls."""
WINDOW = 256
"""The latencies the p95 is taken from: the endpoint's most recent successful requests."""
REFRESH = 16
"""The p95 is recomputed (a sort of `WINDOW` floats, ~10 us) once per this many samples."""


class Latencies:
    """One endpoint's recent request latencies and their p95 (None before `MIN_SAMPLES`).

    Shared by every thread and loop of its runtime without a lock: an append or an item set is
    atomic under the GIL, and a p95 computed from a ring that another thread wrote to meanwhile is
    just as good an estimate.
    """

    __slots__ = ("_count", "_ring", "p95")

    def __init__(self) -> None:
        self._ring: list[float] = []
        self._count = 0
        self.p95: float | None = None

    def add(self, seconds: float) -> None:
        """One request's latency."""
        count = self._count
        if count < WINDOW:
            self._ring.append(seconds)
        else:
            self._ring[count % WINDOW] = seconds
        self._count = count = count + 1
        if count >= MIN_SAMPLES and (count - MIN_SAMPLES) % REFRESH == 0:
            ordered = sorted(self._ring)
            self.p95 = ordered[math.ceil(0.95 * len(ordered)) - 1]  # nearest rank


class Hedging:
    """One runtime's hedging: the rule, the budget and what was spent of it, and each endpoint's
    `Hedger` (see the module)."""

    __slots__ = ("__weakref__", "_endpoints", "_lock", "budget", "delay", "hedges", "requests")

    def __init__(self, rule: Hedge, budget: float) -> None:
        if rule == "off":
            raise ValueError("LLM_HEDGE=off has no hedging")
        self.delay: float | None = None if rule == "p95" else float(rule)  # None: learned p95
        self.budget = budget
        self.requests = 0  # first requests sent through its hedgers (lost increments: fewer hedges)
        self.hedges = 0
        self._endpoints: dict[str | None, Hedger] = {}
        self._lock = threading.Lock()

    def endpoint(self, endpoint: str | None) -> Hedger:
        """The hedger of `endpoint`: one per endpoint, so its gateways share what they learn."""
        with self._lock:
            hedger = self._endpoints.get(endpoint)
            if hedger is None:
                hedger = self._endpoints[endpoint] = Hedger(self)
            return hedger

    def spend(self) -> bool:
        """Take one hedge from the budget if it allows one more."""
        with self._lock:
            if self.hedges + 1 > self.budget * self.requests:
                return False
            self.hedges += 1
            return True


_of_runtime: weakref.WeakKeyDictionary[Runtime, Hedging] = weakref.WeakKeyDictionary()
_of_runtime_lock = threading.Lock()


def hedger_for(runtime: Runtime, endpoint: str | None) -> Hedger | None:
    """The hedger of `endpoint` on `runtime`, or None with LLM_HEDGE=off. Each runtime's hedging
    is kept beside it here, as long as it lives (the runtime layer sits below the funnel)."""
    settings = runtime.settings
    if settings.llm_hedge == "off":
        return None
    with _of_runtime_lock:
        hedging = _of_runtime.get(runtime)
        if hedging is None:
            hedging = Hedging(settings.llm_hedge, settings.llm_hedge_budget)
            _of_runtime[runtime] = hedging
    return hedging.endpoint(endpoint)


class Hedger:
    """Hedges the calls of one endpoint: `send` is the gateway's one request, raced by a hedge."""

    __slots__ = ("hedging", "latencies")

    def __init__(self, hedging: Hedging) -> None:
        self.hedging = hedging
        self.latencies = Latencies() if hedging.delay is None else None

    def delay(self) -> float | None:
        """How long a request may be out before it is hedged; None: not yet known."""
        fixed = self.hedging.delay
        return fixed if fixed is not None else self.latencies.p95 if self.latencies else None

    async def send(
        self,
        gateway: Gateway,
        attempt: Attempt[T],
        call: Call,
        estimated_tokens: int,
        usage_of: Callable[[T], Usage | None],
        requeue: int,
    ) -> T:
        """`gateway._send` of one attempt, hedged once if it is still out after `delay()`."""
        self.hedging.requests += 1
        race = _Race(self, gateway, attempt, call, estimated_tokens, usage_of)
        return await race.run(requeue)

    def may_hedge(self, gateway: Gateway, estimated_tokens: int) -> bool:
        """Whether a hedge may go now (see the module), taking it from the budget if so."""
        controller, endpoint = gateway.controller, gateway.endpoint
        if controller.shared is not None:
            return False
        stats = controller.statistics()
        if stats.waiting or stats.active >= stats.limit or endpoint in stats.endpoint_limits:
            return False
        if endpoint is not None and controller.cooldown_remaining(endpoint) > 0:
            return False
        limiter = gateway.rate_limiter
        if limiter is not None:
            requests, tokens = limiter.available()
            if (requests is not None and requests < 1) or (
                tokens is not None and tokens < estimated_tokens
            ):
                return False
        return self.hedging.spend()


async def _discard(result: object) -> None:
    """Close a losing answer that also arrived, if it holds anything (a response stream keeps its
    slot until closed); its tokens were counted when its request released its slot."""
    close = getattr(result, "aclose", None)
    if close is not None:
        with anyio.CancelScope(shield=True):
            await close()


class _Race(Generic[T]):
    """One attempt's first request, and its hedge if one goes (see the module).

    The first request runs in the caller's task inside `scope`, which the hedge cancels when it
    answers first; the hedge runs in a task of its own, started from a timer when the delay
    passes, inside `hedge_scope`, which the caller cancels when its request answers first (or
    the call is cancelled); then it waits for the hedge's task to end, shielded, so that no slot
    outlives the call. Both run on the caller's loop: `winner` needs no lock.
    """

    __slots__ = (
        "_attempt",
        "_call",
        "_estimated",
        "_gateway",
        "_hedger",
        "_usage_of",
        "delay",
        "first_at",
        "hedge_at",
        "hedge_result",
        "hedge_scope",
        "hedge_sent_at",
        "over",
        "scope",
        "sent_at",
        "task",
        "timer",
        "winner",
    )

    def __init__(
        self,
        hedger: Hedger,
        gateway: Gateway,
        attempt: Attempt[T],
        call: Call,
        estimated_tokens: int,
        usage_of: Callable[[T], Usage | None],
    ) -> None:
        self._hedger = hedger
        self._gateway = gateway
        self._attempt = attempt
        self._call = call
        self._estimated = estimated_tokens
        self._usage_of = usage_of
        self.delay = hedger.delay()
        self.scope = anyio.CancelScope()
        self.sent_at = self.first_at = 0.0  # monotonic; 0: not sent / not answered
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None
        self.winner: str | None = None  # "first" or "hedge": whichever answered first
        self.over = False  # the race is decided or abandoned: a hedge not yet started stays home
        self.hedge_scope: anyio.CancelScope | None = None
        self.hedge_result: T | None = None
        self.hedge_sent_at = self.hedge_at = 0.0

    async def run(self, requeue: int) -> T:
        """The attempt's outcome: the first answer of the two, else the first request's error."""
        failure: Exception | None = None
        try:
            with self.scope:
                try:
                    result = await self._gateway._send(
                        self._first, self._call, self._estimated, self._usage_of, requeue
                    )
                except Exception as exc:  # a cancellation passes: the call's, or the hedge's win
                    failure = exc
                else:
                    self.first_at = time.monotonic()
                    if self.winner is None:
                        self.winner = "first"
                        self._learn(self.first_at - self.sent_at)
                        return result
                    await _discard(result)  # the hedge won in the same turn of the loop
            if self.winner == "hedge":
                return self.hedge_result  # type: ignore[return-value]  # set with the winner
            self._stop_timer()  # the first failed before its delay: no hedge now
            if self.task is not None:
                await asyncio.wait((self.task,))  # the hedge is out: its answer may still win
                if self.winner == "hedge":
                    return self.hedge_result  # type: ignore[return-value]
            assert failure is not None  # only the hedge's win cancels `scope`
            raise failure
        finally:
            await self._end()

    async def _first(self, lease: Lease) -> T:
        """The first request, timed from when it leaves: its delay starts then."""
        self.sent_at = time.monotonic()
        if self.delay is not None:
            self.timer = asyncio.get_running_loop().call_later(self.delay, self._due)
        return await self._attempt(lease)

    def _due(self) -> None:
        """The delay passed with the first request still out: hedge it if there is room. A loop
        callback, run in a copy of the caller's context (its agent, usage counter, runtime), which
        the hedge's task copies in turn."""
        self.timer = None
        if self.over or self.winner is not None:
            return
        if not self._hedger.may_hedge(self._gateway, self._estimated):
            return
        call = self._call
        hedge = Call(call.agent, call.dimension, call_id(), time.monotonic(), call.usage)
        events.hedge_sent(
            agent=call.agent,
            dimension=call.dimension,
            call_id=call.call_id,
            hedge_call_id=hedge.call_id,
            after_s=self.delay or 0.0,
        )
        if call.usage is not None:
            call.usage.hedges += 1
        # An asyncio task, not an anyio one: a loop callback has no task for anyio to find its
        # backend by. The hedge makes its cancel scope once it runs.
        self.task = asyncio.get_running_loop().create_task(self._hedge(hedge))

    async def _hedge(self, hedge: Call) -> None:
        """The hedge's task: one request; if it answers first, the first request is cancelled."""
        if self.over:  # the first request ended before this task began
            return
        self.hedge_scope = anyio.CancelScope()  # set before this task first suspends
        with self.hedge_scope:
            try:
                result = await self._gateway._send(
                    self._hedge_attempt, hedge, self._estimated, self._usage_of, 0
                )
            except Exception:
                return  # the first request decides (see `run`)
            self.hedge_at = time.monotonic()
            self._learn(self.hedge_at - self.hedge_sent_at)
            if self.winner is None:
                self.winner, self.hedge_result = "hedge", result
                self._call.handed_on = hedge.handed_on
                self.scope.cancel()
            else:
                await _discard(result)

    async def _hedge_attempt(self, lease: Lease) -> T:
        self.hedge_sent_at = time.monotonic()
        return await self._attempt(lease)

    def _stop_timer(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()

    def _learn(self, seconds: float) -> None:
        latencies = self._hedger.latencies
        if latencies is not None:
            latencies.add(seconds)

    async def _end(self) -> None:
        """Whatever the outcome: no timer left, the hedge over (cancelled if still out, waited
        for shielded: its slot is released before the call returns), and `hedge_won` said."""
        self.over = True
        self._stop_timer()
        task = self.task
        if task is None:
            return
        if self.hedge_scope is not None:
            self.hedge_scope.cancel()
        if not task.done():
            with anyio.CancelScope(shield=True):
                await asyncio.wait((task,))
        saved = None
        if self.winner == "hedge":
            if self.first_at:  # the first answered too, just later
                saved = self.first_at - self.hedge_at
            elif self.sent_at:  # cancelled: at least this slow (see the module)
                self._learn(time.monotonic() - self.sent_at)
        if self.winner is not None:
            call = self._call
            events.hedge_won(
                agent=call.agent,
                dimension=call.dimension,
                call_id=call.call_id,
                winner=self.winner,
                saved_s=saved,
            )
