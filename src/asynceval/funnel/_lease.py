"""`Lease`: what one sent attempt holds (its slot and its share of the rate windows), released
once, from any thread, by the gateway or by the result that outlives the attempt (a stream)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from decimal import Decimal

from ..errors import BudgetExhausted
from ..limits import RateLimiter, Slot
from ..limits.rate import Reservation
from ._costing import Costing
from ._held import Held, current_scope
from ._usage import Usage, UsageCounter


class Lease:
    """What one sent attempt holds: its slot and its share of the rate windows.

    The gateway releases it when the attempt returns, unless the attempt called `keep()`: then
    the result it returned (a response stream read later) owns it and calls `release(usage)`
    when it is done. `release` is idempotent, synchronous and safe from any thread, so it may
    also run from a finalizer.
    """

    __slots__ = (
        "_abandoned",
        "_answered",
        "_cost_share",
        "_held",
        "_learned",
        "_learned_window",
        "_limiter",
        "_released",
        "_reservation",
        "_slot",
        "_status",
        "_unsend",
        "_usage",
        "costing",
        "on_answer",
        "on_reclaim",
        "on_release",
        "reading",
        "sent_seq",
    )

    def __init__(
        self,
        slot: Slot,
        limiter: RateLimiter | None,
        usage: UsageCounter | None,
        costing: Costing | None = None,
        cost_share: Decimal | None = None,
    ):
        self._slot = slot
        self._limiter = limiter
        self._reservation: Reservation | None = None
        self._usage = usage
        self._released = False
        self.costing = costing  # its call's price and budget (None: not a priced model call)
        # What it reserved of the budget (`reserve_cost`, before its slot was taken), if any.
        self._cost_share = cost_share
        self._abandoned = False  # reclaimed unfinished: its cost was counted then (see reclaim)
        self._answered = False
        self._status: int | None = None  # the answer's HTTP status, when its sender says
        self._held: Held | None = None
        self.reading = False  # a kept lease's stream is waiting for its next chunk
        self.on_reclaim: Callable[[], None] | None = None  # what ends its stream (see reclaim)
        self._unsend: Callable[[], object] | None = None  # a kept request's end at the provider
        # What the gateway learns from each answer's headers (its rate-limit headers), told
        # this lease and the headers.
        self.on_answer: Callable[[Lease, Mapping[str, str]], None] | None = None
        # Told the usage and cost once it is released (its call's OpenTelemetry span).
        self.on_release: Callable[[Usage | None, Decimal | None], None] | None = None
        self.sent_seq = 0  # the request's place among its endpoint's sends (0: not sent)
        # Its share of the windows of the limits its endpoint announced, if any.
        self._learned: Reservation | None = None
        self._learned_window: RateLimiter | None = None

    def answered(self, headers: Mapping[str, str], status: int | None = None) -> None:
        """The provider answered this attempt (any status) with `headers`: the sender calls it
        once per answer, before reading the body, so that what the headers say (the rate
        budget left) is known to the calls that follow. With the answer's `status`, a success
        whose usage is never read (its body cut short: timed out, cancelled, unreadable) counts
        at its worst case, as one never answered does; an error answer costs nothing."""
        self._answered = True
        self._status = status
        if self.on_answer is not None:
            self.on_answer(self, headers)

    @property
    def kept(self) -> bool:
        """Whether a result that outlives the attempt owns this lease (`keep()`)."""
        return self._held is not None

    @property
    def call_id(self) -> str:
        return self._slot.call_id

    @property
    def agent(self) -> str | None:
        return self._slot.agent

    @property
    def dimension(self) -> str | None:
        return self._slot.dimension

    def keep(self) -> None:
        """The result outlives the attempt and will release this lease itself; until then the
        lease is recorded in the current scope (see `asynceval.funnel._held`)."""
        self._held = current_scope()
        self._held[self] = None
        if self._cost_share is not None and self.costing is not None:
            assert self.costing.budget is not None
            self.costing.streaming(self._cost_share)  # its reader may be the code waiting

    def reclaim(self) -> None:
        """Its scope ended with the result unfinished: end it (`on_reclaim`: the stream closes
        and counts what it read), else just release. Left unread, it costs its worst case (what
        the provider served is not known), counted into its repetition's usage now: the stream
        is released later, on its loop, when the repetition's report may be made already."""
        with _release_lock:
            counted = self.costing is not None and not self._released and not self._abandoned
            self._abandoned = counted
        if counted and self._usage is not None:
            assert self.costing is not None
            self._usage.add_cost(self.costing.model, self._worst_case(), worst_case=True)
        (self.on_reclaim or self.release)()

    def release(self, usage: Usage | None = None) -> bool:
        """Free the slot; settle the token share to `usage` (None: nothing used, or for a kept
        result, unknown: the estimate stays) and count the tokens into the repetition's usage.
        Once only, whichever thread calls first. Returns whether this call freed the slot and
        it went straight to a caller waiting in line."""
        with _release_lock:  # a reclaim, a finalizer and a reader may race to it
            if self._released:
                return False
            self._released = True
        cost: Decimal | None = None  # what it cost and whether that is a worst case, as far
        unknown = False  # as known: the slot is freed whatever step below fails
        try:
            if self._held is not None:
                self._held.pop(self, None)
            if self._unsend is not None:  # a stream: the provider has finished serving it
                self._unsend()
            # An answer that said nothing of its usage: a failed attempt used nothing, but a
            # stream that went out and was left unread keeps its estimate (the provider spent it).
            if self._limiter is not None and self._reservation is not None:
                _settle(self._limiter, self._reservation, usage, self.kept)
            if self._learned_window is not None and self._learned is not None:
                _settle(self._learned_window, self._learned, usage, self.kept)
            if usage is not None and self._usage is not None:
                self._usage.add_tokens(usage)
            cost, unknown = self._cost(usage) if self.costing is not None else (None, False)
        finally:
            costing = self.costing
            if costing is None:
                handed = self._slot.release()
            else:
                handed = self._slot.release(
                    cost_usd=None if cost is None else float(cost),
                    unpriced=costing.price is None,
                    cost_unknown=unknown,
                )
        if self.on_release is not None:
            self.on_release(usage, cost)
        return handed

    def _cost(self, usage: Usage | None) -> tuple[Decimal | None, bool]:
        """What this request cost, and whether that is its worst case for want of an answer: a
        read answer costs its usage at its price; an error answer, or a request never sent,
        nothing; a request sent and never answered, a success whose usage was not read (see
        `answered`), or a stream left unread, its worst case (the provider may bill it).
        Settled against the budget and counted into the usage."""
        costing = self.costing
        assert costing is not None
        price = costing.price
        unknown = False
        cost: Decimal | None
        if price is None:
            cost = None
        elif self._abandoned:  # a stream left unread: whatever it read of its usage
            cost, unknown = self._worst_case(), True
        elif usage is not None:
            costing.observed(usage.prompt_tokens)  # tokens per byte above 1: later bounds grow
            cost = price.cost(
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens,
            )
        elif self.kept or (self.sent_seq and not self._answered) or self._succeeded():
            cost, unknown = self._worst_case(), True
        else:
            cost = Decimal(0)
        share = self._cost_share
        if share is not None and costing.budget is not None:
            costing.settle(share, cost or Decimal(0), waited=not self.kept)
        counter = self._usage
        if counter is not None and (usage is not None or unknown) and not self._abandoned:
            # (an abandoned one's was, by `reclaim`)
            counter.add_cost(costing.model, cost, worst_case=unknown)
        return cost, unknown

    def _succeeded(self) -> bool:
        """Whether it was answered with a success (its sender said the status, < 400)."""
        return self._status is not None and self._status < 400

    def _worst_case(self) -> Decimal | None:
        """What it reserved, else its call's worst case; None when its model has no price."""
        costing = self.costing
        assert costing is not None
        if costing.price is None:
            return None
        return self._cost_share if self._cost_share is not None else costing.worst_case()


async def reserve_cost(costing: Costing, usage: UsageCounter | None) -> Decimal:
    """Reserve one request's worst case against its call's budget (the gateway, before the
    request takes a slot, so that a refused one is no LLM call and holds no slot while it waits
    for budget room); its share, for its `Lease`. `BudgetExhausted` when it does not fit,
    noted on `usage` (its repetition ends `budget_exhausted`)."""
    try:
        share = await costing.reserve()
    except BudgetExhausted as exc:
        if usage is not None:
            usage.budget_refusal = exc
        raise
    return share


def _settle(limiter: RateLimiter, share: Reservation, usage: Usage | None, kept: bool) -> None:
    if usage is not None:
        limiter.settle(share, usage.total_tokens)
    elif not kept:
        limiter.settle(share, 0)


_release_lock = threading.Lock()  # held for a check-and-set only
