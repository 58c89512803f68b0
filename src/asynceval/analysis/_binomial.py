"""Binomial draws for the paired bootstrap of `asynceval compare` (`analysis.compare`): one
draw in about constant time whatever n, from a given `random.Random`, so that a resample costs
the same for 100 tasks as for 100,000 and the interval is the same on every Python."""

from __future__ import annotations

import math
import random


def binomial(rng: random.Random, n: int, p: float) -> int:
    """A Binomial(n, p) draw in about constant time (Python 3.11 has no `binomialvariate`, and
    using 3.12's where there is one would make the interval differ between Pythons): Devroye's
    geometric method when n·p < 10, else Hörmann's BTRS transformed rejection."""
    if p <= 0.0 or n <= 0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    if n * p < 10.0:
        drawn = position = 0
        log_q = math.log(1.0 - p)
        while True:  # the gaps between successes are geometric
            position += math.floor(math.log(1.0 - rng.random()) / log_q) + 1
            if position > n:
                return drawn
            drawn += 1
    return _btrs(rng, n, p)


def _btrs(rng: random.Random, n: int, p: float) -> int:
    """Hörmann (1993), "The generation of binomial random variates", algorithm BTRS, for
    n·p ≥ 10 and p ≤ 1/2."""
    spq = math.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    log_odds = math.log(p / (1.0 - p))
    mode = math.floor((n + 1) * p)
    h = math.lgamma(mode + 1) + math.lgamma(n - mode + 1)
    while True:
        u = rng.random() - 0.5
        v = rng.random()
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c) if us > 0 else -1
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k  # the squeeze: accepted without a log
        v *= alpha / (a / (us * us) + b)
        if (
            v > 0
            and math.log(v)
            <= h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - mode) * log_odds
        ):
            return k
