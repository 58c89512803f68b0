"""Hedging the slow tail (LLM_HEDGE, DESIGN section 17): a request still out past its endpoint's
learned p95 latency (`p95`) or a given delay (seconds) is sent once more; the first answer wins.

The second request (the hedge) is a request of its own through the gateway's one-request path:
its own slot, whose queueing / acquired / released events carry its `hedge_call_id` (so
`asynceval logs check` counts it as a call and the limit proof holds), its own turn in the rate
windows, its own LLM_CALL_TIMEOUT. The first answer wins; the other request is cancelled (its
slot released at once, its connection closed: the provider sees it go), or, had it answered in the
same moment, its answer is counted and closed. `hedge_sent` / `hedge_won` events say what happened.

When a hedge goes, once the delay has passed:

- a slot is free now and nobody waits in line: a hedge never goes ahead of a caller in line, and
  never waits in line itself (a request that finds no free slot is looked at again after a
  quarter of the delay, as long as it is out);
- the endpoint is neither paused nor below its limit (an overloaded provider gets no more load),
  the rate windows have a request to spare, and this is no cluster worker (the cluster's line
  cannot be seen from here, so a hedge could go ahead of another worker's callers);
- the budget: per runtime (the CLI builds one per run, a benchmark given settings one per run; the
  process default runtime spans its process), hedges <= LLM_HEDGE_BUDGET x the requests sent
  through hedging gateways so far (each attempt's first request, retries included; hedges not),
  so with 5% the first hedge can go with the 20th request. Requests past their delay that found
  the budget spent wait for it, and the next hedge it allows goes to the one out the longest:
  the slowest requests are the tail.

`p95` is learned per endpoint (per runtime) from first requests' latencies (from the request
leaving, after its slot and rate turn, to its answer: waiting in line is not the provider's
slowness; a hedge's own latency is not learned: hedges that would answer late are cancelled when
the first answers, so those that answer are the fast ones): the last `WINDOW`, the quantile
recomputed every `REFRESH` samples, so the cost per call is an append. The estimate is
Kaplan-Meier's (`Latencies`): a first request cancelled because its hedge answered first, and every
first request still out, count as at least as slow as they have been so far. No hedge before
`MIN_SAMPLES` answers, nor while the requests still out leave the tail unknown (early in a run the
answers are the fast requests; the slow ones are still out): requests sent meanwhile are timed
once the p95 is known.

Failures: a request that fails while the other is still out waits for the other; when both fail,
the first request's error is the attempt's outcome, and the retry policy decides as for any
attempt (a hedge never counts as an attempt). The call is counted once in `llm_calls`; a hedge adds
one to `usage.hedges`, and every request that answered counts its tokens (both, when both did).
Cancelling the call cancels both requests.

With LLM_HEDGE=off (the default) the gateway holds no `Hedger` and a call costs one check.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ._race import Race
from ._usage import Usage

if TYPE_CHECKING:
    from ..config import Hedge
    from ..runtime import Runtime
    from ._call import Call
    from ._gateway import Attempt, Gateway

T = TypeVar("T")

MIN_SAMPLES = 20
"""Successful requests an endpoint must have answered before `p95` hedges any of its calls."""
WINDOW = 256
"""The latencies the p95 is taken from: the endpoint's most recent successful requests."""
REFRESH = 32
"""The p95 is recomputed (a sort of `WINDOW` samples, ~30 us) once per this many samples."""


