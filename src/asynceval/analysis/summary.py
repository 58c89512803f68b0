"""Summaries of a run's reports: what happened, and how well the agents did.

Errors and timeouts are counted apart and never folded into the score: the pass rate is computed
only over scored repetitions (status success or evaluation_failed with at least one usable
evaluator result), with one 95% interval that treats tasks as clusters (repetitions of one task
share its difficulty; see `asynceval.engine.statistics`, t with tasks - 1 degrees of freedom, and
Wilson's interval over the tasks where the clustered standard error is 0, as at an all-pass run).
The pass rate is the mean score over the scored repetitions, its interval the cluster-robust
(CR1) one; with one scored repetition per task the interval is Wilson's, over repetitions. Under
adaptive repeats (a header with `adaptive_repeats`: `--repeats auto`), where tasks whose results
vary get more repetitions, the pass rate is the mean over tasks of each task's mean score (the
plain mean over repetitions would over-weight those tasks), with the interval of that mean.
The reducers (mean, pass_at_k(k), ...) give one value per task; each is reported as its mean over
the tasks that have one, with the interval of that mean. The `mean` reducer's value is the pass
rate itself whenever every task has as many scored repetitions (or repeats were adaptive): it then
carries the pass rate's interval, so one figure never shows two intervals. The errors are grouped
by kind (provider refused, provider unreachable, your agent raised, your evaluator raised, setup
failed, timed out: see `asynceval.engine._error_kinds`), each with its count and its first
message. Repetitions the run's cost budget stopped (status budget_exhausted) are neither scored nor
errors: counted apart (`budget_exhausted`), as `asynceval run --resume` runs them again.

Cost (DESIGN section 15): the run's total (`cost_usd`), per model and per task sum *every* report
of the file, the earlier report of a pair that a resumed run re-ran included (its money was
spent); the p50 and p95 per repetition take the last report of each pair whose cost is known in
full (see `repetition_cost`), budget_exhausted ones left out (they did not run to their end).
Calls whose model has no price are counted apart (`unpriced_calls`), never as $0; calls priced
at their worst case for want of reported usage are in the total and counted
(`worst_case_calls`); a report
without `usage.cost_usd` (written before cost was recorded) has an unknown cost, counted in
`cost_unknown_reports`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..engine.report import ERROR_KIND_LABELS, eval_score, report_error_kind
from ..engine.statistics import Reducer, as_reducer, mean
from ..engine.statistics import wilson_interval as wilson_interval  # re-exported: analysis
from ._pass_rate import adaptive_run as adaptive_run  # re-exported: compare
from ._pass_rate import pass_rate_figures

BUDGET_EXHAUSTED = "budget_exhausted"  # the status of a repetition the cost budget stopped
# Statuses left out of the pass rate (no evaluator ran) that `--fail-under` counts as failures:
# the agent, or the simulated user it talked to, failed the task.
GATE_FAILURES = ("agent_error", "user_error")


def report_score(report: Mapping[str, Any]) -> float | None:
    """1.0 / 0.0 (or a fraction) for a scored repetition, None when it has no usable result.

    Evaluator entries with a boolean "passed" decide (all passed = 1); else numeric "score" values
    in [0, 1] are averaged. Failed repetitions are not scored.
    """
    if report.get("status") not in ("success", "evaluation_failed"):
        return None
    return eval_score(report.get("eval"))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q` quantile of `values` (0 < q <= 1), None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


@dataclass
class Summary:
    """Counts, pass rate and costs of a set of reports (see `summarize`)."""

    repetitions: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    termination_reasons: dict[str, int] = field(default_factory=dict)
    scored: int = 0
    passed: float = 0.0
    pass_rate: float | None = None
    pass_rate_ci95: tuple[float, float] | None = None
    pass_rate_interval: str | None = None  # CLUSTERED, TASK_MEAN, or WILSON (one per task)
    pass_rate_over: str = "repetitions"  # or "tasks": the mean of task means (adaptive repeats)
    # Under adaptive repeats, what --fail-under compares: the mean over tasks with agent and user
    # errors (GATE_FAILURES) counted as failures; None otherwise (the gate counts repetitions).
    pass_rate_for_gate: float | None = None
    tasks: int = 0  # tasks with at least one scored repetition
    scored_per_task: tuple[int, int] = (0, 0)  # the fewest and most scored repetitions of a task
    repeats_half_width: float | None = None  # the part repeats narrow (stratified_half_width)
    add_tasks_not_repeats: bool = False  # the between-task part dominates the interval
    reducers: list[dict[str, Any]] = field(default_factory=list)  # see `reducer_results`
    errors: int = 0  # repetitions that ended in an error (timeouts included)
    error_kinds: list[dict[str, Any]] = field(default_factory=list)  # see `ErrorGroup`
    timeouts: int = 0
    llm_calls: int = 0
    retries: int = 0
    cache_hits: int = 0
    journal_hits: int = 0
    hedges: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, read from the provider's prompt cache
    budget_exhausted: int = 0  # repetitions the cost budget stopped: not scored, not errors
    cost_usd: float | None = None  # every report's priced calls; None when none was priced
    unpriced_calls: int = 0  # every report's calls whose model has no price
    worst_case_calls: int = 0  # every report's calls priced at their worst case (no usage)
    cost_unknown_reports: int = 0  # reports without cost (written before cost was recorded)
    cost_by_model: dict[str, dict[str, Any]] = field(default_factory=dict)  # {calls, cost_usd, ...}
    cost_by_task: list[dict[str, Any]] = field(default_factory=list)  # see `_cost_by_task`
    cost_p50_usd: float | None = None  # per repetition, over `cost_repetitions` of them
    cost_p95_usd: float | None = None
    cost_repetitions: int = 0  # last reports whose cost is known in full (budget_exhausted aside)
    duration_p50_s: float | None = None
    duration_p95_s: float | None = None
    wall_s: float | None = None
    runs: int = 0
    damaged_lines: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


FIRST_MESSAGE_CHARS = 200  # the first message of a kind, on one line, trimmed to this


def error_message(record: Mapping[str, Any]) -> str:
    """A report's error on one line: type, message (first line), where; trimmed."""
    error = mapping(record.get("error"))
    text = str(error.get("message") or "").strip().splitlines()
    message = f"{error.get('type') or record.get('status')}: {text[0] if text else ''}".rstrip()
    if len(message) > FIRST_MESSAGE_CHARS:
        message = message[: FIRST_MESSAGE_CHARS - 1] + "\u2026"
    return f"{message} (task {record.get('task_id')}, repeat {record.get('repeat_idx')})"


