"""One run's spending as its event log shows it, for `logs check`: the sum of the `cost_usd` of
its `released` events and of its `batch_completed` events (a provider batch's succeeded lines, at
the batch price: they hold no slot, so no `released` says what they cost), against its budget
(`run_finished`'s `budget_usd`, else `run_started`'s MAX_COST_USD) when it had one. Each cost is
added as the decimal it was written as, so the sum is exact and a run that spent its budget to
the last digit is not called over it."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any


class Spend:
    """What one run's `released` events say it spent (see the module)."""

    __slots__ = ("budget", "spent", "unknown")

    def __init__(self, first: dict[str, Any]) -> None:
        self.spent: Decimal | None = None
        self.unknown = 0  # requests counted at their worst case (sent, never answered)
        limits = first.get("limits") if first.get("event") == "run_started" else None
        budget = limits.get("max_cost_usd") if isinstance(limits, dict) else None
        self.budget = _exact(budget)

    def released(self, event: dict[str, Any]) -> None:
        cost = _exact(event.get("cost_usd"))
        if cost is not None:
            self.spent = cost if self.spent is None else self.spent + cost
            self.unknown += bool(event.get("cost_unknown"))

    def batch_completed(self, event: dict[str, Any]) -> None:
        """A provider batch's answers: what its succeeded lines cost."""
        cost = _exact(event.get("cost_usd"))
        if cost is not None:
            self.spent = cost if self.spent is None else self.spent + cost

    def finished(self, event: dict[str, Any]) -> None:
        """`run_finished`: the budget the run really had (`Benchmark.run(max_cost_usd=)`)."""
        budget = _exact(event.get("budget_usd"))
        if budget is not None:
            self.budget = budget

    @property
    def held(self) -> bool:
        """Whether the run spent no more than its budget (True without one)."""
        return self.budget is None or self.spent is None or self.spent <= self.budget

    def fields(self) -> dict[str, Any]:
        """The run's entry in `LogCheck.runs`: cost_usd, budget_usd, budget_held."""
        return {
            "cost_usd": None if self.spent is None else float(self.spent),
            "budget_usd": None if self.budget is None else float(self.budget),
            "budget_held": self.held,
        }


def _exact(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return Decimal(repr(value))