class Latencies:
    """One endpoint's recent request latencies and their p95 (None before `MIN_SAMPLES`).

    A first request cancelled because its hedge answered first is a censored sample: its
    latency is only known to be at least its time so far. Taking that time as its latency would
    lighten the tail (every hedge would pull the p95 down, and bring more hedges); leaving it out
    would too. So the p95 is the Kaplan-Meier estimate: a censored sample counts as still out up
    to its time, then drops out of the count; with none censored it is the nearest-rank p95.

    Shared by every thread and loop of its runtime without a lock: an append or an item set is
    atomic under the GIL, and a p95 computed from a ring that another thread wrote to meanwhile is
    just as good an estimate.
    """

    __slots__ = ("_count", "_known", "_ring", "_still_out", "p95")

    def __init__(
        self, still_out: Callable[[], list[float]], known: Callable[[], None] | None = None
    ) -> None:
        self._ring: list[float] = []  # seconds; a censored sample as its time, negated
        self._count = 0
        self.p95: float | None = None
        self._still_out = still_out  # the times so far of the requests out now
        self._known = known  # called once, when the p95 is first known

    def add(self, seconds: float, censored: bool = False) -> None:
        """One request's latency (`censored`: at least this long; it never answered)."""
        count = self._count
        value = -seconds if censored else seconds
        if count < WINDOW:
            self._ring.append(value)
        else:
            self._ring[count % WINDOW] = value
        self._count = count = count + 1
        # Until the p95 is first known, looked for at each answer (hedging starts as soon as
        # the tail is known, not up to REFRESH answers later); then once per REFRESH.
        if count >= MIN_SAMPLES and (self.p95 is None or (count - MIN_SAMPLES) % REFRESH == 0):
            # Requests still out are censored samples too (at least this slow so far): else the
            # slow ones would be missing until they answer (early in a run, all of them).
            still = [-seconds for seconds in self._still_out()]
            p95 = _p95(self._ring + still if still else self._ring)
            if p95 is not None:  # else the last estimate stands
                known, self.p95 = self.p95 is not None, p95
                if not known and self._known is not None:
                    self._known()


def _p95(ring: list[float]) -> float | None:
    """The Kaplan-Meier p95 of `ring` (censored samples negated): the first answer time at which
    the share still out falls to 5%; None when it never does, as early in a run, when the
    requests still out are the slow ones and nothing has answered as late yet (the tail is not
    known: no hedging on a guess)."""
    ordered = sorted(ring, key=abs)
    at_risk = len(ordered)
    out = 1.0  # the share of requests still out
    for value in ordered:
        if value >= 0:  # an answer
            out *= 1.0 - 1.0 / at_risk
            if out <= 0.05 + 1e-9:
                return value
        at_risk -= 1
    return None


class Hedging:
    """One runtime's hedging: the rule, the budget and what was spent of it, and each endpoint's
    `Hedger` (see the module)."""

    __slots__ = (
        "__weakref__",
        "_endpoints",
        "_lock",
        "budget",
        "delay",
        "hedges",
        "requests",
        "waiting",
    )

    def __init__(self, rule: Hedge, budget: float) -> None:
        if rule == "off":
            raise ValueError("LLM_HEDGE=off has no hedging")
        self.delay: float | None = None if rule == "p95" else float(rule)  # None: learned p95
        self.budget = budget
        self.requests = 0  # first requests sent through its hedgers (lost increments: fewer hedges)
        self.hedges = 0
        # Requests past their delay that found the budget spent, by when they left: the one
        # out the longest gets the next hedge the budget allows (the slowest set the tail).
        self.waiting: dict[Race[Any], None] = {}
        self._endpoints: dict[str | None, Hedger] = {}
        self._lock = threading.Lock()

    def endpoint(self, endpoint: str | None) -> Hedger:
        """The hedger of `endpoint`: one per endpoint, so its gateways share what they learn."""
        with self._lock:
            hedger = self._endpoints.get(endpoint)
            if hedger is None:
                hedger = self._endpoints[endpoint] = Hedger(self)
            return hedger

    def spend(self, race: Race[Any]) -> bool:
        """Take one hedge from the budget for `race` if it allows one more and no request out
        longer waits for it; else `race` waits, and the one out the longest is woken."""
        with self._lock:
            allowed = self.hedges + 1 <= self.budget * self.requests
            oldest = min(self.waiting, key=_sent_at) if self.waiting else None
            if allowed and (oldest is None or oldest.sent_at >= race.sent_at):
                self.waiting.pop(race, None)
                self.hedges += 1
                return True
            self.waiting[race] = None
            race.due = True
        if allowed and oldest is not None:
            oldest.wake()
        return False

    def sent(self) -> None:
        """One more first request: the budget grows; a request waiting for it is woken."""
        self.requests += 1
        if self.waiting and self.hedges + 1 <= self.budget * self.requests:
            with self._lock:
                oldest = min(self.waiting, key=_sent_at) if self.waiting else None
            if oldest is not None:
                oldest.wake()

    def unwait(self, race: Race[Any]) -> None:
        """`race` is over: it waits for nothing."""
        with self._lock:
            self.waiting.pop(race, None)


