"""Cost: what a run's repetitions cost, summed as their reports come in, for `run_finished`;
the bill of a run directory (`bill`, `Billed`: what every segment's events say was billed, the
one reading of it that a resume's budget, `report`, `compare` and `view` share); and what the
earlier segments of a resumed run spent (`earlier_spend`), which its budget carries on from
(`carried_budget`).

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


def earlier_spend(events_path: str | os.PathLike[str]) -> EarlierSpend:
    """What the events file at `events_path` says the run spent so far (an empty result when
    there is none), from its `bill`. Raises OSError when the file cannot be read: a resume
    must not take an unreadable log for a run that spent nothing."""
    billed = bill(events_path)
    return EarlierSpend(billed.total, billed.budget, billed.finished_exhausted, billed.segments)


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


class Billed:
    """What a run directory's events file says was billed, over every segment, for `report`
    and the run's summary (see `read_billed`): `total` (every `released` event's `cost_usd` and
    every `batch_completed` one's), `by_pair` (the `released` costs of each (task_id,
    repeat_idx): a repetition's calls in every segment, those a resume replayed from the
    journal included, where they were paid), `segments`, and the run's budget as its latest
    segment had it (`budget`, `budget_exhausted`; `finished_exhausted`: whether the latest
    segment to finish ended with it exhausted); `outside_calls` and `outside_cost`: the
    calls no repetition counted (from threads without a repetition's context), every segment's
    `calls_outside_repetitions`."""

    __slots__ = (
        "budget",
        "budget_exhausted",
        "by_pair",
        "finished_exhausted",
        "outside_calls",
        "outside_cost",
        "segments",
        "total",
    )

    def __init__(self) -> None:
        self.total = Decimal(0)
        self.by_pair: dict[tuple[str, int], Decimal] = {}
        self.segments = 0
        self.budget: Decimal | None = None
        self.budget_exhausted = False
        self.finished_exhausted = False
        self.outside_calls = 0
        self.outside_cost: Decimal | None = None

    def feed(self, event: dict[str, Any]) -> None:
        name = event.get("event")
        if name in ("released", "batch_completed"):
            cost = exact(event.get("cost_usd"))
            if cost is None:
                return
            self.total += cost
            task, repeat = event.get("task_id"), event.get("repeat_idx")
            if name == "released" and isinstance(task, str) and isinstance(repeat, int):
                self.by_pair[(task, repeat)] = self.by_pair.get((task, repeat), 0) + cost
        elif name == "run_started":
            self.segments += 1
            self.budget = exact(event.get("max_cost_usd"))
            self.budget_exhausted = False
        elif name == "run_finished":
            self.budget = exact(event.get("budget_usd")) or self.budget
            self.budget_exhausted = bool(event.get("budget_exhausted"))
            self.finished_exhausted = self.budget_exhausted
        elif name == "calls_outside_repetitions":
            calls, cost = event.get("calls"), exact(event.get("cost_usd"))
            self.outside_calls += calls if isinstance(calls, int) else 0
            if cost is not None:
                self.outside_cost = cost + (self.outside_cost or 0)


_BILLED_EVENTS = (
    "released",
    "batch_completed",
    "run_started",
    "run_finished",
    "calls_outside_repetitions",
)


def bill(path: str | os.PathLike[str]) -> Billed:
    """The bill of the events file at `path` (empty when there is none). Read a line at a
    time; only lines naming one of the events it needs are parsed, so a large log costs one
    pass and no memory; a line cut short by a kill is skipped. Raises OSError when the file
    cannot be read."""
    billed = Billed()
    try:
        file = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except FileNotFoundError:
        return billed
    with file:
        for line in file:
            if not any(name in line for name in _BILLED_EVENTS):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                billed.feed(event)
    return billed


def read_billed(path: str | os.PathLike[str]) -> Billed | None:
    """`bill(path)`, or None when the file cannot be read (for readers that show a bill beside
    the reports and can do without it)."""
    try:
        return bill(path)
    except OSError:
        return None
