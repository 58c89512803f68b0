"""What runs cost, in words and in pairs: the money format, the lines `asynceval report`, `view`
and `compare` show of a summary's cost, and the paired cost difference of two runs.

The figures themselves are the summary's (`summarize`: which reports count is said there: the
totals sum every report, the per-repetition figures take the last of each pair). Money is shown
with `SIGNIFICANT` significant digits below $1 (a simulated call costs a few millionths of a
dollar: `$0.00001234`), in cents from $1 up; JSON keeps the unrounded floats. A call whose model
has no price is never shown as $0: it is counted apart, and a cost that nothing priced gives is
"unknown". The view keeps only the cost keys of a report's usage (`cost_usage`).

A resumed run's report takes its cost figures from its bill, the events file's `released` events
of every segment (`with_bill`), and shows the budget against the run's total (`bill_rows`).

The paired difference (`cost_comparison`) is over the (task_id, repeat_idx) pairs both runs have
(the last report of each), those whose cost is known in full in both (`repetition_cost`) and
that the budget did not stop: the mean over them of B's cost minus A's, with the 95% interval
that `compare` gives the score difference (tasks resampled; passed in as `interval`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from ._spend import Billed as Billed
from ._spend import read_billed as read_billed
from .summary import (
    BUDGET_EXHAUSTED,
    Summary,
    finite_number,
    mapping,
    percentile,
    repetition_cost,
)

SIGNIFICANT = 4  # digits of a sum below $1
TASKS_SHOWN = 10  # the costliest tasks listed in a table; --json lists them all
RESUME = "not scored; run again by --resume"

# The 95% interval of the mean difference over all pairs from each task's differences, and how
# it was made: `asynceval.analysis.compare.task_difference_interval`.
Interval = Callable[[Sequence[Sequence[float]]], tuple[tuple[float, float], str]]


def money(value: float) -> str:
    """`value` USD as text: '$1,234.57', '$0.0123', '$0.00001234', '$0'."""
    magnitude = abs(value)
    sign = "-" if value < 0 else ""
    if magnitude >= 1:
        return f"{sign}${magnitude:,.2f}"
    if magnitude == 0:
        return "$0"
    if magnitude < 1e-9:  # not a price anyone charges: a hand-edited file
        return f"{sign}${magnitude:.{SIGNIFICANT - 1}e}"
    decimals = SIGNIFICANT - 1 - math.floor(math.log10(magnitude))
    whole, _, fraction = f"{magnitude:.{decimals}f}".partition(".")
    return f"{sign}${whole}.{fraction.rstrip('0').ljust(2, '0')}"


def signed_money(value: float) -> str:
    """A difference in USD with its sign: '+$0.0012', '-$0.0012', '$0'."""
    return money(value) if value <= 0 else "+" + money(value)


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def total_text(summary: Summary) -> str:
    """The run's cost in a few words: '$0.01234', with its unpriced calls, its calls priced at
    their worst case (sent, no usage reported: counted in the sum) and its reports without cost
    said apart; 'unknown (...)' when nothing priced was recorded."""
    if summary.cost_unknown_reports and not summary.cost_by_task:  # no report has a cost
        return "unknown (the results were written before cost was recorded)"
    unpriced = _plural(summary.unpriced_calls, "call")
    if summary.cost_usd is None:
        if summary.unpriced_calls:
            return f"unknown: {unpriced} unpriced (no price for their model)"
        text = "no priced call"
    else:
        text = money(summary.cost_usd)
        if summary.unpriced_calls:
            text += f" + {unpriced} unpriced (not counted: no price for their model)"
    if summary.worst_case_calls and summary.cost_usd is not None:
        worst = _plural(summary.worst_case_calls, "call")
        text += f"; {worst} priced at their worst case (no usage reported)"
    if summary.cost_unknown_reports:
        text += f"; {_plural(summary.cost_unknown_reports, 'report')} without cost not counted"
    return text


def cost_rows(summary: Summary, tasks_shown: int = TASKS_SHOWN) -> list[tuple[str, str]]:
    """(label, text) lines of a summary's cost: the total, p50/p95 per repetition, per model,
    the costliest tasks; one line when the results hold no cost."""
    rows = [("cost", total_text(summary))]
    if summary.cost_usd is None and not summary.unpriced_calls:
        return rows
    if summary.cost_p50_usd is not None and summary.cost_p95_usd is not None:
        over = _plural(summary.cost_repetitions, "repetition")
        rows.append(
            (
                "  per repetition p50 / p95",
                f"{money(summary.cost_p50_usd)} / {money(summary.cost_p95_usd)} (over {over})",
            )
        )
    if summary.cost_by_model:
        rows.append(("  by model", ""))
        for name, model in summary.cost_by_model.items():
            rows.append((f"    {name}", _part(model["cost_usd"], model["calls"], "call", model)))
    tasks = summary.cost_by_task
    alike = _alike_tasks(tasks)
    if alike is not None:
        rows.append(("  by task", alike))
    elif tasks:
        more = f"the {tasks_shown} costliest of {len(tasks)}" if len(tasks) > tasks_shown else ""
        rows.append(("  by task", more))
        for task in tasks[:tasks_shown]:
            rows.append(
                (f"    {task['task_id']}", _part(task["cost_usd"], task["reports"], "report", task))
            )
    return rows


TASKS_DIFFER = 1.5  # the costliest task per report at least this times the cheapest: list them


def _alike_tasks(tasks: Sequence[Mapping[str, Any]]) -> str | None:
    """One line for tasks whose costs do not differ ('40 tasks alike: $0.000013-$0.000015 per
    report'): two or more tasks, each priced in full, the costliest per report less than
    TASKS_DIFFER times the cheapest; None when a list of the costliest tells more."""
    if len(tasks) < 2 or any(t["cost_usd"] is None or t["unpriced_calls"] for t in tasks):
        return None
    per_report = [t["cost_usd"] / t["reports"] for t in tasks if t["reports"]]
    low, high = min(per_report), max(per_report)
    if len(per_report) < len(tasks) or high >= TASKS_DIFFER * low:
        return None
    spread = money(low) if money(low) == money(high) else f"{money(low)}-{money(high)}"
    return f"{len(tasks)} tasks alike: {spread} per report"


def _part(cost: float | None, count: int, word: str, tally: Mapping[str, Any]) -> str:
    """A model's or task's cost: '$0.0012 (40 calls)', '$0.0012 (3 reports, 1 call unpriced)',
    'unpriced (5 calls)', 'no priced call'."""
    unpriced = int(tally.get("unpriced_calls") or 0)
    if cost is None:
        return f"unpriced ({_plural(unpriced, 'call')})" if unpriced else "no priced call"
    note = _plural(count, word)
    if unpriced:
        note += f", {_plural(unpriced, 'call')} unpriced"
    return f"{money(cost)} ({note})"


def budget_rows(summary: Summary) -> list[tuple[str, str]]:
    """The repetitions the cost budget stopped, if any: one line."""
    if not summary.budget_exhausted:
        return []
    return [("budget exhausted", f"{_plural(summary.budget_exhausted, 'repetition')} ({RESUME})")]


def with_bill(
    summary: Summary, records: Iterable[Mapping[str, Any]], billed: Billed | None
) -> Summary:
    """`summary` with a resumed run's cost figures taken from its bill (`billed`: its events
    file, `read_billed`): the total is what every segment was billed, so calls a resume replayed
    from the journal and calls of repetitions a kill cut short count where they were paid; each
    task's cost and the p50/p95 per repetition sum the `released` events of a repetition in
    every segment, so identical tasks cost the same however the kills fell (when the whole
    bill is the repetitions': a provider batch's lines are billed by batch, so a batch-lane
    run's tasks keep their reports' costs). A run of one segment, or without its events file,
    keeps the reports' sums (`records`: the results file's, for the latest report of each
    repetition)."""
    if billed is None or billed.segments < 2 or (not billed.total and summary.cost_usd is None):
        return summary
    if sum(billed.by_pair.values(), Decimal(0)) != billed.total:
        # Some of the bill is no repetition's (provider batches' lines, calls from threads of
        # no repetition): the total is the bill's, each task's cost stays its reports'.
        return replace(summary, cost_usd=float(billed.total))
    latest: dict[tuple[str, Any], Mapping[str, Any]] = {}
    for record in records:
        if record.get("type") != "header" and record.get("task_id") is not None:
            latest[(str(record["task_id"]), record.get("repeat_idx"))] = record
    per_task: dict[str, Decimal] = {}
    for (task, _), paid in billed.by_pair.items():
        per_task[task] = per_task.get(task, Decimal(0)) + paid
    by_task = []
    for entry in summary.cost_by_task:  # its reports and unpriced calls as the reports say
        key = str(entry["task_id"])
        billed_task = per_task.pop(key) if key in per_task else None
        cost = entry["cost_usd"] if billed_task is None else float(billed_task)
        by_task.append({**entry, "cost_usd": cost})
    for task, paid in per_task.items():  # paid for, but no report of it yet (killed each time)
        by_task.append(
            {"task_id": task, "reports": 0, "unpriced_calls": 0, "cost_usd": float(paid)}
        )
    priced = sorted((t for t in by_task if t["cost_usd"] is not None), key=lambda t: -t["cost_usd"])
    costs = [
        float(billed.by_pair.get(pair, Decimal(0)))
        for pair, record in latest.items()
        if record.get("status") != BUDGET_EXHAUSTED and repetition_cost(record) is not None
    ]
    return replace(
        summary,
        cost_usd=float(billed.total),
        cost_by_task=priced + [t for t in by_task if t["cost_usd"] is None],
        cost_p50_usd=percentile(costs, 0.5),
        cost_p95_usd=percentile(costs, 0.95),
        cost_repetitions=len(costs),
    )


def billed_records(records: list[dict[str, Any]], billed: Billed | None) -> list[dict[str, Any]]:
    """`records` (a results file's) with each report's `usage.cost_usd` what its repetition
    was billed over every segment (`billed`, as `with_bill` takes it), so that `compare` pairs
    a resumed run's repetitions at what they cost, journal replays and killed attempts
    included (on a repetition's latest report; its earlier ones at 0, so the reports add up to
    the bill); the records as they are for a run of one segment, without its events file, or
    whose bill is not all the repetitions'."""
    if billed is None or billed.segments < 2:
        return records
    if sum(billed.by_pair.values(), Decimal(0)) != billed.total:
        return records
    last: dict[tuple[str, int], int] = {}  # each repetition's latest report carries its bill
    for index, record in enumerate(records):
        task, repeat = record.get("task_id"), record.get("repeat_idx")
        if isinstance(task, str) and isinstance(repeat, int):
            last[(task, repeat)] = index
    kept = []
    for index, record in enumerate(records):
        task, repeat = record.get("task_id"), record.get("repeat_idx")
        pair = (task, repeat) if isinstance(task, str) and isinstance(repeat, int) else None
        if pair in billed.by_pair and isinstance(record.get("usage"), dict):
            paid = float(billed.by_pair[pair]) if last[pair] == index else 0.0
            record = {**record, "usage": {**record["usage"], "cost_usd": paid}}
        kept.append(record)
    return kept


def bill_rows(reports: Summary, billed: Billed | None) -> list[tuple[str, str]]:
    """(label, text) lines of what the bill says beside the reports (`reports`: the summary
    of the reports alone): their sum when a resumed run's bill differs from it, and the budget
    line, against the run's total over its segments."""
    if billed is None:
        return []
    rows: list[tuple[str, str]] = []
    total = float(billed.total)
    if (
        billed.segments > 1
        and reports.cost_usd is not None
        and not math.isclose(reports.cost_usd, total, rel_tol=1e-9)
    ):
        rows.append(
            (
                "  in the reports alone",
                f"{money(reports.cost_usd)} (calls replayed from the journal and repetitions a "
                "kill cut short were paid in earlier segments: counted above)",
            )
        )
    if billed.budget is not None:
        over = f", over {billed.segments} segments" if billed.segments > 1 else ""
        text = f"{money(total)} spent of {money(float(billed.budget))}, the run's total{over}"
        if billed.budget_exhausted:
            text += "; exhausted"
        rows.append(("budget", text))
    return rows


def bill_json(reports: Summary, billed: Billed | None) -> dict[str, Any]:
    """`report --json`'s keys of the bill: reports_cost_usd (the reports' sum), and budget
    ({usd, spent_usd, segments, exhausted}, or None without a budget)."""
    budget = None
    if billed is not None and billed.budget is not None:
        budget = {
            "usd": float(billed.budget),
            "spent_usd": float(billed.total),
            "segments": billed.segments,
            "exhausted": billed.budget_exhausted,
        }
    return {"reports_cost_usd": reports.cost_usd, "budget": budget}


def cost_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """The cost keys of a report's usage as `summarize` reads them: cost_usd (null kept: none
    priced; a value that is no number as "?": unknown), unpriced_calls (likewise), by_model
    with each model's calls and cost_usd (null: unpriced). The view keeps these of each report
    (`light_record`): `summarize` gives the same cost figures of them as of the whole reports."""
    kept: dict[str, Any] = {}
    for key in ("cost_usd", "unpriced_calls"):
        if key in usage:
            value = usage[key]
            kept[key] = value if value is None or finite_number(value) is not None else "?"
    models = mapping(usage.get("by_model"))
    if models:
        kept["by_model"] = {
            str(name): {
                "calls": finite_number(mapping(entry).get("calls")),
                "cost_usd": finite_number(mapping(entry).get("cost_usd")),
            }
            for name, entry in models.items()
        }
    return kept


def cost_comparison(
    a: Summary,
    b: Summary,
    latest_a: Mapping[Any, Mapping[str, Any]],
    latest_b: Mapping[Any, Mapping[str, Any]],
    interval: Interval,
) -> dict[str, Any]:
    """Run B's cost against run A's, from their summaries and their last reports by pair (see
    the module docstring): {a, b (each run's total), difference (B - A; None unless both are
    known), pairs (with cost known in both), pairs_left_out (in both runs, but the cost of one
    unknown, or the budget stopped one), tasks, mean_a, mean_b, mean_difference (per
    repetition, over those pairs), mean_difference_ci95, interval_method,
    no_difference_shown}; the paired values None without such pairs."""
    found: dict[str, Any] = {"a": a.cost_usd, "b": b.cost_usd, "difference": None}
    if a.cost_usd is not None and b.cost_usd is not None:
        found["difference"] = b.cost_usd - a.cost_usd
    pairs: list[tuple[float, float]] = []
    by_task: dict[Any, list[float]] = {}
    left_out = 0
    for pair in latest_a.keys() & latest_b.keys():
        report_a, report_b = latest_a[pair], latest_b[pair]
        cost_a, cost_b = repetition_cost(report_a), repetition_cost(report_b)
        stopped = BUDGET_EXHAUSTED in (report_a.get("status"), report_b.get("status"))
        if cost_a is None or cost_b is None or stopped:
            left_out += 1
            continue
        pairs.append((cost_a, cost_b))
        by_task.setdefault(pair[0], []).append(cost_b - cost_a)
    found.update(pairs=len(pairs), pairs_left_out=left_out, tasks=len(by_task))
    found.update(mean_a=None, mean_b=None, mean_difference=None, mean_difference_ci95=None)
    found.update(interval_method=None, no_difference_shown=None)
    if pairs:
        # In a fixed order: the interval's resamples must not depend on the files' order.
        diffs = [by_task[task] for task in sorted(by_task, key=str)]
        (low, high), method = interval(diffs)
        mean_a = math.fsum(cost for cost, _ in pairs) / len(pairs)
        mean_b = math.fsum(cost for _, cost in pairs) / len(pairs)
        mean_difference = math.fsum(math.fsum(d) for d in diffs) / len(pairs)
        found.update(mean_a=mean_a, mean_b=mean_b, mean_difference=mean_difference)
        found.update(mean_difference_ci95=[low, high], interval_method=method)
        found["no_difference_shown"] = low <= 0.0 <= high
    return found


def comparison_rows(cost: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) lines of `cost_comparison`'s result: the difference of the runs' totals,
    and the paired difference per repetition with its interval."""
    rows: list[tuple[str, str]] = []
    if cost["difference"] is not None:
        text = signed_money(cost["difference"])
        if cost["a"]:
            text += f" ({cost['difference'] / cost['a']:+.1%} of A's)"
        rows.append(("cost B - A, in all", text))
    else:
        rows.append(("cost B - A, in all", "unknown (a run without priced calls)"))
    if not cost["pairs"]:
        rows.append(("cost B - A, paired", "no repetition has its cost known in both runs"))
        return rows
    low, high = cost["mean_difference_ci95"]
    verdict = "no difference shown" if cost["no_difference_shown"] else "a difference shown"
    rows.append(
        (
            "cost B - A, paired",
            f"{signed_money(cost['mean_difference'])} per repetition (95% CI "
            f"{signed_money(low)} to {signed_money(high)}), {verdict}",
        )
    )
    over = f"{_plural(cost['pairs'], 'pair')} in {_plural(cost['tasks'], 'task')}"
    means = f"{money(cost['mean_a'])} / {money(cost['mean_b'])}"
    rows.append(("  mean cost A / B", f"{means} per repetition, over {over}"))
    if cost["pairs_left_out"]:
        rows.append(
            (
                "  left out",
                f"{_plural(cost['pairs_left_out'], 'pair')} whose cost is unknown in one run "
                "(unpriced calls, no cost recorded) or that the budget stopped",
            )
        )
    return rows
