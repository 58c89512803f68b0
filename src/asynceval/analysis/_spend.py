"""One run's spending as its event log shows it, for `logs check`: the sum of the `cost_usd` of
its `released` events and of its `batch_completed` events (a provider batch's succeeded lines, at
the batch price: they hold no slot, so no `released` says what they cost), against its budget
(`run_finished`'s `budget_usd`, else `run_started`'s `max_cost_usd`) when it had one. Each cost is
added as the decimal it was written as, so the sum is exact and a run that spent its budget to
the last digit is not called over it.

The budget belongs to the run directory: a resumed segment (its `run_started` says `resumed`)
goes on from what the segments before it spent, so `directory_verdicts` judges each segment by
what its run directory had spent by its end (`spent_usd`), against the total it ran under; a
segment that is not a resume starts a new run directory's count. The bill over a directory's
segments (`Billed`, `read_billed`) is the engine's (`asynceval.engine.run_cost`), re-exported.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..engine.run_cost import Billed as Billed
from ..engine.run_cost import exact
from ..engine.run_cost import read_billed as read_billed


class Spend:
    """What one run's `released` events say it spent (see the module)."""

    __slots__ = ("budget", "resumed", "spent", "unknown")

    def __init__(self, first: dict[str, Any]) -> None:
        self.spent: Decimal | None = None
        self.unknown = 0  # requests counted at their worst case (sent, never answered)
        started = first.get("event") == "run_started"
        limits = first.get("limits")  # a hand-written log may nest them
        where = limits if isinstance(limits, dict) and "max_cost_usd" in limits else first
        self.budget = exact(where.get("max_cost_usd")) if started else None
        flag = first.get("resumed")  # a log of an older asynceval: resumed_pairs tells
        pairs = first.get("resumed_pairs")
        self.resumed = started and (
            flag is True or (flag is None and isinstance(pairs, int) and pairs > 0)
        )

    def released(self, event: dict[str, Any]) -> None:
        cost = exact(event.get("cost_usd"))
        if cost is not None:
            self.spent = cost if self.spent is None else self.spent + cost
            self.unknown += bool(event.get("cost_unknown"))

    def batch_completed(self, event: dict[str, Any]) -> None:
        """A provider batch's answers: what its succeeded lines cost."""
        cost = exact(event.get("cost_usd"))
        if cost is not None:
            self.spent = cost if self.spent is None else self.spent + cost

    def finished(self, event: dict[str, Any]) -> None:
        """`run_finished`: the budget the run really had (`Benchmark.run(max_cost_usd=)`)."""
        budget = exact(event.get("budget_usd"))
        if budget is not None:
            self.budget = budget

    @property
    def held(self) -> bool:
        """Whether the run spent no more than its budget (True without one)."""
        return self.budget is None or self.spent is None or self.spent <= self.budget

    def fields(self) -> dict[str, Any]:
        """The run's entry in `LogCheck.runs`: cost_usd (this segment's), budget_usd,
        budget_held (this segment alone: `directory_verdicts` makes it the directory's),
        resumed."""
        return {
            "cost_usd": None if self.spent is None else float(self.spent),
            "budget_usd": None if self.budget is None else float(self.budget),
            "budget_held": self.held,
            "resumed": self.resumed,
        }


def directory_verdicts(runs: list[dict[str, Any]]) -> None:
    """Judge each run of a log (its `LogCheck.runs` entries, in order) by its run directory's
    spending: `spent_usd` is what the directory spent up to the end of that segment (the
    segments before it since the last one that was not a resume, and its own), and
    `budget_held` whether that is within the total the segment ran under."""
    spent = Decimal(0)
    for run in runs:
        if not run.get("resumed"):
            spent = Decimal(0)
        spent += exact(run.get("cost_usd")) or 0
        run["spent_usd"] = float(spent)
        budget = exact(run.get("budget_usd"))
        run["budget_held"] = budget is None or spent <= budget
