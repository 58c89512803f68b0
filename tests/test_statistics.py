"""`asynceval.engine.statistics`: the reducers against values counted by hand, the clustered
standard error against the textbook sandwich formula, and the coverage of the clustered interval
on synthetic runs whose tasks differ (where an interval over repetitions covers far too rarely)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from asynceval.analysis.summary import wilson_interval
from asynceval.engine.statistics import (
    Z_95,
    as_reducer,
    at_least,
    clustered_mean_ci,
    maximum,
    mean,
    median,
    pass_at_k,
    pass_hat_k,
    stratified_half_width,
    task_mean_ci,
)
from asynceval.errors import ConfigError


def subsets_pass_rate(outcomes: list[float], k: int, rule: str) -> float:
    """Over every k-subset of the repetitions: the share where any (rule "any") or all ("all")
    pass: what pass@k and pass^k estimate, counted by brute force."""
    subsets = list(itertools.combinations(outcomes, k))
    test = any if rule == "any" else all
    return sum(test(score >= 0.5 for score in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("outcomes", [[1, 0, 0, 1, 0], [1, 1, 1, 0], [0, 0, 0], [1] * 6])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_pass_at_k_and_pass_hat_k_are_the_shares_of_k_subsets(
    outcomes: list[float], k: int
) -> None:
    assert pass_at_k(k).reduce(outcomes) == pytest.approx(subsets_pass_rate(outcomes, k, "any"))
    assert pass_hat_k(k).reduce(outcomes) == pytest.approx(subsets_pass_rate(outcomes, k, "all"))


def test_counting_reducers_need_k_repetitions_and_pass_at_half_a_score() -> None:
    assert pass_at_k(5).reduce([1, 1, 1]) is None
    assert pass_hat_k(4).reduce([1, 1, 1]) is None
    assert at_least(2).reduce([1]) is None
    assert at_least(2).reduce([1, 0.5, 0]) == 1.0  # 0.5 counts as a pass
    assert at_least(2).reduce([1, 0.4, 0]) == 0.0
    assert pass_at_k(1).reduce([1, 0, 0, 0]) == pytest.approx(0.25)


def test_plain_reducers() -> None:
    assert mean.reduce([1, 0, 0.5]) == pytest.approx(0.5)
    assert median.reduce([1, 0, 0, 0.25]) == pytest.approx(0.125)
    assert maximum.reduce([0, 0.25]) == 0.25 and maximum.name == "max"
    assert mean.reduce([]) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [("mean", "mean"), ("max", "max"), ("median", "median"), ("pass_at_k(5)", "pass_at_k(5)"),
     (" pass_hat_k( 3 )", "pass_hat_k(3)"), ("at_least(2)", "at_least(2)")],
)  # fmt: skip
def test_names_give_their_reducers(name: str, expected: str) -> None:
    reducer = as_reducer(name)
    assert reducer.name == expected and as_reducer(reducer) is reducer


@pytest.mark.parametrize("name", ["mode", "pass_at_k", "pass_at_k(0)", "pass@5", "at_least(x)", ""])
def test_a_bad_name_is_a_config_error_on_one_line(name: str) -> None:
    with pytest.raises(ConfigError) as raised:
        as_reducer(name)
    message = str(raised.value)
    assert "\n" not in message and ("pass_at_k(K)" in message or "k must be" in message)


def textbook_cr1_se(clusters: list[list[float]]) -> float:
    """The CR1 cluster-robust standard error of the intercept of y regressed on a constant:
    V = (X'X)^-1 (sum_g X_g' e_g e_g' X_g) (X'X)^-1 * G/(G-1) * (N-1)/(N-K), K = 1, X = 1."""
    ys = [y for cluster in clusters for y in cluster]
    n, g, k = len(ys), len(clusters), 1
    beta = sum(ys) / n  # (X'X)^-1 X'y
    bread = 1 / n  # (X'X)^-1
    meat = 0.0
    for cluster in clusters:
        score = sum(y - beta for y in cluster)  # X_g' e_g
        meat += score * score
    correction = g / (g - 1) * (n - 1) / (n - k)
    return math.sqrt(bread * meat * bread * correction)


def test_the_clustered_se_is_the_textbook_cr1() -> None:
    rng = random.Random(7)
    clusters = [[float(rng.random() < p) for _ in range(rng.randint(1, 9))] for p in
                [rng.random() for _ in range(25)]]  # fmt: skip
    mean_value, low, high, se = clustered_mean_ci(clusters)
    assert se == pytest.approx(textbook_cr1_se(clusters), rel=1e-12)
    assert mean_value == pytest.approx(sum(map(sum, clusters)) / sum(map(len, clusters)))
    t_24 = 2.0638985616280205  # Student's t, 97.5% quantile, 24 degrees of freedom (25 tasks)
    assert (low, high) == pytest.approx((mean_value - t_24 * se, mean_value + t_24 * se))


def test_with_one_value_per_task_the_clustered_se_is_the_task_mean_se() -> None:
    values = [0.0, 1.0, 1.0, 0.5, 0.25, 1.0]
    _, _, _, clustered = clustered_mean_ci([[v] for v in values])
    _, _, _, per_task = task_mean_ci(values)
    assert clustered == pytest.approx(per_task)


def test_one_task_has_no_interval() -> None:
    assert clustered_mean_ci([[1.0, 0.0]])[1:] == (0.0, 1.0, math.inf)


def test_the_stratified_half_width_is_its_formula_and_never_zero() -> None:
    tasks = [(3, 4), (0, 2), (5, 5)]
    posterior = [(3 + 1) / 6, (0 + 1) / 4, (5 + 1) / 7]
    variance = sum(p * (1 - p) / n for p, (_, n) in zip(posterior, tasks, strict=True))
    assert stratified_half_width(tasks) == pytest.approx(Z_95 * math.sqrt(variance) / 3)
    assert stratified_half_width([(2, 2), (0, 2)]) > 0  # identical outcomes: not a variance of 0
    assert stratified_half_width([(1, 1)], prior=(0.5, 0.5), z=1.0) == pytest.approx(
        math.sqrt(0.75 * 0.25)
    )
    assert stratified_half_width([]) == math.inf
    assert stratified_half_width([(0, 0)]) == math.inf


def coverage(replications: int, seed: int = 26) -> tuple[float, float]:
    """(clustered coverage, Wilson-over-repetitions coverage) of the true pass rate (0.5, the
    mean of Beta(0.5, 0.5)) on runs of 40 tasks, p ~ Beta(0.5, 0.5), 8 repeats each."""
    rng = random.Random(seed)
    clustered = wilson = 0
    for _ in range(replications):
        runs = []
        for _ in range(40):
            p = rng.betavariate(0.5, 0.5)
            runs.append([1.0 if rng.random() < p else 0.0 for _ in range(8)])
        _, low, high, _ = clustered_mean_ci(runs)
        clustered += low <= 0.5 <= high
        passed = sum(map(sum, runs))
        w_low, w_high = wilson_interval(passed, 320)
        wilson += w_low <= 0.5 <= w_high
    return clustered / replications, wilson / replications


def test_the_clustered_interval_covers_the_true_pass_rate_95_percent_of_the_time() -> None:
    """4,000 synthetic runs where tasks differ: the clustered interval covers 0.5 within 93-97%;
    the Wilson interval over the 320 repetitions, as if they were independent, far less."""
    clustered, wilson = coverage(4000)
    print(f"coverage: clustered {clustered:.3f}, Wilson over repetitions {wilson:.3f}")
    assert 0.93 <= clustered <= 0.97
    assert wilson < 0.75
