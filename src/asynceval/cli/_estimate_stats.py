"""`asynceval estimate`'s totals: a per-repetition quantity of the sample projected onto the run.

The sample is a simple random sample, without replacement, of n of the run's N repetitions, so
the run's total of a quantity (calls, tokens, cost) is estimated by N times the sample's mean,
and its standard error is N s / sqrt(n) times the finite-population correction
sqrt((N - n) / (N - 1)), s being the sample's standard deviation: 0 when the sample is the whole
run, so the interval collapses to the total measured. The 95% interval uses Student's t with
n - 1 degrees of freedom (a sample of 20 is not large enough for the normal quantile), and is
cut at 0 below (no quantity here is negative).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
"""Student's t 97.5% quantiles for 1 to 30 degrees of freedom."""
_Z_975 = 1.959964


def t_975(df: int) -> float:
    """Student's t 97.5% quantile for `df` >= 1 degrees of freedom (a table up to 30, then the
    Cornish-Fisher expansion, within 0.001 of the exact value)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T_975):
        return _T_975[df - 1]
    z = _Z_975
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


@dataclass(frozen=True)
class Total:
    """A projected total with its 95% interval."""

    estimate: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def project(values: Sequence[float], population: int) -> Total:
    """The total over `population` repetitions of a quantity measured as `values` on a simple
    random sample of them (without replacement)."""
    n = len(values)
    if n == 0:
        raise ValueError("no repetition in the sample")
    mean = math.fsum(values) / n
    total = math.fsum(values) if n == population else population * mean
    if n >= population or n == 1:
        half = 0.0 if n >= population else math.inf
        return Total(total, max(0.0, total - half), total + half)
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    fpc = math.sqrt((population - n) / (population - 1))
    half = t_975(n - 1) * population * math.sqrt(variance / n) * fpc
    return Total(total, max(0.0, total - half), total + half)
