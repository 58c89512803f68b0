"""Two runs of one benchmark side by side: which is better, by how much, and on which repetitions.

Repetitions are paired by (task_id, repeat_idx); in each run the last report of a pair counts (a
resumed run's re-run replaces the earlier one), as in `summarize`. A pair is *scored* in a run when
`report_score` gives it a score (infrastructure failures and timeouts are not scored). The paired
statistics use the pairs scored in both runs:

- difference = mean(s_B) − mean(s_A) over those n pairs, s the score in [0, 1]; when either run's
  repeats were adaptive (`--repeats auto`, whose tasks have uneven numbers of repetitions), the
  means are over tasks, each task's mean over its pairs, as the runs' pass rates are;
- its 95% interval is a paired percentile bootstrap that resamples *tasks*, not repetitions
  (repetitions of one task share its difficulty, so they are not independent draws): 10,000
  resamples of the tasks with replacement, each task bringing all its pairs, from
  `random.Random(0)` (so the output is the same on every call), the interval running from the
  250th to the 9,750th of the sorted resample differences. With one pair per task this is the
  bootstrap of the per-pair differences d_i = s_B,i − s_A,i; with the same number of pairs in
  every task, of the per-task mean differences; else each resample's difference is the sum of
  its tasks' differences over the sum of their pairs (more than `MAX_PER_PAIR` such tasks: the
  interval mean ± t·se with the task-clustered (CR1) standard error, t with G − 1 degrees of
  freedom, G the tasks). In the first two cases a
  resample is drawn as multinomial counts over the distinct values of d (three for pass/fail
  scores), which costs the same for 100 tasks as for 100,000. Only when d takes more than
  `MAX_DISTINCT` values over more than `MAX_PER_PAIR` tasks (fractional scores on a large run),
  where a resample costs too much, is it the interval mean(d) ± t·sd(d)/√n (sd with n − 1, t
  with n − 1 degrees of freedom), which with that many tasks is what the bootstrap converges to;
- the reducers (mean, pass_at_k(k), ...: `asynceval.engine.statistics`) each give a value per task
  in each run from its pairs scored in both; their difference is the mean over tasks of B's value
  minus A's, with the same bootstrap over tasks;
- the interval "shows a difference" only when it does not hold 0 (`no_difference_shown`);
- McNemar's test on pass/fail, only with one scored pair per task (it takes pairs as
  independent), a pair passing in a run when its score is exactly 1.0: with b = pairs passed in A
  and not in B ("regressed") and c = the reverse ("improved"), m = b + c and X ~ Binomial(m, 1/2),
  the exact two-sided p = min(1, 2·P(X ≤ min(b, c))) and the mid-p
  = min(1, 2·P(X ≤ min(b, c)) − P(X = min(b, c))). With no discordant pair both are 1;
- cost: each run's total and, over the pairs whose cost both runs know, the mean difference in
  cost per repetition with the same interval over tasks (`asynceval.analysis.cost`).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine.statistics import Reducer, as_reducer, clustered_mean_ci, t_critical
from ..errors import AsyncEvalError
from ._binomial import binomial as binomial  # the draws of `bootstrap_means`
from ._pass_rate import adaptive_run
from .cost import cost_comparison
from .summary import Summary, header_reducers, report_score, summarize

RESAMPLES = 10_000
SEED = 0
MAX_DISTINCT = 64  # distinct differences: a resample costs one binomial draw per value
MAX_PER_PAIR = 300  # pairs: a resample costs one draw per pair
EXACT_TRIALS = 1000  # McNemar's binomial sums in integers up to this many discordant pairs

PairId = tuple[Any, Any]  # (task_id, repeat_idx), as the results file has them


class NotComparable(AsyncEvalError, ValueError):
    """Raised by `check_comparable` for two runs that cannot be paired: runs of different
    benchmarks, or with no repetition in common; the message names both runs."""


@dataclass
class Comparison:
    """Run B measured against run A (see the module docstring for the statistics).

    Lists of pairs are sorted by task_id then repeat_idx. `as_dict()` is the JSON form, with keys:
    label_a, label_b (what the runs are called: their paths from `asynceval compare`); a, b (each
    run's own `Summary.as_dict()`: pass_rate, pass_rate_ci95, scored, ...); n_pairs (pairs scored in
    both runs); mean_a, mean_b, difference (B − A) and difference_ci95 ([low, high]), all None
    without pairs; interval_method ("paired bootstrap" with one pair per task, "paired bootstrap
    over tasks", "normal approximation" (one pair per task), "normal approximation over tasks",
    "normal approximation, clustered by task", or None); no_difference_shown (the interval holds 0;
    None without pairs); tasks (tasks with a pair scored in both); reducers (per reducer {name, a,
    b, difference, ci95, tasks, no_difference_shown}); resamples and seed of the bootstrap;
    both_passed, both_failed (pair counts); regressed, improved (the flipped pairs); mcnemar_p,
    mcnemar_mid_p (None without pairs); only_in_a, only_in_b (pairs present in one run's file only);
    scored_in_a_only, scored_in_b_only, scored_in_neither (pairs present in both whose score is
    missing in B, in A, in both). Each pair is an object {"task_id": ..., "repeat_idx": ...}.
    `cost` (JSON already: `asynceval.analysis.cost.cost_comparison`) is not in `as_dict()`,
    the comparison of scores; `asynceval compare --json` adds it under "cost".
    """

    a: Summary
    b: Summary
    label_a: str = "A"
    label_b: str = "B"
    n_pairs: int = 0
    mean_a: float | None = None
    mean_b: float | None = None
    difference: float | None = None
    difference_ci95: tuple[float, float] | None = None
    interval_method: str | None = None
    no_difference_shown: bool | None = None
    tasks: int = 0
    reducers: list[dict[str, Any]] = field(default_factory=list)
    both_passed: int = 0
    both_failed: int = 0
    regressed: list[PairId] = field(default_factory=list)
    improved: list[PairId] = field(default_factory=list)
    mcnemar_p: float | None = None
    mcnemar_mid_p: float | None = None
    only_in_a: list[PairId] = field(default_factory=list)
    only_in_b: list[PairId] = field(default_factory=list)
    scored_in_a_only: list[PairId] = field(default_factory=list)
    scored_in_b_only: list[PairId] = field(default_factory=list)
    scored_in_neither: list[PairId] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        def pairs(ids: list[PairId]) -> list[dict[str, Any]]:
            return [{"task_id": task_id, "repeat_idx": repeat} for task_id, repeat in ids]

        ci = self.difference_ci95
        return {
            "label_a": self.label_a,
            "label_b": self.label_b,
            "a": self.a.as_dict(),
            "b": self.b.as_dict(),
            "n_pairs": self.n_pairs,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "difference": self.difference,
            "difference_ci95": None if ci is None else list(ci),
            "interval_method": self.interval_method,
            "no_difference_shown": self.no_difference_shown,
            "tasks": self.tasks,
            "reducers": self.reducers,
            "resamples": RESAMPLES,
            "seed": SEED,
            "both_passed": self.both_passed,
            "both_failed": self.both_failed,
            "regressed": pairs(self.regressed),
            "improved": pairs(self.improved),
            "mcnemar_p": self.mcnemar_p,
            "mcnemar_mid_p": self.mcnemar_mid_p,
            "only_in_a": pairs(self.only_in_a),
            "only_in_b": pairs(self.only_in_b),
            "scored_in_a_only": pairs(self.scored_in_a_only),
            "scored_in_b_only": pairs(self.scored_in_b_only),
            "scored_in_neither": pairs(self.scored_in_neither),
        }


def compare_runs(
    records_a: Iterable[Mapping[str, Any]],
    records_b: Iterable[Mapping[str, Any]],
    *,
    label_a: str = "A",
    label_b: str = "B",
    reducers: Sequence[Reducer | str] | None = None,
) -> Comparison:
    """Run B's records (header lines and reports of a results file) against run A's. `reducers`
    default to the ones A's header names, else B's, else mean."""
    records_a, records_b = list(records_a), list(records_b)
    if reducers:
        chosen = [as_reducer(r) for r in reducers]
    else:
        chosen = header_reducers(records_a)
        if [r.name for r in chosen] == ["mean"]:
            chosen = header_reducers(records_b)
    latest_a, latest_b = latest_reports(records_a), latest_reports(records_b)
    comparison = Comparison(
        a=summarize(records_a, reducers=chosen),
        b=summarize(records_b, reducers=chosen),
        label_a=label_a,
        label_b=label_b,
    )
    by_task: dict[Any, list[tuple[float, float]]] = {}
    comparison.only_in_a = sorted(latest_a.keys() - latest_b.keys(), key=pair_order)
    comparison.only_in_b = sorted(latest_b.keys() - latest_a.keys(), key=pair_order)
    scores: list[tuple[float, float]] = []
    for pair in sorted(latest_a.keys() & latest_b.keys(), key=pair_order):
        score_a, score_b = report_score(latest_a[pair]), report_score(latest_b[pair])
        if score_a is None or score_b is None:
            if score_a is not None:
                comparison.scored_in_a_only.append(pair)
            elif score_b is not None:
                comparison.scored_in_b_only.append(pair)
            else:
                comparison.scored_in_neither.append(pair)
            continue
        scores.append((score_a, score_b))
        by_task.setdefault(pair[0], []).append((score_a, score_b))
        passed_a, passed_b = score_a == 1.0, score_b == 1.0
        if passed_a and not passed_b:
            comparison.regressed.append(pair)
        elif passed_b and not passed_a:
            comparison.improved.append(pair)
        else:
            comparison.both_passed += passed_a
            comparison.both_failed += not passed_a
    over_tasks = adaptive_run(records_a) or adaptive_run(records_b)
    _paired_statistics(comparison, scores, list(by_task.values()), over_tasks=over_tasks)
    comparison.reducers = reducer_differences(chosen, list(by_task.values()))
    comparison.cost = cost_comparison(
        comparison.a, comparison.b, latest_a, latest_b, task_difference_interval
    )
    return comparison


def _paired_statistics(
    comparison: Comparison,
    scores: Sequence[tuple[float, float]],
    by_task: Sequence[Sequence[tuple[float, float]]],
    *,
    over_tasks: bool = False,
) -> None:
    """The means, difference, interval (tasks resampled) and, with one pair per task, McNemar
    p-values of the pairs scored in both runs; `over_tasks`: the means are over tasks (adaptive
    repeats), the interval that of the mean of the tasks' mean differences."""
    n = comparison.n_pairs = len(scores)
    comparison.tasks = len(by_task)
    if not n:
        return
    diffs_by_task = [[b - a for a, b in pairs] for pairs in by_task]
    if over_tasks:
        comparison.mean_a = math.fsum(_mean(a for a, _ in p) for p in by_task) / len(by_task)
        comparison.mean_b = math.fsum(_mean(b for _, b in p) for p in by_task) / len(by_task)
        means = [[math.fsum(d) / len(d)] for d in diffs_by_task]
        interval, method = task_difference_interval(means)
        comparison.difference_ci95, comparison.interval_method = interval, method + " over tasks"
    else:
        comparison.mean_a = math.fsum(a for a, _ in scores) / n
        comparison.mean_b = math.fsum(b for _, b in scores) / n
        interval, method = task_difference_interval(diffs_by_task)
        comparison.difference_ci95, comparison.interval_method = interval, method
    comparison.difference = comparison.mean_b - comparison.mean_a
    low, high = comparison.difference_ci95
    comparison.no_difference_shown = low <= 0.0 <= high
    if all(len(pairs) == 1 for pairs in by_task):
        comparison.mcnemar_p, comparison.mcnemar_mid_p = mcnemar(
            len(comparison.regressed), len(comparison.improved)
        )


def _mean(values: Iterable[float]) -> float:
    found = list(values)
    return math.fsum(found) / len(found)


def reducer_differences(
    reducers: Sequence[Reducer], by_task: Sequence[Sequence[tuple[float, float]]]
) -> list[dict[str, Any]]:
    """Per reducer: {name, a, b (its mean over tasks in each run), difference (B − A), ci95
    (bootstrap over tasks), tasks (with a value in both), no_difference_shown}; the values None
    when no task has enough pairs for it."""
    results = []
    for reducer in reducers:
        values = []
        for pairs in by_task:
            value_a = reducer.reduce([a for a, _ in pairs])
            value_b = reducer.reduce([b for _, b in pairs])
            if value_a is not None and value_b is not None:
                values.append((value_a, value_b))
        entry: dict[str, Any] = {"name": reducer.name, "tasks": len(values)}
        entry.update(a=None, b=None, difference=None, ci95=None, no_difference_shown=None)
        if values:
            (low, high), _ = difference_interval([b - a for a, b in values])
            mean_a = math.fsum(a for a, _ in values) / len(values)
            mean_b = math.fsum(b for _, b in values) / len(values)
            entry.update(a=mean_a, b=mean_b, difference=mean_b - mean_a, ci95=[low, high])
            entry["no_difference_shown"] = low <= 0.0 <= high
        results.append(entry)
    return results


def task_difference_interval(
    diffs_by_task: Sequence[Sequence[float]],
) -> tuple[tuple[float, float], str]:
    """The 95% interval of the mean difference over all pairs, tasks resampled (see the module
    docstring), and how it was made. Every task has at least one pair."""
    sizes = {len(diffs) for diffs in diffs_by_task}
    if sizes == {1}:
        return difference_interval([diffs[0] for diffs in diffs_by_task])
    if len(sizes) == 1:  # the same number of pairs per task: the mean of the task means
        interval, method = difference_interval([math.fsum(d) / len(d) for d in diffs_by_task])
        return interval, method + " over tasks"
    groups = len(diffs_by_task)
    if groups > MAX_PER_PAIR:
        mean, _, _, se = clustered_mean_ci(diffs_by_task)
        half = t_critical(groups) * se
        return (mean - half, mean + half), "normal approximation, clustered by task"
    units = [(math.fsum(d), len(d)) for d in diffs_by_task]
    rng = random.Random(SEED)
    ratios = []
    for _ in range(RESAMPLES):
        drawn = rng.choices(units, k=groups)
        ratios.append(math.fsum(total for total, _ in drawn) / sum(size for _, size in drawn))
    ratios.sort()
    low = ratios[math.ceil(0.025 * RESAMPLES) - 1]
    high = ratios[math.ceil(0.975 * RESAMPLES) - 1]
    return (low, high), "paired bootstrap over tasks"


def latest_reports(records: Iterable[Mapping[str, Any]]) -> dict[PairId, Mapping[str, Any]]:
    """The last report of each (task_id, repeat_idx) of a results file's records (headers
    skipped): a resumed run's re-run of a pair replaces the earlier report, as in `summarize`."""
    latest: dict[PairId, Mapping[str, Any]] = {}
    for record in records:
        if record.get("type") != "header":
            latest[(_hashable(record.get("task_id")), _hashable(record.get("repeat_idx")))] = record
    return latest


def _hashable(value: Any) -> Any:
    """A task_id or repeat_idx as a key: itself, or a hand-edited list or object as JSON text
    (as `summarize` pairs them)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


def check_comparable(
    records_a: Iterable[Mapping[str, Any]],
    records_b: Iterable[Mapping[str, Any]],
    *,
    label_a: str = "A",
    label_b: str = "B",
    any_benchmark: bool = False,
) -> None:
    """Raise `NotComparable` when two results files' records are not two runs of one thing:
    their headers name different benchmarks (unless `any_benchmark`), or both hold reports and
    no (task_id, repeat_idx) is in both (runs of different tasks)."""
    records_a, records_b = list(records_a), list(records_b)
    if not any_benchmark:
        name_a, name_b = _benchmark(records_a), _benchmark(records_b)
        if name_a is not None and name_b is not None and name_a != name_b:
            raise NotComparable(
                f"{label_a} is a run of benchmark {name_a} and {label_b} of {name_b}: compare "
                "two runs of one benchmark (--any-benchmark pairs them all the same)"
            )
    latest_a, latest_b = latest_reports(records_a), latest_reports(records_b)
    if latest_a and latest_b and not latest_a.keys() & latest_b.keys():
        raise NotComparable(
            f"{label_a} and {label_b} have no repetition in common (their {len(latest_a)} and "
            f"{len(latest_b)} pairs of task_id and repeat_idx all differ): runs of different tasks"
        )


def _benchmark(records: Iterable[Mapping[str, Any]]) -> str | None:
    """The benchmark the first header with one names, if any."""
    for record in records:
        name = record.get("benchmark") if record.get("type") == "header" else None
        if isinstance(name, str):
            return name
    return None


def pair_order(pair: PairId) -> tuple[str, int, str]:
    """A sort key for pairs that never compares unlike types (ids are what the file holds)."""
    task_id, repeat = pair
    number = repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else -1
    return (str(task_id), number, str(repeat))


def mcnemar(regressed: int, improved: int) -> tuple[float, float]:
    """(exact two-sided p, mid-p) of McNemar's test for `regressed` and `improved` discordant
    pairs (see the module docstring); both 1.0 when there are none."""
    m, k = regressed + improved, min(regressed, improved)
    cdf, point = binomial_half_cdf(m, k)
    return min(1.0, 2 * cdf), min(1.0, 2 * cdf - point)


def binomial_half_cdf(m: int, k: int) -> tuple[float, float]:
    """(P(X ≤ k), P(X = k)) for X ~ Binomial(m, 1/2) and k ≤ m / 2: exact integer sums up to
    `EXACT_TRIALS` trials, beyond in log space from P(X = k) downwards so that a million trials
    neither overflow nor lose the tail."""
    if m <= EXACT_TRIALS:
        return sum(math.comb(m, i) for i in range(k + 1)) / 2**m, math.comb(m, k) / 2**m
    log_point = math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1) - m * math.log(2)
    total = term = 1.0  # relative to P(X = k)
    for i in range(k, 0, -1):
        term *= i / (m - i + 1)  # P(X = i - 1) / P(X = i)
        total += term
        if term < 1e-17 * total:  # the terms only shrink from here on
            break
    point = math.exp(log_point)
    return min(1.0, point * total), point


def difference_interval(diffs: Sequence[float]) -> tuple[tuple[float, float], str]:
    """The 95% interval of the mean of `diffs` (one per pair, at least one) and how it was made:
    a paired bootstrap, or the normal approximation when resampling would cost too much."""
    counts = Counter(diffs)
    n = len(diffs)
    if len(counts) > MAX_DISTINCT and n > MAX_PER_PAIR:
        mean = math.fsum(diffs) / n
        sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
        half = t_critical(n) * sd / math.sqrt(n)
        return (mean - half, mean + half), "normal approximation"
    means = sorted(bootstrap_means(diffs, counts))
    low = means[math.ceil(0.025 * RESAMPLES) - 1]
    high = means[math.ceil(0.975 * RESAMPLES) - 1]
    return (low, high), "paired bootstrap"


def bootstrap_means(diffs: Sequence[float], counts: Mapping[float, int]) -> list[float]:
    """`RESAMPLES` means of `diffs` resampled with replacement, from a `Random(SEED)`: by
    multinomial counts over the distinct values when they are few, else pair by pair."""
    rng = random.Random(SEED)
    n = len(diffs)
    if len(counts) > MAX_DISTINCT:
        return [math.fsum(rng.choices(diffs, k=n)) / n for _ in range(RESAMPLES)]
    values = sorted(counts)  # a fixed order, so the draws do not depend on the records' order
    means = []
    for _ in range(RESAMPLES):
        left, weight_left, total = n, n, 0.0
        for value in values[:-1]:
            drawn = binomial(rng, left, counts[value] / weight_left)
            total += drawn * value
            left -= drawn
            weight_left -= counts[value]
            if not left:
                break
        total += left * values[-1]
        means.append(total / n)
    return means
