"""The statistics of a run's scores: reducers over a task's repetitions and intervals that treat
tasks as clusters. Pure math on floats, standard library only, so that both the engine (adaptive
repeats) and the analysis (report, view, compare) import it.

Repetitions of one task share its difficulty, so they are not independent draws: an interval that
treats the N repetitions of a run as N independent trials is too narrow whenever tasks differ. Here:

- `clustered_mean_ci`: the mean over repetitions with a cluster-robust standard error, tasks as
  clusters (CR1: the sandwich estimator with the small-sample factor G/(G-1), G the number of
  tasks).
- `task_mean_ci`: the mean over tasks of one value per task (a task's pass rate, a reducer's
  value) with the standard error of that mean, sd/sqrt(G): the clustered interval when each
  cluster is one value.
- Both intervals are mean ± t·se with t the 97.5% quantile of Student's t with G-1 degrees of
  freedom (`t_quantile`): with few tasks the normal 1.96 covers far less than 95% (about 78% at
  3 tasks). When the standard error is 0 (every task passed, every task failed, or every task
  has the same mean), the interval is Wilson's over the G tasks (`wilson_interval(mean·G, G)`):
  one-sided at an all-pass or all-fail result (G/(G+z²) to 100%, or 0% to z²/(G+z²)), never
  zero-width.
- `stratified_half_width`: the part of the uncertainty that more repetitions narrow, the 95%
  half-width of the pass rate over *this* task set, stratified by task, each task's variance taken
  from its posterior mean under a Beta prior, so that a task with a few identical outcomes never
  has variance 0.

Reducers turn a task's repetition scores into one value: `mean`, `median`, `maximum` (named
"max"), `pass_at_k(k)`, `pass_hat_k(k)` and `at_least(k)`. For the counting reducers a repetition
*passes* when its score is at least `PASS_THRESHOLD` (0.5): with pass/fail evaluators, when it
passed.
"""

from __future__ import annotations

import functools
import math
import re
import statistics as _stdlib_statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

from ..errors import ConfigError

Z_95 = 1.959963984540054
CONFIDENCE = 0.95  # of every interval here: two-sided, 2.5% in each tail
NORMAL_DF = 1e7  # t_quantile: beyond this many degrees of freedom, the normal quantile
ZERO_SE = 1e-12  # a standard error at or below this is 0 (float noise of identical values)
PASS_THRESHOLD = 0.5  # a repetition whose score is at least this counts as a pass (pass@k, ...)


@dataclass(frozen=True)
class Reducer:
    """A named rule that turns one task's repetition scores into one value (None when the task has
    too few repetitions for it, as pass_at_k(5) with 3)."""

    name: str
    function: Callable[[Sequence[float]], float | None] = field(repr=False, compare=False)

    def reduce(self, outcomes: Sequence[float]) -> float | None:
        """The task's value from its repetition scores (in [0, 1]); None without enough of them."""
        if not outcomes:
            return None
        return self.function(outcomes)


def _passes(outcomes: Sequence[float]) -> int:
    return sum(1 for score in outcomes if score >= PASS_THRESHOLD)


def _mean(outcomes: Sequence[float]) -> float:
    return math.fsum(outcomes) / len(outcomes)


def _median(outcomes: Sequence[float]) -> float:
    return float(_stdlib_statistics.median(outcomes))


def _max(outcomes: Sequence[float]) -> float:
    return float(max(outcomes))


mean = Reducer("mean", _mean)
"""The mean score of the task's repetitions (the default)."""
median = Reducer("median", _median)
"""The median score of the task's repetitions."""
maximum = Reducer("max", _max)
"""The best score of the task's repetitions (named "max")."""


def _check_k(k: int, name: str) -> int:
    if type(k) is not int or k < 1:
        raise ConfigError(f"{name}: k must be a whole number >= 1, got {k!r}")
    return k


def pass_at_k(k: int) -> Reducer:
    """The chance that at least one of k repetitions drawn without replacement from the task's n
    passes: the unbiased estimator 1 - C(n-c, k)/C(n, k) (Chen et al., 2021), c the passes;
    None when n < k."""
    _check_k(k, "pass_at_k")

    def reduce(outcomes: Sequence[float]) -> float | None:
        n, c = len(outcomes), _passes(outcomes)
        if n < k:
            return None
        return 1.0 - math.comb(n - c, k) / math.comb(n, k)

    return Reducer(f"pass_at_k({k})", reduce)


