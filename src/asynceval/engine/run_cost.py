"""Cost: what a run's repetitions cost, summed as their reports come in, for `run_finished`,
and what the earlier segments of a resumed run spent (`earlier_spend`), which its budget
carries on from (`carried_budget`).

`cost_usd` sums the reports' `usage.cost_usd` (unrounded: each as the decimal it was written as,
added exactly, so that the total is what a person adding them up gets); null when no report had
a priced call, so that "nothing known" never reads as $0. A resumed run's `cost_usd` is the whole
run's: what its earlier segments' events say was billed (`earlier_cost_usd`: calls whose answers
this segment replays from the journal, and repetitions a kill cut short, were paid there) plus
this segment's reports. `unpriced_calls` counts the requests
of models with no price. Under a budget, `budget_usd`, `budget_spent_usd` (every request
of the run, those of repetitions cut short included) and `budget_exhausted` say where it stands.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..limits import CostBudget


class Cost:
    """The run's cost so far (see the module)."""

    __slots__ = ("_sum", "earlier", "unpriced_calls")

    def __init__(self) -> None:
        self._sum: Decimal | None = None
        self.unpriced_calls = 0
        self.earlier: Decimal | None = None
        """What the earlier segments of a resumed run spent (None: not a resume)."""

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
        """The run's total (earlier segments included), or None when nothing was priced."""
        earlier = self.earlier or None  # a resume of a run that spent nothing adds nothing
        if self._sum is None and earlier is None:
            return None
        return float((self._sum or 0) + (earlier or 0))

    def fields(self, budget: CostBudget | None) -> dict[str, Any]:
        """`run_finished`'s cost fields."""
        fields: dict[str, Any] = {
            "cost_usd": self.cost_usd,
            "unpriced_calls": self.unpriced_calls,
        }
        if self.earlier is not None:
            fields["earlier_cost_usd"] = float(self.earlier)
        if budget is not None:
            fields["budget_usd"] = float(budget.limit)
            fields["budget_spent_usd"] = float(budget.spent)
            fields["budget_exhausted"] = budget.exhausted
        return fields


@dataclass(frozen=True)
class EarlierSpend:
    """What a run's events file says its segments so far spent and were allowed (see
    `earlier_spend`)."""

    spent: Decimal = Decimal(0)
    """The sum of every `released` event's `cost_usd` (what was billed: a call sent and never
    answered counts at its worst case) and every `batch_completed` one's, in every segment."""
    budget: Decimal | None = None
    """The total the latest segment ran under (its `run_finished`'s `budget_usd`, else its
    `run_started`'s `max_cost_usd`); None when it had none."""
    exhausted: bool = False
    """Whether the latest segment to finish ended with its budget exhausted."""
    segments: int = 0
    """The segments (`run_started` events) in the file."""


_WANTED = ("released", "batch_completed", "run_started", "run_finished")


def earlier_spend(events_path: str | os.PathLike[str]) -> EarlierSpend:
    """What the events file at `events_path` says the run spent so far (an empty result when
    there is none). Read a line at a time, and only lines naming one of the events it needs
    are parsed, so a large log costs one pass and no memory; a line cut short by a kill is
    skipped. Each cost is added as the decimal it was written as (exact)."""
    spent = Decimal(0)
    budget: Decimal | None = None
    exhausted = False
    segments = 0
    try:
        file = open(events_path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except FileNotFoundError:
        return EarlierSpend()
    with file:
        for line in file:
            if not any(name in line for name in _WANTED):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            name = event.get("event")
            if name in ("released", "batch_completed"):
                spent += exact(event.get("cost_usd")) or 0
            elif name == "run_started":
                segments += 1
                budget = exact(event.get("max_cost_usd"))
            elif name == "run_finished":
                budget = exact(event.get("budget_usd")) or budget
                exhausted = bool(event.get("budget_exhausted"))
    return EarlierSpend(spent, budget, exhausted, segments)


def carried_budget(
    given: float | None, default: float | None, earlier: EarlierSpend
) -> CostBudget | None:
    """The budget of a resumed segment: its total is `given` (a new total for the run), else
    the one the latest segment ran under, else `default` (MAX_COST_USD); what earlier segments
    spent counts against it. It starts exhausted when that spending reached the total, or when
    the latest segment ran out of this same total (so a plain resume of a run stopped by its
    budget starts nothing and sends nothing). None without any total."""
    total = given if given is not None else earlier.budget
    if total is None:
        total = default
    if total is None:
        return None
    budget = CostBudget(total, spent_before=earlier.spent)
    if earlier.exhausted and earlier.budget == budget.limit:
        budget.exhausted = True
    return budget


def exact(value: Any) -> Decimal | None:
    """A cost as the decimal it was written as; None for anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return Decimal(repr(value))
