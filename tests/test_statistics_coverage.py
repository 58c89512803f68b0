"""Intervals from few tasks: Student's t quantile against printed tables, the coverage of the
clustered interval at 3, 5 and 10 tasks (with z = 1.96 it covered 78%, 88% and 92%), and an
all-pass or all-fail run's interval, which is one-sided and never zero-width."""

from __future__ import annotations

import math
import random

import pytest

from asynceval.engine.statistics import Z_95, clustered_mean_ci, task_mean_ci

# Student's t quantiles, from a printed table (Abramowitz and Stegun, table 26.10).
T_TABLE = [
    (0.975, 1, 12.7062047362),
    (0.975, 2, 4.3026527297),
    (0.975, 3, 3.1824463053),
    (0.975, 4, 2.7764451052),
    (0.975, 9, 2.2621571628),
    (0.975, 29, 2.0452296421),
    (0.975, 120, 1.9799304050),
    (0.995, 5, 4.0321429836),
    (0.9, 10, 1.3721836411),
    (0.6, 5, 0.2671808657),
]


@pytest.mark.parametrize(("p", "df", "expected"), T_TABLE)
def test_t_quantile_matches_the_table(p: float, df: int, expected: float) -> None:
    from asynceval.engine.statistics import t_cdf, t_quantile

    assert t_quantile(p, df) == pytest.approx(expected, rel=1e-9)
    assert t_quantile(1 - p, df) == pytest.approx(-expected, rel=1e-9)
    assert t_cdf(expected, df) == pytest.approx(p, rel=1e-9)
    assert t_quantile(0.975, math.inf) == pytest.approx(Z_95, rel=1e-12)
    z = Z_95
    for many in (1e4, 1e6, 1e9, 1e15):  # near the normal limit: the Cornish-Fisher expansion
        expansion = z + (z**3 + z) / (4 * many) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * many**2)
        assert t_quantile(0.975, many) == pytest.approx(expansion, abs=1e-8)


def test_t_quantile_refuses_what_has_no_quantile() -> None:
    from asynceval.engine.statistics import t_quantile

    for p, df in [(0.0, 3.0), (1.0, 3.0), (0.5, 0.0)]:
        with pytest.raises(ValueError, match="t_quantile"):
            t_quantile(p, df)


def covered(groups: int, runs: int, rng: random.Random) -> float:
    """The share of `runs` synthetic runs (`groups` tasks, each with a pass rate drawn from
    U(0, 1) and 5 repetitions) whose clustered interval holds the population rate, 0.5."""
    hits = 0
    for _ in range(runs):
        rates = [rng.random() for _ in range(groups)]
        tasks = [[1.0 if rng.random() < p else 0.0 for _ in range(5)] for p in rates]
        _, low, high, _ = clustered_mean_ci(tasks)
        hits += low <= 0.5 <= high
    return hits / runs


@pytest.mark.parametrize("groups", [3, 5, 10])
def test_the_clustered_interval_covers_95_percent_with_few_tasks(groups: int) -> None:
    """3,000 seeded runs per task count (a Monte Carlo error of 0.4 points): within 2 points."""
    share = covered(groups, 3000, random.Random(1000 + groups))
    print(f"{groups} tasks: coverage {share:.3f}")
    assert 0.93 <= share <= 0.97


def test_an_all_pass_run_has_a_one_sided_interval_not_a_zero_width_one() -> None:
    """30 tasks x 2 repetitions, all passed: Wilson's over the 30 tasks, G/(G+z^2) to 100%."""
    rate, low, high, _ = clustered_mean_ci([[1.0, 1.0]] * 30)
    assert (rate, high) == (1.0, 1.0)
    assert low == pytest.approx(30 / (30 + Z_95**2)) and 0.88 < low < 0.89
    rate, low, high, _ = clustered_mean_ci([[0.0, 0.0, 0.0]] * 10)
    assert (rate, low) == (0.0, 0.0) and high == pytest.approx(Z_95**2 / (10 + Z_95**2))
    value, low, high, _ = task_mean_ci([1.0] * 8)
    assert (value, high) == (1.0, 1.0) and low == pytest.approx(8 / (8 + Z_95**2))


def test_tasks_with_the_same_mean_get_wilsons_interval_over_tasks() -> None:
    """Every task 1 of 2: the clustered standard error is 0, the interval is not."""
    rate, low, high, se = clustered_mean_ci([[1.0, 0.0]] * 20)
    assert rate == 0.5 and se == 0.0
    centre, half = 0.5, Z_95 * math.sqrt(0.25 / 20 + Z_95**2 / 1600) / (1 + Z_95**2 / 20)
    assert (low, high) == pytest.approx((centre - half, centre + half))