def _group_errors(latest: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The errors of the latest reports by kind: {kind, label, count, first}, most first."""
    groups: dict[str, dict[str, Any]] = {}
    for record in latest:
        if record.get("status") == "success" and not record.get("error"):
            continue
        if record.get("status") == BUDGET_EXHAUSTED:
            continue  # counted apart: not an error of the agent's nor of the infrastructure
        kind = report_error_kind(record) or "agent_raised"
        group = groups.get(kind)
        if group is None:
            label = ERROR_KIND_LABELS.get(kind, kind)
            group = groups[kind] = {"kind": kind, "label": label, "count": 0}
            group["first"] = error_message(record)
        group["count"] += 1
    return sorted(groups.values(), key=lambda group: -int(group["count"]))


def summarize(
    records: Iterable[Mapping[str, Any]],
    wall_s: float | None = None,
    reducers: Sequence[Reducer | str] | None = None,
    *,
    replaced: Iterable[Mapping[str, Any]] = (),
    adaptive: bool | None = None,
) -> Summary:
    """A Summary of a results file's records: header lines (`{"type": "header"}`) count runs, and
    of several reports for one (task_id, repeat_idx), as after a resume, the last one counts
    (but the cost of every report adds to the totals: see the module docstring).
    Without `wall_s`, the wall time runs from the first header's start to the last report.
    `reducers` (names or `Reducer`s) default to the ones the run's header names
    (`benchmark_config["reducers"]`), else mean; a bad name raises ConfigError. `replaced`:
    earlier reports of pairs that `records` holds only the last of (the view keeps no more),
    whose cost still counts. `adaptive`: whether the repeats were adaptive (the pass rate is then
    the mean over tasks); None: as a header says (`adaptive_repeats`), which reports alone lack."""
    records = list(records)
    chosen = [as_reducer(r) for r in reducers] if reducers else header_reducers(records)
    summary = Summary(wall_s=wall_s)
    latest = _latest_reports(records, summary)
    by_task: dict[Any, list[float]] = {}
    gate_by_task: dict[Any, list[float]] = {}  # scores, and 0 for GATE_FAILURES
    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    durations: list[float] = []
    for record in latest:
        summary.repetitions += 1
        status = str(record.get("status"))
        statuses[status] += 1
        if record.get("termination_reason"):
            reasons[str(record["termination_reason"])] += 1
        if status == BUDGET_EXHAUSTED:
            summary.budget_exhausted += 1
        else:
            summary.errors += status != "success" or bool(record.get("error"))
        summary.timeouts += status == "task_timeout"
        score, task = report_score(record), _hashable(record.get("task_id"))
        if score is not None:
            summary.scored += 1
            summary.passed += score
            by_task.setdefault(task, []).append(score)
        if score is not None or status in GATE_FAILURES:
            gate_by_task.setdefault(task, []).append(0.0 if score is None else score)
        _add_usage(summary, mapping(record.get("usage")))
        duration = finite_number(mapping(record.get("timing")).get("duration_s"))
        if duration is not None:
            durations.append(float(duration))
    summary.error_kinds = _group_errors(latest) if summary.errors else []
    summary.statuses = dict(statuses.most_common())
    summary.termination_reasons = dict(reasons.most_common())
    if summary.scored:
        adaptive = adaptive_run(records) if adaptive is None else adaptive
        pass_rate_figures(summary, chosen, by_task, gate_by_task, adaptive=adaptive)
    summary.duration_p50_s = percentile(durations, 0.50)
    summary.duration_p95_s = percentile(durations, 0.95)
    reports = [record for record in records if record.get("type") != "header"]
    _add_costs(summary, [*reports, *replaced], latest)
    return summary


def header_reducers(records: Iterable[Mapping[str, Any]]) -> list[Reducer]:
    """The reducers the first header naming some holds (`benchmark_config["reducers"]`, names as
    `as_reducer` reads them; unreadable ones skipped), else [mean]."""
    for record in records:
        if record.get("type") != "header":
            continue
        names = mapping(record.get("benchmark_config")).get("reducers")
        if isinstance(names, list) and names:
            chosen = []
            for name in names:
                try:
                    chosen.append(as_reducer(str(name)))
                except ValueError:
                    continue
            if chosen:
                return chosen
    return [mean]


def _latest_reports(
    records: Iterable[Mapping[str, Any]], summary: Summary
) -> list[Mapping[str, Any]]:
    """The last report of each (task_id, repeat_idx); counts the runs (headers) into `summary`
    and, unless it has one, its wall time from the first start to the last report."""
    latest: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    first_start: float | None = None
    last_end: float | None = None
    for record in records:
        if record.get("type") == "header":
            summary.runs += 1
            start = finite_number(record.get("started_at_unix"))
            if start is not None and first_start is None:
                first_start = float(start)
            continue
        latest[(_hashable(record.get("task_id")), _hashable(record.get("repeat_idx")))] = record
        end = finite_number(mapping(record.get("timing")).get("finished_at"))
        if end is not None:
            last_end = float(end) if last_end is None else max(last_end, float(end))
    if summary.wall_s is None and first_start is not None and last_end is not None:
        summary.wall_s = max(0.0, last_end - first_start)
    return list(latest.values())


def finite_number(value: Any) -> int | float | None:
    """`value` when it is a finite number (not a bool, within ±1e300), else None: the one rule
    for every count, size and time read from a run's files (which anyone may have edited)."""
    if type(value) is int or type(value) is float:  # what JSON gives; a bool is neither
        return value if -1e300 < value < 1e300 else None  # NaN compares False
    return None


def _hashable(value: Any) -> Any:
    """A task_id or repeat_idx as a key: itself, or a hand-edited list or object as JSON text."""
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one (a hand-edited report's usage or timing)."""
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> int:
    number = finite_number(value)
    return int(number) if number is not None else 0


def _add_usage(summary: Summary, usage: Mapping[str, Any]) -> None:
    summary.llm_calls += _count(usage.get("llm_calls", 0))
    summary.retries += _count(usage.get("retries", 0))
    summary.cache_hits += _count(usage.get("cache_hits", 0))
    summary.journal_hits += _count(usage.get("journal_hits", 0))
    summary.hedges += _count(usage.get("hedges", 0))
    summary.prompt_tokens += _count(usage.get("prompt_tokens", 0))
    summary.completion_tokens += _count(usage.get("completion_tokens", 0))
    summary.cached_tokens += _count(usage.get("cached_tokens", 0))


def repetition_cost(report: Mapping[str, Any]) -> float | None:
    """A report's cost in USD when it is known in full, else None: its `usage.cost_usd` when no
    call was unpriced (a null cost_usd with no unpriced call: nothing priced was sent, 0.0);
    None without cost_usd (a file written before cost was recorded) or with unpriced calls."""
    usage = mapping(report.get("usage"))
    if "cost_usd" not in usage:
        return None
    cost = usage["cost_usd"]
    if finite_number(usage.get("unpriced_calls", 0 if cost is not None else None)) != 0:
        return None  # unpriced calls (or, with a null cost, no count of them)
    return 0.0 if cost is None else _float(finite_number(cost))


def _float(value: int | float | None) -> float | None:
    return None if value is None else float(value)


def _add_costs(
    summary: Summary, reports: Iterable[Mapping[str, Any]], latest: Iterable[Mapping[str, Any]]
) -> None:
    """The cost figures of `summary`: totals, per model and per task over `reports` (every
    report), p50/p95 per repetition over `latest` (see the module docstring)."""
    priced: list[float] = []
    models: dict[str, dict[str, Any]] = {}
    tasks: dict[Any, dict[str, Any]] = {}
    for record in reports:
        usage = mapping(record.get("usage"))
        cost = _float(finite_number(usage.get("cost_usd")))
        if "cost_usd" not in usage or (cost is None and usage["cost_usd"] is not None):
            summary.cost_unknown_reports += 1  # no cost, or one that is not a number
            continue
        unpriced = _count(usage.get("unpriced_calls", 0))
        summary.unpriced_calls += unpriced
        summary.worst_case_calls += _count(usage.get("worst_case_calls", 0))
        task_id = record.get("task_id")
        task = tasks.setdefault(_hashable(task_id), _tally(task_id=task_id, reports=0))
        task["reports"] += 1
        task["unpriced_calls"] += unpriced
        if cost is not None:
            priced.append(cost)
            task["costs"].append(cost)
        for name, entry in mapping(usage.get("by_model")).items():
            model = models.setdefault(str(name), _tally(calls=0))
            calls, model_cost = _count(mapping(entry).get("calls")), mapping(entry).get("cost_usd")
            model["calls"] += calls
            if (number := _float(finite_number(model_cost))) is not None:
                model["costs"].append(number)
            else:
                model["unpriced_calls"] += calls
    summary.cost_usd = math.fsum(priced) if priced else None
    summary.cost_by_model = {name: _total(model) for name, model in sorted(models.items())}
    summary.cost_by_task = _cost_by_task(tasks.values())
    ran = [record for record in latest if record.get("status") != BUDGET_EXHAUSTED]
    costs = [cost for cost in map(repetition_cost, ran) if cost is not None]
    summary.cost_repetitions = len(costs)
    summary.cost_p50_usd, summary.cost_p95_usd = percentile(costs, 0.5), percentile(costs, 0.95)


def _tally(**start: Any) -> dict[str, Any]:
    return {**start, "costs": [], "unpriced_calls": 0}


def _total(tally: dict[str, Any]) -> dict[str, Any]:
    """A tally with its costs summed: cost_usd None when none was priced."""
    costs = tally.pop("costs")
    return {**tally, "cost_usd": math.fsum(costs) if costs else None}


def _cost_by_task(tallies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task with a report that has cost: {task_id, reports (every report of it, replaced
    ones included), unpriced_calls, cost_usd (their priced calls' sum; None when none was
    priced)}, the costliest first (unpriced ones last, in the order the file has them)."""
    totals = [_total(tally) for tally in tallies]
    unpriced = [t for t in totals if t["cost_usd"] is None]
    priced = sorted((t for t in totals if t["cost_usd"] is not None), key=lambda t: -t["cost_usd"])
    return priced + unpriced
