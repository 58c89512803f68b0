"""The pass rate's figures in a `Summary` (see `asynceval.analysis.summary`): its interval,
clustered by task (Wilson's with one scored repetition per task); under adaptive repeats the mean
over tasks in place of the mean over repetitions; the reducers' values with theirs; and what
`--fail-under` compares. The math is `asynceval.engine.statistics`'."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..engine.statistics import (
    Z_95,
    Reducer,
    between_tasks_dominates,
    clustered_mean_ci,
    reduce_tasks,
    stratified_half_width,
    task_mean_ci,
    wilson_interval,
)

if TYPE_CHECKING:
    from .summary import Summary

CLUSTERED = "clustered by task"
TASK_MEAN = "mean over tasks (adaptive repeats), clustered by task"
WILSON = "Wilson, over repetitions"


def pass_rate_figures(
    summary: Summary,
    reducers: Sequence[Reducer],
    by_task: Mapping[Any, list[float]],
    gate_by_task: Mapping[Any, list[float]],
    *,
    adaptive: bool,
) -> None:
    """Fill `summary`'s pass rate (at least one repetition scored), its interval, the reducers
    and, under adaptive repeats, `pass_rate_for_gate` from the scores of each task (`by_task`)
    and those with agent and user errors counted as 0 (`gate_by_task`)."""
    summary.pass_rate = summary.passed / summary.scored
    _pass_rate_interval(summary, list(by_task.values()), adaptive=adaptive)
    summary.reducers = reducer_results(reducers, list(by_task.values()), headline=summary)
    if summary.pass_rate_over == "tasks":
        means = [math.fsum(scores) / len(scores) for scores in gate_by_task.values()]
        summary.pass_rate_for_gate = math.fsum(means) / len(means)


def adaptive_run(records: Iterable[Mapping[str, Any]]) -> bool:
    """True when a header of the file says its repeats were adaptive (`adaptive_repeats`, which
    `--repeats auto` and `run(repeats=AdaptiveRepeats(...))` write), in any segment."""
    return any(
        record.get("type") == "header" and isinstance(record.get("adaptive_repeats"), Mapping)
        for record in records
    )


def _pass_rate_interval(
    summary: Summary, scores_by_task: list[list[float]], *, adaptive: bool
) -> None:
    """The pass rate's interval: clustered by task, or Wilson's when every task has one scored
    repetition (then the repetitions are independent draws of tasks); under adaptive repeats the
    pass rate becomes the mean over tasks, with that mean's interval; and whether more tasks,
    not more repeats, would narrow it."""
    summary.tasks = len(scores_by_task)
    counts = [len(scores) for scores in scores_by_task]
    summary.scored_per_task = (min(counts), max(counts))
    if all(len(scores) == 1 for scores in scores_by_task):
        summary.pass_rate_ci95 = wilson_interval(summary.passed, summary.scored)
        summary.pass_rate_interval = WILSON
        return
    if adaptive:
        task_means = [math.fsum(scores) / len(scores) for scores in scores_by_task]
        rate, low, high, se = task_mean_ci(task_means)
        summary.pass_rate, summary.pass_rate_over = rate, "tasks"
        summary.pass_rate_interval = TASK_MEAN
    else:
        _, low, high, se = clustered_mean_ci(scores_by_task)
        summary.pass_rate_interval = CLUSTERED
    summary.pass_rate_ci95 = (low, high)
    repeats_half = stratified_half_width([(math.fsum(s), len(s)) for s in scores_by_task])
    summary.repeats_half_width = repeats_half
    summary.add_tasks_not_repeats = between_tasks_dominates(Z_95 * se, repeats_half)


def reducer_results(
    reducers: Sequence[Reducer],
    scores_by_task: Sequence[Sequence[float]],
    *,
    headline: Summary | None = None,
) -> list[dict[str, Any]]:
    """Per reducer: {name, value (its mean over the tasks that have one), ci95 ([low, high]), se,
    tasks (how many have a value), too_few (tasks with too few repetitions for it),
    is_pass_rate}. With a `headline` whose pass rate is the mean over tasks (as many scored
    repetitions in every task, or adaptive repeats), the `mean` reducer is that figure: it takes
    its interval, and `is_pass_rate` is true (the summary then shows it once)."""
    results = []
    for reducer in reducers:
        values = reduce_tasks(reducer, scores_by_task)
        entry: dict[str, Any] = {"name": reducer.name, "value": None, "ci95": None, "se": None}
        entry["is_pass_rate"] = False
        if values:
            value, low, high, se = task_mean_ci(values)
            entry.update(value=value, ci95=[low, high], se=se if math.isfinite(se) else None)
            if reducer.name == "mean" and headline is not None and _is_task_mean(headline):
                assert headline.pass_rate_ci95 is not None
                entry.update(value=headline.pass_rate, ci95=list(headline.pass_rate_ci95))
                entry["is_pass_rate"] = True
        entry.update(tasks=len(values), too_few=len(scores_by_task) - len(values))
        results.append(entry)
    return results


def _is_task_mean(summary: Summary) -> bool:
    """Whether the summary's pass rate is the mean over tasks of their mean scores."""
    fewest, most = summary.scored_per_task
    ready = summary.pass_rate is not None and summary.pass_rate_ci95 is not None
    return ready and (summary.pass_rate_over == "tasks" or fewest == most)