def pass_hat_k(k: int) -> Reducer:
    """The chance that all of k repetitions drawn without replacement pass (pass^k): C(c, k)/C(n, k);
    None when n < k."""
    _check_k(k, "pass_hat_k")

    def reduce(outcomes: Sequence[float]) -> float | None:
        n, c = len(outcomes), _passes(outcomes)
        if n < k:
            return None
        return math.comb(c, k) / math.comb(n, k)

    return Reducer(f"pass_hat_k({k})", reduce)


def at_least(k: int) -> Reducer:
    """1 when at least k of the task's repetitions pass, else 0; None when it has fewer than k."""
    _check_k(k, "at_least")

    def reduce(outcomes: Sequence[float]) -> float | None:
        if len(outcomes) < k:
            return None
        return 1.0 if _passes(outcomes) >= k else 0.0

    return Reducer(f"at_least({k})", reduce)


_PLAIN = {"mean": mean, "median": median, "max": maximum}
_FACTORIES: dict[str, Callable[[int], Reducer]] = {
    "pass_at_k": pass_at_k,
    "pass_hat_k": pass_hat_k,
    "at_least": at_least,
}
_CALL = re.compile(r"^([a-z_]+)\((\d+)\)$")
REDUCER_NAMES = "mean, median, max, pass_at_k(K), pass_hat_k(K), at_least(K)"


def as_reducer(value: Reducer | str) -> Reducer:
    """`value` itself, or the reducer a name stands for: "mean", "median", "max", "pass_at_k(5)",
    "pass_hat_k(5)", "at_least(3)". A bad name raises ConfigError."""
    if isinstance(value, Reducer):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"reducer: expected a name or a Reducer, got {value!r}")
    text = value.strip().replace(" ", "")
    if text in _PLAIN:
        return _PLAIN[text]
    match = _CALL.match(text)
    if match and match.group(1) in _FACTORIES:
        return _FACTORIES[match.group(1)](int(match.group(2)))
    raise ConfigError(f"reducer: unknown {value!r}; expected one of {REDUCER_NAMES}")


def reduce_tasks(reducer: Reducer, values_by_task: Sequence[Sequence[float]]) -> list[float]:
    """The reducer's value for each task that has one (tasks with too few repetitions left out)."""
    reduced = (reducer.reduce(values) for values in values_by_task)
    return [value for value in reduced if value is not None]


def stratified_half_width(
    tasks: Sequence[tuple[float, int]],
    *,
    prior: tuple[float, float] = (1.0, 1.0),
    z: float = Z_95,
) -> float:
    """The 95% half-width of the pass rate over this task set from each task's (passes,
    repetitions), stratified by task: z * sqrt(sum_i p_i (1 - p_i) / n_i) / T, p_i the posterior
    mean (passes + a) / (repetitions + a + b) under a Beta(a, b) `prior`, so that a few identical
    outcomes never give a variance of 0. Infinite when there is no task or a task has no repetition.
    """
    a, b = prior
    if not tasks:
        return math.inf
    total = 0.0
    for passes, repetitions in tasks:
        if repetitions <= 0:
            return math.inf
        p = (passes + a) / (repetitions + a + b)
        total += p * (1.0 - p) / repetitions
    return z * math.sqrt(total) / len(tasks)


