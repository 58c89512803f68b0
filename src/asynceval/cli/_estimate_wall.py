"""`asynceval estimate`'s wall time: the sample's repetitions replayed at the run's limits.

`wall_time` projects the run from the templates `_estimate_events` measured: the replay
(`_estimate_replay`) of the run's repetitions, the sample's cold ones first, as measured, then
the pool's (every repetition's warm form) each equally often, in the order the sample started
them (the queue's order: a PriorityQueue's, or the task source's, which the sample keeps): the
point. A
run too long to replay whole (more than `MAX_REPLAYED_ATTEMPTS` attempts) is replayed in part,
and the rest added at the throughput of the replayed part's middle half, never faster than the
rate windows allow. The run's own start and end, as the sample measured them, are added.

Its 95% interval is a bootstrap of the sample: the same projection made from resamples of the
pool (with replacement, of the sample's size), narrowed by the finite-population correction and
widened by `MODEL_ERROR` (the replay's own error against real runs of the examples) in
quadrature.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._estimate_events import Measured
from ._estimate_replay import Limits, Template, rate_floor, replay

MAX_REPLAYED_ATTEMPTS = 100_000
"""The most call attempts the point's replay simulates (about 0.25 s); a longer run is
extrapolated from them."""
MAX_BOOTSTRAP_ATTEMPTS = 10_000
"""The most call attempts one bootstrap replay simulates."""
BOOTSTRAP_REPLAYS = 40
"""How many resamples of the sample make the wall time's interval."""
MODEL_ERROR = 0.05
"""The replay's relative error on a whole run from its own templates (measured on the
examples: within 1-5%), added to the interval."""


@dataclass(frozen=True)
class Projection:
    """A wall time in seconds with its 95% interval."""

    estimate: float
    low: float
    high: float


def _replayed(draw: Sequence[Template], total: int, limits: Limits) -> float:
    """The wall time of `total` repetitions like `draw` (which holds at most that many): the
    replay of `draw`, plus the rest at the throughput of its middle half, and no less than
    the rate windows allow for all of them."""
    ended = replay(draw, limits)
    if not ended:
        return 0.0
    if len(draw) >= total:
        return ended[-1]
    quarter, three = len(ended) // 4, (3 * len(ended)) // 4
    span = ended[three] - ended[quarter]
    rate = (three - quarter) / span if span > 0 else len(ended) / max(ended[-1], 1e-9)
    scale = total / len(draw)
    calls = scale * sum(rep.attempts for rep in draw)
    tokens = scale * sum(rep.attempts * rep.tokens_per_attempt for rep in draw)
    return max(ended[-1] + (total - len(draw)) / rate, rate_floor(calls, tokens, limits))


def _length(reps: Sequence[Template], total: int, most_attempts: int) -> int:
    """How many repetitions a replay simulates: all of them, or as many as `most_attempts`
    allow (at least twice the sample)."""
    attempts = sum(rep.attempts for rep in reps) / max(1, len(reps))
    most = max(2 * len(reps), int(most_attempts / max(attempts, 1.0)))
    return min(total, most)


def _balanced(
    pool: Sequence[Template], size: int, rng: random.Random, cold: Mapping[int, Template]
) -> list[Template]:
    """`size` repetitions: each template of the pool equally often, a cold one once less (its
    cold form is replayed once, first), the remainder drawn at random, in the order the pool's
    repetitions started in the sample (so the replay follows the run's queue: a PriorityQueue's
    slow tasks first, a file's order, a task's repeats one after the other)."""
    share = (size + len(cold)) / len(pool)
    times = [max(0, math.floor(share) - (i in cold)) for i in range(len(pool))]
    left = [i for i in range(len(pool)) if i not in cold or share >= 1]
    more = set(rng.sample(left, min(len(left), max(0, size - sum(times)))))
    return [rep for i, rep in enumerate(pool) for _ in range(times[i] + (i in more))]


def wall_time(
    measured: Measured, total: int, limits: Limits, overhead_s: float, seed: int
) -> Projection:
    """The projected wall time of `total` repetitions from the sample's templates: its cold
    ones once, at the start, then the pool's, each as often as its share of the run says."""
    pool, cold = measured.pool, dict(list(measured.cold.items())[:total])
    if not pool:
        return Projection(overhead_s, overhead_s, overhead_s)
    rng = random.Random(seed)
    n = len(pool)

    def projected(reps: Sequence[Template], most: int, colds: Mapping[int, Template]) -> float:
        rest = max(0, _length(reps, total, most) - len(cold))
        draw = [*cold.values(), *_balanced(reps, rest, rng, colds)]
        return _replayed(draw, total, limits)

    point = projected(pool, MAX_REPLAYED_ATTEMPTS, cold)
    if n >= total:
        low = high = point
    else:  # resamples: a repetition drawn is in its warm form
        base = projected(pool, MAX_BOOTSTRAP_ATTEMPTS, {})
        draws = sorted(
            projected(
                [pool[i] for i in sorted(rng.choices(range(n), k=n))], MAX_BOOTSTRAP_ATTEMPTS, {}
            )
            for _ in range(BOOTSTRAP_REPLAYS)
        )
        shrink = math.sqrt((total - n) / (total - 1))
        below = shrink * max(0.0, base - _quantile(draws, 0.025)) / max(base, 1e-12)
        above = shrink * max(0.0, _quantile(draws, 0.975) - base) / max(base, 1e-12)
        low = point * (1 - math.hypot(below, MODEL_ERROR))
        high = point * (1 + math.hypot(above, MODEL_ERROR))
    return Projection(point + overhead_s, max(0.0, low) + overhead_s, high + overhead_s)


def _quantile(values: Sequence[float], q: float) -> float:
    position = q * (len(values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(values) - 1)
    return values[below] + (values[above] - values[below]) * (position - below)
