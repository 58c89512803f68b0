"""One run's spending as its event log shows it, for `logs check`: the sum of the `cost_usd` of
its `released` events and of its `batch_completed` events (a provider batch's succeeded lines, at
the batch price: they hold no slot, so no `released` says what they cost), against its budget
(`run_finished`'s `budget_usd`, else `run_started`'s `max_cost_usd`) when it had one. Each cost is
added as the decimal it was written as, so the sum is exact and a run that spent its budget to
the last digit is not called over it.

The budget belongs to the run directory: a resumed segment (its `run_started` says `resumed`)
goes on from what the segments before it spent, so `directory_verdicts` judges each segment by
what its run directory had spent by its end (`spent_usd`), against the total it ran under; a
segment that is not a resume starts a new run directory's count.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any


class Spend:
    """What one run's `released` events say it spent (see the module)."""

    __slots__ = ("budget", "resumed", "spent", "unknown")

    def __init__(self, first: dict[str, Any]) -> None:
        self.spent: Decimal | None = None
        self.unknown = 0  # requests counted at their worst case (sent, never answered)
        started = first.get("event") == "run_started"
        limits = first.get("limits")  # a hand-written log may nest them
        where = limits if isinstance(limits, dict) and "max_cost_usd" in limits else first
        self.budget = _exact(where.get("max_cost_usd")) if started else None
        flag = first.get("resumed")  # a log of an older asynceval: resumed_pairs tells
        pairs = first.get("resumed_pairs")
        self.resumed = started and (
            flag is True or (flag is None and isinstance(pairs, int) and pairs > 0)
        )

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
        spent += _exact(run.get("cost_usd")) or 0
        run["spent_usd"] = float(spent)
        budget = _exact(run.get("budget_usd"))
        run["budget_held"] = budget is None or spent <= budget


def _exact(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return Decimal(repr(value))


class Billed:
    """What a run directory's events file says was billed, over every segment, for `report`
    and the run's summary (see `read_billed`): `total` (every `released` event's `cost_usd` and
    every `batch_completed` one's), `by_pair` (the `released` costs of each (task_id,
    repeat_idx): a repetition's calls in every segment, those a resume replayed from the
    journal included, where they were paid), `segments`, and the run's budget as its latest
    segment had it (`budget`, `budget_exhausted`); `outside_calls` and `outside_cost`: the
    calls no repetition counted (from threads without a repetition's context), every segment's
    `calls_outside_repetitions`."""

    __slots__ = (
        "budget",
        "budget_exhausted",
        "by_pair",
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
        self.outside_calls = 0
        self.outside_cost: Decimal | None = None

    def feed(self, event: dict[str, Any]) -> None:
        name = event.get("event")
        if name in ("released", "batch_completed"):
            cost = _exact(event.get("cost_usd"))
            if cost is None:
                return
            self.total += cost
            task, repeat = event.get("task_id"), event.get("repeat_idx")
            if name == "released" and isinstance(task, str) and isinstance(repeat, int):
                self.by_pair[(task, repeat)] = self.by_pair.get((task, repeat), 0) + cost
        elif name == "run_started":
            self.segments += 1
            self.budget = _exact(event.get("max_cost_usd"))
            self.budget_exhausted = False
        elif name == "run_finished":
            self.budget = _exact(event.get("budget_usd")) or self.budget
            self.budget_exhausted = bool(event.get("budget_exhausted"))
        elif name == "calls_outside_repetitions":
            calls, cost = event.get("calls"), _exact(event.get("cost_usd"))
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


def read_billed(path: Path) -> Billed | None:
    """The bill of the events file at `path`, or None when there is none or it cannot be
    read. Read a line at a time; only lines naming one of the events it needs are parsed, and
    a line cut short by a kill is skipped."""
    billed = Billed()
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                if not any(name in line for name in _BILLED_EVENTS):
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    billed.feed(event)
    except OSError:
        return None
    return billed
