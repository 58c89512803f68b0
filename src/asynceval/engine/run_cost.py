"""Cost: what a run's repetitions cost, summed as their reports come in, for `run_finished`.

`cost_usd` sums the reports' `usage.cost_usd` (unrounded: each as the decimal it was written as,
added exactly, so that the total is what a person adding them up gets); null when no report had
a priced call, so that "nothing known" never reads as $0. `unpriced_calls` counts the requests
of models with no price. Under a budget, `budget_usd`, `budget_spent_usd` (every request
of the run, those of repetitions cut short included) and `budget_exhausted` say where it stands.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ..limits import CostBudget


class Cost:
    """The run's cost so far (see the module)."""

    __slots__ = ("_sum", "unpriced_calls")

    def __init__(self) -> None:
        self._sum: Decimal | None = None
        self.unpriced_calls = 0

    def add(self, usage: Mapping[str, Any] | None) -> None:
        """Count one report's usage."""
        if not usage:
            return
        cost = usage.get("cost_usd")
        if isinstance(cost, int | float) and math.isfinite(cost):
            exact = Decimal(repr(cost))
            self._sum = exact if self._sum is None else self._sum + exact
        self.unpriced_calls += int(usage.get("unpriced_calls") or 0)

    @property
    def cost_usd(self) -> float | None:
        """The reports' total, or None when none was priced."""
        return None if self._sum is None else float(self._sum)

    def fields(self, budget: CostBudget | None) -> dict[str, Any]:
        """`run_finished`'s cost fields."""
        fields: dict[str, Any] = {
            "cost_usd": self.cost_usd,
            "unpriced_calls": self.unpriced_calls,
        }
        if budget is not None:
            fields["budget_usd"] = float(budget.limit)
            fields["budget_spent_usd"] = float(budget.spent)
            fields["budget_exhausted"] = budget.exhausted
        return fields
