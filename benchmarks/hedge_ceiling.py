"""What any hedger could do with the latencies of benchmarks/hedge.py: the ceiling to judge it by.

No engine, no provider: draws of the same lognormal latency (median 50 ms, sigma 1.29, p99 about
20 times the median) for rounds of N calls (400), and for each call a second independent draw
(its hedge's latency). An ideal hedger knows the true p95 from the start and sends each call
still out at the p95 once more at that moment: a call takes min(first, p95 + hedge). With a
budget, a hedge goes only while hedges <= budget x calls so far (a call the budget refuses is not
hedged: the real hedger waits for the budget and hedges it later, a little better). Printed: the
median over the rounds of the p99 cut, and the cut of all rounds' calls pooled.

    python benchmarks/hedge_ceiling.py                 # 300 rounds of 400 calls
    python benchmarks/hedge_ceiling.py --budget 0.1
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Sequence

Z95 = statistics.NormalDist().inv_cdf(0.95)


def p99(values: Sequence[float]) -> float:
    """Nearest rank, as benchmarks/hedge.py takes it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def one_round(
    draw: random.Random, args: argparse.Namespace, budget: float | None
) -> tuple[list[float], list[float]]:
    """(latencies without hedging, with the ideal hedger) of one round."""
    delay = args.median * math.exp(Z95 * args.sigma)  # the true p95
    off: list[float] = []
    on: list[float] = []
    hedges = 0
    for index in range(args.calls):
        first = draw.lognormvariate(math.log(args.median), args.sigma)
        hedge = draw.lognormvariate(math.log(args.median), args.sigma)
        off.append(first)
        took = first
        if first > delay and (budget is None or hedges + 1 <= budget * (index + 1)):
            hedges += 1
            took = min(first, delay + hedge)
        on.append(took)
    return off, on


def main(args: argparse.Namespace) -> None:
    print(
        f"{args.rounds} rounds of {args.calls} calls, lognormal (median {args.median * 1000:.0f} "
        f"ms, sigma {args.sigma}), hedged at the true p95"
    )
    for budget in (None, args.budget):
        draw = random.Random(args.seed)
        cuts: list[float] = []
        pooled_off: list[float] = []
        pooled_on: list[float] = []
        for _ in range(args.rounds):
            off, on = one_round(draw, args, budget)
            cuts.append(1 - p99(on) / p99(off))
            pooled_off += off
            pooled_on += on
        label = "no budget" if budget is None else f"budget {budget:.0%}"
        print(
            f"  {label:<11} p99 cut: median of rounds {statistics.median(cuts):.1%}, all calls "
            f"{1 - p99(pooled_on) / p99(pooled_off):.1%}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--median", type=float, default=0.05)
    parser.add_argument("--sigma", type=float, default=1.29)
    parser.add_argument("--budget", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    main(parser.parse_args())
