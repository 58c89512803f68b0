"""CostBudget: a run's spending limit in USD, kept by reserving each request's worst case before
it is sent (DESIGN section 15).

A request reserves the most it can cost (its prompt bound plus its output cap, at its price)
before it goes, and settles to what it really cost when its answer is read. A reservation that
does not fit beside what is spent and what the requests in flight reserved waits for those to
settle (they usually cost far less than their worst case); when nothing in flight can free any,
the budget is exhausted: that request and every later one are refused with `BudgetExhausted`.
So what is spent never exceeds the limit, however many requests run at once, in any thread or
event loop, as long as no answer reports more tokens than its request's bound (see
`asynceval.funnel._costing`). A streamed answer's reservation is not waited for (its reader may
be the very code that waits): it counts until the stream ends.

The budget of the run in progress is bound to its context (`budget_scope`), as the usage counter
is: every call its repetitions make, in tasks or threads, finds it with `current_budget()`.

A budget can start with what was spent before (`spent_before`: a resumed run's earlier segments,
whose spending counts against the same total): `spent` includes it (`before` says how much of
it), and a budget that starts with nothing left is exhausted from the start.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from decimal import Decimal

import anyio

from .._scoped import Scoped
from ..errors import BudgetExhausted, ConfigError

_POLL_S = 0.005
"""How often a reservation that does not fit yet looks again (only near the end of a budget)."""


class CostBudget:
    """At most `limit_usd` spent on LLM calls (> 0); safe from any thread and event loop."""

    def __init__(
        self, limit_usd: float | Decimal | str, *, spent_before: Decimal = Decimal(0)
    ) -> None:
        try:
            limit = Decimal(str(limit_usd))
        except ArithmeticError:
            raise ConfigError(f"a cost budget is an amount in USD, got {limit_usd!r}") from None
        if not limit.is_finite() or limit <= 0:
            raise ConfigError(f"a cost budget must be a finite amount > 0 USD, got {limit_usd!r}")
        self.limit = limit
        self.before = spent_before
        """What earlier segments of the run spent (counted in `spent`)."""
        self._spent = spent_before
        self._reserved = Decimal(0)
        self._waitable = 0  # reservations of requests in flight, which will settle on their own
        self._lock = threading.Lock()
        self.exhausted = spent_before >= limit
        """Sticky: a request was refused; every later one is too, and no repetition starts."""
        self.refused = 0
        """Requests refused (each ends its repetition as `budget_exhausted`)."""
        self.overrun = Decimal(0)
        """What answers cost beyond their reservation (an answer longer than its bound): 0
        unless a provider reported more tokens than the request allowed."""

    @property
    def spent(self) -> Decimal:
        """What the settled requests cost."""
        return self._spent

    @property
    def reserved(self) -> Decimal:
        """What the requests in flight reserved."""
        return self._reserved

    async def reserve(self, amount: Decimal) -> None:
        """Reserve `amount` for a request about to be sent: at once if it fits, after requests
        in flight settle if it fits then; else `BudgetExhausted` (and from then on always)."""
        while True:
            with self._lock:
                if not self.exhausted:
                    if self._spent + self._reserved + amount <= self.limit:
                        self._reserved += amount
                        self._waitable += 1
                        return
                    if self._waitable == 0:
                        self.exhausted = True
                if self.exhausted:
                    self.refused += 1
                    raise BudgetExhausted(
                        float(self.limit), float(self._spent + self._reserved), float(amount)
                    )
            await anyio.sleep(_POLL_S)

    def streaming(self) -> None:
        """A reservation's request became a stream read by its caller: no longer waited for."""
        with self._lock:
            self._waitable -= 1

    def settle(self, reserved: Decimal, cost: Decimal, *, waited: bool = True) -> None:
        """A request that reserved `reserved` cost `cost` (`waited`: it had not become a
        stream)."""
        with self._lock:
            self._reserved -= reserved
            self._spent += cost
            if cost > reserved:
                self.overrun += cost - reserved
            if waited:
                self._waitable -= 1

    def take(self, *, spent: Decimal, refused: int, overrun: Decimal, exhausted: bool) -> None:
        """Take another ledger's figures as this budget's (a cluster's, kept on its scheduler,
        into the run's own at its end; `spent`: this segment's, to which `before` is added):
        never less than this one already says."""
        with self._lock:
            self._spent = max(self._spent, self.before + spent)
            self.refused = max(self.refused, refused)
            self.overrun = max(self.overrun, overrun)
            self.exhausted = self.exhausted or exhausted

    def __repr__(self) -> str:
        return (
            f"CostBudget(limit={self.limit}, spent={self._spent} (before: {self.before}), "
            f"reserved={self._reserved}, "
            f"exhausted={self.exhausted})"
        )


_current: ContextVar[CostBudget | None] = ContextVar("asynceval_budget", default=None)


def budget_scope(budget: CostBudget | None) -> Scoped[CostBudget | None]:
    """Bind `budget` to the calls made in this `with` block (None: no budget)."""
    return Scoped(_current, budget)


def current_budget() -> CostBudget | None:
    """The budget of the run this code runs in, if it has one."""
    return _current.get()