def _sent_at(race: Race[Any]) -> float:
    return race.sent_at


_of_runtime: weakref.WeakKeyDictionary[Runtime, dict[tuple[Hedge, float], Hedging]] = (
    weakref.WeakKeyDictionary()
)
_of_runtime_lock = threading.Lock()


def hedger_for(
    runtime: Runtime, endpoint: str | None, rule: Hedge | None = None, budget: float | None = None
) -> Hedger | None:
    """The hedger of `endpoint` on `runtime` under `rule` and `budget` (default: the runtime's
    LLM_HEDGE and LLM_HEDGE_BUDGET; a caller's own settings may give others), or None for `off`.
    Each runtime's hedging is kept beside it here as long as it lives (the runtime layer sits
    below the funnel), one per rule and budget: callers under one rule share one budget."""
    settings = runtime.settings
    rule = settings.llm_hedge if rule is None else rule
    if rule == "off":
        return None
    budget = settings.llm_hedge_budget if budget is None else budget
    with _of_runtime_lock:
        kept = _of_runtime.setdefault(runtime, {})
        hedging = kept.get((rule, budget))
        if hedging is None:
            hedging = kept[rule, budget] = Hedging(rule, budget)
    return hedging.endpoint(endpoint)


class Hedger:
    """Hedges the calls of one endpoint: `send` is the gateway's one request, raced by a hedge."""

    __slots__ = ("_out", "hedging", "latencies")

    def __init__(self, hedging: Hedging) -> None:
        self.hedging = hedging
        self.latencies: Latencies | None = None
        # LLM_HEDGE=p95: the first requests out now (a dict as an insertion-ordered set: its
        # item set and pop are atomic, so its threads need no lock).
        self._out: dict[Race[Any], None] = {}
        if hedging.delay is None:
            self.latencies = Latencies(self._still_out, self._known)

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
        self.hedging.sent()
        race = Race(self, gateway, attempt, call, estimated_tokens, usage_of)
        return await race.run(requeue)

    def out(self, race: Race[Any]) -> None:
        """`race`'s first request has left. With LLM_HEDGE=p95, until it answers it counts as a
        censored sample in each p95 computed (at least this slow so far: a p95 of the answers
        alone would miss the slow requests still out, all of them early in a run); sent before
        the p95 was known, it is timed once it is."""
        if self.latencies is not None:
            self._out[race] = None
            if race.delay is None and self.latencies.p95 is not None:
                race.arm()  # learned meanwhile

    def back(self, race: Race[Any]) -> None:
        """`race` is over."""
        if self._out:
            self._out.pop(race, None)

    def _still_out(self) -> list[float]:
        now = time.monotonic()
        return [now - race.sent_at for race in tuple(self._out)]

    def _known(self) -> None:
        """The p95 is first known: time the first requests out (each on its own loop)."""
        for race in tuple(self._out):
            loop = race.loop
            if loop is not None:
                with contextlib.suppress(RuntimeError):  # that loop has closed
                    loop.call_soon_threadsafe(race.arm)

    def may_hedge(self, race: Race[Any], gateway: Gateway, estimated_tokens: int) -> bool:
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
        return self.hedging.spend(race)
