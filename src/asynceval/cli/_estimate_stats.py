"""`asynceval estimate`'s totals: a per-repetition quantity of the sample projected onto the run.

The sample is a simple random sample, without replacement, of n of the run's N repetitions, so
the run's total of a quantity (calls, tokens, cost) is estimated by N times the sample's mean,
and its standard error is N s / sqrt(n) times the finite-population correction
sqrt((N - n) / (N - 1)), s being the sample's standard deviation: 0 when the sample is the whole
run, so the interval collapses to the total measured. The 95% interval uses Student's t with
n - 1 degrees of freedom (a sample of 20 is not large enough for the normal quantile), and is
never below what the sample itself measured (the sample is part of the run: no quantity here is
negative).

Two cases where that interval would claim more than the sample can know:

- every sampled repetition measured the same (`Total.uniform`): the interval has no width, yet
  says nothing of the repetitions unlike those drawn. It is flagged, and the estimate says so.
- the run holds tasks whose queries are far larger (or smaller) than any sampled one (more than
  `UNLIKE` times the sample's largest, or less than its smallest over `UNLIKE`): the sample holds
  no task like them. Every task's query size is known without running it, so the interval is
  widened to hold the ratio estimate on query size (the sample's total per query character
  times the run's characters): what the run would use if its cost grew in proportion to its
  prompts, against the plain estimate, as if it did not grow at all. A prompt's fixed part (a
  system prompt, the answer) makes the truth lie between the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

UNLIKE = 2.0
"""How many times larger (or smaller) than every sampled query a task's query must be for the
sample to hold no task like it."""

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
    """A projected total with its 95% interval; `uniform` when every sampled repetition
    measured the same (the interval then says nothing of repetitions unlike them), `unlike`
    when the interval was widened for tasks unlike every sampled one (see the module)."""

    estimate: float
    low: float
    high: float
    uniform: bool = False
    unlike: bool = False

    def as_dict(self) -> dict[str, float | bool]:
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "uniform": self.uniform,
            "unlike": self.unlike,
        }


@dataclass(frozen=True)
class QuerySizes:
    """Query sizes: of each sampled repetition's task (`sample`, in the order of the values),
    and over the whole run's repetitions (`total`, `least`, `most`)."""

    sample: Sequence[float]
    total: float
    least: float
    most: float


def project(values: Sequence[float], population: int, sizes: QuerySizes | None = None) -> Total:
    """The total over `population` repetitions of a quantity measured as `values` on a simple
    random sample of them (without replacement); `sizes` widens the interval for tasks unlike
    every sampled one."""
    n = len(values)
    if n == 0:
        raise ValueError("no repetition in the sample")
    observed = math.fsum(values)
    mean = observed / n
    total = observed if n >= population else population * mean
    if n >= population:
        return Total(total, total, total)
    uniform = all(v == values[0] for v in values)
    if n == 1:
        half = math.inf
    else:
        variance = sum((v - mean) ** 2 for v in values) / (n - 1)
        fpc = math.sqrt((population - n) / (population - 1))
        half = t_975(n - 1) * population * math.sqrt(variance / n) * fpc
    low, high = max(observed, total - half), total + half
    unlike = sizes is not None and _unlike(sizes)
    if sizes is not None and unlike and math.fsum(sizes.sample) > 0:
        ratio = observed / math.fsum(sizes.sample) * sizes.total
        low, high = max(observed, min(low, ratio)), max(high, ratio)
    return Total(total, low, high, uniform=uniform and n > 1, unlike=unlike)


def _unlike(sizes: QuerySizes) -> bool:
    """Whether the run holds queries far larger or far smaller than every sampled one."""
    if not sizes.sample:
        return False
    return sizes.most > UNLIKE * max(sizes.sample) or sizes.least * UNLIKE < min(sizes.sample)