def wilson_interval(passed: float, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for `passed` successes out of `total` (0..1 bounds); (0, 1)
    when `total` is 0. At 0 or `total` passes it is one-sided: 0 to z²/(total+z²), or
    total/(total+z²) to 1."""
    if total <= 0:
        return (0.0, 1.0)
    p = passed / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(max(0.0, p * (1 - p)) / total + z * z / (4 * total * total))
    low = 0.0 if p <= 0.0 else max(0.0, centre - half / denominator)
    high = 1.0 if p >= 1.0 else min(1.0, centre + half / denominator)
    return (low, high)


def _regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, by its continued fraction (modified
    Lentz), used on the side where it converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _regularized_beta(b, a, 1.0 - x)
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 1000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * fraction / a


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` > 0 degrees of freedom."""
    tail = 0.5 * _regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The `p` quantile of Student's t with `df` degrees of freedom (0 < p < 1), to about 1e-12:
    the root of `t_cdf` found by bisection; the normal quantile when `df` is infinite. At
    p = 0.975: 12.706 (df 1), 4.303 (2), 2.776 (4), 2.262 (9), 2.045 (29), 1.960 (inf).
    Above `NORMAL_DF` degrees of freedom it is the normal quantile (they differ by less than
    3e-7 there, and the beta function's logarithms lose more than that)."""
    if not 0.0 < p < 1.0 or not df > 0:
        raise ValueError(f"t_quantile: needs 0 < p < 1 and df > 0, got p={p!r}, df={df!r}")
    if df > NORMAL_DF:
        return NormalDist().inv_cdf(p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        low, high = (middle, high) if t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2.0


def t_critical(groups: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided critical value of an interval from `groups` clusters (at least 2): the
    (1 + confidence)/2 quantile of t with groups - 1 degrees of freedom."""
    return t_quantile((1.0 + confidence) / 2.0, float(groups - 1))


def _interval(mean_value: float, se: float, groups: int) -> tuple[float, float]:
    """mean ± t·se clipped to [0, 1], or, when se is 0, Wilson's interval over the groups."""
    if se <= ZERO_SE:
        return wilson_interval(min(1.0, max(0.0, mean_value)) * groups, groups)
    half = t_critical(groups) * se
    return (max(0.0, mean_value - half), min(1.0, mean_value + half))


def clustered_mean_ci(
    values_by_task: Sequence[Sequence[float]],
) -> tuple[float, float, float, float]:
    """(mean, low, high, se): the mean over all repetitions with a cluster-robust standard error,
    tasks as clusters, CR1: se^2 = G/(G-1) * sum_g (sum_j (y_gj - mean))^2 / N^2 (G tasks with at
    least one value, N values). The interval is mean ± t·se, t with G-1 degrees of freedom,
    clipped to [0, 1] (scores); with se 0, Wilson's over the G tasks (never zero-width). With one
    task the se is infinite and the interval [0, 1]; with no value, mean is NaN."""
    clusters = [values for values in values_by_task if len(values) > 0]
    n = sum(len(values) for values in clusters)
    if n == 0:
        return (math.nan, 0.0, 1.0, math.inf)
    mean_value = math.fsum(math.fsum(values) for values in clusters) / n
    groups = len(clusters)
    if groups < 2:
        return (mean_value, 0.0, 1.0, math.inf)
    meat = math.fsum(math.fsum(v - mean_value for v in values) ** 2 for values in clusters)
    se = math.sqrt(groups / (groups - 1) * meat) / n
    return (mean_value, *_interval(mean_value, se, groups), se)


def task_mean_ci(values: Sequence[float]) -> tuple[float, float, float, float]:
    """(mean, low, high, se): the mean of one value per task, se = sd / sqrt(G) (sd with G-1): the
    clustered interval when each task gives one value (a task's pass rate, a reducer's value).
    mean ± t·se with G-1 degrees of freedom, clipped to [0, 1]; with se 0, Wilson's over the G
    tasks. One task: [0, 1] and an infinite se; none: a NaN mean."""
    groups = len(values)
    if groups == 0:
        return (math.nan, 0.0, 1.0, math.inf)
    mean_value = math.fsum(values) / groups
    if groups < 2:
        return (mean_value, 0.0, 1.0, math.inf)
    variance = math.fsum((v - mean_value) ** 2 for v in values) / (groups - 1)
    se = math.sqrt(variance / groups)
    return (mean_value, *_interval(mean_value, se, groups), se)


def between_tasks_dominates(clustered_half: float, stratified_half: float) -> bool:
    """True when the between-task part of a clustered half-width is larger than the part that
    repeats narrow (the stratified half-width): squared, clustered^2 - stratified^2 > stratified^2.
    Then more tasks, not more repeats, narrow the interval."""
    if not (math.isfinite(clustered_half) and math.isfinite(stratified_half)):
        return False
    return clustered_half**2 - stratified_half**2 > stratified_half**2
